#!/usr/bin/env python3
"""Per-message callgrind tables from two runs of one scenario.

    cg_table.py SMALL.cg LARGE.cg MESSAGES [--top K] [--match SUBSTR]

SMALL and LARGE are callgrind outputs of the same scenario run with a
small and a large message count (MESSAGES is the difference), so that
setup and the first message's allocations cancel: every figure printed is
(LARGE - SMALL) / MESSAGES, exact for a loop whose messages all take the
same path. Prints the total per message, then four tables: functions by
inclusive and by self cost, and source lines by inclusive and by self
cost (a line's inclusive cost adds the calls made from it; code inlined
from another file counts at that file's line). Only files whose path
contains --match (default: this checkout) are listed in the line tables.

Reads callgrind's format directly (name and position compression
included), so no tool beyond python3 is needed.
"""
import collections, os, re, sys


def parse(path):
    """(total, fn_self, fn_incl, line_self, line_incl) of one output."""
    names = {"fl": {}, "fn": {}}
    fn_self = collections.Counter()
    fn_incl = collections.Counter()
    line_self = collections.Counter()
    line_incl = collections.Counter()
    total = 0
    fl = fi = fn = None
    last = 0  # last position, for relative positions
    pending_call = False

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        table = names["fn" if kind == "fn" else "fl"]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), "?")

    def pos(tok):
        nonlocal last
        if tok == "*":
            return last
        if tok[0] in "+-":
            last = last + int(tok)
        else:
            last = int(tok)
        return last

    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                at = pos(parts[0])
                cost = int(parts[1]) if len(parts) > 1 else 0
                where = (fi or fl, at)
                if pending_call:
                    fn_incl[fn] += cost
                    line_incl[where] += cost
                    pending_call = False
                else:
                    total += cost
                    fn_self[fn] += cost
                    fn_incl[fn] += cost
                    line_self[where] += cost
                    line_incl[where] += cost
                continue
            key, _, val = line.partition("=")
            if key == "fl":
                fl = name("fl", val)
                fi = None
            elif key in ("fi", "fe"):
                fi = name("fl", val)
                if fi == fl:
                    fi = None
            elif key == "fn":
                fn = name("fn", val)
                fi = None
            elif key in ("cfl", "cfi"):
                name("fl", val)
            elif key == "cfn":
                name("fn", val)
            elif key == "calls":
                pending_call = True
    return total, fn_self, fn_incl, line_self, line_incl


def diff(a, b, n):
    return {k: (b[k] - a.get(k, 0)) / n for k in b if b[k] - a.get(k, 0) != 0}


_sources = {}


def source(path, line):
    if path not in _sources:
        try:
            with open(path) as f:
                _sources[path] = f.read().split("\n")
        except OSError:
            _sources[path] = []
    lines = _sources[path]
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def short(path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.relpath(path, root) if path.startswith(root) else path


def main():
    args = sys.argv[1:]
    top, match = 15, None
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i : i + 2]
    if "--match" in args:
        i = args.index("--match")
        match = args[i + 1]
        del args[i : i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    small, large, n = parse(args[0]), parse(args[1]), int(args[2])
    if match is None:
        match = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    total = (large[0] - small[0]) / n
    print(f"total {total:.1f} instructions per message")
    for title, i in (("functions, inclusive", 2), ("functions, self", 1)):
        d = diff(small[i], large[i], n)
        # The frames around the measured function (main, the runtime)
        # hold all of it and say nothing.
        d = {k: v for k, v in d.items() if v < total or "message" in k}
        print(f"\n{title} (instructions per message):")
        for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {v:8.1f}  {k}")
    for title, i in (("lines, inclusive", 4), ("lines, self", 3)):
        d = diff(small[i], large[i], n)
        rows = [(v, k) for k, v in d.items() if k[0] and match in k[0]]
        print(f"\n{title} (instructions per message):")
        for v, (path, line) in sorted(rows, key=lambda r: -r[0])[:top]:
            print(f"  {v:8.1f}  {short(path)}:{line}  {source(path, line)[:70]}")


if __name__ == "__main__":
    main()
