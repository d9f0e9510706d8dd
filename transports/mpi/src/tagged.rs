//! `--proto native`: the transport's [`Tagged`] path and the MPI calls
//! of [`LibraryCalls`], all on the transport's native communicator.
//! Nonblocking operations are kept by context until a wait, a test or a
//! poll finishes them.

use std::os::raw::c_int;
use std::time::Duration;

use mpi::ffi::MPI_Status;
use ovbench_core::{
    BoundPair, Completion, Ctx, LibraryCalls, LocalSlice, OpKind, Posted, Rank, Result, SendMode,
    Source, Status, Tag, TagRecv, TagSel, TagSend, Tagged, TransportError, Waited,
};

use crate::ffi::bound::Pair;
use crate::ffi::requests::{testsome, waitall, Request};
use crate::ffi::Envelope;
use crate::transport::{local_err, peer_err, MpiTransport};

/// One nonblocking native operation.
#[derive(Debug)]
struct Op {
    ctx: Ctx,
    send: bool,
    peer: Option<Rank>,
    len: usize,
}

/// The native operations in flight: requests and what they are, side by
/// side (the requests form the array `MPI_Testsome` takes).
#[derive(Debug, Default)]
pub(crate) struct TaggedOps {
    reqs: Vec<Request>,
    ops: Vec<Op>,
    idx: Vec<c_int>,
    sts: Vec<MPI_Status>,
    done: Vec<(usize, Envelope)>,
}

impl TaggedOps {
    fn push(&mut self, req: Request, op: Op) {
        self.reqs.push(req);
        self.ops.push(op);
    }

    /// Take operation `ctx` out of the table.
    fn take(&mut self, ctx: Ctx) -> Result<(Request, Op)> {
        let i = self.ops.iter().position(|o| o.ctx == ctx).ok_or_else(|| {
            TransportError::Invalid(format!("native operation {ctx} is not in flight"))
        })?;
        Ok((self.reqs.swap_remove(i), self.ops.swap_remove(i)))
    }

    /// Withdraw everything still posted (teardown).
    pub(crate) fn cancel_all(&mut self) {
        for r in &mut self.reqs {
            r.cancel();
        }
        self.reqs.clear();
        self.ops.clear();
    }
}

/// A finished operation's result as the contract gives it.
fn result_of(op: &Op, env: Envelope) -> Option<Status> {
    (!op.send).then_some(Status {
        source: env.source.max(0) as Rank,
        tag: env.tag.max(0) as Tag,
        len: env.len,
    })
}

/// A tag above `MPI_TAG_UB` `ub` folded into it (see `mpi_tag`), or the
/// error where the bound is no power of two less one. Out of line, but
/// not cold: under MPICH (bound 2^28 - 1) ovbench's method tags fold on
/// every message.
#[inline(never)]
fn fold_tag(tag: Tag, ub: c_int) -> Result<c_int> {
    if ub > 0 && (ub as u32).wrapping_add(1).is_power_of_two() {
        Ok((tag & ub as u32) as c_int)
    } else {
        Err(TransportError::Unsupported(format!(
            "tag {tag:#x} is above this MPI library's MPI_TAG_UB ({ub:#x})"
        )))
    }
}

#[inline]
fn status(env: Envelope) -> Status {
    Status {
        source: env.source.max(0) as Rank,
        tag: env.tag.max(0) as Tag,
        len: env.len,
    }
}

/// The bound `MPI_Send` and `MPI_Recv` of [`LibraryCalls::bind`], their
/// failures named as the unbound calls name them.
struct NativePair<'a>(Pair<'a>);

impl BoundPair for NativePair<'_> {
    #[inline]
    fn send(&mut self) -> Result<()> {
        let peer = self.0.peer();
        self.0.send().map_err(peer_err(peer, OpKind::TaggedSend))
    }

    #[inline]
    fn recv(&mut self) -> Result<()> {
        let peer = self.0.peer();
        self.0.recv().map_err(peer_err(peer, OpKind::TaggedRecv))
    }
}

impl MpiTransport {
    /// `tag` as MPI takes it, within the library's `MPI_TAG_UB`: a tag
    /// above it keeps its low bits (MPICH's bound is 2^28 − 1, below
    /// ovbench's own method tags `0x4f56_xxxx`, which stay distinct from
    /// each other and from small tags once folded). A wildcard receive
    /// then reports the folded tag.
    #[inline(always)]
    fn mpi_tag(&self, tag: Tag) -> Result<c_int> {
        let ub = self.job.tag_ub();
        match c_int::try_from(tag) {
            Ok(t) if t <= ub => Ok(t),
            _ => fold_tag(tag, ub),
        }
    }

