//! The model's state and its cost rules (docs/architecture.md § The simulator): NICs
//! injecting at most one message per max(g, m·G), wires of latency L (+
//! seeded jitter), one-sided requests served by the target's NIC or by its
//! next library call, and completions that cost no CPU. Events run in
//! (time, sequence) order; the scheduler in [`crate::sched`] interleaves
//! them with the ranks so that everything happens in virtual-time order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use ovbench_core::engine_comm::QUIET_CTX;
use ovbench_core::{Completion, Ctx, LocalSlice, OpKind, Progress, Rank, RemoteKey};

use crate::memory::Memory;
use crate::truth::{OpTruth, RankTruth};
use crate::{Ps, SimParams};

/// Where a rank stands with the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Holds the baton.
    Running,
    /// Waiting in the ready queue for its turn.
    Ready,
    /// Inside a library call with nothing to do: wakes at its next event.
    Blocked,
    /// Its closure returned.
    Done,
}

/// A one-sided request on its way to, or waiting at, the target.
#[derive(Debug)]
pub(crate) struct RmaReq {
    pub from: Rank,
    pub key: RemoteKey,
    pub offset: u64,
    pub ctx: Ctx,
    /// Index of the operation in the initiator's truth.
    pub op: usize,
    pub kind: RmaKind,
}

#[derive(Debug)]
pub(crate) enum RmaKind {
    Write { data: Vec<u8> },
    Read { len: u64, local: LocalSlice },
}

/// A two-sided message whose last byte is at `dst`.
#[derive(Debug)]
struct Delivery {
    dst: Rank,
    src: Rank,
    data: Vec<u8>,
    ctx: Ctx,
    op: usize,
    /// The send's completion is still to come (see [`World::post_send`]).
    complete: bool,
}

#[derive(Debug)]
enum Ev {
    /// A two-sided message arrives.
    Deliver(Delivery),
    /// A completion becomes available at `rank`.
    Complete {
        rank: Rank,
        c: Completion,
        op: Option<usize>,
    },
    /// A one-sided request reaches the target's NIC.
    RmaArrive { target: Rank, req: RmaReq },
    /// A read's data is back at the initiator.
    ReadReturn {
        rank: Rank,
        local: LocalSlice,
        data: Vec<u8>,
        ctx: Ctx,
        op: usize,
    },
}

/// A pending event's key in its owner's queue: (time, sequence, slot of
/// the event in [`World`]'s slab). The heaps move only these small keys;
/// the events themselves stay put until processed.
type Key = (Ps, u64, u32);

/// One rank's CPU, NIC, memory and queues.
#[derive(Debug)]
pub(crate) struct RankState {
    pub mem: Memory,
    /// The rank's CPU time; mirrored in the shared atomic its clock reads.
    pub now: Ps,
    /// Arrived two-sided messages not yet consumed.
    pub inbox: VecDeque<(Rank, Vec<u8>)>,
    /// Completions available to poll, with the virtual time each finished
    /// (the simulated NIC's completion timestamp).
    pub done: VecDeque<(Completion, Ps)>,
    /// One-sided requests waiting for this rank's next library call.
    pub rma: VecDeque<RmaReq>,
    /// When this NIC may start its next injection.
    pub nic_free: Ps,
    pub status: Status,
    pub truth: RankTruth,
    /// Its endpoint was dropped (free-running mode): traffic to it fails.
    pub dead: bool,
}

impl RankState {
    pub(crate) fn has_work(&self) -> bool {
        !self.inbox.is_empty() || !self.done.is_empty() || !self.rma.is_empty()
    }
}

/// The error completion of an operation aimed at a rank that has left.
pub(crate) fn left(peer: Rank, op: OpKind, ctx: Ctx) -> Completion {
    Completion::Error {
        ctx: Some(ctx),
        peer,
        op,
        status: format!("rank {peer} has left the run"),
    }
}

