//! A by-hand bandwidth sanity check (not a timed test): rank 0 keeps a
//! window of emulated RDMA writes or reads in flight to rank 1, which
//! only polls.
//!
//! `cargo run --release -p ovbench-tcp --example rmabw [write|read] [size] [count] [poll|thread]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ovbench_core::{Completion, LocalSlice, RmaOp};

mod common;

const WINDOW: usize = 16;

fn main() {
    let mut args = std::env::args().skip(1);
    let read = match args.next().as_deref() {
        None | Some("write") => false,
        Some("read") => true,
        Some(other) => panic!("unknown operation {other}: use write or read"),
    };
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1 << 20);
    let count: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let progress = common::progress_arg(&mut args);
    let (mut t0, mut target) = common::connected_pair(progress);
    let dst = target.alloc(size).expect("alloc");
    let key = target
        .register(LocalSlice::new(dst, 0, size))
        .expect("register")
        .key;
    let src = t0.alloc(size).expect("alloc");
    let ls = LocalSlice::new(src, 0, size);
    let smr = t0.register(ls).expect("register").mr;
    let stop = AtomicBool::new(false);
    let secs = std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || {
            let mut out = Vec::new();
            while !stop.load(Ordering::Acquire) {
                target.poll(&mut out, None).expect("poll");
                out.clear();
            }
        });
        let mut out = Vec::new();
        let (mut posted, mut done) = (0, 0);
        let t = Instant::now();
        let deadline = t + Duration::from_secs(60);
        while done < count {
            while posted < count && posted - done < WINDOW {
                t0.post_rma(1, RmaOp::write(ls, smr, &key, 0), posted as u64)
                    .expect("write");
                posted += 1;
            }
            t0.poll(&mut out, None).expect("poll");
            for c in out.drain(..) {
                match c {
                    Completion::Write { .. } | Completion::Read { .. } => done += 1,
                    other => panic!("{other:?}"),
                }
            }
            assert!(Instant::now() < deadline, "writes stalled");
        }
        let secs = t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Release);
        secs
    });
    println!(
        "tcp emulated {}, {size} B x {count}, window {WINDOW}, progress {progress}: {:.1} MB/s (10^6 B/s)",
        if read { "read" } else { "write" },
        (size * count) as f64 / secs / 1e6
    );
}
