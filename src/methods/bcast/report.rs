//! bcast's tables and JSON rows, and the method × P summary of a sweep
//! over rank counts (the paper's Figures 10 and 11).

use serde_json::json;

use super::{Algorithm, Assumption, Figure, Oli, Output, PerProcessor};
use crate::methods::common::Verdict;
use crate::output::us;
use crate::report::Sink;

/// The per-processor o_i and g_i table.
pub(super) fn per_processor(sink: &mut dyn Sink, title: &str, rows: &[PerProcessor], delay: f64) {
    sink.table(
        &format!("per-processor o_i and g_i, {title}"),
        &[
            "i",
            "children",
            "o_i[us]",
            "g_i[us]",
            "measurements",
            "flag",
        ],
    );
    for p in rows {
        let mut j = json!({
            "rank": p.rank, "children": p.children, "o_ns": p.o_ns, "g_ns": p.g_ns,
            "measurements": p.measurements,
        });
        p.verdict.mark(&mut j);
        sink.row(
            &[
                p.rank.to_string(),
                p.children.to_string(),
                us(p.o_ns, 3),
                us(p.g_ns, 3),
                p.measurements.to_string(),
                p.verdict.cell(),
            ],
            j,
        );
    }
    sink.note(&format!(
        "o_i: time in one broadcast call once the data is there (a rank at depth k of the tree enters k·{} us after a barrier); g_i: interval between successive broadcasts at i",
        us(delay, 3)
    ));
    for p in rows {
        p.verdict.note(sink, &format!("o_{0}, g_{0}", p.rank));
    }
}

/// The OL_i table's heading.
pub(super) fn oli_table(sink: &mut dyn Sink, title: &str) {
    sink.table(
        &format!("OL_i, {title}"),
        &[
            "i",
            "RTL_i[us]",
            "E_i[us]",
            "OL_i[us]",
            "measurements",
            "E_i>g_j on path",
            "flag",
        ],
    );
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
    let mut j = json!({
        "rank": o.rank, "size": size, "rtl_ns": o.rtl_ns, "e_ns": o.e_ns, "ol_ns": o.ol_ns,
        "measurements": o.measurements, "samples": o.measurements as u64 * reps,
        "tries": o.tries, "path": o.path, "assumption": assumption_cell(&o.assumption),
    });
    o.verdict.mark(&mut j);
    sink.row(
        &[
            o.rank.to_string(),
            us(o.rtl_ns, 3),
            us(o.e_ns, 3),
            us(o.ol_ns, 3),
            o.measurements.to_string(),
            assumption_cell(&o.assumption),
            o.verdict.cell(),
        ],
        j,
    );
}

pub(super) fn figure_row(sink: &mut dyn Sink, f: &Figure, size: usize, reps: u64) {
    let mut j = json!({
        "method": f.method, "size": size, "time_ns": f.time_ns, "measurements": f.measurements,
        "stddev_pct": f.stddev_pct, "samples": f.measurements as u64 * reps,
        "tries": f.tries, "ops": f.ops,
    });
    f.verdict.mark(&mut j);
    sink.row(
        &[
            f.method.clone(),
            us(f.time_ns, 3),
            f.measurements.to_string(),
            format!("{:.2}", f.stddev_pct),
            f.verdict.cell(),
        ],
        j,
    );
}

/// The max OL_i row under the methods' table, and the run's summary.
pub(super) fn max_oli_row(sink: &mut dyn Sink, out: &Output) {
    let (Some(ol), Some(rank)) = (out.max_ol_ns, out.max_ol_rank) else {
        return;
    };
    let v = out.max_ol_verdict.clone().unwrap_or_default();
    let mut j = json!({"method": "max-oli", "size": out.size, "time_ns": ol, "rank": rank});
    v.mark(&mut j);
    sink.row(
        &[
            "max OL_i".into(),
            us(ol, 3),
            format!("i = {rank}"),
            String::new(),
            v.cell(),
        ],
        j,
    );
    if out.algorithm == Algorithm::Flat {
        sink.note("flat broadcast: the root's gap exceeds E_i for early ranks, breaking OL_i's assumption (de Supinski and Karonis, §4); those rows are flagged");
    }
    let mut s = json!({"max_OL_ns": ol, "max_OL_rank": rank});
    v.mark(&mut s);
    sink.summary(s, &[format!("max OL_i = {} us (i = {rank})", us(ol, 3))]);
}

/// The sweep's summary: one row per method, one column per rank count
/// (the paper's Figure 11; max OL_i alone is its Figure 10). A flagged
/// figure prints with a `!` and its JSON column is listed in `invalid`.
pub fn sweep_summary(sink: &mut dyn Sink, outs: &[Output]) {
    let Some(first) = outs.first() else {
        return;
    };
    let cols: Vec<String> = outs.iter().map(|o| format!("P={}[us]", o.ranks)).collect();
    let mut heads = vec!["method"];
    heads.extend(cols.iter().map(String::as_str));
    sink.table(
        &format!(
            "bcast methods vs ranks, {} broadcast of {} B, M = {}",
            format!("{:?}", first.algorithm).to_lowercase(),
            first.size,
            first.reps
        ),
        &heads,
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
        let mut cells = vec![m.clone()];
        let mut j = json!({"method": m, "size": first.size});
        let mut invalid = Vec::new();
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
            let key = format!("time_ns_np{}", o.ranks);
            match fig {
                Some((t, v)) => {
                    let mark = if v.valid() { "" } else { "!" };
                    cells.push(format!("{}{mark}", us(t, 3)));
                    j[&key] = json!(t);
                    if !v.valid() {
                        invalid.push(format!("np {}: {}", o.ranks, v.reason()));
                    }
                }
                None => {
                    cells.push("n/a".into());
                    j[&key] = serde_json::Value::Null;
                }
            }
        }
        let v = Verdict::of(invalid.is_empty(), || invalid.join("; "));
        v.mark(&mut j);
        sink.row(&cells, j);
        v.note(sink, &m);
    }
}
