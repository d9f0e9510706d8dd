//! The fast path against the general one. The same seeded traffic —
//! sends of every size and mode, receives with and without wildcards,
//! some too small, unexpected messages, interleaved deliveries — runs on
//! three ranks with the fast path on, off, and on for the senders only
//! (so the general arrival meets short headers); every post's result,
//! every error, every request's status and every byte of memory must be
//! the same. A bit flipped anywhere in a short packet is refused naming
//! the peer, or (a tag, a payload byte) taken as the message it became,
//! never placed outside its receive.

mod util;

use ovbench_proto::{Mode, Plan, ProtoError, Protocol, Rank, ReqId, Slice, Space, SHORT_LEN};
use util::{config, Ev, Sim};

const RANKS: u32 = 3;
/// Bytes of each rank's send and receive regions.
const REGION: usize = 64 * 1024;
/// Largest message: a train and a rendezvous above the packet.
const SIZES: [usize; 9] = [0, 1, 8, 100, 987, 988, 989, 3000, 10_000];

/// xorshift64*: the test's only randomness, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One step of the traffic.
#[derive(Clone, Debug)]
enum Step {
    Send {
        from: Rank,
        to: Rank,
        tag: u32,
        len: usize,
        mode: Mode,
    },
    Recv {
        at: Rank,
        src: Option<Rank>,
        tag: Option<u32>,
        cap: usize,
    },
    /// Handle up to this many queued events.
    Deliver(usize),
}

fn traffic(seed: u64) -> Vec<Step> {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..120)
        .map(|_| match r.below(10) {
            0..=3 => {
                let from = r.below(u64::from(RANKS)) as Rank;
                let to = (from + 1 + r.below(u64::from(RANKS - 1)) as Rank) % RANKS;
                let mode = match r.below(8) {
                    0 => Mode::Synchronous,
                    1 => Mode::Buffered,
                    _ => Mode::Standard,
                };
                Step::Send {
                    from,
                    to,
                    tag: r.below(3) as u32,
                    len: SIZES[r.below(SIZES.len() as u64) as usize],
                    mode,
                }
            }
            4..=7 => {
                let len = SIZES[r.below(SIZES.len() as u64) as usize];
                Step::Recv {
                    at: r.below(u64::from(RANKS)) as Rank,
                    src: (r.below(2) != 0).then(|| r.below(u64::from(RANKS)) as Rank),
                    tag: (r.below(2) != 0).then(|| r.below(3) as u32),
                    // Now and then too small for what may come.
                    cap: if r.below(12) == 0 { len / 2 } else { 10_000 },
                }
            }
            _ => Step::Deliver(r.below(6) as usize),
        })
        .collect()
}

/// What a run of the traffic produced, to compare between runs.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Per step: the post's result (the error's text).
    posts: Vec<Result<(), String>>,
    /// Errors the deliveries met, in order: (rank, text).
    errors: Vec<(Rank, String)>,
    /// Per step: the status its request finished with.
    statuses: Vec<Option<(Rank, u32, usize)>>,
    /// Every rank's memory.
    memory: Vec<Vec<Vec<u8>>>,
    /// Every rank's counts but the fast path's own.
    counts: Vec<[u64; 6]>,
}

