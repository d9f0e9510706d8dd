//! A deterministic simulated job for engine tests (quinn-proto's
//! tests/util.rs style): N engines, their memory, registrations and one
//! network, driven in a single thread. Every message, placement and
//! completion is an event in one FIFO queue; tests may hold back a class
//! of events to force a race, then release it.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};

use ovbench_proto::{
    Config, Engine, Event, Key, Mode, MrId, Op, Plan, ProtoError, Protocol, Rank, ReqId, Slice,
    Space, Status,
};

pub const BUF: usize = 1024;

/// One rank: engine, memory, registrations.
pub struct Node {
    pub eng: Engine,
    pub mem: Vec<Vec<u8>>,
    pub mrs: HashMap<u32, Slice>,
    next_mr: u32,
    pub events: Vec<Event>,
    pub sent_kinds: Vec<u8>,
}

/// What travels between ranks.
#[derive(Debug, Clone)]
pub enum Ev {
    Msg {
        to: Rank,
        from: Rank,
        bytes: Vec<u8>,
    },
    Complete {
        node: Rank,
        ctx: u64,
    },
    /// A write's data lands at `to` (then the initiator's completion follows).
    Place {
        to: Rank,
        from: Rank,
        mr: u32,
        off: usize,
        data: Vec<u8>,
        ctx: u64,
    },
    /// A read is served at `at` and its data returns to `to`.
    Serve {
        at: Rank,
        to: Rank,
        mr: u32,
        off: usize,
        dst: Slice,
        ctx: u64,
    },
}

pub struct Sim {
    pub nodes: Vec<Node>,
    pub queue: VecDeque<Ev>,
    pub now: u64,
    /// Honest peers: a one-sided access through a dead or too-small
    /// registration is an engine bug (panic). Off for forged-message
    /// tests, where the target rejects it as a transport would.
    pub strict: bool,
}

pub fn config(rank: Rank, size: u32, proto: Protocol) -> Config {
    let mut c = Config::new(rank, size, BUF);
    c.plan = Plan::new(proto).with_frag_size(3000).with_eager_limit(2048);
    c.instrument = true;
    c
}

impl Sim {
    pub fn new(size: u32, proto: Protocol) -> Sim {
        Sim::with(size, |r| config(r, size, proto))
    }

    /// Two ranks whose configuration `tune` changes.
    pub fn tuned(proto: Protocol, tune: impl Fn(&mut Config)) -> Sim {
        Sim::with(2, |r| {
            let mut c = config(r, 2, proto);
            tune(&mut c);
            c
        })
    }

    pub fn with(size: u32, cfg: impl Fn(Rank) -> Config) -> Sim {
        let nodes = (0..size)
            .map(|r| Node {
                eng: Engine::new(cfg(r)).expect("valid config"),
                mem: Vec::new(),
                mrs: HashMap::new(),
                next_mr: 1,
                events: Vec::new(),
                sent_kinds: Vec::new(),
            })
            .collect();
        Sim {
            nodes,
            queue: VecDeque::new(),
            now: 0,
            strict: true,
        }
    }

    /// Two ranks: `len` bytes of `pattern(seed)` at rank 0, as many zeros
    /// at rank 1.
    pub fn pair(proto: Protocol, len: usize, seed: u8) -> (Sim, Slice, Slice) {
        let mut s = Sim::new(2, proto);
        let src = s.alloc(0, len, pattern(seed));
        let dst = s.alloc(1, len, |_| 0);
        (s, src, dst)
    }

    /// A region of `len` bytes on `rank` filled by `f(i)`.
    pub fn alloc(&mut self, rank: Rank, len: usize, f: impl Fn(usize) -> u8) -> Slice {
        let n = &mut self.nodes[rank as usize];
        n.mem.push((0..len).map(f).collect());
        Slice::new(n.mem.len() as u32 - 1, 0, len)
    }

    pub fn bytes(&self, rank: Rank, s: Slice) -> Vec<u8> {
        self.nodes[rank as usize].mem[s.region as usize][s.offset..s.offset + s.len].to_vec()
    }

    pub fn isend(&mut self, from: Rank, s: Slice, to: Rank, tag: u32, mode: Mode) -> ReqId {
        self.now += 1;
        let r = self.nodes[from as usize]
            .eng
            .isend(self.now, s, to, tag, mode, Space::User)
            .expect("isend");
        self.drain(from).expect("drain after isend");
        r
    }

