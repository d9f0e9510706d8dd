//! The communicator: the point-to-point API every method is written
//! against (layer 3, above the transports and the protocol engine), plus
//! the clock and work loop.
//!
//! Methods in `src/` see only this trait, so the same code runs over the
//! engine's own protocols on any transport, over a library's native
//! tagged path, and under the sim's virtual time.

use serde::Serialize;

use crate::{Bound, Caps, Clock, Rank, RegionId, Result, Tag, TransportError, TransportInfo};

/// Receive from any rank.
pub const ANY_SOURCE: Source = None;
/// Receive any tag.
pub const ANY_TAG: TagSel = None;
/// A receive's source selector (`None` = any).
pub type Source = Option<Rank>;
/// A receive's tag selector (`None` = any).
pub type TagSel = Option<Tag>;

/// A communicator-owned buffer (transport memory), cheap to copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    /// The transport region behind the buffer.
    pub region: RegionId,
    /// The buffer's size in bytes; every `off + len` an operation names
    /// must stay within it.
    pub len: usize,
}

impl Buf {
    /// The `len` bytes at `off`: `buf[off..off+len]`.
    pub fn at(self, off: usize, len: usize) -> Span {
        Span {
            buf: self,
            off,
            len,
        }
    }
    /// The buffer's first `len` bytes.
    pub fn first(self, len: usize) -> Span {
        self.at(0, len)
    }
}

/// `buf[off..off+len]`: the data a send takes or the room a receive
/// fills. Checked against the buffer when an operation uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The buffer the bytes lie in.
    pub buf: Buf,
    /// Where they start, in bytes from the buffer's start.
    pub off: usize,
    /// How many bytes.
    pub len: usize,
}

/// A pending non-blocking operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Req(pub u64);

/// How a send completes (MPI's four modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SendMode {
    /// The protocol decides (eager buffers, rendezvous waits).
    Standard,
    /// Completes once the data is copied out of the user buffer.
    Buffered,
    /// Completes only once the matching receive is posted (ssend).
    Synchronous,
    /// The receive is known to be posted: skip the handshake; an error
    /// naming the peer if it is not.
    Ready,
}

/// A completed receive's (or send's) envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// The sender's rank (for a send, the destination).
    pub source: Rank,
    /// The message's tag (a wildcard receive learns it here).
    pub tag: Tag,
    /// Bytes the message carried (at most the receive's `len`).
    pub len: usize,
}

/// What each protocol really did, counted per run (JSON `ops`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
pub struct OpCounts {
    /// Two-sided messages posted (eager, control, raw send).
    pub sends: u64,
    /// One-sided writes posted.
    pub writes: u64,
    /// One-sided reads posted.
    pub reads: u64,
    /// Native tagged sends posted (library protocol).
    pub tagged_sends: u64,
    /// Payload bytes moved by the operations above.
    pub bytes: u64,
    /// Memory registrations performed (registration cache misses).
    pub registrations: u64,
    /// Sends the engine made on its fast path (one packet, done as
    /// posted; counted in `sends` too).
    pub fast_sends: u64,
    /// Arrivals the engine took on its fast path.
    pub fast_recvs: u64,
}

impl OpCounts {
    /// Difference `self − earlier`, for per-size counts.
    pub fn since(&self, earlier: &OpCounts) -> OpCounts {
        OpCounts {
            sends: self.sends - earlier.sends,
            writes: self.writes - earlier.writes,
            reads: self.reads - earlier.reads,
            tagged_sends: self.tagged_sends - earlier.tagged_sends,
            bytes: self.bytes - earlier.bytes,
            registrations: self.registrations - earlier.registrations,
            fast_sends: self.fast_sends - earlier.fast_sends,
            fast_recvs: self.fast_recvs - earlier.fast_recvs,
        }
    }
}

