//! A by-hand latency sanity check (not a timed test): 8-byte ping-pong
//! between two `TcpTransport`s on two threads, busy polling.
//!
//! `cargo run --release -p ovbench-tcp --example pingpong [iters] [poll|thread]`
//! prints the median and 1st/99th percentile one-way time (RTT/2).

use std::time::{Duration, Instant};

use ovbench_core::{Completion, Rank, Transport};

mod common;

const WARMUP: usize = 1000;

/// Busy-poll until a message arrives; recycle it.
fn recv(t: &mut dyn Transport, me: Rank, out: &mut Vec<Completion>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        t.poll(out, None).expect("poll");
        let mut got = false;
        for c in out.drain(..) {
            match c {
                Completion::Recv { data, .. } => {
                    t.recycle(data);
                    got = true;
                }
                Completion::Send { .. } => {}
                other => panic!("rank {me}: {other:?}"),
            }
        }
        if got {
            return;
        }
        assert!(Instant::now() < deadline, "rank {me}: no message for 10 s");
    }
}

fn rank_loop(mut t: Box<dyn Transport>, iters: usize) -> Vec<f64> {
    let me = t.info().rank;
    let peer: Rank = 1 - me;
    let msg = [0u8; 8];
    let mut out = Vec::new();
    let mut rtts = Vec::with_capacity(iters);
    for i in 0..WARMUP + iters {
        let t0 = Instant::now();
        if me == 0 {
            t.post_send(peer, &msg, None, i as u64).expect("send");
            recv(t.as_mut(), me, &mut out);
        } else {
            recv(t.as_mut(), me, &mut out);
            t.post_send(peer, &msg, None, i as u64).expect("send");
        }
        if i >= WARMUP {
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    // Let the last send leave before the transport goes.
    for _ in 0..100 {
        t.poll(&mut out, None).expect("poll");
    }
    rtts
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iters: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let progress = common::progress_arg(&mut args);
    let (t0, t1) = common::connected_pair(progress);
    let h = std::thread::spawn(move || rank_loop(t1, iters));
    let mut rtts = rank_loop(t0, iters);
    h.join().expect("rank 1");
    rtts.sort_by(f64::total_cmp);
    let q = |p: f64| rtts[((rtts.len() - 1) as f64 * p) as usize] / 2.0;
    println!(
        "tcp 8 B ping-pong, progress {progress}, {iters} iterations: one-way p50 {:.2} us, p1 {:.2} us, p99 {:.2} us",
        q(0.5),
        q(0.01),
        q(0.99)
    );
}
