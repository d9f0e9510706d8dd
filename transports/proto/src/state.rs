//! A request's state, typed per protocol (as quinn-proto types its
//! connection states): what every request shares ([`Req`]: direction,
//! envelope, slice, outcome) and one state per protocol ([`Proto`]), so
//! that no request carries another protocol's fields. A state holds only
//! what its protocol reads back later; the stages it passes through are
//! its own enum, private to this module, and change only through the
//! named transitions below, each of which refuses a move its protocol
//! does not make ([`Illegal`]).

use crate::plan::Route;
use crate::{Key, MrId, ProtoError, Rank, RawOp, Slice, Status, Tag};

/// A transition its protocol does not make: from `from`, by `step`.
#[derive(Debug)]
pub(crate) struct Illegal {
    /// The protocol and stage the request was in.
    pub from: String,
    /// The transition asked for.
    pub step: &'static str,
}

impl From<Illegal> for ProtoError {
    fn from(e: Illegal) -> ProtoError {
        ProtoError::Invalid(format!(
            "internal: a request in {} cannot {}",
            e.from, e.step
        ))
    }
}

/// A protocol's stages, named for [`Illegal`].
trait Stage: Copy + PartialEq + std::fmt::Debug {
    /// The protocol, as users spell it.
    const PROTOCOL: &'static str;
}

/// Move `stage` to `to` if it is one of `from`, else say which move
/// (`what`) it was.
fn step<S: Stage>(stage: &mut S, from: &[S], to: S, what: &'static str) -> Result<(), Illegal> {
    if !from.contains(stage) {
        return Err(Illegal {
            from: format!("{} {stage:?}", S::PROTOCOL),
            step: what,
        });
    }
    *stage = to;
    Ok(())
}

/// What a rendezvous side's registration leads to: the peer's key for
/// the side that does the RDMA, nothing for the other.
type Registered = Result<Option<Key>, Illegal>;

/// A rendezvous side's buffer registered as `reg` for transfer `xfer`:
/// kept in `mr` and `at`, and for the side that does the RDMA (`rdma`)
/// the peer's key handed out of `key`.
fn registered(
    (mr, at, key): (&mut Option<Reg>, &mut u64, &mut Option<Key>),
    (reg, xfer): (Reg, u64),
    rdma: bool,
) -> Registered {
    (*mr, *at) = (Some(reg), xfer);
    if !rdma {
        return Ok(None);
    }
    key.take().map(Some).ok_or(Illegal {
        from: "a rendezvous without the peer's key".into(),
        step: "start its RDMA",
    })
}

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
    outcome: Outcome,
    /// The state of the protocol it runs.
    pub proto: Proto,
}

