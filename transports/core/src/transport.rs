//! The transport contract (layer 1: what every fabric crate implements).
//!
//! [`Transport`] has eleven required methods and four provided ones; the
//! library's own tagged protocol is the optional sub-trait [`Tagged`]
//! ([`Transport::tagged`]). Semantics every implementation must honour —
//! the conformance suite (the `ovbench-conformance` crate) checks each one:
//!
//! * **What it is**: [`Transport::info`] names the transport and carries
//!   its rank, size and [`Caps`]. It builds strings: callers read it once
//!   (communicators cache caps, rank and size at construction), never on a
//!   hot path.
//! * **Memory** is allocated by the transport ([`Transport::alloc`]) so it
//!   can be pinned, registered and reached by a progress thread; callers
//!   touch it only through [`Transport::region`].
//!   [`Transport::register`] makes a range of it reachable by peers
//!   through the [`RemoteKey`] it returns ([`Registered`]); any one-sided
//!   access outside a live registration is rejected at the target with an
//!   error naming the initiator, never performed.
//! * **Two-sided sends** ([`Transport::post_send`]) carry one control or
//!   eager message of at most [`Caps::eager_buf_size`] bytes (header plus
//!   payload). The header bytes and payload are copied before the call
//!   returns, so the caller may reuse them at once. Receives are the
//!   transport's own pre-posted, credited buffers: a sender never
//!   overruns a receiver, and posting never fails for lack of a buffer
//!   (the transport queues internally). Messages from one peer arrive in
//!   the order they were posted.
//! * **When a send ends** ([`Posted`], for [`Transport::post_send`] and
//!   [`Tagged::tsend`]): exactly one of two ways, never both, never
//!   neither. [`Posted::Done`] — the message left inside the call, its
//!   buffers are free, and **no** completion for its `ctx` is ever queued:
//!   the caller records the end itself, at the time given (never later
//!   than the call's return) or, with `None`, at its own clock's reading.
//!   [`Posted::Queued`] — exactly one completion for `ctx` comes from a
//!   later [`Transport::poll`].
//! * **Completions** ([`Transport::poll`], never blocking) carry the
//!   caller's [`Ctx`]. A send completes when the message has left for the
//!   peer (its buffer is reusable); a **write completes only when its
//!   data is visible at the target** (transports whose library completes
//!   early must flush or wait for the target's acknowledgement); a read
//!   completes when its data is in local memory. An error completion names
//!   the peer, the operation and the status.
//! * **Hand-over** (the `arrivals` of [`Transport::poll`]): a transport
//!   may give a message's bytes to the caller's [`Arrivals`] while it
//!   still holds them, instead of queueing a [`Completion::Recv`]; each
//!   message goes one way or the other, and one peer's messages keep their
//!   order across both.
//! * **Ordering between kinds**: a FIN message posted after a write's
//!   completion is seen by the target only after the written data is
//!   visible (this follows from the write rule above).
//! * **Hints** ([`Transport::idle`]) change no result, only how the
//!   transport spends the time between polls.
//!
//! [`Caps::eager_buf_size`]: crate::Caps::eager_buf_size

use std::time::{Duration, Instant};

use crate::{Caps, OpKind, RemoteKey, TransportError};

/// A process's index in the job, `0..size`.
pub type Rank = u32;
/// A message tag (MPI-style; wildcards are expressed by [`crate::TagSel`]).
pub type Tag = u32;
/// The caller's context value, returned in the operation's completion.
pub type Ctx = u64;

/// A block of transport-owned memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u32);

/// A range of a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalSlice {
    /// The region the range lies in.
    pub region: RegionId,
    /// Start of the range, in bytes from the start of the region.
    pub offset: usize,
    /// Length of the range in bytes.
    pub len: usize,
}

impl LocalSlice {
    /// The `len` bytes at `offset` of `region` (not checked against the
    /// region's size; the transport checks on use).
    pub fn new(region: RegionId, offset: usize, len: usize) -> Self {
        LocalSlice {
            region,
            offset,
            len,
        }
    }
    /// The sub-range `[off, off+len)` of this slice (caller checks bounds).
    pub fn sub(&self, off: usize, len: usize) -> LocalSlice {
        debug_assert!(off + len <= self.len);
        LocalSlice::new(self.region, self.offset + off, len)
    }
}

/// A live memory registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MrHandle(pub u32);

