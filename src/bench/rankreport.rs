//! What every rank reports to rank 0 after each size (over the control
//! channel, not the protocol being measured), and how rank 0 folds it
//! into a row: operation counts summed over ranks, CPU use per rank.

use anyhow::Result;
use ovbench_core::{Communicator, OpCounts};
use serde::{Deserialize, Serialize};

use crate::output::Rounded2;

use crate::control::{collect_values, deposit_value, Control};
use crate::cpu::{CpuSnapshot, CpuUse};

/// `ovbench_core::OpCounts` as it is read back from another rank: serde's
/// remote derive, checked against the core type's fields at compile time
/// (the core type derives only `Serialize`).
#[derive(Deserialize)]
#[serde(remote = "OpCounts")]
struct OpCountsDef {
    sends: u64,
    writes: u64,
    reads: u64,
    tagged_sends: u64,
    bytes: u64,
    registrations: u64,
    fast_sends: u64,
    fast_recvs: u64,
}

/// Counts summed over ranks.
pub fn sum_ops(all: &[RankReport]) -> OpCounts {
    all.iter().fold(OpCounts::default(), |a, r| OpCounts {
        sends: a.sends + r.ops.sends,
        writes: a.writes + r.ops.writes,
        reads: a.reads + r.ops.reads,
        tagged_sends: a.tagged_sends + r.ops.tagged_sends,
        bytes: a.bytes + r.ops.bytes,
        registrations: a.registrations + r.ops.registrations,
        fast_sends: a.fast_sends + r.ops.fast_sends,
        fast_recvs: a.fast_recvs + r.ops.fast_recvs,
    })
}

/// One rank's CPU use in a row's `cpu` list and the run's summary.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CpuRow {
    pub rank: u32,
    pub user_pct: Rounded2,
    pub sys_pct: Rounded2,
    pub wall_ns: u64,
    /// Of the wall time, what the rank's waits spent yielding its CPU
    /// (only ranks that share CPUs yield; absent where none did).
    #[serde(skip_serializing_if = "is_zero")]
    pub yielded_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CpuRow {
    fn new(rank: u32, c: &CpuUse, yielded_ns: u64) -> CpuRow {
        CpuRow {
            rank,
            user_pct: Rounded2(c.user_pct),
            sys_pct: Rounded2(c.sys_pct),
            wall_ns: c.wall_ns,
            yielded_ns,
        }
    }
}

/// One rank's figures for one size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: u32,
    pub cpu: CpuUse,
    #[serde(deserialize_with = "OpCountsDef::deserialize")]
    pub ops: OpCounts,
    /// The rank's own timed interval (bw: first to last window), ns.
    pub elapsed_ns: f64,
    /// `--instrument`: what the instrumented pass recorded on this rank.
    #[serde(default)]
    pub instrument: Option<super::instrumented::RankPass>,
    /// Nanoseconds its waits spent yielding the CPU.
    #[serde(default)]
    pub yielded_ns: u64,
}

/// Started before a size's timed region, finished after it.
#[derive(Debug)]
pub struct Meter {
    cpu: CpuSnapshot,
    ops: OpCounts,
    yielded_ns: u64,
}

impl Meter {
    pub fn start(comm: &dyn Communicator) -> Meter {
        Meter {
            cpu: CpuSnapshot::now(),
            ops: comm.op_counts(),
            yielded_ns: comm.yielded_ns(),
        }
    }
    pub fn finish(&self, comm: &dyn Communicator, elapsed_ns: f64) -> RankReport {
        RankReport {
            rank: comm.rank(),
            cpu: self.cpu.until(&CpuSnapshot::now()),
            ops: comm.op_counts().since(&self.ops),
            elapsed_ns,
            instrument: None,
            yielded_ns: comm.yielded_ns().saturating_sub(self.yielded_ns),
        }
    }
}

/// Leave this rank's report (before the size's closing barrier).
pub fn deposit(ctl: &mut dyn Control, mine: &RankReport) -> Result<()> {
    deposit_value(ctl, mine)
}

/// Every rank's report at rank 0 (after that barrier).
pub fn collect(ctl: &mut dyn Control) -> Result<Option<Vec<RankReport>>> {
    collect_values(ctl)
}

/// The `ops` (summed over ranks) and `cpu` (per rank) of a row.
pub fn row_fields(all: &[RankReport]) -> (OpCounts, Vec<CpuRow>) {
    let cpu = all
        .iter()
        .map(|r| CpuRow::new(r.rank, &r.cpu, r.yielded_ns))
        .collect();
    (sum_ops(all), cpu)
}

