//! Host cost of the engine per eager message (no transport): the sender's
//! side (isend, its packet handed out and completed, the request
//! retired), the receiver's side (irecv, the packet's arrival, the
//! request retired) and both together. Run with
//! `cargo bench -p ovbench-proto --bench engine_cost [-- sender|direct|receiver|both]`
//! (one side alone, e.g. under a profiler; `direct`: the sender as
//! `isend_direct` posts it).

use std::hint::black_box;
use std::time::Instant;

use ovbench_proto::{Config, Engine, Mode, Op, Protocol, Slice, Space};

const N: u64 = 1_000_000;

fn engine(rank: u32) -> Engine {
    let mut c = Config::new(rank, 2, 8192);
    c.protocol = Protocol::Eager;
    Engine::new(c).expect("config")
}

/// Best of five timings of `N` calls of `f`, in ns per call.
fn best(mut f: impl FnMut(u64)) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = Instant::now();
        for i in 0..N {
            f(i);
        }
        best = best.min(t0.elapsed().as_nanos() as f64 / N as f64);
    }
    best
}

/// One message from `a`: its packet, with `payload` appended, goes to
/// `deliver`; its completion and its retirement follow.
fn send_one(a: &mut Engine, i: u64, payload: &[u8], deliver: &mut dyn FnMut(&[u8])) {
    let sr = a
        .isend(
            i,
            Slice::new(0, 0, payload.len()),
            1,
            1,
            Mode::Standard,
            Space::User,
        )
        .expect("isend");
    while let Some(op) = a.poll_op() {
        if let Op::Send { header, ctx, .. } = op {
            let mut msg = header;
            msg.extend_from_slice(payload);
            deliver(&msg);
            a.on_completion(i, ctx).expect("completion");
            a.recycle_header(msg);
        }
    }
    black_box(a.take(sr));
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let run = |side: &str| only.as_deref().map_or(true, |o| o == side);
    let payload = [7u8; 8];
    let dst = Slice::new(0, 0, 8);
    let mut line = Vec::new();

    if run("sender") {
        let mut a = engine(0);
        let sender = best(|i| {
            send_one(&mut a, i, &payload, &mut |m| {
                black_box(m);
            })
        });

        line.push(format!("sender {sender:.0} ns"));
    }
    if run("direct") {
        // The sender's side as the engine Comm drives a one-packet eager send:
        // isend_direct's header posted at once, no operation queue.
        let mut a = engine(0);
        let src = Slice::new(0, 0, payload.len());
        let mut hdr = Vec::new();
        let direct = best(|i| {
            let d = a
                .isend_direct(i, src, src, 1, 1, Mode::Standard, Space::User, &mut hdr)
                .expect("isend_direct")
                .expect("a one-packet eager send");
            black_box(&hdr);
            a.on_completion(i, d.ctx).expect("completion");
            black_box(a.take(d.req));
        });
        line.push(format!("sender, direct {direct:.0} ns"));
    }
    if run("receiver") {
        // The receiver takes copies of one packet with the sequence number
        // (bytes 4..8 of the header) the sender's next packets would carry,
        // from a ring: a copy is renumbered 64 arrivals before its turn, so
        // the arrival never reads bytes stored a moment earlier.
        let mut packet = Vec::new();
        send_one(&mut engine(0), 0, &payload, &mut |m| packet = m.to_vec());
        let mut ring: Vec<Vec<u8>> = (0..64u32)
            .map(|k| {
                let mut p = packet.clone();
                p[4..8].copy_from_slice(&k.to_le_bytes());
                p
            })
            .collect();
        let mut b = engine(1);
        let mut seq = 0u32;
        let receiver = best(|i| {
            let rr = b
                .irecv(i, dst, Some(0), Some(1), Space::User)
                .expect("irecv");
            let slot = &mut ring[seq as usize % 64];
            black_box(b.on_message(i, 0, slot).expect("arrival"));
            slot[4..8].copy_from_slice(&seq.wrapping_add(64).to_le_bytes());
            seq = seq.wrapping_add(1);
            black_box(b.take(rr));
        });
        line.push(format!("receiver {receiver:.0} ns"));
    }
    if run("both") {
        let (mut a, mut b) = (engine(0), engine(1));
        let both = best(|i| {
            let rr = b
                .irecv(i, dst, Some(0), Some(1), Space::User)
                .expect("irecv");
            send_one(&mut a, i, &payload, &mut |m| {
                black_box(b.on_message(i, 0, m).expect("arrival"));
            });
            black_box(b.take(rr));
        });
        line.push(format!("both {both:.0} ns"));
    }
    println!("engine cost per 8-byte eager message: {}", line.join(", "));
}
