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
            Deferred::new(self.rank, OpKind::Recv, "fi_recv", None, move || {
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
    /// one-process test the peer progresses only between our polls).
    pub(super) fn submit(
        &mut self,
        op: Option<*mut Op>,
        mut d: Deferred,
    ) -> Result<(), TransportError> {
        d.op = op;
        if !self.backlog.is_empty() {
            self.backlog.push_back(d);
            return Ok(());
        }
        match (d.post)() {
            0 => {
                self.posted(&d);
                Ok(())
            }
            EAGAIN => {
                self.backlog.push_back(d);
                Ok(())
            }
            rc => Err(self.refused(d, rc)),
        }
    }

    /// Book-keeping once the provider accepted a post.
    pub(super) fn posted(&mut self, d: &Deferred) {
        match (d.op, d.inject_ctx) {
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
    pub(super) fn refused(&mut self, d: Deferred, rc: isize) -> TransportError {
        let mut e = peer_err(d.peer, d.kind, d.call, rc as i64);
        if rc == EAGAIN {
            if let TransportError::Peer { status, .. } = &mut e {
                status.push_str(&format!(
                    " for {} s: rank {} stopped progressing",
                    EAGAIN_DEADLINE.as_secs(),
                    d.peer
                ));
            }
        }
        if let Some(op) = d.op {
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
                0 => self.posted(&d),
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
                    let e = self.refused(d, rc);
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

/// A post waiting for the provider to accept it.
pub(super) struct Deferred {
    pub(super) op: Option<*mut Op>,
    /// For `fi_inject`: the context whose Send completion follows success.
    pub(super) inject_ctx: Option<Ctx>,
    pub(super) peer: Rank,
    pub(super) kind: OpKind,
    pub(super) call: &'static str,
    pub(super) since: Instant,
    pub(super) post: Box<dyn FnMut() -> isize>,
}

impl Deferred {
    pub(super) fn new(
        peer: Rank,
        kind: OpKind,
        call: &'static str,
        inject_ctx: Option<Ctx>,
        post: impl FnMut() -> isize + 'static,
    ) -> Deferred {
        Deferred {
            op: None,
            inject_ctx,
            peer,
            kind,
            call,
            since: Instant::now(),
            post: Box::new(post),
        }
    }
}
