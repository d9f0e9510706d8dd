//! One whole measurement of one message size: the post-work-wait loop with
//! work doubling from 1 ns until `iter_t > thresh·base_t`, then the same loop
//! without messaging (`work_t`). Loop shape and partner roles follow
//! Sandia SMB's mpi_overhead.c.

use anyhow::bail;
use ovbench_core::{Buf, Communicator, OpCounts, Rank, Tag};
use serde::Serialize;

use super::rules::{problems, BaseFilter};
use crate::methods::common::{ns, Ctrl};
use crate::output::{us, Column, FixedRow, Table};
use crate::report::Sink;

const TAG_DATA: Tag = 0x4f56_0101;
/// Work never doubles past this (2^40 ns); reaching it is an error.
const MAX_WORK: u64 = 1 << 40;

/// One work value of the doubling loop (the `--verbose` rows).
#[derive(Debug, Clone, Serialize)]
pub struct WorkStep {
    pub work: u64,
    pub iter_ns: f64,
    pub base_ns: f64,
}

/// One whole measurement (one repeat) of one size.
/// `--verbose`'s row: one work value's loop.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    pub size: usize,
    pub work: u64,
    pub iter_ns: f64,
    pub base_ns: f64,
}

impl FixedRow for StepRow {
    fn columns() -> Vec<Column<StepRow>> {
        vec![
            Column::new("work", "work", |r: &StepRow| r.work.to_string()),
            Column::new("iter_t[us]", "iter_ns", |r: &StepRow| us(r.iter_ns, 3)),
            Column::new("base_t[us]", "base_ns", |r: &StepRow| us(r.base_ns, 3)),
        ]
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Run {
    /// Work value (ns of computation) of the last loop, the one that
    /// crossed thresh·base_t.
    pub work: u64,
    pub iter_ns: f64,
    pub work_ns: f64,
    pub overhead_ns: f64,
    pub base_ns: f64,
    pub avail_pct: f64,
    /// Operations this rank posted in the final messaging loop.
    pub ops: OpCounts,
    #[serde(skip)]
    pub steps: Vec<WorkStep>,
}

impl Run {
    /// What makes this measurement impossible (empty when possible).
    pub fn problems(&self) -> Vec<String> {
        problems(self.overhead_ns, self.avail_pct, self.base_ns, self.work_ns)
    }
}

/// The loop's fixed parts for one rank.
pub(crate) struct Loop<'a> {
    pub comm: &'a mut dyn Communicator,
    pub ctrl: Ctrl,
    pub buf: Buf,
    pub partner: Rank,
    pub measuring: bool,
    pub recv_mode: bool,
    pub thresh: f64,
    pub bthresh: f64,
}

impl Loop<'_> {
    /// `iters` post-work-wait iterations with work value `work`, timed
    /// whole, barrier included (the original's timed loop).
    fn messaging(&mut self, size: usize, iters: u64, work: u64) -> anyhow::Result<(f64, OpCounts)> {
        let c = &mut *self.comm;
        let work = units(work, c.work_unit_ns());
        let (buf, p) = (self.buf, self.partner);
        let mut before = c.op_counts();
        let mut t0 = c.now();
        // deviation: warmup-iteration — one untimed iteration before each timed loop, see docs/methods/overhead.md
        // One untimed iteration first, so the timed loop starts in the
        // steady state it ends in (the partner's messages of the previous
        // iteration already in flight).
        for i in 0..=iters {
            if i == 1 {
                before = c.op_counts();
                t0 = c.now();
            }
            match (self.measuring, self.recv_mode) {
                (true, false) => {
                    c.barrier()?;
                    let r = c.isend(buf.first(size), p, TAG_DATA)?;
                    c.work(work);
                    c.wait(r)?;
                }
                (false, false) => {
                    let r = c.irecv(buf.first(size), Some(p), Some(TAG_DATA))?;
                    c.barrier()?;
                    c.wait(r)?;
                }
                (true, true) => {
                    let r = c.irecv(buf.first(size), Some(p), Some(TAG_DATA))?;
                    c.barrier()?;
                    c.work(work);
                    c.wait(r)?;
                }
                (false, true) => {
                    c.barrier()?;
                    c.send(buf.first(size), p, TAG_DATA)?;
                }
            }
        }
        let t1 = c.now();
        Ok((ns(c, t1 - t0) / iters as f64, c.op_counts().since(&before)))
    }

    /// The same loop without messaging: barrier and work only.
    fn work_only(&mut self, iters: u64, work: u64) -> anyhow::Result<f64> {
        let c = &mut *self.comm;
        let work = units(work, c.work_unit_ns());
        let mut t0 = c.now();
        for i in 0..=iters {
            if i == 1 {
                t0 = c.now();
            }
            c.barrier()?;
            if self.measuring {
                c.work(work);
            }
        }
        let t1 = c.now();
        Ok(ns(c, t1 - t0) / iters as f64)
    }

