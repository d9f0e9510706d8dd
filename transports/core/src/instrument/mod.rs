//! Instrumentation and overlap bounds (§2 of Aniruddha G. Shet,
//! P. Sadayappan, David E. Bernholdt, Jarek Nieplocha and Vinod Tipparaju,
//! "A Framework for Characterizing Overlap of Communication and
//! Computation in Parallel Applications"; the method is described in
//! `docs/methods/overlap.md`): CALL_ENTER/CALL_EXIT around every
//! communicator call, XFER_BEGIN/XFER_END where the protocol moves data,
//! recorded into a fixed ring and folded into bounds when it fills.

mod bounds;
mod ring;
mod table;

pub use bounds::{Bounds, BucketTotals, OverlapReport};
pub use ring::{EventKind, EventRing, Record};
pub use table::XferTable;

/// Ring capacity: 64 Ki events (2 MiB), folded when full.
pub const RING_EVENTS: usize = 1 << 16;

/// One communicator's recorder and bounds processor.
#[derive(Debug)]
pub struct Instrumentation {
    ring: EventRing,
    bounds: Bounds,
    depth: u32,
}

impl Instrumentation {
    /// `ns_per_tick` converts the communicator clock's ticks.
    pub fn new(table: XferTable, ns_per_tick: f64) -> Instrumentation {
        Instrumentation::with_capacity(table, ns_per_tick, RING_EVENTS)
    }

    /// [`Self::new`] with a ring of `events` records instead of
    /// [`RING_EVENTS`] (tests use a small one to exercise folding).
    pub fn with_capacity(table: XferTable, ns_per_tick: f64, events: usize) -> Instrumentation {
        Instrumentation {
            ring: EventRing::new(events),
            bounds: Bounds::new(table, ns_per_tick),
            depth: 0,
        }
    }

    #[inline]
    fn record(&mut self, r: Record) {
        if self.ring.push(r) {
            self.fold();
        }
    }

    fn fold(&mut self) {
        for e in self.ring.events() {
            self.bounds.fold(e);
        }
        self.ring.clear();
    }

    /// A communicator call begins; nested calls (send = isend + wait)
    /// count as one.
    #[inline]
    pub fn call_enter(&mut self, at: u64) {
        self.depth += 1;
        if self.depth == 1 {
            self.record(Record {
                at,
                id: 0,
                bytes: 0,
                kind: EventKind::CallEnter,
                call_bounded: false,
            });
        }
    }

    /// A communicator call returns.
    #[inline]
    pub fn call_exit(&mut self, at: u64) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            self.record(Record {
                at,
                id: 0,
                bytes: 0,
                kind: EventKind::CallExit,
                call_bounded: false,
            });
        }
    }

    /// Whether a call is in progress (for nested-call bookkeeping).
    pub fn in_call(&self) -> bool {
        self.depth > 0
    }

    /// Data transfer `id` of `bytes` began.
    #[inline]
    pub fn xfer_begin(&mut self, id: u64, bytes: u64, at: u64, call_bounded: bool) {
        self.record(Record {
            at,
            id,
            bytes,
            kind: EventKind::XferBegin,
            call_bounded,
        });
    }

    /// Data transfer `id` of `bytes` ended.
    #[inline]
    pub fn xfer_end(&mut self, id: u64, bytes: u64, at: u64) {
        self.record(Record {
            at,
            id,
            bytes,
            kind: EventKind::XferEnd,
            call_bounded: false,
        });
    }

    /// The bounds so far (folds the ring first).
    pub fn report(&mut self, now: u64) -> OverlapReport {
        self.fold();
        self.bounds.report(now)
    }

    /// Start new totals (a new step of a method).
    pub fn reset(&mut self, now: u64) {
        self.ring.clear();
        self.bounds.reset(now);
    }

    /// Use `table` as xfer_time(size) for transfers that end from now on;
    /// the events recorded so far are folded with the old one first.
    pub fn set_table(&mut self, table: XferTable) {
        self.fold();
        self.bounds.set_table(table);
    }
}

#[cfg(test)]
mod tests;
