//! One figure kind per command, as the references draw them, built from
//! the rows of one or more result files (each file's series labelled by
//! its run: transport, protocol, host where hosts differ).
//!
//! Sizes go on log axes (they are swept in powers of two); times are
//! shown in µs, rates in MB/s (10^6 B/s).

use anyhow::{bail, Result};
use serde_json::Value;

use super::figure::{Axis, Figure, Panel, Series};
use super::load::{num, num_at, text, RunFile};

const SIZE_AXIS: &str = "message size [B]";

/// A panel of a figure against the message size (a log axis).
fn size_panel(title: impl Into<String>, y: Axis) -> Panel {
    Panel::new(title, Axis::log(SIZE_AXIS), y)
}

fn us(ns: Option<f64>) -> Option<f64> {
    ns.map(|v| v / 1000.0)
}

/// A series label: the run's, with `what` after it when several files
/// overlay (else `what` alone).
fn label(run: &RunFile, many: bool, what: &str) -> String {
    match (many, what.is_empty()) {
        (true, true) => run.label.clone(),
        (true, false) => format!("{}: {what}", run.label),
        (false, true) => run.label.clone(),
        (false, false) => what.to_string(),
    }
}

/// The figure for `runs` (all of one command).
pub fn figure(runs: &[RunFile]) -> Result<Figure> {
    let Some(first) = runs.first() else {
        bail!("no result file given: ovbench plot RESULT.json… -o FIG.svg")
    };
    let mut fig = match first.command.as_str() {
        "latency" => latency(runs),
        "bw" | "bibw" | "msgrate" => window(runs, &first.command),
        "overhead" => overhead(runs),
        "overlap" => overlap(runs),
        "logp" => logp(runs),
        "bcast" => bcast(runs),
        "commtest" => commtest(runs),
        other => bail!("no figure for `{other}` results"),
    };
    for p in &mut fig.panels {
        p.drop_unplottable();
    }
    if let Some(p) = fig.panels.first_mut() {
        for r in runs.iter().filter(|r| r.invalid > 0) {
            p.notes.push(format!(
                "{}: {} row(s) flagged invalid by the method left out",
                r.label, r.invalid
            ));
        }
    }
    if fig.panels.iter().all(|p| p.series.is_empty()) {
        bail!(
            "{}: no row holds a value to draw (an empty or unfinished run?)",
            first.path.display()
        );
    }
    Ok(fig)
}

/// latency: p50 with a p99..p99.9 band, and the minimum, vs size.
fn latency(runs: &[RunFile]) -> Figure {
    let many = runs.len() > 1;
    let mut p = size_panel(
        "one-way latency (round trip / 2)",
        Axis::log("latency [µs]"),
    );
    for r in runs {
        let mut med = Series::new(label(r, many, "p50 (band: p99 to p99.9)"));
        let mut min = Series::new(label(r, many, "min"));
        min.thin = true;
        for row in r.main_rows() {
            let x = num(row, "size");
            med.push(x, us(num(row, "p50_ns")));
            med.push_band(x, us(num(row, "p99_ns")), us(num(row, "p999_ns")));
            min.push(x, us(num(row, "min_ns")));
        }
        p.series.extend([med, min]);
    }
    Figure {
        title: "ovbench latency".into(),
        panels: vec![p],
    }
}

/// bw, bibw: MB/s vs size, with the per-window interval; msgrate:
/// messages per second.
fn window(runs: &[RunFile], command: &str) -> Figure {
    let many = runs.len() > 1;
    let (title, y) = match command {
        "msgrate" => ("message rate", "messages per second [10^6/s]"),
        "bibw" => ("bidirectional bandwidth", "bandwidth [MB/s = 10^6 B/s]"),
        _ => ("bandwidth", "bandwidth [MB/s = 10^6 B/s]"),
    };
    let mut p = size_panel(title, Axis::log(y));
    for r in runs {
        let mut s = Series::new(label(r, many, ""));
        for row in r.main_rows() {
            let x = num(row, "size");
            if command == "msgrate" {
                s.push(x, num(row, "msgs_per_sec").map(|v| v / 1e6));
            } else {
                s.push(x, num(row, "bytes_per_sec").map(|v| v / 1e6));
                let ci =
                    |k: &str| num_at(row, &format!("/window_bytes_per_sec/{k}")).map(|v| v / 1e6);
                s.push_band(x, ci("lower"), ci("upper"));
            }
        }
        p.series.push(s);
    }
    Figure {
        title: format!("ovbench {command}"),
        panels: vec![p],
    }
}

