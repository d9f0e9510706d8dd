//! Completion-queue handling: `fi_cq_read`/`fi_cq_readerr` entries become
//! the contract's completions (or, in order, go straight from the receive
//! buffer to the arrivals taker of `poll`); receive buffers are reposted; a write
//! without delivery completion gets its fence read.

use ovbench_core::{Arrivals, Completion, Ctx, OpKind, Placement, Rank, TransportError};

use super::control::CTRL;
use super::{Endpoint, Post, Req, EAVAIL};
use crate::error::fi_str;
use crate::fi::endpoint::CQ_BATCH;
use crate::ops::{Fence, Kind, Op, SRC_HDR};
use ovbench_core::fabric::wire_tag;

/// The arrivals taker of `poll` during one poll: how many messages it took, and
/// the error that stopped it, kept until the CQ is drained so that the
/// messages after it are queued, not lost.
pub(crate) struct Sink<'a> {
    arrivals: &'a mut dyn Arrivals,
    handed: usize,
    failed: Option<TransportError>,
}

impl<'a> Sink<'a> {
    #[inline]
    pub(crate) fn new(arrivals: &'a mut dyn Arrivals) -> Sink<'a> {
        Sink {
            arrivals,
            handed: 0,
            failed: None,
        }
    }

    /// How many messages were handed over, or the error that stopped it.
    /// Inlined: on the idle poll's path a large error type returned out of
    /// line stalls store forwarding (seen on UCX's with `perf annotate`).
    #[inline]
    pub(crate) fn finish(self) -> Result<usize, TransportError> {
        match self.failed {
            Some(e) => Err(e),
            None => Ok(self.handed),
        }
    }
}

impl Endpoint {
    pub(super) fn drain_cq(
        &mut self,
        mut sink: Option<&mut Sink<'_>>,
    ) -> Result<(), TransportError> {
        loop {
            let n = self.fabric.ep.read_cq();
            if n > 0 {
                for i in 0..n as usize {
                    if let Some(c) = self.fabric.ep.completed(i) {
                        self.complete(c.op, c.len, c.tag, None, sink.as_deref_mut())?;
                    }
                }
                // A partial batch drained the queue: reading again only
                // to be told -FI_EAGAIN would run the provider's progress
                // once more (a poll(2) on tcp) before the caller sees this.
                if (n as usize) < CQ_BATCH {
                    return Ok(());
                }
            } else if n == 0 {
                return Ok(());
            } else if n == EAVAIL {
                let f = match self.fabric.ep.read_cq_err() {
                    Ok(f) => f,
                    Err(rc) => {
                        return Err(crate::error::local(
                            OpKind::Poll,
                            "fi_cq_readerr",
                            rc as i64,
                            "",
                        ))
                    }
                };
                let mut status =
                    format!("{}; provider says: {}", fi_str(i64::from(f.err)), f.detail);
                if let Some(c) = self.cma.as_ref().filter(|c| !c.usable) {
                    status.push_str(&format!("; {}", c.detail));
                }
                if let Some(op) = f.op {
                    self.complete(op, f.len, f.tag, Some(status), None)?;
                }
            } else {
                return Err(crate::error::local(
                    OpKind::Poll,
                    "fi_cq_read",
                    n as i64,
                    "",
                ));
            }
        }
    }

    /// Turn one completion entry into the contract's completion, or hand
    /// the message it carries to `sink`.
    pub(super) fn complete(
        &mut self,
        mut op: Box<Op>,
        len: usize,
        tag: u64,
        err: Option<String>,
        sink: Option<&mut Sink<'_>>,
    ) -> Result<(), TransportError> {
        if op.kind == Kind::RecvBuf {
            let c = match err {
                Some(status) => Some(Completion::Error {
                    ctx: None,
                    peer: self.rank,
                    op: OpKind::Recv,
                    status,
                }),
                None => {
                    // The buffer is ours again until reposted below. It
                    // lives in the Op box, not in self, so self (its
                    // regions too) may change while b is read.
                    let b = &op.buf;
                    let n = len.min(b.len());
                    let hdr = (n >= SRC_HDR).then(|| {
                        (
                            u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
                            u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
                        )
                    });
                    let src = hdr.map(|h| h.0);
                    match src {
                        Some(src) if src < self.size => {
                            let (body, seq) = (&b[SRC_HDR..n], hdr.map_or(0, |h| h.1));
                            if !self.hand_over(src, seq, body, sink) {
                                let mut data = self.recv_pool.pop().unwrap_or_default();
                                data.clear();
                                data.extend_from_slice(body);
                                self.deliver_in_order(src, seq, data);
                            }
                            None
                        }
                        Some(src) if src & CTRL != 0 && src & !CTRL < self.size => {
                            let body = b[SRC_HDR..n].to_vec();
                            self.on_control(src & !CTRL, &body);
                            None
                        }
                        _ => Some(Completion::Error {
                            ctx: None,
                            peer: self.rank,
                            op: OpKind::Recv,
                            status: format!(
                                "a {len}-byte message without a valid ovbench source header (rank {src:?} of {}); another program shares this endpoint",
                                self.size
                            ),
                        }),
                    }
                }
            };
            self.pending.extend(c);
            return self.post_recv_buf(op);
        }
        self.in_flight = self.in_flight.saturating_sub(1);
        let (ctx, peer, kind) = (op.ctx, op.peer, op.kind);
        let buf = std::mem::take(&mut op.buf);
        self.spare_op(op);
        if kind == Kind::Control {
            // Our own traffic; a failure means the peer is gone, which its
            // next real operation reports.
            self.recycle_send(buf);
            return Ok(());
        }
        if let Some(status) = err {
            self.pending.push_back(Completion::Error {
                ctx: Some(ctx),
                peer,
                op: kind.op(),
                status,
            });
            self.recycle_send(buf);
            return Ok(());
        }
        let c = match kind {
            Kind::Send => Completion::Send { ctx },
            Kind::Write | Kind::Fence => Completion::Write { ctx },
            Kind::Read => Completion::Read { ctx },
            Kind::TaggedSend => Completion::TaggedSend { ctx },
            Kind::TaggedRecv => {
                let (peer, tag) = wire_tag::split(tag);
                Completion::TaggedRecv {
                    ctx,
                    peer,
                    tag,
                    len,
                }
            }
            Kind::WriteThenFence(f) => return self.post_fence(peer, ctx, f),
            Kind::RecvBuf | Kind::Control => unreachable!("handled above"),
        };
        self.recycle_send(buf);
        self.pending.push_back(c);
        Ok(())
    }