    /// Whether `flag` holds on every rank (gathered at rank 0, which
    /// sends the verdict back; outside every timed loop).
    pub(crate) fn all(&mut self, flag: bool) -> anyhow::Result<bool> {
        let gathered = self.ctrl.gather(self.comm, f64::from(u8::from(flag)))?;
        let verdict = gathered.map(|v| u64::from(v.iter().all(|&f| f != 0.0)));
        let w = self.ctrl.bcast(self.comm, &[verdict.unwrap_or(0)])?;
        Ok(w.first().copied().unwrap_or(0) != 0)
    }

    /// One whole measurement of `size`. Rows per work value go to `sink`
    /// when `verbose` (its table already started). The partner's `Run`
    /// is empty.
    pub(crate) fn measure(
        &mut self,
        size: usize,
        iters: u64,
        verbose: bool,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<Run> {
        let mut work = 1u64;
        let mut filter = BaseFilter::new(self.thresh, self.bthresh);
        // This rank's final (iter_t, work) once it crossed thresh·base_t.
        let mut done: Option<(f64, u64, OpCounts)> = None;
        let mut steps = Vec::new();
        // deviation: warmup-loop — one untimed loop at work 1 before each measurement, see docs/methods/overhead.md
        // A whole untimed loop first (not in the original): the first
        // sample seeds base_t's filter, and a cold one (first
        // registrations, socket buffers still growing) would inflate
        // base_t for the rest of the measurement.
        self.messaging(size, iters, work)?;
        loop {
            let (iter_t, ops) = self.messaging(size, iters, work)?;
            if done.is_none() && self.measuring {
                let stop = filter.offer(iter_t);
                let base = filter.base();
                steps.push(WorkStep {
                    work,
                    iter_ns: iter_t,
                    base_ns: base,
                });
                if verbose {
                    let step = StepRow {
                        size,
                        work,
                        iter_ns: iter_t,
                        base_ns: base,
                    };
                    Table::quiet(&()).add(sink, &step);
                }
                if stop {
                    done = Some((iter_t, work, ops));
                }
            }
            // Every pair runs the same number of barriers: continue until
            // all measuring ranks are done (rank 0 decides, outside timing).
            // deviation: ctrl-agreement — ranks agree by control messages outside the timed loops, see docs/methods/overhead.md
            if self.all(!self.measuring || done.is_some())? {
                break;
            }
            if work >= MAX_WORK {
                bail!(
                    "msgsize {size}: iter_t never exceeded {}·base_t up to {MAX_WORK} ns of work; raise --iterations or lower --thresh",
                    self.thresh
                );
            }
            work *= 2;
        }
        let (iter_t, my_work, ops) = done.unwrap_or_default();
        let work_t = self.work_only(iters, my_work)?;
        if !self.measuring {
            return Ok(Run::default());
        }
        let base = filter.base();
        let overhead = iter_t - work_t;
        Ok(Run {
            work: my_work,
            iter_ns: iter_t,
            work_ns: work_t,
            overhead_ns: overhead,
            base_ns: base,
            avail_pct: 100.0 * (1.0 - overhead / base),
            ops,
            steps,
        })
    }
}

/// The whole units of the work loop that work value `w` runs: `w` counts
/// nanoseconds of computation, as the original's loop turns do (one turn
/// of `y = a*x + b` on globals, about a nanosecond), rounded down to units
/// of `unit_ns`.
// deviation: work-in-nanoseconds — the work value is ns, done in whole units, see docs/methods/overhead.md
pub(crate) fn units(w: u64, unit_ns: f64) -> u64 {
    if unit_ns > 0.0 && unit_ns.is_finite() {
        (w as f64 / unit_ns) as u64
    } else {
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_values_are_nanoseconds_in_whole_units() {
        // Over an 85 ns unit the first work values run no computation, as
        // the original's first turns (~1 ns each) hardly do: base_t is
        // then the mean of several samples at (near) zero work.
        let u: Vec<u64> = [1, 2, 64, 85, 128, 256, 1024]
            .iter()
            .map(|&w| units(w, 85.0))
            .collect();
        assert_eq!(u, [0, 0, 0, 1, 1, 3, 12]);
        // A 1 ns unit (the sim's) runs the work value itself.
        assert_eq!(units(4096, 1.0), 4096);
        assert_eq!(units(1 << 40, 1.0), 1 << 40);
        assert_eq!(units(7, 0.0), 7);
    }

    #[test]
    fn columns_show_json_keys() {
        let row = StepRow {
            size: 8,
            work: 1,
            iter_ns: 2.0,
            base_ns: 1.0,
        };
        crate::output::check_fields(&(), &row).unwrap();
    }
}
