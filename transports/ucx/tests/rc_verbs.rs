//! The conformance suite over UCX's rc_verbs on an RDMA device, by both
//! connection paths: worker addresses (rc wired up through ud_verbs,
//! whose DGID check ovbench turns off on soft-RoCE) and client-server
//! (`rc_verbs` alone, wired up through rdmacm). Every check but
//! `peer_dropped_reported`: in one process the dropped rank's endpoints
//! close silently and UCX's rc declares the peer dead only once its
//! retransmissions run out (`UCX_RC_TIMEOUT` times `UCX_RC_RETRY_COUNT`,
//! past the check's 5 s); between processes the pid watch reports a dead
//! rank (tests/processes.rs). The soft-RoCE VM
//! (`ci/softroce-vm`) runs it with `OVB_UCX_RC_DEVICE=rxe0:1`; without
//! that variable (no RDMA device, as on this project's hosts) each test
//! says it skipped and passes.

use ovbench_conformance::Endpoints;
use ovbench_core::{Progress, RmaProgress};
use ovbench_ucx::{UcxConnect, UcxOptions, UcxTransport};

/// The device the VM names, or `None` (skip).
fn device() -> Option<String> {
    let d = std::env::var("OVB_UCX_RC_DEVICE")
        .ok()
        .filter(|d| !d.is_empty());
    if d.is_none() {
        eprintln!("skipped: OVB_UCX_RC_DEVICE names no RDMA device (ci/softroce-vm sets it)");
    }
    d
}

fn make(n: u32, dev: &str, tls: &str, connect: UcxConnect) -> Endpoints {
    ovbench_conformance::endpoints(n, |r| {
        let opts = UcxOptions {
            tls: Some(tls.into()),
            net_devices: Some(dev.into()),
            progress: Progress::Poll,
            connect,
        };
        UcxTransport::new(r, n, opts).unwrap_or_else(|e| panic!("UCX over {tls} on {dev}: {e}"))
    })
}

/// Every check on fresh endpoints, then the lanes: rc_verbs on the
/// device, RMA offloaded.
fn suite(tls: &str, connect: UcxConnect, path: &str) {
    let Some(dev) = device() else { return };
    let make = |n| make(n, &dev, tls, connect);
    let failed: Vec<String> = ovbench_conformance::CHECKS
        .iter()
        .filter(|(name, _)| *name != "peer_dropped_reported")
        .filter_map(|(name, check)| {
            let r = ovbench_conformance::run_check(*check, &make, 2);
            r.err().map(|e| format!("{name}: {e}"))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{path} over {tls} on {dev}:\n{}",
        failed.join("\n")
    );
    let mut ts = make(2);
    ovbench_conformance::connect_all(&mut ts).expect("connect");
    let info = ts[0].info();
    let get = |k: &str| {
        info.extra
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let lanes = get("ucx_lanes");
    let name = dev.split(':').next().unwrap_or(&dev);
    assert!(
        lanes.contains(&format!("rc_verbs/{name}")),
        "{path}: {lanes}"
    );
    assert!(
        get("ucx_connect").starts_with(path),
        "{}",
        get("ucx_connect")
    );
    assert_eq!(info.caps.rma_progress, RmaProgress::Offloaded, "{lanes}");
    eprintln!(
        "{path} over {tls} on {dev}: every check passed; lanes {lanes}; UD DGID check: {}",
        get("ud_eth_dgid_check")
    );
}

#[test]
fn rc_verbs_by_worker_address() {
    suite("rc_verbs,ud_verbs", UcxConnect::Worker, "worker");
}

#[test]
fn rc_verbs_by_client_server() {
    suite("rc_verbs", UcxConnect::Sockaddr, "sockaddr");
}
