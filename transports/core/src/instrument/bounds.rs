//! The bounds processor of §2.2 of Shet, Sadayappan, Bernholdt, Nieplocha
//! and Tipparaju, "A Framework for Characterizing Overlap of Communication
//! and Computation in Parallel Applications": folds
//! CALL/XFER events into per-process and per-size-bucket totals.
//!
//! Per transfer, with xfer = xfer_time(size):
//! * BEGIN and END inside the same call: min = max = 0;
//! * otherwise max = min(computation between them, xfer) and
//!   min = max(0, xfer − time inside the library between them), clamped
//!   to max where xfer outlasts BEGIN→END (see `fold`);
//! * only one of them seen: min = 0, max = xfer;
//! * call-bounded (native library paths): min = 0,
//!   max = min(computation between, xfer).
//!
//! Computation is the time between a CALL_EXIT and the next CALL_ENTER;
//! call time between a CALL_ENTER and its CALL_EXIT.

use serde::Serialize;

use super::ring::{EventKind, Record};
use super::XferTable;

/// Totals for transfers of sizes in `(size_max/2, size_max]` (0 and 1 alone).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BucketTotals {
    /// Largest transfer size of the bucket, in bytes (a power of two, or 0).
    pub size_max: u64,
    /// Transfers counted in the bucket.
    pub transfers: u64,
    /// Sum of xfer_time(size) over those transfers, in ns.
    pub data_transfer_ns: f64,
    /// Sum of their lower overlap bounds, in ns.
    pub min_overlap_ns: f64,
    /// Sum of their upper overlap bounds, in ns.
    pub max_overlap_ns: f64,
}

/// What one process's events add up to.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OverlapReport {
    /// Data transfers counted (ended ones, plus those still open).
    pub transfers: u64,
    /// Sum of xfer_time(size) over the transfers, in ns: the time the data
    /// movement itself takes, from the [`XferTable`], not as observed.
    pub data_transfer_ns: f64,
    /// Sum of the per-transfer lower bounds on overlapped time, in ns.
    pub min_overlap_ns: f64,
    /// Sum of the per-transfer upper bounds on overlapped time, in ns;
    /// `min ≤ max ≤ data_transfer_ns` always holds.
    pub max_overlap_ns: f64,
    /// Time outside communicator calls (CALL_EXIT to the next
    /// CALL_ENTER) since the last reset, in ns.
    pub computation_ns: f64,
    /// Time inside communicator calls since the last reset, in ns.
    pub call_ns: f64,
    /// Transfers where only BEGIN or only END was seen (case 3).
    pub one_sided_transfers: u64,
    /// Transfers whose BEGIN→END outlasted xfer_time by more than a tenth:
    /// they queued behind others on the NIC or waited for a peer's call,
    /// so the stamped interval is not the transfer itself and the bounds
    /// can only bracket it.
    pub stretched_transfers: u64,
    /// Events folded so far.
    pub events: u64,
    /// The same totals per size bucket, smallest first; empty buckets
    /// left out.
    pub buckets: Vec<BucketTotals>,
}

impl OverlapReport {
    /// min and max overlap as a percentage of the data transfer time.
    pub fn overlap_pct(&self) -> (f64, f64) {
        if self.data_transfer_ns <= 0.0 {
            return (0.0, 0.0);
        }
        (
            100.0 * self.min_overlap_ns / self.data_transfer_ns,
            100.0 * self.max_overlap_ns / self.data_transfer_ns,
        )
    }
}

#[derive(Clone, Copy, Debug)]
struct Open {
    bytes: u64,
    call: u64,
    in_call: bool,
    comp: u64,
    lib: u64,
    call_bounded: bool,
}

/// Where the rank was from `at` on: its totals at `at`, and whether the
/// stretch that starts there is library time (in call `call`) or
/// computation. Kept for the last [`HISTORY`] calls, so that an END
/// stamped before the call that records it (a NIC's completion time) is
/// folded at its own time, not at the time it was taken.
#[derive(Clone, Copy, Debug, Default)]
struct Stretch {
    at: u64,
    comp: u64,
    lib: u64,
    in_call: bool,
    call: u64,
}

/// Stretches remembered behind the current one: a completion is taken a
/// few calls after it finished at most (the wait that completes its
/// request, or the drain at the end of a step).
const HISTORY: usize = 32;