/// How a communicator moves messages: ovbench's engine under a protocol
/// (`Protocol::Raw` carrying the bare operation), or a library's native
/// path. Printed and serialized by its name (`eager`, `raw-read`, `native`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommPath {
    /// ovbench's protocol engine over the transport, running this protocol.
    Engine(crate::engine_comm::Protocol),
    /// The library's own tagged protocol ([`crate::Tagged::tsend`] /
    /// [`crate::Tagged::trecv`]); ovbench sees no transfer inside it.
    Native,
}

impl CommPath {
    /// The bare operation of `--proto raw`, if that is the path.
    pub fn raw_op(self) -> Option<crate::engine_comm::RawOp> {
        match self {
            CommPath::Engine(crate::engine_comm::Protocol::Raw(op)) => Some(op),
            _ => None,
        }
    }
}

impl std::fmt::Display for CommPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CommPath::Engine(p) => return p.fmt(f),
            CommPath::Native => "native",
        })
    }
}

impl Serialize for CommPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Facts about a communicator for headers and JSON.
#[derive(Clone, Debug, Serialize)]
pub struct CommInfo {
    /// The transport underneath: name, device, library.
    pub transport: TransportInfo,
    /// What the transport can do.
    pub caps: Caps,
    /// How messages move: an engine protocol (with its raw operation) or
    /// the library's native path.
    pub protocol: CommPath,
    /// How the engine moves messages (in the JSON as `eager_limit`).
    #[serde(skip)]
    pub plan: crate::engine_comm::Plan,
    /// Auto's eager limit, where it came from and the cost model's
    /// inputs: `{bytes, source, inputs}`.
    pub eager_limit: crate::EagerLimit,
}

/// The point-to-point API. Errors name the peer; every wait honours the
/// communicator's timeout.
pub trait Communicator {
    /// This process's rank, `0..size`.
    fn rank(&self) -> Rank;
    /// Number of ranks in the job.
    fn size(&self) -> u32;
    /// Transport, capabilities and protocol, for headers and JSON.
    fn info(&self) -> CommInfo;