/// overhead: overhead and availability vs size, send and receive (one
/// file each), with the repeats' intervals.
fn overhead(runs: &[RunFile]) -> Figure {
    let mut ovh = size_panel(
        "host overhead (post-work-wait)",
        Axis::linear("overhead [µs]"),
    );
    let mut avail = size_panel(
        "availability to the application",
        Axis::linear("availability [%]"),
    );
    let many = runs.len() > 1;
    for r in runs {
        let dir = r
            .main_rows()
            .first()
            .and_then(|row| text(row, "direction"))
            .unwrap_or("send");
        let name = if many {
            format!("{}, {dir}", r.label)
        } else {
            dir.to_string()
        };
        let mut o = Series::new(name.clone());
        let mut a = Series::new(name);
        for row in r.main_rows() {
            let x = num(row, "size");
            o.push(x, us(num(row, "overhead_ns")));
            o.push_band(
                x,
                us(num(row, "overhead_lo_ns")),
                us(num(row, "overhead_hi_ns")),
            );
            a.push(x, num(row, "avail_pct"));
            a.push_band(x, num(row, "avail_lo_pct"), num(row, "avail_hi_pct"));
        }
        ovh.series.push(o);
        avail.series.push(a);
    }
    let level = runs
        .first()
        .and_then(|r| r.main_rows().first())
        .and_then(|row| text(row, "interval"))
        .map(|i| format!("bands: {i}"));
    ovh.notes.extend(level);
    Figure {
        title: "ovbench overhead".into(),
        panels: vec![ovh, avail],
    }
}

/// overlap: per message size, the overlap band (min to max) vs the
/// computation, per pair and side, and the wait time vs the computation.
fn overlap(runs: &[RunFile]) -> Figure {
    let many = runs.len() > 1;
    let mut sizes: Vec<u64> = Vec::new();
    for r in runs {
        for row in r.rows_of("overlap") {
            if let Some(s) = num(row, "size") {
                if !sizes.contains(&(s as u64)) {
                    sizes.push(s as u64);
                }
            }
        }
    }
    sizes.sort_unstable();
    let mut panels = Vec::new();
    for size in sizes {
        let sz = crate::sizes::format_bytes(size as usize);
        let mut band = Panel::new(
            format!("overlap, {sz} messages (line: min, band: min to max)"),
            Axis::linear("computation per message [µs]"),
            Axis::linear("overlap [% of the transfer time]"),
        );
        let mut wait = Panel::new(
            format!("time in the wait call, {sz} messages"),
            Axis::linear("computation per message [µs]"),
            Axis::linear("wait [µs]"),
        );
        for r in runs {
            let proto = r
                .header
                .pointer("/communicator/protocol")
                .and_then(Value::as_str)
                .unwrap_or("?");
            let rows: Vec<&Value> = r
                .rows_of("overlap")
                .filter(|row| num(row, "size") == Some(size as f64))
                .collect();
            let mut pairs: Vec<&str> = rows.iter().filter_map(|row| text(row, "pair")).collect();
            pairs.dedup();
            for pair in pairs {
                for side in ["sender", "receiver"] {
                    // The run's label names the protocol when files overlay.
                    let what = if many {
                        format!("{}: {pair} {side}", r.label)
                    } else {
                        format!("{proto} {pair} {side}")
                    };
                    let mut b = Series::new(what.clone());
                    let mut w = Series::new(what);
                    for row in rows.iter().filter(|row| text(row, "pair") == Some(pair)) {
                        let x = us(num(row, "comp_ns"));
                        let lo = num(row, &format!("{side}_min_overlap_pct"));
                        b.push(x, lo);
                        b.push_band(x, lo, num(row, &format!("{side}_max_overlap_pct")));
                        w.push(x, us(num(row, &format!("{side}_wait_ns"))));
                    }
                    band.series.push(b);
                    wait.series.push(w);
                }
            }
        }
        panels.extend([band, wait]);
    }
    Figure {
        title: "ovbench overlap".into(),
        panels,
    }
}

/// logp: os, or and g vs size with their intervals, the probed sizes
/// marked, L and G written in the corner.
fn logp(runs: &[RunFile]) -> Figure {
    let mut p = size_panel(
        "LogP parameters (bands: confidence intervals; circles: probed sizes)",
        Axis::log("time [µs]"),
    );
    let many = runs.len() > 1;
    for r in runs {
        for (key, name) in [
            ("os", "os (send overhead)"),
            ("or", "or (receive overhead)"),
            ("g", "g (gap)"),
        ] {
            let mut s = Series::new(label(r, many, name));
            for row in r.main_rows() {
                let x = num(row, "size");
                let y = us(num(row, &format!("{key}_ns")));
                s.push(x, y);
                s.push_band(
                    x,
                    us(num(row, &format!("{key}_lo_ns"))),
                    us(num(row, &format!("{key}_hi_ns"))),
                );
                if row.get("probed").and_then(Value::as_bool) == Some(true) {
                    if let (Some(x), Some(y)) = (x, y) {
                        s.marked.push((x, y));
                    }
                }
            }
            p.series.push(s);
        }
        let l = num(&r.summary, "L_ns");
        let g = num(&r.summary, "G_ns_per_byte");
        let prefix = if many {
            format!("{}: ", r.label)
        } else {
            String::new()
        };
        p.notes.push(format!(
            "{prefix}L = {} µs, G = {} ns/B",
            l.map_or("n/a".into(), |v| format!("{:.3}", v / 1000.0)),
            g.map_or("n/a".into(), |v| format!("{v:.4}"))
        ));
    }
    Figure {
        title: "ovbench logp".into(),
        panels: vec![p],
    }
}

