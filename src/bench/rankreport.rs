//! What every rank reports to rank 0 after each size (over the control
//! channel, not the protocol being measured), and how rank 0 folds it
//! into a row: operation counts summed over ranks, CPU use per rank.

use anyhow::Result;
use ovbench_core::{Communicator, OpCounts};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::control::{collect_values, deposit_value, Control};
use crate::cpu::{CpuSnapshot, CpuUse};

/// Operation counts as they travel and appear in JSON (`ops`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ops {
    pub sends: u64,
    pub writes: u64,
    pub reads: u64,
    pub tagged_sends: u64,
    pub bytes: u64,
    pub registrations: u64,
}

impl From<OpCounts> for Ops {
    fn from(c: OpCounts) -> Ops {
        Ops {
            sends: c.sends,
            writes: c.writes,
            reads: c.reads,
            tagged_sends: c.tagged_sends,
            bytes: c.bytes,
            registrations: c.registrations,
        }
    }
}

impl Ops {
    pub fn add(&self, o: &Ops) -> Ops {
        Ops {
            sends: self.sends + o.sends,
            writes: self.writes + o.writes,
            reads: self.reads + o.reads,
            tagged_sends: self.tagged_sends + o.tagged_sends,
            bytes: self.bytes + o.bytes,
            registrations: self.registrations + o.registrations,
        }
    }
}

/// One rank's figures for one size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: u32,
    pub cpu: CpuUse,
    pub ops: Ops,
    /// The rank's own timed interval (bw: first to last window), ns.
    pub elapsed_ns: f64,
    /// `--instrument`: what the instrumented pass recorded on this rank.
    #[serde(default)]
    pub instrument: Option<Value>,
}

/// Started before a size's timed region, finished after it.
#[derive(Debug)]
pub struct Meter {
    cpu: CpuSnapshot,
    ops: OpCounts,
}

impl Meter {
    pub fn start(comm: &dyn Communicator) -> Meter {
        Meter {
            cpu: CpuSnapshot::now(),
            ops: comm.op_counts(),
        }
    }
    pub fn finish(&self, comm: &dyn Communicator, elapsed_ns: f64) -> RankReport {
        RankReport {
            rank: comm.rank(),
            cpu: self.cpu.until(&CpuSnapshot::now()),
            ops: comm.op_counts().since(&self.ops).into(),
            elapsed_ns,
            instrument: None,
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

/// The `ops` object (summed over ranks) and `cpu` array of a row.
pub fn row_fields(all: &[RankReport]) -> (Value, Value) {
    let ops = all.iter().fold(Ops::default(), |a, r| a.add(&r.ops));
    let cpu: Vec<Value> = all
        .iter()
        .map(|r| {
            json!({
                "rank": r.rank,
                "user_pct": round2(r.cpu.user_pct),
                "sys_pct": round2(r.cpu.sys_pct),
                "wall_ns": r.cpu.wall_ns,
            })
        })
        .collect();
    (json!(ops), Value::Array(cpu))
}

/// CPU use per rank summed over a sweep (rank 0), printed after the
/// table as qperf does and kept in the JSON summary.
#[derive(Debug, Default)]
pub struct CpuTotals {
    per_rank: Vec<CpuUse>,
}

impl CpuTotals {
    pub fn add(&mut self, all: &[RankReport]) {
        if self.per_rank.len() < all.len() {
            self.per_rank.resize(all.len(), CpuUse::default());
        }
        for (t, r) in self.per_rank.iter_mut().zip(all) {
            *t = t.add(&r.cpu);
        }
    }
    /// The summary object and lines (nothing if no size ran).
    pub fn summary(&self) -> Option<(Value, Vec<String>)> {
        if self.per_rank.is_empty() {
            return None;
        }
        let lines = self
            .per_rank
            .iter()
            .enumerate()
            .map(|(r, c)| {
                format!(
                    "cpu use rank {r}: user {:.1}%, sys {:.1}% of {:.3} s wall",
                    c.user_pct,
                    c.sys_pct,
                    c.wall_ns as f64 / 1e9
                )
            })
            .collect();
        let json: Vec<Value> = self
            .per_rank
            .iter()
            .enumerate()
            .map(|(r, c)| {
                json!({"rank": r, "user_pct": round2(c.user_pct), "sys_pct": round2(c.sys_pct), "wall_ns": c.wall_ns})
            })
            .collect();
        Some((json!({ "cpu": json }), lines))
    }
}

/// Round to two decimals for JSON readability.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_summed_and_cpu_listed_per_rank() {
        let r = |rank, reads| RankReport {
            rank,
            cpu: CpuUse::new(1000, 900, 50),
            ops: Ops {
                sends: 2,
                reads,
                bytes: 10,
                ..Ops::default()
            },
            elapsed_ns: 5.0,
            instrument: None,
        };
        let (ops, cpu) = row_fields(&[r(0, 0), r(1, 3)]);
        assert_eq!(ops["sends"], 4);
        assert_eq!(ops["reads"], 3);
        assert_eq!(ops["bytes"], 20);
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
