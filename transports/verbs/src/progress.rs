//! Turning work completions into contract completions: receives are
//! checked, copied out and their buffers re-posted with credits counted;
//! send-side completions free their queue entry and slot; errors are
//! reported once per connection, and queued work of a dead connection
//! fails with it.

use std::time::{Duration, Instant};

use ovbench_core::{Completion, OpKind, Rank, TransportError};

use crate::cq::WorkCompletion;
use crate::peer::{OpTag, Peer, Pending, RECV};
use crate::qp::SendOp;
use crate::transport::VerbsTransport;
use crate::wire::{decode_hdr, MsgKind, MSG_HDR};

/// Empty polls between looks at the clock in [`VerbsTransport::idle_wait`].
const IDLE_CHECK_EVERY: u32 = 1024;
/// A caller that found nothing for this long, with nothing of its own in
/// flight, sleeps on the completion channel instead of spinning.
const IDLE_BEFORE_SLEEP: Duration = Duration::from_millis(10);
/// How long one such sleep lasts at most (a raw write's arrival raises no
/// completion: it is seen at the next look after the sleep).
const IDLE_SLEEP: Duration = Duration::from_millis(1);

impl VerbsTransport {
    /// The caller found nothing and keeps waiting (`Transport::waiting`).
    /// A rank that only serves one-sided operations — the target of a
    /// raw read, which the NIC serves while it waits in a barrier — would
    /// otherwise spin for the whole run on a vCPU that the NIC (rxe's
    /// softirqs) and the measuring rank need; perftest's passive side
    /// sleeps too. After [`IDLE_BEFORE_SLEEP`] of empty polls with no work
    /// request of its own in flight it blocks on the completion channel,
    /// so a message still wakes it at once. Ping-pong waits end long
    /// before that, and a caller spinning on a raw write's last byte
    /// (`Idle::WatchingMemory`) never sleeps.
    pub(crate) fn idle_wait(&mut self) {
        self.idle_polls = self.idle_polls.wrapping_add(1);
        if self.idle_polls % IDLE_CHECK_EVERY != 0 || self.ops.in_flight() > 0 {
            return;
        }
        let now = Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        if now.duration_since(since) >= IDLE_BEFORE_SLEEP {
            // An error here shows again at the caller's next poll.
            let _ = self.block(IDLE_SLEEP);
            // Look at the clock again after the next empty poll, not 1024.
            self.idle_polls = IDLE_CHECK_EVERY - 1;
        }
    }

    /// Poll the CQ once and turn what it held into completions in `out`.
    pub(crate) fn reap(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        let mut wcs = std::mem::take(&mut self.wcs);
        wcs.clear();
        let got = self
            .cq
            .poll(&mut wcs, 64)
            .map_err(|e| TransportError::Local {
                op: OpKind::Poll,
                detail: e.to_string(),
            });
        let before = out.len();
        let mut touched = 0u64;
        for wc in &wcs {
            let first = out.len();
            if let Some(p) = self.handle(wc, out) {
                touched |= 1 << (p % 64);
            }
            if let (Some(ts), Some(c)) = (wc.nic_ts, &self.nic_clock) {
                let t = c.to_instant(ts);
                self.nic_times.extend((first..out.len()).map(|i| (i, t)));
            }
        }
        self.wcs = wcs;
        got?;
        // Credits or queue space may have come back: post what waits.
        for (r, slot) in self.peers.iter_mut().enumerate() {
            let Some(p) = slot.as_mut() else { continue };
            if touched & (1 << (r % 64)) == 0 && p.pending.is_empty() {
                continue;
            }
            if let Err(e) = p.drain(&mut self.ops) {
                fail_peer(p, &format!("posting queued work failed: {e}"), out);
            }
            if p.broken.is_some() {
                flush_pending(p, out);
            }
        }
        Ok(out.len() - before)
    }

