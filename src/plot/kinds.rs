//! One figure kind per command, as the references draw them, built from
//! the rows of one or more result files (each file's series labelled by
//! its run: transport, protocol, host where hosts differ).
//!
//! Sizes go on log axes (they are swept in powers of two); times are
//! shown in µs, rates in MB/s (10^6 B/s).

use anyhow::{bail, Result};
use serde_json::Value;

use super::figure::{Axis, BandOf, Field, Figure, Panel, Series};
use super::load::{num, num_at, text, RunFile};

const SIZE_AXIS: &str = "message size [B]";

/// A panel of a figure against the message size (a log axis).
fn size_panel(title: impl Into<String>, y: Axis) -> Panel {
    Panel::new(title, Axis::sizes(SIZE_AXIS), y)
}

/// A band of `name` between the row fields `lo` and `hi` (pointers),
/// against the row field `x`; `per` divides each into the axis unit.
fn band(name: impl Into<String>, x: (&str, f64), lo: &str, hi: &str, per: f64) -> BandOf {
    BandOf {
        name: name.into(),
        x: Field::new(x.0, x.1),
        lo: Field::new(lo, per),
        hi: Field::new(hi, per),
        brackets: true,
    }
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
    // The tail above the median: beside its line, not around it.
    let tail = BandOf {
        brackets: false,
        ..band(
            "p99 to p99.9",
            ("/size", 1.0),
            "/p99_ns",
            "/p999_ns",
            1000.0,
        )
    };
    for r in runs {
        let mut med = Series::new(label(r, many, "p50"));
        let mut min = Series::new(label(r, many, "min"));
        min.thin = true;
        for row in r.main_rows() {
            let x = num(row, "size");
            med.push(x, us(num(row, "p50_ns")));
            med.push_band(row, &tail);
            min.push(x, us(num(row, "min_ns")));
        }
        p.series.extend([med, min]);
    }
    Figure {
        title: "ovbench latency".into(),
        panels: vec![p],
    }
}

