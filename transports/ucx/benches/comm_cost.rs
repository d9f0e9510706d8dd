//! What ovbench's own eager protocol adds to a small message over UCX
//! shared memory, against UCX's tag protocol (see
//! `ovbench_conformance::comm_cost`).
//!
//! `cargo bench -p ovbench-ucx --bench comm_cost [-- tls]` (default posix)

use ovbench_conformance::comm_cost;
use ovbench_core::Progress;
use ovbench_ucx::{UcxOptions, UcxTransport};

fn main() {
    let tls = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "posix".into());
    comm_cost::main(&format!("UCX {tls}"), 3, || {
        [0, 1].map(|r| {
            let opts = UcxOptions {
                tls: Some(tls.clone()),
                net_devices: None,
                progress: Progress::Poll,
            };
            UcxTransport::new(r, 2, opts).expect("UCX")
        })
    });
}
