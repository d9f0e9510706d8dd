//! An in-process transport for driving communicators in tests: ranks are
//! threads sharing memory, two-sided messages go through per-rank
//! inboxes, one-sided operations copy under the target's lock (an
//! offloaded NIC: no target progress needed). It honours the contract
//! (keys checked, ranges checked, per-peer FIFO) so the drivers above it
//! are exercised for real.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ovbench_core::clock::MonotonicClock;
use ovbench_core::{
    trecv_wait_polling, Arrivals, Caps, Clock, Comm, Completion, CompletionStamps, Ctx,
    EngineConfig, Idle, LocalSlice, MrHandle, Msg, OpKind, Posted, Progress, Rank, RegionId,
    Registered, RemoteKey, Rma, RmaKind, RmaOp, RmaProgress, TagRecv, TagSend, Tagged, Transport,
    TransportError, TransportInfo, Waited, Work, WorkLoop,
};

pub const EAGER_BUF: usize = 4096;

#[derive(Default)]
struct RankState {
    regions: Vec<Vec<u8>>,
    mrs: HashMap<u32, LocalSlice>,
    inbox: VecDeque<(Rank, Vec<u8>)>,
    /// Native tagged messages that arrived: (from, tag, data, sync ctx).
    tagged: VecDeque<(Rank, u32, Vec<u8>, Option<Ctx>)>,
    /// Posted tagged receives: (source, tag, destination, ctx).
    trecvs: Vec<(Option<Rank>, Option<u32>, LocalSlice, Ctx)>,
    /// Completions other ranks produced for us (synchronous sends matched).
    remote_done: VecDeque<Completion>,
}

pub struct Shared {
    ranks: Vec<Mutex<RankState>>,
}

pub struct MemTransport {
    rank: Rank,
    shared: Arc<Shared>,
    done: VecDeque<Completion>,
    /// Completions a `trecv_wait` polled up, for the next poll.
    held: Vec<Completion>,
    next_mr: u32,
}

pub fn job(n: u32) -> Vec<MemTransport> {
    let shared = Arc::new(Shared {
        ranks: (0..n).map(|_| Mutex::new(RankState::default())).collect(),
    });
    (0..n)
        .map(|rank| MemTransport {
            rank,
            shared: shared.clone(),
            done: VecDeque::new(),
            held: Vec::new(),
            next_mr: 1,
        })
        .collect()
}

fn bad(peer: Rank, op: OpKind, s: String) -> TransportError {
    TransportError::Peer {
        peer,
        op,
        status: s,
    }
}

impl MemTransport {
    fn me(&self) -> std::sync::MutexGuard<'_, RankState> {
        self.shared.ranks[self.rank as usize].lock().unwrap()
    }
    /// Resolve `key` at `peer` to a slice of its memory.
    fn target(
        st: &RankState,
        peer: Rank,
        key: &RemoteKey,
        off: u64,
        n: usize,
        op: OpKind,
    ) -> Result<LocalSlice, TransportError> {
        let id = u32::from_le_bytes(
            key.blob
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad(peer, op, "short key".into()))?,
        );
        let s = *st.mrs.get(&id).ok_or_else(|| TransportError::BadKey {
            peer,
            detail: format!("mr {id} is not registered"),
        })?;
        if off + n as u64 > s.len as u64 {
            return Err(TransportError::BadKey {
                peer,
                detail: format!("{off}+{n} outside {} bytes", s.len),
            });
        }
        Ok(LocalSlice::new(s.region, s.offset + off as usize, n))
    }
}

fn check_local(st: &RankState, s: LocalSlice) -> Result<(), TransportError> {
    let r = st
        .regions
        .get(s.region.0 as usize)
        .ok_or_else(|| TransportError::Invalid(format!("no region {}", s.region.0)))?;
    if s.offset + s.len > r.len() {
        return Err(TransportError::Invalid(format!(
            "slice {s:?} outside region of {}",
            r.len()
        )));
    }
    Ok(())
}