/// bcast: each method's time vs the number of ranks, and OL_i per
/// destination rank (of the largest rank count).
fn bcast(runs: &[RunFile]) -> Figure {
    // Log time axes: a real fabric and the model differ by decades.
    let mut methods = Panel::new(
        "broadcast time by method",
        Axis::linear("ranks"),
        Axis::log("time [µs]"),
    );
    let mut ol = Panel::new(
        "OL_i per destination (largest rank count)",
        Axis::linear("destination rank"),
        Axis::log("OL_i [µs]"),
    );
    let many = runs.len() > 1;
    for r in runs {
        // (method, np, time) from every per-count table "… over N ranks".
        let mut points: Vec<(String, f64, f64)> = Vec::new();
        let mut largest: Option<(u64, &[Value])> = None;
        for t in &r.tables {
            let Some(np) = ranks_in(&t.title) else {
                continue;
            };
            if t.title.starts_with("OL_i") && largest.map_or(true, |(n, _)| np > n) {
                largest = Some((np, &t.rows));
            }
            for row in &t.rows {
                if let (Some(m), Some(time)) = (text(row, "method"), num(row, "time_ns")) {
                    points.push((m.to_string(), np as f64, time / 1000.0));
                }
            }
        }
        let mut names: Vec<String> = points.iter().map(|p| p.0.clone()).collect();
        names.dedup();
        names.sort();
        names.dedup();
        for m in names {
            let mut s = Series::new(label(r, many, &m));
            let mut pts: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.0 == m)
                .map(|p| (p.1, p.2))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (x, y) in pts {
                s.push(Some(x), Some(y));
            }
            methods.series.push(s);
        }
        if let Some((np, rows)) = largest {
            let mut s = Series::new(label(r, many, &format!("{np} ranks")));
            for row in rows {
                s.push(num(row, "rank"), us(num(row, "ol_ns")));
            }
            ol.series.push(s);
        }
    }
    Figure {
        title: "ovbench bcast".into(),
        panels: vec![methods, ol],
    }
}

/// The N of a bcast table titled "… over N ranks, …".
fn ranks_in(title: &str) -> Option<u64> {
    let at = title.find(" over ")? + 6;
    title[at..].split_whitespace().next()?.parse().ok()
}

/// commtest: time and MB/s vs packet count, per protocol.
fn commtest(runs: &[RunFile]) -> Figure {
    let mut time = Panel::new(
        "time to move the volume",
        Axis::log("packets"),
        Axis::log("time [µs]"),
    );
    let mut rate = Panel::new("rate", Axis::log("packets"), Axis::log("MB/s (10^6 B/s)"));
    let many = runs.len() > 1;
    for r in runs {
        for t in &r.tables {
            let mut keys: Vec<(String, String)> = Vec::new();
            for row in &t.rows {
                let k = (
                    text(row, "protocol").unwrap_or("?").to_string(),
                    text(row, "name").unwrap_or("").to_string(),
                );
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            let kind = t.title.trim_start_matches("commtest ");
            for (proto, name) in keys {
                let what = format!("{kind} {proto} {name}");
                let mut a = Series::new(label(r, many, &what));
                let mut b = Series::new(label(r, many, &what));
                for row in t.rows.iter().filter(|row| {
                    text(row, "protocol") == Some(&proto) && text(row, "name") == Some(&name)
                }) {
                    let x = num(row, "packets");
                    a.push(x, us(num(row, "time_ns")));
                    b.push(x, num(row, "bytes_per_sec").map(|v| v / 1e6));
                }
                time.series.push(a);
                rate.series.push(b);
            }
        }
    }
    Figure {
        title: "ovbench commtest".into(),
        panels: vec![time, rate],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcast_titles_give_the_rank_count() {
        assert_eq!(
            ranks_in("OL_i, binomial broadcast of 256 B over 16 ranks, M = 100"),
            Some(16)
        );
        assert_eq!(ranks_in("per-processor o_i"), None);
    }
}
