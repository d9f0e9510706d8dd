"""What ci/bench/tcp, ci/bench/ucx and ci/bench/ofi share: building the
release binary, running ovbench and the peer tools (ucx_perftest,
fi_pingpong) with each process on its own core, alternating runs, medians,
and the `ratio ...` lines (the median of per-run ratios) with both command
lines.

Conventions (docs/architecture.md, Conventions): ovbench's ranks are pinned by its
launcher to cores 0 and 1, the peer tool's two processes by taskset to the
same cores; the same sizes, iterations and warm-up on both sides (where
the peer has a warm-up option); latency headline p50 against
ucx_perftest's typical column, means against fi_pingpong, which prints
only a mean.
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Where cargo puts its output: CARGO_TARGET_DIR when set (cargo honours it
# for the build below), else the workspace's target/.
TARGET = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))
# The binary the runs use: a private copy made by build(), so that another
# build into the shared target directory (other features) cannot swap it
# mid-run.
OVBENCH = os.path.join(TARGET, "release/ovbench")
_COPY = tempfile.TemporaryDirectory(prefix="ovbench-bench-")


def sh(cmd, env=None, timeout=300):
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def build(features=None, skip=False):
    """Build the release binary with the given cargo features (unless
    `skip`), copy it aside and check it has the features' transports."""
    global OVBENCH
    cmd = ["cargo", "build", "--release", "--quiet", "--manifest-path",
           os.path.join(ROOT, "Cargo.toml")]
    if features:
        cmd += ["--features", features]
    if not skip:
        sh(cmd, timeout=3600)
    copy = os.path.join(_COPY.name, "ovbench")
    shutil.copy2(os.path.join(TARGET, "release/ovbench"), copy)
    OVBENCH = copy
    for t in (features or "").split(","):
        if t in ("verbs", "ucx", "ofi"):
            r = subprocess.run([copy, "latency", "--transport", t, "--np", "1", "--sizes", "8",
                                "--iters", "1", "--warmup", "0"], capture_output=True, text=True)
            if "not compiled into" in r.stderr:
                sys.exit(f"{TARGET}/release/ovbench lacks {t}: run without --no-build "
                         f"(or {' '.join(cmd)})")


def _checkout_schema():
    """The JSON format of this checkout (src/export/document.rs SCHEMA,
    docs/schema/ovbench.schema.json): build() makes the binary from it,
    and what these readers take (tables[].rows and the rows' size, mean,
    p50 and bandwidth keys) is in every format since ovbench/3. Read from
    the source so a format bump cannot leave the scripts refusing the
    binary they built (ovbench/4 did)."""
    src = os.path.join(ROOT, "src/export/document.rs")
    with open(src) as f:
        for line in f:
            if line.startswith("pub const SCHEMA: &str = "):
                return line.split('"')[1]
    sys.exit(f"{src}: no `pub const SCHEMA` line: ci/bench/common.py cannot tell which "
             "JSON format this checkout writes")


SCHEMA = _checkout_schema()


def load(path):
    """An ovbench JSON document, refused unless it is of SCHEMA."""
    with open(path) as f:
        doc = json.load(f)
    got = doc.get("schema") if isinstance(doc, dict) else None
    if got != SCHEMA:
        sys.exit(f"{path}: JSON schema {got!r}, but ci/bench reads {SCHEMA!r}: the binary "
                 f"({OVBENCH}) is older or newer than this script; rebuild it from this "
                 f"checkout (run without --no-build) or use the ci/bench of its own version")
    return doc


def rows(doc, table=None):
    """The JSON rows, each once: those of table index `table`, or of every
    table in order (each row tagged with its table's index as `table`)."""
    out = []
    for i, t in enumerate(doc["tables"]):
        if table is None or i == table:
            out += [dict(r, table=i) for r in t["rows"]]
    return out


