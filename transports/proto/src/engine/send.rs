//! The sender's side of every protocol, and the registration dispatch.

use super::{Engine, Outgoing, QUIET_CTX};
use crate::flight::{CtxUse, Token};
use crate::plan::Route;
use crate::state::{Proto, Req, WriteStage};
use crate::wire::{Header, Kind, FLAG_INTERNAL, FLAG_READY, FLAG_SYNC};
use crate::{
    EventKind, Key, Mode, MrId, OneSided, Op, ProtoError, Rank, RawOp, ReqId, Slice, Space, Status,
    Tag,
};

impl Engine {
    /// [`Engine::isend_in`] of a message the fast path does not take.
    #[inline(never)]
    pub(super) fn isend_general(&mut self, now: u64, o: Outgoing) -> Result<ReqId, ProtoError> {
        let (src, whole, peer, tag, mode, space) = (o.src, o.whole, o.peer, o.tag, o.mode, o.space);
        if !whole.contains(&src) {
            return Err(ProtoError::Invalid(format!(
                "send slice {src:?} lies outside its buffer {whole:?}"
            )));
        }
        if peer >= self.cfg.size {
            return Err(ProtoError::Invalid(format!(
                "send of {} bytes to rank {peer}, but the job has only {} ranks",
                src.len, self.cfg.size
            )));
        }
        let route = self.route(src.len, mode, space);
        let id = self.reqs.new_id();
        // A raw write or read moves no packet of the message's own.
        let seq = match route {
            Route::Raw(RawOp::Write | RawOp::Read) => self.peers.of(peer).send,
            _ => self.peers.next_send(peer),
        };
        if route == Route::Eager && mode != Mode::Synchronous {
            self.send_now(now, id, src, (peer, tag, seq), mode, space);
            return Ok(ReqId(id));
        }
        let flags = flags(mode, space);
        let mut r = Req::new(
            true,
            Some(peer),
            Some(tag),
            src,
            Proto::send(route, flags, whole),
        );
        r.seq = seq;
        r.len = src.len;
        self.reqs.insert(id, r);
        let r = self.start_send(now, id, flags);
        if r.is_err() {
            self.reqs.remove(id);
        }
        r.map(|_| ReqId(id))
    }

    /// An eager send that finishes as it is posted (no acknowledgement to
    /// wait for): its packets go out and its status waits for
    /// [`Engine::take`] — no request state, so no request-table slot of a
    /// few hundred bytes written and read back per message.
    fn send_now(
        &mut self,
        now: u64,
        id: u64,
        src: Slice,
        (peer, tag, seq): (Rank, Tag, u32),
        mode: Mode,
        space: Space,
    ) {
        self.eager_packets(now, peer, tag, seq, src, flags(mode, space));
        let st = Status {
            source: peer,
            tag,
            len: src.len,
        };
        self.reqs.done_at_post(id, st);
    }

    /// The completion context of a packet standing for `u` (with header
    /// `flags`, carrying `payload`), its table entry where its completion
    /// does something, and the counts.
    pub(super) fn packet_ctx(&mut self, flags: u8, payload: Option<Slice>, u: CtxUse) -> u64 {
        // Nothing waits on this completion and it records nothing: the
        // transport may deliver it late (see [`QUIET_CTX`]).
        let quiet = match &u {
            CtxUse::Ctrl { req: None } => true,
            CtxUse::Packet {
                xfer, req: None, ..
            } => *xfer == 0 || !self.out.recording(),
            _ => false,
        };
        let ctx = self.reqs.new_id() | if quiet { QUIET_CTX } else { 0 };
        // A packet with no request and no transfer id, or a bare control
        // message, does nothing when it completes: no table entry for it.
        let inert = matches!(
            u,
            CtxUse::Ctrl { req: None }
                | CtxUse::Packet {
                    xfer: 0,
                    req: None,
                    ..
                }
        );
        if !inert {
            self.flight.track(ctx, u);
        }
        // The communicator's own traffic (barrier) is not the protocol's work.
        if flags & FLAG_INTERNAL == 0 {
            let c = self.out.counts_mut();
            c.sends += 1;
            c.bytes += payload.map_or(0, |p| p.len as u64);
        }
        ctx
    }

