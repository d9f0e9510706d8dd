//! Bad input, table-driven (issue 18, item 5): every flag of every command
//! given a value it cannot run with, each run under a deadline. A case
//! states the exit code (2: the command line cannot run, found before any
//! rank starts; 1: only a running rank can know, with the reason), a text
//! the FIRST stderr line must hold (the flag it names) and, where there is
//! one, a text of the fix somewhere in stderr. Every case also checks that
//! stdout has no results, that nothing panicked and that no ovbench
//! process is left running.

mod common;
mod file_kit;

use std::path::Path;
use std::time::{Duration, Instant};

use common::cage::{Cage, Limit};
use common::{run, Scratch};

/// One run's deadline: a case that hangs fails instead of stalling the suite.
const LIMIT: Duration = Duration::from_secs(20);

/// A bad command line and what it must produce.
struct Case {
    /// The kind of mistake, for the report.
    kind: &'static str,
    args: &'static [&'static str],
    code: i32,
    /// Text the first stderr line must contain (the flag).
    first: &'static str,
    /// Text of the fix, anywhere in stderr ("" where there is none).
    fix: &'static str,
    /// For exit 1: why no check before launch can find it.
    why: &'static str,
}

const fn c(
    kind: &'static str,
    args: &'static [&'static str],
    first: &'static str,
    fix: &'static str,
) -> Case {
    Case {
        kind,
        args,
        code: 2,
        first,
        fix,
        why: "",
    }
}

/// A case only a running rank can find: exit 1, and the reason.
const fn at_run(
    kind: &'static str,
    args: &'static [&'static str],
    first: &'static str,
    fix: &'static str,
    why: &'static str,
) -> Case {
    Case {
        kind,
        args,
        code: 1,
        first,
        fix,
        why,
    }
}

