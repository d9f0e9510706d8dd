//! The values that cross the engine's boundary: slices, keys, operations
//! to perform, instrumentation events and the configuration.

use crate::wire::short::SHORT_LEN;
use crate::Plan;

/// A process's index in the job.
pub type Rank = u32;
/// A message tag.
pub type Tag = u32;

/// A range of caller-owned memory (mirrors `ovbench_core::LocalSlice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    /// The caller's region (its `RegionId`) the range lies in; the engine
    /// only passes it back, never interprets it.
    pub region: u32,
    /// Start of the range, in bytes from the start of the region.
    pub offset: usize,
    /// Length of the range in bytes.
    pub len: usize,
}

impl Slice {
    /// The `len` bytes at `offset` of `region`.
    pub fn new(region: u32, offset: usize, len: usize) -> Slice {
        Slice {
            region,
            offset,
            len,
        }
    }
    /// `[off, off+len)` of this slice; `None` when it does not fit, so a
    /// length from the wire can never reach outside the user's slice.
    pub fn sub(&self, off: usize, len: usize) -> Option<Slice> {
        let end = off.checked_add(len)?;
        (end <= self.len).then(|| Slice::new(self.region, self.offset + off, len))
    }
    /// Whether `other` lies entirely inside this slice.
    pub fn contains(&self, other: &Slice) -> bool {
        self.region == other.region
            && other.offset >= self.offset
            && other.offset + other.len <= self.offset + self.len
    }
}

/// A registration handle issued by the caller (mirrors `MrHandle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MrId(pub u32);

/// A remote key as it crosses the wire (same encoding as
/// `ovbench_core::RemoteKey`: addr, len, u16 blob length, blob).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Key {
    /// Base address (or offset origin) of the registered range at its
    /// owner; remote offsets ([`Op::Write`], [`Op::Read`]) count from it.
    pub addr: u64,
    /// Length in bytes of the registered range; the engine refuses any
    /// access that reaches past it.
    pub len: u64,
    /// Opaque transport-specific bytes (verbs rkey, packed UCX rkey, …), at
    /// most [`crate::wire::MAX_KEY_BLOB`] bytes.
    pub blob: Vec<u8>,
}

/// A user request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId(pub u64);

/// MPI's send modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The protocol decides: an eager send completes as posted (the
    /// transport copies its bytes), a rendezvous send once its data has
    /// reached the receiver.
    Standard,
    /// Complete once copied out: always eager.
    Buffered,
    /// Complete only once the receive is matched (eager waits for an ack).
    Synchronous,
    /// The receive must already be posted at arrival, else an error.
    Ready,
}

/// Which matching space a message belongs to: internal traffic (the
/// communicator's barrier) never matches a user receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// The program's own messages, matched by source and tag.
    User,
    /// The communicator's own traffic (barrier); always eager, and matched
    /// only by internal receives.
    Internal,
}

/// The bare operation `--proto raw` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawOp {
    /// One two-sided message (at most one bounce buffer); the send
    /// completes at the operation's completion, the receive at arrival.
    Send,
    /// One RDMA write into the receiver's buffer. The receiver announces
    /// the key of its whole buffer (the `whole` of
    /// [`crate::Engine::irecv_in`]) once per (peer, tag) and the sender
    /// caches it; later raw receives from that peer and tag must use the
    /// same buffer. Offsets are mirrored: a message at offset `o` of the
    /// sender's buffer lands at offset `o` of the receiver's, as in
    /// perftest. The sender stamps a marker (1..=255, cycling) into the
    /// last byte of its message before writing; the receive completes when
    /// the driver sees that marker (or a later one) in the last byte of the
    /// receive slice (as perftest's write_lat polls). Sizes must match on
    /// both sides and be at least one byte.
    Write,
    /// One RDMA read of the sender's buffer by the receiver. The sender
    /// announces the key of its whole buffer once per (peer, tag) and its
    /// send then completes at once (a read needs nothing from the target);
    /// the receive is the whole read operation, as ib_read_lat times it,
    /// from the mirrored offset. The target does not wait for its reader:
    /// it must not refill the buffer while a peer may still read it.
    Read,
}