/// bw, bibw: MB/s vs size, and the mean window rate with its interval;
/// msgrate: messages per second.
fn window(runs: &[RunFile], command: &str) -> Figure {
    let many = runs.len() > 1;
    let (title, y) = match command {
        "msgrate" => ("message rate", "messages per second [10^6/s]"),
        "bibw" => ("bidirectional bandwidth", "bandwidth [MB/s = 10^6 B/s]"),
        _ => ("bandwidth", "bandwidth [MB/s = 10^6 B/s]"),
    };
    let mut p = size_panel(title, Axis::log(y));
    for r in runs {
        if command == "msgrate" {
            let mut s = Series::new(label(r, many, ""));
            for row in r.main_rows() {
                s.push(num(row, "size"), num(row, "msgs_per_sec").map(|v| v / 1e6));
            }
            p.series.push(s);
            continue;
        }
        // MB/s counts every message over the slowest rank's interval; the
        // interval in the JSON is of rank 0's mean window rate, another
        // figure, so it gets its own line (it lay beside MB/s's before).
        let mut all = Series::new(label(r, many, "MB/s (all messages)"));
        let mut win = Series::new(label(r, many, "mean window rate"));
        win.thin = true;
        let level = r
            .main_rows()
            .iter()
            .find_map(|row| num_at(row, "/window_bytes_per_sec/level"))
            .map_or(String::new(), |l| format!("{:.0} % ", l * 100.0));
        let ci = band(
            format!("its {level}confidence interval"),
            ("/size", 1.0),
            "/window_bytes_per_sec/lower",
            "/window_bytes_per_sec/upper",
            1e6,
        );
        for row in r.main_rows() {
            let x = num(row, "size");
            all.push(x, num(row, "bytes_per_sec").map(|v| v / 1e6));
            win.push(
                x,
                num_at(row, "/window_bytes_per_sec/mean").map(|v| v / 1e6),
            );
            win.push_band(row, &ci);
        }
        p.series.extend([all, win]);
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
        let what = r
            .main_rows()
            .first()
            .and_then(|row| text(row, "interval"))
            .unwrap_or("interval")
            .to_string();
        let ob = band(
            what.clone(),
            ("/size", 1.0),
            "/overhead_lo_ns",
            "/overhead_hi_ns",
            1000.0,
        );
        let ab = band(what, ("/size", 1.0), "/avail_lo_pct", "/avail_hi_pct", 1.0);
        for row in r.main_rows() {
            let x = num(row, "size");
            o.push(x, us(num(row, "overhead_ns")));
            o.push_band(row, &ob);
            a.push(x, num(row, "avail_pct"));
            a.push_band(row, &ab);
        }
        ovh.series.push(o);
        avail.series.push(a);
    }
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
        let mut ranged = Panel::new(
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
                    let range = band(
                        "min to max",
                        ("/comp_ns", 1000.0),
                        &format!("/{side}_min_overlap_pct"),
                        &format!("/{side}_max_overlap_pct"),
                        1.0,
                    );
                    for row in rows.iter().filter(|row| text(row, "pair") == Some(pair)) {
                        let x = us(num(row, "comp_ns"));
                        let lo = num(row, &format!("{side}_min_overlap_pct"));
                        b.push(x, lo);
                        b.push_band(row, &range);
                        w.push(x, us(num(row, &format!("{side}_wait_ns"))));
                    }
                    ranged.series.push(b);
                    wait.series.push(w);
                }
            }
        }
        panels.extend([ranged, wait]);
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
        "LogP parameters (circles: probed sizes)",
        Axis::log("time [µs]"),
    );
    let many = runs.len() > 1;
    for r in runs {
        // "LogP parameters (Send/Recv), 90% confidence": the level.
        let level = r.tables.first().map_or(String::new(), |t| {
            t.title
                .rsplit(", ")
                .next()
                .and_then(|l| l.strip_suffix(" confidence"))
                .map_or(String::new(), |l| format!("{l} "))
        });
        for (key, name) in [
            ("os", "os (send overhead)"),
            ("or", "or (receive overhead)"),
            ("g", "g (gap)"),
        ] {
            let mut s = Series::new(label(r, many, name));
            let ci = band(
                format!("{key}_lo to {key}_hi ({level}confidence)"),
                ("/size", 1.0),
                &format!("/{key}_lo_ns"),
                &format!("/{key}_hi_ns"),
                1000.0,
            );
            for row in r.main_rows() {
                let x = num(row, "size");
                let y = us(num(row, &format!("{key}_ns")));
                s.push(x, y);
                s.push_band(row, &ci);
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
    // Rank counts double (4, 8, 16): a log axis ticked at those measured;
    // destination ranks are names, one tick each.
    let mut methods = Panel::new(
        "broadcast time by method",
        Axis::counts("ranks"),
        Axis::log("time [µs]"),
    );
    let mut ol = Panel::new(
        "OL_i per destination (largest rank count)",
        Axis::categories("destination rank"),
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

/// The most series a panel holds: past that, colours and legend rows
/// stop telling lines apart.
pub const MAX_SERIES: usize = 8;

/// commtest: time and MB/s vs packet count, per protocol; the protocols
/// faceted into panels of at most [`MAX_SERIES`] series (all files'), by
/// variant (unordered `(0,k)`, ordered `(1,k)`) and then in runs of
/// consecutive numbers.
fn commtest(runs: &[RunFile]) -> Figure {
    let many = runs.len() > 1;
    // (table kind, protocol, name) in the order first met.
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for r in runs {
        for t in &r.tables {
            let kind = t.title.trim_start_matches("commtest ").to_string();
            for row in &t.rows {
                let k = (
                    kind.clone(),
                    text(row, "protocol").unwrap_or("?").to_string(),
                    text(row, "name").unwrap_or("").to_string(),
                );
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
    }
    let per_panel = (MAX_SERIES / runs.len().max(1)).max(1);
    let mut panels = Vec::new();
    for (kind, variant, group) in facets(&keys, per_panel) {
        let what = format!("{kind}, {variant} {}", span_of(&group));
        let mut time = Panel::new(
            format!("time to move the volume: {what}"),
            Axis::log("packets"),
            Axis::log("time [µs]"),
        );
        let mut rate = Panel::new(
            format!("rate: {what}"),
            Axis::log("packets"),
            Axis::log("MB/s (10^6 B/s)"),
        );
        for r in runs {
            for (_, proto, name) in &group {
                let rows = r
                    .tables
                    .iter()
                    .filter(|t| t.title.trim_start_matches("commtest ") == kind)
                    .flat_map(|t| t.rows.iter())
                    .filter(|row| {
                        text(row, "protocol") == Some(proto) && text(row, "name") == Some(name)
                    });
                let mut a = Series::new(label(r, many, &format!("{proto} {name}")));
                let mut b = a.clone();
                for row in rows {
                    let x = num(row, "packets");
                    a.push(x, us(num(row, "time_ns")));
                    b.push(x, num(row, "bytes_per_sec").map(|v| v / 1e6));
                }
                time.series.push(a);
                rate.series.push(b);
            }
        }
        panels.extend([time, rate]);
    }
    Figure {
        title: "ovbench commtest".into(),
        panels,
    }
}

type Key = (String, String, String);

/// `keys` grouped by table and variant (a protocol's first number: 0
/// unordered, 1 ordered), each group split into as few consecutive runs
/// of at most `per` as fit, their lengths a step apart at most.
fn facets(keys: &[Key], per: usize) -> Vec<(String, &'static str, Vec<Key>)> {
    let mut groups: Vec<(String, &'static str, Vec<Key>)> = Vec::new();
    for k in keys {
        let variant = if k.1.starts_with("(1,") {
            "ordered"
        } else {
            "unordered"
        };
        match groups.iter_mut().find(|g| g.0 == k.0 && g.1 == variant) {
            Some(g) => g.2.push(k.clone()),
            None => groups.push((k.0.clone(), variant, vec![k.clone()])),
        }
    }
    let mut out = Vec::new();
    for (kind, variant, all) in groups {
        // The first `len % parts` facets take one more.
        let parts = all.len().div_ceil(per);
        let (base, extra) = (all.len() / parts, all.len() % parts);
        let mut rest = all.as_slice();
        for i in 0..parts {
            let (chunk, tail) = rest.split_at(base + usize::from(i < extra));
            out.push((kind.clone(), variant, chunk.to_vec()));
            rest = tail;
        }
    }
    out
}

/// "(0,0) to (0,3)": the protocols of a facet.
fn span_of(group: &[Key]) -> String {
    match (group.first(), group.last()) {
        (Some(a), Some(b)) if group.len() > 1 => format!("{} to {}", a.1, b.1),
        (Some(a), _) => a.1.clone(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commtest_facets_hold_at_most_their_share() {
        let keys: Vec<Key> = (0..10)
            .map(|k| ("basic swap".into(), format!("(0,{k})"), "p".into()))
            .chain((0..3).map(|k| ("basic swap".into(), format!("(1,{k})"), "q".into())))
            .collect();
        let f = facets(&keys, 4);
        let sizes: Vec<usize> = f.iter().map(|g| g.2.len()).collect();
        assert_eq!(sizes, vec![4, 3, 3, 3]);
        assert_eq!(f[3].1, "ordered");
        assert_eq!(span_of(&f[0].2), "(0,0) to (0,3)");
        assert_eq!(facets(&keys, 8).len(), 3);
    }

    #[test]
    fn bcast_titles_give_the_rank_count() {
        assert_eq!(
            ranks_in("OL_i, binomial broadcast of 256 B over 16 ranks, M = 100"),
            Some(16)
        );
        assert_eq!(ranks_in("per-processor o_i"), None);
    }
}