    /// Read one byte back from the written range: the provider serves the
    /// read after the write it follows on the same ordered connection, so
    /// its completion proves the write was placed.
    pub(super) fn post_fence(
        &mut self,
        peer: Rank,
        ctx: Ctx,
        f: Fence,
    ) -> Result<(), TransportError> {
        let src = self.peers[peer as usize];
        let op = self.op(Kind::Fence, ctx, peer, vec![0u8; 1]);
        let req = Req::Fence {
            src,
            raddr: f.addr,
            key: f.key,
        };
        let call = req.with(op);
        self.submit(Post::new(
            peer,
            OpKind::Write,
            "fi_read (write fence)",
            call,
        ))
    }

    /// Hand out `src`'s message `seq` once every earlier one is out.
    fn deliver_in_order(&mut self, src: Rank, seq: u32, data: Vec<u8>) {
        let s = src as usize;
        if seq != self.expected[s] {
            let ahead = seq.wrapping_sub(self.expected[s]);
            if ahead > MAX_AHEAD {
                self.pending.push_back(Completion::Error {
                    ctx: None,
                    peer: src,
                    op: OpKind::Recv,
                    status: format!(
                        "message sequence {seq} is {ahead} ahead of the expected one; rank {src} restarted or is not ovbench"
                    ),
                });
            } else {
                self.held[s].insert(seq, data);
            }
            return;
        }
        self.expected[s] = seq.wrapping_add(1);
        self.queue_recv(src, data);
        self.release_held(src, None);
    }

    /// Give `src`'s message `seq` to the sink, still in the receive
    /// buffer, if it is the next one and no `Recv` is queued (which might
    /// be `src`'s, ahead of it); the held ones it unblocks follow. Returns
    /// whether the sink had it.
    fn hand_over(&mut self, src: Rank, seq: u32, data: &[u8], sink: Option<&mut Sink<'_>>) -> bool {
        let s = src as usize;
        match sink {
            Some(k) if k.failed.is_none() && self.queued_recvs == 0 && seq == self.expected[s] => {
                self.expected[s] = seq.wrapping_add(1);
                self.arrive(src, data, k);
                self.release_held(src, Some(k));
                true
            }
            _ => false,
        }
    }

    /// Hand out `src`'s held messages that are next now: to the sink while
    /// it takes them, then queued (after a refusal too, in order).
    fn release_held(&mut self, src: Rank, mut sink: Option<&mut Sink<'_>>) {
        let s = src as usize;
        // Nearly always nothing is held: no out-of-line map search then.
        if self.held[s].is_empty() {
            return;
        }
        while let Some(d) = self.held[s].remove(&self.expected[s]) {
            self.expected[s] = self.expected[s].wrapping_add(1);
            match sink.as_deref_mut().filter(|k| k.failed.is_none()) {
                Some(k) => {
                    self.arrive(src, &d, k);
                    self.recycle(d);
                }
                None => self.queue_recv(src, d),
            }
        }
    }

    fn queue_recv(&mut self, src: Rank, data: Vec<u8>) {
        self.queued_recvs += 1;
        self.pending.push_back(Completion::Recv { peer: src, data });
    }

    /// One message to the taker, and its placement into our memory. A
    /// refusal or a bad placement stops the hand-over for this poll.
    fn arrive(&mut self, src: Rank, data: &[u8], k: &mut Sink<'_>) {
        k.handed += 1;
        // Read where the taker returned it (as UCX's `Taker::hand`): moved
        // out whole, the placement stalled store forwarding.
        let r = match k.arrivals.arrived(src, data) {
            Ok(Some(ref p)) => self.place(src, data, p),
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        k.failed = r.err();
    }

    /// Copy `data[p.src_start..][..p.dst.len]` into `p.dst`, both ranges
    /// checked (the taker's numbers are not trusted).
    #[inline]
    fn place(&mut self, src: Rank, data: &[u8], p: &Placement) -> Result<(), TransportError> {
        let bad = |why: String| {
            TransportError::Invalid(format!(
                "placement of {} bytes from offset {} of a {}-byte message from rank {src} into region {} at offset {}: {why}",
                p.dst.len,
                p.src_start,
                data.len(),
                p.dst.region.0,
                p.dst.offset
            ))
        };
        let from = p
            .src_start
            .checked_add(p.dst.len)
            .and_then(|end| data.get(p.src_start..end))
            .ok_or_else(|| bad("past the message's end".into()))?;
        let to = self.mem.slice_mut(p.dst).map_err(|e| match e {
            TransportError::Invalid(why) => bad(why),
            e => bad(e.to_string()),
        })?;
        to.copy_from_slice(from);
        Ok(())
    }
}

/// How far a message may overtake the next expected one.
const MAX_AHEAD: u32 = 1 << 16;
