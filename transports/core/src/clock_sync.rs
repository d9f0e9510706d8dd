//! Global time: each rank's clock against rank 0's (offset and drift),
//! for methods that report first-begin to last-end across ranks
//! (commtest's `--global-clock`).
//!
//! Rank 0 serves every other rank in turn with round trips: the rank
//! stamps t1, sends an empty message, rank 0 answers with its own time
//! t0, the rank stamps t2; the round with the smallest t2 − t1 gives the
//! offset t0 − (t1 + t2)/2, good to ± half that round trip. Two such
//! measurements apart in time give the drift ([`ClockSync::with_drift`]).
//! The exchange uses tag [`CLOCK_SYNC_TAG`]; user tags must stay below it.

use serde::Serialize;

use crate::{Communicator, Tag, TransportError};

/// Tag of the synchronisation messages.
pub const CLOCK_SYNC_TAG: Tag = 0xFFFE_0000;

/// How to turn this rank's clock (ns) into rank 0's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClockSync {
    /// Rank 0's time minus ours at `at_ns` (ns).
    pub offset_ns: f64,
    /// Our time of the measurement (ns, our clock).
    pub at_ns: f64,
    /// Change of the offset per ns of our time (relative rate difference).
    pub drift: f64,
    /// The round trip the offset came from: its error is at most half.
    pub rtt_ns: f64,
}

impl ClockSync {
    /// Rank 0's own mapping.
    pub fn identity() -> ClockSync {
        ClockSync {
            offset_ns: 0.0,
            at_ns: 0.0,
            drift: 0.0,
            rtt_ns: 0.0,
        }
    }

    /// Our time `local_ns` on rank 0's clock.
    pub fn to_global(&self, local_ns: f64) -> f64 {
        local_ns + self.offset_ns + self.drift * (local_ns - self.at_ns)
    }

    /// Offset from `first`, drift from how the offset moved until `second`.
    pub fn with_drift(first: ClockSync, second: ClockSync) -> ClockSync {
        let dt = second.at_ns - first.at_ns;
        let drift = if dt > 0.0 {
            (second.offset_ns - first.offset_ns) / dt
        } else {
            0.0
        };
        ClockSync {
            drift,
            rtt_ns: first.rtt_ns.max(second.rtt_ns),
            ..first
        }
    }
}

/// Measure every rank's offset to rank 0 with `rounds` round trips each
/// (collective; rank 0 gets [`ClockSync::identity`]).
pub fn measure<C: Communicator + ?Sized>(
    comm: &mut C,
    rounds: u32,
) -> Result<ClockSync, TransportError> {
    let rounds = rounds.max(1);
    let buf = comm.alloc(8)?;
    let ns = |c: &C, t: u64| c.clock().to_ns(t);
    if comm.rank() == 0 {
        for r in 1..comm.size() {
            for _ in 0..rounds {
                comm.recv(buf.first(0), Some(r), Some(CLOCK_SYNC_TAG))?;
                let t0 = ns(comm, comm.now());
                comm.fill(buf, &mut |b| b.copy_from_slice(&t0.to_le_bytes()))?;
                comm.send(buf.first(8), r, CLOCK_SYNC_TAG)?;
            }
        }
        return Ok(ClockSync::identity());
    }
    let mut best = ClockSync {
        rtt_ns: f64::INFINITY,
        ..ClockSync::identity()
    };
    for _ in 0..rounds {
        let t1 = comm.now();
        comm.send(buf.first(0), 0, CLOCK_SYNC_TAG)?;
        comm.recv(buf.first(8), Some(0), Some(CLOCK_SYNC_TAG))?;
        let t2 = comm.now();
        let mut t0 = 0.0;
        comm.inspect(buf, &mut |b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[..8]);
            t0 = f64::from_le_bytes(a);
        })?;
        let (n1, n2) = (ns(comm, t1), ns(comm, t2));
        let rtt = n2 - n1;
        if rtt < best.rtt_ns {
            let mid = (n1 + n2) / 2.0;
            best = ClockSync {
                offset_ns: t0 - mid,
                at_ns: mid,
                drift: 0.0,
                rtt_ns: rtt,
            };
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_from_two_measurements() {
        let a = ClockSync {
            offset_ns: 1000.0,
            at_ns: 0.0,
            drift: 0.0,
            rtt_ns: 10.0,
        };
        let b = ClockSync {
            offset_ns: 1100.0,
            at_ns: 1e6,
            drift: 0.0,
            rtt_ns: 12.0,
        };
        let s = ClockSync::with_drift(a, b);
        assert!((s.drift - 1e-4).abs() < 1e-12);
        assert_eq!(s.to_global(0.0), 1000.0);
        assert!((s.to_global(2e6) - (2e6 + 1200.0)).abs() < 1e-6);
        assert_eq!(s.rtt_ns, 12.0);
        assert_eq!(ClockSync::identity().to_global(5.0), 5.0);
    }
}