/// Running state and totals (ticks until the report converts them).
#[derive(Debug)]
pub struct Bounds {
    table: XferTable,
    ns_per_tick: f64,
    in_call: bool,
    call_index: u64,
    /// Computation and library time before `mark`, and where `mark` is.
    comp: u64,
    lib: u64,
    mark: Option<u64>,
    /// Transfers begun and not ended: few at a time, so a vector searched
    /// from the newest end beats hashing.
    open: Vec<(u64, Open)>,
    /// Past stretches, oldest first (a ring of the last [`HISTORY`]).
    past: std::collections::VecDeque<Stretch>,
    report: OverlapReport,
    /// Index 0: 0 bytes; index k ≥ 1: sizes in (2^(k-2), 2^(k-1)].
    buckets: [BucketTotals; 66],
}

impl Stretch {
    /// Totals at `at` (not before this stretch's start).
    fn clocks_at(&self, at: u64) -> (u64, u64) {
        let since = at.saturating_sub(self.at);
        if self.in_call {
            (self.comp, self.lib + since)
        } else {
            (self.comp + since, self.lib)
        }
    }
}

fn bucket_index(bytes: u64) -> usize {
    match bytes {
        0 => 0,
        1 => 1,
        b => 1 + (64 - (b - 1).leading_zeros()) as usize,
    }
}

fn bucket_max(index: usize) -> u64 {
    match index {
        0 => 0,
        k => 1u64.checked_shl(k as u32 - 1).unwrap_or(u64::MAX),
    }
}

impl Bounds {
    /// Empty totals, with `table` as xfer_time(size) and `ns_per_tick`
    /// converting the events' clock ticks to nanoseconds.
    pub fn new(table: XferTable, ns_per_tick: f64) -> Bounds {
        Bounds {
            table,
            ns_per_tick,
            in_call: false,
            call_index: 0,
            comp: 0,
            lib: 0,
            mark: None,
            open: Vec::with_capacity(64),
            past: std::collections::VecDeque::with_capacity(HISTORY),
            report: OverlapReport::default(),
            buckets: std::array::from_fn(|k| BucketTotals {
                size_max: bucket_max(k),
                ..Default::default()
            }),
        }
    }

    /// Use `table` as xfer_time(size) for the transfers that end from now
    /// on.
    pub fn set_table(&mut self, table: XferTable) {
        self.table = table;
    }

    /// Computation and library ticks accumulated up to `at`.
    fn clocks_at(&self, at: u64) -> (u64, u64) {
        let s = self.stretch_at(at);
        s.clocks_at(at)
    }

    /// The stretch `at` falls in: the current one, or a remembered one
    /// for a time before the last CALL event (the oldest remembered, at
    /// its start, for anything older still).
    fn stretch_at(&self, at: u64) -> Stretch {
        let now = Stretch {
            // No mark yet: nothing accrues before the first event.
            at: self.mark.unwrap_or(at),
            comp: self.comp,
            lib: self.lib,
            in_call: self.in_call,
            call: self.call_index,
        };
        if self.mark.map_or(true, |m| at >= m) {
            return now;
        }
        match self.past.iter().rev().find(|s| s.at <= at) {
            Some(s) => *s,
            None => self.past.front().copied().unwrap_or(now),
        }
    }

