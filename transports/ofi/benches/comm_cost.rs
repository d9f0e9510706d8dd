//! What ovbench's own eager protocol adds to a small message over a
//! libfabric provider, against its tagged messages (see
//! `ovbench_conformance::comm_cost`).
//!
//! `cargo bench -p ovbench-ofi --bench comm_cost [-- provider]` (default shm)

use ovbench_conformance::comm_cost;
use ovbench_core::Progress;
use ovbench_ofi::{OfiOptions, OfiTransport};

fn main() {
    let prov = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "shm".into());
    comm_cost::main(&format!("libfabric {prov}"), 3, || {
        [0, 1].map(|r| {
            let opts = OfiOptions {
                provider: prov.clone(),
                node: None,
                progress: Progress::Poll,
                delivery_complete: None,
            };
            OfiTransport::new(r, 2, opts).expect("libfabric")
        })
    });
}
