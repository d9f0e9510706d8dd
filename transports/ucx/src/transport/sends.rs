//! ovbench's active-message send, saying whether UCX finished it inside
//! the call: a short message over shared memory or tcp usually leaves at
//! once, and its caller then needs no completion from the queue
//! (`Posted::Done` from `Transport::post_send`; UCX's tagged send does
//! the same in [`super::tagged`]).

use ovbench_core::{Ctx, LocalSlice, OpKind, Rank, TransportError};

use super::{UcxTransport, EAGER_BUF_SIZE};
use crate::ffi::request::Posted;
use crate::ops::{AM_HDR_LEN, AM_ID, MAX_SPARE_OPS};
use crate::status;

/// Largest message (AM header included) tried from the stack, sent only
/// if UCX finishes it inside the call.
const IMM_MAX: usize = 256;

impl UcxTransport {
    /// Send one engine message as an active message: ovbench's 8-byte AM
    /// header (source rank, per-peer sequence), then `header` and
    /// `payload`, copied into a staging buffer. True when UCX sent it
    /// inside the call (no completion will be queued).
    pub(super) fn am_send(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        let ep = self.ep(peer, OpKind::Send)?;
        let total = header.len() + payload.map_or(0, |p| p.len);
        if total > EAGER_BUF_SIZE {
            return Err(TransportError::Invalid(format!(
                "a {total}-byte message to rank {peer} exceeds the {EAGER_BUF_SIZE}-byte eager buffer"
            )));
        }
        let seq = self.send_seq[peer as usize];
        if AM_HDR_LEN + total <= IMM_MAX && self.am_send_now(ep, peer, seq, header, payload)? {
            self.send_seq[peer as usize] = seq.wrapping_add(1);
            return Ok(true);
        }
        let mut buf = self.staging();
        buf.clear();
        buf.resize(AM_HDR_LEN + total, 0);
        let body = match payload.map(|p| self.mem.slice(p)).transpose() {
            Ok(b) => b.unwrap_or_default(),
            Err(e) => {
                self.send_pool.push(buf);
                return Err(e);
            }
        };
        am_layout(&mut buf, self.rank, seq, header, body);
        self.send_seq[peer as usize] = seq.wrapping_add(1);
        // The header must stay valid until completion (UCX 1.13 has no
        // COPY_HEADER flag), so it lives in the staging buffer too, which
        // the op owns until its completion.
        let op = self.op(ctx, peer, OpKind::Send, Some(buf));
        let posted = self.eps[ep].am_send(AM_ID, AM_HDR_LEN, op);
        self.settle_inline(posted, "ucp_am_send_nbx")
    }

    /// The active message of [`am_send`](Self::am_send) from a stack
    /// buffer, only if UCX can send it inside the call
    /// (`FORCE_IMM_CMPL`): no staging buffer, operation box or callback,
    /// the bulk of a small send's cost. True when sent; false when UCX
    /// would have to keep it (the caller then stages it).
    fn am_send_now(
        &mut self,
        ep: usize,
        peer: Rank,
        seq: u32,
        header: &[u8],
        payload: Option<LocalSlice>,
    ) -> Result<bool, TransportError> {
        let mut msg = [0u8; IMM_MAX];
        let body = match payload {
            Some(p) => self.mem.slice(p)?,
            None => &[],
        };
        let end = AM_HDR_LEN + header.len() + body.len();
        am_layout(&mut msg[..end], self.rank, seq, header, body);
        self.eps[ep]
            .am_send_imm(AM_ID, &msg[..end], AM_HDR_LEN)
            .map_err(|st| status::peer(peer, OpKind::Send, "ucp_am_send_nbx", st))
    }

    /// [`settle`](Self::settle) for a send whose inline completion the
    /// caller takes itself: true (and nothing queued) when UCX finished it
    /// inside the call, false when it is in flight, an error when it failed.
    pub(super) fn settle_inline(
        &mut self,
        posted: Posted,
        call: &str,
    ) -> Result<bool, TransportError> {
        match posted {
            Posted::InFlight => Ok(false),
            Posted::Done(op) => {
                let op = self.reclaim(op);
                if self.spare.len() < MAX_SPARE_OPS {
                    self.spare.push(op);
                }
                Ok(true)
            }
            Posted::Failed(op, st) => {
                let op = self.reclaim(op);
                Err(status::peer(op.peer, op.kind, call, st))
            }
        }
    }
}

/// ovbench's active message in `out` (exactly as long as the message):
/// the 8-byte AM header (source rank, per-peer sequence, little-endian),
/// then the engine's `header`, then `payload`.
fn am_layout(out: &mut [u8], rank: Rank, seq: u32, header: &[u8], payload: &[u8]) {
    let h_end = AM_HDR_LEN + header.len();
    out[0..4].copy_from_slice(&rank.to_le_bytes());
    out[4..AM_HDR_LEN].copy_from_slice(&seq.to_le_bytes());
    out[AM_HDR_LEN..h_end].copy_from_slice(header);
    out[h_end..].copy_from_slice(payload);
}