/// SplitMix64: the jitter's generator — small, seeded, the same everywhere.
#[derive(Debug)]
struct SplitMix64(u64);
impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Hashing for the (src, dst) pair maps, looked up once per message:
/// SipHash cost more than the rest of the lookup. Keys are [`pair`]s.
#[derive(Default)]
struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type PairMap<V> = HashMap<u64, V, BuildHasherDefault<PairHasher>>;

/// A (src, dst) pair as one map key.
fn pair(src: Rank, dst: Rank) -> u64 {
    (u64::from(src) << 32) | u64::from(dst)
}

/// The whole simulated machine.
#[derive(Debug)]
pub(crate) struct World {
    pub p: SimParams,
    pub ranks: Vec<RankState>,
    /// Pending events per owner: the rank whose state each one changes.
    owned: Vec<BinaryHeap<Reverse<Key>>>,
    /// The pending events, by slot, and the free slots.
    slab: Vec<Option<Ev>>,
    free_slots: Vec<u32>,
    /// Every pending event as (time, seq, owner), for global time order;
    /// entries of events their owner already processed are skipped.
    index: BinaryHeap<Reverse<(Ps, u64, Rank)>>,
    seq: u64,
    /// Ranks waiting for the baton, by (time, rank).
    pub ready: BinaryHeap<Reverse<(Ps, Rank)>>,
    /// Last arrival per (src, dst): two-sided messages stay in order.
    fifo: PairMap<Ps>,
    /// Injections so far per (from, to): each one's jitter is drawn from
    /// the seed and its place in that sequence, so that it depends on the
    /// model alone, never on the order in which the scheduler runs ranks.
    draws: PairMap<u64>,
    /// Message buffers that ranks' pools overflowed, for ranks whose pool
    /// ran dry (a broadcast's leaves only receive, its inner ranks send).
    pub spare: Vec<Vec<u8>>,
    /// Free-running (see [`crate::endpoints`]): ranks may leave, so a
    /// send's completion is known only once its message arrives.
    pub free: bool,
    /// Where the message last delivered to each rank lies (a prefetch
    /// hint, see [`crate::prefetch`]; never dereferenced).
    pub last_msg: Vec<usize>,
    /// A time passed the virtual clock's bound (every sum of times
    /// saturates at [`Ps::MAX`] and is noted here, never wraps): the
    /// scheduler stops the run at the next call.
    pub overflowed: bool,
}

/// `t + d` in virtual time, [`Ps::MAX`] (the clock's bound, which the
/// scheduler takes for an overflow) where the sum would pass it.
pub(crate) fn later(t: Ps, d: Ps) -> Ps {
    t.saturating_add(d)
}

impl World {
    pub(crate) fn new(np: u32, p: SimParams, free: bool) -> World {
        let ranks = (0..np)
            .map(|r| RankState {
                mem: Memory::new(r),
                now: 0,
                inbox: VecDeque::new(),
                done: VecDeque::new(),
                rma: VecDeque::new(),
                nic_free: 0,
                status: Status::Ready,
                truth: RankTruth::default(),
                dead: false,
            })
            .collect();
        World {
            p,
            ranks,
            owned: (0..np).map(|_| BinaryHeap::new()).collect(),
            slab: Vec::new(),
            free_slots: Vec::new(),
            index: BinaryHeap::new(),
            seq: 0,
            ready: (0..np).map(|r| Reverse((0, r))).collect(),
            fifo: PairMap::default(),
            draws: PairMap::default(),
            spare: Vec::new(),
            free,
            last_msg: vec![0; np as usize],
            overflowed: false,
        }
    }

    /// Time of the earliest pending event.
    pub(crate) fn next_event(&mut self) -> Option<Ps> {
        while let Some(&Reverse((at, seq, owner))) = self.index.peek() {
            let live = self.owned[owner as usize]
                .peek()
                .is_some_and(|k| k.0 .1 == seq);
            if live {
                return Some(at);
            }
            self.index.pop();
        }
        None
    }

