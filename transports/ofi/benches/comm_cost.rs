//! What ovbench's own eager protocol adds to a small message over a
//! libfabric provider, against its tagged messages (see
//! `ovbench_conformance::comm_cost`).
//!
//! `cargo bench -p ovbench-ofi --bench comm_cost [-- provider]` (default shm)

use ovbench_conformance::comm_cost;
use ovbench_core::Progress;
use ovbench_ofi::{OfiOptions, OfiTransport};

fn main() {
    comm_cost::main("libfabric", "shm", 3, |provider, r| {
        let opts = OfiOptions {
            provider: provider.into(),
            node: None,
            progress: Progress::Poll,
            delivery_complete: None,
        };
        OfiTransport::new(r, 2, opts).expect("libfabric")
    });
}
