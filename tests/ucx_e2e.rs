//! The UCX transport end to end (issue 5's must-show): the real binary,
//! two local ranks, over UCX tcp and posix. Own protocols move data with
//! ovbench's active messages and put/get (no tagged operation at all);
//! `--proto native` with UCX's tag API only (no AM-carried protocol
//! message, no put/get). `--verify` checks every byte of every size.

#![cfg(feature = "ucx")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{
    check_ops, fabric_latency_rows, json, ovbench_rows, rendezvous, tagged_only, words, Scratch,
};

const ITERS: u64 = 4;
const WARMUP: u64 = 1;
const LIMIT: Duration = Duration::from_secs(60);

/// `ovbench latency --transport ucx --ucx-tls TLS --proto PROTO` at 8 B and
/// 1 MiB; the JSON rows.
fn latency(dir: &Path, tls: &str, proto: &str) -> Vec<serde_json::Value> {
    let out = dir.join(format!("latency-{tls}-{proto}.json"));
    let fabric = ["--transport", "ucx", "--ucx-tls", tls];
    fabric_latency_rows(&out, &fabric, proto, ITERS, WARMUP, LIMIT)
}

/// Every ping-pong moves at least one message each way per iteration.
const MIN_MESSAGES: u64 = 2 * (ITERS + WARMUP);

#[test]
fn native_issues_tagged_operations_only() {
    let native = tagged_only(MIN_MESSAGES);
    let cases = [("tcp", "native", &native[..]), ("posix", "native", &native)];
    check_ops("ucx-native", &cases, latency);
}

#[test]
fn rdma_read_issues_am_and_gets_never_tagged() {
    // --proto rdma-read is rendezvous at every size: one get per
    // message, RTS and FIN as active messages.
    let read = rendezvous("reads", "writes", 2, MIN_MESSAGES);
    let cases = [
        ("tcp", "rdma-read", &read[..]),
        ("posix", "rdma-read", &read),
    ];
    check_ops("ucx-read", &cases, latency);
}

/// `ovbench overlap --transport ucx --ucx-tls posix --proto PROTO` at
/// 1 MiB with computation up to twice xfer_time; the JSON rows.
fn overlap(dir: &Path, proto: &str) -> Vec<serde_json::Value> {
    let out = dir.join(format!("overlap-{proto}.json"));
    let args = format!(
        "overlap --transport ucx --ucx-tls posix --proto {proto} \
         --sizes 1M --iters 5 --steps 2 --xfer-reps 5"
    );
    let (_, rows) = ovbench_rows(&words(&args), &out, LIMIT);
    assert_eq!(rows.len(), 3, "{proto}: {rows:?}");
    rows
}

fn side(row: &serde_json::Value, side: &str, key: &str) -> f64 {
    row[side][key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {side}.{key} in {row}"))
}

#[test]
fn overlap_native_is_call_bounded_and_rdma_read_brackets_its_steps() {
    let dir = Scratch::new("ucx-overlap");
    // Native: UCX gives call events only, so each transfer spans its
    // posting call's entry to its completing call's exit and the bounds
    // are the paper's case 3: min = 0, max = min(computation, xfer_time).
    let native = overlap(&dir, "native");
    for row in &native {
        for s in ["sender", "receiver"] {
            assert_eq!(side(row, s, "min_overlap_ns"), 0.0, "native {s}: {row}");
            let max = side(row, s, "max_overlap_ns");
            assert!(max <= side(row, s, "computation_ns") + 1.0, "{s}: {row}");
            assert!(max <= side(row, s, "data_transfer_ns") + 1.0, "{s}: {row}");
            assert_eq!(side(row, s, "one_sided",), 0.0, "{s}: {row}");
        }
    }
    let last = native.last().unwrap();
    assert!(last["comp_ns"].as_f64().unwrap() > 0.0, "{last}");
    assert!(side(last, "sender", "max_overlap_ns") > 0.0, "{last}");
    // rdma-read: the engine stamps the real transfer, so its bounds are
    // the transfer's own, no longer the calls'. Whether a transfer lands
    // inside the computation (a positive lower bound) is the schedule's
    // doing: a loaded machine delays the sender past the receiver's
    // computation (three runs in a row showed none while a VM ran beside
    // this test). That claim is proved under the sim, where the schedule
    // is the model's (tests/fidelity_overlap.rs,
    // rdma_read_lower_bound_is_positive_where_the_read_lands_in_the_computation,
    // and bounds_bracket_the_truth_...); here every row must be a bracket
    // of its step: every transfer recorded,
    // 0 <= min <= max <= min(computation, transfer time).
    let read = overlap(&dir, "rdma-read");
    for row in &read {
        for s in ["sender", "receiver"] {
            let (min, max) = (
                side(row, s, "min_overlap_ns"),
                side(row, s, "max_overlap_ns"),
            );
            assert!((0.0..=max).contains(&min), "rdma-read {s}: {row}");
            assert!(max <= side(row, s, "computation_ns") + 1.0, "{s}: {row}");
            assert!(max <= side(row, s, "data_transfer_ns") + 1.0, "{s}: {row}");
            assert_eq!(side(row, s, "transfers"), 5.0, "{s}: {row}");
        }
    }
}

/// The value of the transport setting `key` in a run's JSON header.
fn transport_setting(doc: &serde_json::Value, key: &str) -> String {
    let extra = doc["header"]["communicator"]["transport"]["extra"]
        .as_array()
        .unwrap_or_else(|| panic!("no transport extra in {doc}"));
    extra
        .iter()
        .find(|kv| kv[0] == key)
        .and_then(|kv| kv[1].as_str())
        .unwrap_or_else(|| panic!("no {key} among {extra:?}"))
        .to_string()
}

/// `--ucx-connect sockaddr` (UCX's client-server path, over tcp's
/// connection manager here) runs every own protocol and native with
/// `--verify`, and the JSON names the path and the lanes; pipelined runs
/// by the worker path too (each message re-registers its fragments: a
/// key must not repeat a revoked one).
#[test]
fn sockaddr_path_runs_every_protocol_verified() {
    let dir = Scratch::new("ucx-sockaddr");
    let cases = [
        ("sockaddr", "eager"),
        ("sockaddr", "rdma-write"),
        ("sockaddr", "rdma-read"),
        ("sockaddr", "pipelined"),
        ("sockaddr", "native"),
        ("worker", "pipelined"),
    ];
    for (path, proto) in cases {
        let out = dir.join(format!("{path}-{proto}.json"));
        let fabric = format!("--transport ucx --ucx-tls tcp --ucx-connect {path}");
        fabric_latency_rows(&out, &words(&fabric), proto, ITERS, WARMUP, LIMIT);
        let doc = json(&out);
        let connect = transport_setting(&doc, "ucx_connect");
        assert!(connect.starts_with(path), "{path}/{proto}: {connect}");
        let lanes = transport_setting(&doc, "ucx_lanes");
        assert!(lanes.contains("tcp/lo"), "{path}/{proto}: {lanes}");
        // This host has no RDMA: the client-server path goes through tcp's
        // connection manager.
        assert_eq!(
            lanes.contains("cm tcp"),
            path == "sockaddr",
            "{path}/{proto}: {lanes}"
        );
    }
}

/// An 8 B eager ping-pong over UCX shared memory runs every timed message
/// on the engine's fast path, both ways.
#[test]
fn an_eager_ping_pong_takes_the_fast_path() {
    let dir = Scratch::new("ucx-fast");
    let fabric = ["--transport", "ucx", "--ucx-tls", "posix"];
    common::fast_path_ping_pong(&fabric, &dir.join("fast.json"), LIMIT);
}
