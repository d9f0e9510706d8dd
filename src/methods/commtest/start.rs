//! How an iteration starts, and how far apart the ranks' starts lie.
//!
//! * `--start barrier` (COMMTEST's): each rank starts timing as it leaves
//!   the barrier. The barrier's last messages reach the ranks at different
//!   times, so their exits, and with them their starts, differ by up to a
//!   one-way time; a rank that starts early waits for its partner inside
//!   its timed region.
//! * `--start sync`: after the barrier rank 0 names an instant on its clock
//!   far enough ahead for its word to reach every rank, and every rank
//!   spins until its synchronised clock reads it.
//!
//! Either way each rank maps its start onto rank 0's clock, and the row
//! shows how far apart the starts lay (the skew) and the error of that.
//!
//! The clocks are synchronised by round trips to rank 0 (8-byte messages
//! both ways, so that no direction carries more bytes): the fastest
//! round's midpoint gives the offset. A round trip cannot tell a clock
//! offset from a path slower one way than the other, so the offset is
//! good to ± half the round trip without an assumption (`rtt_ns`), and
//! what this module prints assumes the fastest round took as long each
//! way: its error is then how far the other fast rounds' offsets stray
//! from it (the best half of the rounds), plus the clock's resolution,
//! plus the drift's error over the time since the measurement.

use anyhow::Context;
use ovbench_core::clock_sync::CLOCK_SYNC_TAG;
use ovbench_core::{Buf, ClockSync, Communicator};
use serde::Serialize;

use super::super::common::{ns, Ctrl};
use super::row::SKEW_LIMIT;
use crate::output::us;

/// When an iteration's timing starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// As each rank leaves the barrier (COMMTEST's).
    Barrier,
    /// At an instant of the synchronised clock rank 0 names after the barrier.
    Sync,
}

/// Round trips per rank of each synchronisation.
const ROUNDS: usize = 8;

/// This rank's clock on rank 0's, with its error bounds.
#[derive(Debug, Clone)]
pub(super) struct Synced {
    /// Offset (of the latest measurement) and drift (since the first).
    pub map: ClockSync,
    /// The offset's error if the fastest round took as long each way.
    pub err_ns: f64,
    /// The first measurement's: the drift's error comes from both.
    first: (f64, f64),
    /// The round trips' buffer, allocated once: the communicator frees
    /// nothing before it is dropped, and under an RMA protocol every
    /// buffer is registered (Open MPI's osc rdma attaches a bounded
    /// number, so one per experiment ran out after about a hundred).
    buf: Buf,
}

impl Synced {
    /// Rank 0's time of our `local_ns`.
    pub fn to_global(&self, local_ns: f64) -> f64 {
        self.map.to_global(local_ns)
    }

    /// Our time of rank 0's `global_ns`.
    fn to_local(&self, global_ns: f64) -> f64 {
        let m = &self.map;
        (global_ns - m.offset_ns + m.drift * m.at_ns) / (1.0 + m.drift)
    }

    /// The error of [`Self::to_global`] at `local_ns`: the offset's, and
    /// the drift's (two offsets' errors over the time between them)
    /// carried from the measurement to `local_ns`.
    pub fn err_at(&self, local_ns: f64) -> f64 {
        let (at0, err0) = self.first;
        let span = self.map.at_ns - at0;
        let drift_err = if span > 0.0 {
            (err0 + self.err_ns) / span
        } else {
            0.0
        };
        self.err_ns + drift_err * (local_ns - self.map.at_ns).abs()
    }
}

/// One measurement: the fastest round's offset and round trip, and how
/// far the best half of the rounds' offsets stray from it.
fn measure(comm: &mut dyn Communicator, buf: Buf) -> anyhow::Result<(ClockSync, f64)> {
    let tag = Some(CLOCK_SYNC_TAG);
    if comm.rank() == 0 {
        for r in 1..comm.size() {
            for _ in 0..ROUNDS {
                comm.recv(buf.first(8), Some(r), tag)?;
                let t0 = ns(comm, comm.now());
                comm.fill(buf, &mut |b| b.copy_from_slice(&t0.to_le_bytes()))?;
                comm.send(buf.first(8), r, CLOCK_SYNC_TAG)?;
            }
        }
        return Ok((ClockSync::identity(), 0.0));
    }
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t1 = comm.now();
        comm.send(buf.first(8), 0, CLOCK_SYNC_TAG)?;
        comm.recv(buf.first(8), Some(0), tag)?;
        let t2 = comm.now();
        let mut t0 = 0.0;
        comm.inspect(buf, &mut |b| {
            t0 = f64::from_le_bytes(b[..8].try_into().unwrap_or_default());
        })?;
        let (n1, n2) = (ns(comm, t1), ns(comm, t2));
        let mid = (n1 + n2) / 2.0;
        rounds.push(ClockSync {
            offset_ns: t0 - mid,
            at_ns: mid,
            drift: 0.0,
            rtt_ns: n2 - n1,
        });
    }
    rounds.sort_by(|a, b| a.rtt_ns.total_cmp(&b.rtt_ns));
    let res = comm.clock().info().resolution_ns;
    Ok((rounds[0], stray(&rounds[..ROUNDS.div_ceil(2)]) + 2.0 * res))
}