/// What a transport is, for headers and JSON, plus the facts callers
/// cache at construction (rank, size, capabilities).
#[derive(Clone, Debug, serde::Serialize)]
pub struct TransportInfo {
    /// `tcp`, `verbs`, `ucx`, `ofi`, `mpi`, `sim`.
    pub name: String,
    /// Device, provider or transport list actually in use (e.g. `rxe0:1`, `tcp;ofi_rxm`).
    pub device: String,
    /// Library name and version (`rdma-core 44.0`, `UCX 1.13.1`, …), empty if none.
    pub library: String,
    /// Further facts worth printing (MTU, GID index, `UCX_TLS`, …).
    pub extra: Vec<(String, String)>,
    /// What the transport can do (printed in the JSON as the
    /// communicator's `caps`, not here).
    #[serde(skip)]
    pub caps: Caps,
    /// This process's rank.
    #[serde(skip)]
    pub rank: Rank,
    /// Number of ranks in the job.
    #[serde(skip)]
    pub size: u32,
}

/// A live registration and the key a peer needs to reach it (offsets
/// are relative to its start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The registration, for [`Transport::post_rma`] and
    /// [`Transport::deregister`].
    pub mr: MrHandle,
    /// What a peer needs to reach it.
    pub key: RemoteKey,
}

/// Which way a one-sided operation moves the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rma {
    /// Local to remote; completes once visible at the target.
    Write,
    /// Remote to local; completes once the data is in local memory.
    Read,
}

impl Rma {
    /// The operation kind, for errors.
    pub fn op(self) -> OpKind {
        match self {
            Rma::Write => OpKind::Write,
            Rma::Read => OpKind::Read,
        }
    }
}

/// A one-sided operation's operands ([`Transport::post_rma`]): [`Rma::Write`]
/// `local` (inside registration `mr`) to `remote` at `remote_offset`, or
/// [`Rma::Read`] `local.len` bytes from there into `local`.
#[derive(Clone, Copy, Debug)]
pub struct RmaOp<'a> {
    /// Which way the bytes move.
    pub op: Rma,
    /// The local range, inside `mr`.
    pub local: LocalSlice,
    /// The local range's registration.
    pub mr: MrHandle,
    /// The target's registration, as its owner published it.
    pub remote: &'a RemoteKey,
    /// Where in `remote` the operation starts, in bytes.
    pub remote_offset: u64,
}

impl<'a> RmaOp<'a> {
    /// Write `local` to `remote` at `offset`.
    pub fn write(local: LocalSlice, mr: MrHandle, remote: &'a RemoteKey, offset: u64) -> Self {
        RmaOp {
            op: Rma::Write,
            local,
            mr,
            remote,
            remote_offset: offset,
        }
    }

    /// Read `local.len` bytes from `remote` at `offset` into `local`.
    pub fn read(local: LocalSlice, mr: MrHandle, remote: &'a RemoteKey, offset: u64) -> Self {
        RmaOp {
            op: Rma::Read,
            ..Self::write(local, mr, remote, offset)
        }
    }
}

/// How a send ([`Transport::post_send`], [`Tagged::tsend`]) left the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// It finished inside the call: its buffers are free and no
    /// completion for its `ctx` is ever queued. The caller records the
    /// completion itself, at this time, or (`None`) at its own clock's
    /// reading.
    Done(Option<CompletionTime>),
    /// It is in flight: exactly one completion for its `ctx` comes from a
    /// later [`Transport::poll`].
    Queued,
}

impl Posted {
    /// [`Posted::Done`] at the caller's clock where `done`, else
    /// [`Posted::Queued`]: for a library that says only whether it sent
    /// at once.
    #[inline]
    pub fn done_if(done: bool) -> Self {
        if done {
            Posted::Done(None)
        } else {
            Posted::Queued
        }
    }
}

/// A two-sided message's operands ([`Transport::post_send`]): `header`,
/// then `payload` (if any).
#[derive(Clone, Copy, Debug)]
pub struct Msg<'a> {
    /// The bytes that go first (a protocol header; may be empty).
    pub header: &'a [u8],
    /// A range of a region sent after the header.
    pub payload: Option<LocalSlice>,
}

impl<'a> Msg<'a> {
    /// `header`, then `payload` (if any).
    #[inline]
    pub fn new(header: &'a [u8], payload: Option<LocalSlice>) -> Self {
        Msg { header, payload }
    }

