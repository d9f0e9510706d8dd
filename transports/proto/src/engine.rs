//! The engine's state and its entry points; the protocol steps live in
//! `send.rs` (sender side), `recv.rs` (matching, receiver side) and
//! `raw.rs` (`--proto raw`); `describe.rs` says in words what a request
//! waits for; `state.rs` holds a request's state, typed per protocol.

use std::collections::VecDeque;

pub(crate) use crate::hash::HashMap;
use crate::idmap::IdMap;
use crate::recv::Posted;
pub(crate) use crate::state::{Outcome, Proto, Reg, Req};

use crate::wire::{self, Fixed, Header, Kind};
use crate::{
    Config, Counts, Event, EventKind, Key, Mode, MrId, Op, Placement, ProtoError, Protocol, Rank,
    RawOp, ReqId, Slice, Space, Status, Tag, Watch,
};

/// Set in the context of a two-sided send whose completion nothing waits
/// on and that records nothing (an eager packet or a control message
/// completing no request, with instrumentation off when it was posted):
/// consuming it earlier or later than it arrives changes nothing the
/// engine does. A transport may therefore leave it queued without waking
/// a rank that sleeps in a wait, or hand it over as soon as the send is
/// posted when it cannot fail — the simulator does both, sparing a
/// handoff and an event per message — and must hand it to some poll.
/// Other transports pass contexts back untouched and need not look.
pub const QUIET_CTX: u64 = 1 << 63;

/// Smallest eager buffer the engine accepts: a header, a key with a
/// 64-byte blob, and payload room.
pub const MIN_EAGER_BUF: usize = wire::HEADER_LEN + 18 + 64 + 64;

/// Which protocol one message runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    Eager,
    RdmaWrite,
    RdmaRead,
    Pipelined,
    RawSend,
    RawWrite,
    RawRead,
}

/// What a finished operation's context stands for.
#[derive(Clone, Debug)]
pub(crate) enum CtxUse {
    /// An eager or first-fragment packet; `req` completes with it (raw send).
    Packet {
        xfer: u64,
        bytes: usize,
        req: Option<u64>,
    },
    /// A control message; `req` completes with it (raw key announcement).
    Ctrl {
        req: Option<u64>,
    },
    Write {
        req: u64,
        xfer: u64,
        offset: usize,
        bytes: usize,
        mr: MrId,
        cached: bool,
    },
    Read {
        req: u64,
        xfer: u64,
    },
}

/// What a registration was asked for.
#[derive(Clone, Debug)]
pub(crate) enum Token {
    /// The whole buffer of `req` (rendezvous, raw).
    Whole { req: u64 },
    /// Pipelined sender fragment, to write into `key`.
    SendFrag { req: u64, offset: usize, key: Key },
    /// Pipelined receiver fragment, to announce with PUT.
    RecvFrag { req: u64, offset: usize },
}

/// A message that arrived before its receive: what its first packet
/// said, kept to be accepted as it would have been on arrival.
#[derive(Debug)]
pub(crate) struct Unexp {
    pub uid: u64,
    pub peer: Rank,
    /// The first packet's fixed header (its flags give the matching space).
    pub head: Fixed,
    pub key: Option<Key>,
    /// Eager bytes buffered so far (eager, raw send, pipelined first fragment).
    pub data: Vec<u8>,
}

/// Where a message in flight towards us is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum In {
    Req(u64),
    Unexp(u64),
}

