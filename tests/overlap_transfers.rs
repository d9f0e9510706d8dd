//! overlap over TCP records every transfer of every step on both sides.
//!
//! The sender leaves the barrier that starts a step before the receiver
//! does and streams its eager messages; the receiver's last barrier poll
//! may take all of them. While recording began only after that barrier,
//! such a step showed no receiver transfer at all (r.max% 0.0), in about
//! one run in five here. Recording now starts before the barrier.
//!
//! The first test runs the method 20 times as a user would; the second
//! (feature `test-hooks`) makes the race certain with the TCP transport's
//! stall hook: rank 1 sleeps after sending each 36-byte message (a
//! barrier message, the general header alone), so rank 0's whole step
//! waits unread in its socket when rank 1's barrier poll comes.

mod common;

use std::time::Duration;

use common::{rows, Scratch};

const LIMIT: Duration = Duration::from_secs(120);
const ITERS: u64 = 5;

/// Every step row of `doc`: (size, step, sender transfers, receiver
/// transfers).
fn transfers(doc: &serde_json::Value) -> Vec<(u64, u64, u64, u64)> {
    rows(doc)
        .iter()
        .filter(|r| r.get("receiver").is_some())
        .map(|r| {
            let n = |side: &str| {
                r[side]["transfers"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("no {side}.transfers in {r}"))
            };
            let (size, step) = (r["size"].as_u64().unwrap(), r["step"].as_u64().unwrap());
            (size, step, n("sender"), n("receiver"))
        })
        .collect()
}

/// `ovbench overlap` over TCP at 8 B and 1 KiB (eager), `ITERS` transfers
/// a step, with `env` set; the step rows.
fn overlap(out: &std::path::Path, env: &[(&str, &str)]) -> Vec<(u64, u64, u64, u64)> {
    let iters = ITERS.to_string();
    let mut cmd = common::command(&[
        "overlap",
        "--transport",
        "tcp",
        "--sizes",
        "8,1K",
        "--iters",
        &iters,
        "--steps",
        "2",
        "--xfer-reps",
        "3",
        "--json",
    ]);
    cmd.arg(out).env_remove("OVBENCH_TCP_STALL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let r = common::run(&mut cmd, LIMIT).expect_ok();
    let steps = transfers(&common::json(out));
    assert_eq!(steps.len(), 2 * 3, "{}", r.stdout);
    steps
}

fn every_step_whole(steps: &[(u64, u64, u64, u64)], what: &str) {
    for &(size, step, s, r) in steps {
        assert_eq!(
            (s, r),
            (ITERS, ITERS),
            "{what}: {size} B step {step}: sender {s}, receiver {r} transfers of {ITERS}"
        );
    }
}

// (Runs in the tool-tests stage; the integrity stage, built with the
// hooks, runs the stalled one only.)
#[cfg(not(feature = "test-hooks"))]
#[test]
fn every_step_records_every_transfer_in_20_runs() {
    let dir = Scratch::new("overlap-transfers");
    for run in 0..20 {
        let steps = overlap(&dir.join(format!("run{run}.json")), &[]);
        every_step_whole(&steps, &format!("run {run}"));
    }
}

#[cfg(feature = "test-hooks")]
#[test]
fn a_receiver_late_in_the_steps_barrier_records_every_transfer() {
    let dir = Scratch::new("overlap-stalled");
    let steps = overlap(
        &dir.join("stalled.json"),
        &[("OVBENCH_TCP_STALL", "36:150@1")],
    );
    every_step_whole(&steps, "rank 1 stalled after its barrier messages");
}
