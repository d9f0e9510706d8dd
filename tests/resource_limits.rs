//! Preflights honour the limits the process really has (a cgroup's memory
//! and task limits, RLIMIT_AS), not the host's MemAvailable alone: each
//! run is made inside a cage (a child of this test's own cgroup, or
//! prlimit) and must be refused before it starts, naming the limit.

mod common;

use std::time::{Duration, Instant};

use common::cage::{Cage, Limit};

const LIMIT: Duration = Duration::from_secs(20);

/// Run `args` in `cage`; (exit code, stdout, stderr, seconds).
fn caged(cage: &Cage, args: &[&str]) -> (Option<i32>, String, String, f64) {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ovbench"));
    let t0 = Instant::now();
    let r = common::run(&mut cage.command(bin, args), LIMIT);
    (r.code, r.stdout, r.stderr, t0.elapsed().as_secs_f64())
}

#[test]
fn sim_np_30000_in_a_4_gib_cage_is_refused_before_start() {
    let _s = common::serial();
    let cage = Cage::new(Limit::Memory(4 << 30)).expect("a memory cage");
    println!("cage: {}", cage.describe());
    let (code, out, err, secs) = caged(
        &cage,
        &[
            "bcast",
            "--transport",
            "sim",
            "--np",
            "30000",
            "--method",
            "oli",
        ],
    );
    println!("{secs:.2} s: {err}");
    assert_eq!(code, Some(2), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.contains("--np 30000")
            && ["memory.limit_in_bytes", "memory.max", "RLIMIT_AS"]
                .iter()
                .any(|l| first.contains(l)),
        "the refusal does not name the memory limit: {err}"
    );
    assert!(out.trim().is_empty(), "{out}");
    assert!(secs < 5.0, "refused only after {secs:.1} s");
    // Messages too: two ranks' 2 GiB buffers, and commtest's 1 GiB ones.
    for args in [
        &["latency", "--sizes", "2G", "--iters", "1"][..],
        &["commtest", "--total", "1G"][..],
    ] {
        let (code, out, err, secs) = caged(&cage, args);
        println!("{args:?}: {secs:.2} s: {err}");
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.lines()
                .next()
                .unwrap_or_default()
                .contains("memory.limit_in_bytes")
                || err.contains("memory.max")
                || err.contains("RLIMIT_AS"),
            "{err}"
        );
        assert!(out.trim().is_empty() && secs < 5.0, "{out}");
    }
}

#[test]
fn np_100_in_a_300_task_cage_is_refused_before_the_first_fork() {
    let _s = common::serial();
    let cage = match Cage::new(Limit::Tasks(300)) {
        Ok(c) => c,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    println!("cage: {}", cage.describe());
    let (code, out, err, secs) = caged(&cage, &["latency", "--np", "100", "--sizes", "8"]);
    println!("{secs:.2} s: {err}");
    assert_eq!(code, Some(2), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.contains("--np 100") && first.contains("pids.max"),
        "the refusal does not name pids.max: {err}"
    );
    // No rank started: a rank's first words are its header lines.
    assert!(
        out.trim().is_empty() && !err.contains("rank 1"),
        "{out}{err}"
    );
    assert!(secs < 5.0, "refused only after {secs:.1} s");
}
