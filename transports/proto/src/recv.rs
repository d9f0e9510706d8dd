//! The receiver's side: matching (expected and unexpected queues, MPI's
//! non-overtaking order, wildcards) and the receive half of each protocol.

use crate::engine::{CtxUse, Engine, In, Proto, Req, Token, Unexp};
use crate::send::gone;
use crate::state::{Eager, Pipelined, Raw, RdmaRead, RdmaWrite, ReadStage, WriteStage};
use crate::wire::{Fixed, Header, Kind, FLAG_INTERNAL, FLAG_READY, FLAG_SYNC};
use crate::{EventKind, Key, Op, Placement, ProtoError, Rank, RawOp, Slice, Space, Tag};

/// The matching space a message's header flags put it in.
fn space_of(flags: u8) -> Space {
    if flags & FLAG_INTERNAL != 0 {
        Space::Internal
    } else {
        Space::User
    }
}

/// What of the first packet's payload is where.
enum Data<'a> {
    /// In the packet being handled, from byte `start` of it.
    Live { bytes: &'a [u8], start: usize },
    /// Buffered when it arrived unexpected.
    Buffered(Vec<u8>),
}

/// A posted receive nothing has matched yet: all there is of it (its
/// request state is made when a message matches, and an eager message
/// that lands whole needs none). The selectors are plain words with
/// "any" bits rather than `Option`s: an `Option<u32>` spilled as two
/// 4-byte halves and read back as one 8-byte word stalled store
/// forwarding on every posted receive (`perf annotate` of `engine_cost`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Posted {
    pub id: u64,
    peer: Rank,
    tag: Tag,
    any: u8,
    space: Space,
    pub buf: Slice,
    whole: Slice,
}

const ANY_PEER: u8 = 1;
const ANY_TAG: u8 = 2;

impl Posted {
    pub fn new(
        id: u64,
        peer: Option<Rank>,
        tag: Option<Tag>,
        space: Space,
        buf: Slice,
        whole: Slice,
    ) -> Posted {
        let any =
            if peer.is_none() { ANY_PEER } else { 0 } | if tag.is_none() { ANY_TAG } else { 0 };
        Posted {
            id,
            peer: peer.unwrap_or(0),
            tag: tag.unwrap_or(0),
            any,
            space,
            buf,
            whole,
        }
    }

    fn matches(&self, peer: Rank, tag: Tag, space: Space) -> bool {
        self.space == space
            && (self.any & ANY_PEER != 0 || self.peer == peer)
            && (self.any & ANY_TAG != 0 || self.tag == tag)
    }

    /// The source selector (`None`: any rank).
    pub fn peer(&self) -> Option<Rank> {
        (self.any & ANY_PEER == 0).then_some(self.peer)
    }

    /// The tag selector (`None`: any tag).
    pub fn tag(&self) -> Option<Tag> {
        (self.any & ANY_TAG == 0).then_some(self.tag)
    }

    /// Its request state, for a receive that needs one: not matched yet.
    pub fn request(&self) -> Req {
        Req::new(false, self.peer(), self.tag(), self.buf, Proto::Unmatched)
    }

    /// Its request state as a raw one-sided receive (`op`: write or read).
    pub fn raw_request(&self, op: RawOp) -> Req {
        let raw = Raw::new(op, self.whole);
        Req::new(false, self.peer(), self.tag(), self.buf, Proto::Raw(raw))
    }
}

impl Engine {
    /// Match posted receive `p` against the unexpected messages, or queue it.
    pub(crate) fn post_recv(&mut self, now: u64, p: Posted) -> Result<(), ProtoError> {
        let pos = self
            .unexpected
            .iter()
            .position(|u| p.matches(u.peer, u.head.tag, space_of(u.head.flags)));
        match pos {
            Some(i) => {
                let u = self.unexpected.remove(i).expect("position is in range");
                self.unexpected_bytes -= u.data.len();
                let id = p.id;
                self.reqs.insert(id, p.request());
                self.accept(now, id, u.peer, &u.head, u.key, Data::Buffered(u.data))
                    .map(|_| ())
            }
            None => {
                self.posted.push_back(p);
                Ok(())
            }
        }
    }

