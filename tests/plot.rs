//! `ovbench plot` for every command's JSON (from sim runs): the PNG
//! decodes and is not blank; the SVG parses, holds one line per series
//! (in the series' colour), and the line's points are where the JSON's
//! values map under the axes (within a pixel); the axis titles carry units.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{ovbench, Scratch};
use ovbench::plot::{plot_files, PanelLayout};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// Run `ovbench ARGS --transport sim --json DIR/NAME.json`.
fn sim_json(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    let mut a: Vec<&str> = args.to_vec();
    let p = path.to_str().unwrap().to_string();
    a.extend(["--transport", "sim", "-q", "--json", &p]);
    ovbench(&a, LIMIT).expect_ok();
    path
}

/// Where `v` lands between the pixel ends `px` of an axis spanning `range`.
fn pixel(v: f64, range: (f64, f64), log: bool, px: (i32, i32)) -> f64 {
    let f = if log {
        (v.log10() - range.0.log10()) / (range.1.log10() - range.0.log10())
    } else {
        (v - range.0) / (range.1 - range.0)
    };
    px.0 as f64 + f * (px.1 - px.0) as f64
}

/// The `points` of every `<polyline>` drawn in `color`.
fn polylines(svg: &str, color: &str) -> Vec<Vec<(f64, f64)>> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses");
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(color))
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect()
}

/// The rows of the tables whose title starts with `prefix`.
fn rows(doc: &Value, prefix: &str) -> Vec<Value> {
    doc["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["title"].as_str().unwrap().starts_with(prefix))
        .flat_map(|t| t["rows"].as_array().unwrap().clone())
        .collect()
}

/// The rows of the document's first table.
fn first_table(doc: &Value) -> &Vec<Value> {
    doc["tables"][0]["rows"].as_array().unwrap()
}

/// The points (x, y in µs) of `rows`, whose `y_ns` column is in ns.
fn in_us<'a>(rows: impl IntoIterator<Item = &'a Value>, x: &str, y_ns: &str) -> Vec<(f64, f64)> {
    rows.into_iter()
        .map(|r| (f(r, x), f(r, y_ns) / 1000.0))
        .collect()
}

fn f(row: &Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {row}"))
}

/// Series 0 of panel `panel` is drawn through `expect` (taken from the
/// JSON), one pixel at most from each.
fn check_series(svg: &str, layout: &[PanelLayout], panel: usize, mut expect: Vec<(f64, f64)>) {
    let l = &layout[panel];
    expect.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The lines in the series' colour within this panel's rows.
    let (top, bottom) = (l.y_px.1.min(l.y_px.0) - 2, l.y_px.0.max(l.y_px.1) + 2);
    let lines: Vec<Vec<(f64, f64)>> = polylines(svg, &l.colors[0])
        .into_iter()
        .filter(|pl| pl.iter().all(|p| p.1 >= top as f64 && p.1 <= bottom as f64))
        .collect();
    assert_eq!(lines.len(), 1, "one line in {}", l.colors[0]);
    let drawn = &lines[0];
    assert_eq!(drawn.len(), expect.len(), "{drawn:?} vs {expect:?}");
    for ((x, y), (dx, dy)) in expect.iter().zip(drawn) {
        let px = pixel(*x, l.x_range, l.x_log, l.x_px);
        let py = pixel(*y, l.y_range, l.y_log, l.y_px);
        assert!(
            (px - dx).abs() <= 1.0 && (py - dy).abs() <= 1.0,
            "({x}, {y}) should be at ({px:.1}, {py:.1}), drawn at ({dx}, {dy})"
        );
    }
}

/// Every series of every panel is one line in its own colour.
fn one_line_per_series(svg: &str, layout: &[PanelLayout], fig: &ovbench::plot::Figure) {
    for (p, l) in fig.panels.iter().zip(layout) {
        assert_eq!(p.series.len(), l.colors.len());
        for (s, c) in p.series.iter().zip(&l.colors) {
            let n = polylines(svg, c).len();
            // A colour may recur in another panel (same series, new axes).
            let panels_with = layout.iter().filter(|o| o.colors.contains(c)).count();
            assert_eq!(n, panels_with, "{}: {n} lines in {c}", s.label);
        }
    }
}

fn png_not_blank(path: &Path) {
    let dec = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = dec.read_info().expect("the PNG decodes");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let px = &buf[..info.buffer_size()];
    let step = info.color_type.samples();
    let (mut inked, mut colored) = (0usize, 0usize);
    for p in px.chunks(step) {
        if p[..3].iter().any(|&c| c < 200) {
            inked += 1;
        }
        if p[0].abs_diff(p[1]) > 40 || p[1].abs_diff(p[2]) > 40 {
            colored += 1;
        }
    }
    let total = px.len() / step;
    assert!(info.width >= 800 && info.height >= 400, "{info:?}");
    assert!(inked * 100 > total, "only {inked} of {total} pixels drawn");
    assert!(
        colored > 500,
        "only {colored} coloured pixels: no series drawn?"
    );
}

/// Plot `json` as SVG and PNG; check the common rules; the SVG text and
/// the panels' layout for the command's own checks.
fn plot_both(dir: &Path, json: &Path) -> (String, Vec<PanelLayout>, Value) {
    let svg_path = dir.join("fig.svg");
    let png_path = dir.join("fig.png");
    let (fig, layout) = plot_files(&[json.to_path_buf()], &svg_path).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    one_line_per_series(&svg, &layout, &fig);
    let t = texts(&svg);
    for p in &fig.panels {
        for title in [&p.x.title, &p.y.title] {
            assert!(
                title.contains('[')
                    || title.contains("MB/s")
                    || title == "packets"
                    || title.contains("rank"),
                "unit in {title}"
            );
            assert!(
                t.iter().any(|x| x == title),
                "axis title {title} in the SVG"
            );
        }
    }
    // The binary's own command line writes the PNG.
    let r = ovbench(
        &[
            "plot",
            json.to_str().unwrap(),
            "-o",
            png_path.to_str().unwrap(),
        ],
        LIMIT,
    )
    .expect_ok();
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    png_not_blank(&png_path);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    (svg, layout, doc)
}

