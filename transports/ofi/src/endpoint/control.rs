//! ovbench's own control traffic between transports, never shown to the
//! user: a hello exchanged inside the collective `connect` (shm and
//! tcp;ofi_rxm set up a peer on the first message, which needs the peer's
//! progress; doing it here means the first timed operation does not pay
//! for it, and a rank polling alone can complete its sends), and key
//! revocations sent on `deregister` (shm never answers an access through a
//! dropped key, so the initiator must know before it posts).
//!
//! A control message's source field has [`CTRL`] set; its first byte
//! after that is the type.

use std::time::{Duration, Instant};

use ovbench_core::{Completion, OpKind, Rank, TransportError};

use super::{Call, Endpoint, Post, Req};
use crate::ops::{Kind, Op, SRC_HDR};
use ovbench_core::fabric::peer_watch;

/// Marks a control message in the source field.
pub(super) const CTRL: u32 = 1 << 31;
const HELLO: u8 = 0;
const REVOKE: u8 = 1;
const BYE: u8 = 2;
/// How long a closing transport waits for its goodbyes to leave.
const BYE_DEADLINE: Duration = Duration::from_millis(500);
/// How long a closing ofi_rxm endpoint keeps progressing (see
/// `settle_rxm`), and how often it looks meanwhile.
const RXM_SETTLE: Duration = Duration::from_millis(20);
const RXM_SETTLE_POLL: Duration = Duration::from_micros(200);
/// Revocations remembered (oldest forgotten first).
const MAX_REVOKED: usize = 1 << 16;
/// How long connect waits for every peer's hello.
const HELLO_DEADLINE: Duration = Duration::from_secs(30);

