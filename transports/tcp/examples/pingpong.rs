//! A by-hand latency sanity check (not a timed test): 8-byte ping-pong
//! between two `TcpTransport`s on two threads, busy polling, through the
//! runner the fabric crates' examples share (TCP has no tagged protocol,
//! so only `am`; its `tls` argument is the progress mode).
//!
//! `cargo run --release -p ovbench-tcp --example pingpong [am] [poll|thread] [iters]`
//! prints the median and 1st/99th percentile one-way time (RTT/2).

use ovbench_core::Transport;
use ovbench_tcp::{TcpOptions, TcpTransport};

fn main() {
    ovbench_conformance::pingpong::main("tcp", "poll", |r, progress| {
        let opts = TcpOptions {
            progress: progress.parse().unwrap_or_else(|e| {
                eprintln!("pingpong: {e}");
                std::process::exit(2)
            }),
            ..TcpOptions::default()
        };
        Box::new(TcpTransport::new(r, 2, opts).expect("listen")) as Box<dyn Transport>
    });
}