/// The protocol engine of one rank. See the crate docs for the driving rules.
#[derive(Debug)]
pub struct Engine {
    pub(crate) cfg: Config,
    pub(crate) next_id: u64,
    pub(crate) reqs: IdMap<Req>,
    /// Sends that finished as they were posted, until taken (`send_now`),
    /// but for the latest one, which waits in `last_id`/`last_status`.
    pub(crate) finished: IdMap<Status>,
    /// The latest send that finished as posted (0: none), kept in plain
    /// fields: a blocking send retires it at once, and the table's insert
    /// and remove of a just-built status stalled on store forwarding.
    pub(crate) last_id: u64,
    pub(crate) last_status: Status,
    pub(crate) posted: VecDeque<Posted>,
    pub(crate) unexpected: VecDeque<Unexp>,
    pub(crate) unexpected_bytes: usize,
    pub(crate) incoming: HashMap<(Rank, u32), In>,
    pub(crate) outgoing: HashMap<(Rank, u32), u64>,
    pub(crate) send_seq: Vec<u32>,
    pub(crate) recv_seq: Vec<u32>,
    pub(crate) ctxs: IdMap<CtxUse>,
    pub(crate) tokens: HashMap<u64, (Token, Slice, bool)>,
    pub(crate) cache: Vec<(Slice, MrId, Key)>,
    pub(crate) ops: VecDeque<Op>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) counts: Counts,
    pub(crate) raw: crate::raw::RawState,
    /// Header buffers handed back by the driver, reused by later sends.
    pub(crate) hdr_pool: Vec<Vec<u8>>,
    /// Pipelined receiver fragments in flight: (req, offset) → (xfer, mr, len).
    pub(crate) frags: HashMap<(u64, usize), (u64, MrId, usize)>,
}

impl Engine {
    /// An engine with nothing in flight. Refused when `cfg.eager_buf_size`
    /// is below [`MIN_EAGER_BUF`] or `cfg.frag_size` is zero.
    pub fn new(cfg: Config) -> Result<Engine, ProtoError> {
        if cfg.eager_buf_size < MIN_EAGER_BUF {
            return Err(ProtoError::Invalid(format!(
                "the transport's eager buffer of {} bytes is below the engine's minimum of {MIN_EAGER_BUF} (a header and a remote key must fit): the transport must offer larger receive buffers",
                cfg.eager_buf_size
            )));
        }
        if cfg.frag_size == 0 {
            return Err(ProtoError::Invalid(
                "--frag-size must be at least 1 byte".into(),
            ));
        }
        let n = cfg.size as usize;
        Ok(Engine {
            cfg,
            next_id: 1,
            reqs: IdMap::default(),
            finished: IdMap::default(),
            last_id: 0,
            last_status: Status {
                source: 0,
                tag: 0,
                len: 0,
            },
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            unexpected_bytes: 0,
            incoming: HashMap::default(),
            outgoing: HashMap::default(),
            send_seq: vec![0; n],
            recv_seq: vec![0; n],
            ctxs: IdMap::default(),
            tokens: HashMap::default(),
            cache: Vec::new(),
            ops: VecDeque::new(),
            events: VecDeque::new(),
            counts: Counts::default(),
            raw: Default::default(),
            frags: HashMap::default(),
            hdr_pool: Vec::new(),
        })
    }

    /// The configuration in force (its protocol and instrumentation as
    /// last set).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Turn XFER events on or off (they cost a queue push each).
    pub fn set_instrument(&mut self, on: bool) {
        self.cfg.instrument = on;
        if !on {
            self.events.clear();
        }
    }

    /// Run later messages under `p` (xfer_time times the bare operations
    /// through the same engine); refused with a request in flight.
    pub fn set_protocol(&mut self, p: Protocol) -> Result<(), ProtoError> {
        if self.in_flight() != 0 {
            return Err(ProtoError::Invalid(format!(
                "protocol change with {} requests in flight",
                self.in_flight()
            )));
        }
        self.cfg.protocol = p;
        Ok(())
    }

    /// The protocol later messages run under.
    pub fn protocol(&self) -> Protocol {
        self.cfg.protocol
    }

    /// Largest payload of one packet.
    pub fn max_payload(&self) -> usize {
        self.cfg.eager_buf_size - wire::HEADER_LEN
    }

    /// Start sending `src` to `peer`. Drain [`Self::poll_op`] afterwards.
    pub fn isend(
        &mut self,
        now: u64,
        src: Slice,
        peer: Rank,
        tag: Tag,
        mode: Mode,
        space: Space,
    ) -> Result<ReqId, ProtoError> {
        self.isend_in(now, src, src, peer, tag, mode, space)
    }

