//! The two sends, ovbench's active message and UCX's tagged send, each
//! saying whether UCX finished it inside the call: a short message over
//! shared memory or tcp usually leaves at once, and its caller then needs
//! no completion from the queue (`Transport::post_send_inline`,
//! `Transport::tsend_inline`).

use ovbench_core::{Ctx, LocalSlice, OpKind, Rank, Tag, TransportError};
use ovbench_ucx_sys as sys;

use super::{UcxTransport, EAGER_BUF_SIZE};
use crate::ops::{Op, AM_HDR_LEN, AM_ID, MAX_SPARE_OPS, TAG_SRC_SHIFT};
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
        // COPY_HEADER flag), so it lives in the staging buffer too; the
        // Vec's heap block does not move when the Vec moves into the Op.
        let base = buf.as_ptr();
        let len = buf.len();
        let op = self.op(ctx, peer, OpKind::Send, Some(buf));
        let mut p = Self::cb_params(op);
        p.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = sys::UCP_AM_SEND_FLAG_EAGER;
        // SAFETY: ep is live; header and data point into the staging buffer
        // owned by `op`, which lives until the completion callback (or
        // until settle_inline() takes it back when UCX completes inline).
        let r = unsafe {
            sys::ucp_am_send_nbx(
                ep,
                AM_ID,
                base.cast(),
                AM_HDR_LEN,
                base.add(AM_HDR_LEN).cast(),
                len - AM_HDR_LEN,
                &p,
            )
        };
        self.settle_inline(r, op, "ucp_am_send_nbx")
    }

    /// UCX's tagged send (`sync`: the synchronous one), the source rank in
    /// the tag's upper half. True when UCX sent it inside the call.
    pub(super) fn tag_send(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        sync: bool,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        let ep = self.ep(peer, OpKind::TaggedSend)?;
        let p = self.mem.ptr(src)?;
        let utag = (u64::from(self.rank) << TAG_SRC_SHIFT) | u64::from(tag);
        if !sync {
            // First without a request: done inside the call or refused.
            let params = sys::ucp_request_param_t {
                op_attr_mask: sys::UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                ..Default::default()
            };
            // SAFETY: as below; nothing outlives the call.
            let r = unsafe { sys::ucp_tag_send_nbx(ep, p.cast(), src.len, utag, &params) };
            if self.immediate(r, peer, OpKind::TaggedSend, "ucp_tag_send_nbx")? {
                return Ok(true);
            }
        }
        let op = self.op(ctx, peer, OpKind::TaggedSend, None);
        let params = Self::cb_params(op);
        // SAFETY: ep is live; src lies in a live region that cannot be freed
        // while the caller still waits for this completion (contract).
        let r = unsafe {
            if sync {
                sys::ucp_tag_send_sync_nbx(ep, p.cast(), src.len, utag, &params)
            } else {
                sys::ucp_tag_send_nbx(ep, p.cast(), src.len, utag, &params)
            }
        };
        let call = if sync {
            "ucp_tag_send_sync_nbx"
        } else {
            "ucp_tag_send_nbx"
        };
        self.settle_inline(r, op, call)
    }

    /// The active message of [`am_send`](Self::am_send) from a stack
    /// buffer, only if UCX can send it inside the call
    /// (`FORCE_IMM_CMPL`): no staging buffer, operation box or callback,
    /// the bulk of a small send's cost. True when sent; false when UCX
    /// would have to keep it (the caller then stages it).
    fn am_send_now(
        &mut self,
        ep: sys::ucp_ep_h,
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
        let mut params = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_FLAGS | sys::UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
            ..Default::default()
        };
        params.flags = sys::UCP_AM_SEND_FLAG_EAGER;
        // SAFETY: ep is live; `msg` outlives the call, and with
        // FORCE_IMM_CMPL UCX either sends it inside the call or refuses.
        let r = unsafe {
            sys::ucp_am_send_nbx(
                ep,
                AM_ID,
                msg.as_ptr().cast(),
                AM_HDR_LEN,
                msg.as_ptr().add(AM_HDR_LEN).cast(),
                end - AM_HDR_LEN,
                &params,
            )
        };
        self.immediate(r, peer, OpKind::Send, "ucp_am_send_nbx")
    }

    /// What a `FORCE_IMM_CMPL` call returned: true when done, false when
    /// UCX refused to finish it inside the call (`UCS_ERR_NO_RESOURCE`),
    /// an error otherwise.
    fn immediate(
        &mut self,
        r: sys::ucs_status_ptr_t,
        peer: Rank,
        op: OpKind,
        call: &str,
    ) -> Result<bool, TransportError> {
        if r.is_null() {
            return Ok(true);
        }
        if sys::ptr_is_err(r) {
            let st = sys::ptr_status(r);
            if st == sys::UCS_ERR_NO_RESOURCE {
                return Ok(false);
            }
            return Err(status::peer(peer, op, call, st));
        }
        // A request despite FORCE_IMM_CMPL (not seen with UCX 1.13): it
        // may still read the caller's stack buffer, so finish it here.
        // SAFETY: r is a live request of this worker.
        while unsafe { sys::ucp_request_check_status(r) } == sys::UCS_INPROGRESS {
            self.ucp.progress();
        }
        // SAFETY: as above; released once, after completion.
        let st = unsafe { sys::ucp_request_check_status(r) };
        // SAFETY: the request is complete and released exactly once.
        unsafe { sys::ucp_request_free(r) };
        if st == sys::UCS_OK {
            Ok(true)
        } else {
            Err(status::peer(peer, op, call, st))
        }
    }

    /// [`settle`](Self::settle) for a send whose inline completion the
    /// caller takes itself: true (and nothing queued) when UCX finished it
    /// inside the call, false when it is in flight, an error when it failed.
    fn settle_inline(
        &mut self,
        r: sys::ucs_status_ptr_t,
        op: *mut Op,
        call: &str,
    ) -> Result<bool, TransportError> {
        if r.is_null() {
            let op = self.reclaim(op);
            if self.spare.len() < MAX_SPARE_OPS {
                self.spare.push(op);
            }
            Ok(true)
        } else if sys::ptr_is_err(r) {
            let op = self.reclaim(op);
            Err(status::peer(op.peer, op.kind, call, sys::ptr_status(r)))
        } else {
            Ok(false)
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
