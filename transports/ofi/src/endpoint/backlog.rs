//! Posting under `-FI_EAGAIN`: a refused post waits in an ordered
//! backlog that `poll` retries, so posting itself never fails for lack of
//! provider resources and never blocks (in a one-process test the peer
//! progresses only between our polls).

use std::time::Instant;

use ovbench_core::{Completion, Ctx, OpKind, Rank, TransportError};
use ovbench_ofi_sys as sys;

use super::{Endpoint, EAGAIN, EAGAIN_DEADLINE};
use crate::error::peer as peer_err;
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
    Send {
        op: Box<Op>,
        dest: sys::fi_addr_t,
    },
    /// A receive slot.
    Recv {
        op: Box<Op>,
    },
    /// `fi_tsend`, or `fi_tsendmsg` with `flags`.
    TSend {
        src: LocalBuf,
        dest: sys::fi_addr_t,
        tag: u64,
        flags: Option<u64>,
        op: Box<Op>,
    },
    TRecv {
        dst: LocalBuf,
        tag: u64,
        ignore: u64,
        op: Box<Op>,
    },
    Write {
        src: LocalBuf,
        dest: sys::fi_addr_t,
        raddr: u64,
        key: u64,
        flags: u64,
        op: Box<Op>,
    },
    Read {
        dst: LocalBuf,
        src: sys::fi_addr_t,
        raddr: u64,
        key: u64,
        op: Box<Op>,
    },
    /// A write's fence: a read into the op's own byte.
    Fence {
        src: sys::fi_addr_t,
        raddr: u64,
        key: u64,
        op: Box<Op>,
    },
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
        use Accepted::{InFlight, Slot};
        match self {
            Call::Inject { buf, dest, ctx } => match ep.inject(&buf, dest) {
                0 => Ok(Accepted::Injected { buf, ctx }),
                rc => Err((rc, Call::Inject { buf, dest, ctx })),
            },
            Call::Send { op, dest } => ep
                .send(op, dest)
                .map(|()| InFlight)
                .map_err(|(rc, op)| (rc, Call::Send { op, dest })),
            Call::Recv { op } => ep
                .recv(op)
                .map(|()| Slot)
                .map_err(|(rc, op)| (rc, Call::Recv { op })),
            Call::TSend {
                src,
                dest,
                tag,
                flags,
                op,
            } => match flags {
                None => ep.tsend(src, dest, tag, op),
                Some(f) => ep.tsendmsg(src, dest, tag, f, op),
            }
            .map(|()| InFlight)
            .map_err(|(rc, op)| {
                let call = Call::TSend {
                    src,
                    dest,
                    tag,
                    flags,
                    op,
                };
                (rc, call)
            }),
            Call::TRecv {
                dst,
                tag,
                ignore,
                op,
            } => ep
                .trecv(dst, tag, ignore, op)
                .map(|()| InFlight)
                .map_err(|(rc, op)| {
                    let call = Call::TRecv {
                        dst,
                        tag,
                        ignore,
                        op,
                    };
                    (rc, call)
                }),
            Call::Write {
                src,
                dest,
                raddr,
                key,
                flags,
                op,
            } => ep
                .write(src, dest, raddr, key, flags, op)
                .map(|()| InFlight)
                .map_err(|(rc, op)| {
                    let call = Call::Write {
                        src,
                        dest,
                        raddr,
                        key,
                        flags,
                        op,
                    };
                    (rc, call)
                }),
            Call::Read {
                dst,
                src,
                raddr,
                key,
                op,
            } => ep
                .read(dst, src, raddr, key, op)
                .map(|()| InFlight)
                .map_err(|(rc, op)| {
                    let call = Call::Read {
                        dst,
                        src,
                        raddr,
                        key,
                        op,
                    };
                    (rc, call)
                }),
            Call::Fence {
                src,
                raddr,
                key,
                op,
            } => ep
                .read_into(src, raddr, key, op)
                .map(|()| InFlight)
                .map_err(|(rc, op)| {
                    let call = Call::Fence {
                        src,
                        raddr,
                        key,
                        op,
                    };
                    (rc, call)
                }),
        }
    }

    /// The context of the operation this call posts, for its error
    /// completion.
    fn ctx(&self) -> Option<Ctx> {
        match self {
            Call::Inject { ctx, .. } => *ctx,
            Call::Recv { .. } => None,
            Call::Send { op, .. }
            | Call::TSend { op, .. }
            | Call::TRecv { op, .. }
            | Call::Write { op, .. }
            | Call::Read { op, .. }
            | Call::Fence { op, .. } => Some(op.ctx),
        }
    }

    /// The staging buffer a refused call leaves to recycle.
    fn into_buf(self) -> Option<Vec<u8>> {
        match self {
            Call::Inject { buf, .. } => Some(buf),
            // A refused receive slot is not posted again (nor was it before
            // the slots were boxes): its buffer goes with it.
            Call::Recv { .. } => None,
            Call::Send { op, .. }
            | Call::TSend { op, .. }
            | Call::TRecv { op, .. }
            | Call::Write { op, .. }
            | Call::Read { op, .. }
            | Call::Fence { op, .. } => Some(op.buf),
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
}

/// A post waiting for the provider to accept it.
pub(super) struct Deferred {
    post: Post,
    since: Instant,
}

impl Endpoint {
    /// Post receive slot `op` (again).
    pub(super) fn post_recv_buf(&mut self, op: Box<Op>) -> Result<(), TransportError> {
        let call = Call::Recv { op };
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
        let Post {
            peer,
            kind,
            name,
            call,
        } = p;
        match call.issue(&mut self.fabric.ep) {
            Ok(a) => {
                self.accepted(a);
                Ok(())
            }
            Err((rc, call)) => self.not_taken(Post::new(peer, kind, name, call), rc),
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
        let Post {
            peer,
            kind,
            name,
            call,
        } = p;
        Err(self.refused(call, peer, kind, name, rc))
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
    fn refused(
        &mut self,
        call: Call,
        peer: Rank,
        kind: OpKind,
        name: &str,
        rc: isize,
    ) -> TransportError {
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
            let Post {
                peer,
                kind,
                name,
                call,
            } = d.post;
            match call.issue(&mut self.fabric.ep) {
                Ok(a) => self.accepted(a),
                Err((EAGAIN, call)) if d.since.elapsed() < EAGAIN_DEADLINE => {
                    self.backlog.push_front(Deferred {
                        post: Post::new(peer, kind, name, call),
                        since: d.since,
                    });
                    return;
                }
                Err((rc, call)) => {
                    let ctx = call.ctx();
                    let e = self.refused(call, peer, kind, name, rc);
                    self.pending.push_back(Completion::Error {
                        ctx,
                        peer,
                        op: kind,
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
