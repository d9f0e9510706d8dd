//! Host cost of the engine per 8-byte eager message, with no transport:
//!
//! * `sender` — `isend`, its packet taken with `poll_op`, its completion
//!   fed back, the request retired with `take`;
//! * `receiver` — `irecv`, the packet's arrival (`on_message`), `take`;
//! * `direct` — the sender as the communicator posts a one-packet eager
//!   send (`isend_direct`, the packet's completion, `take`);
//! * `both` — a sender and a receiver, one message between them.
//!
//! Everything a message needs is inside the cycle: its header, its ids
//! and its sequence number are made there, not in setup.
//!
//! `cargo bench -p ovbench-proto --bench engine_cost [-- SCENARIO]` times
//! each (best of five runs of a million messages). `-- --count N
//! SCENARIO` instead runs N messages of one scenario untimed, each in its
//! own `message_*` function, for `ci/bench/instructions engine`, which
//! counts the instructions of those functions under callgrind.

use std::hint::black_box;
use std::time::Instant;

use ovbench_proto::{Config, Engine, Mode, Op, Plan, Protocol, Slice, Space, Status, SHORT_LEN};

const N: u64 = 1_000_000;
const LEN: usize = 8;
/// Receiver: packets kept renumbered ahead of their turn (see `Receiver`).
const RING: usize = 64;

fn engine(rank: u32) -> Engine {
    let mut c = Config::new(rank, 2, 8192);
    c.plan = Plan::new(Protocol::Eager);
    Engine::new(c).expect("config")
}

/// One message from `a`: its packet (header, then `payload`) handed to
/// `deliver`, its completion and its retirement (the status comes back).
#[inline(always)]
fn send_one(
    a: &mut Engine,
    i: u64,
    payload: &[u8],
    deliver: &mut impl FnMut(&[u8], &[u8]),
) -> Option<Status> {
    let src = Slice::new(0, 0, payload.len());
    let sr = a
        .isend(i, src, 1, 1, Mode::Standard, Space::User)
        .expect("isend");
    while let Some(op) = a.poll_op() {
        if let Op::Send { header, ctx, .. } = op {
            deliver(&header, payload);
            a.on_completion(i, ctx).expect("completion");
            a.recycle_header(header);
        }
    }
    a.take(sr)
}

// Each `message_*` is one message's whole cycle, to the status its
// `take` hands back (which the caller consumes, outside the count).

#[inline(never)]
fn message_sender(a: &mut Engine, i: u64, payload: &[u8]) -> Option<Status> {
    send_one(a, i, payload, &mut |h, p| {
        black_box((h, p));
    })
}

#[inline(never)]
fn message_direct(a: &mut Engine, i: u64, hdr: &mut [u8; SHORT_LEN]) -> Option<Status> {
    let src = Slice::new(0, 0, LEN);
    let d = a
        .isend_direct(src, src, 1, 1, Mode::Standard, Space::User, hdr)
        .expect("a one-packet eager send");
    black_box(&*hdr);
    a.on_completion(i, d.ctx).expect("completion");
    a.take(d.req)
}

/// The receiving side: copies of one packet, each renumbered with the
/// sequence number its turn needs `RING` arrivals before that turn (so
/// an arrival never reads bytes stored a moment earlier, and the
/// renumbering stays outside the message's cycle).
struct Receiver {
    eng: Engine,
    ring: Vec<Vec<u8>>,
    /// Byte range of the sequence number in the packet.
    seq_at: std::ops::Range<usize>,
    seq: u32,
}

impl Receiver {
    fn new() -> Receiver {
        let mut packet = Vec::new();
        send_one(&mut engine(0), 0, &[7; LEN], &mut |h, p| {
            packet = [h, p].concat()
        })
        .expect("sent");
        let seq_at = 4..8;
        let ring = (0..RING as u32)
            .map(|k| {
                let mut p = packet.clone();
                p[seq_at.clone()].copy_from_slice(&k.to_le_bytes());
                p
            })
            .collect();
        Receiver {
            eng: engine(1),
            ring,
            seq_at,
            seq: 0,
        }
    }