    /// One work completion; returns the peer it concerned.
    fn handle(&mut self, wc: &WorkCompletion, out: &mut Vec<Completion>) -> Option<usize> {
        if wc.wr_id & RECV != 0 {
            let r = ((wc.wr_id >> 32) & 0x7FFF_FFFF) as usize;
            let idx = wc.wr_id as u32;
            let p = self.peers.get_mut(r)?.as_mut()?;
            if !wc.ok() {
                if p.broken.is_none() {
                    fail_peer(p, &format!("receive failed: {}", wc.status_text()), out);
                }
                return Some(r);
            }
            let len = wc.byte_len as usize;
            if idx >= p.rx_count || len > p.buf_size {
                fail_peer(
                    p,
                    &format!("receive of {len} bytes into buffer {idx} is out of range"),
                    out,
                );
                return Some(r);
            }
            let msg = p.rx_bytes(idx, len);
            let (kind, credits) = match decode_hdr(msg) {
                Ok(h) => h,
                Err(e) => {
                    fail_peer(p, &format!("protocol error: {e}"), out);
                    return Some(r);
                }
            };
            if kind == MsgKind::Data {
                let mut data = self.pool.pop().unwrap_or_default();
                data.clear();
                data.extend_from_slice(&msg[MSG_HDR..]);
                out.push(Completion::Recv {
                    peer: r as Rank,
                    data,
                });
            }
            let credits_ok = p.credits.as_mut().map(|c| c.grant(credits));
            if let Some(Err(e)) = credits_ok {
                fail_peer(p, &format!("protocol error: {e}"), out);
                return Some(r);
            }
            if let Err(e) = p.repost(idx) {
                fail_peer(p, &format!("re-posting a receive buffer failed: {e}"), out);
                return Some(r);
            }
            if kind == MsgKind::Data {
                if let Some(c) = p.credits.as_mut() {
                    c.consumed();
                }
            }
            return Some(r);
        }
        let op = self.ops.remove(wc.wr_id)?;
        let r = op.peer as usize;
        let p = self.peers.get_mut(r)?.as_mut()?;
        p.retire(&op);
        let kind = match op.tag {
            OpTag::Send | OpTag::Credit => OpKind::Send,
            OpTag::Write => OpKind::Write,
            OpTag::Read => OpKind::Read,
        };
        if wc.ok() {
            match op.tag {
                OpTag::Send => out.push(Completion::Send { ctx: op.ctx }),
                OpTag::Write => out.push(Completion::Write { ctx: op.ctx }),
                OpTag::Read => out.push(Completion::Read { ctx: op.ctx }),
                OpTag::Credit => {}
            }
            return Some(r);
        }
        let status = wc.status_text();
        if p.broken.is_none() {
            p.broken = Some(format!("{kind} failed: {status}"));
        }
        if op.tag != OpTag::Credit || wc.status != ovbench_verbs_sys::IBV_WC_WR_FLUSH_ERR {
            out.push(Completion::Error {
                ctx: (op.tag != OpTag::Credit).then_some(op.ctx),
                peer: r as Rank,
                op: kind,
                status,
            });
        }
        Some(r)
    }
}

/// Mark a connection dead and report it once.
fn fail_peer(p: &mut Peer, why: &str, out: &mut Vec<Completion>) {
    if p.broken.is_some() {
        return;
    }
    p.broken = Some(why.to_string());
    out.push(Completion::Error {
        ctx: None,
        peer: p.rank,
        op: OpKind::Recv,
        status: why.to_string(),
    });
}

/// Fail every queued operation of a dead connection.
fn flush_pending(p: &mut Peer, out: &mut Vec<Completion>) {
    let why = p.broken.clone().unwrap_or_default();
    for item in p.pending.drain(..) {
        let (ctx, op) = match item {
            Pending::Send { ctx, .. } => (ctx, OpKind::Send),
            Pending::Rma {
                op: SendOp::Read { .. },
                ctx,
                ..
            } => (ctx, OpKind::Read),
            Pending::Rma { ctx, .. } => (ctx, OpKind::Write),
        };
        out.push(Completion::Error {
            ctx: Some(ctx),
            peer: p.rank,
            op,
            status: format!("not posted, the connection is down: {why}"),
        });
    }
}