def ovbench(cmd, size, iters, warmup, extra=(), env=None):
    """One ovbench run at one size: p50, mean (µs) and bandwidth, and its
    command line; `env`: variables added to the environment."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        args = [OVBENCH, cmd, *extra, "--sizes", str(size), "--iters", str(iters),
                "--warmup", str(warmup), "--json", out]
        sh(args, env=dict(os.environ, **env) if env else None)
        doc = load(out)
    row = [r for r in rows(doc, 0) if r.get("size") == size][0]
    return {"p50_us": row.get("p50_ns", 0) / 1e3, "mean_us": row.get("mean_ns", 0) / 1e3,
            "bw_bytes_per_sec": row.get("bytes_per_sec", 0), "ops": row.get("ops", {}),
            "cmd": " ".join([f"{k}={v}" for k, v in (env or {}).items()] + ["ovbench"]
                            + [quote(a) for a in args[1:-2]])}


def quote(a):
    return f"'{a}'" if any(c in a for c in ";&| ") else a


def listening(port):
    """Whether some socket on this host listens on TCP `port` (from /proc,
    without connecting: the peer tools accept exactly one connection)."""
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                for line in fh.readlines()[1:]:
                    cols = line.split()
                    if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def pair(server, client, env, port, timeout=300):
    """Run a peer tool's server on core 0 and, once it listens on its
    control `port`, its client on core 1; the client's stdout."""
    srv = subprocess.Popen(["taskset", "-c", "0"] + server, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not listening(port):
            if srv.poll() is not None or time.time() > deadline:
                sys.exit(f"{' '.join(server)}: not listening on port {port} "
                         f"(exit status {srv.poll()})")
            time.sleep(0.05)
        return sh(["taskset", "-c", "1"] + client, env=env, timeout=timeout)
    finally:
        try:
            srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def ucx_perftest(test, size, iters, warmup, port, tls="tcp", net_devices="lo"):
    """ucx_perftest -t TEST: typical (p50) latency in µs, bandwidth in bytes/s.
    Its MB are 2^20 bytes."""
    env = dict(os.environ, UCX_TLS=tls)
    if net_devices:
        env["UCX_NET_DEVICES"] = net_devices
    args = ["-t", test, "-s", str(size), "-n", str(iters), "-w", str(warmup), "-p", str(port)]
    out = pair(["ucx_perftest"] + args, ["ucx_perftest", "127.0.0.1"] + args, env, port)
    final = [l for l in out.splitlines() if l.startswith("Final:")]
    if not final:
        sys.exit("ucx_perftest printed no Final line:\n" + out)
    cols = final[0].split()
    # Final: iters typical avg overall bw_avg bw_overall rate_avg rate_overall
    envs = f"UCX_TLS={tls}" + (f" UCX_NET_DEVICES={net_devices}" if net_devices else "")
    return {"p50_us": float(cols[2]), "mean_us": float(cols[3]),
            "bw_bytes_per_sec": float(cols[5]) * 2**20,
            "cmd": envs + " " + " ".join(["ucx_perftest"] + args)}


def fi_pingpong(provider, size, iters, port, mode="tagged"):
    """fi_pingpong -e rdm: its mean one-way time (usec/xfer, two transfers per
    iteration). It has no warm-up option."""
    args = ["-e", "rdm", "-p", provider, "-m", mode, "-S", str(size), "-I", str(iters)]
    out = pair(["fi_pingpong"] + args + ["-B", str(port)],
               ["fi_pingpong"] + args + ["-P", str(port), "127.0.0.1"], dict(os.environ), port)
    # A header line ("bytes #sent ... usec/xfer ..."), then one line per
    # size, whose first column is abbreviated (1m for 1 MiB).
    lines = [l.split() for l in out.splitlines() if l.strip()]
    at = [i for i, l in enumerate(lines) if l[0] == "bytes"]
    if not at or at[0] + 1 >= len(lines):
        sys.exit("fi_pingpong printed no result line:\n" + out)
    col = lines[at[0]].index("usec/xfer")
    return {"mean_us": float(lines[at[0] + 1][col]),
            "cmd": " ".join(["fi_pingpong"] + [quote(a) for a in args])}


def alternate(runs, jobs):
    """Run each (name, thunk) of `jobs` in turn, `runs` times over; results by name."""
    res = {name: [] for name, _ in jobs}
    for i in range(runs):
        for name, job in jobs:
            res[name].append(job(i))
    return res


def med(xs, key):
    return statistics.median(x[key] for x in xs)


def ratio(label, a, b, key, goal=None, unit="us"):
    """`ratio LABEL A-tool x / B-tool y = r (goal)` with both command lines.
    `a` and `b` are lists of runs, each carrying its command; x and y are
    their medians. r is the median of the runs' own ratios (run i of A over
    run i of B, taken seconds apart by `alternate`): this VM's vCPUs
    sometimes run several times slower for minutes, which shifts both
    sides of a pair but skews a ratio of medians whose runs straddle it."""
    x, y = med(a, key), med(b, key)
    pairs = [p[key] / q[key] for p, q in zip(a, b) if q[key]]
    r = statistics.median(pairs) if pairs else float("nan")
    tail = f" (goal {goal})" if goal else ""
    kind = "p50" if key.startswith("p50") else ("mean" if key.startswith("mean") else key)
    print(f"ratio {label:<40} {kind} {x:10.3f} {unit} / {y:10.3f} {unit} = {r:6.3f}{tail}"
          f" [median of {len(pairs)} paired runs]")
    lo, hi = min(q[key] for q in b), max(q[key] for q in b)
    if lo > 0 and hi / lo > 1.5:
        print(f"#   note: B ranged {lo:.3f}-{hi:.3f} {unit} over the runs: the host changed "
              f"speed; per-run ratios {', '.join(f'{v:.3f}' for v in pairs)}")
    print(f"#   A: {a[0]['cmd']}")
    print(f"#   B: {b[0]['cmd']}")
    return r


OVERLAP_KEYS = ["sender_min_overlap_pct", "sender_max_overlap_pct",
                "receiver_min_overlap_pct", "receiver_max_overlap_pct"]


def overlap(size, iters, extra=()):
    """ovbench overlap at one size: the overlap bounds (%) at the largest
    computation step (twice xfer_time), and the command line."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "o.json")
        args = [OVBENCH, "overlap", *extra, "--sizes", str(size), "--iters", str(iters),
                "--json", out]
        sh(args)
        doc = load(out)
    steps = [r for r in rows(doc) if r.get("size") == size and "step" in r]
    last = max(steps, key=lambda r: r["step"])
    res = {k: last.get(k, float("nan")) for k in OVERLAP_KEYS}
    res["cmd"] = " ".join(["ovbench"] + [quote(a) for a in args[1:-2]])
    return res


def overlap_side_by_side(label, by_proto):
    """One line per protocol: median overlap bounds at the largest step.
    Native's minimum is 0 by construction (call-bounded, the paper's case 3)."""
    print(f"# overlap {label}, largest computation step, medians: "
          "sender min/max %, receiver min/max %")
    for proto, runs in by_proto.items():
        m = [med(runs, k) for k in OVERLAP_KEYS]
        print(f"overlap {label:<24} {proto:<11} s {m[0]:5.1f}/{m[1]:5.1f}  r {m[2]:5.1f}/{m[3]:5.1f}"
              f"   {runs[0]['cmd']}")
