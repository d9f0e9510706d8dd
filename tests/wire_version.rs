//! Ranks of different builds are refused at connect: a test hook
//! (feature `test-hooks`, never in a release build) makes one rank
//! announce another protocol wire version, as a rank of another build
//! would, and the job must stop at start-up with one line naming that
//! rank and both versions, within seconds, before any message is timed.
//!
//! `cargo test -p ovbench --features test-hooks --test wire_version`

#![cfg(feature = "test-hooks")]

mod common;

use std::time::{Duration, Instant};

use common::serial;
use ovbench_core::announce::WIRE_VERSION;

const LIMIT: Duration = Duration::from_secs(60);

fn latency(hook: Option<&str>) -> common::Run {
    let mut cmd = common::command(&["latency", "--sizes", "8", "--iters", "10"]);
    cmd.env_remove("OVBENCH_TEST_WIRE_VERSION");
    if let Some(h) = hook {
        cmd.env("OVBENCH_TEST_WIRE_VERSION", h);
    }
    common::run(&mut cmd, LIMIT)
}

#[test]
fn a_rank_of_another_build_is_refused_at_connect() {
    let _one = serial();
    let other = WIRE_VERSION.wrapping_add(1);
    let t0 = Instant::now();
    let r = latency(Some(&format!("1={other}")));
    let took = t0.elapsed();
    assert_eq!(
        r.code,
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    let line = format!(
        "rank 1 speaks protocol wire version {other}, this build speaks {WIRE_VERSION}: run the same ovbench build on every rank"
    );
    assert!(r.stderr.contains(&line), "{}", r.stderr);
    assert!(
        !r.stdout.contains("p50"),
        "a table was printed:\n{}",
        r.stdout
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The same run with every rank on this build's version passes, so
    // the refusal above was the version's.
    let ok = latency(Some(&format!("1={WIRE_VERSION}")));
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
}
