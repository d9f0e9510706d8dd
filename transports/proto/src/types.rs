//! The values that cross the engine's boundary: slices, keys, operations
//! to perform, instrumentation events and the configuration.

/// A process's index in the job.
pub type Rank = u32;
/// A message tag.
pub type Tag = u32;

/// A range of caller-owned memory (mirrors `ovbench_core::LocalSlice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slice {
    pub region: u32,
    pub offset: usize,
    pub len: usize,
}

impl Slice {
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
    pub addr: u64,
    pub len: u64,
    pub blob: Vec<u8>,
}

/// A user request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId(pub u64);

/// MPI's send modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
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
    User,
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
    Eager,
    RdmaWrite,
    RdmaRead,
    Pipelined,
    Auto,
    Raw(RawOp),
}

/// Engine configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub rank: Rank,
    pub size: u32,
    pub protocol: Protocol,
    /// Largest two-sided message, header included (`Caps::eager_buf_size`).
    pub eager_buf_size: usize,
    /// auto: eager up to and including this size.
    pub eager_limit: usize,
    /// pipelined: bytes per fragment after the first.
    pub frag_size: usize,
    /// auto: use rdma-read above the limit (RMA native and offloaded).
    pub prefer_read: bool,
    /// Keep registrations of user buffers (leave-pinned).
    pub reg_cache: bool,
    /// Emit XFER events.
    pub instrument: bool,
    /// Cap on bytes buffered for unexpected eager messages from all peers.
    pub max_unexpected_bytes: usize,
}

impl Config {
    /// Defaults of docs/architecture.md for a job of `size` ranks.
    pub fn new(rank: Rank, size: u32, eager_buf_size: usize) -> Config {
        Config {
            rank,
            size,
            protocol: Protocol::Auto,
            eager_buf_size,
            eager_limit: 16 * 1024,
            frag_size: 128 * 1024,
            prefer_read: false,
            reg_cache: true,
            instrument: false,
            max_unexpected_bytes: 1 << 30,
        }
    }
}

/// An operation for the caller to perform, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Op {
    /// Two-sided send of `header` then `payload`; complete with `ctx`.
    Send {
        peer: Rank,
        header: Vec<u8>,
        payload: Option<Slice>,
        ctx: u64,
    },
    /// One-sided write of `local` (registered as `mr`) to `key` at `remote_offset`.
    Write {
        peer: Rank,
        local: Slice,
        mr: MrId,
        key: Key,
        remote_offset: u64,
        ctx: u64,
    },
    /// One-sided read into `local` from `key` at `remote_offset`.
    Read {
        peer: Rank,
        local: Slice,
        mr: MrId,
        key: Key,
        remote_offset: u64,
        ctx: u64,
    },
    /// Register `slice`; answer with [`crate::Engine::on_registered`].
    Register { slice: Slice, token: u64 },
    /// Drop a registration.
    Deregister { mr: MrId },
    /// Copy buffered bytes (an unexpected message) into a user slice.
    Deliver { dst: Slice, data: Vec<u8> },
    /// Store one byte (a raw write's marker) into local memory.
    StampByte { at: Slice, value: u8 },
}

/// Where the payload of the message just handed to
/// [`crate::Engine::on_message`] goes: copy `bytes[src_start..src_start+dst.len]`
/// into `dst` before anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub dst: Slice,
    pub src_start: usize,
}

/// A raw-write receive the caller must watch: when the byte at `at`
/// changes, report it with [`crate::Engine::on_raw_byte`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    pub req: ReqId,
    pub at: Slice,
}

/// A completed request's envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Status {
    pub source: Rank,
    pub tag: Tag,
    pub len: usize,
}

/// XFER_BEGIN or XFER_END.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    XferBegin,
    XferEnd,
}

/// One instrumentation event: the data transfer `xfer` of `bytes` began
/// or ended at `at` (the `now` of the input that caused it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub xfer: u64,
    pub bytes: usize,
    pub at: u64,
}

/// What the engine has asked for so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Counts {
    pub sends: u64,
    pub writes: u64,
    pub reads: u64,
    /// Payload bytes of the operations above.
    pub bytes: u64,
    pub registrations: u64,
    pub deregistrations: u64,
}

/// An eager send's one packet for the driver to post at once
/// ([`Engine::isend_direct`](crate::Engine::isend_direct)): to `peer`, the
/// header the caller's buffer now holds, then `payload`; its completion is
/// reported with `ctx`. `req` is the send, done as posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Direct {
    pub req: ReqId,
    pub peer: Rank,
    pub payload: Option<Slice>,
    pub ctx: u64,
}
