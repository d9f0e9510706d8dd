//! The communicator over the protocol engine ([`EngineComm`]) and over a
//! library's native tagged path ([`NativeComm`]): layer 3, over layer 1's
//! [`crate::Transport`] and layer 2's protocol engine.
//!
//! Both own a connected [`Transport`], the communicator's [`Clock`] and
//! [`Work`] loop; every wait honours [`EngineConfig::timeout`] and a
//! timeout names the rank, the peer, the operation and the size.

mod barrier;
mod config;
mod drive;
mod native;
mod shared;

use std::sync::Arc;

use ovbench_proto::{Engine, Mode, ReqId, Slice, Space};

pub use config::{
    prefers_read, protocol_name, EngineConfig, EngineShape, Protocol, RawOp, DEFAULT_FRAG_SIZE,
};
pub use native::NativeComm;
pub use ovbench_proto::QUIET_CTX;

use crate::instrument::{Instrumentation, XferTable};
use crate::{
    Buf, Caps, Clock, CommInfo, Communicator, Completion, LocalSlice, OpCounts, Rank, Req,
    SendMode, Source, Status, Tag, TagSel, Transport, TransportError, TransportInfo, Work,
};
use shared::blocking_as_one_call;

/// The point-to-point API over the ovbench protocol engine.
pub struct EngineComm {
    pub(crate) t: Box<dyn Transport>,
    pub(crate) eng: Engine,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) work: Box<dyn Work>,
    pub(crate) cfg: EngineConfig,
    caps: Caps,
    info: TransportInfo,
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    pub(crate) comps: Vec<Completion>,
    pub(crate) instr: Option<Instrumentation>,
    /// A small region for barrier messages (zero-length slices of it).
    pub(crate) scratch: Option<Buf>,
    pub(crate) barrier_epoch: u32,
    /// The header of a send posted directly ([`Engine::isend_direct`]),
    /// its allocation kept for the next.
    direct_hdr: Vec<u8>,
}

impl std::fmt::Debug for EngineComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("transport", &self.info.name)
            .field("cfg", &self.cfg)
            .finish()
    }
}

fn mode_of(m: SendMode) -> Mode {
    match m {
        SendMode::Standard => Mode::Standard,
        SendMode::Buffered => Mode::Buffered,
        SendMode::Synchronous => Mode::Synchronous,
        SendMode::Ready => Mode::Ready,
    }
}

/// Check `[off, off+len)` lies in `buf`.
pub(crate) fn range(buf: Buf, off: usize, len: usize, what: &str) -> Result<Slice, TransportError> {
    match off.checked_add(len) {
        Some(end) if end <= buf.len => Ok(Slice::new(buf.region.0, off, len)),
        _ => Err(TransportError::Invalid(format!(
            "{what} of {len} bytes at offset {off} lies outside its {}-byte buffer",
            buf.len
        ))),
    }
}

impl EngineComm {
    /// A communicator over an already connected `transport`.
    pub fn new(
        transport: Box<dyn Transport>,
        clock: Arc<dyn Clock>,
        work: Box<dyn Work>,
        cfg: EngineConfig,
    ) -> Result<EngineComm, TransportError> {
        let info = transport.info();
        let (caps, rank, size) = (info.caps.clone(), info.rank, info.size);
        let mut pc = ovbench_proto::Config::new(rank, size, caps.eager_buf_size);
        pc.protocol = cfg.protocol;
        pc.eager_limit = cfg.eager_limit;
        pc.frag_size = cfg.frag_size.unwrap_or(DEFAULT_FRAG_SIZE);
        pc.prefer_read = prefers_read(&caps);
        pc.reg_cache = cfg.reg_cache;
        pc.instrument = false;
        let eng = Engine::new(pc).map_err(drive::proto_err)?;
        Ok(EngineComm {
            t: transport,
            eng,
            clock,
            work,
            cfg,
            caps,
            info,
            rank,
            size,
            comps: Vec::with_capacity(64),
            instr: None,
            scratch: None,
            barrier_epoch: 0,
            direct_hdr: Vec::new(),
        })
    }

    /// The transport underneath (for transport-specific reporting).
    pub fn transport(&self) -> &dyn Transport {
        self.t.as_ref()
    }

