//! overlap's three tables as typed rows: each step's figures, the
//! per-process totals by size, and those totals split by path.

use serde::Serialize;

use super::validity::StepCheck;
use super::{Pair, Side, Step};
use crate::methods::common::{micros, Marks};
use crate::output::{fixed, us, Column, FixedRow};

/// One step: both sides' figures and their overlap bounds in percent.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    pub pair: Pair,
    pub size: usize,
    pub step: u32,
    pub comp_ns: f64,
    pub xfer_ns: f64,
    pub samples: u64,
    pub sender: Side,
    pub receiver: Side,
    pub sender_min_overlap_pct: f64,
    pub sender_max_overlap_pct: f64,
    pub receiver_min_overlap_pct: f64,
    pub receiver_max_overlap_pct: f64,
    pub sender_wait_ns: f64,
    pub receiver_wait_ns: f64,
    /// Each side's wait per transfer as an HDR histogram
    /// (src/stats/hist.rs), for `ovbench compare`.
    pub sender_wait_histogram: Option<String>,
    pub receiver_wait_histogram: Option<String>,
    /// `ok`, `stretched` (bracketed, not tight) or `INVALID`.
    pub flag: &'static str,
    /// Whether the bounds are results, and why not.
    #[serde(flatten)]
    pub marks: Marks,
}

impl StepRow {
    /// `hists`: the sender's and the receiver's wait histograms; `check`:
    /// whether its bounds are results.
    pub fn new(s: &Step, samples: u64, hists: [Option<String>; 2], check: StepCheck) -> StepRow {
        let [sender_wait_histogram, receiver_wait_histogram] = hists;
        let (smin, smax) = s.sender.pct();
        let (rmin, rmax) = s.receiver.pct();
        StepRow {
            pair: s.pair,
            size: s.size,
            step: s.step,
            comp_ns: s.comp_ns,
            xfer_ns: s.xfer_ns,
            samples,
            sender: s.sender,
            receiver: s.receiver,
            sender_min_overlap_pct: smin,
            sender_max_overlap_pct: smax,
            receiver_min_overlap_pct: rmin,
            receiver_max_overlap_pct: rmax,
            sender_wait_ns: s.sender.wait_ns,
            receiver_wait_ns: s.receiver.wait_ns,
            sender_wait_histogram,
            receiver_wait_histogram,
            flag: check.flag,
            marks: check.marks,
        }
    }
}

/// A side's five columns (`s.` or `r.`, by the name's initial): its mean
/// wait, their median and 90th percentile, and the overlap bounds in %.
fn side_columns(name: &'static str) -> Vec<Column<StepRow>> {
    let sender = name == "sender";
    let heads = ["wait[us]", "w50[us]", "w90[us]", "min%", "max%"];
    let fields = [
        format!("{name}_wait_ns"),
        name.to_string(),
        name.to_string(),
        format!("{name}_min_overlap_pct"),
        format!("{name}_max_overlap_pct"),
    ];
    let p = &name[..1];
    (heads.into_iter().zip(fields).enumerate())
        .map(|(i, (head, field))| {
            Column::new(format!("{p}.{head}"), field, move |r: &StepRow| {
                let x = r.figures(sender)[i];
                if i < 3 {
                    us(x, 3)
                } else {
                    fixed(x, 1)
                }
            })
        })
        .collect()
}

impl StepRow {
    /// One side's figures in [`side_columns`]' order (those the row's
    /// `*_wait_ns` and `*_pct` fields hold).
    fn figures(&self, sender: bool) -> [f64; 5] {
        let s = if sender { &self.sender } else { &self.receiver };
        let (lo, hi) = s.pct();
        [s.wait_ns, s.wait_p50_ns, s.wait_p90_ns, lo, hi]
    }
}

impl FixedRow for StepRow {
    fn columns() -> Vec<Column<Self>> {
        let mut c = vec![
            Column::new("pair", "pair", |r: &StepRow| r.pair.name().to_string()),
            Column::new("size", "size", |r: &StepRow| r.size.to_string()),
            micros("comp[us]", "comp_ns", |r| r.comp_ns),
            micros("xfer[us]", "xfer_ns", |r| r.xfer_ns),
        ];
        c.extend(side_columns("sender"));
        c.extend(side_columns("receiver"));
        c.push(Column::new("flag", "flag", |r: &StepRow| {
            r.flag.to_string()
        }));
        c
    }
}

