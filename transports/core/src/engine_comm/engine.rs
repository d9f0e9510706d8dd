//! The engine path: ovbench's own protocols, run by the sans-I/O engine
//! of `ovbench_proto` over the transport. A native communicator runs its
//! bare operations ([`crate::Communicator::set_bare_op`]) on it too.

use ovbench_proto::{Engine, Mode, ReqId, Slice, Space, SHORT_LEN};

use super::args::{RecvArgs, SendArgs};
use super::drive::{self, proto_err};
use super::shared::Shared;
use super::{prefers_read, EngineShape, Plan, Protocol, RawOp};
use crate::{
    Buf, Msg, OpCounts, Rank, Req, Result, SendMode, Source, Span, Status, Tag, TagSel,
    TransportError,
};

/// The protocol engine and what driving it keeps between calls.
pub(crate) struct EngineState {
    pub(crate) eng: Engine,
    /// The short header of a send posted directly
    /// ([`Engine::isend_direct`]).
    direct_hdr: [u8; SHORT_LEN],
}

fn mode_of(m: SendMode) -> Mode {
    match m {
        SendMode::Standard => Mode::Standard,
        SendMode::Buffered => Mode::Buffered,
        SendMode::Synchronous => Mode::Synchronous,
        SendMode::Ready => Mode::Ready,
    }
}

/// Check `span` lies in its buffer (inlined into every message's path,
/// its error built out of line).
#[inline(always)]
pub(crate) fn range(span: Span, what: &str) -> Result<Slice> {
    let Span { buf, off, len } = span;
    match off.checked_add(len) {
        Some(end) if end <= buf.len => Ok(Slice::new(buf.region.0, off, len)),
        _ => Err(outside(buf, off, len, what)),
    }
}

#[cold]
#[inline(never)]
fn outside(buf: Buf, off: usize, len: usize, what: &str) -> TransportError {
    TransportError::Invalid(format!(
        "{what} of {len} bytes at offset {off} lies outside its {}-byte buffer",
        buf.len
    ))
}

/// The engine's status as the communicator's.
fn status(s: ovbench_proto::Status) -> Status {
    Status {
        source: s.source,
        tag: s.tag,
        len: s.len,
    }
}

impl EngineState {
    /// An engine configured from `s`'s settings and transport.
    pub(crate) fn new(s: &Shared) -> Result<EngineState> {
        let (cfg, caps) = (&s.cfg, &s.caps);
        let mut pc = ovbench_proto::Config::new(s.rank, s.size, caps.eager_buf_size);
        pc.plan = cfg.plan.with_prefer_read(prefers_read(caps));
        pc.reg_cache = cfg.reg_cache;
        pc.instrument = false;
        Ok(EngineState {
            eng: Engine::new(pc).map_err(proto_err)?,
            direct_hdr: [0; SHORT_LEN],
        })
    }

    /// A blocking send while nothing is recorded: posted and waited for
    /// here; one done as it was posted (the fast path's) has nothing to
    /// wait for, and is retired at once.
    #[inline]
    pub(crate) fn send_now(&mut self, s: &mut Shared, a: SendArgs) -> Result<()> {
        let r = self.post_user_send(s, a, Mode::Standard)?;
        if self.eng.take(r).is_some() {
            return Ok(());
        }
        self.wait_req(s, r).map(|_| ())
    }

    /// A blocking receive while nothing is recorded: posted and waited
    /// for here.
    #[inline]
    pub(crate) fn recv_now(&mut self, s: &mut Shared, a: RecvArgs) -> Result<Status> {
        let r = self.post_user_recv(s, a)?;
        self.wait_req(s, r)
    }

    #[inline]
    pub(crate) fn isend(&mut self, s: &mut Shared, a: SendArgs, m: SendMode) -> Result<Req> {
        self.post_user_send(s, a, mode_of(m)).map(|r| Req(r.0))
    }

    #[inline]
    pub(crate) fn irecv(&mut self, s: &mut Shared, a: RecvArgs) -> Result<Req> {
        self.post_user_recv(s, a).map(|r| Req(r.0))
    }