impl Transport for MemTransport {
    fn info(&self) -> TransportInfo {
        TransportInfo {
            name: "mem".into(),
            device: String::new(),
            library: String::new(),
            extra: Vec::new(),
            caps: Caps {
                rma: RmaKind::Native,
                rma_progress: RmaProgress::Offloaded,
                progress: Progress::Poll,
                eager_buf_size: EAGER_BUF,
                native_sync_send: true,
                completion_stamps: CompletionStamps::Host,
                eager_copies: 0,
            },
            rank: self.rank,
            size: self.shared.ranks.len() as u32,
        }
    }
    fn address(&self) -> Vec<u8> {
        vec![]
    }
    fn connect(&mut self, _: &[Vec<u8>]) -> Result<(), TransportError> {
        Ok(())
    }
    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        let mut st = self.me();
        st.regions.push(vec![0; len]);
        Ok(RegionId(st.regions.len() as u32 - 1))
    }
    fn free(&mut self, _: RegionId) -> Result<(), TransportError> {
        Ok(())
    }
    fn region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        let mut st = self.me();
        check_local(&st, s)?;
        f(&mut st.regions[s.region.0 as usize][s.offset..s.offset + s.len]);
        Ok(())
    }
    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        let id = self.next_mr;
        self.next_mr += 1;
        let mut st = self.me();
        check_local(&st, s)?;
        st.mrs.insert(id, s);
        Ok(Registered {
            mr: MrHandle(id),
            key: RemoteKey {
                addr: 0,
                len: s.len as u64,
                blob: id.to_le_bytes().to_vec(),
            },
        })
    }
    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.me()
            .mrs
            .remove(&mr.0)
            .map(|_| ())
            .ok_or_else(|| TransportError::Invalid(format!("mr {} not registered", mr.0)))
    }
    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        let Msg { header, payload } = msg;
        let mut msg = header.to_vec();
        if let Some(p) = payload {
            let st = self.me();
            check_local(&st, p)?;
            msg.extend_from_slice(&st.regions[p.region.0 as usize][p.offset..p.offset + p.len]);
        }
        if msg.len() > EAGER_BUF {
            return Err(TransportError::Invalid(format!(
                "message of {} bytes over {EAGER_BUF}",
                msg.len()
            )));
        }
        let me = self.rank;
        self.shared
            .ranks
            .get(peer as usize)
            .ok_or_else(|| bad(peer, OpKind::Send, "no such rank".into()))?
            .lock()
            .unwrap()
            .inbox
            .push_back((me, msg));
        self.done.push_back(Completion::Send { ctx });
        Ok(Posted::Queued)
    }
    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        let (local, remote, off) = (rma.local, rma.remote, rma.remote_offset);
        match rma.op {
            Rma::Write => {
                let data = {
                    let st = self.me();
                    check_local(&st, local)?;
                    st.regions[local.region.0 as usize][local.offset..local.offset + local.len]
                        .to_vec()
                };
                let mut t = self.shared.ranks[peer as usize].lock().unwrap();
                let dst = Self::target(&t, peer, remote, off, local.len, OpKind::Write)?;
                t.regions[dst.region.0 as usize][dst.offset..dst.offset + dst.len]
                    .copy_from_slice(&data);
                drop(t);
                self.done.push_back(Completion::Write { ctx });
            }
            Rma::Read => {
                let data = {
                    let t = self.shared.ranks[peer as usize].lock().unwrap();
                    let src = Self::target(&t, peer, remote, off, local.len, OpKind::Read)?;
                    t.regions[src.region.0 as usize][src.offset..src.offset + src.len].to_vec()
                };
                let mut st = self.me();
                check_local(&st, local)?;
                st.regions[local.region.0 as usize][local.offset..local.offset + local.len]
                    .copy_from_slice(&data);
                drop(st);
                self.done.push_back(Completion::Read { ctx });
            }
        }
        Ok(())
    }
    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        _arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        let before = out.len();
        out.append(&mut self.held);
        out.extend(self.done.drain(..));
        let mut acks = Vec::new();
        {
            let mut st = self.me();
            while let Some((peer, data)) = st.inbox.pop_front() {
                out.push(Completion::Recv { peer, data });
            }
            out.extend(st.remote_done.drain(..));
            // Match posted tagged receives in posting order, messages in arrival order.
            let mut i = 0;
            while i < st.trecvs.len() {
                let (src, tag, dst, ctx) = st.trecvs[i];
                let hit = st.tagged.iter().position(|(f, t, _, _)| {
                    src.map_or(true, |s| s == *f) && tag.map_or(true, |x| x == *t)
                });
                let Some(m) = hit else {
                    i += 1;
                    continue;
                };
                let (from, t, data, sync) = st.tagged.remove(m).expect("position");
                st.trecvs.remove(i);
                if data.len() > dst.len {
                    return Err(bad(
                        from,
                        OpKind::TaggedRecv,
                        format!("{} bytes into {}", data.len(), dst.len),
                    ));
                }
                st.regions[dst.region.0 as usize][dst.offset..dst.offset + data.len()]
                    .copy_from_slice(&data);
                out.push(Completion::TaggedRecv {
                    ctx,
                    peer: from,
                    tag: t,
                    len: data.len(),
                });
                if let Some(c) = sync {
                    acks.push((from, c));
                }
            }
        }
        for (from, c) in acks {
            self.shared.ranks[from as usize]
                .lock()
                .unwrap()
                .remote_done
                .push_back(Completion::TaggedSend { ctx: c });
        }
        Ok(out.len() - before)
    }
    fn idle(&mut self, why: Idle) -> Result<(), TransportError> {
        if let Idle::Block(t) = why {
            std::thread::sleep(t.min(Duration::from_micros(50)));
        }
        Ok(())
    }
    fn tagged(&mut self) -> Option<&mut dyn Tagged> {
        Some(self)
    }
}