    /// [`Self::isend`] of `src` inside the user's buffer `whole`: raw
    /// one-sided mode announces `whole` once and mirrors offsets (the
    /// message goes to the same offset of the peer's announced buffer).
    #[allow(clippy::too_many_arguments)]
    pub fn isend_in(
        &mut self,
        now: u64,
        src: Slice,
        whole: Slice,
        peer: Rank,
        tag: Tag,
        mode: Mode,
        space: Space,
    ) -> Result<ReqId, ProtoError> {
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
        let wire = self.choose(src.len, mode, space);
        let id = self.new_id();
        let seq = self.send_seq[peer as usize];
        if !matches!(wire, Wire::RawWrite | Wire::RawRead) {
            self.send_seq[peer as usize] = seq.wrapping_add(1);
        }
        if wire == Wire::Eager && mode != Mode::Synchronous {
            self.send_now(now, id, src, (peer, tag, seq), mode, space);
            return Ok(ReqId(id));
        }
        let flags = crate::send::flags(mode, space);
        let mut r = Req::new(
            true,
            Some(peer),
            Some(tag),
            src,
            Proto::send(wire, flags, whole),
        );
        r.seq = seq;
        r.len = src.len;
        self.reqs.insert(id, r);
        let r = self.start_send(now, id, flags);
        if r.is_err() {
            self.reqs.remove(&id);
        }
        r.map(|_| ReqId(id))
    }

    /// Start receiving up to `dst.len` bytes. Drain [`Self::poll_op`] afterwards.
    pub fn irecv(
        &mut self,
        now: u64,
        dst: Slice,
        src: Option<Rank>,
        tag: Option<Tag>,
        space: Space,
    ) -> Result<ReqId, ProtoError> {
        self.irecv_in(now, dst, dst, src, tag, space)
    }

    /// [`Self::irecv`] into `dst` inside the user's buffer `whole` (see
    /// [`Self::isend_in`]).
    pub fn irecv_in(
        &mut self,
        now: u64,
        dst: Slice,
        whole: Slice,
        src: Option<Rank>,
        tag: Option<Tag>,
        space: Space,
    ) -> Result<ReqId, ProtoError> {
        if !whole.contains(&dst) {
            return Err(ProtoError::Invalid(format!(
                "receive slice {dst:?} lies outside its buffer {whole:?}"
            )));
        }
        if let Some(p) = src {
            if p >= self.cfg.size {
                return Err(ProtoError::Invalid(format!(
                    "receive of {} bytes from rank {p}, but the job has only {} ranks",
                    dst.len, self.cfg.size
                )));
            }
        }
        let id = self.new_id();
        let p = Posted::new(id, src, tag, space, dst, whole);
        let raw = match (self.cfg.protocol, space) {
            (Protocol::Raw(op @ (RawOp::Write | RawOp::Read)), Space::User) => Some(op),
            _ => None,
        };
        let r = match raw {
            Some(op) => {
                self.reqs.insert(id, p.raw_request(op));
                self.raw_recv(now, id)
            }
            // Its request state is made only when a message matches it.
            None => self.post_recv(now, p),
        };
        if r.is_err() {
            self.reqs.remove(&id);
            self.posted.retain(|p| p.id != id);
        }
        r.map(|_| ReqId(id))
    }

    /// A two-sided message arrived from `peer`. If a [`Placement`] comes
    /// back, copy those bytes of `bytes` into its slice before anything else.
    pub fn on_message(
        &mut self,
        now: u64,
        peer: Rank,
        bytes: &[u8],
    ) -> Result<Option<Placement>, ProtoError> {
        if peer >= self.cfg.size {
            return Err(ProtoError::Invalid(format!(
                "the transport reported a message from rank {peer} in a job of {} ranks",
                self.cfg.size
            )));
        }
        let f = wire::decode_fixed(bytes).map_err(|d| ProtoError::bad(peer, d))?;
        let key = f.key(bytes).map_err(|d| ProtoError::bad(peer, d))?;
        let start = f.payload_start();
        match f.kind {
            Kind::Eager | Kind::RawSend | Kind::RtsWrite | Kind::RtsRead | Kind::PipeRts => {
                self.on_request(now, peer, &f, key, bytes, start)
            }
            Kind::EagerFrag => self.on_eager_frag(now, peer, f.with_key(key), bytes, start),
            Kind::FinWrite => self.on_fin_write(now, peer, f.with_key(key)).map(|_| None),
            Kind::Cts => self.on_cts(now, peer, f.with_key(key)).map(|_| None),
            Kind::FinRead => self.on_fin_read(now, peer, f.with_key(key)).map(|_| None),
            Kind::PipeAck => self.on_pipe_ack(now, peer, f.with_key(key)).map(|_| None),
            Kind::Put => self.on_put(now, peer, f.with_key(key)).map(|_| None),
            Kind::SyncAck => self.on_sync_ack(now, peer, f.with_key(key)).map(|_| None),
            Kind::RawKey => self.on_raw_key(now, peer, f.with_key(key)).map(|_| None),
        }
    }