    /// Its status if `req` is done; else one poll, and its status if
    /// that finished it.
    #[inline]
    pub(crate) fn test(&mut self, s: &mut Shared, req: Req) -> Result<Option<Status>> {
        if let Some(st) = self.eng.take(ReqId(req.0)) {
            return Ok(Some(status(st)));
        }
        self.poll_once(s)?;
        Ok(self.eng.take(ReqId(req.0)).map(status))
    }

    /// Post a send of the user's `buf[off..off + len]`.
    #[inline]
    fn post_user_send(&mut self, s: &mut Shared, a: SendArgs, m: Mode) -> Result<ReqId> {
        let sl = range(a.span, "send")?;
        let whole = Slice::new(a.span.buf.region.0, 0, a.span.buf.len);
        self.post_send(s, sl, whole, a.peer, a.tag, m, Space::User)
    }

    /// Post a receive into the user's `buf[off..off + len]`.
    #[inline]
    fn post_user_recv(&mut self, s: &mut Shared, a: RecvArgs) -> Result<ReqId> {
        let sl = range(a.span, "receive")?;
        let whole = Slice::new(a.span.buf.region.0, 0, a.span.buf.len);
        self.post_recv(s, sl, whole, a.peer, a.tag, Space::User)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_send(
        &mut self,
        s: &mut Shared,
        sl: Slice,
        whole: Slice,
        dst: Rank,
        tag: Tag,
        mode: Mode,
        space: Space,
    ) -> Result<ReqId> {
        // A one-packet eager send is posted here and now, past the
        // engine's operation queue, with its short header; it records
        // nothing, so it reads no clock.
        // The header buffer is borrowed in place, not moved out and back
        // (a move is a store reloaded at once).
        let direct = self
            .eng
            .isend_direct(sl, whole, dst, tag, mode, space, &mut self.direct_hdr);
        if let Some(d) = direct {
            let payload = (sl.len > 0).then(|| drive::ls(sl));
            let posted =
                s.t.post_send(dst, Msg::new(&self.direct_hdr, payload), d.ctx)?;
            if let crate::Posted::Done(at) = posted {
                self.sent_inline(s, d.ctx, at)?;
            }
            return Ok(d.req);
        }
        let now = s.stamp();
        let r = self
            .eng
            .isend_in(now, sl, whole, dst, tag, mode, space)
            .map_err(proto_err)?;
        self.exec_ops(s)?;
        Ok(r)
    }

    pub(crate) fn post_recv(
        &mut self,
        s: &mut Shared,
        sl: Slice,
        whole: Slice,
        src: Source,
        tag: TagSel,
        space: Space,
    ) -> Result<ReqId> {
        let now = s.stamp();
        let r = self
            .eng
            .irecv_in(now, sl, whole, src, tag, space)
            .map_err(proto_err)?;
        self.exec_ops(s)?;
        Ok(r)
    }

    /// What the engine posted so far.
    pub(crate) fn counts(&self) -> OpCounts {
        let c = self.eng.counts();
        OpCounts {
            sends: c.sends,
            writes: c.writes,
            reads: c.reads,
            tagged_sends: 0,
            bytes: c.bytes,
            registrations: c.registrations,
            fast_sends: c.fast_sends,
            fast_recvs: c.fast_recvs,
        }
    }

    /// How the engine moves a message under `s`'s protocol (whatever
    /// bare operation runs while xfer_time is timed).
    pub(crate) fn shape(&self, s: &Shared, native: bool) -> EngineShape {
        EngineShape {
            native,
            plan: self.plan(s),
        }
    }

    /// The plan under `s`'s protocol, whatever bare operation runs now.
    pub(crate) fn plan(&self, s: &Shared) -> Plan {
        self.eng.plan().with_protocol(s.cfg.plan.protocol())
    }

    /// Run later messages as the bare `op`, or with `None` as `s`'s
    /// protocol again.
    pub(crate) fn set_bare_op(&mut self, s: &Shared, op: Option<RawOp>) -> Result<()> {
        let p = op.map_or(s.cfg.plan.protocol(), Protocol::Raw);
        self.eng.set_protocol(p).map_err(proto_err)
    }
}
