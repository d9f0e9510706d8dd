//! bcast's tables as typed rows (per-processor o_i and g_i, OL_i, the
//! methods' figures and max OL_i), and the method × P summary of a sweep
//! over rank counts (the paper's Figures 10 and 11).

use ovbench_core::{OpCounts, Rank};
use serde::ser::SerializeMap;
use serde::Serialize;

use super::{Algorithm, Assumption, Figure, Oli, Output, PerProcessor};
use crate::methods::common::{micros, Marks, Verdict};
use crate::output::{fixed, us, Column, FixedRow, Row, Table};
use crate::report::Sink;

/// The `flag` column of a row with its verdict's marks.
fn flag<R: 'static>(marks: fn(&R) -> &Marks) -> Column<R> {
    Column::new("flag", "valid", move |r: &R| marks(r).cell())
}

/// The `i` column: the rank a row is about.
fn rank_i<R: 'static>(rank: fn(&R) -> Rank) -> Column<R> {
    Column::new("i", "rank", move |r: &R| rank(r).to_string())
}

/// The `measurements` column: how many measurements a figure took.
fn measurements<R: 'static>(n: fn(&R) -> usize) -> Column<R> {
    Column::new("measurements", "measurements", move |r: &R| {
        n(r).to_string()
    })
}

/// One rank's o_i and g_i.
#[derive(Debug, Clone, Serialize)]
pub struct PerProcessorRow {
    pub rank: Rank,
    pub children: Option<usize>,
    pub o_ns: Option<f64>,
    pub g_ns: f64,
    pub o_stddev_pct: Option<f64>,
    pub g_stddev_pct: f64,
    pub measurements: usize,
    #[serde(flatten)]
    pub verdict: Marks,
}

impl FixedRow for PerProcessorRow {
    fn columns() -> Vec<Column<Self>> {
        vec![
            rank_i(|r: &Self| r.rank),
            Column::new("children", "children", |r: &Self| {
                r.children.map_or("?".into(), |c| c.to_string())
            }),
            Column::new("o_i[us]", "o_ns", |r: &Self| {
                r.o_ns.map_or("n/a".into(), |o| us(o, 3))
            }),
            Column::new("o_i sd%", "o_stddev_pct", |r: &Self| {
                r.o_stddev_pct.map_or("n/a".into(), |sd| fixed(sd, 2))
            }),
            micros("g_i[us]", "g_ns", |r: &Self| r.g_ns),
            Column::new("g_i sd%", "g_stddev_pct", |r: &Self| {
                fixed(r.g_stddev_pct, 2)
            }),
            measurements(|r: &Self| r.measurements),
            flag(|r: &Self| &r.verdict),
        ]
    }
}

/// The per-processor o_i and g_i table.
pub(super) fn per_processor(sink: &mut dyn Sink, title: &str, rows: &[PerProcessor], delay: f64) {
    let table =
        Table::<PerProcessorRow>::start(sink, &format!("per-processor o_i and g_i, {title}"), &());
    for p in rows {
        let row = PerProcessorRow {
            rank: p.rank,
            children: p.children,
            o_ns: p.o_ns,
            g_ns: p.g_ns,
            o_stddev_pct: p.o_stddev_pct,
            g_stddev_pct: p.g_stddev_pct,
            measurements: p.measurements,
            verdict: p.verdict.marks(),
        };
        table.add(sink, &row);
    }
    sink.note(&format!(
        "o_i: time in one broadcast call once the data is there (a rank at depth k of the tree enters k·{} us after a barrier); g_i: interval between successive broadcasts at i",
        us(delay, 3)
    ));
    if rows.iter().any(|p| p.children.is_none()) {
        sink.note("library broadcast: its tree is unknown, so children are `?` and o_i, which needs a rank's depth, is measured at the root only (n/a elsewhere)");
    }
    for p in rows {
        p.verdict.note(sink, &format!("o_{0}, g_{0}", p.rank));
    }
}