/// Where a request is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
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
    stage: WriteStage,
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
    stage: ReadStage,
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
    stage: RawStage,
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

    /// Taken by the user while its writes or reads were in flight.
    pub fn retired(&self) -> bool {
        self.outcome == Outcome::Retired
    }

    /// Its status, once it finished and until the user takes it.
    pub fn finished_status(&self) -> Option<Status> {
        match self.outcome {
            Outcome::Finished(st) => Some(st),
            _ => None,
        }
    }

    /// Pending → finished, with the envelope as it stands (a no-op once
    /// finished: a late completion changes nothing).
    pub fn finish(&mut self) {
        if self.pending() {
            self.outcome = Outcome::Finished(Status {
                source: self.peer.unwrap_or(0),
                tag: self.tag.unwrap_or(0),
                len: self.len,
            });
        }
    }

    /// Finished → retired: taken while its RDMA is still in flight.
    pub fn retire(&mut self) {
        if let Outcome::Finished(_) = self.outcome {
            self.outcome = Outcome::Retired;
        }
    }

    /// The route its message runs (an unmatched receive: eager, as it is
    /// described until a message matches it).
    pub fn route(&self) -> Route {
        match &self.proto {
            Proto::Unmatched | Proto::Eager(_) => Route::Eager,
            Proto::RawSend => Route::Raw(RawOp::Send),
            Proto::RdmaWrite(_) => Route::RdmaWrite,
            Proto::RdmaRead(_) => Route::RdmaRead,
            Proto::Pipelined(_) => Route::Pipelined,
            Proto::Raw(r) => Route::Raw(r.op),
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
    /// The state of a send on `route`, before its first step (`flags`:
    /// the send's header flags; `whole`: the user's buffer).
    pub fn send(route: Route, flags: u8, whole: Slice) -> Proto {
        match route {
            Route::Eager => Proto::Eager(Eager::default()),
            Route::Raw(RawOp::Send) => Proto::RawSend,
            Route::RdmaWrite => Proto::RdmaWrite(RdmaWrite::sender()),
            Route::RdmaRead => Proto::RdmaRead(RdmaRead::sender(flags)),
            Route::Pipelined => Proto::Pipelined(Pipelined::default()),
            Route::Raw(op) => Proto::Raw(Raw::new(op, whole)),
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
    /// A sender: RTS sent, waiting for the receiver's CTS.
    pub fn sender() -> RdmaWrite {
        RdmaWrite::at(WriteStage::WaitCts, None)
    }

    /// A receiver of an RTS: registering its buffer for the CTS.
    pub fn receiver() -> RdmaWrite {
        RdmaWrite::at(WriteStage::Registering, None)
    }

    fn at(stage: WriteStage, peer_key: Option<Key>) -> RdmaWrite {
        RdmaWrite {
            stage,
            mr: None,
            peer_key,
            xfer: 0,
            inflight: 0,
        }
    }

    /// Where it stands, for descriptions.
    pub fn stage(&self) -> WriteStage {
        self.stage
    }

    /// Sender: the CTS came with the receiver's `key`; WaitCts →
    /// Registering (its own buffer, before the write).
    pub fn on_cts(&mut self, key: Key) -> Result<(), Illegal> {
        use WriteStage::*;
        step(&mut self.stage, &[WaitCts], Registering, "take a CTS")?;
        self.peer_key = Some(key);
        Ok(())
    }

    /// Its buffer is registered as `reg`, transfer `xfer`: a sender
    /// moves to Writing and hands back the receiver's key to write to, a
    /// receiver to WaitFin (its CTS goes out).
    pub fn on_registered(&mut self, send: bool, reg: Reg, xfer: u64) -> Registered {
        use WriteStage::*;
        let to = if send { Writing } else { WaitFin };
        step(&mut self.stage, &[Registering], to, "finish registering")?;
        let slots = (&mut self.mr, &mut self.xfer, &mut self.peer_key);
        registered(slots, (reg, xfer), send)
    }

    /// Receiver: the sender's FIN; its transfer and registration, from
    /// WaitFin only (where it stays: the request is finished).
    pub fn on_fin(&mut self) -> Result<(u64, Option<Reg>), Illegal> {
        use WriteStage::*;
        step(&mut self.stage, &[WaitFin], WaitFin, "take a FIN")?;
        Ok((self.xfer, self.mr.take()))
    }

    /// Sender: its write completed (the registration handled by the
    /// caller); from Writing only.
    pub fn on_written(&mut self) -> Result<(), Illegal> {
        use WriteStage::*;
        step(&mut self.stage, &[Writing], Writing, "finish its write")?;
        self.mr = None;
        Ok(())
    }
}

impl RdmaRead {
    /// A sender, whose RTS (with header `flags`) goes out once its
    /// buffer is registered.
    pub fn sender(flags: u8) -> RdmaRead {
        RdmaRead::at(flags, None)
    }

    /// A receiver of an RTS carrying the sender's `key`: registering its
    /// buffer for the read.
    pub fn receiver(key: Option<Key>) -> RdmaRead {
        RdmaRead::at(0, key)
    }

    fn at(flags: u8, peer_key: Option<Key>) -> RdmaRead {
        RdmaRead {
            stage: ReadStage::Registering,
            flags,
            mr: None,
            peer_key,
            xfer: 0,
            inflight: 0,
        }
    }

    /// Where it stands, for descriptions.
    pub fn stage(&self) -> ReadStage {
        self.stage
    }

    /// Its buffer is registered as `reg`, transfer `xfer`: a sender
    /// moves to WaitFin (its RTS goes out), a receiver to Reading and
    /// hands back the sender's key to read from.
    pub fn on_registered(&mut self, send: bool, reg: Reg, xfer: u64) -> Registered {
        use ReadStage::*;
        let to = if send { WaitFin } else { Reading };
        step(&mut self.stage, &[Registering], to, "finish registering")?;
        let slots = (&mut self.mr, &mut self.xfer, &mut self.peer_key);
        registered(slots, (reg, xfer), !send)
    }

    /// Sender: the receiver's FIN; its transfer and registration, from
    /// WaitFin only.
    pub fn on_fin(&mut self) -> Result<(u64, Option<Reg>), Illegal> {
        use ReadStage::*;
        step(&mut self.stage, &[WaitFin], WaitFin, "take a FIN")?;
        Ok((self.xfer, self.mr.take()))
    }

    /// Receiver: its read landed; its registration, from Reading only.
    pub fn on_read(&mut self) -> Result<Option<Reg>, Illegal> {
        use ReadStage::*;
        step(&mut self.stage, &[Reading], Reading, "finish its read")?;
        Ok(self.mr.take())
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

    /// Where it stands, for descriptions and the marker check.
    pub fn stage(&self) -> RawStage {
        self.stage
    }

    /// Queued → Registering: its buffer is being registered (a write
    /// receiver already watching its last byte registers too).
    pub fn move_to_registering(&mut self) -> Result<(), Illegal> {
        use RawStage::*;
        step(&mut self.stage, &[Queued, RawWait], Registering, "register")
    }

    /// Queued or Registering → Writing: the sender's write is posted.
    pub fn move_to_writing(&mut self) -> Result<(), Illegal> {
        use RawStage::*;
        step(&mut self.stage, &[Queued, Registering], Writing, "write")
    }

    /// Queued or Registering → Reading: the receiver's read is posted.
    pub fn move_to_reading(&mut self) -> Result<(), Illegal> {
        use RawStage::*;
        step(&mut self.stage, &[Queued, Registering], Reading, "read")
    }

    /// A write receiver (Queued, Registering or already watching) now
    /// watches its last byte for `marker`.
    pub fn move_to_watching(&mut self, marker: u8) -> Result<(), Illegal> {
        use RawStage::*;
        let from = [Queued, Registering, RawWait];
        step(&mut self.stage, &from, RawWait, "watch its last byte")?;
        self.marker = marker;
        Ok(())
    }
}

impl Stage for WriteStage {
    const PROTOCOL: &'static str = "rdma-write";
}

impl Stage for ReadStage {
    const PROTOCOL: &'static str = "rdma-read";
}

impl Stage for RawStage {
    const PROTOCOL: &'static str = "raw";
}