    /// Header and payload bytes together.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.header.len() + self.payload.map_or(0, |p| p.len)
    }

    /// [`Self::bytes`], or the refusal of a message to `peer` over an
    /// eager buffer of `limit` bytes (the contract refuses it at post).
    #[inline]
    pub fn within(&self, peer: Rank, limit: usize) -> Result<usize, TransportError> {
        let total = self.bytes();
        if total > limit {
            return Err(over_eager_buffer(total, peer, limit));
        }
        Ok(total)
    }
}

#[cold]
fn over_eager_buffer(total: usize, peer: Rank, limit: usize) -> TransportError {
    TransportError::Invalid(format!(
        "message of {total} bytes to rank {peer} exceeds the {limit}-byte eager buffer: split it or use a rendezvous protocol"
    ))
}

/// A tagged send's operands ([`Tagged::tsend`]): `src` to `peer` with
/// `tag`; `sync` asks for completion only once the receive is matched
/// (ssend; [`Caps::native_sync_send`](crate::Caps::native_sync_send) says
/// whether the library can).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagSend {
    /// The receiving rank.
    pub peer: Rank,
    /// The message's tag.
    pub tag: Tag,
    /// What is sent.
    pub src: LocalSlice,
    /// Synchronous: complete once matched.
    pub sync: bool,
}

impl TagSend {
    /// `src` to `peer` with `tag`, synchronous where `sync`.
    #[inline]
    pub fn new(peer: Rank, tag: Tag, src: LocalSlice, sync: bool) -> Self {
        TagSend {
            peer,
            tag,
            src,
            sync,
        }
    }
}

/// A tagged receive's operands ([`Tagged::trecv`],
/// [`Tagged::trecv_wait`]): the message from `src` with `tag` (`None`: a
/// wildcard) into `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagRecv {
    /// The sending rank, or any.
    pub src: Option<Rank>,
    /// The tag, or any.
    pub tag: Option<Tag>,
    /// Where the message lands.
    pub dst: LocalSlice,
}

impl TagRecv {
    /// From `src` with `tag` (`None`: any) into `dst`.
    #[inline]
    pub fn new(src: Option<Rank>, tag: Option<Tag>, dst: LocalSlice) -> Self {
        TagRecv { src, tag, dst }
    }
}

/// Why a caller is idle ([`Transport::idle`]): hints that change no
/// result, only the time spent between polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// The last [`Transport::poll`] found nothing and the caller will keep
    /// polling until something arrives (a blocking wait): a transport that
    /// sleeps after several empty polls may sleep at the next one.
    EmptyPoll,
    /// The caller spins on memory a peer writes with a one-sided operation
    /// (a raw write's last byte), whose arrival raises no completion: a
    /// transport that sleeps after a while of empty polls must not sleep
    /// before its next poll.
    WatchingMemory,
    /// Sleep until something may be ready or this much time passes.
    Block(Duration),
}

/// How a [`Tagged::trecv_wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waited {
    /// The receive matched a message from `peer` with `tag`, of `len` bytes.
    Done {
        /// The sender's rank.
        peer: Rank,
        /// The message's tag.
        tag: Tag,
        /// Bytes received into the slice.
        len: usize,
    },
    /// Nothing matched within the time allowed; the receive was withdrawn.
    TimedOut,
}

/// One finished operation or one arrived message.
#[derive(Debug)]
pub enum Completion {
    /// A [`Transport::post_send`] that returned [`Posted::Queued`] has
    /// left; its buffer is reusable.
    Send {
        /// The context the send was posted with.
        ctx: Ctx,
    },
    /// A [`Rma::Write`] is visible at the target.
    Write {
        /// The context the write was posted with.
        ctx: Ctx,
    },
    /// A [`Rma::Read`]'s data is in local memory.
    Read {
        /// The context the read was posted with.
        ctx: Ctx,
    },
    /// A two-sided message arrived from `peer`. Hand `data` back with
    /// [`Transport::recycle`] when done so its allocation is reused.
    Recv {
        /// The sender's rank.
        peer: Rank,
        /// The whole message, header included, as the peer posted it.
        data: Vec<u8>,
    },
    /// A [`Tagged::tsend`] that returned [`Posted::Queued`] completed.
    TaggedSend {
        /// The context the send was posted with.
        ctx: Ctx,
    },
    /// A [`Tagged::trecv`] completed with this envelope.
    TaggedRecv {
        /// The context the receive was posted with.
        ctx: Ctx,
        /// The matched sender's rank.
        peer: Rank,
        /// The matched message's tag.
        tag: Tag,
        /// Bytes received.
        len: usize,
    },
    /// An operation failed.
    Error {
        /// The failed operation's context; `None` when the failure belongs
        /// to no posted operation (a broken connection, a bad arrival).
        ctx: Option<Ctx>,
        /// The peer the operation was with.
        peer: Rank,
        /// What kind of operation failed.
        op: OpKind,
        /// The library's status, in words.
        status: String,
    },
}

