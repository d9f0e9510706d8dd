//! The receiver's side: a message's first packet matched against the
//! posted receives or kept as unexpected (the queues and MPI's order are
//! `matching.rs`'s), and the receive half of each protocol.

use super::send::gone;
use super::Engine;
use crate::flight::{CtxUse, Token};
use crate::matching::{space_of, In, Unexp};
use crate::state::{Eager, Pipelined, Proto, RdmaRead, RdmaWrite, WriteStage};
use crate::wire::{Fixed, Header, Kind, FLAG_READY, FLAG_SYNC};
use crate::{EventKind, Key, Op, Placement, ProtoError, Rank, Space};

/// What of the first packet's payload is where.
enum Data<'a> {
    /// In the packet being handled, from byte `start` of it.
    Live { bytes: &'a [u8], start: usize },
    /// Buffered when it arrived unexpected.
    Buffered(Vec<u8>),
}

impl Engine {
    /// Receive `id` (its state made) matched unexpected message `u`.
    pub(super) fn accept_unexpected(
        &mut self,
        now: u64,
        id: u64,
        u: Unexp,
    ) -> Result<(), ProtoError> {
        self.accept(now, id, u.peer, &u.head, u.key, Data::Buffered(u.data))
            .map(|_| ())
    }

    /// The first packet of a message (eager, raw send, RTS, pipelined RTS).
    pub(super) fn on_request(
        &mut self,
        now: u64,
        peer: Rank,
        h: &Fixed,
        key: Option<Key>,
        bytes: &[u8],
        start: usize,
    ) -> Result<Option<Placement>, ProtoError> {
        let want = self.peers.of(peer).recv;
        if h.seq != want {
            return Err(ProtoError::bad(
                peer,
                format!(
                    "{:?} carries sequence {} but {want} was expected: a message was lost, duplicated or reordered",
                    h.kind, h.seq
                ),
            ));
        }
        if h.offset != 0 {
            return Err(ProtoError::bad(
                peer,
                format!("{:?} at offset {}, not 0", h.kind, h.offset),
            ));
        }
        if h.kind == Kind::RawSend && h.payload_len as u64 != h.len {
            return Err(ProtoError::bad(peer, "raw send split over packets"));
        }
        if let (Kind::RtsRead, Some(k)) = (h.kind, &key) {
            if k.len < h.len {
                return Err(ProtoError::key(
                    peer,
                    format!(
                        "RTS key covers {} bytes but the message has {}",
                        k.len, h.len
                    ),
                ));
            }
        }
        self.peers.of(peer).recv = want.wrapping_add(1);
        let space = space_of(h.flags);
        let n = h.payload_len as usize;
        // Arrival of eager data: the receiver's only XFER event for it —
        // for a train of packets, at its last packet (see `eager_packets`).
        let whole = h.kind != Kind::Eager || n as u64 == h.len;
        if space == Space::User
            && whole
            && matches!(h.kind, Kind::Eager | Kind::RawSend | Kind::PipeRts)
        {
            let xfer = self.xfer_id();
            self.out.event(EventKind::XferEnd, xfer, n, now);
        }
        if let Some(p) = self.matching.take_posted(peer, h.tag, space) {
            let n = bytes.len() - start;
            if h.kind == Kind::Eager && n as u64 == h.len && h.flags & FLAG_SYNC == 0 {
                if let Some(dst) = p.buf.sub(0, n) {
                    // Whole in this packet and acknowledged to nobody: done
                    // as it lands, with no request state made (as a
                    // one-packet send finishes as posted).
                    let st = crate::Status {
                        source: peer,
                        tag: h.tag,
                        len: n,
                    };
                    self.reqs.done_at_post(p.id, st);
                    return Ok((n > 0).then_some(Placement {
                        dst,
                        src_start: start,
                    }));
                }
            }
            let id = p.id;
            self.reqs.insert(id, p.request());
            return self.accept(now, id, peer, h, key, Data::Live { bytes, start });
        }
        if h.flags & FLAG_READY != 0 {
            return Err(ProtoError::NotReady {
                peer,
                tag: h.tag,
                len: h.len,
            });
        }
        self.matching.room_for(peer, n)?;
        let uid = self.reqs.new_id();
        if h.kind == Kind::Eager && (n as u64) < h.len {
            self.matching.expect_more(peer, h.seq, In::Unexp(uid));
        }
        self.matching.keep_unexpected(Unexp {
            uid,
            peer,
            head: *h,
            key,
            data: bytes[start..start + n].to_vec(),
        });
        Ok(None)
    }

