//! `--verify` catches one corrupted message: the TCP transport's test
//! hook (feature `test-hooks`, never in a release build) flips one payload
//! byte of one message mid-run, and the run must fail with status 1 and
//! an error naming the size, the iteration of the verification pass and
//! the offset; the same run without the hook passes.
//!
//! `cargo test -p ovbench --features test-hooks --test verify_corruption`

#![cfg(feature = "test-hooks")]

mod common;

use std::time::Duration;

use common::serial;
use ovbench::bench::latency::default_counts;

const LIMIT: Duration = Duration::from_secs(120);
const ITERS: u64 = 50;
/// The size whose message is corrupted.
const SIZE: usize = 4096;
/// The iteration of the verification pass (from 1) whose message is bad.
const BAD: u64 = 7;

/// `ovbench latency --transport tcp --sizes 8,4K,64K --iters 50 --verify`
/// plus `extra`, with `OVBENCH_TCP_CORRUPT=corrupt` when given: (exit
/// code, stderr).
fn latency(extra: &[&str], corrupt: Option<&str>) -> (Option<i32>, String) {
    let iters = ITERS.to_string();
    let mut cmd = common::command(&[
        "latency",
        "--transport",
        "tcp",
        "--sizes",
        "8,4K,64K",
        "--iters",
        &iters,
        "--verify",
    ]);
    cmd.args(extra).env_remove("OVBENCH_TCP_CORRUPT");
    if let Some(c) = corrupt {
        cmd.env("OVBENCH_TCP_CORRUPT", c);
    }
    let r = common::run(&mut cmd, LIMIT);
    (r.code, r.stderr)
}

/// The hook's value for the message `sender` sends in iteration [`BAD`]
/// of the 4 KiB verification pass: the pass follows the size's warm-up
/// and timed messages (`SIZE:N@RANK`, N counted from 1).
fn hook(sender: u32) -> String {
    let n = default_counts(SIZE).warmup + ITERS + BAD;
    format!("{SIZE}:{n}@{sender}")
}

/// The run failed as one corrupted message of `SIZE` bytes from `sender`
/// to `receiver` should make it: status 1, and an error naming the size,
/// the iteration, the offset (the hook flips the middle byte) and the
/// bytes (the expected one, inverted).
fn assert_caught((code, stderr): (Option<i32>, String), sender: u32, receiver: u32) {
    assert_eq!(code, Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("--verify failed"))
        .unwrap_or_else(|| panic!("no --verify error in:\n{stderr}"));
    let want = format!(
        "--verify failed at size {SIZE}, iteration {BAD} of {ITERS} of the verification pass: rank {receiver} received from rank {sender} a wrong byte at offset {}",
        SIZE / 2
    );
    assert!(line.contains(&want), "{line}\nwants: {want}");
    let hex = |key: &str| {
        let at = line
            .find(key)
            .unwrap_or_else(|| panic!("no {key} in {line}"))
            + key.len();
        u8::from_str_radix(&line[at + 2..at + 4], 16).expect("a hex byte")
    };
    assert_eq!(hex("expected ") ^ 0xff, hex("got "), "{line}");
}

#[test]
fn a_clean_run_passes() {
    let _g = serial();
    let (code, stderr) = latency(&[], None);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("--verify failed"), "{stderr}");
}

#[test]
fn one_corrupted_eager_message_is_caught_with_its_iteration_and_offset() {
    let _g = serial();
    // Rank 1's reply: rank 0 finds it.
    assert_caught(latency(&[], Some(&hook(1))), 1, 0);
}

#[test]
fn one_corrupted_rdma_write_is_caught_with_its_iteration_and_offset() {
    let _g = serial();
    // Emulated RMA: the write's data frame; rank 0's ping, found by rank 1.
    assert_caught(latency(&["--proto", "rdma-write"], Some(&hook(0))), 0, 1);
    let (code, stderr) = latency(&["--proto", "rdma-write"], None);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_corrupted_read_response_is_caught() {
    let _g = serial();
    // Raw read: rank 1 only serves reads; its read response is the data.
    assert_caught(
        latency(&["--proto", "raw", "--op", "read"], Some(&hook(1))),
        1,
        0,
    );
}