impl Endpoint {
    fn send_control(&mut self, peer: Rank, kind: u8, body: &[u8]) -> Result<(), TransportError> {
        let dest = self.addr(peer, OpKind::Connect)?;
        let mut buf = Vec::with_capacity(SRC_HDR + 1 + body.len());
        buf.extend_from_slice(&(self.rank | CTRL).to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.push(kind);
        buf.extend_from_slice(body);
        if kind != BYE && buf.len() <= self.fabric.attrs.inject_size {
            let call = Call::Inject {
                buf,
                dest,
                ctx: None,
            };
            return self.submit(Post::new(
                peer,
                OpKind::Connect,
                "fi_inject (control)",
                call,
            ));
        }
        let op = Op::boxed(Kind::Control, 0, peer, buf);
        let call = Req::Send { dest }.with(op);
        self.submit(Post::new(peer, OpKind::Connect, "fi_send (control)", call))
    }

    /// A control message arrived from `src`.
    pub(super) fn on_control(&mut self, src: Rank, body: &[u8]) {
        match (body.first(), body.get(1..)) {
            (Some(&HELLO), Some(rest)) => {
                if let Some(h) = self.hellos.get_mut(src as usize) {
                    *h = true;
                }
                // Same host and pid namespace: the pid can be watched.
                self.watch.note(src, rest);
            }
            (Some(&REVOKE), Some(rest)) if rest.len() == 8 => {
                let key = (src, u64::from_le_bytes(rest.try_into().expect("8 bytes")));
                if self.revoked.insert(key) {
                    self.revoked_order.push_back(key);
                    if self.revoked_order.len() > MAX_REVOKED {
                        if let Some(old) = self.revoked_order.pop_front() {
                            self.revoked.remove(&old);
                        }
                    }
                }
            }
            (Some(&BYE), _) => {
                if let Some(g) = self.gone.get_mut(src as usize) {
                    *g = true;
                }
            }
            _ => self.pending.push_back(Completion::Error {
                ctx: None,
                peer: src,
                op: OpKind::Recv,
                status: format!(
                    "an unknown ovbench control message ({} bytes) from rank {src}; the ranks run different ovbench builds",
                    body.len()
                ),
            }),
        }
    }

    /// Say hello to every peer and wait until every peer said hello.
    pub(super) fn hello_all(&mut self) -> Result<(), TransportError> {
        let me = self.rank;
        for peer in (0..self.size).filter(|&p| p != me) {
            self.send_control(peer, HELLO, &peer_watch::identity())?;
        }
        let deadline = Instant::now() + HELLO_DEADLINE;
        loop {
            self.drain_cq(None)?;
            self.flush_backlog();
            let missing = (0..self.size).find(|&p| p != self.rank && !self.hellos[p as usize]);
            let Some(peer) = missing else {
                return Ok(());
            };
            if Instant::now() > deadline {
                return Err(TransportError::Peer {
                    peer,
                    op: OpKind::Connect,
                    status: format!(
                        "no hello from rank {peer} within {} s over provider {}; is it running, with the same --provider?",
                        HELLO_DEADLINE.as_secs(),
                        self.fabric.attrs.provider
                    ),
                });
            }
        }
    }

    /// Tell every peer that our key with checksum `sum` is dead. A peer
    /// that is gone needs no notice.
    pub(super) fn revoke_everywhere(&mut self, sum: u64) {
        let me = self.rank;
        for peer in (0..self.peers.len() as Rank).filter(|&p| p != me) {
            let _ = self.send_control(peer, REVOKE, &sum.to_le_bytes());
        }
        self.revoked.insert((self.rank, sum));
    }

    /// Tell every peer this transport is closing, and give the messages a
    /// moment to leave (a peer that misses it finds out by its deadline).
    pub(super) fn say_goodbye(&mut self) {
        if self.peers.is_empty() {
            return;
        }
        // Learn first who has left already: writing to a closed shm peer's
        // region is not possible.
        let _ = self.drain_cq(None);
        let me = self.rank;
        for peer in (0..self.size).filter(|&p| p != me) {
            if !self.gone[peer as usize] {
                let _ = self.send_control(peer, BYE, &[]);
            }
        }
        let deadline = Instant::now() + BYE_DEADLINE;
        while (self.in_flight > 0 || !self.backlog.is_empty()) && Instant::now() < deadline {
            if self.drain_cq(None).is_err() {
                break;
            }
            self.flush_backlog();
        }
        self.settle_rxm();
    }

    /// Over ofi_rxm, keep its progress going a moment before the close:
    /// completions its core provider still holds (of injected sends, of
    /// its own credit messages) made `fi_close` of the endpoint crash
    /// (a null dereference; 10 of 50 rdma-read/rdma-write runs over
    /// verbs;ofi_rxm in the soft-RoCE VM, libfabric 1.17), the
    /// use-after-free of completions left queued at connection close that
    /// ofiwg/libfabric#12674 fixed later.
    fn settle_rxm(&mut self) {
        if !self.fabric.attrs.provider.contains("ofi_rxm") {
            return;
        }
        let until = Instant::now() + RXM_SETTLE;
        while Instant::now() < until {
            if self.drain_cq(None).is_err() {
                break;
            }
            std::thread::sleep(RXM_SETTLE_POLL);
        }
    }

    /// The error for an operation towards a peer that said goodbye.
    pub(super) fn check_not_gone(&self, peer: Rank, op: OpKind) -> Result<(), TransportError> {
        if self.gone.get(peer as usize).copied().unwrap_or(false) {
            return Err(TransportError::Peer {
                peer,
                op,
                status: format!(
                    "rank {peer} has left the job (its transport was closed); the run cannot continue with it"
                ),
            });
        }
        Ok(())
    }

    /// Refuse a key its owner has revoked (after reading what has arrived).
    pub(super) fn check_not_revoked(
        &mut self,
        peer: Rank,
        sum: u64,
        op: OpKind,
    ) -> Result<(), TransportError> {
        self.drain_cq(None)?;
        self.check_not_gone(peer, op)?;
        if self.revoked.contains(&(peer, sum)) {
            return Err(TransportError::BadKey {
                peer,
                detail: format!("{op} through a key whose registration rank {peer} has dropped"),
            });
        }
        Ok(())
    }
}
