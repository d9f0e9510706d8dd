//! A request's state, typed per protocol (as quinn-proto types its
//! connection states): what every request shares ([`Req`]: direction,
//! envelope, slice, outcome) and one state per protocol ([`Proto`]), so
//! that no request carries another protocol's fields. A state holds only
//! what its protocol reads back later; the stages it passes through are
//! its own enum.

use crate::engine::Wire;
use crate::{Key, MrId, Rank, RawOp, Slice, Status, Tag};

/// A user request: what every protocol shares, and its protocol's state.
#[derive(Debug)]
pub(crate) struct Req {
    /// A send (else a receive).
    pub send: bool,
    /// Send: destination. Receive: source selector, then the matched source.
    pub peer: Option<Rank>,
    /// Send: the tag. Receive: tag selector, then the matched tag.
    pub tag: Option<Tag>,
    /// The user's slice the message comes from or goes to.
    pub buf: Slice,
    /// The message's sequence number on its (sender, receiver) pair.
    pub seq: u32,
    /// The message's length (receive: once matched).
    pub len: usize,
    /// Whether it finished, and whether the user retired it.
    pub outcome: Outcome,
    /// The state of the protocol it runs.
    pub proto: Proto,
}

/// Where a request is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// In progress.
    Pending,
    /// Finished, until the user takes its status.
    Finished(Status),
    /// Taken by the user while its writes or reads were in flight: kept
    /// for their completions only.
    Retired,
}

/// A registration of a request's whole buffer: handle, key, and whether
/// the registration cache keeps it.
pub(crate) type Reg = (MrId, Key, bool);

/// The state of the protocol a request runs.
#[derive(Debug)]
pub(crate) enum Proto {
    /// A receive no message has matched yet (its protocol is the message's).
    Unmatched,
    /// An eager message: a synchronous send waiting for its ack, or a
    /// receive whose train of packets is arriving.
    Eager(Eager),
    /// A raw send (`--proto raw --op send`): one packet, nothing to track.
    RawSend,
    /// rdma-write rendezvous.
    RdmaWrite(RdmaWrite),
    /// rdma-read rendezvous.
    RdmaRead(RdmaRead),
    /// Pipelined rendezvous.
    Pipelined(Pipelined),
    /// A raw one-sided write or read (`--proto raw --op write|read`).
    Raw(Raw),
}

/// Eager: the receiver's progress through a train of packets.
#[derive(Debug, Default)]
pub(crate) struct Eager {
    /// Receiver: bytes placed so far.
    pub arrived: usize,
}

/// Where an rdma-write request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteStage {
    /// Sender: RTS sent, waiting for CTS.
    WaitCts,
    /// Registering the buffer before the write (sender) or CTS (receiver).
    Registering,
    /// Receiver: CTS sent, waiting for the sender's FIN.
    WaitFin,
    /// Sender: write posted.
    Writing,
}

/// rdma-write rendezvous: RTS, CTS with the receiver's key, write, FIN.
#[derive(Debug)]
pub(crate) struct RdmaWrite {
    /// Where it stands.
    pub stage: WriteStage,
    /// Registration of the whole buffer.
    pub mr: Option<Reg>,
    /// Sender: the receiver's key from its CTS.
    pub peer_key: Option<Key>,
    /// Receiver: its XFER bracket (CTS post → FIN).
    pub xfer: u64,
    /// Writes posted and not completed.
    pub inflight: u32,
}

/// Where an rdma-read request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadStage {
    /// Registering the buffer before RTS (sender) or the read (receiver).
    Registering,
    /// Sender: RTS sent, waiting for the receiver's FIN.
    WaitFin,
    /// Receiver: read posted.
    Reading,
}

/// rdma-read rendezvous: RTS with the sender's key, read, FIN back.
#[derive(Debug)]
pub(crate) struct RdmaRead {
    /// Where it stands.
    pub stage: ReadStage,
    /// Sender: header flags of its RTS, sent once its buffer is registered.
    pub flags: u8,
    /// Registration of the whole buffer.
    pub mr: Option<Reg>,
    /// Receiver: the sender's key from its RTS.
    pub peer_key: Option<Key>,
    /// Sender: its XFER bracket (RTS post → FIN).
    pub xfer: u64,
    /// Reads posted and not completed.
    pub inflight: u32,
}

/// Pipelined: the first fragment eagerly, then per fragment PUT, write, FIN.
#[derive(Debug, Default)]
pub(crate) struct Pipelined {
    /// Bytes of the first, eager fragment.
    pub first: usize,
    /// Bytes written (sender) or placed (receiver) after the first fragment.
    pub done_bytes: usize,
    /// Sender: bytes asked for by PUTs so far.
    pub requested: usize,
    /// Sender: the receiver acknowledged the first fragment.
    pub acked: bool,
    /// Writes posted and not completed.
    pub inflight: u32,
}

/// Where a raw one-sided request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawStage {
    /// Waiting for the peer's buffer key.
    Queued,
    /// Registering the buffer.
    Registering,
    /// Write sender: write posted.
    Writing,
    /// Read receiver: read posted.
    Reading,
    /// Write receiver: watching the last byte.
    RawWait,
}

/// A raw one-sided write or read (see [`RawOp`]).
#[derive(Debug)]
pub(crate) struct Raw {
    /// [`RawOp::Write`] or [`RawOp::Read`].
    pub op: RawOp,
    /// Where it stands.
    pub stage: RawStage,
    /// The user's whole buffer around the request's slice, announced once.
    pub whole: Slice,
    /// Write: the marker this message carries or waits for.
    pub marker: u8,
    /// Writes and reads posted and not completed.
    pub inflight: u32,
}