    /// An operation posted with context `ctx` finished (send left, write
    /// visible, read landed). Unknown contexts are an error, except quiet
    /// ones that stand for nothing (see `send_op`).
    pub fn on_completion(&mut self, now: u64, ctx: u64) -> Result<(), ProtoError> {
        let Some(u) = self.ctxs.remove(&ctx) else {
            if ctx & QUIET_CTX != 0 {
                return Ok(());
            }
            return Err(ProtoError::Invalid(format!(
                "completion for unknown operation context {ctx}: the transport returned a context the engine never posted"
            )));
        };
        if let CtxUse::Write { req, .. } | CtxUse::Read { req, .. } = &u {
            if let Some(n) = self.reqs.get_mut(req).and_then(|r| r.proto.inflight_mut()) {
                *n = n.saturating_sub(1);
            }
        }
        match u {
            CtxUse::Packet { xfer, bytes, req } => {
                self.event(EventKind::XferEnd, xfer, bytes, now);
                if let Some(r) = req {
                    self.finish(r);
                }
                Ok(())
            }
            CtxUse::Ctrl { req } => {
                if let Some(r) = req {
                    self.finish(r);
                }
                Ok(())
            }
            CtxUse::Write {
                req,
                xfer,
                offset,
                bytes,
                mr,
                cached,
            } => self.on_write_done(now, req, xfer, offset, bytes, mr, cached),
            CtxUse::Read { req, xfer } => self.on_read_done(now, req, xfer),
        }
    }

    /// A [`Op::Register`] with `token` succeeded with handle `mr` and `key`.
    pub fn on_registered(
        &mut self,
        now: u64,
        token: u64,
        mr: MrId,
        key: Key,
    ) -> Result<(), ProtoError> {
        let Some((t, slice, cacheable)) = self.tokens.remove(&token) else {
            return Err(ProtoError::Invalid(format!(
                "registration result for unknown token {token}"
            )));
        };
        self.key_fits(&key)?;
        if cacheable && self.cfg.reg_cache {
            self.cache.push((slice, mr, key.clone()));
        }
        self.registered(now, t, slice, mr, key, cacheable && self.cfg.reg_cache)
    }

    /// The next operation to perform, in order; `None` when there is none.
    #[must_use]
    #[inline]
    pub fn poll_op(&mut self) -> Option<Op> {
        self.ops.pop_front()
    }

    /// The next instrumentation event; `None` when there is none.
    #[must_use]
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether `req` has finished (successfully or not).
    pub fn is_done(&self, req: ReqId) -> bool {
        match self.reqs.get(&req.0) {
            Some(r) => !r.pending(),
            // A posted receive nothing matched yet has no state.
            None => self.posted_receive(req).is_none(),
        }
    }

    /// Retire `req` if it finished: its status or its error. `None` while
    /// it is still in progress (or unknown).
    #[inline]
    pub fn take(&mut self, req: ReqId) -> Option<Result<Status, ProtoError>> {
        if req.0 == self.last_id {
            self.last_id = 0;
            // Field by field, as `finished_as_posted` stored them: a copy
            // of the whole status loaded it in one 16-byte read across
            // three recent stores, a store-forwarding stall on every
            // message (seen in the disassembly).
            let l = &self.last_status;
            return Some(Ok(Status {
                source: l.source,
                tag: l.tag,
                len: l.len,
            }));
        }
        self.take_kept(req)
    }

