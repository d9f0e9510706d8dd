//! [`Tagged`] over UCX's tag matching, the source rank in the tag's
//! upper half ([`wire_tag`]): `tsend` (the synchronous send for `sync`),
//! `trecv`, and `trecv_wait`, a blocking tagged receive that waits inside
//! the transport, as ucx_perftest's does (`Worker::tag_recv_wait`: its
//! callback fills a slot on the waiting frame; no operation box, no
//! completion queue, no poll round trip through the caller). Here: when
//! to give up (deadline, stop signal, dead peer) and what the result
//! means.

use std::time::{Duration, Instant};

use ovbench_core::fabric::peer_watch::PeerWatch;
use ovbench_core::fabric::wire_tag;
use ovbench_core::{
    stop, Completion, Ctx, OpKind, Posted, Rank, TagRecv, TagSend, Tagged, TransportError, Waited,
};
use ovbench_ucx_sys as sys;

use super::UcxTransport;
use crate::ops::Shared;
use crate::status;

/// Progress calls between two looks at the clock and the peers.
const SPINS_PER_CHECK: u32 = 1024;

impl Tagged for UcxTransport {
    fn tsend(&mut self, op: TagSend, ctx: Ctx) -> Result<Posted, TransportError> {
        let peer = op.peer;
        let ep = self.ep(peer, OpKind::TaggedSend)?;
        let buf = self.mem.buf(op.src)?;
        let utag = wire_tag::send_tag(self.rank, op.tag);
        let call = if op.sync {
            "ucp_tag_send_sync_nbx"
        } else {
            "ucp_tag_send_nbx"
        };
        // First without a request: done inside the call or refused.
        if !op.sync
            && self.eps[ep]
                .tag_send_imm(buf, utag)
                .map_err(|st| status::peer(peer, OpKind::TaggedSend, call, st))?
        {
            return Ok(Posted::Done(None));
        }
        let req = self.op(ctx, peer, OpKind::TaggedSend, None);
        let posted = self.eps[ep].tag_send(buf, utag, op.sync, req);
        Ok(Posted::done_if(self.settle_inline(posted, call)?))
    }

    fn trecv(&mut self, op: TagRecv, ctx: Ctx) -> Result<(), TransportError> {
        let TagRecv { src, tag, dst } = op;
        let (utag, mask) = wire_tag::recv_selector(src, tag, self.size)?;
        let buf = self.mem.buf(dst)?;
        let op = self.op(ctx, src.unwrap_or(self.rank), OpKind::TaggedRecv, None);
        let posted = self.worker.tag_recv(buf, utag, mask, op);
        self.settle(posted, "ucp_tag_recv_nbx")
    }

    /// Waits inside UCX; with a progress thread, whose callbacks run on
    /// another thread than the waiting frame's, by posting and polling.
    fn trecv_wait(&mut self, op: TagRecv, timeout: Duration) -> Result<Waited, TransportError> {
        let TagRecv { src, tag, dst } = op;
        if self.thread.is_some() {
            let mut held = Vec::new();
            let r = ovbench_core::trecv_wait_polling(self, &mut held, op, timeout);
            self.done.splice(0..0, held);
            return r;
        }
        let (utag, mask) = wire_tag::recv_selector(src, tag, self.size)?;
        let buf = self.mem.buf(dst)?;
        let shared = self.worker.shared();
        let (watch, gone) = (&mut self.watch, &mut self.gone);
        // The deadline's clock starts at the first check: most receives
        // finish before it.
        let mut start: Option<Instant> = None;
        let mut dead = None;
        let got = self
            .worker
            .tag_recv_wait(buf, utag, mask, SPINS_PER_CHECK, || {
                let began = *start.get_or_insert_with(Instant::now);
                let waited = began.elapsed();
                let timed_out = waited > timeout;
                // A stop asked for by signal ends the wait as a dead peer
                // does; so does a job the watchdog finds gone.
                dead = stop::check()
                    .err()
                    .or_else(|| dead_peer(shared, watch, gone, src))
                    .or_else(|| {
                        ovbench_core::watch::waiting(began, waited, timeout, || {
                            let what = ovbench_core::watch::receive_what(src, tag, dst.len);
                            (src, what)
                        })
                        .err()
                    });
                timed_out || dead.is_some()
            })
            .map_err(|st| {
                status::peer(
                    src.unwrap_or(self.rank),
                    OpKind::TaggedRecv,
                    "ucp_tag_recv_nbx",
                    st,
                )
            })?;
        if got.status == sys::UCS_ERR_CANCELED {
            return match dead {
                Some(e) => Err(e),
                None => Ok(Waited::TimedOut),
            };
        }
        if got.status != sys::UCS_OK {
            // As the posted path reports a failed receive (e.g. "Message
            // truncated" for a message longer than `dst`).
            return Err(TransportError::Peer {
                peer: src.unwrap_or(self.rank),
                op: OpKind::TaggedRecv,
                status: status::status_str(got.status),
            });
        }
        // The sender's rank travels in the tag: checked, not trusted.
        let (peer, tag) = wire_tag::split(got.sender_tag);
        if peer >= self.size || got.len > dst.len {
            return Err(TransportError::Peer {
                peer: src.unwrap_or(self.rank),
                op: OpKind::TaggedRecv,
                status: format!(
                    "a tagged message names sender {peer} of {} ranks and {} bytes for a {}-byte receive; is another program sharing this UCX worker?",
                    self.size, got.len, dst.len
                ),
            });
        }
        Ok(Waited::Done {
            peer,
            tag,
            len: got.len,
        })
    }
}

/// Check the peers (their processes at most every CHECK_EVERY): the
/// error of a dead or failed `src` (any peer, for a wildcard source),
/// from the process watch or an endpoint error UCX reported. The error
/// completion stays queued for the caller's next poll too.
fn dead_peer(
    shared: &Shared,
    watch: &mut PeerWatch,
    gone: &mut [bool],
    src: Option<Rank>,
) -> Option<TransportError> {
    watch.check(gone, |c| shared.push(c));
    if !shared.has_queued() {
        return None;
    }
    let g = shared.lock();
    g.completions.iter().find_map(|c| match c {
        Completion::Error {
            peer, op, status, ..
        } if src.map_or(true, |s| s == *peer) => Some(TransportError::Peer {
            peer: *peer,
            op: *op,
            status: status.clone(),
        }),
        _ => None,
    })
}
