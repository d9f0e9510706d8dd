//! What really happened, known exactly to the simulator: per rank, the
//! intervals of computation (`work` calls) and every data-moving operation
//! with its post and completion times. Accuracy tests compare the overlap
//! bounds the instrumentation computes with [`SimReport::true_overlap`].
//!
//! All times are true virtual picoseconds (not skewed by `skew.R` or
//! `drift.R`; with neither set they equal what the rank's clock reads).
//! To aggregate per step, a rank's closure records each step's
//! `[comm.now(), comm.now()]` window and returns it; the test then sums
//! [`RankTruth::ops_posted_in`] over the window.

use ovbench_core::{OpKind, Rank};

use crate::Ps;

/// One operation the engine posted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpTruth {
    /// `Send`, `Write` or `Read`.
    pub kind: OpKind,
    pub peer: Rank,
    /// Payload bytes (a send's header is not counted).
    pub bytes: u64,
    /// When the posting call began, before its o_s.
    pub post_ps: Ps,
    /// When its data began to move: the NIC's injection start for a send
    /// or a write (later than the post plus o_s when the NIC is still busy
    /// with earlier operations); for a read, one L before the target began
    /// serving it (later when a target without offload serves it in its
    /// next library call). The transfer itself is `[start_ps,
    /// complete_ps]`: time queued behind other transfers, or waiting for
    /// a target's call, moves no data of this one.
    pub start_ps: Ps,
    /// When its completion became available at the initiator (`None`:
    /// never, e.g. the run ended first).
    pub complete_ps: Option<Ps>,
}

impl OpTruth {
    /// Whether it moved user data: writes, reads, and sends with a payload
    /// (control messages are header-only sends).
    pub fn is_data(&self) -> bool {
        self.kind != OpKind::Send || self.bytes > 0
    }
}

/// One rank's truth.
#[derive(Clone, Debug, Default)]
pub struct RankTruth {
    /// Computation intervals `[start, end)`, sorted, disjoint, merged.
    pub compute: Vec<(Ps, Ps)>,
    /// Operations in posting order.
    pub ops: Vec<OpTruth>,
    /// The rank's virtual time when its closure returned.
    pub end_ps: Ps,
}

impl RankTruth {
    /// Record `[start, end)` of computation (called in time order).
    pub(crate) fn add_compute(&mut self, start: Ps, end: Ps) {
        if end <= start {
            return;
        }
        match self.compute.last_mut() {
            Some(last) if last.1 >= start => last.1 = last.1.max(end),
            _ => self.compute.push((start, end)),
        }
    }

    /// Length of `[a, b) ∩` computation.
    pub fn compute_within(&self, a: Ps, b: Ps) -> Ps {
        if b <= a {
            return 0;
        }
        // First interval that ends after `a`.
        let first = self.compute.partition_point(|&(_, e)| e <= a);
        self.compute[first..]
            .iter()
            .take_while(|&&(s, _)| s < b)
            .map(|&(s, e)| e.min(b) - s.max(a))
            .sum()
    }

    /// True overlap of an operation: `[start, completion] ∩ computation`
    /// (from when its data began to move).
    pub fn true_overlap(&self, op: &OpTruth) -> Ps {
        op.complete_ps
            .map_or(0, |c| self.compute_within(op.start_ps, c))
    }

    /// Operations posted within `[from, to)`.
    pub fn ops_posted_in(&self, from: Ps, to: Ps) -> impl Iterator<Item = &OpTruth> {
        self.ops
            .iter()
            .filter(move |o| o.post_ps >= from && o.post_ps < to)
    }
}

/// Everything the simulator knows after a run, indexed by rank.
#[derive(Clone, Debug, Default)]
pub struct SimReport {
    pub ranks: Vec<RankTruth>,
    /// Baton handoffs between rank threads during the run (a cost figure:
    /// each is an OS context switch).
    pub switches: u64,
}

impl SimReport {
    /// Sum of the true overlap of `rank`'s data operations posted in
    /// `[from, to)`.
    pub fn true_overlap(&self, rank: Rank, from: Ps, to: Ps) -> Ps {
        let t = &self.ranks[rank as usize];
        t.ops_posted_in(from, to)
            .filter(|o| o.is_data())
            .map(|o| t.true_overlap(o))
            .sum()
    }

    /// Virtual time at which the last rank finished.
    pub fn makespan_ps(&self) -> Ps {
        self.ranks.iter().map(|r| r.end_ps).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_intersection() {
        let mut t = RankTruth::default();
        t.add_compute(10, 20);
        t.add_compute(20, 30); // merges with the previous
        t.add_compute(50, 60);
        assert_eq!(t.compute, vec![(10, 30), (50, 60)]);
        assert_eq!(t.compute_within(0, 100), 30);
        assert_eq!(t.compute_within(15, 55), 20);
        assert_eq!(t.compute_within(30, 50), 0);
        assert_eq!(t.compute_within(55, 55), 0);
        let op = OpTruth {
            kind: OpKind::Write,
            peer: 1,
            bytes: 8,
            post_ps: 25,
            start_ps: 25,
            complete_ps: Some(52),
        };
        assert_eq!(t.true_overlap(&op), 7);
        t.ops.push(op);
        t.ops.push(OpTruth {
            kind: OpKind::Send,
            peer: 1,
            bytes: 0,
            post_ps: 26,
            start_ps: 26,
            complete_ps: Some(60),
        });
        let rep = SimReport {
            ranks: vec![t],
            switches: 0,
        };
        assert_eq!(rep.true_overlap(0, 0, 100), 7, "control sends excluded");
        assert_eq!(rep.true_overlap(0, 26, 100), 0);
    }
}