    /// Requests not yet retired (should be 0 between iterations).
    pub fn in_flight(&self) -> usize {
        self.eng.in_flight()
    }

    /// Run `f` as one communicator call (one CALL_ENTER/CALL_EXIT pair).
    fn call<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        shared::call_enter(&mut self.instr, self.clock.as_ref());
        let r = f(self);
        shared::call_exit(&mut self.instr, self.clock.as_ref());
        r
    }

    /// The engine's `now`: the clock only while instrumenting. The engine
    /// uses it for nothing but XFER events, and an eager message read the
    /// TSC (~9 ns a read here) three or four times on its way.
    #[inline]
    pub(crate) fn stamp(&self) -> u64 {
        if self.instr.is_some() {
            self.clock.ticks()
        } else {
            0
        }
    }

    /// [`Self::stamp`] for a completion the transport timed itself
    /// ([`crate::Posted::Done`]): its time where the clock can place it.
    pub(crate) fn stamp_at(&self, at: crate::CompletionTime) -> u64 {
        if self.instr.is_none() {
            return 0;
        }
        match at {
            crate::CompletionTime::Host(t) => self.clock.ticks_at(t),
            crate::CompletionTime::Ticks(t) => Some(t),
        }
        .unwrap_or_else(|| self.clock.ticks())
    }

    /// A blocking send while nothing is recorded: posted and waited for
    /// here.
    fn send_now(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        dst: Rank,
        tag: Tag,
    ) -> Result<(), TransportError> {
        let r = self.post_user_send(buf, off, len, dst, tag, Mode::Standard)?;
        self.wait_req(r).map(|_| ())
    }

    /// A blocking receive while nothing is recorded: posted and waited
    /// for here.
    fn recv_now(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        src: Source,
        tag: TagSel,
    ) -> Option<Result<Status, TransportError>> {
        Some(
            self.post_user_recv(buf, off, len, src, tag)
                .and_then(|r| self.wait_req(r)),
        )
    }

    /// Post a send of the user's `buf[off..off + len]`.
    #[inline]
    fn post_user_send(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        dst: Rank,
        tag: Tag,
        mode: Mode,
    ) -> Result<ReqId, TransportError> {
        let s = range(buf, off, len, "send")?;
        let whole = Slice::new(buf.region.0, 0, buf.len);
        self.post_send(s, whole, dst, tag, mode, Space::User)
    }

    /// Post a receive into the user's `buf[off..off + len]`.
    #[inline]
    fn post_user_recv(
        &mut self,
        buf: Buf,
        off: usize,
        len: usize,
        src: Source,
        tag: TagSel,
    ) -> Result<ReqId, TransportError> {
        let s = range(buf, off, len, "receive")?;
        let whole = Slice::new(buf.region.0, 0, buf.len);
        self.post_recv(s, whole, src, tag, Space::User)
    }

    pub(crate) fn post_send(
        &mut self,
        s: Slice,
        whole: Slice,
        dst: Rank,
        tag: Tag,
        mode: Mode,
        space: Space,
    ) -> Result<ReqId, TransportError> {
        let now = self.stamp();
        // A one-packet eager send is posted here and now, past the
        // engine's operation queue.
        // The header buffer is borrowed in place, not moved out and back
        // (a move is a store reloaded at once).
        let direct =
            self.eng
                .isend_direct(now, s, whole, dst, tag, mode, space, &mut self.direct_hdr);
        if let Ok(Some(d)) = direct {
            let posted =
                self.t
                    .post_send(d.peer, &self.direct_hdr, d.payload.map(drive::ls), d.ctx)?;
            if let crate::Posted::Done(at) = posted {
                self.sent_inline(d.ctx, at)?;
            }
            self.drain_events();
            return Ok(d.req);
        }
        direct.map_err(drive::proto_err)?;
        let r = self
            .eng
            .isend_in(now, s, whole, dst, tag, mode, space)
            .map_err(drive::proto_err)?;
        self.exec_ops()?;
        Ok(r)
    }

    pub(crate) fn post_recv(
        &mut self,
        s: Slice,
        whole: Slice,
        src: Source,
        tag: TagSel,
        space: Space,
    ) -> Result<ReqId, TransportError> {
        let now = self.stamp();
        let r = self
            .eng
            .irecv_in(now, s, whole, src, tag, space)
            .map_err(drive::proto_err)?;
        self.exec_ops()?;
        Ok(r)
    }
}