#[test]
fn latency_and_window_figures() {
    let d = Scratch::new("plot-lat");
    let j = sim_json(
        &d,
        "latency",
        &["latency", "--sizes", "0:64K", "--iters", "200"],
    );
    let (svg, l, doc) = plot_both(&d, &j);
    let pts = rows(&doc, "latency")
        .iter()
        .filter(|r| f(r, "size") > 0.0)
        .map(|r| (f(r, "size"), f(r, "p50_ns") / 1000.0))
        .collect();
    check_series(&svg, &l, 0, pts);
    for (cmd, key, scale) in [
        ("bw", "bytes_per_sec", 1e6),
        ("msgrate", "msgs_per_sec", 1e6),
    ] {
        let j = sim_json(&d, cmd, &[cmd, "--sizes", "8:64K", "--iters", "5"]);
        let (svg, l, doc) = plot_both(&d, &j);
        let pts = first_table(&doc)
            .iter()
            .map(|r| (f(r, "size"), f(r, key) / scale))
            .collect();
        check_series(&svg, &l, 0, pts);
    }
}

#[test]
fn method_figures() {
    let d = Scratch::new("plot-methods");
    let j = sim_json(&d, "overhead", &["overhead", "--sizes", "8:4K"]);
    let (svg, l, doc) = plot_both(&d, &j);
    let sent = rows(&doc, "send overhead");
    check_series(&svg, &l, 0, in_us(&sent, "size", "overhead_ns"));

    let j = sim_json(&d, "logp", &["logp", "--max-size", "64K"]);
    let (svg, l, doc) = plot_both(&d, &j);
    let sized = first_table(&doc).iter().filter(|r| f(r, "size") > 0.0);
    check_series(&svg, &l, 0, in_us(sized, "size", "os_ns"));
    assert!(texts(&svg).iter().any(|t| t.starts_with("L = ")));

    let j = sim_json(&d, "commtest", &["commtest"]);
    let (svg, l, doc) = plot_both(&d, &j);
    let all = first_table(&doc);
    let first = &all[0];
    let same = all
        .iter()
        .filter(|r| r["protocol"] == first["protocol"] && r["name"] == first["name"]);
    check_series(&svg, &l, 0, in_us(same, "packets", "time_ns"));

    let j = sim_json(&d, "bcast", &["bcast", "--np", "4,8", "--method", "all"]);
    let (svg, l, doc) = plot_both(&d, &j);
    let oli = rows(&doc, "OL_i, binomial broadcast of 256 B over 8 ranks");
    check_series(&svg, &l, 1, in_us(&oli, "rank", "ol_ns"));

    let j = sim_json(&d, "overlap", &["overlap"]);
    let (svg, l, doc) = plot_both(&d, &j);
    let all = rows(&doc, "overlap");
    let small = all.iter().map(|r| f(r, "size")).fold(f64::MAX, f64::min);
    let pair = all[0]["pair"].clone();
    let pts = all
        .iter()
        .filter(|r| f(r, "size") == small && r["pair"] == pair)
        .map(|r| (f(r, "comp_ns") / 1000.0, f(r, "sender_min_overlap_pct")))
        .collect();
    check_series(&svg, &l, 0, pts);
}

#[test]
fn files_overlay_as_labelled_series() {
    let d = Scratch::new("plot-overlay");
    let a = sim_json(&d, "a", &["latency", "--sizes", "8:1K", "--iters", "100"]);
    let b = sim_json(
        &d,
        "b",
        &[
            "latency", "--sizes", "8:1K", "--iters", "100", "--sim", "L=3us",
        ],
    );
    let out = d.join("both.svg");
    let (fig, layout) = plot_files(&[a, b], &out).unwrap();
    let labels: Vec<&str> = fig.panels[0]
        .series
        .iter()
        .map(|s| s.label.as_str())
        .collect();
    assert_eq!(labels.len(), 4, "{labels:?}");
    assert!(labels[0].contains("sim auto (a)"), "{labels:?}");
    assert!(labels[2].contains("sim auto (b)"), "{labels:?}");
    let svg = std::fs::read_to_string(&out).unwrap();
    one_line_per_series(&svg, &layout, &fig);
    assert!(texts(&svg).iter().any(|t| t.contains("(b)")));
}

#[test]
fn bad_plots_are_refused_in_one_line() {
    let d = Scratch::new("plot-bad");
    let lat = sim_json(&d, "lat", &["latency", "--sizes", "8", "--iters", "10"]);
    let ovh = sim_json(&d, "ovh", &["overhead"]);
    let l = lat.to_str().unwrap();
    for (args, says) in [
        (vec!["plot", l, "-o", "x.pdf"], ".svg or .png"),
        (
            vec!["plot", l, ovh.to_str().unwrap(), "-o", "x.svg"],
            "one command",
        ),
        (vec!["plot", "/no/such.json", "-o", "x.svg"], "cannot read"),
    ] {
        let r = ovbench(&args, LIMIT);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    }
    let old = d.join("old.json");
    let text = std::fs::read_to_string(&lat)
        .unwrap()
        .replace("ovbench/", "ovbench/0");
    std::fs::write(&old, text).unwrap();
    let r = ovbench(&["plot", old.to_str().unwrap(), "-o", "x.svg"], LIMIT);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("rerun the benchmark"), "{}", r.stderr);
}
