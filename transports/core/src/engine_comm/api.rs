//! [`Communicator`] for [`Comm`], once for both paths: what the paths
//! share is written here, and the rest goes to the path the message
//! takes ([`Comm::on`]). The blocking calls are the trait's, one
//! communicator call each through [`Communicator::enter_call`]; only
//! `send`, `recv` and `send_mode` (under the other blocking sends) are
//! its own: while nothing is recorded a standard send and a receive post
//! and wait in one frame (the general path's nested calls moved each
//! result through three of them).

use super::args::{RecvArgs, SendArgs};
use super::drive::proto_err;
use super::native::local;
use super::native::NativeState;
use super::shared::Shared;
use super::{Comm, EngineShape, On, Path, RawOp};
use crate::comm::one_call;
use crate::instrument::{Instrumentation, XferTable};
use crate::{
    Bound, Buf, Clock, CommInfo, CommPath, Communicator, LocalSlice, OpCounts, Rank, Req, Result,
    SendMode, Source, Span, Status, Tag, TagRecv, TagSel, TagSend, TransportError,
};

impl Comm {
    /// A blocking send while nothing is recorded.
    #[inline]
    fn send_now(&mut self, a: SendArgs) -> Result<()> {
        match self.on() {
            (s, On::Engine(e)) => e.send_now(s, a),
            (s, On::Native(n)) => n.send_now(s, a),
        }
    }

    /// A blocking receive while nothing is recorded; `None` where the
    /// path cannot take it so, for the general path.
    #[inline]
    fn recv_now(&mut self, a: RecvArgs) -> Option<Result<Status>> {
        match self.on() {
            (s, On::Engine(e)) => Some(e.recv_now(s, a)),
            (s, On::Native(n)) => n.recv_now(s, a),
        }
    }
}

impl Comm {
    /// Whether communicator calls go to the native path's library calls
    /// ([`crate::LibraryCalls`]): not on the engine path, a native path
    /// without them, or while running bare operations.
    #[inline(always)]
    fn on_library(&self) -> bool {
        matches!(&self.path, Path::Native(n) if n.lib && !n.bare)
    }

    /// `f` as one communicator call (CALL_ENTER, `f`, CALL_EXIT) on the
    /// library's calls, where [`Self::on_library`]. Inlined, and its
    /// result returned as it is (wrapped in an `Option` it was copied
    /// once more): a blocking call over MPI is this, the bounds check
    /// and the library's call.
    #[inline(always)]
    fn library<T>(
        &mut self,
        f: impl FnOnce(&mut NativeState, &mut Shared, u64) -> Result<T>,
    ) -> Result<T> {
        let Path::Native(n) = &mut self.path else {
            return Err(not_on_library());
        };
        let s = &mut self.s;
        let at = s.call_enter();
        let r = f(n, s, at);
        s.call_exit();
        r
    }
}

