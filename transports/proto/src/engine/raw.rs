//! `--proto raw` with `--op write|read`: one bare one-sided operation per
//! message (see [`crate::RawOp`] for how each side detects completion).
//! Raw buffers stay registered (their keys are announced once and cached
//! by the peer) until [`Engine::flush_cache`], whatever `--reg-cache` says.

use super::send::{gone, Write};
use super::Engine;
use crate::flight::{CtxUse, Token};
use crate::hash::HashMap;
use crate::state::{Proto, Raw, RawStage, Req};
use crate::wire::{Header, Kind};
use crate::{
    EventKind, Key, MrId, Op, ProtoError, Protocol, Rank, RawOp, ReqId, Slice, Tag, Watch,
};

#[derive(Debug, Default)]
pub(crate) struct RawState {
    /// Keys peers announced, by (peer, tag).
    peer_keys: HashMap<(Rank, Tag), Key>,
    /// Buffers we announced, by (peer, tag).
    announced: HashMap<(Rank, Tag), Slice>,
    /// Our raw registrations, never dropped before `flush_cache`.
    regs: HashMap<Slice, (MrId, Key)>,
    send_marker: HashMap<(Rank, Tag), u8>,
    recv_marker: HashMap<(Rank, Tag), u8>,
    /// Requests waiting for a peer's key, in posting order.
    parked: Vec<u64>,
    /// Raw-write receives waiting for their marker, in posting order.
    watching: Vec<u64>,
}

/// The next marker: 1..=255, cycling, never 0 (fresh memory is zero).
fn next_marker(m: &mut HashMap<(Rank, Tag), u8>, k: (Rank, Tag)) -> u8 {
    let v = m.entry(k).or_insert(0);
    *v = if *v == 255 { 1 } else { *v + 1 };
    *v
}

impl Engine {
    /// A raw one-sided receive `id` of `op`, as `i` asks.
    pub(super) fn raw_receive(
        &mut self,
        now: u64,
        id: u64,
        i: super::Incoming,
        op: RawOp,
    ) -> Result<(), ProtoError> {
        let raw = Proto::Raw(Raw::new(op, i.whole));
        self.reqs
            .insert(id, Req::new(false, i.src, i.tag, i.dst, raw));
        self.raw_recv(now, id)
    }

    /// Peer, tag, whole buffer and direction of a raw request.
    fn raw_ends(&self, id: u64) -> Result<(Rank, Tag, Slice, bool), ProtoError> {
        let r = self.req(id)?;
        let raw = r.raw().ok_or_else(|| gone(id))?;
        match (r.peer, r.tag) {
            (Some(p), Some(t)) => Ok((p, t, raw.whole, r.send)),
            _ => Err(ProtoError::Invalid(format!(
                "--proto raw --op {} needs a specific source rank and tag: a one-sided operation carries no envelope to match",
                op_name(raw.op)
            ))),
        }
    }

    /// The raw state of request `id`, which is a raw one.
    fn raw_state(&mut self, id: u64) -> Result<&mut Raw, ProtoError> {
        self.reqs
            .get_mut(id)
            .and_then(|r| r.raw_mut())
            .ok_or_else(|| gone(id))
    }

    /// Operation and slice of raw request `id`.
    fn raw_op_buf(&self, id: u64) -> Result<(RawOp, Slice), ProtoError> {
        let r = self.req(id)?;
        Ok((r.raw().ok_or_else(|| gone(id))?.op, r.buf))
    }

    /// Register a raw buffer (once), then continue in [`Self::raw_registered`].
    fn raw_register(&mut self, now: u64, id: u64, buf: Slice) -> Result<(), ProtoError> {
        if let Some((mr, key)) = self.raw.regs.get(&buf).cloned() {
            return self.raw_continue(now, id, buf, mr, key);
        }
        self.raw_state(id)?.move_to_registering()?;
        self.register(now, buf, false, Token::Whole { req: id })
    }