/// One destination's OL_i.
#[derive(Debug, Clone, Serialize)]
pub struct OliRow {
    pub rank: Rank,
    pub size: usize,
    pub rtl_ns: f64,
    pub e_ns: f64,
    pub ol_ns: f64,
    pub rtl_stddev_pct: f64,
    pub e_stddev_pct: f64,
    pub ol_stddev_ns: f64,
    pub measurements: usize,
    pub samples: u64,
    pub tries: usize,
    pub path: Option<Vec<Rank>>,
    /// As its cell reads.
    pub assumption: String,
    pub forward_ns: Option<f64>,
    pub gap0_ns: f64,
    pub in_max: bool,
    #[serde(flatten)]
    pub verdict: Marks,
}

impl FixedRow for OliRow {
    fn columns() -> Vec<Column<Self>> {
        vec![
            rank_i(|r: &Self| r.rank),
            micros("RTL_i[us]", "rtl_ns", |r: &Self| r.rtl_ns),
            micros("E_i[us]", "e_ns", |r: &Self| r.e_ns),
            micros("OL_i[us]", "ol_ns", |r: &Self| r.ol_ns),
            micros("OL_i sd[us]", "ol_stddev_ns", |r: &Self| r.ol_stddev_ns),
            measurements(|r: &Self| r.measurements),
            Column::new("E_i>g_j on path", "assumption", |r: &Self| {
                r.assumption.clone()
            }),
            flag(|r: &Self| &r.verdict),
        ]
    }
}

/// The OL_i table's heading.
pub(super) fn oli_table(sink: &mut dyn Sink, title: &str) {
    Table::<OliRow>::start(sink, &format!("OL_i, {title}"), &());
}

/// The assumption's cell.
fn assumption_cell(a: &Assumption) -> String {
    match a {
        Assumption::Holds => "holds".into(),
        Assumption::Violated { rank, g_ns } => format!("no: g_{rank} = {}", us(*g_ns, 3)),
        Assumption::NotChecked => "not checked".into(),
    }
}

pub(super) fn oli_row(sink: &mut dyn Sink, o: &Oli, size: usize, reps: u64) {
    let row = OliRow {
        rank: o.rank,
        size,
        rtl_ns: o.rtl_ns,
        e_ns: o.e_ns,
        ol_ns: o.ol_ns,
        rtl_stddev_pct: o.rtl_stddev_pct,
        e_stddev_pct: o.e_stddev_pct,
        ol_stddev_ns: o.ol_stddev_ns,
        measurements: o.measurements,
        samples: o.measurements as u64 * reps,
        tries: o.tries,
        path: o.path.clone(),
        assumption: assumption_cell(&o.assumption),
        forward_ns: o.forward_ns,
        gap0_ns: o.gap0_ns,
        in_max: o.in_max,
        verdict: o.verdict.marks(),
    };
    Table::quiet(&()).add(sink, &row);
}

/// One method's figure.
#[derive(Debug, Clone, Serialize)]
pub struct FigureRow {
    pub method: String,
    pub size: usize,
    pub time_ns: f64,
    pub measurements: usize,
    pub stddev_pct: f64,
    pub samples: u64,
    pub tries: usize,
    pub ops: OpCounts,
    /// The measurements (each the mean of M broadcasts) as an HDR
    /// histogram (src/stats/hist.rs), for `ovbench compare`.
    pub histogram: Option<String>,
    #[serde(flatten)]
    pub verdict: Marks,
}

impl FixedRow for FigureRow {
    fn columns() -> Vec<Column<Self>> {
        vec![
            Column::new("method", "method", |r: &Self| r.method.clone()),
            micros("time[us]", "time_ns", |r: &Self| r.time_ns),
            measurements(|r: &Self| r.measurements),
            Column::new("stddev(%)", "stddev_pct", |r: &Self| fixed(r.stddev_pct, 2)),
            flag(|r: &Self| &r.verdict),
        ]
    }
}

/// The methods' table heading (max OL_i's row shares it).
pub(super) fn figure_table(sink: &mut dyn Sink, title: &str) {
    Table::<FigureRow>::start(sink, title, &());
}

pub(super) fn figure_row(sink: &mut dyn Sink, f: &Figure, size: usize, reps: u64) {
    let row = FigureRow {
        method: f.method.clone(),
        size,
        time_ns: f.time_ns,
        measurements: f.measurements,
        stddev_pct: f.stddev_pct,
        samples: f.measurements as u64 * reps,
        tries: f.tries,
        ops: f.ops,
        histogram: crate::stats::hist::encode(&f.values_ns),
        verdict: f.verdict.marks(),
    };
    Table::quiet(&()).add(sink, &row);
}