/// Where an arrived message's bytes go: the transport copies
/// `data[src_start..src_start + dst.len]` into `dst` before it lets go of
/// `data` ([`Arrivals::arrived`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The local slice the bytes go to; `dst.len` bytes are copied.
    pub dst: LocalSlice,
    /// Index in the message's bytes where the copied range starts.
    pub src_start: usize,
}

/// The taker of messages that a transport hands over while it still holds
/// their bytes (the `arrivals` of [`Transport::poll`]).
pub trait Arrivals {
    /// One whole message from `peer`. An `Err` stops the hand-over: the
    /// transport returns it from that poll.
    fn arrived(&mut self, peer: Rank, data: &[u8]) -> Result<Option<Placement>, TransportError>;
}

/// When a completion finished, as the device stamped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionTime {
    /// A host time (a NIC's clock carried onto the host's).
    Host(Instant),
    /// A reading of the communicator's own clock (a virtual NIC under the
    /// simulator, whose clock is virtual).
    Ticks(u64),
}

/// A connected set of endpoints, one per peer rank. See the module docs
/// for the semantics every method must honour.
pub trait Transport: Send {
    /// Name, device, library, rank, size and capabilities. Builds strings:
    /// read it once, not on a hot path.
    fn info(&self) -> TransportInfo;

    /// This endpoint's address bytes for the bootstrap exchange.
    fn address(&self) -> Vec<u8>;
    /// Connect to every peer; `addresses[r]` is rank `r`'s [`Self::address`]
    /// (own entry included). Collective: every rank calls it.
    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError>;

    /// Allocate `len` bytes of zeroed, page-aligned memory.
    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError>;
    /// Release a region. Its registrations must be gone, and no operation
    /// posted on it (a send, receive, write or read, tagged or not) may
    /// still be in flight: the library may be reading or writing it until
    /// the operation's completion is polled. Transports that hand the
    /// region to a library by pointer rely on this rule for their safety.
    fn free(&mut self, region: RegionId) -> Result<(), TransportError>;
    /// Read or modify a range of local memory.
    fn region(&mut self, s: LocalSlice, f: &mut dyn FnMut(&mut [u8]))
        -> Result<(), TransportError>;

    /// Register a range for one-sided access (and as a local RMA buffer);
    /// the returned key is what a peer needs to reach it.
    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError>;
    /// Drop a registration; later accesses through its key are rejected.
    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError>;

    /// Send one message: `msg`'s header then its payload (if any), at
    /// most [`Caps::eager_buf_size`](crate::Caps::eager_buf_size) bytes
    /// together.
    /// Says whether it finished inside the call ([`Posted`]): a small
    /// message that a library sends at once (UCX short AM, libfabric
    /// inject) then costs its caller no queue and no poll.
    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError>;
    /// One-sided: the operation `rma` against `peer`'s memory. Completes
    /// through [`Self::poll`].
    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError>;

    /// Make progress and append finished work to `out`; never blocks.
    /// With `arrivals`, a two-sided message may be handed to it the moment
    /// it arrives instead of being copied into an owned buffer and queued
    /// as a [`Completion::Recv`]: no copy, no queue, no
    /// [`recycle`](Self::recycle). Each message goes one way or the other,
    /// and one peer's messages keep their order across both (one is handed
    /// over only when none of that peer's waits in the queue ahead of it).
    /// Returns completions appended plus messages handed over.
    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError>;

    /// When the device timestamps completions: the time at which the
    /// completion at `index` of the last [`Self::poll`]'s `out` (counted
    /// from the length `out` had before that call) finished — a NIC's
    /// stamp converted to the host clock, or (the simulator's NIC) a
    /// reading of the communicator's clock. It is usually earlier than
    /// the call that takes it; the overlap bounds fold it at its own time.
    /// `None` (the default, and for a device without timestamps): the
    /// caller stamps the completion with its own clock when it takes it.
    fn completion_time(&self, index: usize) -> Option<CompletionTime> {
        let _ = index;
        None
    }
    /// Give back a received message's buffer for reuse.
    fn recycle(&mut self, data: Vec<u8>) {
        drop(data);
    }
    /// A hint from an idle caller ([`Idle`]); it must change no result.
    /// The default ignores the hints and, for [`Idle::Block`], yields the
    /// CPU once.
    fn idle(&mut self, why: Idle) -> Result<(), TransportError> {
        if let Idle::Block(_) = why {
            std::thread::yield_now();
        }
        Ok(())
    }
    /// The library's own tagged protocol, where the transport has one.
    fn tagged(&mut self) -> Option<&mut dyn Tagged> {
        None
    }
}