// Placeholders replaced at run time: `@DIR` by the scratch directory
// (and, for the c: and d: cases, those of tests/file_kit).
#[rustfmt::skip]
const CASES: &[Case] = &[
    // ---- unknown or misspelled names --------------------------------
    c("name", &["latency", "--transport", "tpc"], "--transport", "tcp"),
    c("name", &["latency", "--proto", "eagr"], "--proto", "eager"),
    c("name", &["latency", "--transport", "sim", "--proto", "raw", "--op", "wrte"], "--op", "write"),
    c("name", &["latency", "--reg-cache", "maybe"], "--reg-cache", "on"),
    c("name", &["latency", "--progress", "spin"], "--progress", "poll"),
    c("name", &["bcast", "--method", "olii"], "--method", "oli"),
    c("name", &["bcast", "--algorithm", "tree"], "--algorithm", "binomial"),
    c("name", &["bcast", "--barrier", "fast"], "--barrier", "dissemination"),
    c("name", &["overlap", "--pair", "isend-rcv"], "--pair", "isend-recv"),
    c("name", &["commtest", "--exchange", "swp"], "--exchange", "swap"),
    c("name", &["commtest", "--start", "barier"], "--start", "barrier"),
    c("name", &["commtest", "--transport", "sim", "--protocol", "9,9"], "--protocol", ""),
    c("name", &["commtest", "--transport", "sim", "--protocol", "abc"], "--protocol", ""),
    c("name", &["logp", "--send-mode", "bsend"], "--send-mode", "isend"),
    c("name", &["logp", "--recv-mode", "precv"], "--recv-mode", "irecv"),
    c("name", &["latency", "--size", "8"], "--size", "--sizes"),
    c("name", &["lateny"], "lateny", "latency"),
    // ---- sizes: malformed, empty, negative, inverted, oversized -----
    c("size", &["latency", "--sizes", ""], "--sizes", ""),
    c("size", &["latency", "--sizes", "8,,16"], "--sizes", ""),
    c("size", &["latency", "--sizes", "1X"], "--sizes", "K = 1024"),
    c("size", &["latency", "--sizes", "-1"], "--sizes", ""),
    c("size", &["bw", "--sizes", "4M:1K"], "--sizes", ""),
    c("size", &["latency", "--transport", "sim", "--sizes", "1P"], "--sizes", ""),
    c("size", &["latency", "--transport", "sim", "--sizes", "0:1T"], "--sizes", ""),
    c("size", &["bw", "--sizes", "64G", "--iters", "1"], "--sizes", "smaller --sizes"),
    c("size", &["bibw", "--transport", "sim", "--sizes", "1T"], "--sizes", ""),
    c("size", &["msgrate", "--transport", "sim", "--sizes", "8:1T"], "--sizes", ""),
    c("size", &["latency", "--eager-limit", "-1"], "--eager-limit", ""),
    c("size", &["latency", "--eager-limit", "16Q"], "--eager-limit", ""),
    c("size", &["latency", "--proto", "pipelined", "--frag-size", "0"], "--frag-size", ""),
    c("size", &["overhead", "--msgsize", "-8"], "--msgsize", ""),
    c("size", &["overhead", "--transport", "sim", "--msgsize", "1T"], "--msgsize", ""),
    c("size", &["overhead", "--sizes", "4M:1K"], "--sizes", ""),
    c("size", &["logp", "--min-size", "1M", "--max-size", "1K"], "--min-size", ""),
    c("size", &["logp", "--transport", "sim", "--max-size", "1T"], "--max-size", ""),
    c("size", &["logp", "--min-size", "abc"], "--min-size", ""),
    c("size", &["bcast", "--transport", "sim", "--msgsize", "1T"], "--msgsize", ""),
    // --msgsize is an alias of --sizes: clap names the flag by --sizes.
    c("size", &["bcast", "--msgsize", "x"], "--sizes", ""),
    c("size", &["commtest", "--transport", "sim", "--total", "1T"], "--total", ""),
    c("size", &["commtest", "--transport", "sim", "--min-packet", "0"], "--min-packet", ""),
    c("size", &["commtest", "--transport", "sim", "--total", "1K", "--min-packet", "4K"], "--min-packet", ""),
    c("size", &["overlap", "--transport", "sim", "--sizes", "1T"], "--sizes", ""),
    c("size", &["overlap", "--sizes", "-1"], "--sizes", ""),
    // ---- rank counts ------------------------------------------------
    c("np", &["latency", "--np", "0"], "--np", ""),
    c("np", &["latency", "--np", "-2"], "--np", ""),
    c("np", &["latency", "--np", "1", "--sizes", "8"], "--np", "--np 2"),
    c("np", &["bw", "--np", "1", "--sizes", "8"], "--np", "--np 2"),
    c("np", &["bibw", "--transport", "sim", "--np", "1", "--sizes", "8"], "--np", "--np 2"),
    c("np", &["msgrate", "--np", "1", "--sizes", "8"], "--np", "--np 2"),
    c("np", &["bw", "--pairs", "2", "--np", "2", "--sizes", "8"], "--np", "--np 4"),
    c("np", &["overhead", "--np", "1"], "--np", ""),
    c("np", &["overhead", "--np", "3"], "--np", "even"),
    c("np", &["logp", "--np", "1"], "--np", ""),
    c("np", &["overlap", "--np", "1"], "--np", ""),
    c("np", &["commtest", "--np", "1"], "--np", ""),
    c("np", &["commtest", "--transport", "sim", "--distance", "2", "--np", "2"], "--distance", ""),
    c("np", &["commtest", "--transport", "sim", "--distance", "0"], "--distance", ""),
    c("np", &["bcast", "--np", "2"], "--np", "3"),
    c("np", &["bcast", "--transport", "sim", "--np", "4,2"], "--np", "3"),
    c("np", &["latency", "--np", "4,8", "--sizes", "8"], "--np", ""),
    c("np", &["latency", "--np", "100000", "--sizes", "8"], "--np 100000", "fewer ranks"),
    c("np", &["bcast", "--transport", "sim", "--np", "100000"], "--np 100000", "fewer ranks"),
    // ---- counts and durations ---------------------------------------
    c("count", &["latency", "--iters", "0"], "--iters", ""),
    c("count", &["latency", "--iters", "-1"], "--iters", ""),
    c("count", &["latency", "--warmup", "-1"], "--warmup", ""),
    c("count", &["latency", "--warmup", "many"], "--warmup", ""),
    c("count", &["latency", "--timeout", "0", "--sizes", "8"], "--timeout", ""),
    c("count", &["latency", "--timeout", "-1"], "--timeout", ""),
    c("count", &["latency", "--timeout", "soon"], "--timeout", ""),
    c("count", &["bw", "--window", "0"], "--window", ""),
    c("count", &["bibw", "--window", "0"], "--window", ""),
    c("count", &["msgrate", "--pairs", "0"], "--pairs", ""),
    c("count", &["bw", "--iters", "0"], "--iters", ""),
    c("count", &["bibw", "--warmup", "-1"], "--warmup", ""),
    c("count", &["msgrate", "--iters", "-5"], "--iters", ""),
    c("count", &["bw", "--warmup", "x"], "--warmup", ""),
    c("count", &["msgrate", "--window", "-4"], "--window", ""),
    c("count", &["bibw", "--pairs", "0"], "--pairs", ""),
    // --iterations is an alias of --iters: clap names the flag by --iters.
    c("count", &["overhead", "--iterations", "0"], "--iters", ""),
    c("count", &["overhead", "--thresh", "0"], "--thresh", ""),
    c("count", &["overhead", "--bthresh", "-1"], "--bthresh", ""),
    c("count", &["overhead", "--repeats", "0"], "--repeats", ""),
    c("count", &["logp", "--eps", "0"], "--eps", ""),
    c("count", &["logp", "--conf-int", "1.5"], "--conf-int", ""),
    c("count", &["logp", "--max-its", "0"], "--max-its", ""),
    c("count", &["logp", "--max-diff", "-1"], "--max-diff", ""),
    c("count", &["bcast", "--reps", "0"], "--reps", ""),
    c("count", &["bcast", "--min-measurements", "0"], "--min-measurements", ""),
    c("count", &["bcast", "--min-measurements", "8", "--max-measurements", "4"], "--max-measurements", ""),
    c("count", &["bcast", "--max-cv", "-0.1"], "--max-cv", ""),
    c("count", &["commtest", "--total", "0"], "--total", ""),
    c("count", &["commtest", "--iterations", "0"], "--iterations", ""),
    c("count", &["overlap", "--iters", "0"], "--iters", ""),
    c("count", &["overlap", "--steps", "0"], "--steps", ""),
    c("count", &["overlap", "--max-comp", "-1"], "--max-comp", ""),
    c("count", &["overlap", "--xfer-reps", "0"], "--xfer-reps", ""),
    // ---- boolean flags given a value --------------------------------
    c("flag", &["latency", "--verify=yes"], "--verify", ""),
    c("flag", &["latency", "--instrument=yes"], "--instrument", ""),
    c("flag", &["bw", "--verify=yes"], "--verify", ""),
    c("flag", &["bibw", "--verify=yes"], "--verify", ""),
    c("flag", &["msgrate", "--verify=yes"], "--verify", ""),
    c("flag", &["overhead", "--recv=1"], "--recv", ""),
    c("flag", &["overhead", "--verbose=1"], "--verbose", ""),
    c("flag", &["overhead", "--nohdr=1"], "--nohdr", ""),
    c("flag", &["logp", "--flood=1"], "--flood", ""),
    c("flag", &["logp", "--verbose=1"], "--verbose", ""),
    c("flag", &["commtest", "--reorganized=1"], "--reorganized", ""),
    c("flag", &["commtest", "--all-pairs=1"], "--all-pairs", ""),
    c("flag", &["commtest", "--global-clock=1"], "--global-clock", ""),
    // ---- files: --xfer-table, --write-xfer-table, --json, --csv -----
    c("file", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/missing.txt"], "--xfer-table", ""),
    c("file", &["overlap", "--transport", "sim", "--xfer-table", "@DIR"], "--xfer-table", ""),
    c("file", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/garbage.txt"], "--xfer-table", ""),
    c("file", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/empty.txt"], "--xfer-table", ""),
    at_run("file", &["overlap", "--transport", "sim", "--sizes", "8", "--iters", "5", "--steps", "1", "--xfer-table", "@DIR/t16.txt"],
        "--xfer-table", "--write-xfer-table",
        "the sizes that need a line are those each protocol moves as a bare operation, which depends on the engine's shape that only a rank's communicator has"),
    c("file", &["overlap", "--transport", "sim", "--write-xfer-table", "@DIR"], "--write-xfer-table", ""),
    c("file", &["overlap", "--write-xfer-table", "/nonexistent-ovbench-dir/x.txt"], "--write-xfer-table", ""),
    c("file", &["latency", "--transport", "sim", "--sizes", "8", "--json", "@DIR"], "--json", ""),
    c("file", &["latency", "--sizes", "8", "--json", "/nonexistent-ovbench-dir/out.json"], "--json", "directory"),
    c("file", &["bw", "--transport", "sim", "--sizes", "8", "--csv", "@DIR"], "--csv", ""),
    c("file", &["logp", "--csv", "/proc/ovbench-nope/x.csv"], "--csv", ""),
    c("file", &["latency", "--transport", "sim", "--sizes", "8", "--json", "@DIR/same", "--csv", "@DIR/same"], "--csv", ""),
    // ---- --sim parameters ---------------------------------------------
    c("sim", &["latency", "--transport", "sim", "--sim", "L=abc"], "--sim", ""),
    c("sim", &["latency", "--transport", "sim", "--sim", "nope=1"], "--sim", ""),
    c("sim", &["latency", "--transport", "sim", "--sim", "L"], "--sim", "KEY=VAL"),
    c("sim", &["overhead", "--transport", "sim", "--sim", "os=-1us"], "--sim", ""),
    // ---- transports not compiled in (default build) -----------------
    c("feature", &["latency", "--transport", "verbs", "--sizes", "8"], "--transport verbs", "--features verbs"),
    c("feature", &["bw", "--transport", "ucx", "--sizes", "8"], "--transport ucx", "--features ucx"),
    c("feature", &["logp", "--transport", "ofi"], "--transport ofi", "--features ofi"),
    // ---- options of another transport or protocol -------------------
    c("other", &["latency", "--mtu", "4096"], "--mtu", "--transport verbs"),
    c("other", &["latency", "--device", "mlx5_0"], "--device", "--transport verbs"),
    c("other", &["latency", "--port", "1"], "--port", "--transport verbs"),
    c("other", &["latency", "--gid-index", "3"], "--gid-index", "--transport verbs"),
    c("other", &["latency", "--cm"], "--cm", "--transport verbs"),
    c("other", &["bw", "--tx-depth", "64"], "--tx-depth", "--transport verbs"),
    c("other", &["bw", "--rx-depth", "64"], "--rx-depth", "--transport verbs"),
    c("other", &["latency", "--inline-size", "64"], "--inline-size", "--transport verbs"),
    c("other", &["latency", "--sl", "1"], "--sl", "--transport verbs"),
    c("other", &["latency", "--tclass", "106"], "--tclass", "--transport verbs"),
    c("other", &["latency", "--eager-buf", "32K"], "--eager-buf", "--transport verbs"),
    c("other", &["latency", "--ucx-tls", "posix"], "--ucx-tls", "--transport ucx"),
    c("other", &["latency", "--ucx-net-devices", "eth0"], "--ucx-net-devices", "--transport ucx"),
    c("other", &["latency", "--ucx-connect", "sockaddr"], "--ucx-connect", "--transport ucx"),
    c("other", &["latency", "--transport", "sim", "--provider", "shm"], "--provider", "--transport ofi"),
    c("other", &["latency", "--ofi-node", "10.0.0.1"], "--ofi-node", "--transport ofi"),
    c("other", &["latency", "--sim", "L=1us"], "--sim", "--transport sim"),
    c("other", &["latency", "--transport", "sim", "--op", "write"], "--op", "--proto raw"),
    c("other", &["latency", "--transport", "sim", "--frag-size", "64K"], "--frag-size", "--proto pipelined"),
    c("other", &["latency", "--proto", "native"], "--proto native", "--transport ucx"),
    c("other", &["overhead", "--transport", "sim", "--proto", "raw"], "--proto raw", ""),
    c("other", &["overhead", "--msgsize", "8", "--sizes", "8:64"], "--msgsize", ""),
    // ---- fabric options' own values (refused by their parsers) ------
    c("value", &["latency", "--mtu", "1500"], "--mtu", "4096"),
    c("value", &["latency", "--port", "0"], "--port", ""),
    c("value", &["latency", "--sl", "16"], "--sl", ""),
    c("value", &["latency", "--tx-depth", "0"], "--tx-depth", ""),
    c("value", &["latency", "--rx-depth", "-1"], "--rx-depth", ""),
    c("value", &["latency", "--tclass", "256"], "--tclass", ""),
    c("value", &["latency", "--gid-index", "-1"], "--gid-index", ""),
    c("value", &["latency", "--inline-size", "x"], "--inline-size", ""),
    c("value", &["latency", "--eager-buf", "-1"], "--eager-buf", ""),
    // ---- c: input files (docs/files.md): one reader, a cap, no device --
    c("c: input", &["plot", "/dev/zero", "-o", "@DIR/p.svg"], "/dev/zero is a character device", "regular file"),
    c("c: input", &["overlap", "--transport", "sim", "--xfer-table", "/dev/zero"], "--xfer-table /dev/zero", "regular file"),
    c("c: input", &["latency", "--hostfile", "/dev/zero"], "--hostfile /dev/zero", "regular file"),
    c("c: input", &["latency", "--hostfile", "@DIR/fifo-in"], "--hostfile", "larger than the 1024 KiB"),
    c("c: input", &["plot", "@DIR/sub", "-o", "@DIR/p.svg"], "is a directory", "- for stdin"),
    c("c: input", &["plot", "-", "-o", "@DIR/p.svg"], "- (stdin): empty", "ovbench --json"),
    c("c: input", &["compare", "-", "-"], "more than once", "give it once"),
    c("c: input", &["plot", "@DIR/big.json", "-o", "@DIR/p.svg"], "big.json: larger than the 65536 KiB", ""),
    c("c: input", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/big.txt"], "--xfer-table", "larger than the 1024 KiB"),
    c("c: input", &["plot", "@DIR/deep.json", "-o", "@DIR/p.svg"], "deep.json:1:33: nested deeper than 32", ""),
    c("c: input", &["plot", "@DIR/nul.json", "-o", "@DIR/p.svg"], "NUL byte at offset 23, line 2", ""),
    c("c: input", &["compare", "@DIR/latin1.json", "@DIR/latin1.json"], "byte 0xe9 at offset 16, line 2", ""),
    c("c: input", &["plot", "@DIR/bad.json", "-o", "@DIR/p.svg"], "bad.json:3:3: not JSON", "ovbench --json"),
    c("c: input", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/nul.txt"], "--xfer-table", "NUL byte at offset 8, line 2"),
    c("c: input", &["latency", "--hostfile", "@DIR/hosts-latin1.txt"], "--hostfile", "offset 7, line 2"),
    c("c: input", &["overlap", "--xfer-table", "-"], "--xfer-table -", "save the table to a file"),
    c("c: input", &["plot", "@DIR/missing.json", "-o", "@DIR/p.svg"], "missing.json: cannot read it", "check the name"),
    // ---- d: output files: no output an input or another output, ------
    // ---- every name creatable before the run, links kept --------------
    c("d: output", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/t8.txt", "--json", "@DIR/t8.txt"], "--json", "would destroy the input"),
    c("d: output", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/t8.txt", "--json", "@DIR/t8-link.txt"], "--json", "would destroy the input"),
    c("d: output", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/t8.txt", "--csv", "@DIR/t8-hard.txt"], "--csv", "would destroy the input"),
    c("d: output", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/t8.txt", "--json", "@DIR/sub/../t8.txt"], "--json", "would destroy the input"),
    c("d: output", &["overlap", "--transport", "sim", "--proto", "raw", "--write-xfer-table", "@DIR/t8.txt", "--xfer-table", "@DIR/t8.txt"], "--write-xfer-table", "give"),
    c("d: output", &["overlap", "--transport", "sim", "--proto", "raw", "--write-xfer-table", "@DIR/w.txt", "--json", "@DIR/w.txt"], "--json", "one output would overwrite the other"),
    c("d: output", &["latency", "--hostfile", "@DIR/hosts.txt", "--json", "@DIR/hosts.txt"], "--json", "would destroy the input"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--csv", "@DIR/r.csv", "--json", "@DIR/r.totals.csv"], "--csv", "different names"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--json", "@DIR/@LONG"], "--json", "at most 255"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--csv", "@DIR/@CSVLONG"], "--csv", "shorter name"),
    // A FIFO of the scratch directory, never /dev/null: with this guard
    // broken the run renames its file over the target.
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--csv", "@DIR/fifo-out"], "is no regular file", "regular file"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--json", "@DIR/fifo-out"], "--json", "or - for stdout"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--csv", "-"], "--csv -", "only --json -"),
    c("d: output", &["overlap", "--transport", "sim", "--proto", "raw", "--write-xfer-table", "-"], "--write-xfer-table -", "give a file name"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--json", "@DIR/loop.json"], "--json", "a loop of symlinks"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--json", "@DIR/@NONUTF8/out.json"], "--json", "does not exist"),
    // Files that do not exist yet: only their canonical paths can meet.
    c("d: output", &["overlap", "--transport", "sim", "--proto", "raw", "--write-xfer-table", "@DIR/w2.txt", "--json", "@DIR/sub/../w2.txt"], "--json", "one output would overwrite the other"),
    c("d: output", &["latency", "--transport", "sim", "--sizes", "8", "--json", "@DIR/dangling.json", "--csv", "@DIR/sub/made.csv"], "--csv", "one output would overwrite the other"),
    // ---- a: arithmetic on user values: bounded, never wrapped --------
    c("a: arithmetic", &["latency", "--transport", "sim", "--iters", "18446744073709551615"], "--iters", ""),
    c("a: arithmetic", &["bw", "--transport", "sim", "--iters", "18446744073709551615"], "--iters", ""),
    c("a: arithmetic", &["overlap", "--transport", "sim", "--iters", "18446744073709551615"], "--iters", ""),
    c("a: arithmetic", &["latency", "--transport", "sim", "--warmup", "18446744073709551614"], "--warmup", ""),
    c("a: arithmetic", &["bw", "--transport", "sim", "--window", "100000000"], "--window", ""),
    c("a: arithmetic", &["overlap", "--transport", "sim", "--max-comp", "1e12"], "--max-comp", ""),
    c("a: arithmetic", &["latency", "--transport", "sim", "--sim", "L=1000000s"], "--sim", ""),
    c("a: arithmetic", &["latency", "--transport", "sim", "--sim", "L=0ps,os=0ps,or=0ps,g=0ps,G=0ps"], "--sim", ""),
    c("a: arithmetic", &["latency", "--transport", "sim", "--sim", "G=2s"], "--sim", ""),
    c("a: arithmetic", &["bw", "--transport", "sim", "--pairs", "4294967295"], "--pairs", ""),
    c("a: arithmetic", &["logp", "--transport", "sim", "--max-its", "18446744073709551615"], "--max-its", ""),
    c("a: arithmetic", &["bcast", "--transport", "sim", "--reps", "18446744073709551615"], "--reps", ""),
    c("a: arithmetic", &["overlap", "--transport", "sim", "--steps", "4294967295"], "--steps", ""),
    // ---- b: preflights read the limits this process has (the whole ---
    // ---- table runs in a 4 GiB memory cage: its limit binds) ----------
    c("b: preflight", &["latency", "--sizes", "2G"], "--sizes", "left under"),
    c("b: preflight", &["bw", "--sizes", "2G", "--iters", "1"], "--sizes", "left under"),
    c("b: preflight", &["bibw", "--sizes", "2G", "--iters", "1"], "--sizes", "left under"),
    c("b: preflight", &["msgrate", "--sizes", "2G"], "--sizes", "left under"),
    c("b: preflight", &["commtest", "--total", "1G"], "--total", "left under"),
    c("b: preflight", &["bcast", "--transport", "sim", "--np", "30000"], "--np 30000", "left under"),
    c("b: preflight", &["latency", "--transport", "sim", "--np", "30000", "--sizes", "8"], "--np 30000", "left under"),
    c("b: preflight", &["commtest", "--transport", "sim", "--np", "20000", "--total", "8K"], "--np 20000", "left under"),
    c("b: preflight", &["overlap", "--sizes", "2G"], "--sizes", "left under"),
    c("b: preflight", &["overhead", "--msgsize", "2G"], "--msgsize", "left under"),
    c("b: preflight", &["logp", "--max-size", "512M"], "--max-size", "left under"),
    c("b: preflight", &["bcast", "--msgsize", "2G"], "--msgsize", "left under"),
    c("b: preflight", &["latency", "--transport", "sim", "--sizes", "2G"], "--sizes", "left under"),
    // ---- e: options with no effect in this run (src/cli/effects.rs) ---
    c("e: no effect", &["latency", "--transport", "sim", "--hosts", "a,b"], "--hosts", "drop --hosts"),
    c("e: no effect", &["latency", "--transport", "sim", "--hostfile", "@DIR/hosts.txt"], "--hostfile", "drop --hostfile"),
    c("e: no effect", &["latency", "--transport", "sim", "--launcher", "ssh"], "--launcher", "drop --launcher"),
    c("e: no effect", &["latency", "--transport", "sim", "--bootstrap", "127.0.0.1:5000"], "--bootstrap", "drop --bootstrap"),
    c("e: no effect", &["bcast", "--transport", "sim", "--oversubscribe"], "--oversubscribe", "drop --oversubscribe"),
    c("e: no effect", &["latency", "--sizes", "8", "--bootstrap", "127.0.0.1:5000"], "--bootstrap", "mpirun/srun"),
    c("e: no effect", &["latency", "--transport", "sim", "--proto", "eager", "--reg-cache", "on"], "--reg-cache", "rendezvous"),
    c("e: no effect", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/t8.txt", "--xfer-reps", "3"], "--xfer-reps", "drop one of them"),
    c("e: no effect", &["logp", "--transport", "sim", "--launcher", "local"], "--launcher", "drop --launcher"),
    c("e: no effect", &["overhead", "--transport", "sim", "--hosts", "a,b"], "--hosts", "drop --hosts"),
    c("e: no effect", &["latency", "--transport", "sim", "--proto", "eager", "--frag-size", "64K"], "--frag-size", "--proto pipelined"),
    c("e: no effect", &["latency", "--transport", "sim", "--proto", "eager", "--op", "read"], "--op", "--proto raw"),
    // ---- f: messages name the wrong part and the fix; echoes are -----
    // ---- cut to 80 characters and escaped ----------------------------
    c("f: message", &["latency", "--transport", "sim", "--sizes", "8:"], "MAX is missing", "8:4M"),
    c("f: message", &["latency", "--transport", "sim", "--sizes", ":8"], "MIN is missing", "0:8"),
    c("f: message", &["latency", "--transport", "sim", "--sizes", "8,16,"], "item 3 is empty", "between the commas"),
    c("f: message", &["latency", "--transport", "sim", "--sizes", "8,,16"], "item 2 is empty", "between the commas"),
    c("f: message", &["latency", "--transport", "sim", "--sizes", "16X"], "`X` is not a unit", "K, M, G, T or P"),
    c("f: message", &["latency", "--transport", "sim", "--sizes", "1.5K"], "whole number of bytes", "1536"),
    c("f: message", &["latency", "--transport", "sim", "--sim", "L=1µs"], "is not a unit", "µs is written us"),
    c("f: message", &["latency", "--transport", "sim", "--sim", "g=5sec"], "`sec` is not a unit", "ps, ns, us, ms or s"),
    c("f: message", &["latency", "--timeout", "1µs"], "is not a unit", "µs is written us"),
    c("f: message", &["latency", "--transport", "sim", "--sizes", "@HUGE"], "--sizes", "more characters)"),
    c("f: message", &["latency", "--transport", "sim", "--sim", "@HUGE"], "--sim", "more characters)"),
    c("f: message", &["latency", "--transport", "sim", "--sizes", "8\u{1b}[2J"], "\\u{1b}", "is not a unit"),
    c("f: message", &["latency", "--transport", "sim", "--np", "2\u{7}"], "\\u{7}", "rank count"),
    c("f: message", &["latency", "--hosts", "localhost", "--sizes", "8"], "from --hosts, one per host", "list 2 hosts"),
    c("f: message", &["plot", "@DIR/result.json", "-o", "/nonexistent-ovbench-dir/p.png"], "-o /nonexistent-ovbench-dir/p.png", "does not exist"),
    c("f: message", &["compare", "@DIR/result.json", "@DIR/result.json", "-o", "/nonexistent-ovbench-dir/p.svg"], "-o /nonexistent-ovbench-dir/p.svg", "does not exist"),
    // ---- g: no silent duplicates, no degenerate values, no late exit --
    c("g: lenient", &["latency", "--transport", "sim", "--sizes", "8,8,16"], "8 comes twice", "each size once"),
    c("g: lenient", &["latency", "--transport", "sim", "--sizes", "0:1K,1K"], "1K comes twice", "each size once"),
    c("g: lenient", &["latency", "--transport", "sim", "--sim", "L=1us,g=2ns,L=2us"], "L is given twice", "each key once"),
    c("g: lenient", &["latency", "--transport", "sim", "--sim", "os=1ns,o_s=2ns"], "o_s is given twice", "each key once"),
    c("g: lenient", &["bcast", "--transport", "sim", "--np", "4,4"], "4 is listed twice", "each rank count once"),
    c("g: lenient", &["overlap", "--transport", "sim", "--pair", "isend-recv,isend-recv"], "--pair isend-recv is listed twice", "each pair once"),
    c("g: lenient", &["overlap", "--transport", "sim", "--max-comp", "0"], "--max-comp 0", "above 0"),
    c("g: lenient", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/dup.txt"], "given again", "each size once"),
    c("g: lenient", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/zero.txt"], "takes 0 ns", "--write-xfer-table"),
    c("g: lenient", &["overlap", "--transport", "sim", "--xfer-table", "@DIR/huge.txt"], "at most 1e12 ns", "1e308"),
    c("g: lenient", &["logp", "--transport", "sim", "--max-size", "1"], "--max-size 1", "--max-size 2"),
    c("g: lenient", &["latency", "--transport", "sim", "--iters", "5", "--iters", "6"], "--iters", "multiple times"),
    c("g: lenient", &["commtest", "--transport", "sim", "--distance", "3", "--np", "3"], "--distance 3", "--np 4"),
];

/// The ovbench processes still alive (ranks a launcher left behind).
fn ovbench_processes() -> Vec<u32> {
    let exe = Path::new(env!("CARGO_BIN_EXE_ovbench"));
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .collect()
}

/// The first stderr line: it must state the problem (no warning before it).
fn first_line(stderr: &str) -> &str {
    stderr.lines().next().unwrap_or("")
}

#[test]
fn every_bad_input_is_refused_naming_its_flag() {
    let dir = Scratch::new("bad-input");
    std::fs::write(dir.join("garbage.txt"), "8 100\nnot a line\n1K ns\n").unwrap();
    std::fs::write(dir.join("empty.txt"), "").unwrap();
    std::fs::write(dir.join("t16.txt"), "16 100\n").unwrap();
    std::fs::write(dir.join("dup.txt"), "8 100\n16 200\n8 300\n").unwrap();
    std::fs::write(dir.join("zero.txt"), "8 0\n16 200\n").unwrap();
    std::fs::write(dir.join("huge.txt"), "8 100\n16 1e308\n").unwrap();
    // A real result for plot and compare (their -o cases).
    let made = run(
        common::command(&[
            "latency",
            "--transport",
            "sim",
            "--sizes",
            "8",
            "--iters",
            "20",
            "--quiet",
        ])
        .arg("--json")
        .arg(dir.join("result.json")),
        LIMIT,
    );
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    file_kit::make(&dir);
    let dir_s = dir.to_str().expect("utf-8 scratch path").to_string();
    // Every case runs caged: a check that fails to refuse cannot take
    // the machine's memory, and the b: cases' limit is this one.
    let cage = Cage::new(Limit::Memory(4 << 30)).expect("a memory cage");
    eprintln!("cage: {}", cage.describe());
    let exe = Path::new(env!("CARGO_BIN_EXE_ovbench"));
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for case in CASES {
        // A transport that is compiled into this test build is no bad input.
        let compiled = [
            ("verbs", cfg!(feature = "verbs")),
            ("ucx", cfg!(feature = "ucx")),
            ("ofi", cfg!(feature = "ofi")),
        ];
        let built = |t: &str| compiled.iter().any(|&(name, on)| on && name == t);
        if case.kind == "feature" && case.args.iter().any(|a| built(a)) {
            continue;
        }
        match kinds.iter_mut().find(|(k, _)| *k == case.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((case.kind, 1)),
        }
        let args: Vec<std::ffi::OsString> = case
            .args
            .iter()
            .map(|a| match *a {
                // One huge argument: its echo must be cut, not 100 KB.
                "@HUGE" => format!("L={}", "7".repeat(100_000)).into(),
                a => file_kit::expand(a, &dir_s),
            })
            .collect();
        let files_before = file_kit::snapshot(&dir);
        let started = Instant::now();
        // A run past its deadline is killed and reported with the others.
        let r = match std::panic::catch_unwind(|| run(&mut cage.command(exe, &args), LIMIT)) {
            Ok(r) => r,
            Err(e) => {
                let why = e.downcast_ref::<String>().map_or("hung".to_string(), |s| {
                    s.lines().next().unwrap_or("").into()
                });
                failures.push(format!("{args:?}: {why}"));
                continue;
            }
        };
        let took = started.elapsed();
        let first = first_line(&r.stderr);
        let mut wrong = Vec::new();
        if r.code != Some(case.code) {
            wrong.push(format!("exit {:?}, want {}", r.code, case.code));
        }
        if r.stderr.contains("panicked") || r.code == Some(101) {
            wrong.push("panicked".into());
        }
        if !first.contains(case.first) {
            wrong.push(format!("first stderr line lacks `{}`", case.first));
        }
        if first.contains("unexpected argument") && case.first != "--size" {
            wrong.push("read as an unexpected argument".into());
        }
        if !r.stderr.contains(case.fix) {
            wrong.push(format!("stderr lacks the fix `{}`", case.fix));
        }
        // Before launch nothing is printed; a rank may have printed the
        // header (`#` lines), never a result.
        let results = r
            .stdout
            .lines()
            .find(|l| case.code == 2 || !l.starts_with('#'));
        if let Some(l) = results {
            wrong.push(format!("stdout has results: {l:?}"));
        }
        if case.code == 1 && case.why.is_empty() {
            wrong.push("exit 1 without the reason no preflight can find it".into());
        }
        wrong.extend(file_kit::damage(&files_before, &file_kit::snapshot(&dir)));
        if took > Duration::from_secs(5) {
            wrong.push(format!("took {took:.1?}, over 5 s"));
        }
        // One line states it, with what it echoes cut (shown::MAX_ECHO).
        if first.chars().count() > 600 {
            wrong.push(format!(
                "first stderr line has {} characters",
                first.chars().count()
            ));
        }
        let left = ovbench_processes();
        if !left.is_empty() {
            wrong.push(format!("left running: {left:?}"));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{args:?} ({took:.1?}): {}\n    stderr: {}",
                wrong.join("; "),
                r.stderr.trim().replace('\n', "\n            ")
            ));
        }
    }
    eprintln!("{} cases in {:.1?}: {kinds:?}", CASES.len(), t0.elapsed());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}