impl Communicator for Comm {
    fn rank(&self) -> Rank {
        self.s.rank
    }
    fn size(&self) -> u32 {
        self.s.size
    }
    fn clock(&self) -> &dyn Clock {
        self.s.clock.as_ref()
    }
    /// The library's bound pair, while nothing is recorded (a recorded
    /// call needs its CALL and XFER events, which only the unbound calls
    /// make).
    fn bind_pair(
        &mut self,
        data: Span,
        room: Span,
        peer: Rank,
        tag: Tag,
    ) -> Result<Option<Bound<'_>>> {
        if !self.on_library() || self.s.instr.is_some() {
            return Ok(None);
        }
        let Path::Native(n) = &mut self.path else {
            return Ok(None);
        };
        let s = &mut self.s;
        let Some(lib) = s.t.tagged().and_then(|t| t.library()) else {
            return Ok(None);
        };
        let out = TagSend::new(peer, tag, local(data, "send")?, false);
        let into = TagRecv::new(Some(peer), Some(tag), local(room, "receive")?);
        let pair = lib.bind(out, into)?;
        let (sends, bytes) = (&mut n.sends, &mut n.bytes);
        Ok(Some(Bound::new(pair, &*s.clock, sends, bytes, data.len)))
    }
    fn work(&mut self, units: u64) {
        self.s.work.work(units)
    }
    fn work_unit_ns(&self) -> f64 {
        self.s.work.unit_ns()
    }
    fn shares_cpu(&self) -> bool {
        self.s.cfg.oversubscribed
    }
    fn yielded_ns(&self) -> u64 {
        self.s.yielded_ns
    }
    fn delay(&mut self, ns: f64) {
        self.s.work.delay(ns)
    }
    fn alloc(&mut self, len: usize) -> Result<Buf> {
        let region = self.s.t.alloc(len)?;
        Ok(Buf { region, len })
    }
    fn fill(&mut self, buf: Buf, f: &mut dyn FnMut(&mut [u8])) -> Result<()> {
        self.s.t.region(LocalSlice::new(buf.region, 0, buf.len), f)
    }
    fn inspect(&mut self, buf: Buf, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        self.s
            .t
            .region(LocalSlice::new(buf.region, 0, buf.len), &mut |b| f(b))
    }
    fn instrumentation(&mut self) -> Option<&mut Instrumentation> {
        self.s.instr.as_mut()
    }

    fn info(&self) -> CommInfo {
        CommInfo {
            transport: self.s.info.clone(),
            caps: self.s.caps.clone(),
            protocol: match self.path {
                Path::Engine => CommPath::Engine(self.s.cfg.plan.protocol()),
                Path::Native(_) => CommPath::Native,
            },
            plan: self.e.plan(&self.s),
            eager_limit: self.s.eager.clone(),
        }
    }

    fn set_eager_limit(&mut self, limit: crate::EagerLimit) -> Result<()> {
        self.e.eng.set_eager_limit(limit.bytes).map_err(proto_err)?;
        self.s.cfg.plan = self.s.cfg.plan.with_eager_limit(limit.bytes);
        self.s.eager = limit;
        Ok(())
    }

    fn isend_mode(&mut self, data: Span, dst: Rank, tag: Tag, mode: SendMode) -> Result<Req> {
        let a = SendArgs::new(data, dst, tag);
        self.call(|c, at| match c.on() {
            (s, On::Engine(e)) => e.isend(s, a, mode),
            (s, On::Native(n)) => n.isend(s, at, a, mode),
        })
    }

    fn irecv(&mut self, room: Span, src: Source, tag: TagSel) -> Result<Req> {
        let a = RecvArgs::new(room, src, tag);
        self.call(|c, at| match c.on() {
            (s, On::Engine(e)) => e.irecv(s, a),
            (s, On::Native(n)) => n.irecv(s, at, a),
        })
    }

    fn test(&mut self, req: Req) -> Result<Option<Status>> {
        self.call(|c, _| match c.on() {
            (s, On::Engine(e)) => e.test(s, req),
            (s, On::Native(n)) => n.test(s, req),
        })
    }

    fn wait(&mut self, req: Req) -> Result<Status> {
        self.call(|c, _| match c.on() {
            (s, On::Engine(e)) => e.wait_req(s, ovbench_proto::ReqId(req.0)),
            (s, On::Native(n)) => n.wait_id(s, req.0),
        })
    }

    fn progress(&mut self) -> Result<()> {
        self.call(|c, _| match c.on() {
            (s, On::Engine(e)) => e.poll_once(s).map(|_| ()),
            (s, On::Native(n)) => n.poll_once(s).map(|_| ()),
        })
    }

    fn barrier(&mut self) -> Result<()> {
        self.call(|c, _| match c.on() {
            (s, On::Engine(e)) => e.barrier(s),
            (s, On::Native(n)) => n.barrier(s),
        })
    }

    /// The engine's operations, and on the native path the library's
    /// tagged sends besides (the engine's then are the bare operations
    /// timed for xfer_time).
    fn enter_call(&mut self) {
        self.s.call_enter();
    }

    fn exit_call(&mut self) {
        self.s.call_exit();
    }

    fn op_counts(&self) -> OpCounts {
        let mut c = self.e.counts();
        if let Path::Native(n) = &self.path {
            c.tagged_sends = n.sends;
            c.bytes += n.bytes;
        }
        c
    }

    /// While nothing is recorded and no library call of its own takes
    /// it, posted and waited for in one frame; else as [`Self::send_mode`].
    fn send(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<()> {
        if self.on_library() {
            return self.library(|n, s, at| {
                let b = local(data, "send")?;
                n.lib_send(s, at, b, dst, tag, SendMode::Standard)
            });
        }
        if self.s.instr.is_none() {
            return self.send_now(SendArgs::new(data, dst, tag));
        }
        self.send_mode(data, dst, tag, SendMode::Standard)
    }

    /// The library's own call where there is one, else the nonblocking
    /// send waited for.
    fn send_mode(&mut self, data: Span, dst: Rank, tag: Tag, mode: SendMode) -> Result<()> {
        if self.on_library() {
            return self
                .library(|n, s, at| n.lib_send(s, at, local(data, "send")?, dst, tag, mode));
        }
        one_call(self, |c| {
            let r = c.isend_mode(data, dst, tag, mode)?;
            c.wait(r).map(|_| ())
        })
    }

    fn recv(&mut self, room: Span, src: Source, tag: TagSel) -> Result<Status> {
        if self.on_library() {
            return self.library(|n, s, at| n.lib_recv(s, at, local(room, "receive")?, src, tag));
        }
        if self.s.instr.is_none() {
            if let Some(r) = self.recv_now(RecvArgs::new(room, src, tag)) {
                return r;
            }
        }
        one_call(self, |c| {
            let r = c.irecv(room, src, tag)?;
            c.wait(r)
        })
    }

    fn sendrecv(
        &mut self,
        data: Span,
        dst: Rank,
        stag: Tag,
        room: Span,
        src: Source,
        rtag: TagSel,
    ) -> Result<Status> {
        if self.on_library() {
            return self.library(|n, s, at| {
                let sb = local(data, "send")?;
                let rb = local(room, "receive")?;
                n.lib_sendrecv(s, at, sb, dst, stag, rb, src, rtag)
            });
        }
        one_call(self, |c| {
            let r = c.irecv(room, src, rtag)?;
            let s = c.isend(data, dst, stag)?;
            c.wait(s)?;
            c.wait(r)
        })
    }

    fn waitall(&mut self, reqs: &[Req]) -> Result<Vec<Status>> {
        if self.on_library() {
            return self.library(|n, s, _| {
                let ids: Vec<u64> = reqs.iter().map(|r| r.0).collect();
                n.lib_waitall(s, &ids)
            });
        }
        one_call(self, |c| reqs.iter().map(|&r| c.wait(r)).collect())
    }

    fn bcast_library(&mut self, data: Span, root: Rank) -> Result<()> {
        if self.on_library() {
            return self.library(|n, s, at| n.lib_bcast(s, at, local(data, "broadcast")?, root));
        }
        Err(TransportError::Unsupported(format!(
            "--algorithm library is the MPI library's own broadcast (MPI_Bcast): this run's {} path over --transport {} has none; run it with --transport mpi --proto native",
            self.info().protocol,
            self.s.info.name
        )))
    }

    fn enable_instrumentation(&mut self, table: XferTable) -> Result<()> {
        self.s.enable(table);
        self.e.eng.set_instrument(true);
        Ok(())
    }

    fn disable_instrumentation(&mut self) {
        self.s.instr = None;
        self.e.eng.set_instrument(false);
    }

    /// A native path's transfer ends in the call that completes it
    /// (call-bounded events): none is left open to wait for.
    fn drain_transfers(&mut self) -> Result<()> {
        match self.path {
            Path::Native(_) => Ok(()),
            Path::Engine => self.call(|c, _| c.e.drain_data_ops(&mut c.s)),
        }
    }

    fn engine_shape(&self) -> Option<EngineShape> {
        let native = matches!(self.path, Path::Native(_));
        Some(self.e.shape(&self.s, native))
    }

    /// On the native path the bare operations run on the engine over the
    /// same transport; both ranks switch at the same point of the method.
    fn set_bare_op(&mut self, op: Option<RawOp>) -> Result<()> {
        if let Path::Native(n) = &self.path {
            if n.in_flight() > 0 {
                return Err(TransportError::Invalid(format!(
                    "switch to bare operations with {} native requests in flight",
                    n.in_flight()
                )));
            }
        }
        self.e.set_bare_op(&self.s, op)?;
        if let Path::Native(n) = &mut self.path {
            n.bare = op.is_some();
        }
        Ok(())
    }
}

/// [`Comm::library`] called off the library path (a bug: every caller
/// checks [`Comm::on_library`] first).
#[cold]
#[inline(never)]
fn not_on_library() -> TransportError {
    TransportError::Invalid("library calls on the engine path".into())
}