    pub fn irecv(&mut self, at: Rank, s: Slice, src: Option<Rank>, tag: Option<u32>) -> ReqId {
        self.try_irecv(at, s, src, tag).expect("irecv")
    }

    pub fn try_irecv(
        &mut self,
        at: Rank,
        s: Slice,
        src: Option<Rank>,
        tag: Option<u32>,
    ) -> Result<ReqId, ProtoError> {
        self.now += 1;
        let r = self.nodes[at as usize]
            .eng
            .irecv(self.now, s, src, tag, Space::User)?;
        self.drain(at)?;
        Ok(r)
    }

    /// Perform every operation `rank`'s engine asks for.
    pub fn drain(&mut self, rank: Rank) -> Result<(), ProtoError> {
        let now = self.now;
        loop {
            let n = &mut self.nodes[rank as usize];
            while let Some(e) = n.eng.poll_event() {
                n.events.push(e);
            }
            let Some(op) = n.eng.poll_op() else { break };
            let write = matches!(op, Op::Write { .. });
            match op {
                // The packet: the header, then the payload copied after it.
                Op::Send {
                    peer,
                    header,
                    payload,
                    ctx,
                } => {
                    let mut bytes = header.to_vec();
                    if let Some(p) = payload {
                        bytes.extend_from_slice(
                            &n.mem[p.region as usize][p.offset..p.offset + p.len],
                        );
                    }
                    assert!(
                        bytes.len() <= BUF,
                        "packet of {} bytes over the bounce buffer",
                        bytes.len()
                    );
                    n.sent_kinds.push(bytes[3]);
                    self.queue.push_back(Ev::Msg {
                        to: peer,
                        from: rank,
                        bytes,
                    });
                    self.queue.push_back(Ev::Complete { node: rank, ctx });
                }
                // A write's data leaves now; a read's is fetched when served.
                Op::Write(a) | Op::Read(a) => {
                    let (peer, local) = (a.peer, a.local);
                    let reg = n.mrs[&a.mr.0];
                    assert!(
                        reg.region == local.region
                            && reg.offset <= local.offset
                            && local.offset + local.len <= reg.offset + reg.len,
                        "{} outside its registration",
                        if write { "write source" } else { "read target" }
                    );
                    let tmr = u32::from_le_bytes(a.key.blob[..4].try_into().unwrap());
                    let (off, ctx) = (a.remote_offset as usize, a.ctx);
                    self.queue.push_back(if write {
                        let data = n.mem[local.region as usize]
                            [local.offset..local.offset + local.len]
                            .to_vec();
                        Ev::Place {
                            to: peer,
                            from: rank,
                            mr: tmr,
                            off,
                            data,
                            ctx,
                        }
                    } else {
                        Ev::Serve {
                            at: peer,
                            to: rank,
                            mr: tmr,
                            off,
                            dst: local,
                            ctx,
                        }
                    });
                }
                Op::Register { slice, token } => {
                    let id = n.next_mr;
                    n.next_mr += 1;
                    n.mrs.insert(id, slice);
                    let key = Key {
                        addr: 0,
                        len: slice.len as u64,
                        blob: id.to_le_bytes().to_vec(),
                    };
                    n.eng.on_registered(now, token, MrId(id), key)?;
                }
                Op::Deregister { mr } => {
                    assert!(
                        n.mrs.remove(&mr.0).is_some(),
                        "deregister of unknown mr {}",
                        mr.0
                    );
                }
                Op::Deliver { dst, data } => {
                    assert_eq!(dst.len, data.len());
                    n.mem[dst.region as usize][dst.offset..dst.offset + dst.len]
                        .copy_from_slice(&data);
                }
                Op::StampByte { at, value } => {
                    n.mem[at.region as usize][at.offset] = value;
                }
            }
        }
        // Raw-write receives: look at the watched bytes.
        let n = &mut self.nodes[rank as usize];
        for w in n.eng.watches() {
            let b = n.mem[w.at.region as usize][w.at.offset];
            n.eng.on_raw_byte(now, w.req, b);
        }
        Ok(())
    }