/// The protocol the engine runs for user messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Every message in two-sided packets, copied out of bounce buffers.
    Eager,
    /// Rendezvous: RTS, the receiver answers CTS with its key, the sender
    /// writes and sends FIN.
    RdmaWrite,
    /// Rendezvous: RTS carries the sender's key, the receiver reads and
    /// sends FIN back.
    RdmaRead,
    /// The first fragment eagerly with the request, then per
    /// [`Plan::frag_size`] fragment a registration, PUT, write and FIN.
    Pipelined,
    /// Eager up to the plan's eager limit ([`Plan::eager_limit`]),
    /// above it rdma-read where the plan prefers reads, else rdma-write.
    Auto,
    /// One bare data operation per message (`--proto raw`), no protocol
    /// around it.
    Raw(RawOp),
}

impl Protocol {
    /// The engine's own protocols (all but [`Protocol::Raw`]'s bare
    /// operations), for running a check under each.
    pub const ENGINE: [Protocol; 5] = [
        Protocol::Eager,
        Protocol::RdmaWrite,
        Protocol::RdmaRead,
        Protocol::Pipelined,
        Protocol::Auto,
    ];
}

impl std::fmt::Display for Protocol {
    /// The name users type (`--proto`, with `raw-` and the operation for
    /// [`Protocol::Raw`]), as headers and JSON print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Eager => "eager",
            Protocol::RdmaWrite => "rdma-write",
            Protocol::RdmaRead => "rdma-read",
            Protocol::Pipelined => "pipelined",
            Protocol::Auto => "auto",
            Protocol::Raw(RawOp::Send) => "raw-send",
            Protocol::Raw(RawOp::Write) => "raw-write",
            Protocol::Raw(RawOp::Read) => "raw-read",
        })
    }
}

/// Engine configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// This process's rank, `0..size`.
    pub rank: Rank,
    /// Number of ranks in the job; peers at or above it are refused.
    pub size: u32,
    /// How user messages move: the protocol and its limits (see
    /// [`crate::Engine::set_protocol`] to change the protocol between
    /// phases). The engine fits it to its packets.
    pub plan: Plan,
    /// Largest two-sided message, header included (`Caps::eager_buf_size`).
    pub eager_buf_size: usize,
    /// Keep registrations of user buffers (leave-pinned).
    pub reg_cache: bool,
    /// Emit XFER events.
    pub instrument: bool,
    /// Cap on bytes buffered for unexpected eager messages from all peers.
    pub max_unexpected_bytes: usize,
    /// One-packet eager messages take the fast path (the short header, no
    /// request state) while nothing is recorded. Off only to hold the
    /// general path against it.
    pub fast_path: bool,
}

impl Config {
    /// The defaults for rank `rank` of a job of `size` ranks over eager
    /// buffers of `eager_buf_size` bytes: the default [`Plan`] (auto,
    /// 16 KiB eager limit, 128 KiB fragments, rdma-write above the
    /// limit), registration cache on, instrumentation off, 1 GiB of
    /// unexpected messages, the fast path on.
    pub fn new(rank: Rank, size: u32, eager_buf_size: usize) -> Config {
        Config {
            rank,
            size,
            plan: Plan::default(),
            eager_buf_size,
            reg_cache: true,
            instrument: false,
            max_unexpected_bytes: 1 << 30,
            fast_path: true,
        }
    }
}

/// A one-sided operation's operands: `local` (registered as `mr`) and
/// `peer`'s range of `key` from `remote_offset` on.
#[derive(Debug, PartialEq, Eq)]
pub struct OneSided {
    /// The rank whose memory is written or read.
    pub peer: Rank,
    /// The local bytes: a write's source, a read's destination
    /// (`local.len` bytes move).
    pub local: Slice,
    /// The registration that covers `local`.
    pub mr: MrId,
    /// The peer's key, as it announced it.
    pub key: Key,
    /// Byte offset into the key's range where the access starts.
    pub remote_offset: u64,
    /// Context to report to [`crate::Engine::on_completion`] once the
    /// operation is complete.
    pub ctx: u64,
}

