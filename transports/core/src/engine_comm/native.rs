//! `--proto native`: the communicator over the library's own tagged
//! protocol ([`Transport::tsend`]/[`Transport::trecv`]: UCX tag,
//! libfabric tagged, MPI point-to-point). Its transfers are
//! call-bounded: XFER_BEGIN at the entry of the posting call, XFER_END
//! at the exit of the completing call (case 3 of the paper for the
//! minimum overlap).
//!
//! The barrier uses tags from [`NATIVE_BARRIER_TAG`] up: the library's
//! matching has no separate space, so a user receive with `ANY_TAG`
//! must not be pending across a barrier on this path.

use std::sync::Arc;

use ovbench_proto::IdMap;
use std::time::{Duration, Instant};

use super::shared::{self, blocking_as_one_call};
use super::{range, EngineComm, EngineConfig};
use crate::instrument::{Instrumentation, XferTable};
use crate::{
    Buf, Caps, Clock, CommInfo, Communicator, Completion, Idle, LocalSlice, OpCounts, OpKind,
    Posted, Rank, Req, SendMode, Source, Status, Tag, TagSel, Tagged, Transport, TransportError,
    TransportInfo, Waited, Work,
};

/// First tag the native barrier uses (user tags must stay below it).
pub const NATIVE_BARRIER_TAG: Tag = 0xFFFF_0000;

#[derive(Debug)]
struct NReq {
    send: bool,
    peer: Option<Rank>,
    tag: Option<Tag>,
    len: usize,
    done: Option<Status>,
    /// The XFER id recorded at posting, when instrumenting.
    xfer: Option<u64>,
}

/// `[off, off+len)` of `buf` as the transport's slice, after checking it
/// lies in `buf`.
fn local(buf: Buf, off: usize, len: usize, what: &str) -> Result<LocalSlice, TransportError> {
    let s = range(buf, off, len, what)?;
    Ok(LocalSlice::new(buf.region, s.offset, s.len))
}

/// The request of a send to `dst` of `len` bytes with `tag`; `done` when
/// the library finished it inside the posting call.
fn send_req(dst: Rank, tag: Tag, len: usize, done: bool) -> NReq {
    NReq {
        send: true,
        peer: Some(dst),
        tag: Some(tag),
        len,
        done: done.then_some(Status {
            source: dst,
            tag,
            len,
        }),
        xfer: None,
    }
}

/// The point-to-point API over a library's native tagged protocol.
pub struct NativeComm {
    /// The engine path over the same transport, clock and work loop: the
    /// transport lives in it, and it runs the bare operations that time
    /// xfer_time ([`Communicator::set_bare_op`]) while `bare` is set.
    e: EngineComm,
    bare: bool,
    cfg: EngineConfig,
    caps: Caps,
    info: TransportInfo,
    rank: Rank,
    size: u32,
    comps: Vec<Completion>,
    next: u64,
    /// Requests by id: ids only increase, so the engine's direct-slot
    /// table beats a hash map (SipHash was ~15% of a shared-memory
    /// round trip).
    reqs: IdMap<NReq>,
    counts: OpCounts,
    instr: Option<Instrumentation>,
    scratch: Option<Buf>,
    epoch: u32,
}

impl std::fmt::Debug for NativeComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("transport", &self.info.name)
            .finish()
    }
}

impl NativeComm {
    /// A native communicator over a connected `transport`; an error
    /// naming the valid protocols where the transport has no tagged path.
    pub fn new(
        mut transport: Box<dyn Transport>,
        clock: Arc<dyn Clock>,
        work: Box<dyn Work>,
        cfg: EngineConfig,
    ) -> Result<NativeComm, TransportError> {
        let info = transport.info();
        let caps = info.caps.clone();
        if transport.tagged().is_none() {
            return Err(TransportError::Unsupported(format!(
                "--proto native needs a library tagged protocol, which the {} transport lacks; use --proto eager, rdma-write, rdma-read, pipelined, auto or raw",
                info.name
            )));
        }
        let (rank, size) = (info.rank, info.size);
        Ok(NativeComm {
            rank,
            size,
            e: EngineComm::new(transport, clock, work, cfg.clone())?,
            bare: false,
            cfg,
            caps,
            info,
            comps: Vec::with_capacity(64),
            next: 1,
            reqs: IdMap::default(),
            counts: OpCounts::default(),
            instr: None,
            scratch: None,
            epoch: 0,
        })
    }