    /// Receive `id` matched message `seq` from `peer`; start its protocol.
    fn accept(
        &mut self,
        now: u64,
        id: u64,
        peer: Rank,
        h: &Fixed,
        key: Option<Key>,
        data: Data<'_>,
    ) -> Result<Option<Placement>, ProtoError> {
        let (seq, tag, len, kind, flags) = (h.seq, h.tag, h.len, h.kind, h.flags);
        let r = self.req_mut(id)?;
        if len > r.buf.len as u64 {
            let capacity = r.buf.len;
            // The rest of a train has nowhere to go: its packets are
            // dropped as they come, the error said once, here.
            let arrived = match &data {
                Data::Live { bytes, start } => (bytes.len() - start) as u64,
                Data::Buffered(d) => d.len() as u64,
            };
            if matches!(kind, Kind::Eager) && arrived < len {
                self.matching.expect_more(peer, seq, In::Dropped);
            }
            return Err(ProtoError::Truncated {
                peer,
                tag,
                len,
                capacity,
            });
        }
        let len = len as usize;
        r.peer = Some(peer);
        r.tag = Some(tag);
        r.seq = seq;
        r.len = len;
        let buf = r.buf;
        let (n, placement) = match data {
            Data::Live { bytes, start } => {
                let n = bytes.len() - start;
                let dst = buf.sub(0, n).ok_or_else(|| gone(id))?;
                (
                    n,
                    (n > 0).then_some(Placement {
                        dst,
                        src_start: start,
                    }),
                )
            }
            Data::Buffered(d) => {
                let n = d.len();
                if n > 0 {
                    let dst = buf.sub(0, n).ok_or_else(|| gone(id))?;
                    self.out.push(Op::Deliver { dst, data: d });
                }
                (n, None)
            }
        };
        let r = self.req_mut(id)?;
        match kind {
            Kind::Eager | Kind::RawSend => {
                r.proto = if kind == Kind::RawSend {
                    Proto::RawSend
                } else {
                    Proto::Eager(Eager { arrived: n })
                };
                if flags & FLAG_SYNC != 0 {
                    let h = Header::ctrl(Kind::SyncAck, seq, tag, len as u64);
                    self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                }
                if n == len {
                    self.matching.no_more(peer, seq);
                    self.reqs.finish(id);
                } else {
                    self.matching.expect_more(peer, seq, In::Req(id));
                }
            }
            Kind::RtsWrite | Kind::RtsRead => {
                r.proto = if kind == Kind::RtsWrite {
                    Proto::RdmaWrite(RdmaWrite::receiver())
                } else {
                    Proto::RdmaRead(RdmaRead::receiver(key))
                };
                if kind == Kind::RtsWrite {
                    self.matching.expect_more(peer, seq, In::Req(id));
                }
                let slice = buf.sub(0, len).ok_or_else(|| gone(id))?;
                self.register(now, slice, true, Token::Whole { req: id })?;
            }
            Kind::PipeRts => {
                r.proto = Proto::Pipelined(Pipelined {
                    first: n,
                    ..Pipelined::default()
                });
                let h = Header::ctrl(Kind::PipeAck, seq, tag, len as u64);
                self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
                if n == len {
                    self.reqs.finish(id);
                } else {
                    self.matching.expect_more(peer, seq, In::Req(id));
                    let frag = self.cfg.plan.frag_size();
                    let mut off = n;
                    while off < len {
                        let k = frag.min(len - off);
                        let slice = buf.sub(off, k).ok_or_else(|| gone(id))?;
                        self.register(
                            now,
                            slice,
                            false,
                            Token::RecvFrag {
                                req: id,
                                offset: off,
                            },
                        )?;
                        off += k;
                    }
                }
            }
            other => {
                return Err(ProtoError::Invalid(format!(
                    "internal: {other:?} is not a request"
                )));
            }
        }
        Ok(placement)
    }

