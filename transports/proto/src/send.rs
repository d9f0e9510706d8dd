//! The sender's side of every protocol, and the registration dispatch.

use crate::engine::{CtxUse, Engine, Proto, Token, Wire, QUIET_CTX};
use crate::state::{ReadStage, WriteStage};
use crate::wire::{self, Header, Kind, FLAG_INTERNAL, FLAG_READY, FLAG_SYNC};
use crate::{
    Direct, EventKind, Key, Mode, MrId, OneSided, Op, ProtoError, Rank, ReqId, Slice, Space,
    Status, Tag,
};

impl Engine {
    /// An eager send that finishes as it is posted (no acknowledgement to
    /// wait for): its packets go out and its status waits in `finished`
    /// for [`Engine::take`] — no request state, so no request-table slot
    /// of a few hundred bytes written and read back per message.
    pub(crate) fn send_now(
        &mut self,
        now: u64,
        id: u64,
        src: Slice,
        (peer, tag, seq): (Rank, Tag, u32),
        mode: Mode,
        space: Space,
    ) {
        self.eager_packets(now, peer, tag, seq, src, flags(mode, space));
        self.finished_as_posted(id, peer, tag, src.len);
    }

    /// Request `id` (a send to, or a receive from, `peer`; `tag`, `len`
    /// bytes) finished as it was posted, with no request state: its status
    /// waits for [`Engine::take`], the latest in plain fields.
    pub(crate) fn finished_as_posted(&mut self, id: u64, peer: Rank, tag: Tag, len: usize) {
        if self.last_id != 0 {
            self.finished.insert(self.last_id, self.last_status);
        }
        self.last_id = id;
        self.last_status = Status {
            source: peer,
            tag,
            len,
        };
    }

    /// [`Engine::isend_in`] for a message that leaves as one eager packet
    /// and waits for nothing back (not synchronous, one packet, nothing
    /// queued ahead of it): its header is encoded into `header` and the
    /// packet handed back to post at once, not queued as an [`Op::Send`]
    /// (the queue's moves were a fifth of the engine's cost of a send).
    /// The request is done as posted. `Ok(None)`, with nothing changed,
    /// for any other message (bad ones included): use `isend_in`. The
    /// driver reports the packet's completion with `ctx` as for any other.
    #[allow(clippy::too_many_arguments)]
    pub fn isend_direct(
        &mut self,
        now: u64,
        src: Slice,
        whole: Slice,
        peer: Rank,
        tag: Tag,
        mode: Mode,
        space: Space,
        header: &mut Vec<u8>,
    ) -> Result<Option<Direct>, ProtoError> {
        if mode == Mode::Synchronous
            || !self.ops.is_empty()
            || src.len > self.max_payload()
            || !whole.contains(&src)
            || peer >= self.cfg.size
            || self.choose(src.len, mode, space) != Wire::Eager
        {
            return Ok(None);
        }
        let id = self.new_id();
        let seq = self.send_seq[peer as usize];
        self.send_seq[peer as usize] = seq.wrapping_add(1);
        let fl = flags(mode, space);
        let xfer = if fl & FLAG_INTERNAL != 0 {
            0
        } else {
            self.xfer_id()
        };
        self.event(EventKind::XferBegin, xfer, src.len, now);
        let payload = (src.len > 0).then_some(src);
        let u = CtxUse::Packet {
            xfer,
            bytes: src.len,
            req: None,
        };
        let ctx = self.packet_ctx(fl, payload, u);
        // One packet: its length fits the packet's u32 payload length.
        wire::encode_eager_into(header, seq, tag, src.len as u32, fl);
        self.finished_as_posted(id, peer, tag, src.len);
        Ok(Some(Direct {
            req: ReqId(id),
            peer,
            payload,
            ctx,
        }))
    }