/// What a process's transfers add up to, shared by both totals tables.
#[derive(Debug, Clone, Serialize)]
pub struct Moved {
    pub transfers: u64,
    pub data_transfer_ns: f64,
    pub min_overlap_ns: f64,
    pub max_overlap_ns: f64,
}

impl Moved {
    fn of(s: &Side) -> Moved {
        Moved {
            transfers: s.transfers,
            data_transfer_ns: s.data_transfer_ns,
            min_overlap_ns: s.min_overlap_ns,
            max_overlap_ns: s.max_overlap_ns,
        }
    }

    /// The four columns, for a row type holding a `Moved` flattened.
    fn columns<R: 'static>(get: fn(&R) -> &Moved) -> Vec<Column<R>> {
        vec![
            Column::new("transfers", "transfers", move |r: &R| {
                get(r).transfers.to_string()
            }),
            Column::new("data[us]", "data_transfer_ns", move |r: &R| {
                us(get(r).data_transfer_ns, 3)
            }),
            Column::new("min.ovl[us]", "min_overlap_ns", move |r: &R| {
                us(get(r).min_overlap_ns, 3)
            }),
            Column::new("max.ovl[us]", "max_overlap_ns", move |r: &R| {
                us(get(r).max_overlap_ns, 3)
            }),
        ]
    }
}

/// One process's totals over a size's steps.
#[derive(Debug, Clone, Serialize)]
pub struct TotalRow {
    pub pair: Pair,
    pub size: usize,
    pub path: &'static str,
    pub rank: u32,
    #[serde(flatten)]
    pub moved: Moved,
    pub computation_ns: f64,
    pub call_ns: f64,
}

impl TotalRow {
    pub fn new(pair: Pair, size: usize, path: &'static str, rank: u32, s: &Side) -> TotalRow {
        TotalRow {
            pair,
            size,
            path,
            rank,
            moved: Moved::of(s),
            computation_ns: s.computation_ns,
            call_ns: s.call_ns,
        }
    }
}

impl FixedRow for TotalRow {
    fn columns() -> Vec<Column<Self>> {
        let mut c = vec![
            Column::new("pair", "pair", |r: &TotalRow| r.pair.name().to_string()),
            Column::new("size", "size", |r: &TotalRow| r.size.to_string()),
            Column::new("path", "path", |r: &TotalRow| r.path.to_string()),
            Column::new("rank", "rank", |r: &TotalRow| r.rank.to_string()),
        ];
        c.extend(Moved::columns(|r: &TotalRow| &r.moved));
        c.push(micros("comp[us]", "computation_ns", |r| r.computation_ns));
        c.push(micros("call[us]", "call_ns", |r| r.call_ns));
        c
    }
}

/// One process's totals on one path, eager or rendezvous.
#[derive(Debug, Clone, Serialize)]
pub struct PathRow {
    pub path: &'static str,
    pub rank: u32,
    #[serde(flatten)]
    pub moved: Moved,
    pub not_overlapped_min_ns: f64,
}

impl PathRow {
    pub fn new(path: &'static str, rank: u32, s: &Side) -> PathRow {
        PathRow {
            path,
            rank,
            moved: Moved::of(s),
            not_overlapped_min_ns: s.data_transfer_ns - s.max_overlap_ns,
        }
    }
}

impl FixedRow for PathRow {
    fn columns() -> Vec<Column<Self>> {
        let mut c = vec![
            Column::new("path", "path", |r: &PathRow| r.path.to_string()),
            Column::new("rank", "rank", |r: &PathRow| r.rank.to_string()),
        ];
        c.extend(Moved::columns(|r: &PathRow| &r.moved));
        c.push(micros("not.ovl[us]", "not_overlapped_min_ns", |r| {
            r.not_overlapped_min_ns
        }));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::check_fields;

    #[test]
    fn columns_show_json_keys() {
        let side = Side::default();
        let step = Step {
            pair: Pair::IsendRecv,
            size: 8,
            step: 0,
            comp_ns: 0.0,
            xfer_ns: 1.0,
            sender: side,
            receiver: side,
        };
        let check = super::super::validity::step_check(1, (1, 1), 0, (1.0, None));
        check_fields(&(), &StepRow::new(&step, 1, [None, None], check)).unwrap();
        check_fields(&(), &TotalRow::new(step.pair, 8, "eager", 0, &side)).unwrap();
        check_fields(&(), &PathRow::new("eager", 1, &side)).unwrap();
    }
}