/// The largest OL_i, under the methods' headings.
#[derive(Debug, Clone, Serialize)]
pub struct MaxOliRow {
    /// Always `max-oli`, the method's name in the sweep's summary.
    pub method: &'static str,
    pub size: usize,
    pub time_ns: f64,
    pub rank: Rank,
    #[serde(flatten)]
    pub verdict: Marks,
}

impl FixedRow for MaxOliRow {
    fn columns() -> Vec<Column<Self>> {
        vec![
            Column::new("method", "method", |_: &Self| "max OL_i".into()),
            micros("time[us]", "time_ns", |r: &Self| r.time_ns),
            Column::new("measurements", "rank", |r: &Self| format!("i = {}", r.rank)),
            Column::derived("stddev(%)", |_: &Self| String::new()),
            flag(|r: &Self| &r.verdict),
        ]
    }
}

/// The max OL_i row under the methods' table, and the run's summary.
pub(super) fn max_oli_row(sink: &mut dyn Sink, out: &Output) {
    if !out.max_ol_excluded.is_empty() {
        let ranks: Vec<String> = out.max_ol_excluded.iter().map(|r| r.to_string()).collect();
        sink.note(&format!(
            "max OL_i leaves out i = {}: their OL_i may be overstated (see their notes), so none of them can stand for OL{}",
            ranks.join(", "),
            if out.max_ol_excluded.len() == out.oli.len() {
                " (all of them: the max below is their largest, flagged)"
            } else {
                ""
            }
        ));
    }
    let (Some(ol), Some(rank)) = (out.max_ol_ns, out.max_ol_rank) else {
        return;
    };
    let v = out.max_ol_verdict.clone().unwrap_or_default();
    let row = MaxOliRow {
        method: "max-oli",
        size: out.size,
        time_ns: ol,
        rank,
        verdict: v.marks(),
    };
    Table::quiet(&()).add(sink, &row);
    if out.algorithm == Algorithm::Library {
        sink.note("library broadcast (MPI_Bcast): the library chooses its tree, unknown here: E_i > g_j is checked against every rank's g_j (`not checked` where some g_j ≥ E_i), and whether i's acknowledgement queued behind its forwards is not checked");
    }
    if out.algorithm == Algorithm::Flat {
        sink.note("flat broadcast: the root's gap exceeds E_i for early ranks, breaking OL_i's assumption (de Supinski and Karonis, §4); those rows are flagged");
    }
    #[derive(Serialize)]
    struct Summary {
        #[serde(rename = "max_OL_ns")]
        ol_ns: f64,
        #[serde(rename = "max_OL_rank")]
        rank: Rank,
        #[serde(flatten)]
        verdict: Marks,
    }
    let s = Summary {
        ol_ns: ol,
        rank,
        verdict: v.marks(),
    };
    sink.summary(
        crate::output::to_json(&s),
        &[format!("max OL_i = {} us (i = {rank})", us(ol, 3))],
    );
}

/// A method's time at each rank count of a sweep (`None`: not measured
/// there) and whether that figure is valid; its JSON is one
/// `time_ns_np{P}` key per rank count.
#[derive(Debug, Clone)]
pub struct ByRanks(pub Vec<(u32, Option<(f64, bool)>)>);

impl Serialize for ByRanks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (p, fig) in &self.0 {
            m.serialize_entry(&format!("time_ns_np{p}"), &fig.map(|f| f.0))?;
        }
        m.end()
    }
}

/// One method's row of the sweep's summary.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub method: String,
    pub size: usize,
    #[serde(flatten)]
    pub times: ByRanks,
    #[serde(flatten)]
    pub verdict: Marks,
}

impl Row for SweepRow {
    /// The sweep's rank counts, a column each.
    type Layout = Vec<u32>;
    fn columns(ranks: &Self::Layout) -> Vec<Column<Self>> {
        let mut c = vec![Column::new("method", "method", |r: &Self| r.method.clone())];
        for (i, p) in ranks.iter().enumerate() {
            // A flagged figure prints with a `!`.
            c.push(Column::new(
                format!("P={p}[us]"),
                format!("time_ns_np{p}"),
                move |r: &Self| match r.times.0[i].1 {
                    Some((t, true)) => us(t, 3),
                    Some((t, false)) => format!("{}!", us(t, 3)),
                    None => "n/a".into(),
                },
            ));
        }
        c
    }
}