    /// Fold one event.
    pub fn fold(&mut self, e: &Record) {
        self.report.events += 1;
        match e.kind {
            EventKind::CallEnter | EventKind::CallExit => {
                if let Some(m) = self.mark {
                    if self.past.len() == HISTORY {
                        self.past.pop_front();
                    }
                    self.past.push_back(Stretch {
                        at: m,
                        comp: self.comp,
                        lib: self.lib,
                        in_call: self.in_call,
                        call: self.call_index,
                    });
                }
                let (c, l) = self.clocks_at(e.at);
                self.comp = c;
                self.lib = l;
                self.mark = Some(e.at);
                self.in_call = e.kind == EventKind::CallEnter;
                if self.in_call {
                    self.call_index += 1;
                }
            }
            EventKind::XferBegin => {
                let (comp, lib) = self.clocks_at(e.at);
                self.open.push((
                    e.id,
                    Open {
                        bytes: e.bytes,
                        call: self.call_index,
                        in_call: self.in_call,
                        comp,
                        lib,
                        call_bounded: e.call_bounded,
                    },
                ));
            }
            EventKind::XferEnd => {
                let xfer = self.table.xfer_ns(e.bytes);
                let Some(pos) = self.open.iter().rposition(|o| o.0 == e.id) else {
                    self.add(e.bytes, xfer, 0.0, xfer, true);
                    return;
                };
                let b = self.open.swap_remove(pos).1;
                let then = self.stretch_at(e.at);
                let (comp, lib) = then.clocks_at(e.at);
                let comp_ns = (comp - b.comp) as f64 * self.ns_per_tick;
                let lib_ns = (lib - b.lib) as f64 * self.ns_per_tick;
                let (min, max) = if b.call_bounded {
                    (0.0, comp_ns.min(xfer))
                } else if b.in_call && then.in_call && b.call == then.call {
                    (0.0, 0.0)
                } else {
                    let max = comp_ns.min(xfer);
                    // The paper's min, "at least xfer − noncomputation was
                    // overlapped", assumes the transfer fits between BEGIN
                    // and END (xfer ≤ comp + lib). An estimate longer than
                    // that window (a table measured under other conditions)
                    // breaks it and would give min = xfer − lib > comp ≥
                    // max. The transfer cannot outlast the window it lies in,
                    // so it overlapped at most the computation in there:
                    // clamp min to max (≤ comp, ≤ xfer), which is the
                    // paper's formula with xfer cut to END − BEGIN.
                    // deviation: stretched-bracketing — queued transfers: bounds bracket, not tight, see docs/methods/overlap.md
                    if comp_ns + lib_ns > 1.1 * xfer {
                        self.report.stretched_transfers += 1;
                    }
                    // deviation: min-clamped-to-max — min never above max (xfer cut to END − BEGIN), see docs/methods/overlap.md
                    ((xfer - lib_ns).max(0.0).min(max), max)
                };
                self.add(b.bytes, xfer, min, max, false);
            }
        }
    }

    fn add(&mut self, bytes: u64, xfer: f64, min: f64, max: f64, one_sided: bool) {
        debug_assert!(
            0.0 <= min && min <= max && max <= xfer,
            "overlap bounds out of order: 0 ≤ {min} ≤ {max} ≤ {xfer}"
        );
        let r = &mut self.report;
        r.transfers += 1;
        r.data_transfer_ns += xfer;
        r.min_overlap_ns += min;
        r.max_overlap_ns += max;
        r.one_sided_transfers += one_sided as u64;
        let b = &mut self.buckets[bucket_index(bytes)];
        b.transfers += 1;
        b.data_transfer_ns += xfer;
        b.min_overlap_ns += min;
        b.max_overlap_ns += max;
    }

    /// The totals so far. Transfers still open count as BEGIN-only (case
    /// 3) in the report, but stay open for their END.
    pub fn report(&self, now: u64) -> OverlapReport {
        let mut r = self.report.clone();
        let (c, l) = self.clocks_at(now);
        r.computation_ns = c as f64 * self.ns_per_tick;
        r.call_ns = l as f64 * self.ns_per_tick;
        let mut buckets = self.buckets.clone();
        for (_, o) in &self.open {
            let xfer = self.table.xfer_ns(o.bytes);
            r.transfers += 1;
            r.one_sided_transfers += 1;
            r.data_transfer_ns += xfer;
            r.max_overlap_ns += xfer;
            let b = &mut buckets[bucket_index(o.bytes)];
            b.transfers += 1;
            b.data_transfer_ns += xfer;
            b.max_overlap_ns += xfer;
        }
        r.buckets = buckets.into_iter().filter(|b| b.transfers > 0).collect();
        r
    }

    /// Start new totals at `now` (open transfers are dropped).
    pub fn reset(&mut self, now: u64) {
        self.report = OverlapReport::default();
        for b in self.buckets.iter_mut() {
            *b = BucketTotals {
                size_max: b.size_max,
                ..Default::default()
            };
        }
        self.open.clear();
        self.past.clear();
        self.comp = 0;
        self.lib = 0;
        self.mark = Some(now);
    }
}