    fn push(&mut self, at: Ps, ev: Ev) {
        self.overflowed |= at == Ps::MAX;
        self.seq += 1;
        let owner = match &ev {
            Ev::Deliver(d) => d.dst,
            Ev::Complete { rank, .. } | Ev::ReadReturn { rank, .. } => *rank,
            Ev::RmaArrive { target, .. } => *target,
        };
        self.index.push(Reverse((at, self.seq, owner)));
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(ev);
                i
            }
            None => {
                self.slab.push(Some(ev));
                (self.slab.len() - 1) as u32
            }
        };
        self.owned[owner as usize].push(Reverse((at, self.seq, slot)));
    }

    /// The extra latency of the next injection from `from` to `to`.
    fn jitter(&mut self, from: Rank, to: Rank) -> Ps {
        let j = self.p.jitter;
        if j == 0 {
            return 0;
        }
        let k = self.draws.entry(pair(from, to)).or_insert(0);
        *k += 1;
        let pair = (u64::from(from) << 32) | u64::from(to);
        let mut g = SplitMix64(
            self.p.seed
                ^ pair.wrapping_mul(0xD6E8_FEB8_6659_FD93)
                ^ k.wrapping_mul(0xA076_1D64_78BD_642F),
        );
        g.next() % j.saturating_add(1)
    }

    /// Start an injection of `m` bytes at `rank`'s NIC, bound for `to`, no
    /// earlier than `t`; returns when the last byte reaches the peer.
    fn inject(&mut self, rank: Rank, to: Rank, t: Ps, m: u64) -> Ps {
        let gap = self.p.inject_gap(m);
        let nic = &mut self.ranks[rank as usize].nic_free;
        let start = t.max(*nic);
        *nic = later(start, gap);
        let (l, bytes) = (self.p.l, self.p.bytes_ps(m));
        let j = self.jitter(rank, to);
        let at = later(later(later(start, l), j), bytes);
        self.overflowed |= at == Ps::MAX;
        at
    }

    /// Note when operation `op` of `rank` began to move data.
    fn started(&mut self, rank: Rank, op: usize, at: Ps) {
        if let Some(o) = self.ranks[rank as usize].truth.ops.get_mut(op) {
            o.start_ps = at;
        }
    }

    /// Note an operation in `rank`'s truth; returns its index (an index
    /// that matches nothing when truth recording is off).
    fn record(&mut self, rank: Rank, kind: OpKind, peer: Rank, bytes: u64, post: Ps) -> usize {
        if !self.p.truth {
            return usize::MAX;
        }
        let ops = &mut self.ranks[rank as usize].truth.ops;
        ops.push(OpTruth {
            kind,
            peer,
            bytes,
            post_ps: post,
            start_ps: post,
            complete_ps: None,
        });
        ops.len() - 1
    }

    /// A two-sided send posted by `src` at its current time: o_s of CPU,
    /// then the NIC; the send completes one L after the message arrives.
    pub(crate) fn post_send(
        &mut self,
        src: Rank,
        dst: Rank,
        data: Vec<u8>,
        payload: u64,
        ctx: Ctx,
    ) {
        let t = self.ranks[src as usize].now;
        let op = self.record(src, OpKind::Send, dst, payload, t);
        let t1 = later(t, self.p.o_s);
        self.ranks[src as usize].now = t1;
        self.started(src, op, t1.max(self.ranks[src as usize].nic_free));
        let mut arrive = self.inject(src, dst, t1, payload);
        let last = self.fifo.entry(pair(src, dst)).or_insert(0);
        arrive = arrive.max(*last);
        *last = arrive;
        // A quiet send's completion (see `QUIET_CTX`) is handed over now:
        // no rank leaves a run, so it is known to succeed at arrival + L,
        // it costs no CPU, and the engine does the same with it whenever
        // it comes. That spares an event per message.
        let early = !self.free && ctx & QUIET_CTX != 0;
        if early {
            let at = later(arrive, self.p.l);
            let r = &mut self.ranks[src as usize];
            if let Some(o) = r.truth.ops.get_mut(op) {
                o.complete_ps = Some(at);
            }
            r.done.push_back((Completion::Send { ctx }, at));
        }
        self.push(
            arrive,
            Ev::Deliver(Delivery {
                dst,
                src,
                data,
                ctx,
                op,
                complete: !early,
            }),
        );
    }

    /// A one-sided write or read posted by `from` at its current time.
    pub(crate) fn post_rma(&mut self, from: Rank, target: Rank, mut req: RmaReq) {
        let t = self.ranks[from as usize].now;
        let (kind, bytes, wire) = match &req.kind {
            RmaKind::Write { data } => (OpKind::Write, data.len() as u64, data.len() as u64),
            RmaKind::Read { len, .. } => (OpKind::Read, *len, 0),
        };
        req.op = self.record(from, kind, target, bytes, t);
        let t1 = later(t, self.p.o_s);
        self.ranks[from as usize].now = t1;
        self.started(from, req.op, t1.max(self.ranks[from as usize].nic_free));
        let arrive = self.inject(from, target, t1, wire);
        self.push(arrive, Ev::RmaArrive { target, req });
    }

    /// Process the earliest event (it may make blocked ranks ready).
    pub(crate) fn step(&mut self) {
        if self.next_event().is_none() {
            return;
        }
        let Some(Reverse((_, _, owner))) = self.index.pop() else {
            return;
        };
        if let Some(Reverse((at, _, slot))) = self.owned[owner as usize].pop() {
            let ev = self.take_slot(slot);
            self.process(at, ev);
        }
    }

    /// Process, ahead of global order, every event of `rank`'s own at or
    /// before `t` (see `Shared::sync`'s lookahead for why this is exact).
    pub(crate) fn step_owned(&mut self, rank: Rank, t: Ps) {
        while self.owned[rank as usize]
            .peek()
            .is_some_and(|k| k.0 .0 <= t)
        {
            if let Some(Reverse((at, _, slot))) = self.owned[rank as usize].pop() {
                let ev = self.take_slot(slot);
                self.process(at, ev);
            }
        }
    }

    /// Remove a pending event from the slab (its key was just popped).
    fn take_slot(&mut self, slot: u32) -> Ev {
        self.free_slots.push(slot);
        self.slab[slot as usize]
            .take()
            .expect("a queued key names a pending event")
    }

    /// A message's arrival: into `dst`'s inbox (or an error, if `dst` is
    /// dead), its send completed one L later unless completed early.
    fn deliver(&mut self, at: Ps, d: Delivery) {
        let c = if self.ranks[d.dst as usize].dead {
            left(d.dst, OpKind::Send, d.ctx)
        } else {
            self.last_msg[d.dst as usize] = d.data.as_ptr() as usize;
            self.ranks[d.dst as usize].inbox.push_back((d.src, d.data));
            self.wake(d.dst, at);
            Completion::Send { ctx: d.ctx }
        };
        if !d.complete {
            return;
        }
        let l = self.p.l;
        self.push(
            later(at, l),
            Ev::Complete {
                rank: d.src,
                c,
                op: Some(d.op),
            },
        );
    }

    fn process(&mut self, at: Ps, ev: Ev) {
        match ev {
            Ev::Deliver(d) => self.deliver(at, d),
            Ev::Complete { rank, c, op } => self.complete(rank, at, c, op),
            Ev::RmaArrive { target, req } if self.ranks[target as usize].dead => {
                let op_kind = match req.kind {
                    RmaKind::Write { .. } => OpKind::Write,
                    RmaKind::Read { .. } => OpKind::Read,
                };
                let l = self.p.l;
                self.push(
                    later(at, l),
                    Ev::Complete {
                        rank: req.from,
                        c: left(target, op_kind, req.ctx),
                        op: Some(req.op),
                    },
                );
            }
            Ev::RmaArrive { target, req } => {
                let by_nic = self.p.offload || self.p.progress == Progress::Thread;
                if by_nic {
                    self.serve(target, at, req);
                } else {
                    self.ranks[target as usize].rma.push_back(req);
                    self.wake(target, at);
                }
            }
            Ev::ReadReturn {
                rank,
                local,
                data,
                ctx,
                op,
            } => {
                let placed = self.ranks[rank as usize]
                    .mem
                    .slice_mut(local)
                    .map(|s| s.copy_from_slice(&data));
                let c = match placed {
                    Ok(()) => Completion::Read { ctx },
                    Err(e) => Completion::Error {
                        ctx: Some(ctx),
                        peer: rank,
                        op: OpKind::Read,
                        status: format!("local buffer vanished before the data returned: {e}"),
                    },
                };
                self.complete(rank, at, c, Some(op));
            }
        }
    }

    fn complete(&mut self, rank: Rank, at: Ps, c: Completion, op: Option<usize>) {
        let r = &mut self.ranks[rank as usize];
        if let Some(o) = op.and_then(|i| r.truth.ops.get_mut(i)) {
            o.complete_ps = Some(at);
        }
        // A quiet completion (see `QUIET_CTX`) waits for the rank's next
        // poll: waking a rank that sleeps in a wait only for the engine to
        // file it away and sleep again would cost a handoff per message and
        // change nothing. The wait's next wake delivers it, before the wait
        // can return.
        let quiet = matches!(c, Completion::Send { ctx } if ctx & QUIET_CTX != 0);
        r.done.push_back((c, at));
        if !quiet {
            self.wake(rank, at);
        }
    }

    /// Make a blocked rank ready at `at`.
    fn wake(&mut self, rank: Rank, at: Ps) {
        let r = &mut self.ranks[rank as usize];
        if r.status == Status::Blocked {
            r.status = Status::Ready;
            self.ready.push(Reverse((at.max(r.now), rank)));
        }
    }

    /// Serve a one-sided request at `target` at time `at`: check its key,
    /// move the data, and schedule the initiator's completion.
    pub(crate) fn serve(&mut self, target: Rank, at: Ps, req: RmaReq) {
        let (op_kind, n) = match &req.kind {
            RmaKind::Write { data } => (OpKind::Write, data.len() as u64),
            RmaKind::Read { len, .. } => (OpKind::Read, *len),
        };
        let l = self.p.l;
        let mem = &mut self.ranks[target as usize].mem;
        let slice = match mem.resolve(&req.key, req.offset, n) {
            Ok(s) => s,
            Err(detail) => {
                let c = Completion::Error {
                    ctx: Some(req.ctx),
                    peer: target,
                    op: op_kind,
                    status: format!(
                        "rank {target} rejected the {op_kind} of {n} bytes at offset {} from rank {}: {detail}",
                        req.offset, req.from
                    ),
                };
                self.push(
                    later(at, l),
                    Ev::Complete {
                        rank: req.from,
                        c,
                        op: Some(req.op),
                    },
                );
                return;
            }
        };
        match req.kind {
            RmaKind::Write { data } => {
                mem.slice_mut(slice)
                    .expect("resolved slice is in range")
                    .copy_from_slice(&data);
                // A target spinning on its memory (raw writes) sees it now.
                self.wake(target, at);
                self.push(
                    later(at, l),
                    Ev::Complete {
                        rank: req.from,
                        c: Completion::Write { ctx: req.ctx },
                        op: Some(req.op),
                    },
                );
            }
            RmaKind::Read { len, local } => {
                let from = req.from as usize;
                if let Some(o) = self.ranks[from].truth.ops.get_mut(req.op) {
                    o.start_ps = o.start_ps.max(at.saturating_sub(l));
                }
                let mem = &mut self.ranks[target as usize].mem;
                let data = mem
                    .slice(slice)
                    .expect("resolved slice is in range")
                    .to_vec();
                let back = self.inject(target, req.from, at, len);
                self.push(
                    back,
                    Ev::ReadReturn {
                        rank: req.from,
                        local,
                        data,
                        ctx: req.ctx,
                        op: req.op,
                    },
                );
            }
        }
    }
}
