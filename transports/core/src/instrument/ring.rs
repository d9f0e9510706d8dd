//! The fixed-size event ring: recording is a store and an increment, no
//! allocation and no lock (one ring per communicator, i.e. per rank and
//! thread). When it fills, its owner folds it into running totals.

/// What happened. Kept in memory only (no number of it is ever written
/// out), so it has no fixed representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A communicator call began (outermost only: nested calls count once).
    CallEnter,
    /// That call returned; until the next CALL_ENTER the rank computes.
    CallExit,
    /// A data transfer was posted (not a protocol's control message).
    XferBegin,
    /// A data transfer completed, as this rank learned it.
    XferEnd,
}

/// One stamped event. `id` pairs a transfer's BEGIN with its END.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// When, in ticks of the communicator's clock.
    pub at: u64,
    /// The transfer's id (unique among the rank's open transfers); 0 for
    /// call events.
    pub id: u64,
    /// The transfer's payload in bytes; 0 for call events.
    pub bytes: u64,
    /// Which event this is.
    pub kind: EventKind,
    /// Native library path: the transfer is bounded by calls (case 3 of
    /// the overlap paper for its minimum).
    pub call_bounded: bool,
}

const EMPTY: Record = Record {
    at: 0,
    id: 0,
    bytes: 0,
    kind: EventKind::CallEnter,
    call_bounded: false,
};

/// A ring of `capacity` records, allocated once.
#[derive(Debug)]
pub struct EventRing {
    buf: Box<[Record]>,
    len: usize,
}

impl EventRing {
    /// An empty ring holding `capacity` records (at least one).
    pub fn new(capacity: usize) -> EventRing {
        EventRing {
            buf: vec![EMPTY; capacity.max(1)].into_boxed_slice(),
            len: 0,
        }
    }

    /// Store `r`; returns true when the ring is now full and must be folded.
    #[inline]
    pub fn push(&mut self, r: Record) -> bool {
        // `len < capacity` always holds: the owner drains at full.
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = r;
            self.len += 1;
        }
        self.len == self.buf.len()
    }

    /// The recorded events, oldest first.
    pub fn events(&self) -> &[Record] {
        &self.buf[..self.len]
    }

    /// Forget the recorded events (after folding them).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Records the ring holds before it must be folded.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_then_reports_full() {
        let mut r = EventRing::new(3);
        let ev = |at| Record { at, ..EMPTY };
        assert!(!r.push(ev(1)));
        assert!(!r.push(ev(2)));
        assert!(r.push(ev(3)));
        assert_eq!(
            r.events().iter().map(|e| e.at).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        r.clear();
        assert!(r.events().is_empty());
        assert!(!r.push(ev(4)));
    }
}