/// How far the offsets of `rounds` (the fastest first) stray from the
/// fastest's, once the line through them (the clocks' drift during the
/// measurement, which moves every offset alike) is taken out.
fn stray(rounds: &[ClockSync]) -> f64 {
    let n = rounds.len() as f64;
    let (mx, my) = rounds.iter().fold((0.0, 0.0), |(x, y), r| {
        (x + r.at_ns / n, y + r.offset_ns / n)
    });
    let (sxy, sxx) = rounds.iter().fold((0.0, 0.0), |(xy, xx), r| {
        let dx = r.at_ns - mx;
        (xy + dx * (r.offset_ns - my), xx + dx * dx)
    });
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let best = &rounds[0];
    rounds
        .iter()
        .map(|r| (r.offset_ns - best.offset_ns - slope * (r.at_ns - best.at_ns)).abs())
        .fold(0.0, f64::max)
}

/// The first synchronisation of a run (collective).
pub(super) fn first(comm: &mut dyn Communicator) -> anyhow::Result<Synced> {
    let buf = comm.alloc(8)?;
    let (map, err_ns) = measure(comm, buf).context("clock synchronisation")?;
    Ok(Synced {
        map,
        err_ns,
        first: (map.at_ns, err_ns),
        buf,
    })
}

/// Measured again (collective): the offset now, the drift from how it
/// moved since `first`.
// deviation: global-clock-sync — synchronised clocks stand in for a global one, see docs/methods/commtest.md
pub(super) fn again(comm: &mut dyn Communicator, first: &Synced) -> anyhow::Result<Synced> {
    let (now, err_ns) = measure(comm, first.buf).context("clock synchronisation")?;
    let d = ClockSync::with_drift(first.map, now);
    Ok(Synced {
        map: ClockSync {
            offset_ns: now.offset_ns,
            at_ns: now.at_ns,
            ..d
        },
        err_ns,
        first: first.first,
        buf: first.buf,
    })
}

/// How far ahead of now rank 0 names the start: its word travels a
/// binomial tree of depth ⌈log2 n⌉, each hop under a round trip, and the
/// ranks' clocks may be off by their errors. `rtt_ns` and `err_ns` are
/// the largest over the ranks.
pub(super) fn lead_ns(n: u32, rtt_ns: f64, err_ns: f64) -> f64 {
    let depth = f64::from(32 - n.saturating_sub(1).leading_zeros());
    (depth + 1.0) * rtt_ns + 2.0 * err_ns
}

/// Start an iteration (collective): the barrier, and under `--start sync`
/// the wait for the agreed instant (`lead` ahead of rank 0's now). The
/// caller reads its clock right after.
pub(super) fn start(
    comm: &mut dyn Communicator,
    ctrl: &Ctrl,
    how: Start,
    clock: &Synced,
    lead: f64,
) -> anyhow::Result<()> {
    comm.barrier()?;
    if how == Start::Barrier {
        return Ok(());
    }
    // deviation: sync-start — every rank starts at an agreed instant, see docs/methods/commtest.md
    let at = clock.to_global(ns(comm, comm.now())) + lead;
    let w = ctrl.bcast(comm, &[at.to_bits()])?;
    let target = clock.to_local(f64::from_bits(w[0]));
    // A rank the word reached late starts at once: its start, mapped and
    // gathered like every other, shows it in the skew. The wait goes in
    // steps short of what is left: a delay may run by another clock than
    // the one that reads the target (the sim's delays run in true time),
    // and a step too long cannot be taken back.
    for _ in 0..16 {
        let left = target - ns(comm, comm.now());
        if left <= 0.0 {
            break;
        }
        comm.delay(if left > 100.0 { 0.999 * left } else { left });
    }
    Ok(())
}

