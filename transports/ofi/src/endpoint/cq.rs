//! Completion-queue handling: `fi_cq_read`/`fi_cq_readerr` entries become
//! the contract's completions (or, in order, go straight from the receive
//! buffer to `poll_arrivals`' taker); receive buffers are reposted; a write
//! without delivery completion gets its fence read.

use std::mem::MaybeUninit;
use std::ptr;

use ovbench_core::{
    Arrivals, Completion, Ctx, OpKind, Placement, Rank, Tag, Transport, TransportError,
};
use ovbench_ofi_sys as sys;

use super::control::CTRL;
use super::{Endpoint, Post, EAGAIN, EAVAIL};
use crate::error::fi_str;
use crate::ops::{Fence, Kind, Op, SRC_HDR, TAG_SRC_SHIFT};

/// `poll_arrivals`' taker during one poll: how many messages it took, and
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
        // Not zeroed: clearing 32 entries (1.3 KB) on every poll was ~6%
        // of an idle poll loop; the provider fills the first n.
        let mut entries = [MaybeUninit::<sys::fi_cq_tagged_entry>::uninit(); 32];
        loop {
            // SAFETY: cq is open with FI_CQ_FORMAT_TAGGED; entries has room
            // for 32 of them.
            let n = unsafe {
                sys::fi_cq_read(self.fabric.cq, entries.as_mut_ptr().cast(), entries.len())
            };
            if n > 0 {
                for e in &entries[..n as usize] {
                    // SAFETY: fi_cq_read wrote n (> 0) whole entries.
                    let e = unsafe { e.assume_init_ref() };
                    let (op, len, tag) = (e.op_context.cast(), e.len, e.tag);
                    self.complete(op, len, tag, None, sink.as_deref_mut())?;
                }
                // A partial batch drained the queue: reading again only
                // to be told -FI_EAGAIN would run the provider's progress
                // once more (a poll(2) on tcp) before the caller sees this.
                if (n as usize) < entries.len() {
                    return Ok(());
                }
            } else if n == EAGAIN {
                return Ok(());
            } else if n == EAVAIL {
                let mut err = sys::fi_cq_err_entry::default();
                // SAFETY: cq is open; err is a valid entry to fill.
                let rc = unsafe { sys::fi_cq_readerr(self.fabric.cq, &mut err, 0) };
                if rc != 1 {
                    return Err(crate::error::local(
                        OpKind::Poll,
                        "fi_cq_readerr",
                        rc as i64,
                        "",
                    ));
                }
                // SAFETY: cq is open; err came from it; the returned string
                // is owned by the provider until the next call.
                let s = unsafe {
                    sys::fi_cq_strerror(
                        self.fabric.cq,
                        err.prov_errno,
                        err.err_data,
                        ptr::null_mut(),
                        0,
                    )
                };
                let prov = if s.is_null() {
                    String::new()
                } else {
                    // SAFETY: a NUL-terminated provider string.
                    unsafe { std::ffi::CStr::from_ptr(s) }
                        .to_string_lossy()
                        .into_owned()
                };
                let mut status = format!("{}; provider says: {prov}", fi_str(i64::from(err.err)));
                if let Some(c) = self.cma.as_ref().filter(|c| !c.usable) {
                    status.push_str(&format!("; {}", c.detail));
                }
                self.complete(err.op_context.cast(), err.len, err.tag, Some(status), None)?;
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
        op: *mut Op,
        len: usize,
        tag: u64,
        err: Option<String>,
        sink: Option<&mut Sink<'_>>,
    ) -> Result<(), TransportError> {
        if op.is_null() {
            return Ok(());
        }
        // SAFETY: every context we post is an `Op` we allocated; the
        // provider returns it exactly once per posted operation.
        if unsafe { (*op).kind } == Kind::RecvBuf {
            let c = match err {
                Some(status) => Some(Completion::Error {
                    ctx: None,
                    peer: self.rank,
                    op: OpKind::Recv,
                    status,
                }),
                None => {
                    // SAFETY: as above; the buffer is ours again until
                    // reposted below. It lives in the Op box, not in self,
                    // so self (its regions too) may change while b is read.
                    let b = unsafe { &(*op).buf };
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
        // SAFETY: a non-receive Op is owned by the provider until this
        // completion, which returns it to us.
        let mut op = unsafe { Box::from_raw(op) };
        self.in_flight = self.in_flight.saturating_sub(1);
        let (ctx, peer, kind, fence) = (op.ctx, op.peer, op.kind, op.fence);
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
            Kind::TaggedRecv => Completion::TaggedRecv {
                ctx,
                peer: (tag >> TAG_SRC_SHIFT) as Rank,
                tag: tag as u32 as Tag,
                len,
            },
            Kind::WriteThenFence => {
                let f = fence.expect("a fenced write carries its fence");
                return self.post_fence(peer, ctx, f);
            }
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
        let ep = self.fabric.ep;
        let addr = self.peers[peer as usize];
        let op = self.op(Kind::Fence, ctx, peer, vec![0u8; 1]);
        // SAFETY: op is freshly boxed and ours until submitted.
        let p = unsafe { (*op).buf.as_mut_ptr() };
        self.submit(
            Some(op),
            Post::new(
                peer,
                OpKind::Write,
                "fi_read (write fence)",
                None,
                move || {
                    // SAFETY: ep is enabled; p is a 1-byte buffer owned by op
                    // until its completion; address and key were checked.
                    unsafe {
                        sys::fi_read(
                            ep,
                            p.cast(),
                            1,
                            ptr::null_mut(),
                            addr,
                            f.addr,
                            f.key,
                            op.cast(),
                        )
                    }
                },
            ),
        )
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
