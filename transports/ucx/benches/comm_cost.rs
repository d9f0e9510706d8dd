//! What ovbench's own eager protocol adds to a small message over UCX
//! shared memory, against UCX's tag protocol (see
//! `ovbench_conformance::comm_cost`).
//!
//! `cargo bench -p ovbench-ucx --bench comm_cost [-- tls]` (default posix)

use ovbench_conformance::comm_cost;
use ovbench_ucx::{UcxOptions, UcxTransport};

fn main() {
    comm_cost::main("UCX", "posix", 3, |tls, r| {
        let opts = UcxOptions {
            tls: Some(tls.into()),
            ..UcxOptions::default()
        };
        UcxTransport::new(r, 2, opts).expect("UCX")
    });
}