/// The library's own tagged protocol (UCX tag matching, libfabric
/// tagged messages), reached through [`Transport::tagged`]. Its
/// completions come from [`Transport::poll`].
pub trait Tagged: Transport {
    /// Tagged send ([`TagSend`]). Says whether it finished inside the
    /// call, as [`Transport::post_send`] does.
    fn tsend(&mut self, op: TagSend, ctx: Ctx) -> Result<Posted, TransportError>;
    /// Tagged receive ([`TagRecv`]). Completes as a
    /// [`Completion::TaggedRecv`].
    fn trecv(&mut self, op: TagRecv, ctx: Ctx) -> Result<(), TransportError>;
    /// A tagged receive completed before returning: posted, then the
    /// library driven until it matched, for a caller with nothing else in
    /// flight (a blocking receive). It needs no queued completion, no
    /// request table and no poll loop of the caller's: on shared memory
    /// those were a third of a small message's one-way time. After
    /// `timeout` (or once the peer is found dead, an error) the receive is
    /// withdrawn where the library can; one that posts and polls
    /// ([`trecv_wait_polling`]) may leave it posted, and the caller ends
    /// the run.
    fn trecv_wait(&mut self, op: TagRecv, timeout: Duration) -> Result<Waited, TransportError>;
    /// The library's own call for each point-to-point operation and its
    /// collectives (MPI), where it has them; `None` (the default) where
    /// the native path builds them from [`Self::tsend`] and
    /// [`Self::trecv`].
    fn library(&mut self) -> Option<&mut dyn crate::LibraryCalls> {
        None
    }
}

/// [`Tagged::trecv_wait`] for a transport whose library has no blocking
/// receive of its own (or cannot use it, as under a progress thread):
/// post [`Tagged::trecv`] with a context of its own, then poll until it
/// completes or `timeout` passes. Completions of other operations that
/// the polls bring go to `held`, for the transport to hand out first at
/// its next [`Transport::poll`]. A receive that timed out stays posted
/// where the library cannot withdraw it; the caller ends the run.
pub fn trecv_wait_polling<T: Transport + Tagged>(
    t: &mut T,
    held: &mut Vec<Completion>,
    op: TagRecv,
    timeout: Duration,
) -> Result<Waited, TransportError> {
    /// Each wait's context counts down from the top (callers' contexts
    /// count up from small numbers), so a receive left posted by a wait
    /// that timed out is never taken for a later wait's.
    static WAITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let wait_ctx: Ctx = u64::MAX - WAITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    t.trecv(op, wait_ctx)?;
    let TagRecv { src, tag, dst } = op;
    // The polls append to `held` itself (no buffer of the wait's own to
    // allocate per receive); the waited completion is taken back out.
    let mut start: Option<Instant> = None;
    let mut spins = 0u32;
    let mut seen = held.len();
    loop {
        t.poll(held, None)?;
        let mine = held[seen..].iter().enumerate().find_map(|(i, c)| match c {
            Completion::TaggedRecv {
                ctx,
                peer,
                tag,
                len,
            } if *ctx == wait_ctx => Some((
                i,
                Ok(Waited::Done {
                    peer: *peer,
                    tag: *tag,
                    len: *len,
                }),
            )),
            Completion::Error {
                ctx: Some(ctx),
                peer,
                op,
                status,
            } if *ctx == wait_ctx => Some((
                i,
                Err(TransportError::Peer {
                    peer: *peer,
                    op: *op,
                    status: status.clone(),
                }),
            )),
            _ => None,
        });
        if let Some((i, outcome)) = mine {
            held.remove(seen + i);
            return outcome;
        }
        seen = held.len();
        spins = spins.wrapping_add(1);
        let what = || (src, crate::watch::receive_what(src, tag, dst.len));
        if spins % 1024 == 0 && crate::watch::check_wait(&mut start, timeout, what)? {
            return Ok(Waited::TimedOut);
        }
        t.idle(Idle::EmptyPoll)?;
    }
}