impl Tagged for MemTransport {
    /// An eager send ends inside the call (its bytes are in the peer's
    /// queue): `Done`; a synchronous one when the receive matches.
    fn tsend(&mut self, op: TagSend, ctx: Ctx) -> Result<Posted, TransportError> {
        let src = op.src;
        let data = {
            let st = self.me();
            check_local(&st, src)?;
            st.regions[src.region.0 as usize][src.offset..src.offset + src.len].to_vec()
        };
        let me = self.rank;
        self.shared.ranks[op.peer as usize]
            .lock()
            .unwrap()
            .tagged
            .push_back((me, op.tag, data, op.sync.then_some(ctx)));
        Ok(if op.sync {
            Posted::Queued
        } else {
            Posted::Done(None)
        })
    }
    fn trecv(&mut self, op: TagRecv, ctx: Ctx) -> Result<(), TransportError> {
        let TagRecv { src, tag, dst } = op;
        let mut st = self.me();
        check_local(&st, dst)?;
        st.trecvs.push((src, tag, dst, ctx));
        Ok(())
    }
    fn trecv_wait(&mut self, op: TagRecv, timeout: Duration) -> Result<Waited, TransportError> {
        let mut held = std::mem::take(&mut self.held);
        let r = trecv_wait_polling(self, &mut held, op, timeout);
        self.held.append(&mut held);
        r
    }
}

/// How a Comm is built over a transport: `Comm::engine` or `Comm::native`.
pub type Build = fn(
    Box<dyn Transport>,
    Arc<dyn Clock>,
    Box<dyn Work>,
    EngineConfig,
) -> Result<Comm, TransportError>;

/// A Comm built by `build` over `t`, with its own monotonic clock.
pub fn comm_over(t: impl Transport + 'static, cfg: &EngineConfig, build: Build) -> Comm {
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    let work = Box::new(WorkLoop::with_unit(clock.clone(), 1.0));
    build(Box::new(t), clock, work, cfg.clone()).expect("a Comm over the test transport")
}

/// An engine Comm per rank of an in-process job.
pub fn comms(n: u32, cfg: &EngineConfig) -> Vec<Comm> {
    job(n)
        .into_iter()
        .map(|t| comm_over(t, cfg, Comm::engine))
        .collect()
}

/// Engine Comms whose clocks start about `gap` apart, with the window
/// (earliest, latest `Instant`) in which each clock's origin was taken.
pub fn comms_staggered(
    n: u32,
    cfg: &EngineConfig,
    gap: Duration,
) -> (Vec<Comm>, Vec<(std::time::Instant, std::time::Instant)>) {
    let mut windows = Vec::new();
    let comms = job(n)
        .into_iter()
        .map(|t| {
            if t.rank > 0 {
                std::thread::sleep(gap);
            }
            let before = std::time::Instant::now();
            let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
            windows.push((before, std::time::Instant::now()));
            let work = Box::new(WorkLoop::with_unit(clock.clone(), 1.0));
            Comm::engine(Box::new(t), clock, work, cfg.clone()).expect("engine comm")
        })
        .collect();
    (comms, windows)
}

/// A native Comm per rank of an in-process job, each over its transport
/// held through the plain contract (its tagged path asked for per call).
pub fn native_comms(n: u32, cfg: &EngineConfig) -> Vec<Comm> {
    job(n)
        .into_iter()
        .map(|t| comm_over(t, cfg, Comm::native))
        .collect()
}

/// As [`native_comms`], each transport held as its tagged protocol
/// ([`ovbench_core::Link::Tagged`]), as the tool holds UCX and libfabric.
pub fn native_comms_tagged(n: u32, cfg: &EngineConfig) -> Vec<Comm> {
    job(n)
        .into_iter()
        .map(|t| {
            let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
            let work = Box::new(WorkLoop::with_unit(clock.clone(), 1.0));
            let t: Box<dyn Tagged> = Box::new(t);
            Comm::native(t, clock, work, cfg.clone()).expect("a native Comm over Link::Tagged")
        })
        .collect()
}

/// Run `f(comm)` on every rank in its own thread; results by rank.
pub fn run<C: Send + 'static, T: Send + 'static>(
    comms: Vec<C>,
    f: impl Fn(&mut C) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let hs: Vec<_> = comms
        .into_iter()
        .map(|mut c| {
            let f = f.clone();
            std::thread::spawn(move || f(&mut c))
        })
        .collect();
    hs.into_iter()
        .map(|h| h.join().expect("rank thread"))
        .collect()
}
