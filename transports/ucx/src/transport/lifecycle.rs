//! The endpoints' life beyond single operations: wire-up inside the
//! collective connect, key revocations, and teardown.

use std::time::Instant;

use ovbench_core::{OpKind, Rank, TransportError};
use ovbench_ucx_sys as sys;

use super::{UcxTransport, WIRE_UP_DEADLINE};
use crate::ops::REVOKE_AM_ID;
use crate::status;

impl UcxTransport {
    /// Send `peer` a revocation of our key with checksum `sum`; a failure
    /// (the peer is gone) needs no report: it can no longer use the key.
    pub(super) fn send_revocation(&mut self, peer: Rank, sum: u64) {
        let mut buf = Vec::with_capacity(12);
        buf.extend_from_slice(&self.rank.to_le_bytes());
        buf.extend_from_slice(&sum.to_le_bytes());
        let mut op = self.op(0, peer, OpKind::Send, Some(buf));
        op.silent = true;
        let posted = self.eps[peer as usize].am_send(REVOKE_AM_ID, 4, op);
        let _ = self.settle(posted, "ucp_am_send_nbx(revoke)");
    }

    /// Complete the wire-up of every endpoint (connect is collective, so
    /// the peers progress meanwhile), so the first operation does not wait
    /// on a handshake only the peer's progress can finish.
    pub(super) fn wire_up(&mut self) -> Result<(), TransportError> {
        let mut reqs = Vec::new();
        for (peer, ep) in self.eps.iter().enumerate() {
            let r = ep.flush().map_err(|st| {
                status::peer(
                    peer as Rank,
                    OpKind::Connect,
                    "ucp_ep_flush_nbx (wire-up)",
                    st,
                )
            })?;
            if let Some(r) = r {
                reqs.push((peer as Rank, r));
            }
        }
        // Remote peers first: a timeout is then reported against a peer,
        // not against this rank's endpoint to itself (which waits too when
        // a network transport in the list cannot wire up).
        let me = self.rank;
        reqs.sort_by_key(|(peer, _)| *peer == me);
        let deadline = Instant::now() + WIRE_UP_DEADLINE;
        let mut result = Ok(());
        for (peer, r) in reqs {
            loop {
                let st = r.status();
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
                    // request is only marked for release (its drop).
                    break;
                }
                self.worker.progress();
            }
        }
        result
    }

    /// The error of a wire-up that did not finish in time: which transports,
    /// the likely reasons, what to try.
    fn wire_up_timeout(&self, peer: Rank) -> TransportError {
        let s = &self.settings;
        let ud = if s.tls.split(',').any(|t| t.starts_with("ud")) {
            " (on soft-RoCE UCX 1.13's ud_verbs drops every packet while its DGID check is on: the header's ud_eth_dgid_check says whether ovbench turned it off)"
        } else {
            ""
        };
        TransportError::Peer {
            peer,
            op: OpKind::Connect,
            status: format!(
                "UCX wire-up with rank {peer} did not finish within {} s over UCX_TLS={} (UCX_NET_DEVICES={}): rank {peer} is not running, the ranks share no transport, or a transport in the list cannot complete its handshake on this device{ud}; try other transports with --ucx-tls (tcp; rc_verbs or dc_mlx5 with an auxiliary transport that works here) or --ucx-connect sockaddr (rc wired up through rdmacm, no auxiliary transport), check `ucx_info -d`, and compare with ucx_perftest under the same UCX_TLS. The endpoints are left unclosed: closing a half-wired UCX endpoint can abort inside UCX",
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
            t.stop(&self.worker);
        }
        if !self.eps.is_empty() && !self.wired {
            self.abandon();
            return;
        }
        // In UCX's order: peer keys, then endpoints (each closed, forced,
        // progressing the worker), then registrations; the worker and the
        // context go with the last handle that holds them.
        self.mem.clear_rkeys();
        self.eps.clear();
        self.loopback = None;
        self.mem.unmap_all();
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
        std::mem::forget(self.loopback.take());
        std::mem::forget(self.listener.take());
        std::mem::forget(std::mem::take(&mut self.mem));
        self.worker.leak();
    }
}