    /// The packets of an eager message of `buf` (one, or a train of
    /// fragments when it exceeds a packet). A train is one data transfer
    /// for the overlap bounds: XFER_BEGIN at its first packet's post,
    /// XFER_END at its last packet's completion — the packets queue behind
    /// each other on the NIC, so each one's own post→completion is not a
    /// transfer time; the train's is, and xfer_time times the same train.
    // deviation: eager-train-one-transfer — a packet train is one transfer, see docs/methods/overlap.md
    fn eager_packets(&mut self, now: u64, peer: Rank, tag: Tag, seq: u32, buf: Slice, flags: u8) {
        let (max, len) = (self.max_payload(), buf.len);
        let xfer = if flags & FLAG_INTERNAL != 0 {
            0
        } else {
            self.xfer_id()
        };
        self.out.event(EventKind::XferBegin, xfer, len, now);
        let mut off = 0;
        loop {
            let n = max.min(len - off);
            let mut h = Header::ctrl(
                if off == 0 {
                    Kind::Eager
                } else {
                    Kind::EagerFrag
                },
                seq,
                tag,
                len as u64,
            );
            h.offset = off as u64;
            h.payload_len = n as u32;
            h.flags = flags;
            let last = off + n >= len;
            let u = CtxUse::Packet {
                xfer: if last { xfer } else { 0 },
                bytes: len,
                req: None,
            };
            self.send_op(peer, &h, buf.sub(off, n), u);
            off += n;
            if off >= len {
                break;
            }
        }
    }

    /// The first step of send request `id`, whose header flags are `flags`.
    fn start_send(&mut self, now: u64, id: u64, flags: u8) -> Result<(), ProtoError> {
        let r = self.req(id)?;
        let (peer, tag, seq, len, buf, route) = (
            r.peer.unwrap_or(0),
            r.tag.unwrap_or(0),
            r.seq,
            r.len,
            r.buf,
            r.route(),
        );
        let max = self.max_payload();
        match route {
            Route::Eager => {
                self.eager_packets(now, peer, tag, seq, buf, flags);
                if flags & FLAG_SYNC != 0 {
                    // Waits for the receiver's ack.
                    self.flight.awaiting(peer, seq, id);
                } else {
                    self.reqs.finish(id);
                }
            }
            Route::Raw(RawOp::Send) => {
                if len > max {
                    return Err(ProtoError::Invalid(format!(
                        "raw send of {len} bytes to rank {peer} exceeds one bounce buffer ({max} bytes): use --proto eager (a packet train) for larger messages"
                    )));
                }
                let mut h = Header::ctrl(Kind::RawSend, seq, tag, len as u64);
                h.payload_len = len as u32;
                h.flags = flags & FLAG_INTERNAL;
                let xfer = self.xfer_id();
                self.out.event(EventKind::XferBegin, xfer, len, now);
                let u = CtxUse::Packet {
                    xfer,
                    bytes: len,
                    req: Some(id),
                };
                self.send_op(peer, &h, Some(buf), u);
            }
            Route::RdmaWrite => {
                let mut h = Header::ctrl(Kind::RtsWrite, seq, tag, len as u64);
                h.flags = flags;
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                // Its state starts at WaitCts.
                self.flight.awaiting(peer, seq, id);
            }
            Route::RdmaRead => {
                // Its state starts at Registering.
                self.flight.awaiting(peer, seq, id);
                self.register(now, buf, true, Token::Whole { req: id })?;
            }
            Route::Pipelined => {
                let first = max.min(len);
                let mut h = Header::ctrl(Kind::PipeRts, seq, tag, len as u64);
                h.payload_len = first as u32;
                h.flags = flags;
                let xfer = self.xfer_id();
                self.out.event(EventKind::XferBegin, xfer, first, now);
                let u = CtxUse::Packet {
                    xfer,
                    bytes: first,
                    req: None,
                };
                self.send_op(peer, &h, buf.sub(0, first), u);
                if let Proto::Pipelined(p) = &mut self.req_mut(id)?.proto {
                    p.first = first;
                }
                self.flight.awaiting(peer, seq, id);
            }
            Route::Raw(_) => self.raw_send(now, id)?,
        }
        Ok(())
    }