    #[inline(always)]
    fn tag_sel(&self, tag: TagSel) -> Result<Option<c_int>> {
        tag.map(|t| self.mpi_tag(t)).transpose()
    }

    #[inline(always)]
    fn src_sel(&self, src: Source) -> Result<Option<u32>> {
        if let Some(p) = src {
            self.peer(p, OpKind::TaggedRecv)?;
        }
        Ok(src)
    }

    /// Finished native operations as completions.
    pub(crate) fn poll_tagged(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        let t = &mut self.tagged;
        if t.reqs.is_empty() {
            return Ok(0);
        }
        t.done.clear();
        testsome(&mut t.reqs, &mut t.idx, &mut t.sts, &mut t.done)
            .map_err(local_err(OpKind::Poll))?;
        t.done.sort_unstable_by_key(|d| std::cmp::Reverse(d.0));
        let n = t.done.len();
        for &(i, env) in &t.done {
            t.reqs.swap_remove(i);
            let op = t.ops.swap_remove(i);
            out.push(if op.send {
                Completion::TaggedSend { ctx: op.ctx }
            } else {
                Completion::TaggedRecv {
                    ctx: op.ctx,
                    peer: env.source.max(0) as Rank,
                    tag: env.tag.max(0) as Tag,
                    len: env.len,
                }
            });
        }
        Ok(n)
    }

    fn start_send(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        mode: SendMode,
    ) -> Result<Request> {
        self.peer(peer, OpKind::TaggedSend)?;
        let t = self.mpi_tag(tag)?;
        if mode == SendMode::Buffered {
            self.job
                .bsend_room(src.len)
                .map_err(local_err(OpKind::TaggedSend))?;
        }
        self.data
            .isend(mode, peer, t, &mut self.mem, src)
            .map_err(peer_err(peer, OpKind::TaggedSend))
    }
}

impl Tagged for MpiTransport {
    fn tsend(&mut self, op: TagSend, ctx: Ctx) -> Result<Posted> {
        let peer = op.peer;
        let mode = if op.sync {
            SendMode::Synchronous
        } else {
            SendMode::Standard
        };
        let mut req = self.start_send(peer, op.tag, op.src, mode)?;
        if req
            .test()
            .map_err(peer_err(peer, OpKind::TaggedSend))?
            .is_some()
        {
            return Ok(Posted::Done(None));
        }
        self.tagged.push(
            req,
            Op {
                ctx,
                send: true,
                peer: Some(peer),
                len: op.src.len,
            },
        );
        Ok(Posted::Queued)
    }

    fn trecv(&mut self, op: TagRecv, ctx: Ctx) -> Result<()> {
        let TagRecv { src, tag, dst } = op;
        let (s, t) = (self.src_sel(src)?, self.tag_sel(tag)?);
        let req = self
            .data
            .irecv(s, t, &mut self.mem, dst)
            .map_err(peer_err(src.unwrap_or(0), OpKind::TaggedRecv))?;
        self.tagged.push(
            req,
            Op {
                ctx,
                send: false,
                peer: src,
                len: dst.len,
            },
        );
        Ok(())
    }

    /// `MPI_Recv`: the watchdog ends a receive that never matches.
    fn trecv_wait(&mut self, op: TagRecv, _timeout: Duration) -> Result<Waited> {
        let st = self.recv(op.src, op.tag, op.dst)?;
        Ok(Waited::Done {
            peer: st.source,
            tag: st.tag,
            len: st.len,
        })
    }

    fn library(&mut self) -> Option<&mut dyn LibraryCalls> {
        Some(self)
    }
}

impl LibraryCalls for MpiTransport {
    fn send(&mut self, peer: Rank, tag: Tag, src: LocalSlice, mode: SendMode) -> Result<()> {
        self.peer(peer, OpKind::TaggedSend)?;
        let t = self.mpi_tag(tag)?;
        if mode == SendMode::Buffered {
            self.job
                .bsend_room(src.len)
                .map_err(local_err(OpKind::TaggedSend))?;
        }
        let buf = self.mem.table.slice(src)?;
        self.data
            .send(mode, peer, t, buf)
            .map_err(peer_err(peer, OpKind::TaggedSend))
    }