/// The note that says how the run starts and what its skew's error
/// assumes: `err_ns` the largest offset error under a symmetric path,
/// `half_rtt_ns` the largest bound without that assumption.
pub(super) fn about(how: Start, err_ns: f64, half_rtt_ns: f64) -> String {
    let when = match how {
        Start::Barrier => "--start barrier (COMMTEST's): each rank times from its own barrier exit",
        Start::Sync => {
            "--start sync: every rank starts at an instant rank 0 names on the synchronised clock"
        }
    };
    format!(
        "{when}; skew[us] is how far apart the ranks started, on clocks synchronised to rank 0's by round trips, ± skew±[us], which assumes each clock's fastest round trip took as long each way (offsets good to {} us so); without that assumption a round trip bounds an offset only to ± half of it ({} us here); a row whose skew plus its error exceeds {:.0}% of its time reads skewed",
        us(err_ns, 3),
        us(half_rtt_ns, 3),
        100.0 * SKEW_LIMIT
    )
}

/// The latest start minus the earliest over the ranks that timed (finite
/// stamps, on rank 0's clock), and its error: each stamp is off by at most
/// its rank's error, so the spread lies between the largest low end minus
/// the smallest high end and the largest high end minus the smallest low
/// end; the error is the farther of the two from the spread.
pub(super) fn skew(starts: &[f64], errs: &[f64]) -> Option<(f64, f64)> {
    let pts: Vec<(f64, f64)> = starts
        .iter()
        .zip(errs)
        .filter(|(s, e)| s.is_finite() && e.is_finite())
        .map(|(&s, &e)| (s, e.abs()))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let max = |f: &dyn Fn(&(f64, f64)) -> f64| pts.iter().map(f).fold(f64::MIN, f64::max);
    let min = |f: &dyn Fn(&(f64, f64)) -> f64| pts.iter().map(f).fold(f64::MAX, f64::min);
    let spread = max(&|p| p.0) - min(&|p| p.0);
    let high = max(&|p| p.0 + p.1) - min(&|p| p.0 - p.1);
    let low = (max(&|p| p.0 - p.1) - min(&|p| p.0 + p.1)).max(0.0);
    Some((spread, (high - spread).max(spread - low)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_bounds_each_stamps_error() {
        // Rank 0 exact, rank 1 250 µs later ± 3 ns: the spread is 250 µs ± 3 ns.
        assert_eq!(skew(&[0.0, 250e3], &[0.0, 3.0]), Some((250e3, 3.0)));
        // Ranks that did not time are left out.
        assert_eq!(
            skew(&[10.0, f64::NAN, 14.0], &[1.0, 0.0, 1.0]),
            Some((4.0, 2.0))
        );
        assert_eq!(skew(&[10.0], &[1.0]), None);
        // Errors larger than the spread: it may be 0, or spread + 2e.
        let (s, e) = skew(&[0.0, 1.0], &[5.0, 5.0]).unwrap();
        assert_eq!((s, e), (1.0, 10.0));
    }

    #[test]
    fn drift_during_the_rounds_is_no_stray() {
        let r = |at: f64, off: f64| ClockSync {
            offset_ns: off,
            at_ns: at,
            drift: 0.0,
            rtt_ns: 1.0,
        };
        // Offsets on a line (3 ppm): none strays.
        let line = [r(0.0, 5.0), r(1e6, 8.0), r(2e6, 11.0), r(3e6, 14.0)];
        assert!(stray(&line) < 1e-9);
        // One 2 ns off the line of the others.
        let off = [r(0.0, 0.0), r(1e6, 0.0), r(2e6, 2.0), r(3e6, 0.0)];
        assert!((1.0..=2.0).contains(&stray(&off)), "{}", stray(&off));
        assert_eq!(stray(&[r(0.0, 1.0)]), 0.0);
    }

    #[test]
    fn the_lead_covers_the_tree_and_the_clocks() {
        assert_eq!(lead_ns(2, 100.0, 1.0), 2.0 * 100.0 + 2.0);
        assert_eq!(lead_ns(5, 100.0, 0.0), 4.0 * 100.0);
    }

    #[test]
    fn local_and_global_invert() {
        let s = Synced {
            map: ClockSync {
                offset_ns: 5e4,
                at_ns: 1e6,
                drift: 1e-3,
                rtt_ns: 10.0,
            },
            err_ns: 2.0,
            first: (0.0, 2.0),
            buf: Buf {
                region: ovbench_core::RegionId(0),
                len: 8,
            },
        };
        let g = s.to_global(3e6);
        assert!((s.to_local(g) - 3e6).abs() < 1e-6);
        // The drift's error: (2 + 2) / 1e6 per ns, over 2e6 ns.
        assert!((s.err_at(3e6) - (2.0 + 8.0)).abs() < 1e-9);
    }
}