/// The sweep's summary: one row per method, one column per rank count
/// (the paper's Figure 11; max OL_i alone is its Figure 10). A flagged
/// figure's reason is in its row's `reason`.
pub fn sweep_summary(sink: &mut dyn Sink, outs: &[Output]) {
    let Some(first) = outs.first() else {
        return;
    };
    let ranks: Vec<u32> = outs.iter().map(|o| o.ranks).collect();
    let table = Table::<SweepRow>::start(
        sink,
        &format!(
            "bcast methods vs ranks, {} broadcast of {} B, M = {}",
            format!("{:?}", first.algorithm).to_lowercase(),
            first.size,
            first.reps
        ),
        &ranks,
    );
    let mut methods: Vec<String> = Vec::new();
    for o in outs {
        for f in &o.figures {
            if !methods.contains(&f.method) {
                methods.push(f.method.clone());
            }
        }
    }
    let has_ol = outs.iter().any(|o| o.max_ol_ns.is_some());
    if has_ol {
        methods.insert(0, "max-oli".into());
    }
    for m in methods {
        let mut invalid = Vec::new();
        let mut times = Vec::new();
        for o in outs {
            let fig: Option<(f64, Verdict)> = if m == "max-oli" {
                o.max_ol_ns
                    .map(|t| (t, o.max_ol_verdict.clone().unwrap_or_default()))
            } else {
                o.figures
                    .iter()
                    .find(|f| f.method == m)
                    .map(|f| (f.time_ns, f.verdict.clone()))
            };
            if let Some((_, v)) = fig.as_ref().filter(|f| !f.1.valid()) {
                invalid.push(format!("np {}: {}", o.ranks, v.reason()));
            }
            times.push((o.ranks, fig.map(|(t, v)| (t, v.valid()))));
        }
        let v = Verdict::of(invalid.is_empty(), || invalid.join("; "));
        let row = SweepRow {
            method: m.clone(),
            size: first.size,
            times: ByRanks(times),
            verdict: v.marks(),
        };
        table.add(sink, &row);
        v.note(sink, &m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::check_fields;

    #[test]
    fn columns_show_json_keys() {
        let ok = Verdict::default().marks();
        let bad = Verdict::of(false, || "time < 0".into()).marks();
        let pp = PerProcessorRow {
            rank: 1,
            children: Some(0),
            o_ns: Some(1.0),
            g_ns: 2.0,
            o_stddev_pct: Some(0.5),
            g_stddev_pct: 0.25,
            measurements: 3,
            verdict: ok.clone(),
        };
        check_fields(&(), &pp).unwrap();
        let oli = OliRow {
            rank: 1,
            size: 8,
            rtl_ns: 1.0,
            e_ns: 2.0,
            ol_ns: 1.5,
            rtl_stddev_pct: 1.0,
            e_stddev_pct: 2.0,
            ol_stddev_ns: 0.04,
            measurements: 3,
            samples: 6,
            tries: 1,
            path: None,
            assumption: "holds".into(),
            forward_ns: Some(3.0),
            gap0_ns: 0.5,
            in_max: false,
            verdict: bad.clone(),
        };
        check_fields(&(), &oli).unwrap();
        let fig = FigureRow {
            method: "ack".into(),
            size: 8,
            time_ns: 1.0,
            measurements: 3,
            stddev_pct: 0.5,
            samples: 6,
            tries: 1,
            ops: OpCounts::default(),
            histogram: None,
            verdict: ok.clone(),
        };
        check_fields(&(), &fig).unwrap();
        let max = MaxOliRow {
            method: "max-oli",
            size: 8,
            time_ns: 1.0,
            rank: 2,
            verdict: ok.clone(),
        };
        check_fields(&(), &max).unwrap();
        let sweep = SweepRow {
            method: "ack".into(),
            size: 8,
            times: ByRanks(vec![(3, Some((1.0, false))), (4, None)]),
            verdict: bad,
        };
        check_fields(&vec![3, 4], &sweep).unwrap();
        let cells = Table::quiet(&vec![3, 4]).cells(&sweep);
        assert_eq!(cells, ["ack", "0.001!", "n/a"]);
    }
}