    fn isend(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        mode: SendMode,
        ctx: Ctx,
    ) -> Result<()> {
        let req = self.start_send(peer, tag, src, mode)?;
        self.tagged.push(
            req,
            Op {
                ctx,
                send: true,
                peer: Some(peer),
                len: src.len,
            },
        );
        Ok(())
    }

    fn recv(&mut self, src: Source, tag: TagSel, dst: LocalSlice) -> Result<Status> {
        let (s, t) = (self.src_sel(src)?, self.tag_sel(tag)?);
        let buf = self.mem.table.slice_mut(dst)?;
        self.data
            .recv(s, t, buf)
            .map(status)
            .map_err(peer_err(src.unwrap_or(0), OpKind::TaggedRecv))
    }

    fn sendrecv(&mut self, out: TagSend, into: TagRecv) -> Result<Status> {
        self.peer(out.peer, OpKind::TaggedSend)?;
        let st = self.mpi_tag(out.tag)?;
        let (s, t) = (self.src_sel(into.src)?, self.tag_sel(into.tag)?);
        self.data
            .sendrecv(&mut self.mem, out.peer, st, out.src, s, t, into.dst)
            .map(status)
            .map_err(peer_err(out.peer, OpKind::TaggedSend))
    }

    fn wait(&mut self, ctx: Ctx) -> Result<Option<Status>> {
        let (mut req, op) = self.tagged.take(ctx)?;
        let kind = if op.send {
            OpKind::TaggedSend
        } else {
            OpKind::TaggedRecv
        };
        let env = req
            .wait(&self.job.watch, op.peer, op.len, !op.send)
            .map_err(peer_err(op.peer.unwrap_or(0), kind))?;
        Ok(env.and_then(|e| result_of(&op, e)))
    }

    fn waitall(&mut self, ctxs: &[Ctx], out: &mut Vec<Option<Status>>) -> Result<()> {
        let mut reqs = Vec::with_capacity(ctxs.len());
        let mut ops = Vec::with_capacity(ctxs.len());
        for &c in ctxs {
            let (r, o) = self.tagged.take(c)?;
            reqs.push(r);
            ops.push(o);
        }
        let envs = waitall(&mut reqs, &self.job.watch).map_err(local_err(OpKind::Poll))?;
        out.extend(ops.iter().zip(envs).map(|(o, e)| result_of(o, e)));
        Ok(())
    }

    fn test(&mut self, ctx: Ctx) -> Result<Option<Option<Status>>> {
        let i = self
            .tagged
            .ops
            .iter()
            .position(|o| o.ctx == ctx)
            .ok_or_else(|| {
                TransportError::Invalid(format!("native operation {ctx} is not in flight"))
            })?;
        let peer = self.tagged.ops[i].peer.unwrap_or(0);
        match self.tagged.reqs[i]
            .test()
            .map_err(peer_err(peer, OpKind::Poll))?
        {
            None => Ok(None),
            Some(env) => {
                let (_, op) = self.tagged.take(ctx)?;
                Ok(Some(result_of(&op, env)))
            }
        }
    }

    fn barrier(&mut self) -> Result<()> {
        self.data.barrier().map_err(local_err(OpKind::Poll))
    }

    fn bind<'a>(&'a mut self, out: TagSend, into: TagRecv) -> Result<Box<dyn BoundPair + 'a>> {
        self.peer(out.peer, OpKind::TaggedSend)?;
        let st = self.mpi_tag(out.tag)?;
        let (s, t) = (self.src_sel(into.src)?, self.tag_sel(into.tag)?);
        let pair = Pair::new(
            &self.data,
            &mut self.mem,
            (out.peer, st, out.src),
            (s, t, into.dst),
        )
        .map_err(peer_err(out.peer, OpKind::TaggedSend))?;
        Ok(Box::new(NativePair(pair)))
    }

    fn bcast(&mut self, root: Rank, buf: LocalSlice) -> Result<()> {
        self.peer(root, OpKind::TaggedRecv)?;
        let b = self.mem.table.slice_mut(buf)?;
        self.data
            .bcast(root, b)
            .map_err(peer_err(root, OpKind::TaggedRecv))
    }
}