/// CPU use per rank summed over a sweep (rank 0), printed after the
/// table as qperf does and kept in the JSON summary.
#[derive(Debug, Default)]
pub struct CpuTotals {
    per_rank: Vec<CpuUse>,
    yielded_ns: Vec<u64>,
}

impl CpuTotals {
    pub fn add(&mut self, all: &[RankReport]) {
        if self.per_rank.len() < all.len() {
            self.per_rank.resize(all.len(), CpuUse::default());
            self.yielded_ns.resize(all.len(), 0);
        }
        for ((t, y), r) in self.per_rank.iter_mut().zip(&mut self.yielded_ns).zip(all) {
            *t = t.add(&r.cpu);
            *y = y.saturating_add(r.yielded_ns);
        }
    }
    /// The summary object and lines (nothing if no size ran).
    pub fn summary(&self) -> Option<(serde_json::Value, Vec<String>)> {
        if self.per_rank.is_empty() {
            return None;
        }
        let lines = self
            .per_rank
            .iter()
            .zip(&self.yielded_ns)
            .enumerate()
            .map(|(r, (c, &y))| {
                let wall = c.wall_ns as f64 / 1e9;
                let yielded = if y > 0 {
                    format!(
                        "; communication waits yielded the CPU {:.3} s ({:.1}% of wall)",
                        y as f64 / 1e9,
                        100.0 * y as f64 / c.wall_ns.max(1) as f64
                    )
                } else {
                    String::new()
                };
                format!(
                    "cpu use rank {r}: user {:.1}%, sys {:.1}% of {wall:.3} s wall{yielded}",
                    c.user_pct, c.sys_pct,
                )
            })
            .collect();
        let cpu: Vec<CpuRow> = (0u32..)
            .zip(self.per_rank.iter().zip(&self.yielded_ns))
            .map(|(r, (c, &y))| CpuRow::new(r, c, y))
            .collect();
        Some((serde_json::json!({ "cpu": cpu }), lines))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_summed_and_cpu_listed_per_rank() {
        let r = |rank, reads| RankReport {
            rank,
            cpu: CpuUse::new(1000, 900, 50),
            ops: OpCounts {
                sends: 2,
                reads,
                bytes: 10,
                ..OpCounts::default()
            },
            elapsed_ns: 5.0,
            instrument: None,
            yielded_ns: 0,
        };
        let (ops, cpu) = row_fields(&[r(0, 0), r(1, 3)]);
        assert_eq!((ops.sends, ops.reads, ops.bytes), (4, 3, 20));
        let cpu = crate::output::to_json(&cpu);
        assert_eq!(cpu[1]["rank"], 1);
        assert_eq!(cpu[0]["user_pct"], 90.0);
        assert_eq!(cpu[0]["sys_pct"], 5.0);
    }

    #[test]
    fn cpu_totals_sum_over_sizes() {
        let r = |rank, user| RankReport {
            rank,
            cpu: CpuUse::new(1_000_000_000, user, 0),
            ..Default::default()
        };
        let mut t = CpuTotals::default();
        assert!(t.summary().is_none());
        t.add(&[r(0, 1_000_000_000), r(1, 500_000_000)]);
        t.add(&[r(0, 0), r(1, 500_000_000)]);
        let (json, lines) = t.summary().unwrap();
        assert_eq!(json["cpu"][0]["user_pct"], 50.0);
        assert_eq!(json["cpu"][1]["user_pct"], 50.0);
        assert_eq!(
            lines[1],
            "cpu use rank 1: user 50.0%, sys 0.0% of 2.000 s wall"
        );
        assert!(json["cpu"][1].get("yielded_ns").is_none(), "{json}");
    }

    #[test]
    fn yielded_waits_are_summed_and_said() {
        let r = |rank, yielded_ns| RankReport {
            rank,
            cpu: CpuUse::new(1_000_000_000, 0, 0),
            yielded_ns,
            ..Default::default()
        };
        let mut t = CpuTotals::default();
        t.add(&[r(0, 0), r(1, 250_000_000)]);
        t.add(&[r(0, 0), r(1, 250_000_000)]);
        let (json, lines) = t.summary().unwrap();
        assert_eq!(json["cpu"][1]["yielded_ns"], 500_000_000);
        assert!(json["cpu"][0].get("yielded_ns").is_none(), "{json}");
        assert!(
            lines[1].ends_with("; communication waits yielded the CPU 0.500 s (25.0% of wall)"),
            "{}",
            lines[1]
        );
        assert!(!lines[0].contains("yielded"), "{}", lines[0]);
    }

    #[test]
    fn report_round_trips_as_json() {
        let r = RankReport {
            rank: 3,
            elapsed_ns: 1.5,
            ..Default::default()
        };
        let back: RankReport = serde_json::from_slice(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
