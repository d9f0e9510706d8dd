//! Credit-based flow control for the pre-posted receive buffers of one
//! RC connection, as pure state (no I/O) so every rule is unit-tested.
//!
//! Each side pre-posts `window` data buffers plus [`Credits::spare`]
//! buffers for credit-only messages. A data message needs one credit;
//! the receiver counts buffers it consumed and re-posted, returns them
//! piggybacked on every message it sends, and sends an explicit
//! credit-only message once `threshold` (half the window) have piled up.
//! Credit-only messages need no credit: each returns at least `threshold`
//! credits and at most `window` credits are ever outstanding, so at most
//! `window / threshold` of them are unprocessed at once — exactly the spare
//! buffers. The sender therefore never overruns the receiver, and a
//! receiver-not-ready retry count of 0 is safe.

/// One direction's credit state, kept by each side for its peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credits {
    window: u32,
    threshold: u32,
    /// Data messages we may still send to the peer.
    avail: u32,
    /// Buffers we consumed and re-posted but have not yet told the peer about.
    to_return: u32,
}

/// Largest window (credits travel in 16 bits).
pub const MAX_WINDOW: u32 = 16_384;

impl Credits {
    /// `local_window`: data buffers we post; `peer_window`: the peer's.
    pub fn new(local_window: u32, peer_window: u32) -> Credits {
        assert!((1..=MAX_WINDOW).contains(&local_window));
        Credits {
            window: peer_window,
            threshold: Self::threshold_of(local_window),
            avail: peer_window,
            to_return: 0,
        }
    }

    fn threshold_of(window: u32) -> u32 {
        window.div_ceil(2).max(1)
    }

    /// Receive buffers to post beyond the data window for credit-only messages.
    pub fn spare(window: u32) -> u32 {
        window / Self::threshold_of(window)
    }

    /// Take one credit for a data message; false when none is left.
    pub fn take(&mut self) -> bool {
        if self.avail == 0 {
            return false;
        }
        self.avail -= 1;
        true
    }

    pub fn available(&self) -> u32 {
        self.avail
    }

    /// The credits to piggyback on an outgoing message (now returned).
    pub fn take_return(&mut self) -> u16 {
        let n = self.to_return.min(u16::MAX as u32);
        self.to_return -= n;
        n as u16
    }

    /// Undo a post that the provider refused: give back the data credit
    /// (if one was taken) and the returned credits it would have carried.
    pub fn undo(&mut self, data: bool, returned: u16) {
        if data {
            self.avail += 1;
        }
        self.to_return += returned as u32;
    }

    /// A data buffer was consumed and re-posted.
    pub fn consumed(&mut self) {
        self.to_return += 1;
    }

    /// Whether an explicit credit-only message is due.
    pub fn credit_due(&self) -> bool {
        self.to_return >= self.threshold
    }

    /// The peer returned `n` credits; more than it could owe is an error.
    pub fn grant(&mut self, n: u16) -> Result<(), String> {
        let n = n as u32;
        if self.avail + n > self.window {
            return Err(format!(
                "returned {n} credits while {} of {} were outstanding",
                self.window - self.avail,
                self.window
            ));
        }
        self.avail += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Msg {
        Data(u16),
        Credit(u16),
    }

    /// One side: its credit state, the messages queued in its receive queue
    /// (sent by the peer, not yet polled) and the data it still wants to send.
    struct Side {
        c: Credits,
        rq: VecDeque<Msg>,
        backlog: u32,
        got: u32,
    }

    /// Drive two sides with a deterministic but uneven schedule and check
    /// that no receive queue ever holds more than window + spare messages.
    fn run(window: u32, sends: [u32; 2], pattern: &[u8]) {
        let posted = window + Credits::spare(window);
        let mut s = [
            Side {
                c: Credits::new(window, window),
                rq: VecDeque::new(),
                backlog: sends[0],
                got: 0,
            },
            Side {
                c: Credits::new(window, window),
                rq: VecDeque::new(),
                backlog: sends[1],
                got: 0,
            },
        ];
        let mut step = 0usize;
        let mut idle = 0;
        while s[0].backlog + s[1].backlog > 0 || !s[0].rq.is_empty() || !s[1].rq.is_empty() {
            let me = (pattern[step % pattern.len()] & 1) as usize;
            let act = pattern[step % pattern.len()] >> 1;
            step += 1;
            let peer = 1 - me;
            let mut progressed = false;
            if act % 2 == 0 && s[me].backlog > 0 && s[me].c.take() {
                let r = s[me].c.take_return();
                s[peer].rq.push_back(Msg::Data(r));
                s[me].backlog -= 1;
                progressed = true;
            } else if let Some(m) = s[me].rq.pop_front() {
                match m {
                    Msg::Data(r) => {
                        s[me].c.grant(r).unwrap();
                        s[me].c.consumed();
                        s[me].got += 1;
                    }
                    Msg::Credit(r) => s[me].c.grant(r).unwrap(),
                }
                if s[me].c.credit_due() {
                    let r = s[me].c.take_return();
                    s[peer].rq.push_back(Msg::Credit(r));
                }
                progressed = true;
            }
            for x in &s {
                assert!(x.rq.len() as u32 <= posted, "receive queue overrun");
            }
            idle = if progressed { 0 } else { idle + 1 };
            assert!(idle < 1000, "deadlock: {:?} {:?}", s[0].c, s[1].c);
        }
        assert_eq!(s[1].got, sends[0]);
        assert_eq!(s[0].got, sends[1]);
    }

    #[test]
    fn never_overruns_and_never_deadlocks() {
        for window in [1, 2, 3, 4, 7, 16] {
            run(window, [10_000, 0], &[0, 0, 0, 1, 0, 3, 2, 1]);
            run(window, [500, 700], &[0, 1, 2, 3, 0, 0, 1, 1, 3, 2]);
            run(window, [300, 300], &[0, 1]);
            run(window, [1000, 5], &[0, 0, 0, 0, 0, 0, 0, 1]);
        }
    }

    #[test]
    fn rejects_excess_credits() {
        let mut c = Credits::new(4, 4);
        assert!(c.grant(1).is_err());
        assert!(c.take() && c.take());
        c.grant(2).unwrap();
        assert_eq!(c.available(), 4);
        for _ in 0..4 {
            assert!(c.take());
        }
        assert!(!c.take());
        c.consumed();
        assert_eq!(c.take_return(), 1);
        c.undo(true, 1);
        assert_eq!((c.available(), c.take_return()), (1, 1));
        assert_eq!(Credits::spare(4), 2);
        assert_eq!(Credits::spare(1), 1);
        assert_eq!(Credits::spare(128), 2);
    }
}