/// Run `steps` with the fast path on for the ranks `fast` picks; the
/// outcome, and how many sends and arrivals took the fast path.
fn run(steps: &[Step], proto: Protocol, fast: impl Fn(Rank) -> bool) -> (Outcome, u64, u64) {
    let mut s = Sim::with(RANKS, |r| {
        let mut c = config(r, RANKS, proto);
        c.plan = Plan::new(proto).with_eager_limit(2048).with_frag_size(3000);
        c.instrument = false;
        c.fast_path = fast(r);
        c
    });
    let sends: Vec<Slice> = (0..RANKS)
        .map(|r| s.alloc(r, REGION, |i| (i * 7 + r as usize * 13) as u8))
        .collect();
    let recvs: Vec<Slice> = (0..RANKS).map(|r| s.alloc(r, REGION, |_| 0xEE)).collect();
    let mut at = [0usize; RANKS as usize];
    let mut reqs: Vec<Option<(Rank, ReqId)>> = Vec::new();
    let mut out = Outcome {
        posts: Vec::new(),
        errors: Vec::new(),
        statuses: Vec::new(),
        memory: Vec::new(),
        counts: Vec::new(),
    };
    let text = |e: ProtoError| e.to_string();
    for step in steps {
        s.now += 1;
        let now = s.now;
        let posted = match *step {
            Step::Send {
                from,
                to,
                tag,
                len,
                mode,
            } => {
                let src = sends[from as usize]
                    .sub(at[from as usize] % 40_000, len)
                    .unwrap();
                at[from as usize] += 997;
                let r = s.nodes[from as usize]
                    .eng
                    .isend(now, src, to, tag, mode, Space::User);
                r.map(|id| (from, id))
            }
            Step::Recv {
                at: a,
                src,
                tag,
                cap,
            } => {
                let dst = recvs[a as usize].sub(at[a as usize] % 40_000, cap).unwrap();
                at[a as usize] += 1009;
                let r = s.nodes[a as usize]
                    .eng
                    .irecv(now, dst, src, tag, Space::User);
                r.map(|id| (a, id))
            }
            Step::Deliver(n) => {
                for _ in 0..n {
                    let Some(ev) = s.queue.pop_front() else { break };
                    deliver(&mut s, ev, &mut out.errors);
                }
                Ok((0, ReqId(0)))
            }
        };
        out.posts
            .push(posted.as_ref().map(|_| ()).map_err(|e| text(e.clone())));
        reqs.push(posted.ok().filter(|p| p.1 .0 != 0));
        for r in 0..RANKS {
            if let Err(e) = s.drain(r) {
                out.errors.push((r, text(e)));
            }
        }
    }
    while let Some(ev) = s.queue.pop_front() {
        deliver(&mut s, ev, &mut out.errors);
    }
    for req in &reqs {
        let st = req.and_then(|(r, id)| s.take(r, id));
        out.statuses.push(st.map(|st| (st.source, st.tag, st.len)));
    }
    out.memory = s.nodes.iter().map(|n| n.mem.clone()).collect();
    let (mut fast_sends, mut fast_recvs) = (0, 0);
    for n in &s.nodes {
        let c = n.eng.counts();
        out.counts.push([
            c.sends,
            c.writes,
            c.reads,
            c.bytes,
            c.registrations,
            c.deregistrations,
        ]);
        fast_sends += c.fast_sends;
        fast_recvs += c.fast_recvs;
    }
    (out, fast_sends, fast_recvs)
}

/// Handle `ev`; an error is recorded and its event dropped.
fn deliver(s: &mut Sim, ev: Ev, errors: &mut Vec<(Rank, String)>) {
    let who = match &ev {
        Ev::Msg { to, .. } => *to,
        Ev::Complete { node, .. } => *node,
        Ev::Place { to, .. } => *to,
        Ev::Serve { to, .. } => *to,
    };
    if let Err(e) = s.handle(ev) {
        errors.push((who, e.to_string()));
    }
}

/// `a` is `b`, or a panic saying where they first differ.
fn same(a: &Outcome, b: &Outcome, what: &str) {
    assert_eq!(a.errors, b.errors, "{what}: errors");
    for (i, (x, y)) in a.posts.iter().zip(&b.posts).enumerate() {
        assert_eq!(x, y, "{what}: post of step {i}");
    }
    for (i, (x, y)) in a.statuses.iter().zip(&b.statuses).enumerate() {
        assert_eq!(x, y, "{what}: status of step {i}");
    }
    for (r, (x, y)) in a.memory.iter().zip(&b.memory).enumerate() {
        for (g, (p, q)) in x.iter().zip(y).enumerate() {
            let at = p.iter().zip(q).position(|(u, v)| u != v);
            assert!(
                at.is_none(),
                "{what}: rank {r} region {g} differs at byte {at:?}"
            );
        }
    }
    assert_eq!(a.counts, b.counts, "{what}: counts");
    assert_eq!(a, b, "{what}");
}

