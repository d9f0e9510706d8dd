//! A by-hand latency sanity check (not a timed test) shared by the fabric
//! crates' `*_pingpong` examples: 8-byte ping-pong between two ranks on
//! two threads, busy polling, through ovbench's own send path (`am`) or
//! the library's tagged interface (`native`); prints the median and
//! 1st/99th percentile one-way time (RTT/2).

use std::time::{Duration, Instant};

use crate::connect_all;
use ovbench_core::{Completion, LocalSlice, Msg, Rank, TagRecv, TagSend, Tagged, Transport};

const WARMUP: usize = 1000;
const SIZE: usize = 8;

/// Busy-poll until `want` says a completion is the one awaited.
fn wait(
    t: &mut dyn Transport,
    me: Rank,
    out: &mut Vec<Completion>,
    want: &dyn Fn(&Completion) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    // The clock is read every 1024 polls only: reading it each time would
    // be a good part of what a small-message round trip measures.
    for polls in 0u32.. {
        t.poll(out, None).expect("poll");
        let mut got = false;
        for c in out.drain(..) {
            if let Completion::Error { .. } = c {
                panic!("rank {me}: {c:?}");
            }
            got |= want(&c);
            if let Completion::Recv { data, .. } = c {
                t.recycle(data);
            }
        }
        if got {
            return;
        }
        assert!(
            polls % 1024 != 0 || Instant::now() < deadline,
            "rank {me}: nothing for 10 s"
        );
    }
}

/// The transport's tagged protocol (`native` mode needs one).
fn tagged(t: &mut Box<dyn Transport>) -> &mut dyn Tagged {
    t.tagged()
        .expect("native mode needs a transport with a tagged protocol")
}

fn rank_loop(mut t: Box<dyn Transport>, iters: usize, native: bool) -> Vec<f64> {
    let me = t.info().rank;
    let peer: Rank = 1 - me;
    let region = t.alloc(2 * SIZE).expect("alloc");
    let (sbuf, rbuf) = (
        LocalSlice::new(region, 0, SIZE),
        LocalSlice::new(region, SIZE, SIZE),
    );
    let msg = [0u8; SIZE];
    let mut out = Vec::new();
    let is_recv =
        |c: &Completion| matches!(c, Completion::Recv { .. } | Completion::TaggedRecv { .. });
    let mut rtts = Vec::with_capacity(iters);
    for i in 0..WARMUP + iters {
        let t0 = Instant::now();
        let send = |t: &mut Box<dyn Transport>| {
            // A send that ends inside the call (Posted::Done) or later
            // (Queued): either way the pong is what is waited for.
            if native {
                tagged(t)
                    .tsend(TagSend::new(peer, 1, sbuf, false), i as u64)
                    .expect("tsend");
            } else {
                t.post_send(peer, Msg::new(&msg, None), i as u64)
                    .expect("send");
            }
        };
        if native {
            tagged(&mut t)
                .trecv(TagRecv::new(Some(peer), Some(1), rbuf), i as u64)
                .expect("trecv");
        }
        if me == 0 {
            send(&mut t);
            wait(t.as_mut(), me, &mut out, &is_recv);
        } else {
            wait(t.as_mut(), me, &mut out, &is_recv);
            send(&mut t);
        }
        if i >= WARMUP {
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    // Let the last send leave before the transport goes.
    for _ in 0..1000 {
        t.poll(&mut out, None).expect("poll");
    }
    rtts
}

/// A bad command line: one line saying what to do, exit status 2.
fn usage(what: &str) -> ! {
    eprintln!("pingpong: {what}");
    std::process::exit(2)
}

/// The example's whole run: arguments `[am|native] [tls] [iters]` from the
/// command line (`tls` defaults to `default_tls`), two ranks from `open`
/// (rank, tls), connected, ping-ponging; the line printed starts with
/// `name`.
pub fn main(name: &str, default_tls: &str, open: impl Fn(Rank, &str) -> Box<dyn Transport>) {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "am".into());
    let native = match mode.as_str() {
        "am" => false,
        "native" => true,
        m => usage(&format!("mode {m}: use am or native")),
    };
    let tls = args.next().unwrap_or_else(|| default_tls.into());
    let iters: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let mut ts: Vec<Box<dyn Transport>> = (0..2).map(|r| open(r, &tls)).collect();
    if native && ts[0].tagged().is_none() {
        usage(&format!("{name} has no tagged protocol: use mode am"));
    }
    connect_all(&mut ts).expect("connect");
    let t1 = ts.pop().expect("two");
    let t0 = ts.pop().expect("two");
    let h = std::thread::spawn(move || rank_loop(t1, iters, native));
    let mut rtts = rank_loop(t0, iters, native);
    h.join().expect("rank 1");
    rtts.sort_by(f64::total_cmp);
    let q = |p: f64| rtts[((rtts.len() - 1) as f64 * p) as usize] / 2.0;
    println!(
        "{name} {tls} {mode} {SIZE} B ping-pong, {iters} iterations: one-way p50 {:.2} us, p1 {:.2} us, p99 {:.2} us",
        q(0.5),
        q(0.01),
        q(0.99)
    );
}