    fn enter(&mut self) -> u64 {
        shared::call_enter(&mut self.instr, self.e.clock.as_ref())
    }

    fn exit(&mut self) {
        shared::call_exit(&mut self.instr, self.e.clock.as_ref())
    }

    /// The transport's tagged protocol (checked present at construction).
    #[inline]
    fn tagged(&mut self) -> Result<&mut dyn Tagged, TransportError> {
        match self.e.t.tagged() {
            Some(t) => Ok(t),
            None => Err(TransportError::Invalid(
                "the transport's tagged protocol went away".into(),
            )),
        }
    }

    /// Run `f` as one communicator call (one CALL_ENTER/CALL_EXIT pair),
    /// given the tick of its entry (0 when not instrumenting).
    fn call<T>(&mut self, f: impl FnOnce(&mut Self, u64) -> T) -> T {
        let t = self.enter();
        let r = f(self, t);
        self.exit();
        r
    }

    /// [`call`](Self::call) for calls that do not need the entry tick.
    #[inline]
    fn call_once<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.call(|c, _| f(c))
    }

    /// Post a native send; its context and whether the library finished
    /// it inside the call.
    /// A blocking send while nothing is recorded: a send the library
    /// finishes inside the call is over, with no request to track and
    /// retire. That bookkeeping sat between a ping-pong's send and its
    /// next receive's posting, late enough on shared memory for the reply
    /// to arrive unexpected.
    fn send_now(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        dst: Rank,
        tag: Tag,
    ) -> Result<(), TransportError> {
        if self.bare {
            return self.e.send(buf, off, len, dst, tag);
        }
        let ls = local(buf, off, len, "send")?;
        let (id, sent) = self.post_tsend(ls, dst, tag, false)?;
        if sent {
            return Ok(());
        }
        // In flight: tracked and waited for as any send.
        let id = self.track(id, send_req(dst, tag, len, false), 0);
        self.wait_id(id).map(|_| ())
    }

    /// A blocking receive while nothing is recorded: with nothing else in
    /// flight the transport may wait for the message itself
    /// (`trecv_wait`); `None` where it cannot, for the general path.
    fn recv_now(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        src: Source,
        tag: TagSel,
    ) -> Option<Result<Status, TransportError>> {
        if self.bare {
            return Some(self.e.recv(buf, off, len, src, tag));
        }
        if !self.reqs.is_empty() || self.cfg.oversubscribed {
            return None;
        }
        if let Err(e) = crate::stop::check() {
            return Some(Err(e));
        }
        let ls = match local(buf, off, len, "receive") {
            Ok(ls) => ls,
            Err(e) => return Some(Err(e)),
        };
        let timeout = self.cfg.timeout;
        let waited = match self.tagged() {
            Ok(t) => t.trecv_wait(src, tag, ls, timeout),
            Err(e) => Err(e),
        };
        match waited {
            Ok(Waited::Done { peer, tag, len }) => Some(Ok(Status {
                source: peer,
                tag,
                len,
            })),
            Ok(Waited::TimedOut) => Some(Err(self.recv_timeout(src, tag, len))),
            Err(e) => Some(Err(e)),
        }
    }

    fn post_tsend(
        &mut self,
        s: LocalSlice,
        dst: Rank,
        tag: Tag,
        sync: bool,
    ) -> Result<(u64, bool), TransportError> {
        if sync && !self.caps.native_sync_send {
            return Err(TransportError::Unsupported(format!(
                "the {} transport's native path has no synchronous send; use --proto eager (or another engine protocol) for ssend",
                self.info.name
            )));
        }
        let id = self.next;
        self.next += 1;
        // The native path stamps a send's XFER_END as its request retires
        // (see `take`), so the library's own time is not needed here.
        let sent = matches!(
            self.tagged()?.tsend(dst, tag, s, sync, id)?,
            Posted::Done(_)
        );
        self.counts.tagged_sends += 1;
        self.counts.bytes += s.len as u64;
        Ok((id, sent))
    }

    fn tsend(
        &mut self,
        s: LocalSlice,
        dst: Rank,
        tag: Tag,
        sync: bool,
        at: u64,
    ) -> Result<u64, TransportError> {
        let (id, sent) = self.post_tsend(s, dst, tag, sync)?;
        // A send the library finished inside the call is done now: its
        // wait needs no poll (half the instructions of a blocking send).
        Ok(self.track(id, send_req(dst, tag, s.len, sent), at))
    }

    fn trecv(
        &mut self,
        s: LocalSlice,
        src: Source,
        tag: TagSel,
        at: u64,
    ) -> Result<u64, TransportError> {
        let id = self.next;
        self.next += 1;
        self.tagged()?.trecv(src, tag, s, id)?;
        let r = NReq {
            send: false,
            peer: src,
            tag,
            len: s.len,
            done: None,
            xfer: None,
        };
        Ok(self.track(id, r, at))
    }

    /// Remember the just-posted operation `id`, stamping XFER_BEGIN at
    /// the posting call's entry `at` when instrumenting.
    #[inline]
    fn track(&mut self, id: u64, mut r: NReq, at: u64) -> u64 {
        r.xfer = self.instr.as_mut().map(|i| {
            i.xfer_begin(id, r.len as u64, at, true);
            id
        });
        self.reqs.insert(id, r);
        id
    }

    fn poll_once(&mut self) -> Result<bool, TransportError> {
        // Polled straight into `self.comps`, taken out only when something
        // came (see EngineComm's poll_once).
        let r = self.e.t.poll(&mut self.comps, None);
        if self.comps.is_empty() {
            return r.map(|_| false);
        }
        let mut comps = std::mem::take(&mut self.comps);
        let mut res = r.map(|_| ());
        for c in comps.drain(..) {
            if res.is_err() {
                break;
            }
            res = match c {
                Completion::TaggedSend { ctx } => self.complete(ctx, None),
                Completion::TaggedRecv { ctx, peer, tag, len } => self.complete(ctx, Some((peer, tag, len))),
                Completion::Error { peer, op, status, .. } => Err(TransportError::Peer { peer, op, status }),
                Completion::Recv { peer, data } => {
                    self.e.t.recycle(data);
                    Err(TransportError::Peer {
                        peer,
                        op: OpKind::Recv,
                        status: "an engine message arrived on the native path: every rank must use the same --proto".into(),
                    })
                }
                other => Err(TransportError::Invalid(format!(
                    "the native path posts only tagged operations, but the transport completed {other:?}"
                ))),
            };
        }
        comps.clear();
        self.comps = comps;
        res.map(|_| true)
    }

    fn complete(
        &mut self,
        ctx: u64,
        env: Option<(Rank, Tag, usize)>,
    ) -> Result<(), TransportError> {
        let Some(r) = self.reqs.get_mut(&ctx) else {
            return Err(TransportError::Invalid(format!(
                "the transport completed tagged operation {ctx}, which was never posted"
            )));
        };
        let st = match env {
            Some((peer, tag, len)) => Status {
                source: peer,
                tag,
                len,
            },
            None => Status {
                source: r.peer.unwrap_or(0),
                tag: r.tag.unwrap_or(0),
                len: r.len,
            },
        };
        r.done = Some(st);
        Ok(())
    }

    /// Retire `id` if done, stamping XFER_END (at the completing call's exit, as near as we can).
    fn take(&mut self, id: u64) -> Option<Status> {
        self.reqs.get(&id)?.done?;
        let r = self.reqs.remove(&id)?;
        let st = r.done?;
        if let (Some(i), Some(x)) = (self.instr.as_mut(), r.xfer) {
            i.xfer_end(x, r.len as u64, self.e.clock.ticks());
        }
        Some(st)
    }

    fn wait_id(&mut self, id: u64) -> Result<Status, TransportError> {
        // A stop, once per wait as well (see EngineComm's wait_req).
        crate::stop::check()?;
        // The deadline's clock starts at the first check, CHECK_EVERY polls
        // in (as in EngineComm's wait): most waits end before it, and
        // reading the clock costs more than a poll of a shared-memory link.
        let mut start: Option<Instant> = None;
        let mut spins = 0u32;
        let mut idle = 0u32;
        if let Some(s) = self.take(id) {
            return Ok(s);
        }
        loop {
            spins = spins.wrapping_add(1);
            if spins % shared::CHECK_EVERY == 0 {
                crate::stop::check()?;
                if start.get_or_insert_with(Instant::now).elapsed() > self.cfg.timeout {
                    return Err(self.timeout_error(id));
                }
            }
            // Only a poll that returned completions can have finished `id`.
            if self.poll_once()? {
                if let Some(s) = self.take(id) {
                    return Ok(s);
                }
                idle = 0;
            } else {
                // No `spin_loop()` (PAUSE) on a rank with a core of its own:
                // on this EPYC it was over half the cycles of a
                // shared-memory ping-pong and up to one PAUSE late on every
                // arrival; ucx_perftest and fi_pingpong poll without it.
                idle = idle.saturating_add(1);
                if self.cfg.oversubscribed {
                    if idle > shared::SPIN_BEFORE_BLOCK {
                        self.e.t.idle(Idle::Block(Duration::from_millis(1)))?;
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
    }

    /// The timeout of a blocking receive the transport waited for.
    #[cold]
    fn recv_timeout(&self, src: Source, tag: TagSel, len: usize) -> TransportError {
        let who = src.map_or("any rank".to_string(), |p| format!("rank {p}"));
        let what = format!(
            "rank {}: native receive of {len} bytes from {who} (tag {})",
            self.rank,
            tag.map_or("any".to_string(), |t| t.to_string())
        );
        shared::timeout(&self.cfg, src, what)
    }

    fn timeout_error(&self, id: u64) -> TransportError {
        let Some(r) = self.reqs.get(&id) else {
            return TransportError::Invalid(format!("request {id} is not pending"));
        };
        let who = r
            .peer
            .map_or("any rank".to_string(), |p| format!("rank {p}"));
        let what = format!(
            "rank {}: native {} of {} bytes {} {who} (tag {})",
            self.rank,
            if r.send { "send" } else { "receive" },
            r.len,
            if r.send { "to" } else { "from" },
            r.tag.map_or("any".to_string(), |t| t.to_string())
        );
        shared::timeout(&self.cfg, r.peer, what)
    }

    fn barrier_inner(&mut self) -> Result<(), TransportError> {
        if self.size <= 1 {
            return Ok(());
        }
        let b = shared::scratch(self.e.t.as_mut(), &mut self.scratch)?;
        let empty = LocalSlice::new(b.region, 0, 0);
        let epoch = self.epoch;
        self.epoch = epoch.wrapping_add(1);
        for k in 0..super::barrier::rounds(self.size) {
            let d = 1u32 << k;
            let to = (self.rank + d) % self.size;
            let from = (self.rank + self.size - d % self.size) % self.size;
            let tag = NATIVE_BARRIER_TAG | ((epoch & 0x3FF) << 6) | k;
            let r = self.trecv(empty, Some(from), Some(tag), 0)?;
            let s = self.tsend(empty, to, tag, false, 0)?;
            self.wait_id(s)?;
            self.wait_id(r)?;
        }
        Ok(())
    }
}

impl Communicator for NativeComm {
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn clock(&self) -> &dyn Clock {
        self.e.clock.as_ref()
    }
    fn work(&mut self, units: u64) {
        self.e.work(units)
    }
    fn work_unit_ns(&self) -> f64 {
        self.e.work_unit_ns()
    }
    fn delay(&mut self, ns: f64) {
        self.e.delay(ns)
    }
    fn alloc(&mut self, len: usize) -> Result<Buf, TransportError> {
        self.e.alloc(len)
    }
    fn fill(&mut self, buf: Buf, f: &mut dyn FnMut(&mut [u8])) -> Result<(), TransportError> {
        self.e.fill(buf, f)
    }
    fn inspect(&mut self, buf: Buf, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError> {
        self.e.inspect(buf, f)
    }
    fn instrumentation(&mut self) -> Option<&mut Instrumentation> {
        self.instr.as_mut()
    }

    fn info(&self) -> CommInfo {
        CommInfo {
            transport: self.info.clone(),
            caps: self.caps.clone(),
            protocol: crate::CommPath::Native,
            eager_limit: self.cfg.eager_limit,
        }
    }

    fn isend_mode(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        dst: Rank,
        tag: Tag,
        mode: SendMode,
    ) -> Result<Req, TransportError> {
        if self.bare {
            return self.e.isend_mode(buf, off, len, dst, tag, mode);
        }
        self.call(|c, at| {
            let ls = local(buf, off, len, "send")?;
            c.tsend(ls, dst, tag, mode == SendMode::Synchronous, at)
                .map(Req)
        })
    }

    fn irecv(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        src: Source,
        tag: TagSel,
    ) -> Result<Req, TransportError> {
        if self.bare {
            return self.e.irecv(buf, off, len, src, tag);
        }
        self.call(|c, at| {
            let ls = local(buf, off, len, "receive")?;
            c.trecv(ls, src, tag, at).map(Req)
        })
    }

    fn test(&mut self, req: Req) -> Result<Option<Status>, TransportError> {
        if self.bare {
            return self.e.test(req);
        }
        self.call(|c, _| {
            if let Some(s) = c.take(req.0) {
                return Ok(Some(s));
            }
            c.poll_once()?;
            Ok(c.take(req.0))
        })
    }

    fn wait(&mut self, req: Req) -> Result<Status, TransportError> {
        if self.bare {
            return self.e.wait(req);
        }
        self.call(|c, _| c.wait_id(req.0))
    }

    fn progress(&mut self) -> Result<(), TransportError> {
        if self.bare {
            return self.e.progress();
        }
        self.call(|c, _| c.poll_once().map(|_| ()))
    }

    fn barrier(&mut self) -> Result<(), TransportError> {
        if self.bare {
            return self.e.barrier();
        }
        // One call; barrier traffic is not user data, so no XFER events.
        self.enter();
        let instr = self.instr.take();
        let r = self.barrier_inner();
        self.instr = instr;
        self.exit();
        r
    }

    /// The library's tagged operations; the bare operations timed for
    /// xfer_time (the engine path's) are added to them.
    fn op_counts(&self) -> OpCounts {
        let e = self.e.op_counts();
        OpCounts {
            sends: self.counts.sends + e.sends,
            writes: self.counts.writes + e.writes,
            reads: self.counts.reads + e.reads,
            tagged_sends: self.counts.tagged_sends,
            bytes: self.counts.bytes + e.bytes,
            registrations: self.counts.registrations + e.registrations,
        }
    }

    // Blocking calls are one call each for the instrumentation.
    blocking_as_one_call!(@sends call_once; ssend issend, rsend irsend, bsend ibsend);
    blocking_as_one_call!(@direct call_once, send_now, recv_now);
    blocking_as_one_call!(@rest call_once);

    fn enable_instrumentation(&mut self, table: XferTable) -> Result<(), TransportError> {
        shared::enable(&mut self.instr, self.e.clock.as_ref(), table);
        Ok(())
    }

    fn disable_instrumentation(&mut self) {
        self.instr = None;
    }

    /// A native path's transfer ends in the call that completes it
    /// (call-bounded events): none is left open to wait for.
    fn drain_transfers(&mut self) -> Result<(), TransportError> {
        Ok(())
    }

    /// The bare operations run on the engine path over the same
    /// transport; both ranks switch at the same point of the method.
    fn set_bare_op(&mut self, op: Option<super::RawOp>) -> Result<(), TransportError> {
        if !self.reqs.is_empty() {
            return Err(TransportError::Invalid(format!(
                "switch to bare operations with {} native requests in flight",
                self.reqs.len()
            )));
        }
        self.e.set_bare_op(op)?;
        self.bare = op.is_some();
        Ok(())
    }

    fn engine_shape(&self) -> Option<super::EngineShape> {
        self.e.engine_shape().map(|s| super::EngineShape {
            native: true,
            eager_limit: self.cfg.eager_limit,
            ..s
        })
    }
}