impl Req {
    /// A request nothing has happened to yet.
    pub fn new(send: bool, peer: Option<Rank>, tag: Option<Tag>, buf: Slice, proto: Proto) -> Req {
        Req {
            send,
            peer,
            tag,
            buf,
            seq: 0,
            len: 0,
            outcome: Outcome::Pending,
            proto,
        }
    }

    /// Not finished yet.
    #[inline]
    pub fn pending(&self) -> bool {
        self.outcome == Outcome::Pending
    }

    /// The protocol its message runs (an unmatched receive: eager, as it
    /// was described before the split).
    pub fn wire(&self) -> Wire {
        match &self.proto {
            Proto::Unmatched | Proto::Eager(_) => Wire::Eager,
            Proto::RawSend => Wire::RawSend,
            Proto::RdmaWrite(_) => Wire::RdmaWrite,
            Proto::RdmaRead(_) => Wire::RdmaRead,
            Proto::Pipelined(_) => Wire::Pipelined,
            Proto::Raw(r) if r.op == RawOp::Write => Wire::RawWrite,
            Proto::Raw(_) => Wire::RawRead,
        }
    }

    /// The name of its stage, for error messages.
    pub fn stage_name(&self) -> String {
        if !self.pending() {
            return "Done".into();
        }
        match &self.proto {
            Proto::Unmatched => "Queued".into(),
            Proto::Eager(_) | Proto::RawSend => "Eager".into(),
            Proto::RdmaWrite(w) => format!("{:?}", w.stage),
            Proto::RdmaRead(r) => format!("{:?}", r.stage),
            Proto::Pipelined(_) => "Pipe".into(),
            Proto::Raw(r) => format!("{:?}", r.stage),
        }
    }

    /// Its raw one-sided state, if it runs one.
    #[inline]
    pub fn raw(&self) -> Option<&Raw> {
        match &self.proto {
            Proto::Raw(r) => Some(r),
            _ => None,
        }
    }

    /// Its raw one-sided state, if it runs one.
    #[inline]
    pub fn raw_mut(&mut self) -> Option<&mut Raw> {
        match &mut self.proto {
            Proto::Raw(r) => Some(r),
            _ => None,
        }
    }
}

impl Proto {
    /// The state of a send's protocol `wire`, before its first step
    /// (`flags`: the send's header flags; `whole`: the user's buffer).
    pub fn send(wire: Wire, flags: u8, whole: Slice) -> Proto {
        match wire {
            Wire::Eager => Proto::Eager(Eager::default()),
            Wire::RawSend => Proto::RawSend,
            Wire::RdmaWrite => Proto::RdmaWrite(RdmaWrite::new(WriteStage::WaitCts, None)),
            Wire::RdmaRead => Proto::RdmaRead(RdmaRead::new(ReadStage::Registering, flags, None)),
            Wire::Pipelined => Proto::Pipelined(Pipelined::default()),
            Wire::RawWrite => Proto::Raw(Raw::new(RawOp::Write, whole)),
            Wire::RawRead => Proto::Raw(Raw::new(RawOp::Read, whole)),
        }
    }

    /// Writes and reads posted for the request and not completed.
    #[inline]
    pub fn inflight(&self) -> u32 {
        match self {
            Proto::RdmaWrite(s) => s.inflight,
            Proto::RdmaRead(s) => s.inflight,
            Proto::Pipelined(s) => s.inflight,
            Proto::Raw(s) => s.inflight,
            Proto::Unmatched | Proto::Eager(_) | Proto::RawSend => 0,
        }
    }

    /// The count behind [`Self::inflight`], for a protocol that posts
    /// writes or reads.
    #[inline]
    pub fn inflight_mut(&mut self) -> Option<&mut u32> {
        match self {
            Proto::RdmaWrite(s) => Some(&mut s.inflight),
            Proto::RdmaRead(s) => Some(&mut s.inflight),
            Proto::Pipelined(s) => Some(&mut s.inflight),
            Proto::Raw(s) => Some(&mut s.inflight),
            Proto::Unmatched | Proto::Eager(_) | Proto::RawSend => None,
        }
    }

    /// Bytes moved so far besides an eager first fragment (eager train:
    /// placed; pipelined: fragments done), for error messages.
    pub fn progress(&self) -> usize {
        match self {
            Proto::Eager(e) => e.arrived,
            Proto::Pipelined(p) => p.done_bytes,
            _ => 0,
        }
    }
}

impl RdmaWrite {
    /// At `stage`, holding the peer's key if it came with the request.
    pub fn new(stage: WriteStage, peer_key: Option<Key>) -> RdmaWrite {
        RdmaWrite {
            stage,
            mr: None,
            peer_key,
            xfer: 0,
            inflight: 0,
        }
    }
}

impl RdmaRead {
    /// At `stage`, with RTS `flags`, holding the peer's key if it came
    /// with the request.
    pub fn new(stage: ReadStage, flags: u8, peer_key: Option<Key>) -> RdmaRead {
        RdmaRead {
            stage,
            flags,
            mr: None,
            peer_key,
            xfer: 0,
            inflight: 0,
        }
    }
}

impl Raw {
    /// Raw `op` over the user's buffer `whole`, waiting for nothing yet.
    pub fn new(op: RawOp, whole: Slice) -> Raw {
        Raw {
            op,
            stage: RawStage::Queued,
            whole,
            marker: 0,
            inflight: 0,
        }
    }
}
