//! Posting under `-FI_EAGAIN`: a refused post waits in an ordered
//! backlog that `poll` retries, so posting itself never fails for lack of
//! provider resources and never blocks (in a one-process test the peer
//! progresses only between our polls).

use std::ptr;
use std::time::Instant;

use ovbench_core::{Completion, Ctx, OpKind, Rank, TransportError};
use ovbench_ofi_sys as sys;

use super::{Endpoint, EAGAIN, EAGAIN_DEADLINE};
use crate::error::peer as peer_err;
use crate::ops::{Kind, Op};

impl Endpoint {
    pub(super) fn post_recv_buf(&mut self, op: *mut Op) -> Result<(), TransportError> {
        let ep = self.fabric.ep;
        // SAFETY: op is one of our live receive slots; its buffer is not
        // touched by us until its completion.
        let (p, n) = unsafe { ((*op).buf.as_mut_ptr(), (*op).buf.len()) };
        self.submit(
            Some(op),
            Post::new(self.rank, OpKind::Recv, "fi_recv", None, move || {
                // SAFETY: ep is enabled; the buffer and context stay valid
                // until the completion (slots are freed after the ep closes).
                unsafe {
                    sys::fi_recv(
                        ep,
                        p.cast(),
                        n,
                        ptr::null_mut(),
                        sys::FI_ADDR_UNSPEC,
                        op.cast(),
                    )
                }
            }),
        )
    }

    /// Hand an operation to the provider. `-FI_EAGAIN` is not an error:
    /// the post waits in the backlog and `poll` retries it after reading
    /// the CQ (tcp and shm free resources only when progressed, and in a
    /// one-process test the peer progresses only between our polls). Only
    /// a deferred post is boxed; the common path allocates nothing.
    pub(super) fn submit<F: FnMut() -> isize + 'static>(
        &mut self,
        op: Option<*mut Op>,
        mut p: Post<F>,
    ) -> Result<(), TransportError> {
        p.op = op;
        if !self.backlog.is_empty() {
            self.backlog.push_back(p.boxed());
            return Ok(());
        }
        match (p.post)() {
            0 => {
                self.posted(p.op, p.inject_ctx);
                Ok(())
            }
            EAGAIN => {
                self.backlog.push_back(p.boxed());
                Ok(())
            }
            rc => Err(self.refused(p.op, p.peer, p.kind, p.call, rc)),
        }
    }

    /// Book-keeping once the provider accepted a post.
    fn posted(&mut self, op: Option<*mut Op>, inject_ctx: Option<Ctx>) {
        match (op, inject_ctx) {
            (Some(op), _) => {
                // SAFETY: op is live until its completion.
                if unsafe { (*op).kind } != Kind::RecvBuf {
                    self.in_flight += 1;
                }
            }
            (None, Some(ctx)) => self.pending.push_back(Completion::Send { ctx }),
            (None, None) => {}
        }
    }

    /// The provider refused a post for good: take the op back, name it.
    fn refused(
        &mut self,
        op: Option<*mut Op>,
        peer: Rank,
        kind: OpKind,
        call: &str,
        rc: isize,
    ) -> TransportError {
        let mut e = peer_err(peer, kind, call, rc as i64);
        if rc == EAGAIN {
            if let TransportError::Peer { status, .. } = &mut e {
                status.push_str(&format!(
                    " for {} s: rank {peer} stopped progressing",
                    EAGAIN_DEADLINE.as_secs()
                ));
            }
        }
        if let Some(op) = op {
            // SAFETY: the provider did not accept the operation, so it
            // holds no reference to op.
            let op = unsafe { Box::from_raw(op) };
            if op.kind == Kind::RecvBuf {
                // A receive slot stays owned by recv_bufs; do not free it.
                std::mem::forget(op);
            } else {
                self.recycle_send(op.buf);
            }
        }
        e
    }

    /// Retry backlogged posts in order until one is refused again.
    pub(super) fn flush_backlog(&mut self) {
        while let Some(mut d) = self.backlog.pop_front() {
            match (d.post)() {
                0 => self.posted(d.op, d.inject_ctx),
                EAGAIN if d.since.elapsed() < EAGAIN_DEADLINE => {
                    self.backlog.push_front(d);
                    return;
                }
                rc => {
                    let (peer, kind, ctx) = (
                        d.peer,
                        d.kind,
                        d.op.map(|o| {
                            // SAFETY: op is live until taken back in refused().
                            unsafe { (*o).ctx }
                        })
                        .or(d.inject_ctx),
                    );
                    let e = self.refused(d.op, d.peer, d.kind, d.call, rc);
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

/// A post as first tried: not boxed, so the common path allocates
/// nothing.
pub(super) struct Post<F> {
    op: Option<*mut Op>,
    inject_ctx: Option<Ctx>,
    peer: Rank,
    kind: OpKind,
    call: &'static str,
    post: F,
}

impl<F: FnMut() -> isize + 'static> Post<F> {
    /// Describe a post: `post` makes the libfabric call and returns its code.
    pub(super) fn new(
        peer: Rank,
        kind: OpKind,
        call: &'static str,
        inject_ctx: Option<Ctx>,
        post: F,
    ) -> Post<F> {
        Post {
            op: None,
            inject_ctx,
            peer,
            kind,
            call,
            post,
        }
    }

    fn boxed(self) -> Deferred {
        Deferred {
            op: self.op,
            inject_ctx: self.inject_ctx,
            peer: self.peer,
            kind: self.kind,
            call: self.call,
            since: Instant::now(),
            post: Box::new(self.post),
        }
    }
}

/// A post waiting for the provider to accept it.
pub(super) struct Deferred {
    op: Option<*mut Op>,
    /// For `fi_inject`: the context whose Send completion follows success.
    inject_ctx: Option<Ctx>,
    peer: Rank,
    kind: OpKind,
    call: &'static str,
    since: Instant,
    post: Box<dyn FnMut() -> isize>,
}