    /// A later packet of an eager train.
    pub(super) fn on_eager_frag(
        &mut self,
        now: u64,
        peer: Rank,
        h: Header,
        bytes: &[u8],
        start: usize,
    ) -> Result<Option<Placement>, ProtoError> {
        let Some(inc) = self.matching.more_of(peer, h.seq) else {
            return Err(ProtoError::bad(
                peer,
                format!(
                    "eager packet at offset {} for message {} which is not arriving",
                    h.offset, h.seq
                ),
            ));
        };
        let n = h.payload_len as usize;
        let xfer = self.xfer_id();
        match inc {
            In::Req(id) => {
                let r = self.req_mut(id)?;
                let (r_len, buf, progress) = (r.len, r.buf, r.proto.progress());
                let e = match &mut r.proto {
                    Proto::Eager(e) if h.len == r_len as u64 && h.offset == e.arrived as u64 => e,
                    _ => {
                        return Err(ProtoError::bad(
                            peer,
                            format!(
                                "eager packet (offset {}, len {}) does not continue message {} ({} of {} bytes so far)",
                                h.offset, h.len, h.seq, progress, r_len
                            ),
                        ))
                    }
                };
                let dst = buf
                    .sub(e.arrived, n)
                    .ok_or_else(|| ProtoError::bad(peer, "eager packet beyond the receive"))?;
                e.arrived += n;
                if e.arrived == r_len {
                    self.matching.no_more(peer, h.seq);
                    self.reqs.finish(id);
                    self.out.event(EventKind::XferEnd, xfer, r_len, now);
                }
                Ok((n > 0).then_some(Placement {
                    dst,
                    src_start: start,
                }))
            }
            In::Dropped => {
                if h.offset + n as u64 >= h.len {
                    self.matching.no_more(peer, h.seq);
                }
                Ok(None)
            }
            In::Unexp(uid) => {
                let part = &bytes[start..start + n];
                let whole =
                    self.matching
                        .grow_unexpected(peer, uid, h.seq, (h.offset, h.len), part)?;
                if whole {
                    self.matching.no_more(peer, h.seq);
                    self.out
                        .event(EventKind::XferEnd, xfer, h.len as usize, now);
                }
                Ok(None)
            }
        }
    }

    /// FIN after the sender's write (rdma-write, or one pipelined fragment).
    pub(super) fn on_fin_write(
        &mut self,
        now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = match self.matching.more_of(peer, h.seq) {
            Some(In::Req(id)) => id,
            _ => {
                return Err(ProtoError::bad(
                    peer,
                    format!("FIN for message {} which is not awaiting one", h.seq),
                ))
            }
        };
        let r = self.req_mut(id)?;
        if h.len != r.len as u64 {
            return Err(ProtoError::bad(
                peer,
                format!("FIN says {} bytes, message {} has {}", h.len, h.seq, r.len),
            ));
        }
        let (pending, len) = (r.pending(), r.len);
        match &mut r.proto {
            Proto::RdmaWrite(s) if pending && s.stage() == WriteStage::WaitFin => {
                let (xfer, mr) = s.on_fin()?;
                self.matching.no_more(peer, h.seq);
                self.end_at_fin(now, id, xfer, len, mr);
            }
            Proto::Pipelined(_) if pending => {
                let Some((xfer, mr, n)) = self.flight.frag_done(id, h.offset as usize) else {
                    return Err(ProtoError::bad(
                        peer,
                        format!("FIN for fragment at offset {} of message {} that was never PUT or is already done", h.offset, h.seq),
                    ));
                };
                self.out.event(EventKind::XferEnd, xfer, n, now);
                self.dereg(mr);
                let Proto::Pipelined(p) = &mut self.req_mut(id)?.proto else {
                    return Err(gone(id));
                };
                p.done_bytes += n;
                if p.first + p.done_bytes == len {
                    self.matching.no_more(peer, h.seq);
                    self.reqs.finish(id);
                }
            }
            _ => {
                return Err(ProtoError::bad(
                    peer,
                    format!(
                        "FIN for message {} in state {} of {:?}: it came before the CTS",
                        h.seq,
                        r.stage_name(),
                        r.route()
                    ),
                ))
            }
        }
        Ok(())
    }

    /// The receiver's read (rdma-read or raw read) landed.
    pub(super) fn on_read_done(&mut self, now: u64, req: u64, xfer: u64) -> Result<(), ProtoError> {
        let r = self.req_mut(req)?;
        let (peer, seq, tag, len) = (r.peer.unwrap_or(0), r.seq, r.tag.unwrap_or(0), r.len);
        // Raw reads hold no registration here (their buffers stay registered).
        let rdma_read = match &mut r.proto {
            Proto::RdmaRead(s) => Some(s.on_read()?),
            _ => None,
        };
        self.out.event(EventKind::XferEnd, xfer, len, now);
        if let Some(mr) = rdma_read {
            if let Some((mr, _, false)) = mr {
                self.dereg(mr);
            }
            let h = Header::ctrl(Kind::FinRead, seq, tag, len as u64);
            self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
        }
        self.reqs.finish(req);
        self.reqs.drop_if_retired(req);
        Ok(())
    }
}