    /// The communicator's clock (cycle counter, or virtual under sim).
    fn clock(&self) -> &dyn Clock;
    /// Current time in clock ticks.
    fn now(&self) -> u64 {
        self.clock().ticks()
    }
    /// The blocking standard send of `data` to `peer` and receive into
    /// `room` from `peer`, both with `tag`, bound once for a loop that
    /// repeats them (a ping-pong's; see [`Bound`]). `None` where the path
    /// has no such binding, or while calls are recorded: the loop then
    /// makes the communicator's own calls.
    fn bind_pair(
        &mut self,
        data: Span,
        room: Span,
        peer: Rank,
        tag: Tag,
    ) -> Result<Option<Bound<'_>>> {
        let _ = (data, room, peer, tag);
        Ok(None)
    }
    /// Send auto's later messages eagerly up to `limit.bytes`, and report
    /// `limit` as the run's eager limit (chosen once at start, between
    /// messages, on every rank alike).
    fn set_eager_limit(&mut self, limit: crate::EagerLimit) -> Result<()>;
    /// Spend `units` of calibrated computation, calling no communication
    /// function.
    fn work(&mut self, units: u64);
    /// Nanoseconds one work unit takes (calibrated; exact under sim).
    fn work_unit_ns(&self) -> f64;
    /// Whether this rank shares its CPU with other ranks or threads (its
    /// waits then yield): its timings then carry the scheduler's delays,
    /// and a repetition rule's spread cutoff may be out of reach.
    fn shares_cpu(&self) -> bool {
        false
    }
    /// Nanoseconds this rank's waits have spent yielding its CPU so far
    /// (0 where waits never yield).
    fn yielded_ns(&self) -> u64 {
        0
    }
    /// Spin for `ns` nanoseconds without calling any communication function.
    fn delay(&mut self, ns: f64);

    /// Allocate a buffer usable by every operation below.
    fn alloc(&mut self, len: usize) -> Result<Buf>;
    /// Write into a buffer (outside any timed region).
    fn fill(&mut self, buf: Buf, f: &mut dyn FnMut(&mut [u8])) -> Result<()>;
    /// Read a buffer (outside any timed region).
    fn inspect(&mut self, buf: Buf, f: &mut dyn FnMut(&[u8])) -> Result<()>;

    /// Start sending `data` to `dst`.
    fn isend_mode(&mut self, data: Span, dst: Rank, tag: Tag, mode: SendMode) -> Result<Req>;
    /// Start receiving up to `room.len` bytes into `room`.
    fn irecv(&mut self, room: Span, src: Source, tag: TagSel) -> Result<Req>;
    /// Whether `req` finished (it is then retired).
    fn test(&mut self, req: Req) -> Result<Option<Status>>;
    /// Block until `req` finishes.
    fn wait(&mut self, req: Req) -> Result<Status>;
    /// Drive progress once.
    fn progress(&mut self) -> Result<()>;
    /// Every rank enters before any leaves.
    fn barrier(&mut self) -> Result<()>;
    /// Operations posted so far.
    fn op_counts(&self) -> OpCounts;

    /// The start of one communicator call made of several (a blocking
    /// call built from its nonblocking parts, below), so that a recorder
    /// sees one CALL_ENTER/CALL_EXIT pair around them. A communicator that
    /// records nothing ignores it.
    fn enter_call(&mut self) {}
    /// The end of the call [`Self::enter_call`] began.
    fn exit_call(&mut self) {}

    // ---- provided: instrumentation (off unless enabled) ----

    /// Start recording CALL/XFER events, with `table` as xfer_time(size)
    /// for the overlap bounds (see [`crate::instrument`]). Communicators
    /// that cannot record say so.
    fn enable_instrumentation(&mut self, table: crate::instrument::XferTable) -> Result<()> {
        let _ = table;
        Err(TransportError::Unsupported(
            "this communicator records no transfer events".into(),
        ))
    }
    /// Stop recording and drop the totals.
    fn disable_instrumentation(&mut self) {}
    /// How the protocol engine moves a message, for a communicator over
    /// one (`None` on the native library paths).
    fn engine_shape(&self) -> Option<crate::engine_comm::EngineShape> {
        None
    }
    /// Run later messages as the bare operation `op` (`--proto raw`
    /// semantics), or with `None` as this communicator's own protocol
    /// again: the overlap method times the operations that move a
    /// message's data through the same communicator on the same
    /// transport. Between messages only; every rank switches at the same
    /// point. A native library path runs them on the engine path over its
    /// transport.
    fn set_bare_op(&mut self, op: Option<crate::engine_comm::RawOp>) -> Result<()>;
    /// Drive progress until every data transfer this rank posted has
    /// completed, so that its XFER_END is recorded now (an eager send's
    /// request finishes before its packet does). One communicator call;
    /// a communicator whose transfers end inside the calls that complete
    /// them (the native library paths) has nothing to wait for.
    fn drain_transfers(&mut self) -> Result<()>;
    /// The library's own broadcast of `data` from `root`
    /// (`MPI_Bcast`; bcast's `--algorithm library`), collective. An
    /// error where the communicator runs over no library that has one.
    fn bcast_library(&mut self, data: Span, root: Rank) -> Result<()> {
        let _ = (data, root);
        Err(TransportError::Unsupported(
            "--algorithm library is the MPI library's own broadcast: run it with --transport mpi --proto native".into(),
        ))
    }
    /// The recorder, while enabled (reset it per step, read reports).
    fn instrumentation(&mut self) -> Option<&mut crate::instrument::Instrumentation> {
        None
    }
    /// The overlap bounds so far, while recording.
    fn overlap_report(&mut self) -> Option<crate::instrument::OverlapReport> {
        let now = self.now();
        self.instrumentation().map(|i| i.report(now))
    }

    /// This rank's clock against rank 0's, from `rounds` round trips per
    /// rank (collective; see [`crate::clock_sync`]). Call it twice, apart
    /// in time, and combine with [`crate::ClockSync::with_drift`] for drift.
    fn sync_clock(&mut self, rounds: u32) -> Result<crate::ClockSync> {
        crate::clock_sync::measure(self, rounds)
    }

    // ---- provided: the rest of the MPI-style API ----

    /// Start a standard-mode send of `data` to `dst`
    /// (`MPI_Isend`); finish it with [`Self::wait`] or [`Self::test`].
    fn isend(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<Req> {
        self.isend_mode(data, dst, tag, SendMode::Standard)
    }
    /// Start a synchronous send (`MPI_Issend`): it completes only once the
    /// matching receive is posted.
    fn issend(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<Req> {
        self.isend_mode(data, dst, tag, SendMode::Synchronous)
    }
    /// Start a ready-mode send (`MPI_Irsend`): the matching receive must
    /// already be posted, else the receiver reports an error naming this
    /// rank.
    fn irsend(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<Req> {
        self.isend_mode(data, dst, tag, SendMode::Ready)
    }
    /// Start a buffered send (`MPI_Ibsend`): always eager, complete once
    /// the data is copied out of `data`.
    fn ibsend(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<Req> {
        self.isend_mode(data, dst, tag, SendMode::Buffered)
    }
    /// A send in `mode` waited for, as one communicator call: what
    /// [`Self::send`], [`Self::ssend`], [`Self::rsend`] and
    /// [`Self::bsend`] run. A communicator over a library with blocking
    /// calls of its own runs those instead.
    fn send_mode(&mut self, data: Span, dst: Rank, tag: Tag, mode: SendMode) -> Result<()> {
        one_call(self, |c| {
            let r = c.isend_mode(data, dst, tag, mode)?;
            c.wait(r).map(|_| ())
        })
    }
    /// Standard-mode send, waited for (`MPI_Send`).
    fn send(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<()> {
        self.send_mode(data, dst, tag, SendMode::Standard)
    }
    /// Synchronous send, waited for (`MPI_Ssend`): returns once the
    /// receive has matched.
    fn ssend(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<()> {
        self.send_mode(data, dst, tag, SendMode::Synchronous)
    }
    /// Ready-mode send, waited for (`MPI_Rsend`).
    fn rsend(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<()> {
        self.send_mode(data, dst, tag, SendMode::Ready)
    }
    /// Buffered send, waited for (`MPI_Bsend`).
    fn bsend(&mut self, data: Span, dst: Rank, tag: Tag) -> Result<()> {
        self.send_mode(data, dst, tag, SendMode::Buffered)
    }
    /// Receive up to `room.len` bytes into `room` and wait for it
    /// (`MPI_Recv`); the status says who sent how much with which tag.
    fn recv(&mut self, room: Span, src: Source, tag: TagSel) -> Result<Status> {
        one_call(self, |c| {
            let r = c.irecv(room, src, tag)?;
            c.wait(r)
        })
    }
    /// Send and receive at once (no deadlock whatever the partner does).
    #[allow(clippy::too_many_arguments)]
    fn sendrecv(
        &mut self,
        data: Span,
        dst: Rank,
        stag: Tag,
        room: Span,
        src: Source,
        rtag: TagSel,
    ) -> Result<Status> {
        one_call(self, |c| {
            let r = c.irecv(room, src, rtag)?;
            let s = c.isend(data, dst, stag)?;
            c.wait(s)?;
            c.wait(r)
        })
    }
    /// Wait for every request, in order.
    fn waitall(&mut self, reqs: &[Req]) -> Result<Vec<Status>> {
        one_call(self, |c| reqs.iter().map(|&r| c.wait(r)).collect())
    }
}

/// `f` on `c` as one communicator call: the blocking calls are built from
/// their nonblocking parts this way, once for every communicator.
pub(crate) fn one_call<C: Communicator + ?Sized, T>(c: &mut C, f: impl FnOnce(&mut C) -> T) -> T {
    c.enter_call();
    let r = f(c);
    c.exit_call();
    r
}
