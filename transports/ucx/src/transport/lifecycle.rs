//! The endpoints' life beyond single operations: wire-up inside the
//! collective connect, key revocations, and teardown.

use std::time::Instant;

use ovbench_core::{OpKind, Rank, TransportError};
use ovbench_ucx_sys as sys;

use super::{UcxTransport, CLOSE_DEADLINE, WIRE_UP_DEADLINE};
use crate::ops::{Shared, REVOKE_AM_ID};
use crate::status;

impl UcxTransport {
    /// Send `peer` a revocation of our key with checksum `sum`; a failure
    /// (the peer is gone) needs no report: it can no longer use the key.
    pub(super) fn send_revocation(&mut self, peer: Rank, sum: u64) {
        let ep = self.eps[peer as usize];
        let mut buf = Vec::with_capacity(12);
        buf.extend_from_slice(&self.rank.to_le_bytes());
        buf.extend_from_slice(&sum.to_le_bytes());
        let base = buf.as_ptr();
        let op = self.op(0, peer, OpKind::Send, Some(buf));
        // SAFETY: op was just boxed and is not yet shared with UCX.
        unsafe { (*op).silent = true };
        let mut p = Self::cb_params(op);
        p.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = sys::UCP_AM_SEND_FLAG_EAGER;
        // SAFETY: ep is live; header and data point into the staging buffer
        // owned by op until its completion.
        let r = unsafe {
            sys::ucp_am_send_nbx(ep, REVOKE_AM_ID, base.cast(), 4, base.add(4).cast(), 8, &p)
        };
        let _ = self.settle(r, op, "ucp_am_send_nbx(revoke)", None);
    }

    /// Complete the wire-up of every endpoint (connect is collective, so
    /// the peers progress meanwhile), so the first operation does not wait
    /// on a handshake only the peer's progress can finish.
    pub(super) fn wire_up(&mut self) -> Result<(), TransportError> {
        let mut reqs = Vec::new();
        for (peer, ep) in self.eps.iter().enumerate() {
            let p = sys::ucp_request_param_t::default();
            // SAFETY: ep is live; no callback: the request is polled below.
            let r = unsafe { sys::ucp_ep_flush_nbx(*ep, &p) };
            if sys::ptr_is_err(r) {
                return Err(status::peer(
                    peer as Rank,
                    OpKind::Connect,
                    "ucp_ep_flush_nbx (wire-up)",
                    sys::ptr_status(r),
                ));
            }
            if !r.is_null() {
                reqs.push((peer as Rank, r));
            }
        }
        // Remote peers first: a timeout is then reported against a peer,
        // not against this rank's endpoint to itself (which waits too when
        // a network transport in the list cannot wire up).
        let me = self.rank;
        reqs.sort_by_key(|&(peer, _)| peer == me);
        let deadline = Instant::now() + WIRE_UP_DEADLINE;
        let mut result = Ok(());
        for (peer, r) in reqs {
            loop {
                // SAFETY: r is a live request until freed below.
                let st = unsafe { sys::ucp_request_check_status(r) };
                if st != sys::UCS_INPROGRESS {
                    if st != sys::UCS_OK && result.is_ok() {
                        result = Err(status::peer(
                            peer,
                            OpKind::Connect,
                            "ucp_ep_flush_nbx (wire-up)",
                            st,
                        ));
                    }
                    break;
                }
                if Instant::now() > deadline {
                    if result.is_ok() {
                        result = Err(self.wire_up_timeout(peer));
                    }
                    // Left in flight: the endpoints of a failed wire-up are
                    // never closed nor progressed again (see Drop), so the
                    // request is only marked for release below.
                    break;
                }
                self.ucp.progress();
            }
            // SAFETY: r is released once (UCX frees an unfinished request
            // when it completes, which here it never does).
            unsafe { sys::ucp_request_free(r) };
        }
        result
    }

    /// The error of a wire-up that did not finish in time: which transports,
    /// the likely reasons, what to try.
    fn wire_up_timeout(&self, peer: Rank) -> TransportError {
        let s = &self.ucp.settings;
        let ud = if s.tls.split(',').any(|t| t.starts_with("ud")) {
            " (over soft-RoCE/rxe UCX's ud_verbs did not complete it in ovbench's VM, nor did ucx_perftest's)"
        } else {
            ""
        };
        TransportError::Peer {
            peer,
            op: OpKind::Connect,
            status: format!(
                "UCX wire-up with rank {peer} did not finish within {} s over UCX_TLS={} (UCX_NET_DEVICES={}): rank {peer} is not running, the ranks share no transport, or a transport in the list cannot complete its handshake on this device{ud}; try other transports with --ucx-tls (tcp; rc_verbs or dc_mlx5 with an auxiliary transport that works here), check `ucx_info -d`, and compare with ucx_perftest under the same UCX_TLS. The endpoints are left unclosed: closing a half-wired UCX endpoint can abort inside UCX",
                WIRE_UP_DEADLINE.as_secs(),
                s.tls,
                s.net_devices
            ),
        }
    }
}

impl Drop for UcxTransport {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            t.stop(&self.ucp);
        }
        if !self.eps.is_empty() && !self.wired {
            self.abandon();
            return;
        }
        self.mem.clear_rkeys();
        for ep in std::mem::take(&mut self.eps) {
            let p = sys::ucp_request_param_t {
                op_attr_mask: sys::UCP_OP_ATTR_FIELD_FLAGS,
                flags: sys::UCP_EP_CLOSE_FLAG_FORCE,
                ..Default::default()
            };
            // SAFETY: ep is live and closed once.
            let r = unsafe { sys::ucp_ep_close_nbx(ep, &p) };
            if sys::ptr_is_ptr(r) {
                let deadline = Instant::now() + CLOSE_DEADLINE;
                // SAFETY: r is a live request until freed below.
                while unsafe { sys::ucp_request_check_status(r) } == sys::UCS_INPROGRESS
                    && Instant::now() < deadline
                {
                    self.ucp.progress();
                }
                // SAFETY: r is released once.
                unsafe { sys::ucp_request_free(r) };
            }
        }
        self.mem.unmap_all(self.ucp.context);
    }
}

impl UcxTransport {
    /// Teardown after a wire-up that never finished (or failed): UCX 1.13
    /// aborts on an assertion when such an endpoint is closed, even with
    /// `UCP_EP_CLOSE_FLAG_FORCE`, and destroying the worker closes its
    /// endpoints the same way. So nothing is closed or destroyed: the
    /// endpoints, worker, context, registrations and the state UCX's
    /// callbacks point to are leaked, never progressed again, and the
    /// caller reports the connect error (the process then exits).
    fn abandon(&mut self) {
        std::mem::forget(std::mem::take(&mut self.eps));
        std::mem::forget(std::mem::take(&mut self.ep_args));
        std::mem::forget(std::mem::take(&mut self.mem));
        self.ucp.abandon();
        let shared = std::mem::replace(
            &mut self.shared,
            Box::new(Shared::new(self.rank, self.size, 0, false)),
        );
        std::mem::forget(shared);
    }
}
