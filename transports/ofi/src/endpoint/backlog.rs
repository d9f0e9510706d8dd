//! Posting under `-FI_EAGAIN`: a refused post waits in an ordered
//! backlog that `poll` retries, so posting itself never fails for lack of
//! provider resources and never blocks (in a one-process test the peer
//! progresses only between our polls).

use std::time::Instant;

use ovbench_core::{Completion, Ctx, OpKind, Rank, TransportError};
use ovbench_ofi_sys as sys;

use super::{Endpoint, EAGAIN, EAGAIN_DEADLINE};
use crate::error::peer as peer_err;
use crate::fi::endpoint::Posted;
use crate::fi::RdmEndpoint;
use crate::memory::LocalBuf;
use crate::ops::Op;

/// One libfabric post, with everything it needs (the op it completes
/// into, or the bytes an inject copies) owned until the provider takes it.
pub(super) enum Call {
    /// `fi_inject`; `ctx`: the send whose completion follows success (none
    /// for ovbench's control messages).
    Inject {
        buf: Vec<u8>,
        dest: sys::fi_addr_t,
        ctx: Option<Ctx>,
    },
    /// A post that completes into `op`: the provider holds the op, and a
    /// refusal hands it back to go with the same `req` again.
    Op { req: Req, op: Box<Op> },
}

/// What a [`Call::Op`] asks of the provider, apart from its op: plain
/// values, so a refused call is rebuilt from them as it was.
#[derive(Clone, Copy)]
pub(super) enum Req {
    Send {
        dest: sys::fi_addr_t,
    },
    /// A receive slot.
    Recv,
    /// `fi_tsend`, or `fi_tsendmsg` with `flags`.
    TSend {
        src: LocalBuf,
        dest: sys::fi_addr_t,
        tag: u64,
        flags: Option<u64>,
    },
    TRecv {
        dst: LocalBuf,
        tag: u64,
        ignore: u64,
    },
    Write {
        src: LocalBuf,
        dest: sys::fi_addr_t,
        raddr: u64,
        key: u64,
        flags: u64,
    },
    Read {
        dst: LocalBuf,
        src: sys::fi_addr_t,
        raddr: u64,
        key: u64,
    },
    /// A write's fence: a read into the op's own byte.
    Fence {
        src: sys::fi_addr_t,
        raddr: u64,
        key: u64,
    },
}

impl Req {
    /// The call that posts `op` with this request.
    #[inline]
    pub(super) fn with(self, op: Box<Op>) -> Call {
        Call::Op { req: self, op }
    }

    /// Hand `op` to the provider with this request.
    #[inline(always)]
    fn post(self, ep: &mut RdmEndpoint, op: Box<Op>) -> Posted {
        match self {
            Req::Send { dest } => ep.send(op, dest),
            Req::Recv => ep.recv(op),
            Req::TSend {
                src,
                dest,
                tag,
                flags: None,
            } => ep.tsend(src, dest, tag, op),
            Req::TSend {
                src,
                dest,
                tag,
                flags: Some(f),
            } => ep.tsendmsg(src, dest, tag, f, op),
            Req::TRecv { dst, tag, ignore } => ep.trecv(dst, tag, ignore, op),
            Req::Write {
                src,
                dest,
                raddr,
                key,
                flags,
            } => ep.write(src, dest, raddr, key, flags, op),
            Req::Read {
                dst,
                src,
                raddr,
                key,
            } => ep.read(dst, src, raddr, key, op),
            Req::Fence { src, raddr, key } => ep.read_into(src, raddr, key, op),
        }
    }
}

/// What an accepted post leaves to do.
enum Accepted {
    /// An op is in flight until its completion.
    InFlight,
    /// A receive slot is posted again.
    Slot,
    /// Injected: the staging buffer is free, and `ctx`'s send is done.
    Injected { buf: Vec<u8>, ctx: Option<Ctx> },
}

impl Call {
    /// Make the call: what it left to do, or the provider's code and the
    /// call back (with its op). Inlined into each post, whose variant is
    /// known there: the match folds to the one call.
    #[inline(always)]
    fn issue(self, ep: &mut RdmEndpoint) -> Result<Accepted, (isize, Call)> {
        match self {
            Call::Inject { buf, dest, ctx } => match ep.inject(&buf, dest) {
                0 => Ok(Accepted::Injected { buf, ctx }),
                rc => Err((rc, Call::Inject { buf, dest, ctx })),
            },
            Call::Op { req, op } => match req.post(ep, op) {
                Ok(()) if matches!(req, Req::Recv) => Ok(Accepted::Slot),
                Ok(()) => Ok(Accepted::InFlight),
                Err((rc, op)) => Err((rc, req.with(op))),
            },
        }
    }

    /// The context of the operation this call posts, for its error
    /// completion.
    fn ctx(&self) -> Option<Ctx> {
        match self {
            Call::Inject { ctx, .. } => *ctx,
            Call::Op { req: Req::Recv, .. } => None,
            Call::Op { op, .. } => Some(op.ctx),
        }
    }

