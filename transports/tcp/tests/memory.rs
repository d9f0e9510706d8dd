//! Memory with one-sided operations in flight cannot be freed under them.

use std::time::{Duration, Instant};

use ovbench_conformance::{connect_all, Endpoints};
use ovbench_core::{Completion, LocalSlice, RmaOp, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

#[test]
fn free_waits_for_operations_in_flight() {
    let mut ts: Endpoints = (0..2)
        .map(|r| {
            Box::new(TcpTransport::new(r, 2, TcpOptions::default()).unwrap()) as Box<dyn Transport>
        })
        .collect();
    connect_all(&mut ts).unwrap();
    let remote = ts[1].alloc(4096).unwrap();
    let rmr_reg = ts[1].register(LocalSlice::new(remote, 0, 4096)).unwrap();
    let key = rmr_reg.key.clone();
    let local = ts[0].alloc(4096).unwrap();
    let ls = LocalSlice::new(local, 0, 4096);
    let lmr_reg = ts[0].register(ls).unwrap();
    let lmr = lmr_reg.mr;
    // Rank 1 does not poll yet, so the read stays in flight.
    ts[0].post_rma(1, RmaOp::read(ls, lmr, &key, 0), 1).unwrap();
    ts[0].deregister(lmr).unwrap();
    let e = ts[0].free(local).unwrap_err().to_string();
    assert!(e.contains("in flight") && e.contains("rank 1"), "{e}");

    let end = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while !out.iter().any(|c| matches!(c, Completion::Read { ctx: 1 })) {
        ts[1].poll(&mut Vec::new(), None).unwrap();
        ts[0].poll(&mut out, None).unwrap();
        assert!(Instant::now() < end, "the read never completed");
    }
    ts[0].free(local).unwrap();
}
