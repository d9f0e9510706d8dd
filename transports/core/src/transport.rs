//! The transport contract (layer 1: what every fabric crate implements).
//!
//! Semantics every implementation must honour — the conformance suite
//! (the `ovbench-conformance` crate) checks each one:
//!
//! * **Memory** is allocated by the transport ([`Transport::alloc`]) so it
//!   can be pinned, registered and reached by a progress thread; callers
//!   touch it only through [`Transport::read_region`] /
//!   [`Transport::write_region`]. [`Transport::register`] makes a range of
//!   it reachable by peers through the [`RemoteKey`] of
//!   [`Transport::remote_key`]; any one-sided access outside a live
//!   registration is rejected at the target with an error naming the
//!   initiator, never performed.
//! * **Two-sided sends** ([`Transport::post_send`]) carry one control or
//!   eager message of at most [`Caps::eager_buf_size`] bytes (header plus
//!   payload). The header bytes and payload are copied before the call
//!   returns, so the caller may reuse them at once. Receives are the
//!   transport's own pre-posted, credited buffers: a sender never
//!   overruns a receiver, and posting never fails for lack of a buffer
//!   (the transport queues internally). Messages from one peer arrive in
//!   the order they were posted.
//! * **Completions** ([`Transport::poll`], never blocking) carry the
//!   caller's [`Ctx`]. A send completes when the message has left for the
//!   peer (its buffer is reusable); a **write completes only when its
//!   data is visible at the target** (transports whose library completes
//!   early must flush or wait for the target's acknowledgement); a read
//!   completes when its data is in local memory. An error completion names
//!   the peer, the operation and the status.
//! * **Hand-over** ([`Transport::poll_arrivals`]): a transport may give a
//!   message's bytes to the caller's [`Arrivals`] while it still holds
//!   them, instead of queueing a [`Completion::Recv`]; each message goes
//!   one way or the other, and one peer's messages keep their order
//!   across both.
//! * **Ordering between kinds**: a FIN message posted after a write's
//!   completion is seen by the target only after the written data is
//!   visible (this follows from the write rule above).
//!
//! [`Caps::eager_buf_size`]: crate::Caps::eager_buf_size

use std::os::fd::RawFd;
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

/// What a transport is, for headers and JSON.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TransportInfo {
    /// `tcp`, `verbs`, `ucx`, `ofi`, `mpi`, `sim`.
    pub name: String,
    /// Device, provider or transport list actually in use (e.g. `rxe0:1`, `tcp;ofi_rxm`).
    pub device: String,
    /// Library name and version (`rdma-core 44.0`, `UCX 1.13.1`, …), empty if none.
    pub library: String,
    /// Further facts worth printing (MTU, GID index, `UCX_TLS`, …).
    pub extra: Vec<(String, String)>,
}

/// How a [`Transport::trecv_wait`] ended.
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
    /// The transport has no such path: post and poll instead.
    Unsupported,
}

