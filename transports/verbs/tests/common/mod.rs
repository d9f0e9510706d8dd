//! Shared by the integration tests: whether a device exists, and endpoints.

use ovbench_core::Transport;
use ovbench_verbs::{DeviceList, VerbsOptions, VerbsTransport};

/// True when an RDMA device is present. Without one the device tests are
/// skipped (loudly) unless `OVBENCH_VERBS_REQUIRE_DEVICE=1` — the soft-RoCE
/// VM sets it, so there a missing device fails the run.
pub fn have_device(test: &str) -> bool {
    let list = DeviceList::new().expect("ibv_get_device_list");
    if !list.is_empty() {
        return true;
    }
    if std::env::var("OVBENCH_VERBS_REQUIRE_DEVICE").as_deref() == Ok("1") {
        panic!("{test}: OVBENCH_VERBS_REQUIRE_DEVICE=1 but there is no RDMA device");
    }
    eprintln!("{test}: SKIPPED, no RDMA device on this host (ci/softroce-vm runs it on rdma_rxe)");
    false
}

/// `n` unconnected endpoints with `opts`.
pub fn make_with(n: u32, opts: &VerbsOptions) -> Vec<Box<dyn Transport>> {
    (0..n)
        .map(|r| {
            let t = VerbsTransport::new(r, n, opts.clone())
                .unwrap_or_else(|e| panic!("rank {r}: VerbsTransport::new: {e}"));
            Box::new(t) as Box<dyn Transport>
        })
        .collect()
}
