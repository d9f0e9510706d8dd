//! What `compare` compares, per command: each row's key (size, and the
//! direction, method or protocol where the command has them), the figure
//! shown, and the samples a significance test can use, as stored in the
//! JSON: latency and the window benchmarks the per-iteration (per-window)
//! histograms, overhead its repeats, logp the repetitions of os, or and g,
//! bcast each method's measurements, overlap each side's per-transfer
//! waits of a step, commtest its iterations.

use serde_json::Value;

use crate::plot::load::{num, text, RunFile};
use crate::stats::hist;

/// The figure compared and which way is better.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// The column heading, with its unit.
    pub head: &'static str,
    pub higher_is_better: bool,
}

/// One comparable row of a run.
#[derive(Clone, Debug)]
pub struct Entry {
    /// What the row is about, as printed (`8`, `1K send`, `(0,1) simple 4`).
    pub key: String,
    /// Sort order of the keys (size, then the rest).
    pub order: (u64, String),
    pub value: f64,
    /// The samples, as (value, count) in increasing value, where the JSON
    /// keeps them; times, so a larger value is slower.
    pub samples: Option<Vec<(f64, u64)>>,
    /// The sample count the row reports (for "n/a (n=…)").
    pub n: Option<u64>,
    /// A figure computed from other figures (bcast's max OL_i): no
    /// samples of its own to test.
    pub derived: bool,
}

impl Entry {
    /// A measured row `r`'s entry: its samples from the histogram
    /// `hist_key`, its count from `samples`.
    fn sampled(r: &Value, hist_key: &str, key: String, order: (u64, String), value: f64) -> Entry {
        Entry {
            key,
            order,
            value,
            samples: hist_of(r, hist_key),
            n: r.get("samples").and_then(Value::as_u64),
            derived: false,
        }
    }
}

fn size_text(v: f64) -> String {
    crate::sizes::format_bytes(v as usize)
}

/// An entry per size of `run`'s main table: the row's `figure` divided by
/// `scale`, its samples from the histogram `hist_key`.
fn per_size(run: &RunFile, figure: &str, scale: f64, hist_key: &str) -> Vec<Entry> {
    let entry = |r: &Value| {
        let size = num(r, "size").unwrap_or(0.0);
        let value = num(r, figure).unwrap_or(f64::NAN) / scale;
        Entry::sampled(
            r,
            hist_key,
            size_text(size),
            (size as u64, String::new()),
            value,
        )
    };
    run.main_rows().iter().map(entry).collect()
}

/// The metric and the entries of `run` (all of one command).
pub fn entries(run: &RunFile) -> (Metric, Vec<Entry>) {
    let mut out = Vec::new();
    let metric = match run.command.as_str() {
        "latency" => {
            out = per_size(run, "p50_ns", 1000.0, "histogram");
            Metric {
                head: "p50[us]",
                higher_is_better: false,
            }
        }
        c @ ("bw" | "bibw" | "msgrate") => {
            let key = if c == "msgrate" {
                "msgs_per_sec"
            } else {
                "bytes_per_sec"
            };
            out = per_size(run, key, 1e6, "window_histogram");
            Metric {
                head: if c == "msgrate" { "Mmsg/s" } else { "MB/s" },
                higher_is_better: true,
            }
        }
        "overhead" => {
            for r in run.main_rows() {
                let size = num(r, "size").unwrap_or(0.0);
                let dir = text(r, "direction").unwrap_or("send");
                let repeats: Vec<f64> = r
                    .get("runs")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(|x| num(x, "overhead_ns")).collect())
                    .unwrap_or_default();
                out.push(Entry {
                    key: format!("{} {dir}", size_text(size)),
                    order: (size as u64, dir.to_string()),
                    value: num(r, "overhead_ns").unwrap_or(f64::NAN) / 1000.0,
                    n: Some(repeats.len() as u64),
                    samples: (!repeats.is_empty()).then(|| hist::from_values(&repeats)),
                    derived: false,
                });
            }
            Metric {
                head: "overhead[us]",
                higher_is_better: false,
            }
        }
        "logp" => {
            for r in run.main_rows() {
                let size = num(r, "size").unwrap_or(0.0);
                for (p, count) in [("os", "os_samples"), ("or", "or_samples"), ("g", "")] {
                    // g without repetitions is one saturation test.
                    let n = match count {
                        "" => Some(1),
                        c => r.get(c).and_then(Value::as_u64),
                    };
                    out.push(Entry {
                        key: format!("{} {p}", size_text(size)),
                        order: (size as u64, p.to_string()),
                        value: num(r, &format!("{p}_ns")).unwrap_or(f64::NAN) / 1000.0,
                        samples: hist_of(r, &format!("{p}_histogram")),
                        n,
                        derived: false,
                    });
                }
            }
            Metric {
                head: "time[us]",
                higher_is_better: false,
            }
        }
        "bcast" => {
            for t in &run.tables {
                let np = t
                    .title
                    .find(" over ")
                    .and_then(|at| t.title[at + 6..].split_whitespace().next())
                    .and_then(|n| n.parse::<u64>().ok());
                let Some(np) = np else { continue };
                for r in &t.rows {
                    let Some(m) = text(r, "method") else { continue };
                    // max OL_i is the largest of figures derived from
                    // two series each: no samples of its own.
                    let derived = m == "max-oli";
                    out.push(Entry {
                        key: format!("{m} np={np}"),
                        order: (np, m.to_string()),
                        value: num(r, "time_ns").unwrap_or(f64::NAN) / 1000.0,
                        samples: hist_of(r, "histogram"),
                        n: (!derived)
                            .then(|| r.get("measurements").and_then(Value::as_u64))
                            .flatten(),
                        derived,
                    });
                }
            }
            Metric {
                head: "time[us]",
                higher_is_better: false,
            }
        }
        "overlap" => {
            for r in run.rows_of("overlap") {
                let size = num(r, "size").unwrap_or(0.0);
                let step = num(r, "step").unwrap_or(0.0) as u64;
                let pair = text(r, "pair").unwrap_or("?");
                for side in ["sender", "receiver"] {
                    out.push(Entry::sampled(
                        r,
                        &format!("{side}_wait_histogram"),
                        format!("{pair} {} step {step} {side}", size_text(size)),
                        (size as u64, format!("{pair} {step:05} {side}")),
                        num(r, &format!("{side}_wait_ns")).unwrap_or(f64::NAN) / 1000.0,
                    ));
                }
            }
            Metric {
                head: "wait[us]",
                higher_is_better: false,
            }
        }
        _ => {
            // commtest
            for t in &run.tables {
                let kind = t.title.trim_start_matches("commtest ");
                for r in &t.rows {
                    let packets = num(r, "packets").unwrap_or(0.0) as u64;
                    let proto = text(r, "protocol").unwrap_or("?");
                    let name = text(r, "name").unwrap_or("");
                    out.push(Entry::sampled(
                        r,
                        "histogram",
                        format!("{kind} {proto} {name} x{packets}"),
                        (packets, format!("{kind} {proto}")),
                        num(r, "time_ns").unwrap_or(f64::NAN) / 1000.0,
                    ));
                }
            }
            Metric {
                head: "time[us]",
                higher_is_better: false,
            }
        }
    };
    (metric, out)
}

/// A row's stored histogram, decoded (`None` when absent or unreadable).
fn hist_of(row: &Value, key: &str) -> Option<Vec<(f64, u64)>> {
    text(row, key).and_then(|t| hist::decode(t).ok())
}