    /// The first packet of a message (eager, raw send, RTS, pipelined RTS).
    pub(crate) fn on_request(
        &mut self,
        now: u64,
        peer: Rank,
        h: &Fixed,
        key: Option<Key>,
        bytes: &[u8],
        start: usize,
    ) -> Result<Option<Placement>, ProtoError> {
        let want = self.recv_seq[peer as usize];
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
        self.recv_seq[peer as usize] = want.wrapping_add(1);
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
            self.event(EventKind::XferEnd, xfer, n, now);
        }
        let pos = self
            .posted
            .iter()
            .position(|p| p.matches(peer, h.tag, space));
        if let Some(i) = pos {
            // The oldest posted receive matches most often: popped, not
            // removed (VecDeque::remove shifts through a wrapping copy).
            let p = if i == 0 {
                self.posted.pop_front()
            } else {
                self.posted.remove(i)
            };
            let p = p.expect("position is in range");
            let n = bytes.len() - start;
            if h.kind == Kind::Eager
                && n as u64 == h.len
                && n <= p.buf.len
                && h.flags & FLAG_SYNC == 0
                && self.incoming.is_empty()
            {
                // Whole in this packet and acknowledged to nobody: done as
                // it lands, with no request state made (as a one-packet
                // send finishes as posted).
                self.finished_as_posted(p.id, peer, h.tag, n);
                return Ok((n > 0).then(|| Placement {
                    dst: p.buf.sub(0, n).expect("n <= buf"),
                    src_start: start,
                }));
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
        self.buffer_check(peer, n)?;
        let uid = self.new_id();
        let data = bytes[start..start + n].to_vec();
        self.unexpected_bytes += n;
        if h.kind == Kind::Eager && (n as u64) < h.len {
            self.incoming.insert((peer, h.seq), In::Unexp(uid));
        }
        self.unexpected.push_back(Unexp {
            uid,
            peer,
            head: *h,
            key,
            data,
        });
        Ok(None)
    }

    fn buffer_check(&self, peer: Rank, n: usize) -> Result<(), ProtoError> {
        if self.unexpected_bytes + n > self.cfg.max_unexpected_bytes {
            return Err(ProtoError::bad(
                peer,
                format!(
                    "{} bytes of unexpected messages are buffered and {n} more arrived, over the {}-byte cap: the program sends far ahead of its receives",
                    self.unexpected_bytes, self.cfg.max_unexpected_bytes
                ),
            ));
        }
        Ok(())
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
        let r = self.reqs.get_mut(&id).ok_or_else(|| gone(id))?;
        if len > r.buf.len as u64 {
            return Err(ProtoError::Truncated {
                peer,
                tag,
                len,
                capacity: r.buf.len,
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
                let p = (n > 0).then(|| Placement {
                    dst: buf.sub(0, n).expect("n ≤ len ≤ buf"),
                    src_start: start,
                });
                (n, p)
            }
            Data::Buffered(d) => {
                let n = d.len();
                if n > 0 {
                    self.ops.push_back(Op::Deliver {
                        dst: buf.sub(0, n).expect("n ≤ len ≤ buf"),
                        data: d,
                    });
                }
                (n, None)
            }
        };
        let r = self.reqs.get_mut(&id).expect("request");
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
                    // (A hash lookup per message only when trains are in flight.)
                    if !self.incoming.is_empty() {
                        self.incoming.remove(&(peer, seq));
                    }
                    self.finish(id);
                } else {
                    self.incoming.insert((peer, seq), In::Req(id));
                }
            }
            Kind::RtsWrite | Kind::RtsRead => {
                r.proto = if kind == Kind::RtsWrite {
                    Proto::RdmaWrite(RdmaWrite::new(WriteStage::Registering, key))
                } else {
                    Proto::RdmaRead(RdmaRead::new(ReadStage::Registering, 0, key))
                };
                if kind == Kind::RtsWrite {
                    self.incoming.insert((peer, seq), In::Req(id));
                }
                let slice = buf.sub(0, len).expect("len ≤ buf");
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
                    self.finish(id);
                } else {
                    self.incoming.insert((peer, seq), In::Req(id));
                    let frag = self.cfg.frag_size;
                    let mut off = n;
                    while off < len {
                        let k = frag.min(len - off);
                        let slice = buf.sub(off, k).expect("fragment inside the message");
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
    pub(crate) fn on_eager_frag(
        &mut self,
        now: u64,
        peer: Rank,
        h: Header,
        bytes: &[u8],
        start: usize,
    ) -> Result<Option<Placement>, ProtoError> {
        let Some(&inc) = self.incoming.get(&(peer, h.seq)) else {
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
                let r = self.reqs.get_mut(&id).ok_or_else(|| gone(id))?;
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
                    self.incoming.remove(&(peer, h.seq));
                    self.finish(id);
                    self.event(EventKind::XferEnd, xfer, r_len, now);
                }
                Ok((n > 0).then_some(Placement {
                    dst,
                    src_start: start,
                }))
            }
            In::Unexp(uid) => {
                self.buffer_check(peer, n)?;
                let u = self
                    .unexpected
                    .iter_mut()
                    .find(|u| u.uid == uid)
                    .ok_or_else(|| gone(uid))?;
                if h.len != u.head.len || h.offset != u.data.len() as u64 {
                    return Err(ProtoError::bad(
                        peer,
                        format!(
                            "eager packet (offset {}, len {}) does not continue message {} ({} of {} bytes so far)",
                            h.offset, h.len, h.seq, u.data.len(), u.head.len
                        ),
                    ));
                }
                u.data.extend_from_slice(&bytes[start..start + n]);
                let total = u.head.len as usize;
                let complete = u.data.len() == total;
                if complete {
                    self.incoming.remove(&(peer, h.seq));
                }
                self.unexpected_bytes += n;
                if complete {
                    self.event(EventKind::XferEnd, xfer, total, now);
                }
                Ok(None)
            }
        }
    }

    /// FIN after the sender's write (rdma-write, or one pipelined fragment).
    pub(crate) fn on_fin_write(
        &mut self,
        now: u64,
        peer: Rank,
        h: Header,
    ) -> Result<(), ProtoError> {
        let id = match self.incoming.get(&(peer, h.seq)) {
            Some(In::Req(id)) => *id,
            _ => {
                return Err(ProtoError::bad(
                    peer,
                    format!("FIN for message {} which is not awaiting one", h.seq),
                ))
            }
        };
        let r = self.reqs.get_mut(&id).ok_or_else(|| gone(id))?;
        if h.len != r.len as u64 {
            return Err(ProtoError::bad(
                peer,
                format!("FIN says {} bytes, message {} has {}", h.len, h.seq, r.len),
            ));
        }
        let (pending, len) = (r.pending(), r.len);
        match &mut r.proto {
            Proto::RdmaWrite(s) if pending && s.stage == WriteStage::WaitFin => {
                let (xfer, mr) = (s.xfer, s.mr.take());
                self.incoming.remove(&(peer, h.seq));
                self.end_at_fin(now, id, xfer, len, mr);
            }
            Proto::Pipelined(_) if pending => {
                let Some((xfer, mr, n)) = self.frags.remove(&(id, h.offset as usize)) else {
                    return Err(ProtoError::bad(
                        peer,
                        format!("FIN for fragment at offset {} of message {} that was never PUT or is already done", h.offset, h.seq),
                    ));
                };
                self.event(EventKind::XferEnd, xfer, n, now);
                self.dereg(mr);
                let r = self.reqs.get_mut(&id).expect("request");
                let Proto::Pipelined(p) = &mut r.proto else {
                    unreachable!("matched above");
                };
                p.done_bytes += n;
                if p.first + p.done_bytes == len {
                    self.incoming.remove(&(peer, h.seq));
                    self.finish(id);
                }
            }
            _ => {
                return Err(ProtoError::bad(
                    peer,
                    format!(
                        "FIN for message {} in state {} of {:?}: it came before the CTS",
                        h.seq,
                        r.stage_name(),
                        r.wire()
                    ),
                ))
            }
        }
        Ok(())
    }

    /// The receiver's read (rdma-read or raw read) landed.
    pub(crate) fn on_read_done(&mut self, now: u64, req: u64, xfer: u64) -> Result<(), ProtoError> {
        let r = self.reqs.get_mut(&req).ok_or_else(|| gone(req))?;
        let (peer, seq, tag, len) = (r.peer.unwrap_or(0), r.seq, r.tag.unwrap_or(0), r.len);
        // Raw reads hold no registration here (their buffers stay registered).
        let (rdma_read, mr) = match &mut r.proto {
            Proto::RdmaRead(s) => (true, s.mr.take()),
            _ => (false, None),
        };
        self.event(EventKind::XferEnd, xfer, len, now);
        if rdma_read {
            if let Some((mr, _, false)) = mr {
                self.dereg(mr);
            }
            let h = Header::ctrl(Kind::FinRead, seq, tag, len as u64);
            self.send_op(peer, &h, None, CtxUse::Ctrl { req: None });
        }
        self.finish(req);
        self.drop_if_retired(req);
        Ok(())
    }
}