#[test]
fn fast_and_general_paths_agree_on_seeded_traffic() {
    let (mut fast_sends, mut fast_recvs, mut errors_seen) = (0, 0, 0);
    for proto in [Protocol::Auto, Protocol::Eager] {
        for seed in 1..=40 {
            let steps = traffic(seed);
            let (general, gs, gr) = run(&steps, proto, |_| false);
            assert_eq!((gs, gr), (0, 0), "the general run took the fast path");
            let (fast, fs, fr) = run(&steps, proto, |_| true);
            same(
                &fast,
                &general,
                &format!("{proto:?} seed {seed}, fast path"),
            );
            // Rank 0 fast, the others general: the general arrival reads
            // short headers as the fast one does, and the fast arrival
            // hands general ones over.
            let (mixed, ..) = run(&steps, proto, |r| r == 0);
            same(
                &mixed,
                &general,
                &format!("{proto:?} seed {seed}, mixed ranks"),
            );
            fast_sends += fs;
            fast_recvs += fr;
            errors_seen +=
                general.errors.len() + general.posts.iter().filter(|p| p.is_err()).count();
        }
    }
    // The traffic exercised what it compares.
    assert!(
        fast_sends > 1000 && fast_recvs > 200,
        "only {fast_sends} fast sends and {fast_recvs} fast arrivals"
    );
    assert!(
        errors_seen > 5,
        "only {errors_seen} errors: the traffic is too tame"
    );
}

/// A real short packet: rank 0's fast send of 8 bytes with tag 5.
fn short_packet() -> Vec<u8> {
    let mut s = Sim::tuned(Protocol::Eager, |c| c.instrument = false);
    let src = s.alloc(0, 8, |i| 0x40 + i as u8);
    s.isend(0, src, 1, 5, Mode::Standard);
    let Some(Ev::Msg { bytes, .. }) = s.queue.pop_front() else {
        panic!("no packet")
    };
    assert_eq!(bytes.len(), SHORT_LEN + 8);
    bytes
}

#[test]
fn every_flipped_bit_of_a_short_packet_is_refused_or_taken_as_what_it_says() {
    let good = short_packet();
    for fast in [true, false] {
        for bit in 0..good.len() * 8 {
            let mut p = good.clone();
            p[bit / 8] ^= 1 << (bit % 8);
            let mut s = Sim::tuned(Protocol::Eager, |c| {
                c.instrument = false;
                c.fast_path = fast;
            });
            let dst = s.alloc(1, 8, |_| 0xEE);
            let rr = s.irecv(1, dst, Some(0), Some(5));
            let got = s.nodes[1].eng.on_message(1, 0, &p);
            let byte = bit / 8;
            match byte {
                // Magic, version, kind, sequence number, length: refused,
                // naming the sender.
                0..=7 | 12..=15 => {
                    let e = got.expect_err(&format!("bit {bit} (fast {fast}) accepted"));
                    assert_eq!(e.peer(), Some(0), "bit {bit}: {e}");
                }
                // The tag: another message, which the receive (tag 5)
                // does not match; it waits, unexpected.
                8..=11 => {
                    assert_eq!(got, Ok(None), "bit {bit}");
                    assert!(s.take(1, rr).is_none(), "bit {bit}: matched");
                }
                // The payload: the message as it came, in its receive.
                _ => {
                    let placed = got.unwrap().expect("placed");
                    assert_eq!(placed.dst, dst, "bit {bit}");
                    assert_eq!(placed.src_start, SHORT_LEN);
                    assert_eq!(s.take(1, rr).map(|st| st.len), Some(8));
                }
            }
        }
    }
}