/// An operation for the caller to perform, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Op {
    /// Two-sided send of `header` then `payload`; complete with `ctx`.
    Send {
        /// Destination rank.
        peer: Rank,
        /// The encoded wire header (and key); hand it back with
        /// [`crate::Engine::recycle_header`] once posted.
        header: HeaderBytes,
        /// User bytes that follow the header in the same message, if any.
        payload: Option<Slice>,
        /// Context to report to [`crate::Engine::on_completion`] when the
        /// send has left (may carry [`crate::QUIET_CTX`]).
        ctx: u64,
    },
    /// One-sided write of `local` to the peer; its context is reported
    /// once the data is visible at the target (not merely sent). Boxed,
    /// as the read: its key would make every operation, the fast path's
    /// packet among them, a third larger to move.
    Write(Box<OneSided>),
    /// One-sided read into `local` from the peer; its context is reported
    /// once the data is in local memory.
    Read(Box<OneSided>),
    /// Register `slice`; answer with [`crate::Engine::on_registered`].
    Register {
        /// The local range to register.
        slice: Slice,
        /// Engine-chosen token to pass back with the result.
        token: u64,
    },
    /// Drop a registration.
    Deregister {
        /// A handle the caller issued in [`crate::Engine::on_registered`].
        mr: MrId,
    },
    /// Copy buffered bytes (an unexpected message) into a user slice.
    Deliver {
        /// Where the bytes go; `dst.len == data.len()`.
        dst: Slice,
        /// The buffered bytes.
        data: Vec<u8>,
    },
    /// Store one byte (a raw write's marker) into local memory.
    StampByte {
        /// The one-byte slice to store into (the message's last byte).
        at: Slice,
        /// The marker, 1..=255.
        value: u8,
    },
}

/// An [`Op::Send`]'s header bytes: a one-packet eager message's short
/// header inline ([`crate::wire::short`]), or a general header and key
/// in a buffer the engine reuses.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderBytes {
    /// The short header.
    Short([u8; SHORT_LEN]),
    /// The general header, and the key where the kind carries one.
    Long(Vec<u8>),
}

impl std::ops::Deref for HeaderBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            HeaderBytes::Short(b) => b,
            HeaderBytes::Long(v) => v,
        }
    }
}

/// Where the payload of the message just handed to
/// [`crate::Engine::on_message`] goes: copy `bytes[src_start..src_start+dst.len]`
/// into `dst` before anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The user slice the payload goes to; `dst.len` bytes are copied.
    pub dst: Slice,
    /// Index in the arrived message's bytes where the payload starts.
    pub src_start: usize,
}

/// A raw-write receive the caller must watch: when the byte at `at`
/// changes, report it with [`crate::Engine::on_raw_byte`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    /// The receive that completes when the marker arrives.
    pub req: ReqId,
    /// The one-byte slice (the receive's last byte) the peer's write
    /// stamps its marker into.
    pub at: Slice,
}

/// A completed request's envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// The sender's rank (for a send, the destination).
    pub source: Rank,
    /// The message's tag.
    pub tag: Tag,
    /// The message's length in bytes (for a receive, what arrived, not the
    /// capacity posted).
    pub len: usize,
}

/// XFER_BEGIN or XFER_END.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The data transfer began: its first data operation (a packet, a
    /// write or a read) was handed to the caller to post.
    XferBegin,
    /// The data transfer ended: its last data operation completed.
    XferEnd,
}

/// One instrumentation event: the data transfer `xfer` of `bytes` began
/// or ended at `at` (the `now` of the input that caused it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Begin or end.
    pub kind: EventKind,
    /// Id pairing a begin with its end; unique within this engine.
    pub xfer: u64,
    /// Payload bytes the transfer moves.
    pub bytes: usize,
    /// When, in the caller's clock ticks.
    pub at: u64,
}

/// What the engine has asked for so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Counts {
    /// Two-sided sends ([`Op::Send`]): eager packets and control messages,
    /// the communicator's internal traffic (barrier) excluded.
    pub sends: u64,
    /// One-sided writes ([`Op::Write`]).
    pub writes: u64,
    /// One-sided reads ([`Op::Read`]).
    pub reads: u64,
    /// Payload bytes of the operations above.
    pub bytes: u64,
    /// Registrations asked for ([`Op::Register`]); cache hits excluded.
    pub registrations: u64,
    /// Registrations dropped ([`Op::Deregister`]).
    pub deregistrations: u64,
    /// Sends that took the fast path (counted in `sends` too): one
    /// packet, done as posted, no request state.
    pub fast_sends: u64,
    /// Arrivals that took the fast path: a short header in order,
    /// placed into the oldest posted receive, no request state.
    pub fast_recvs: u64,
}

/// A one-packet eager send on the fast path
/// ([`Engine::isend_direct`](crate::Engine::isend_direct)): the caller
/// posts the short header it was handed, then the payload, and reports
/// the packet's completion with `ctx`. `req` is the send, done as posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Direct {
    /// The send request, already done.
    pub req: ReqId,
    /// Context to report to [`crate::Engine::on_completion`] (quiet: see
    /// [`crate::QUIET_CTX`]).
    pub ctx: u64,
}