    /// The completion context of a packet standing for `u` (with header
    /// `flags`, carrying `payload`), its table entry where its completion
    /// does something, and the counts.
    pub(crate) fn packet_ctx(&mut self, flags: u8, payload: Option<Slice>, u: CtxUse) -> u64 {
        // Nothing waits on this completion and it records nothing: the
        // transport may deliver it late (see [`QUIET_CTX`]).
        let quiet = match &u {
            CtxUse::Ctrl { req: None } => true,
            CtxUse::Packet {
                xfer, req: None, ..
            } => *xfer == 0 || !self.cfg.instrument,
            _ => false,
        };
        let ctx = self.new_id() | if quiet { QUIET_CTX } else { 0 };
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
            self.ctxs.insert(ctx, u);
        }
        // The communicator's own traffic (barrier) is not the protocol's work.
        if flags & FLAG_INTERNAL == 0 {
            self.counts.sends += 1;
            self.counts.bytes += payload.map_or(0, |p| p.len as u64);
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
        self.event(EventKind::XferBegin, xfer, len, now);
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
    pub(crate) fn start_send(&mut self, now: u64, id: u64, flags: u8) -> Result<(), ProtoError> {
        let r = &self.reqs[&id];
        let (peer, tag, seq, len, buf, wire) = (
            r.peer.unwrap_or(0),
            r.tag.unwrap_or(0),
            r.seq,
            r.len,
            r.buf,
            r.wire(),
        );
        let max = self.max_payload();
        match wire {
            Wire::Eager => {
                self.eager_packets(now, peer, tag, seq, buf, flags);
                if flags & FLAG_SYNC != 0 {
                    // Waits for the receiver's ack.
                    self.outgoing.insert((peer, seq), id);
                } else {
                    self.finish(id);
                }
            }
            Wire::RawSend => {
                if len > max {
                    return Err(ProtoError::Invalid(format!(
                        "raw send of {len} bytes to rank {peer} exceeds one bounce buffer ({max} bytes): use --proto eager (a packet train) for larger messages"
                    )));
                }
                let mut h = Header::ctrl(Kind::RawSend, seq, tag, len as u64);
                h.payload_len = len as u32;
                h.flags = flags & FLAG_INTERNAL;
                let xfer = self.xfer_id();
                self.event(EventKind::XferBegin, xfer, len, now);
                let u = CtxUse::Packet {
                    xfer,
                    bytes: len,
                    req: Some(id),
                };
                self.send_op(peer, &h, Some(buf), u);
            }
            Wire::RdmaWrite => {
                let mut h = Header::ctrl(Kind::RtsWrite, seq, tag, len as u64);
                h.flags = flags;
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                // Its state starts at WaitCts.
                self.outgoing.insert((peer, seq), id);
            }
            Wire::RdmaRead => {
                // Its state starts at Registering.
                self.outgoing.insert((peer, seq), id);
                self.register(now, buf, true, Token::Whole { req: id })?;
            }
            Wire::Pipelined => {
                let first = max.min(len);
                let mut h = Header::ctrl(Kind::PipeRts, seq, tag, len as u64);
                h.payload_len = first as u32;
                h.flags = flags;
                let xfer = self.xfer_id();
                self.event(EventKind::XferBegin, xfer, first, now);
                let u = CtxUse::Packet {
                    xfer,
                    bytes: first,
                    req: None,
                };
                self.send_op(peer, &h, buf.sub(0, first), u);
                if let Proto::Pipelined(p) = &mut self.reqs.get_mut(&id).expect("request").proto {
                    p.first = first;
                }
                self.outgoing.insert((peer, seq), id);
            }
            Wire::RawWrite | Wire::RawRead => self.raw_send(now, id)?,
        }
        Ok(())
    }

    /// A registration asked for by `t` is ready.
    pub(crate) fn registered(
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
                let peer = self.req_peer(req)?;
                let xfer = self.xfer_id();
                self.event(EventKind::XferBegin, xfer, slice.len, now);
                self.post_write(peer, slice, mr, peer_key, req, xfer, offset, cached);
                Ok(())
            }
            Token::RecvFrag { req, offset } => {
                let r = self.reqs.get(&req).ok_or_else(|| gone(req))?;
                let (peer, seq, tag, len) = (r.peer.unwrap_or(0), r.seq, r.tag.unwrap_or(0), r.len);
                let mut h = Header::ctrl(Kind::Put, seq, tag, len as u64);
                h.offset = offset as u64;
                h.key = Some(key);
                let xfer = self.xfer_id();
                self.event(EventKind::XferBegin, xfer, slice.len, now);
                self.frags.insert((req, offset), (xfer, mr, slice.len));
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                Ok(())
            }
        }
    }

    fn req_peer(&self, req: u64) -> Result<Rank, ProtoError> {
        self.reqs
            .get(&req)
            .and_then(|r| r.peer)
            .ok_or_else(|| gone(req))
    }

    #[allow(clippy::too_many_arguments)]
    fn post_write(
        &mut self,
        peer: Rank,
        local: Slice,
        mr: MrId,
        key: Key,
        req: u64,
        xfer: u64,
        offset: usize,
        cached: bool,
    ) {
        let ctx = self.new_id();
        self.ctxs.insert(
            ctx,
            CtxUse::Write {
                req,
                xfer,
                offset,
                bytes: local.len,
                mr,
                cached,
            },
        );
        let op = OneSided {
            peer,
            local,
            mr,
            key,
            remote_offset: 0,
            ctx,
        };
        self.push_one_sided(req, true, op);
    }

    /// Queue one-sided `op` (a write, else a read) for request `req`:
    /// counted, and `req` known to have RDMA in flight.
    pub(crate) fn push_one_sided(&mut self, req: u64, write: bool, op: OneSided) {
        self.track_rdma(req);
        self.counts.bytes += op.local.len as u64;
        if write {
            self.counts.writes += 1;
            self.ops.push_back(Op::Write(op));
        } else {
            self.counts.reads += 1;
            self.ops.push_back(Op::Read(op));
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post_read(
        &mut self,
        peer: Rank,
        local: Slice,
        mr: MrId,
        key: Key,
        remote_offset: u64,
        req: u64,
        xfer: u64,
    ) {
        let ctx = self.new_id();
        self.ctxs.insert(ctx, CtxUse::Read { req, xfer });
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
        let r = self.reqs.get_mut(&req).ok_or_else(|| gone(req))?;
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
        let reg = Some((mr, key.clone(), cached));
        // The side that does no RDMA hands its key over in a control
        // packet (its transfer runs from that post to the FIN); the other
        // side starts the RDMA.
        let next = match (send, &mut r.proto) {
            (true, Proto::RdmaRead(s)) => {
                (s.mr, s.xfer, s.stage) = (reg, xfer, ReadStage::WaitFin);
                let mut h = Header::ctrl(Kind::RtsRead, seq, tag, len as u64);
                (h.flags, h.key) = (s.flags, Some(key));
                Next::Ctrl(h)
            }
            (true, Proto::RdmaWrite(s)) => {
                (s.mr, s.xfer, s.stage) = (reg, xfer, WriteStage::Writing);
                Next::Write(s.peer_key.take().ok_or_else(|| gone(req))?)
            }
            (false, Proto::RdmaWrite(s)) => {
                (s.mr, s.xfer, s.stage) = (reg, xfer, WriteStage::WaitFin);
                let mut h = Header::ctrl(Kind::Cts, seq, tag, len as u64);
                h.key = Some(key);
                Next::Ctrl(h)
            }
            (false, Proto::RdmaRead(s)) => {
                (s.mr, s.xfer, s.stage) = (reg, xfer, ReadStage::Reading);
                Next::Read(s.peer_key.take().ok_or_else(|| gone(req))?)
            }
            (s, _) => {
                return Err(ProtoError::Invalid(format!(
                    "internal: registration for a {} using {:?}",
                    if s { "send" } else { "receive" },
                    r.wire()
                )))
            }
        };
        self.event(EventKind::XferBegin, xfer, len, now);
        match next {
            Next::Ctrl(h) => {
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
            }
            Next::Write(pk) => self.post_write(peer, slice, mr, pk, req, xfer, 0, cached),
            Next::Read(pk) => self.post_read(peer, slice, mr, pk, 0, req, xfer),
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_write_done(
        &mut self,
        now: u64,
        req: u64,
        xfer: u64,
        offset: usize,
        bytes: usize,
        mr: MrId,
        cached: bool,
    ) -> Result<(), ProtoError> {
        self.event(EventKind::XferEnd, xfer, bytes, now);
        if !cached {
            self.dereg(mr);
        }
        let r = self.reqs.get_mut(&req).ok_or_else(|| gone(req))?;
        let (peer, seq, tag, len) = (r.peer.unwrap_or(0), r.seq, r.tag.unwrap_or(0), r.len);
        match &mut r.proto {
            Proto::RdmaWrite(s) => {
                s.mr = None;
                let h = Header::ctrl(Kind::FinWrite, seq, tag, len as u64);
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                self.finish(req);
            }
            Proto::Pipelined(p) => {
                p.done_bytes += bytes;
                let done = p.first + p.done_bytes == len;
                let mut h = Header::ctrl(Kind::FinWrite, seq, tag, len as u64);
                h.offset = offset as u64;
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                if done {
                    self.finish(req);
                }
            }
            _ => self.finish(req),
        }
        self.drop_if_retired(req);
        Ok(())
    }

    /// Look up our message `seq` to `peer` that a control message refers to.
    fn outgoing_req(&self, peer: Rank, h: &Header, want: Wire) -> Result<u64, ProtoError> {
        let id = *self.outgoing.get(&(peer, h.seq)).ok_or_else(|| {
            ProtoError::bad(
                peer,
                format!(
                    "{:?} for message {} which is not in flight to that rank",
                    h.kind, h.seq
                ),
            )
        })?;
        let r = self.reqs.get(&id).ok_or_else(|| gone(id))?;
        if r.wire() != want || h.len != r.len as u64 || h.tag != r.tag.unwrap_or(0) {
            return Err(ProtoError::bad(
                peer,
                format!(
                    "{:?} (len {}, tag {}) does not fit message {} ({:?}, {} bytes, tag {})",
                    h.kind,
                    h.len,
                    h.tag,
                    h.seq,
                    r.wire(),
                    r.len,
                    r.tag.unwrap_or(0)
                ),
            ));
        }
        Ok(id)
    }

    pub(crate) fn on_cts(&mut self, now: u64, peer: Rank, h: Header) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Wire::RdmaWrite)?;
        let r = self.reqs.get_mut(&id).expect("outgoing request");
        let pending = r.pending();
        let Proto::RdmaWrite(s) = &mut r.proto else {
            unreachable!("outgoing_req checked the protocol");
        };
        if !pending || s.stage != WriteStage::WaitCts {
            return Err(ProtoError::bad(
                peer,
                format!("duplicate CTS for message {}", h.seq),
            ));
        }
        let key = h.key.expect("decode checked the key");
        if key.len < r.len as u64 {
            return Err(ProtoError::key(
                peer,
                format!(
                    "CTS key covers {} bytes but message {} has {}",
                    key.len, h.seq, r.len
                ),
            ));
        }
        (s.peer_key, s.stage) = (Some(key), WriteStage::Registering);
        let buf = r.buf;
        self.outgoing.remove(&(peer, h.seq));
        self.register(now, buf, true, Token::Whole { req: id })
    }

    pub(crate) fn on_fin_read(
        &mut self,
        now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Wire::RdmaRead)?;
        let r = self.reqs.get_mut(&id).expect("outgoing request");
        let (pending, len) = (r.pending(), r.len);
        let Proto::RdmaRead(s) = &mut r.proto else {
            unreachable!("outgoing_req checked the protocol");
        };
        if !pending || s.stage != ReadStage::WaitFin {
            return Err(ProtoError::bad(
                peer,
                format!("FIN for message {} before its RTS", h.seq),
            ));
        }
        let (xfer, mr) = (s.xfer, s.mr.take());
        self.outgoing.remove(&(peer, h.seq));
        self.end_at_fin(now, id, xfer, len, mr);
        Ok(())
    }

    pub(crate) fn on_pipe_ack(
        &mut self,
        _now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Wire::Pipelined)?;
        let r = self.reqs.get_mut(&id).expect("outgoing request");
        let len = r.len;
        let Proto::Pipelined(p) = &mut r.proto else {
            unreachable!("outgoing_req checked the protocol");
        };
        if p.acked {
            return Err(ProtoError::bad(
                peer,
                format!("duplicate acknowledgement of message {}", h.seq),
            ));
        }
        p.acked = true;
        if p.first == len {
            self.outgoing.remove(&(peer, h.seq));
            self.finish(id);
        }
        Ok(())
    }

    pub(crate) fn on_put(&mut self, now: u64, peer: Rank, h: Header) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Wire::Pipelined)?;
        let r = self.reqs.get_mut(&id).expect("outgoing request");
        let (len, buf) = (r.len, r.buf);
        let Proto::Pipelined(p) = &mut r.proto else {
            unreachable!("outgoing_req checked the protocol");
        };
        if !p.acked {
            return Err(ProtoError::bad(
                peer,
                format!("PUT for message {} before its acknowledgement", h.seq),
            ));
        }
        let key = h.key.expect("decode checked the key");
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
        let slice = buf.sub(offset, n).ok_or_else(|| gone(id))?;
        if p.first + p.requested == len {
            self.outgoing.remove(&(peer, h.seq));
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

    pub(crate) fn on_sync_ack(
        &mut self,
        _now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = self.outgoing_req(peer, &h, Wire::Eager)?;
        self.outgoing.remove(&(peer, h.seq));
        self.finish(id);
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

/// What a rendezvous side posts once its buffer is registered.
enum Next {
    /// A control packet that carries its key (RTS-read or CTS).
    Ctrl(Header),
    /// A write to the peer's key.
    Write(Key),
    /// A read from the peer's key.
    Read(Key),
}