    fn next(&mut self, i: u64) -> Option<Status> {
        let slot = self.seq as usize % RING;
        let st = message_receiver(&mut self.eng, i, &self.ring[slot]);
        let next = self.seq.wrapping_add(RING as u32);
        self.ring[slot][self.seq_at.clone()].copy_from_slice(&next.to_le_bytes());
        self.seq = self.seq.wrapping_add(1);
        st
    }
}

#[inline(never)]
fn message_receiver(b: &mut Engine, i: u64, packet: &[u8]) -> Option<Status> {
    let dst = Slice::new(0, 0, LEN);
    let rr = b
        .irecv(i, dst, Some(0), Some(1), Space::User)
        .expect("irecv");
    black_box(b.on_message(i, 0, packet).expect("arrival"));
    b.take(rr)
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

/// `n` messages of `scenario`, one `message_*` call each, untimed.
fn count(scenario: &str, n: u64) -> Result<(), String> {
    let payload = [7u8; LEN];
    match scenario {
        "sender" => {
            let mut a = engine(0);
            (0..n).for_each(|i| {
                black_box(message_sender(&mut a, i, &payload));
            });
        }
        "direct" => {
            let (mut a, mut hdr) = (engine(0), [0; SHORT_LEN]);
            (0..n).for_each(|i| {
                black_box(message_direct(&mut a, i, &mut hdr));
            });
        }
        "receiver" => {
            let mut r = Receiver::new();
            (0..n).for_each(|i| {
                black_box(r.next(i));
            });
        }
        other => {
            return Err(format!(
                "unknown scenario {other} (sender, direct or receiver)"
            ))
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = args.iter().position(|a| a == "--count") {
        let n = args.get(at + 1).and_then(|n| n.parse().ok());
        let scenario = args.get(at + 2);
        let (Some(n), Some(scenario)) = (n, scenario) else {
            eprintln!("engine_cost: --count takes a message count and a scenario");
            std::process::exit(2);
        };
        if let Err(e) = count(scenario, n) {
            eprintln!("engine_cost: {e}");
            std::process::exit(2);
        }
        return;
    }
    let only = args.iter().find(|a| !a.starts_with('-'));
    let run = |side: &str| only.map_or(true, |o| o == side);
    let payload = [7u8; LEN];
    let mut line = Vec::new();
    if run("sender") {
        let mut a = engine(0);
        let t = best(|i| {
            black_box(message_sender(&mut a, i, &payload));
        });
        line.push(format!("sender {t:.0} ns"));
    }
    if run("direct") {
        let (mut a, mut hdr) = (engine(0), [0; SHORT_LEN]);
        let t = best(|i| {
            black_box(message_direct(&mut a, i, &mut hdr));
        });
        line.push(format!("sender, direct {t:.0} ns"));
    }
    if run("receiver") {
        let mut r = Receiver::new();
        let t = best(|i| {
            black_box(r.next(i));
        });
        line.push(format!("receiver {t:.0} ns"));
    }
    if run("both") {
        let (mut a, mut b) = (engine(0), engine(1));
        let dst = Slice::new(0, 0, LEN);
        let mut msg = Vec::new();
        let t = best(|i| {
            let rr = b
                .irecv(i, dst, Some(0), Some(1), Space::User)
                .expect("irecv");
            black_box(send_one(&mut a, i, &payload, &mut |h, p| {
                msg.clear();
                msg.extend_from_slice(h);
                msg.extend_from_slice(p);
                black_box(b.on_message(i, 0, &msg).expect("arrival"));
            }));
            black_box(b.take(rr));
        });
        line.push(format!("both {t:.0} ns"));
    }
    println!("engine cost per 8-byte eager message: {}", line.join(", "));
}
