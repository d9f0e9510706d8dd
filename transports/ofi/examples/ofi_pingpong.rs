//! A by-hand latency sanity check (not a timed test): 8-byte ping-pong
//! between two `OfiTransport`s on two threads, busy polling, through
//! ovbench's fi_send path (`am`) or libfabric's tagged interface (`native`).
//!
//! `cargo run --release -p ovbench-ofi --example ofi_pingpong [am|native] [provider] [iters]`
//! prints the median and 1st/99th percentile one-way time (RTT/2).

use ovbench_core::Transport;
use ovbench_ofi::{OfiOptions, OfiTransport};

fn main() {
    ovbench_conformance::pingpong::main("ofi", "shm", |r, tls| {
        let opts = OfiOptions {
            provider: tls.into(),
            ..OfiOptions::default()
        };
        Box::new(OfiTransport::new(r, 2, opts).expect("libfabric")) as Box<dyn Transport>
    });
}