    /// A registration asked for by `t` is ready.
    pub(super) fn registered(
        &mut self,
        now: u64,
        t: Token,
        slice: Slice,
        mr: MrId,
        key: Key,
        cached: bool,
    ) -> Result<(), ProtoError> {
        match t {
            Token::Whole { req } => self.whole_registered(now, req, slice, mr, key, cached),
            Token::SendFrag {
                req,
                offset,
                key: peer_key,
            } => {
                let peer = self.req(req)?.peer.ok_or_else(|| gone(req))?;
                let xfer = self.xfer_id();
                self.out.event(EventKind::XferBegin, xfer, slice.len, now);
                let w = Write {
                    req,
                    xfer,
                    offset,
                    cached,
                    remote_offset: 0,
                };
                self.post_write(peer, slice, mr, peer_key, w);
                Ok(())
            }
            Token::RecvFrag { req, offset } => {
                let r = self.req(req)?;
                let (peer, seq, tag, len) = (r.peer.unwrap_or(0), r.seq, r.tag.unwrap_or(0), r.len);
                let mut h = Header::ctrl(Kind::Put, seq, tag, len as u64);
                h.offset = offset as u64;
                h.key = Some(key);
                let xfer = self.xfer_id();
                self.out.event(EventKind::XferBegin, xfer, slice.len, now);
                self.flight.frag_put(req, offset, (xfer, mr, slice.len));
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                Ok(())
            }
        }
    }

    /// Post a write of `local` (registered as `mr`) into `key` at the
    /// write's `offset`, for `w`.
    pub(super) fn post_write(&mut self, peer: Rank, local: Slice, mr: MrId, key: Key, w: Write) {
        let ctx = self.reqs.new_id();
        self.flight.track(
            ctx,
            CtxUse::Write {
                req: w.req,
                xfer: w.xfer,
                offset: w.offset,
                bytes: local.len,
                mr,
                cached: w.cached,
            },
        );
        let op = OneSided {
            peer,
            local,
            mr,
            key,
            remote_offset: w.remote_offset,
            ctx,
        };
        self.push_one_sided(w.req, true, op);
    }