    pub(super) fn raw_send(&mut self, now: u64, id: u64) -> Result<(), ProtoError> {
        let (peer, tag, whole, _) = self.raw_ends(id)?;
        let (op, buf) = self.raw_op_buf(id)?;
        if buf.len == 0 {
            return Err(ProtoError::Invalid(format!(
                "raw {} of 0 bytes to rank {peer}: a raw one-sided message needs at least 1 byte (its last byte is the arrival marker); start --sizes at 1",
                op_name(op)
            )));
        }
        if op == RawOp::Write {
            let marker = next_marker(&mut self.raw.send_marker, (peer, tag));
            self.raw_state(id)?.marker = marker;
            let at = buf.sub(buf.len - 1, 1).ok_or_else(|| gone(id))?;
            self.out.push(Op::StampByte { at, value: marker });
            if self.raw.peer_keys.contains_key(&(peer, tag)) {
                return self.raw_register(now, id, whole);
            }
            self.raw.parked.push(id);
            return Ok(());
        }
        // Raw read: the target only announces its buffer, once.
        match self.raw.announced.get(&(peer, tag)) {
            Some(s) if *s == whole => {
                self.reqs.finish(id);
                Ok(())
            }
            Some(s) => Err(announce_mismatch(peer, tag, *s, whole)),
            None => {
                self.raw.announced.insert((peer, tag), whole);
                self.raw_register(now, id, whole)
            }
        }
    }

    fn raw_recv(&mut self, now: u64, id: u64) -> Result<(), ProtoError> {
        let (peer, tag, whole, _) = self.raw_ends(id)?;
        let (op, buf) = self.raw_op_buf(id)?;
        if buf.len == 0 {
            return Err(ProtoError::Invalid(format!(
                "raw receive of 0 bytes from rank {peer}: a raw one-sided message needs at least 1 byte; start --sizes at 1"
            )));
        }
        self.req_mut(id)?.len = buf.len;
        if op == RawOp::Read {
            if self.raw.peer_keys.contains_key(&(peer, tag)) {
                return self.raw_register(now, id, whole);
            }
            self.raw.parked.push(id);
            return Ok(());
        }
        let marker = next_marker(&mut self.raw.recv_marker, (peer, tag));
        self.raw_state(id)?.move_to_watching(marker)?;
        self.raw.watching.push(id);
        match self.raw.announced.get(&(peer, tag)) {
            Some(s) if *s == whole => Ok(()),
            Some(s) => Err(announce_mismatch(peer, tag, *s, whole)),
            None => {
                self.raw.announced.insert((peer, tag), whole);
                self.raw_register(now, id, whole)?;
                self.raw_state(id)?.move_to_watching(marker)?;
                Ok(())
            }
        }
    }

    /// A raw buffer registration finished.
    pub(super) fn raw_registered(
        &mut self,
        now: u64,
        id: u64,
        buf: Slice,
        mr: MrId,
        key: Key,
    ) -> Result<(), ProtoError> {
        self.raw.regs.insert(buf, (mr, key.clone()));
        self.raw_continue(now, id, buf, mr, key)
    }

    fn raw_continue(
        &mut self,
        now: u64,
        id: u64,
        whole: Slice,
        mr: MrId,
        key: Key,
    ) -> Result<(), ProtoError> {
        let (peer, tag, _, send) = self.raw_ends(id)?;
        let (op, buf) = self.raw_op_buf(id)?;
        // Mirrored buffers: the same offset on both sides.
        let off = (buf.offset - whole.offset) as u64;
        match (send, op) {
            (true, RawOp::Write) | (false, RawOp::Read) => {
                let pk = self
                    .raw
                    .peer_keys
                    .get(&(peer, tag))
                    .cloned()
                    .ok_or_else(|| gone(id))?;
                if pk.len < off + buf.len as u64 {
                    return Err(ProtoError::key(
                        peer,
                        format!(
                            "its raw buffer for tag {tag} holds {} bytes, this message needs {} at offset {off} (raw mode mirrors offsets and sizes on both sides)",
                            pk.len, buf.len
                        ),
                    ));
                }
                let xfer = self.xfer_id();
                self.out.event(EventKind::XferBegin, xfer, buf.len, now);
                if send {
                    self.raw_state(id)?.move_to_writing()?;
                    let w = Write {
                        req: id,
                        xfer,
                        offset: 0,
                        cached: true,
                        remote_offset: off,
                    };
                    self.post_write(peer, buf, mr, pk, w);
                } else {
                    self.raw_state(id)?.move_to_reading()?;
                    self.post_read(peer, buf, mr, pk, off, id, xfer);
                }
            }
            (true, RawOp::Read) | (false, RawOp::Write) => {
                let mut h = Header::ctrl(Kind::RawKey, 0, tag, whole.len as u64);
                h.key = Some(key);
                let req = send.then_some(id);
                if !send {
                    let marker = self.raw_state(id)?.marker;
                    self.raw_state(id)?.move_to_watching(marker)?;
                }
                self.send_op(peer, &h, None, CtxUse::Ctrl { req });
            }
            _ => return Err(gone(id)),
        }
        Ok(())
    }

