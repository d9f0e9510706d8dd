//! The virtual clock and work loop of one rank. Ticks are picoseconds of
//! the rank's virtual time, seen through its `skew.R` offset and
//! `drift.R` rate; `work(n)` advances the rank by n × [`WORK_UNIT_PS`] and
//! is recorded as computation for the truth; `delay(ns)` advances it by
//! exactly that much and is not computation (it stands for a spin).
//! Neither calls into the network.

use std::sync::Arc;

use ovbench_core::{Clock, ClockInfo, Rank, Work};

use crate::sched::Shared;
use crate::Ps;

/// One unit of `work(n)`: 1 ns.
pub const WORK_UNIT_PS: Ps = 1_000;

/// A rank's virtual clock.
#[derive(Debug)]
pub struct SimClock {
    shared: Arc<Shared>,
    rank: Rank,
    skew: i64,
    drift: f64,
}

impl SimClock {
    pub(crate) fn new(shared: Arc<Shared>, rank: Rank) -> SimClock {
        let skew = shared.params.skew.get(&rank).copied().unwrap_or(0);
        let drift = shared.params.drift.get(&rank).copied().unwrap_or(0.0);
        SimClock {
            shared,
            rank,
            skew,
            drift,
        }
    }

    /// What this clock reads at true virtual time `t`: t·(1 + drift) +
    /// skew, never below zero.
    pub fn reading_at(&self, t: Ps) -> u64 {
        if self.skew == 0 && self.drift == 0.0 {
            return t;
        }
        let drifted = if self.drift == 0.0 {
            i128::from(t)
        } else {
            i128::from(t) + (t as f64 * self.drift).round() as i128
        };
        (drifted + i128::from(self.skew)).clamp(0, i128::from(u64::MAX)) as u64
    }
}

impl Clock for SimClock {
    fn ticks(&self) -> u64 {
        self.reading_at(self.shared.now(self.rank))
    }
    fn ns_per_tick(&self) -> f64 {
        0.001
    }
    fn info(&self) -> ClockInfo {
        ClockInfo {
            source: "virtual".into(),
            hz: 1e12,
            resolution_ns: 0.001,
            call_cost_ns: 0.0,
        }
    }
}

/// A rank's virtual work loop.
#[derive(Debug)]
pub struct SimWork {
    shared: Arc<Shared>,
    rank: Rank,
}

impl SimWork {
    pub(crate) fn new(shared: Arc<Shared>, rank: Rank) -> SimWork {
        SimWork { shared, rank }
    }
}

impl Work for SimWork {
    fn work(&mut self, units: u64) {
        self.shared
            .advance(self.rank, units.saturating_mul(WORK_UNIT_PS), true);
    }
    fn unit_ns(&self) -> f64 {
        WORK_UNIT_PS as f64 / 1000.0
    }
    fn delay(&mut self, ns: f64) {
        let ps = (ns * 1000.0).round().max(0.0) as Ps;
        self.shared.advance(self.rank, ps, false);
    }
}