impl Drop for EngineComm {
    fn drop(&mut self) {
        // Give cached registrations back; errors at teardown change nothing.
        self.eng.flush_cache();
        let _ = self.exec_ops();
    }
}

impl Communicator for EngineComm {
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }
    fn work(&mut self, units: u64) {
        self.work.work(units)
    }
    fn work_unit_ns(&self) -> f64 {
        self.work.unit_ns()
    }
    fn delay(&mut self, ns: f64) {
        self.work.delay(ns)
    }
    fn alloc(&mut self, len: usize) -> Result<Buf, TransportError> {
        let region = self.t.alloc(len)?;
        Ok(Buf { region, len })
    }
    fn fill(&mut self, buf: Buf, f: &mut dyn FnMut(&mut [u8])) -> Result<(), TransportError> {
        self.t.region(LocalSlice::new(buf.region, 0, buf.len), f)
    }
    fn inspect(&mut self, buf: Buf, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError> {
        self.t
            .region(LocalSlice::new(buf.region, 0, buf.len), &mut |b| f(b))
    }
    fn instrumentation(&mut self) -> Option<&mut Instrumentation> {
        self.instr.as_mut()
    }

    fn info(&self) -> CommInfo {
        CommInfo {
            transport: self.info.clone(),
            caps: self.caps.clone(),
            protocol: crate::CommPath::Engine(self.cfg.protocol),
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
        self.call(|c| {
            c.post_user_send(buf, off, len, dst, tag, mode_of(mode))
                .map(|r| Req(r.0))
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
        self.call(|c| c.post_user_recv(buf, off, len, src, tag).map(|r| Req(r.0)))
    }

    fn test(&mut self, req: Req) -> Result<Option<Status>, TransportError> {
        self.call(|c| {
            if !c.eng.is_done(ReqId(req.0)) {
                c.poll_once()?;
            }
            match c.eng.take(ReqId(req.0)) {
                Some(r) => r
                    .map(|s| {
                        Some(Status {
                            source: s.source,
                            tag: s.tag,
                            len: s.len,
                        })
                    })
                    .map_err(drive::proto_err),
                None => Ok(None),
            }
        })
    }

    fn wait(&mut self, req: Req) -> Result<Status, TransportError> {
        self.call(|c| c.wait_req(ReqId(req.0)))
    }

    fn progress(&mut self) -> Result<(), TransportError> {
        self.call(|c| c.poll_once().map(|_| ()))
    }

    fn barrier(&mut self) -> Result<(), TransportError> {
        self.call(|c| c.dissemination_barrier())
    }

    fn op_counts(&self) -> OpCounts {
        let c = self.eng.counts();
        OpCounts {
            sends: c.sends,
            writes: c.writes,
            reads: c.reads,
            tagged_sends: 0,
            bytes: c.bytes,
            registrations: c.registrations,
        }
    }

    blocking_as_one_call!(@sends call; ssend issend, rsend irsend, bsend ibsend);
    blocking_as_one_call!(@direct call, send_now, recv_now);
    blocking_as_one_call!(@rest call);

    fn enable_instrumentation(&mut self, table: XferTable) -> Result<(), TransportError> {
        shared::enable(&mut self.instr, self.clock.as_ref(), table);
        self.eng.set_instrument(true);
        Ok(())
    }

    fn disable_instrumentation(&mut self) {
        self.instr = None;
        self.eng.set_instrument(false);
    }

    fn drain_transfers(&mut self) -> Result<(), TransportError> {
        self.call(|c| c.drain_data_ops())
    }

    fn engine_shape(&self) -> Option<EngineShape> {
        Some(EngineShape {
            native: false,
            protocol: self.eng.protocol(),
            eager_limit: self.cfg.eager_limit,
            max_payload: self.eng.max_payload(),
            frag_size: self.cfg.frag_size.unwrap_or(DEFAULT_FRAG_SIZE),
            prefer_read: prefers_read(&self.caps),
        })
    }

    fn set_bare_op(&mut self, op: Option<RawOp>) -> Result<(), TransportError> {
        let p = op.map_or(self.cfg.protocol, Protocol::Raw);
        self.eng.set_protocol(p).map_err(drive::proto_err)
    }
}
