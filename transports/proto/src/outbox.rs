//! What the engine hands back: the operations for the caller to perform,
//! in order, the instrumentation events, and the counts of what it asked
//! for. A fast-path send's operation waits in a slot of its own ahead of
//! the queue (it is only ever made while the queue is empty, so the
//! order holds).

use std::collections::VecDeque;

use crate::wire::short;
use crate::{Counts, Event, EventKind, HeaderBytes, Op, Slice, Tag};

/// Headers kept for reuse (each a buffer of a general header and key).
const POOL: usize = 64;

/// A fast-path send's packet, as little as makes its [`Op::Send`] when
/// it is handed out (moving a whole operation in and out of the slot was
/// a third of the fast send's cost): its context, which carries its peer
/// and sequence number ([`crate::requests::fast_id`]), its tag and its
/// bytes.
#[derive(Debug)]
struct FastOp {
    ctx: u64,
    tag: Tag,
    src: Slice,
}

/// The engine's output.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// A fast-path send's packet, before everything queued.
    first: Option<FastOp>,
    ops: VecDeque<Op>,
    events: VecDeque<Event>,
    instrument: bool,
    counts: Counts,
    pool: Vec<Vec<u8>>,
}

impl Outbox {
    /// Nothing queued, recording events when `instrument`.
    pub fn new(instrument: bool) -> Outbox {
        Outbox {
            instrument,
            ..Outbox::default()
        }
    }

    /// Nothing is waiting to be performed.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.ops.is_empty()
    }

    /// Whether an operation or an event waits.
    #[inline(always)]
    pub fn has_output(&self) -> bool {
        !self.is_empty() || !self.events.is_empty()
    }

    /// Queue `op` behind everything else.
    #[inline]
    pub fn push(&mut self, op: Op) {
        self.ops.push_back(op);
    }

    /// Hand out a fast-path send first (made while nothing was waiting,
    /// [`Self::is_empty`]): `src` with `tag`, completing with `ctx`.
    #[inline(always)]
    pub fn push_first(&mut self, ctx: u64, tag: Tag, src: Slice) {
        debug_assert!(self.is_empty());
        self.first = Some(FastOp { ctx, tag, src });
    }

    /// The next operation to perform.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<Op> {
        let Some(f) = self.first.take() else {
            return self.ops.pop_front();
        };
        let (peer, seq) = ((f.ctx >> 32) as u32 & 0x3fff_ffff, f.ctx as u32);
        let mut h = [0; short::SHORT_LEN];
        // The fast path's lengths are below 2^32.
        short::encode(&mut h, seq, f.tag, f.src.len as u32);
        Some(Op::Send {
            peer,
            header: HeaderBytes::Short(h),
            payload: (f.src.len > 0).then_some(f.src),
            ctx: f.ctx,
        })
    }

    /// Whether events are recorded.
    #[inline(always)]
    pub fn recording(&self) -> bool {
        self.instrument
    }

    /// Start or stop recording events (stopping drops those not taken).
    pub fn record(&mut self, on: bool) {
        self.instrument = on;
        if !on {
            self.events.clear();
        }
    }

    /// Record an event of transfer `xfer` (0: internal traffic, never
    /// recorded).
    #[inline]
    pub fn event(&mut self, kind: EventKind, xfer: u64, bytes: usize, at: u64) {
        if self.instrument && xfer != 0 {
            self.events.push_back(Event {
                kind,
                xfer,
                bytes,
                at,
            });
        }
    }

    /// The next event.
    #[inline]
    pub fn pop_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// What was asked for so far.
    pub fn counts(&self) -> Counts {
        let mut c = self.counts;
        // The fast path counts its sends once, as fast ones.
        c.sends += c.fast_sends;
        c
    }

    /// The counts, to add to (`sends` without the fast path's, which
    /// count only in `fast_sends`).
    #[inline(always)]
    pub fn counts_mut(&mut self) -> &mut Counts {
        &mut self.counts
    }

    /// A buffer for a general header, reused where one was handed back.
    #[inline]
    pub fn header_buf(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_default()
    }

    /// A posted send's header, handed back; a general one's buffer is
    /// kept for the next.
    #[inline]
    pub fn recycle(&mut self, h: HeaderBytes) {
        if let HeaderBytes::Long(v) = h {
            if self.pool.len() < POOL {
                self.pool.push(v);
            }
        }
    }
}