    /// The staging buffer a refused call leaves to recycle.
    fn into_buf(self) -> Option<Vec<u8>> {
        match self {
            Call::Inject { buf, .. } => Some(buf),
            // A refused receive slot is not posted again (nor was it before
            // the slots were boxes): its buffer goes with it.
            Call::Op { req: Req::Recv, .. } => None,
            Call::Op { op, .. } => Some(op.buf),
        }
    }
}

/// A post: the call, and what names it in an error.
pub(super) struct Post {
    peer: Rank,
    kind: OpKind,
    name: &'static str,
    call: Call,
}

impl Post {
    /// `call`, an `kind` operation towards `peer` made by the libfabric
    /// function `name`.
    #[inline]
    pub(super) fn new(peer: Rank, kind: OpKind, name: &'static str, call: Call) -> Post {
        Post {
            peer,
            kind,
            name,
            call,
        }
    }

    /// [`Call::issue`], a refused call coming back in its post.
    #[inline(always)]
    fn issue(self, ep: &mut RdmEndpoint) -> Result<Accepted, (isize, Post)> {
        self.call
            .issue(ep)
            .map_err(|(rc, call)| (rc, Post { call, ..self }))
    }
}

/// A post waiting for the provider to accept it.
pub(super) struct Deferred {
    post: Post,
    since: Instant,
}

impl Endpoint {
    /// Post receive slot `op` (again).
    pub(super) fn post_recv_buf(&mut self, op: Box<Op>) -> Result<(), TransportError> {
        let call = Req::Recv.with(op);
        self.submit(Post::new(self.rank, OpKind::Recv, "fi_recv", call))
    }

    /// Hand an operation to the provider. `-FI_EAGAIN` is not an error:
    /// the post waits in the backlog and `poll` retries it after reading
    /// the CQ (tcp and shm free resources only when progressed, and in a
    /// one-process test the peer progresses only between our polls).
    #[inline(always)]
    pub(super) fn submit(&mut self, p: Post) -> Result<(), TransportError> {
        if !self.backlog.is_empty() {
            self.defer(p);
            return Ok(());
        }
        match p.issue(&mut self.fabric.ep) {
            Ok(a) => {
                self.accepted(a);
                Ok(())
            }
            Err((rc, p)) => self.not_taken(p, rc),
        }
    }

    /// A first try refused: `-FI_EAGAIN` defers the post, anything else is
    /// its error. Out of line: the posts' fast path stays small.
    #[inline(never)]
    fn not_taken(&mut self, p: Post, rc: isize) -> Result<(), TransportError> {
        if rc == EAGAIN {
            self.defer(p);
            return Ok(());
        }
        Err(self.refused(p, rc))
    }

    fn defer(&mut self, post: Post) {
        self.backlog.push_back(Deferred {
            post,
            since: Instant::now(),
        });
    }

    /// Book-keeping once the provider accepted a post.
    #[inline(always)]
    fn accepted(&mut self, a: Accepted) {
        match a {
            Accepted::InFlight => self.in_flight += 1,
            Accepted::Slot => {}
            Accepted::Injected { buf, ctx } => {
                self.recycle_send(buf);
                if let Some(ctx) = ctx {
                    self.pending.push_back(Completion::Send { ctx });
                }
            }
        }
    }

    /// The provider refused a post for good: take its buffer back, name it.
    fn refused(&mut self, p: Post, rc: isize) -> TransportError {
        let Post {
            peer,
            kind,
            name,
            call,
        } = p;
        let mut e = peer_err(peer, kind, name, rc as i64);
        if rc == EAGAIN {
            if let TransportError::Peer { status, .. } = &mut e {
                status.push_str(&format!(
                    " for {} s: rank {peer} stopped progressing",
                    EAGAIN_DEADLINE.as_secs()
                ));
            }
        }
        if let Some(b) = call.into_buf() {
            self.recycle_send(b);
        }
        e
    }

    /// Retry backlogged posts in order until one is refused again.
    pub(super) fn flush_backlog(&mut self) {
        while let Some(d) = self.backlog.pop_front() {
            match d.post.issue(&mut self.fabric.ep) {
                Ok(a) => self.accepted(a),
                Err((EAGAIN, post)) if d.since.elapsed() < EAGAIN_DEADLINE => {
                    self.backlog.push_front(Deferred {
                        post,
                        since: d.since,
                    });
                    return;
                }
                Err((rc, post)) => {
                    let (ctx, peer, op) = (post.call.ctx(), post.peer, post.kind);
                    let e = self.refused(post, rc);
                    self.pending.push_back(Completion::Error {
                        ctx,
                        peer,
                        op,
                        status: e.to_string(),
                    });
                }
            }
        }
    }

    pub(super) fn recycle_send(&mut self, b: Vec<u8>) {
        if self.send_pool.len() < 256 {
            self.send_pool.push(b);
        }
    }
}