    /// Handle one event.
    pub fn handle(&mut self, ev: Ev) -> Result<(), ProtoError> {
        self.now += 1;
        let now = self.now;
        let who = match ev {
            Ev::Msg { to, from, bytes } => {
                let n = &mut self.nodes[to as usize];
                if let Some(p) = n.eng.on_message(now, from, &bytes)? {
                    let d = p.dst;
                    n.mem[d.region as usize][d.offset..d.offset + d.len]
                        .copy_from_slice(&bytes[p.src_start..p.src_start + d.len]);
                }
                to
            }
            Ev::Complete { node, ctx } => {
                self.nodes[node as usize].eng.on_completion(now, ctx)?;
                node
            }
            Ev::Place {
                to,
                from,
                mr,
                off,
                data,
                ctx,
            } => {
                let reg = self.target(to, from, mr, off, data.len())?;
                let n = &mut self.nodes[to as usize];
                let s = reg.offset + off;
                n.mem[reg.region as usize][s..s + data.len()].copy_from_slice(&data);
                self.queue.push_back(Ev::Complete { node: from, ctx });
                to
            }
            Ev::Serve {
                at,
                to,
                mr,
                off,
                dst,
                ctx,
            } => {
                let reg = self.target(at, to, mr, off, dst.len)?;
                let n = &self.nodes[at as usize];
                let s = reg.offset + off;
                let data = n.mem[reg.region as usize][s..s + dst.len].to_vec();
                let t = &mut self.nodes[to as usize];
                t.mem[dst.region as usize][dst.offset..dst.offset + dst.len].copy_from_slice(&data);
                self.queue.push_back(Ev::Complete { node: to, ctx });
                to
            }
        };
        self.drain(who)
    }

    /// The registration a one-sided access from `from` reaches at `at`.
    fn target(
        &self,
        at: Rank,
        from: Rank,
        mr: u32,
        off: usize,
        n: usize,
    ) -> Result<Slice, ProtoError> {
        let reg = self.nodes[at as usize].mrs.get(&mr).copied();
        match reg {
            Some(r) if off.checked_add(n).is_some_and(|e| e <= r.len) => Ok(r),
            _ if self.strict => panic!(
                "rank {from} reached rank {at} through mr {mr} at {off}+{n}: dead or too small"
            ),
            _ => Err(ProtoError::BadKey {
                peer: from,
                detail: format!("mr {mr} at {off}+{n} rejected"),
            }),
        }
    }

    /// Run until nothing is left, except events `hold` keeps back (in order).
    pub fn run_holding(&mut self, hold: impl Fn(&Ev) -> bool) -> Result<(), ProtoError> {
        let mut held = VecDeque::new();
        while let Some(ev) = self.queue.pop_front() {
            if hold(&ev) {
                held.push_back(ev);
            } else {
                self.handle(ev)?;
            }
        }
        self.queue = held;
        Ok(())
    }

    pub fn run(&mut self) -> Result<(), ProtoError> {
        self.run_holding(|_| false)
    }

    /// Rank 0's `src` to rank 1's `dst` under `tag`, the receive posted
    /// first, run to the end; the receive's status.
    pub fn exchange(&mut self, src: Slice, dst: Slice, tag: u32, mode: Mode) -> Status {
        let (sr, rr) = self.post(src, dst, tag, mode);
        self.finish(sr, rr)
    }

    /// Rank 1's receive into `dst` from rank 0, then rank 0's send of
    /// `src`, both with `tag`: (send, receive).
    pub fn post(&mut self, src: Slice, dst: Slice, tag: u32, mode: Mode) -> (ReqId, ReqId) {
        let rr = self.irecv(1, dst, Some(0), Some(tag));
        (self.isend(0, src, 1, tag, mode), rr)
    }

    /// Run to the end: rank 0's send `sr` and rank 1's receive `rr` must
    /// be done; the receive's status.
    pub fn finish(&mut self, sr: ReqId, rr: ReqId) -> Status {
        self.run().unwrap();
        self.done(0, sr);
        self.done(1, rr)
    }

    pub fn take(&mut self, rank: Rank, r: ReqId) -> Option<Status> {
        self.nodes[rank as usize].eng.take(r)
    }

    pub fn done(&mut self, rank: Rank, r: ReqId) -> Status {
        match self.take(rank, r) {
            Some(s) => s,
            other => panic!(
                "rank {rank} request {r:?} not done: {other:?} ({})",
                self.nodes[rank as usize].eng.describe(r)
            ),
        }
    }
}

pub fn pattern(seed: u8) -> impl Fn(usize) -> u8 {
    move |i| (i as u8).wrapping_mul(31).wrapping_add(seed)
}
