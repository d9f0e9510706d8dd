//! The engine: its entry points and the sub-states it is made of. Each
//! sub-state owns its fields and is changed only through its methods:
//! the message plan ([`Plan`]), the per-peer sequence numbers
//! (`peers.rs`), the user's requests (`requests.rs`), matching
//! (`matching.rs`), the output (`outbox.rs`) and what is in flight
//! (`flight.rs`); a request's protocol stages are typed in `state.rs`.
//! The protocol steps live beside this file: `fast.rs` (the one-packet
//! eager fast path), `send.rs`, `recv.rs`, `raw.rs`; `describe.rs`
//! says in words what a request waits for.

mod describe;
mod fast;
mod raw;
mod recv;
mod send;

use crate::flight::{CtxUse, Flight};
use crate::matching::{Matching, Posted};
use crate::outbox::Outbox;
use crate::peers::Peers;
use crate::plan::{Plan, Route};
use crate::requests::{Requests, FAST_ID};
use crate::state::Req;
use crate::wire::{self, Header, Kind};
use crate::{
    Config, Counts, Event, EventKind, HeaderBytes, Key, Mode, MrId, Op, Placement, ProtoError,
    Protocol, Rank, RawOp, ReqId, Slice, Space, Status, Tag, Watch,
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

/// Largest job: fast-path ids carry the peer in bits 32..62.
const MAX_RANKS: u32 = 1 << 30;

/// When the fast path applies, from the plan and what is recorded.
#[derive(Clone, Copy, Debug)]
struct Fast {
    /// Standard user sends below this many bytes leave as one short
    /// packet, done as posted (0: none).
    send_below: usize,
    /// Short packets in order are matched on arrival without request
    /// state.
    recv: bool,
    /// Receives are queued as they are posted when nothing unexpected
    /// waits (not under raw write or read, whose receives are operations).
    post: bool,
}

/// A send as the caller asked for it: `src` inside the user's buffer
/// `whole`, to `peer` with `tag`, in `mode`, from `space`.
#[derive(Clone, Copy, Debug)]
struct Outgoing {
    src: Slice,
    whole: Slice,
    peer: Rank,
    tag: Tag,
    mode: Mode,
    space: Space,
}

impl Outgoing {
    #[inline(always)]
    fn new(src: Slice, whole: Slice, peer: Rank, tag: Tag, mode: Mode, space: Space) -> Outgoing {
        Outgoing {
            src,
            whole,
            peer,
            tag,
            mode,
            space,
        }
    }
}

/// A receive as the caller asked for it: into `dst` inside the user's
/// buffer `whole`, from `src` with `tag` (`None`: any), in `space`.
#[derive(Clone, Copy, Debug)]
struct Incoming {
    dst: Slice,
    whole: Slice,
    src: Option<Rank>,
    tag: Option<Tag>,
    space: Space,
}

/// The protocol engine of one rank. See the crate docs for the driving rules.
#[derive(Debug)]
pub struct Engine {
    /// The configuration, its plan fitted to the packets.
    cfg: Config,
    fast: Fast,
    peers: Peers,
    reqs: Requests,
    matching: Matching,
    out: Outbox,
    flight: Flight,
    raw: raw::RawState,
}

impl Engine {
    /// An engine with nothing in flight. Refused when `cfg.eager_buf_size`
    /// is below [`MIN_EAGER_BUF`], the plan's fragment size is zero or the
    /// job has more than 2^30 ranks.
    pub fn new(mut cfg: Config) -> Result<Engine, ProtoError> {
        if cfg.eager_buf_size < MIN_EAGER_BUF {
            return Err(ProtoError::Invalid(format!(
                "the transport's eager buffer of {} bytes is below the engine's minimum of {MIN_EAGER_BUF} (a header and a remote key must fit): the transport must offer larger receive buffers",
                cfg.eager_buf_size
            )));
        }
        if cfg.plan.frag_size() == 0 {
            return Err(ProtoError::Invalid(
                "--frag-size must be at least 1 byte".into(),
            ));
        }
        if cfg.size > MAX_RANKS {
            return Err(ProtoError::Invalid(format!(
                "a job of {} ranks is more than the engine's {MAX_RANKS}",
                cfg.size
            )));
        }
        cfg.plan = cfg.plan.fitted(cfg.eager_buf_size - wire::HEADER_LEN);
        let mut e = Engine {
            fast: Fast {
                send_below: 0,
                recv: false,
                post: false,
            },
            peers: Peers::new(cfg.size),
            reqs: Requests::default(),
            matching: Matching::new(cfg.max_unexpected_bytes),
            out: Outbox::new(cfg.instrument),
            flight: Flight::default(),
            raw: Default::default(),
            cfg,
        };
        e.refresh_fast();
        Ok(e)
    }

    /// The configuration in force: its plan fitted to the packets, its
    /// protocol and instrumentation as last set.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// How messages move: the plan in force.
    pub fn plan(&self) -> &Plan {
        &self.cfg.plan
    }

    /// Turn XFER events on or off (they cost a queue push each; the fast
    /// path, which records nothing, stops while they are on).
    pub fn set_instrument(&mut self, on: bool) {
        self.cfg.instrument = on;
        self.out.record(on);
        self.refresh_fast();
    }

    /// Run later messages under `p` (xfer_time times the bare operations
    /// through the same engine); refused with a request in flight.
    pub fn set_protocol(&mut self, p: Protocol) -> Result<(), ProtoError> {
        let plan = self.cfg.plan.with_protocol(p);
        self.replan("protocol", plan)
    }

    /// Send later messages of auto eagerly up to and including `bytes`
    /// (the run's chosen eager limit); refused with a request in flight.
    pub fn set_eager_limit(&mut self, bytes: usize) -> Result<(), ProtoError> {
        let plan = self.cfg.plan.with_eager_limit(bytes);
        self.replan("eager limit", plan)
    }

    /// Move later messages to `plan` (`what` changed, for the refusal):
    /// a message in flight keeps the route it was given.
    fn replan(&mut self, what: &str, plan: Plan) -> Result<(), ProtoError> {
        if self.in_flight() != 0 {
            return Err(ProtoError::Invalid(format!(
                "{what} change with {} requests in flight",
                self.in_flight()
            )));
        }
        self.cfg.plan = plan;
        self.refresh_fast();
        Ok(())
    }

    /// Where the fast path applies, after the plan or the recording changed.
    fn refresh_fast(&mut self) {
        let on = self.cfg.fast_path && !self.cfg.instrument;
        // A short header's length is 32 bits.
        let bound = self.cfg.plan.one_packet_bound().min(u32::MAX as usize);
        let raw_one_sided = matches!(
            self.cfg.plan.protocol(),
            Protocol::Raw(RawOp::Write | RawOp::Read)
        );
        self.fast = Fast {
            send_below: if on { bound } else { 0 },
            recv: on,
            post: !raw_one_sided,
        };
    }

    /// The protocol later messages run under.
    pub fn protocol(&self) -> Protocol {
        self.cfg.plan.protocol()
    }

    /// Largest payload of one packet.
    pub fn max_payload(&self) -> usize {
        self.cfg.plan.max_payload()
    }

    /// Start sending `src` to `peer`. Drain [`Self::poll_op`] afterwards.
    #[inline(always)]
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
    #[inline(always)]
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
        let o = Outgoing::new(src, whole, peer, tag, mode, space);
        if let Some(d) = self.fast_send(o) {
            self.out.push_first(d.ctx, tag, src);
            return Ok(d.req);
        }
        self.isend_general(now, o)
    }

    /// Start receiving up to `dst.len` bytes. Drain [`Self::poll_op`] afterwards.
    #[inline(always)]
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
    #[inline(always)]
    pub fn irecv_in(
        &mut self,
        now: u64,
        dst: Slice,
        whole: Slice,
        src: Option<Rank>,
        tag: Option<Tag>,
        space: Space,
    ) -> Result<ReqId, ProtoError> {
        let fits = whole.contains(&dst) && src.map_or(true, |p| p < self.cfg.size);
        if fits && self.fast.post && self.matching.nothing_unexpected() {
            // Nothing to match it against: it waits in the queue, with
            // no request state until a message comes.
            let id = self.reqs.new_id();
            self.matching.post(Posted::new(id, src, tag, space, dst));
            return Ok(ReqId(id));
        }
        let i = Incoming {
            dst,
            whole,
            src,
            tag,
            space,
        };
        self.irecv_general(now, i)
    }

    /// [`Self::irecv_in`] of a receive that cannot simply be queued: a
    /// bad one, a raw one-sided one, or one an unexpected message may
    /// match.
    #[inline(never)]
    fn irecv_general(&mut self, now: u64, i: Incoming) -> Result<ReqId, ProtoError> {
        if !i.whole.contains(&i.dst) || i.src.is_some_and(|p| p >= self.cfg.size) {
            return Err(self.bad_receive(i));
        }
        let id = self.reqs.new_id();
        if let (Protocol::Raw(op @ (RawOp::Write | RawOp::Read)), Space::User) =
            (self.protocol(), i.space)
        {
            let r = self.raw_receive(now, id, i, op);
            if r.is_err() {
                self.reqs.remove(id);
            }
            return r.map(|_| ReqId(id));
        }
        let p = Posted::new(id, i.src, i.tag, i.space, i.dst);
        match self.matching.take_unexpected(&p) {
            // Its request state is made only when a message matches it.
            None => self.matching.post(p),
            Some(u) => {
                self.reqs.insert(id, p.request());
                if let Err(e) = self.accept_unexpected(now, id, u) {
                    self.reqs.remove(id);
                    return Err(e);
                }
            }
        }
        Ok(ReqId(id))
    }

    #[cold]
    #[inline(never)]
    fn bad_receive(&self, i: Incoming) -> ProtoError {
        match i.src {
            Some(p) if p >= self.cfg.size => ProtoError::Invalid(format!(
                "receive of {} bytes from rank {p}, but the job has only {} ranks",
                i.dst.len, self.cfg.size
            )),
            _ => ProtoError::Invalid(format!(
                "receive slice {:?} lies outside its buffer {:?}",
                i.dst, i.whole
            )),
        }
    }

    /// A two-sided message arrived from `peer`. If a [`Placement`] comes
    /// back, copy those bytes of `bytes` into its slice before anything else.
    #[inline]
    pub fn on_message(
        &mut self,
        now: u64,
        peer: Rank,
        bytes: &[u8],
    ) -> Result<Option<Placement>, ProtoError> {
        if let Some(placed) = self.arrive_short(peer, bytes) {
            return Ok(placed);
        }
        self.on_message_general(now, peer, bytes)
    }

    /// [`Self::on_message`] of every message the fast path does not take.
    #[inline(never)]
    fn on_message_general(
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
            Kind::Short => Err(ProtoError::Invalid(
                "internal: a short header decoded as itself".into(),
            )),
        }
    }

    /// An operation posted with context `ctx` finished (send left, write
    /// visible, read landed). Unknown contexts are an error, except quiet
    /// ones that stand for nothing (see `send_op`).
    #[inline]
    pub fn on_completion(&mut self, now: u64, ctx: u64) -> Result<(), ProtoError> {
        // A fast-path packet's context stands for nothing.
        if ctx & (QUIET_CTX | FAST_ID) == QUIET_CTX | FAST_ID {
            return Ok(());
        }
        self.on_completion_general(now, ctx)
    }

    #[inline(never)]
    fn on_completion_general(&mut self, now: u64, ctx: u64) -> Result<(), ProtoError> {
        let Some(u) = self.flight.finished(ctx) else {
            if ctx & QUIET_CTX != 0 {
                return Ok(());
            }
            return Err(ProtoError::Invalid(format!(
                "completion for unknown operation context {ctx}: the transport returned a context the engine never posted"
            )));
        };
        if let CtxUse::Write { req, .. } | CtxUse::Read { req, .. } = &u {
            if let Some(n) = self.reqs.get_mut(*req).and_then(|r| r.proto.inflight_mut()) {
                *n = n.saturating_sub(1);
            }
        }
        match u {
            CtxUse::Packet { xfer, bytes, req } => {
                self.out.event(EventKind::XferEnd, xfer, bytes, now);
                if let Some(r) = req {
                    self.reqs.finish(r);
                }
                Ok(())
            }
            CtxUse::Ctrl { req } => {
                if let Some(r) = req {
                    self.reqs.finish(r);
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
            } => self.on_write_done(now, req, xfer, (offset, bytes), mr, cached),
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
        let Some((t, slice, cacheable)) = self.flight.answered(token) else {
            return Err(ProtoError::Invalid(format!(
                "registration result for unknown token {token}"
            )));
        };
        self.key_fits(&key)?;
        let cached = cacheable && self.cfg.reg_cache;
        if cached {
            self.flight.cache(slice, mr, key.clone());
        }
        self.registered(now, t, slice, mr, key, cached)
    }

    /// The next operation to perform, in order; `None` when there is none.
    #[must_use]
    #[inline]
    pub fn poll_op(&mut self) -> Option<Op> {
        self.out.pop()
    }

    /// Whether an operation or an event waits to be taken
    /// ([`Self::poll_op`], [`Self::poll_event`]): a check for the caller
    /// after every input, which most inputs leave with nothing to do.
    #[inline(always)]
    pub fn has_output(&self) -> bool {
        self.out.has_output()
    }

    /// The next instrumentation event; `None` when there is none.
    #[must_use]
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.out.pop_event()
    }

    /// Whether `req` has finished (successfully or not).
    pub fn is_done(&self, req: ReqId) -> bool {
        // A posted receive nothing matched yet has no state.
        self.reqs
            .done(req.0)
            .unwrap_or_else(|| self.matching.posted(req.0).is_none())
    }

    /// Retire `req` if it finished: its status. `None` while it is still
    /// in progress (or unknown). A request never fails on its own: what
    /// goes wrong is an error of the input that found it.
    #[inline]
    pub fn take(&mut self, req: ReqId) -> Option<Status> {
        self.reqs.take(req.0)
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
    pub fn recycle_header(&mut self, header: HeaderBytes) {
        self.out.recycle(header);
    }

    /// What the engine has asked for so far (internal traffic excluded).
    pub fn counts(&self) -> Counts {
        self.out.counts()
    }

    /// Drop every cached registration (queues [`Op::Deregister`]s).
    pub fn flush_cache(&mut self) {
        for mr in self.flight.drain_cache() {
            self.dereg(mr);
        }
        self.flush_raw();
    }

    /// Whether a data operation (eager packet, write, read) is posted and
    /// not complete: an eager send's request finishes before its packet.
    pub fn data_ops_open(&self) -> bool {
        self.flight.data_ops_open()
    }

    /// Number of requests not yet retired (for leak checks and shutdown).
    pub fn in_flight(&self) -> usize {
        self.reqs.len() + self.matching.posted_len()
    }

    /// Direction, peer (None: any source not matched yet) and size of
    /// `req`, for error messages; `None` once retired.
    pub fn request_info(&self, req: ReqId) -> Option<(bool, Option<Rank>, usize)> {
        if let Some(p) = self.matching.posted(req.0) {
            return Some((false, p.peer(), p.buf.len));
        }
        self.reqs
            .get(req.0)
            .map(|r| (r.send, r.peer, if r.send { r.len } else { r.buf.len }))
    }

    // ---- shared helpers ----

    /// A transfer id: 0 (never recorded) while instrumentation is off, so
    /// a transfer begun then never shows up as END-only later.
    fn xfer_id(&mut self) -> u64 {
        if self.out.recording() {
            self.reqs.new_id()
        } else {
            0
        }
    }

    /// Record a posted write or read of `req` (see [`crate::state::Proto::inflight`]).
    fn track_rdma(&mut self, req: u64) {
        if let Some(n) = self.reqs.get_mut(req).and_then(|r| r.proto.inflight_mut()) {
            *n += 1;
        }
    }

    /// Queue a two-sided send with the general header `h`; returns its
    /// context.
    fn send_op(&mut self, peer: Rank, h: &Header, payload: Option<Slice>, u: CtxUse) -> u64 {
        let payload = payload.filter(|p| p.len > 0);
        let ctx = self.packet_ctx(h.flags, payload, u);
        let mut header = self.out.header_buf();
        h.encode_into(&mut header);
        self.out.push(Op::Send {
            peer,
            header: HeaderBytes::Long(header),
            payload,
            ctx,
        });
        ctx
    }

    /// A key we are about to send must fit one packet with its header.
    fn key_fits(&self, key: &Key) -> Result<(), ProtoError> {
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
    fn register(
        &mut self,
        now: u64,
        slice: Slice,
        cacheable: bool,
        t: crate::flight::Token,
    ) -> Result<(), ProtoError> {
        if cacheable && self.cfg.reg_cache {
            // Exact match: a key always covers exactly the slice it names.
            if let Some((mr, key)) = self.flight.cached(slice) {
                return self.registered(now, t, slice, mr, key, true);
            }
        }
        let token = self.reqs.new_id();
        self.flight.asked(token, t, slice, cacheable);
        self.out.counts_mut().registrations += 1;
        self.out.push(Op::Register { slice, token });
        Ok(())
    }

    fn dereg(&mut self, mr: MrId) {
        self.out.counts_mut().deregistrations += 1;
        self.out.push(Op::Deregister { mr });
    }

    /// A rendezvous whose peer did the RDMA ends at the peer's FIN: its
    /// transfer ends, its registration goes (unless cached), it is done.
    fn end_at_fin(
        &mut self,
        now: u64,
        req: u64,
        xfer: u64,
        len: usize,
        mr: Option<crate::state::Reg>,
    ) {
        self.out.event(EventKind::XferEnd, xfer, len, now);
        if let Some((mr, _, false)) = mr {
            self.dereg(mr);
        }
        self.reqs.finish(req);
    }

    /// The state of request `id`, which must still be there.
    fn req(&self, id: u64) -> Result<&Req, ProtoError> {
        self.reqs.get(id).ok_or_else(|| send::gone(id))
    }

    /// The state of request `id` to change, which must still be there.
    fn req_mut(&mut self, id: u64) -> Result<&mut Req, ProtoError> {
        self.reqs.get_mut(id).ok_or_else(|| send::gone(id))
    }

    /// The route a message runs (the plan's).
    #[inline]
    fn route(&self, len: usize, mode: Mode, space: Space) -> Route {
        self.cfg.plan.route(len, mode, space)
    }
}