    pub(super) fn on_raw_key(&mut self, now: u64, peer: Rank, h: Header) -> Result<(), ProtoError> {
        if !matches!(self.protocol(), Protocol::Raw(RawOp::Write | RawOp::Read)) {
            return Err(ProtoError::bad(
                peer,
                format!("raw-buffer key, but this rank runs {:?}: every rank must use the same --proto and --op", self.protocol()),
            ));
        }
        let Some(key) = h.key else {
            return Err(ProtoError::bad(
                peer,
                "raw-buffer key message without a key",
            ));
        };
        if key.len < h.len {
            return Err(ProtoError::key(
                peer,
                format!("raw key covers {} bytes, announced {}", key.len, h.len),
            ));
        }
        self.raw.peer_keys.insert((peer, h.tag), key);
        let (ready, rest): (Vec<u64>, Vec<u64>) = std::mem::take(&mut self.raw.parked)
            .into_iter()
            .partition(|id| {
                self.reqs
                    .get(*id)
                    .is_some_and(|r| r.peer == Some(peer) && r.tag == Some(h.tag))
            });
        self.raw.parked = rest;
        for id in ready {
            let whole = self.raw_state(id)?.whole;
            self.raw_register(now, id, whole)?;
        }
        Ok(())
    }

    #[inline]
    pub(super) fn raw_watching(&self) -> bool {
        !self.raw.watching.is_empty()
    }

    pub(super) fn raw_watches(&self) -> Vec<Watch> {
        self.raw
            .watching
            .iter()
            .filter_map(|id| {
                let r = self.reqs.get(*id)?;
                Some(Watch {
                    req: ReqId(*id),
                    at: r.buf.sub(r.buf.len - 1, 1)?,
                })
            })
            .collect()
    }

    /// How many raw-write receives are watched.
    #[inline]
    pub fn watch_count(&self) -> usize {
        self.raw.watching.len()
    }

    /// The `k`-th watch in posting order, without building the list of
    /// [`Engine::watches`] (the caller's every poll looks at them).
    #[inline]
    pub fn watch_at(&self, k: usize) -> Option<Watch> {
        let id = *self.raw.watching.get(k)?;
        let r = self.reqs.get(id)?;
        Some(Watch {
            req: ReqId(id),
            at: r.buf.sub(r.buf.len - 1, 1)?,
        })
    }

    /// Whether `byte`, read at raw-write receive `req`'s last byte, shows
    /// its marker or a later one (the sender may already have written the
    /// next message): then [`Engine::on_raw_byte`] completes it. Pure, so
    /// a caller can spin on it and read its clock only when it is true.
    #[inline]
    pub fn raw_byte_arrived(&self, req: ReqId, byte: u8) -> bool {
        if byte == 0 {
            return false;
        }
        let Some(r) = self.reqs.get(req.0) else {
            return false;
        };
        let Some(raw) = r.raw().filter(|_| r.pending()) else {
            return false;
        };
        raw.stage() == RawStage::RawWait && (byte as u16 + 255 - raw.marker as u16) % 255 < 128
    }

    /// The watched last byte of raw-write receive `req` reads `byte`: the
    /// receive completes at `now` if [`Engine::raw_byte_arrived`].
    pub fn on_raw_byte(&mut self, now: u64, req: ReqId, byte: u8) {
        if !self.raw_byte_arrived(req, byte) {
            return;
        }
        let Some(len) = self.reqs.get(req.0).map(|r| r.len) else {
            return;
        };
        let xfer = self.xfer_id();
        self.out.event(EventKind::XferEnd, xfer, len, now);
        if let Some(i) = self.raw.watching.iter().position(|x| *x == req.0) {
            self.raw.watching.remove(i);
        }
        self.reqs.finish(req.0);
    }

    /// Deregister raw buffers too (part of [`Engine::flush_cache`]).
    pub(super) fn flush_raw(&mut self) {
        for (_, (mr, _)) in std::mem::take(&mut self.raw.regs) {
            self.dereg(mr);
        }
        self.raw.announced.clear();
    }
}

fn announce_mismatch(peer: Rank, tag: Tag, had: Slice, now: Slice) -> ProtoError {
    ProtoError::Invalid(format!(
        "raw mode announces one buffer per rank and tag: rank {peer} tag {tag} uses region {} offset {} ({} bytes), this call {} offset {} ({} bytes); post the same buffer each time, or use --proto rdma-write/rdma-read",
        had.region, had.offset, had.len, now.region, now.offset, now.len
    ))
}

/// The `--op` spelling of a raw one-sided operation.
fn op_name(op: RawOp) -> &'static str {
    if op == RawOp::Write {
        "write"
    } else {
        "read"
    }
}
