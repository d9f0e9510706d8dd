//! The libfabric transport end to end (issue 5's must-show): the real
//! binary, two local ranks over the shm provider. Own protocols move data
//! with fi_send and fi_write/fi_read (no tagged operation at all);
//! `--proto native` with fi_tsend/fi_trecv only. `--verify` checks every
//! byte of every size.

#![cfg(feature = "ofi")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{fabric_latency_rows, ops, scratch, serial};

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
    let _g = serial();
    let dir = scratch("ofi-native");
    for row in latency(&dir, "shm", "native") {
        assert!(ops(&row, "tagged_sends") >= MIN_MESSAGES, "{row}");
        for k in ["sends", "writes", "reads"] {
            assert_eq!(ops(&row, k), 0, "native issued {k}: {row}");
        }
        assert!(row["p50_ns"].as_f64().unwrap() > 0.0, "{row}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shm_rdma_write_issues_sends_and_writes_never_tagged() {
    let _g = serial();
    let dir = scratch("ofi-write");
    for row in latency(&dir, "shm", "rdma-write") {
        assert_eq!(ops(&row, "tagged_sends"), 0, "{row}");
        // --proto rdma-write is rendezvous at every size: one write per
        // message; RTS, CTS and FIN as fi_send messages.
        assert!(ops(&row, "writes") >= MIN_MESSAGES, "{row}");
        assert!(ops(&row, "sends") >= 3 * MIN_MESSAGES, "{row}");
        assert_eq!(ops(&row, "reads"), 0, "{row}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The default provider, tcp;ofi_rxm, both ways: the protocol split holds
/// there too.
#[test]
fn tcp_rxm_native_and_rdma_read() {
    let _g = serial();
    let dir = scratch("ofi-tcp");
    for row in latency(&dir, "tcp;ofi_rxm", "native") {
        assert!(ops(&row, "tagged_sends") >= MIN_MESSAGES, "{row}");
        assert_eq!(ops(&row, "writes") + ops(&row, "reads"), 0, "{row}");
    }
    for row in latency(&dir, "tcp;ofi_rxm", "rdma-read") {
        assert_eq!(ops(&row, "tagged_sends"), 0, "{row}");
        assert!(ops(&row, "reads") >= MIN_MESSAGES, "{row}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