    /// Queue one-sided `op` (a write, else a read) for request `req`:
    /// counted, and `req` known to have RDMA in flight.
    fn push_one_sided(&mut self, req: u64, write: bool, op: OneSided) {
        self.track_rdma(req);
        let c = self.out.counts_mut();
        c.bytes += op.local.len as u64;
        if write {
            c.writes += 1;
            self.out.push(Op::Write(Box::new(op)));
        } else {
            c.reads += 1;
            self.out.push(Op::Read(Box::new(op)));
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_read(
        &mut self,
        peer: Rank,
        local: Slice,
        mr: MrId,
        key: Key,
        remote_offset: u64,
        req: u64,
        xfer: u64,
    ) {
        let ctx = self.reqs.new_id();
        self.flight.track(ctx, CtxUse::Read { req, xfer });
        let op = OneSided {
            peer,
            local,
            mr,
            key,
            remote_offset,
            ctx,
        };
        self.push_one_sided(req, false, op);
    }

    fn whole_registered(
        &mut self,
        now: u64,
        req: u64,
        slice: Slice,
        mr: MrId,
        key: Key,
        cached: bool,
    ) -> Result<(), ProtoError> {
        let xfer = self.xfer_id();
        let r = self.req_mut(req)?;
        if let Proto::Raw(_) = r.proto {
            return self.raw_registered(now, req, slice, mr, key);
        }
        let (peer, seq, tag, len, send) = (
            r.peer.unwrap_or(0),
            r.seq,
            r.tag.unwrap_or(0),
            r.len,
            r.send,
        );
        let reg = (mr, key.clone(), cached);
        // The side that does no RDMA hands its key over in a control
        // packet (its transfer runs from that post to the FIN); the other
        // side starts the RDMA with the peer's key.
        let next = match &mut r.proto {
            Proto::RdmaRead(s) => match s.on_registered(send, reg, xfer)? {
                None => {
                    let mut h = Header::ctrl(Kind::RtsRead, seq, tag, len as u64);
                    (h.flags, h.key) = (s.flags, Some(key));
                    Next::Ctrl(h)
                }
                Some(pk) => Next::Read(pk),
            },
            Proto::RdmaWrite(s) => match s.on_registered(send, reg, xfer)? {
                None => {
                    let mut h = Header::ctrl(Kind::Cts, seq, tag, len as u64);
                    h.key = Some(key);
                    Next::Ctrl(h)
                }
                Some(pk) => Next::Write(pk),
            },
            _ => {
                return Err(ProtoError::Invalid(format!(
                    "internal: registration for a {} using {:?}",
                    if send { "send" } else { "receive" },
                    r.route()
                )))
            }
        };
        self.out.event(EventKind::XferBegin, xfer, len, now);
        match next {
            Next::Ctrl(h) => {
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
            }
            Next::Write(pk) => {
                let w = Write {
                    req,
                    xfer,
                    offset: 0,
                    cached,
                    remote_offset: 0,
                };
                self.post_write(peer, slice, mr, pk, w)
            }
            Next::Read(pk) => self.post_read(peer, slice, mr, pk, 0, req, xfer),
        }
        Ok(())
    }

    /// A write of request `req` (transfer `xfer`, `bytes` at `offset`
    /// of the message) is visible at its target.
    pub(super) fn on_write_done(
        &mut self,
        now: u64,
        req: u64,
        xfer: u64,
        (offset, bytes): (usize, usize),
        mr: MrId,
        cached: bool,
    ) -> Result<(), ProtoError> {
        self.out.event(EventKind::XferEnd, xfer, bytes, now);
        if !cached {
            self.dereg(mr);
        }
        let r = self.req_mut(req)?;
        let (peer, seq, tag, len) = (r.peer.unwrap_or(0), r.seq, r.tag.unwrap_or(0), r.len);
        let fin = |offset: usize| {
            let mut h = Header::ctrl(Kind::FinWrite, seq, tag, len as u64);
            h.offset = offset as u64;
            h
        };
        match &mut r.proto {
            Proto::RdmaWrite(s) => {
                s.on_written()?;
                self.send_op(peer, &fin(0), None, CtxUse::Ctrl { req: None });
                self.reqs.finish(req);
            }
            Proto::Pipelined(p) => {
                p.done_bytes += bytes;
                let done = p.first + p.done_bytes == len;
                self.send_op(peer, &fin(offset), None, CtxUse::Ctrl { req: None });
                if done {
                    self.reqs.finish(req);
                }
            }
            _ => self.reqs.finish(req),
        }
        self.reqs.drop_if_retired(req);
        Ok(())
    }

    /// Look up our message `seq` to `peer` that a control message refers to.
    fn outgoing_req(&self, peer: Rank, h: &Header, want: Route) -> Result<u64, ProtoError> {
        let id = self.flight.awaited(peer, h.seq).ok_or_else(|| {
            ProtoError::bad(
                peer,
                format!(
                    "{:?} for message {} which is not in flight to that rank",
                    h.kind, h.seq
                ),
            )
        })?;
        let r = self.req(id)?;
        if r.route() != want || h.len != r.len as u64 || h.tag != r.tag.unwrap_or(0) {
            return Err(ProtoError::bad(
                peer,
                format!(
                    "{:?} (len {}, tag {}) does not fit message {} ({:?}, {} bytes, tag {})",
                    h.kind,
                    h.len,
                    h.tag,
                    h.seq,
                    r.route(),
                    r.len,
                    r.tag.unwrap_or(0)
                ),
            ));
        }
        Ok(id)
    }

    pub(super) fn on_cts(&mut self, now: u64, peer: Rank, h: Header) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Route::RdmaWrite)?;
        let r = self.req_mut(id)?;
        let (len, buf) = (r.len, r.buf);
        let waits = r.pending()
            && matches!(&r.proto, Proto::RdmaWrite(s) if s.stage() == WriteStage::WaitCts);
        if !waits {
            return Err(ProtoError::bad(
                peer,
                format!("duplicate CTS for message {}", h.seq),
            ));
        }
        let Some(key) = h.key else {
            return Err(ProtoError::bad(peer, "CTS without a key"));
        };
        if key.len < len as u64 {
            return Err(ProtoError::key(
                peer,
                format!(
                    "CTS key covers {} bytes but message {} has {}",
                    key.len, h.seq, len
                ),
            ));
        }
        if let Proto::RdmaWrite(s) = &mut r.proto {
            s.on_cts(key)?;
        }
        self.flight.answered_all(peer, h.seq);
        self.register(now, buf, true, Token::Whole { req: id })
    }