/// One finished operation or one arrived message.
#[derive(Debug)]
pub enum Completion {
    /// A [`Transport::post_send`] has left; its buffer is reusable.
    Send {
        /// The context the send was posted with.
        ctx: Ctx,
    },
    /// A [`Transport::post_write`] is visible at the target.
    Write {
        /// The context the write was posted with.
        ctx: Ctx,
    },
    /// A [`Transport::post_read`]'s data is in local memory.
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
    /// A native tagged send completed.
    TaggedSend {
        /// The context the send was posted with.
        ctx: Ctx,
    },
    /// A native tagged receive completed with this envelope.
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
/// their bytes ([`Transport::poll_arrivals`]).
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
    /// Name, device and library for the header.
    fn info(&self) -> TransportInfo;
    /// What this transport can do.
    fn caps(&self) -> Caps;
    /// This process's rank.
    fn rank(&self) -> Rank;
    /// Number of ranks in the job.
    fn size(&self) -> u32;

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
    /// Read a range of local memory.
    fn read_region(&self, s: LocalSlice, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError>;
    /// Modify a range of local memory.
    fn write_region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError>;

    /// Register a range for one-sided access (and as a local RMA buffer).
    fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError>;
    /// Drop a registration; later accesses through its key are rejected.
    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError>;
    /// The key a peer needs to reach `mr`; offsets are relative to its start.
    fn remote_key(&self, mr: MrHandle) -> RemoteKey;

    /// Send one message: `header` then `payload` (if any), at most
    /// [`Caps::eager_buf_size`](crate::Caps::eager_buf_size) bytes together.
    fn post_send(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<(), TransportError>;
    /// [`post_send`](Self::post_send) that says whether the send finished
    /// inside the call: `Ok(true)` when the message left and its buffers
    /// are free again before returning, and then **no** completion for
    /// `ctx` is ever queued; `Ok(false)` when it is in flight and completes
    /// through [`poll`](Self::poll) as usual. A small message that a
    /// library sends at once (UCX short AM, libfabric inject) then costs
    /// its caller no queue and no poll. The default never finishes inline.
    fn post_send_inline(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        self.post_send(peer, header, payload, ctx).map(|()| false)
    }
    /// Write `local` (inside registration `mr`) to `remote` at `remote_offset`.
    fn post_write(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError>;
    /// Read `local.len` bytes from `remote` at `remote_offset` into `local`.
    fn post_read(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError>;

    /// Make progress and append finished work to `out`; never blocks.
    /// Returns how many completions were appended.
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError>;
    /// [`poll`](Self::poll) that may hand a two-sided message to
    /// `arrivals` the moment it arrives, instead of copying it into an
    /// owned buffer and queueing a [`Completion::Recv`]: no copy, no
    /// queue, no [`recycle`](Self::recycle). Each message goes one way or
    /// the other, and one peer's messages keep their order across both
    /// (one is handed over only when none of that peer's waits in the
    /// queue ahead of it). Returns completions appended plus messages
    /// handed over. The default hands none over.
    fn poll_arrivals(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: &mut dyn Arrivals,
    ) -> Result<usize, TransportError> {
        let _ = arrivals;
        self.poll(out)
    }
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

    /// A file descriptor that becomes readable when [`Self::poll`] may
    /// find something, for ranks that sleep instead of spinning.
    fn wait_fd(&self) -> Option<RawFd> {
        None
    }
    /// A hint from a caller whose last [`Self::poll`] found nothing and
    /// that will keep polling until something arrives (a blocking wait):
    /// a transport that sleeps after several empty polls may sleep at the
    /// next one. It must change no result, only save the polls between.
    /// The default ignores it.
    fn waiting(&mut self) {}

    /// A hint from a caller that spins on memory a peer writes with a
    /// one-sided operation (a raw write's last byte), whose arrival raises
    /// no completion: a transport that sleeps after a while of empty polls
    /// ([`Self::waiting`]) must not sleep before its next poll. The default
    /// ignores it.
    fn watching_memory(&mut self) {}

    /// Sleep until something may be ready or `timeout` passes. The
    /// default yields the CPU once.
    fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        let _ = timeout;
        std::thread::yield_now();
        Ok(())
    }

    /// Native tagged send (the library's own protocol). `sync` asks for
    /// completion only once the receive is matched (ssend).
    fn tsend(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        sync: bool,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        let _ = (peer, tag, src, sync, ctx);
        Err(TransportError::Unsupported(format!(
            "the {} transport has no native tagged protocol; use --proto eager, rdma-write, rdma-read, pipelined, auto or raw",
            self.info().name
        )))
    }
    /// [`tsend`](Self::tsend) that says whether the send finished inside
    /// the call, with the meaning of
    /// [`post_send_inline`](Self::post_send_inline): `Ok(true)` queues no
    /// completion for `ctx`. The default never finishes inline.
    fn tsend_inline(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        sync: bool,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        self.tsend(peer, tag, src, sync, ctx).map(|()| false)
    }
    /// A native tagged receive completed before returning: posted, then
    /// the library driven until it matched, for a caller with nothing else
    /// in flight (a blocking receive). It needs no queued completion, no
    /// request table and no poll loop of the caller's: on shared memory
    /// those were a third of a small message's one-way time. After
    /// `timeout` (or once the peer is found dead, an error) the receive is
    /// withdrawn. The default is [`Waited::Unsupported`].
    fn trecv_wait(
        &mut self,
        src: Option<Rank>,
        tag: Option<Tag>,
        dst: LocalSlice,
        timeout: Duration,
    ) -> Result<Waited, TransportError> {
        let _ = (src, tag, dst, timeout);
        Ok(Waited::Unsupported)
    }
    /// Native tagged receive; `None` is a wildcard.
    fn trecv(
        &mut self,
        src: Option<Rank>,
        tag: Option<Tag>,
        dst: LocalSlice,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        let _ = (src, tag, dst, ctx);
        Err(TransportError::Unsupported(format!(
            "the {} transport has no native tagged protocol",
            self.info().name
        )))
    }
}