    /// [`Self::take`] for any request but the latest finished-as-posted
    /// one: out of line, so the common case above stays small.
    #[inline(never)]
    fn take_kept(&mut self, req: ReqId) -> Option<Result<Status, ProtoError>> {
        if !self.finished.is_empty() {
            if let Some(st) = self.finished.remove(&req.0) {
                return Some(Ok(st));
            }
        }
        let r = self.reqs.get_mut(&req.0)?;
        let Outcome::Finished(st) = r.outcome else {
            return None;
        };
        if r.proto.inflight() > 0 {
            // Keep the state for the operations still in flight; mark retired.
            r.outcome = Outcome::Retired;
        } else {
            // Dropped in its slot: moving the ~190-byte state out only to
            // drop it was a good part of retiring a receive.
            self.reqs.discard(&req.0);
        }
        Some(Ok(st))
    }

    /// Raw-write receives whose last byte the caller must watch.
    pub fn watches(&self) -> Vec<Watch> {
        self.raw_watches()
    }

    /// Whether any receive is watched ([`Self::watches`] is not empty):
    /// a check for the caller's every poll, without building the list.
    #[inline]
    pub fn has_watches(&self) -> bool {
        self.raw_watching()
    }

    /// Hand back an [`Op::Send`]'s header once posted, so the next send
    /// reuses its allocation (optional).
    #[inline]
    pub fn recycle_header(&mut self, header: Vec<u8>) {
        if self.hdr_pool.len() < 64 {
            self.hdr_pool.push(header);
        }
    }

    /// What the engine has asked for so far (internal traffic excluded).
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Drop every cached registration (queues [`Op::Deregister`]s).
    pub fn flush_cache(&mut self) {
        for (_, mr, _) in std::mem::take(&mut self.cache) {
            self.dereg(mr);
        }
        self.flush_raw();
    }

    /// Whether a data operation (eager packet, write, read) is posted and
    /// not complete: an eager send's request finishes before its packet.
    pub fn data_ops_open(&self) -> bool {
        self.ctxs.values().any(|u| {
            matches!(
                u,
                CtxUse::Packet { .. } | CtxUse::Write { .. } | CtxUse::Read { .. }
            )
        })
    }

    /// Number of requests not yet retired (for leak checks and shutdown).
    pub fn in_flight(&self) -> usize {
        self.reqs.len() + self.finished.len() + usize::from(self.last_id != 0) + self.posted.len()
    }

    /// Direction, peer (None: any source not matched yet) and size of
    /// `req`, for error messages; `None` once retired.
    pub fn request_info(&self, req: ReqId) -> Option<(bool, Option<Rank>, usize)> {
        if let Some(p) = self.posted_receive(req) {
            return Some((false, p.peer(), p.buf.len));
        }
        self.reqs
            .get(&req.0)
            .map(|r| (r.send, r.peer, if r.send { r.len } else { r.buf.len }))
    }

    /// `req` if it is a posted receive nothing has matched yet.
    pub(crate) fn posted_receive(&self, req: ReqId) -> Option<&Posted> {
        self.posted.iter().find(|p| p.id == req.0)
    }

    // ---- shared helpers ----

    pub(crate) fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub(crate) fn choose(&self, len: usize, mode: Mode, space: Space) -> Wire {
        if space == Space::Internal {
            return Wire::Eager;
        }
        if let Protocol::Raw(op) = self.cfg.protocol {
            return match op {
                RawOp::Send => Wire::RawSend,
                RawOp::Write => Wire::RawWrite,
                RawOp::Read => Wire::RawRead,
            };
        }
        if len == 0 || mode == Mode::Buffered {
            return Wire::Eager;
        }
        match self.cfg.protocol {
            Protocol::Eager => Wire::Eager,
            Protocol::RdmaWrite => Wire::RdmaWrite,
            Protocol::RdmaRead => Wire::RdmaRead,
            Protocol::Pipelined => Wire::Pipelined,
            Protocol::Auto if len <= self.cfg.eager_limit => Wire::Eager,
            Protocol::Auto if self.cfg.prefer_read => Wire::RdmaRead,
            Protocol::Auto => Wire::RdmaWrite,
            Protocol::Raw(_) => Wire::RawSend,
        }
    }

