//! The libfabric transport end to end (issue 5's must-show): the real
//! binary, two local ranks over the shm provider. Own protocols move data
//! with fi_send and fi_write/fi_read (no tagged operation at all);
//! `--proto native` with fi_tsend/fi_trecv only. `--verify` checks every
//! byte of every size.

#![cfg(feature = "ofi")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::Count::{AtLeast, Zero};
use common::{check_ops, fabric_latency_rows, rendezvous, tagged_only};

const ITERS: u64 = 4;
const WARMUP: u64 = 1;
const LIMIT: Duration = Duration::from_secs(60);

/// Every ping-pong moves at least one message each way per iteration.
const MIN_MESSAGES: u64 = 2 * (ITERS + WARMUP);

/// `ovbench latency --transport ofi --provider PROVIDER --proto PROTO` at
/// 8 B and 1 MiB; the JSON rows.
fn latency(dir: &Path, provider: &str, proto: &str) -> Vec<serde_json::Value> {
    let name = provider.replace(';', "+");
    let out = dir.join(format!("latency-{name}-{proto}.json"));
    let fabric = ["--transport", "ofi", "--provider", provider];
    fabric_latency_rows(&out, &fabric, proto, ITERS, WARMUP, LIMIT)
}

#[test]
fn shm_native_issues_tagged_operations_only() {
    let native = tagged_only(MIN_MESSAGES);
    check_ops("ofi-native", &[("shm", "native", &native)], latency);
}

#[test]
fn shm_rdma_write_issues_sends_and_writes_never_tagged() {
    // --proto rdma-write is rendezvous at every size: one write per
    // message; RTS, CTS and FIN as fi_send messages.
    let write = rendezvous("writes", "reads", 3, MIN_MESSAGES);
    check_ops("ofi-write", &[("shm", "rdma-write", &write)], latency);
}

/// The default provider, tcp;ofi_rxm, both ways: the protocol split holds
/// there too.
#[test]
fn tcp_rxm_native_and_rdma_read() {
    let native = [
        ("tagged_sends", AtLeast(MIN_MESSAGES)),
        ("writes", Zero),
        ("reads", Zero),
    ];
    let read = [("tagged_sends", Zero), ("reads", AtLeast(MIN_MESSAGES))];
    let cases = [
        ("tcp;ofi_rxm", "native", &native[..]),
        ("tcp;ofi_rxm", "rdma-read", &read[..]),
    ];
    check_ops("ofi-tcp", &cases, latency);
}

/// An 8 B eager ping-pong over libfabric shm runs every timed message on
/// the engine's fast path, both ways.
#[test]
fn an_eager_ping_pong_takes_the_fast_path() {
    let dir = common::Scratch::new("ofi-fast");
    let fabric = ["--transport", "ofi", "--provider", "shm"];
    common::fast_path_ping_pong(&fabric, &dir.join("fast.json"), LIMIT);
}
