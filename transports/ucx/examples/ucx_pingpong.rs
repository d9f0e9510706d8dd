//! A by-hand latency sanity check (not a timed test): 8-byte ping-pong
//! between two `UcxTransport`s on two threads, busy polling, through
//! ovbench's active-message path (`am`) or UCX's tag protocol (`native`).
//!
//! `cargo run --release -p ovbench-ucx --example ucx_pingpong [am|native] [tls] [iters]`
//! prints the median and 1st/99th percentile one-way time (RTT/2).

use ovbench_core::{Progress, Transport};
use ovbench_ucx::{UcxOptions, UcxTransport};

fn main() {
    ovbench_conformance::pingpong::main("ucx", "posix", |r, tls| {
        let opts = UcxOptions {
            tls: Some(tls.into()),
            net_devices: None,
            progress: Progress::Poll,
            ..UcxOptions::default()
        };
        Box::new(UcxTransport::new(r, 2, opts).expect("UCX")) as Box<dyn Transport>
    });
}