    /// A transfer id: 0 (never recorded) while instrumentation is off, so
    /// a transfer begun then never shows up as END-only later.
    pub(crate) fn xfer_id(&mut self) -> u64 {
        if self.cfg.instrument {
            self.new_id()
        } else {
            0
        }
    }

    /// Record an XFER event; transfer id 0 marks internal traffic (barrier), never recorded.
    pub(crate) fn event(&mut self, kind: EventKind, xfer: u64, bytes: usize, at: u64) {
        if self.cfg.instrument && xfer != 0 {
            self.events.push_back(Event {
                kind,
                xfer,
                bytes,
                at,
            });
        }
    }

    /// Record a posted write or read of `req` (see [`Proto::inflight`]).
    pub(crate) fn track_rdma(&mut self, req: u64) {
        if let Some(n) = self.reqs.get_mut(&req).and_then(|r| r.proto.inflight_mut()) {
            *n += 1;
        }
    }

    /// Queue a two-sided send; returns its context.
    pub(crate) fn send_op(
        &mut self,
        peer: Rank,
        h: &Header,
        payload: Option<Slice>,
        u: CtxUse,
    ) -> u64 {
        let payload = payload.filter(|p| p.len > 0);
        let ctx = self.packet_ctx(h.flags, payload, u);
        let mut header = self.hdr_pool.pop().unwrap_or_default();
        h.encode_into(&mut header);
        self.ops.push_back(Op::Send {
            peer,
            header,
            payload,
            ctx,
        });
        ctx
    }

    /// A key we are about to send must fit one packet with its header.
    pub(crate) fn key_fits(&self, key: &Key) -> Result<(), ProtoError> {
        let need = wire::HEADER_LEN + 18 + key.blob.len();
        if key.blob.len() > wire::MAX_KEY_BLOB || need > self.cfg.eager_buf_size {
            return Err(ProtoError::Invalid(format!(
                "a local remote key of {} bytes does not fit one {}-byte message: the transport's keys are too large for its eager buffers",
                key.blob.len(),
                self.cfg.eager_buf_size
            )));
        }
        Ok(())
    }

    /// Register `slice` for `t`, from the cache when allowed.
    pub(crate) fn register(
        &mut self,
        now: u64,
        slice: Slice,
        cacheable: bool,
        t: Token,
    ) -> Result<(), ProtoError> {
        if cacheable && self.cfg.reg_cache {
            // Exact match: a key always covers exactly the slice it names.
            if let Some((_, mr, key)) = self.cache.iter().find(|(c, _, _)| *c == slice) {
                let (mr, key) = (*mr, key.clone());
                return self.registered(now, t, slice, mr, key, true);
            }
        }
        let token = self.new_id();
        self.tokens.insert(token, (t, slice, cacheable));
        self.counts.registrations += 1;
        self.ops.push_back(Op::Register { slice, token });
        Ok(())
    }

    pub(crate) fn dereg(&mut self, mr: MrId) {
        self.counts.deregistrations += 1;
        self.ops.push_back(Op::Deregister { mr });
    }

    /// Mark `req` finished successfully.
    pub(crate) fn finish(&mut self, req: u64) {
        if let Some(r) = self.reqs.get_mut(&req) {
            if r.pending() {
                r.outcome = Outcome::Finished(Status {
                    source: r.peer.unwrap_or(0),
                    tag: r.tag.unwrap_or(0),
                    len: r.len,
                });
            }
        }
    }

    /// A rendezvous whose peer did the RDMA ends at the peer's FIN: its
    /// transfer ends, its registration goes (unless cached), it is done.
    pub(crate) fn end_at_fin(
        &mut self,
        now: u64,
        req: u64,
        xfer: u64,
        len: usize,
        mr: Option<Reg>,
    ) {
        self.event(EventKind::XferEnd, xfer, len, now);
        if let Some((mr, _, false)) = mr {
            self.dereg(mr);
        }
        self.finish(req);
    }

    /// Forget `req` if the user retired it while its RDMA was in flight:
    /// that completion was its last use, and nobody will take it.
    pub(crate) fn drop_if_retired(&mut self, req: u64) {
        if self
            .reqs
            .get(&req)
            .is_some_and(|r| r.outcome == Outcome::Retired)
        {
            self.reqs.remove(&req);
        }
    }
}