    pub(super) fn on_fin_read(
        &mut self,
        now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Route::RdmaRead)?;
        let r = self.req_mut(id)?;
        let (pending, len) = (r.pending(), r.len);
        let fin = match &mut r.proto {
            Proto::RdmaRead(s) if pending => s.on_fin().ok(),
            _ => None,
        };
        let Some((xfer, mr)) = fin else {
            return Err(ProtoError::bad(
                peer,
                format!("FIN for message {} before its RTS", h.seq),
            ));
        };
        self.flight.answered_all(peer, h.seq);
        self.end_at_fin(now, id, xfer, len, mr);
        Ok(())
    }

    pub(super) fn on_pipe_ack(
        &mut self,
        _now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Route::Pipelined)?;
        let r = self.req_mut(id)?;
        let len = r.len;
        let Proto::Pipelined(p) = &mut r.proto else {
            return Err(gone(id));
        };
        if p.acked {
            return Err(ProtoError::bad(
                peer,
                format!("duplicate acknowledgement of message {}", h.seq),
            ));
        }
        p.acked = true;
        if p.first == len {
            self.flight.answered_all(peer, h.seq);
            self.reqs.finish(id);
        }
        Ok(())
    }

    pub(super) fn on_put(&mut self, now: u64, peer: Rank, h: Header) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Route::Pipelined)?;
        let r = self.req_mut(id)?;
        let (len, buf) = (r.len, r.buf);
        let Proto::Pipelined(p) = &mut r.proto else {
            return Err(gone(id));
        };
        if !p.acked {
            return Err(ProtoError::bad(
                peer,
                format!("PUT for message {} before its acknowledgement", h.seq),
            ));
        }
        let Some(key) = h.key else {
            return Err(ProtoError::bad(peer, "PUT without a key"));
        };
        let n = key.len;
        let want = (p.first + p.requested) as u64;
        if n == 0 || h.offset != want || h.offset.saturating_add(n) > len as u64 {
            return Err(ProtoError::key(
                peer,
                format!(
                    "PUT asks for {n} bytes at offset {} of message {} ({} bytes, next fragment at {want})",
                    h.offset, h.seq, len
                ),
            ));
        }
        let (offset, n) = (h.offset as usize, n as usize);
        p.requested += n;
        let all_asked = p.first + p.requested == len;
        let slice = buf.sub(offset, n).ok_or_else(|| gone(id))?;
        if all_asked {
            self.flight.answered_all(peer, h.seq);
        }
        self.register(
            now,
            slice,
            false,
            Token::SendFrag {
                req: id,
                offset,
                key,
            },
        )
    }

    pub(super) fn on_sync_ack(
        &mut self,
        _now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Route::Eager)?;
        self.flight.answered_all(peer, h.seq);
        self.reqs.finish(id);
        Ok(())
    }
}

pub(crate) fn gone(req: u64) -> ProtoError {
    ProtoError::Invalid(format!(
        "internal: request {req} vanished while its operations were in flight"
    ))
}

/// Header flags of a send in `mode` from `space`.
pub(crate) fn flags(mode: Mode, space: Space) -> u8 {
    let mut f = 0;
    if mode == Mode::Synchronous {
        f |= FLAG_SYNC;
    }
    if mode == Mode::Ready {
        f |= FLAG_READY;
    }
    if space == Space::Internal {
        f |= FLAG_INTERNAL;
    }
    f
}

/// A write's bookkeeping: its request and transfer, the offset in the
/// message of the fragment it writes (for its FIN), whether its
/// registration is cached, and where in the target's key it lands.
pub(super) struct Write {
    pub req: u64,
    pub xfer: u64,
    pub offset: usize,
    pub cached: bool,
    pub remote_offset: u64,
}

/// What a rendezvous side posts once its buffer is registered.
enum Next {
    /// A control packet that carries its key (RTS-read or CTS).
    Ctrl(Header),
    /// A write to the peer's key.
    Write(Key),
    /// A read from the peer's key.
    Read(Key),
}
