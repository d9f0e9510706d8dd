//! `ovbench plot` for every command's JSON (from sim runs, and the real
//! runs kept in docs/figures/json/): the PNG decodes and is not blank;
//! the SVG parses, holds one line per series (in the series' colour), and
//! the line's points are where the JSON's values map under the axes
//! (within a pixel); the axis titles carry units. Every line, band and
//! mark lies inside its plot area (the SVG's elements, the PNG's pixels
//! apart from text), and every band is drawn at the row fields it names.

mod common;
mod plot_checks;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{ovbench, Scratch};
use ovbench::plot::kinds::MAX_SERIES;
use ovbench::plot::{plot_files, Layout, PanelLayout};
use plot_checks::{bands_are_their_fields, pixel, png_inside, svg_inside};
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

/// Plot `files` as SVG and PNG and check that nothing is drawn outside
/// the plot areas and that bands are their fields; the SVG's text, its
/// layout and the figure.
fn plot_checked(dir: &Path, files: &[PathBuf]) -> (String, Layout, ovbench::plot::Figure) {
    let svg_path = dir.join("fig.svg");
    let png_path = dir.join("lib.png");
    let (fig, layout) = plot_files(files, &svg_path).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    svg_inside(&svg, &layout);
    let docs: Vec<Value> = files
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    bands_are_their_fields(&svg, &layout, &fig, &docs);
    let (_, png_layout) = plot_files(files, &png_path).unwrap();
    png_inside(&png_path, &png_layout);
    for p in &fig.panels {
        assert!(
            p.series.len() <= MAX_SERIES,
            "{}: {}",
            p.title,
            p.series.len()
        );
    }
    (svg, layout, fig)
}

/// Plot `json` as SVG and PNG; check the common rules; the SVG text and
/// the panels' layout for the command's own checks.
fn plot_both(dir: &Path, json: &Path) -> (String, Vec<PanelLayout>, Value) {
    let png_path = dir.join("fig.png");
    let (svg, layout, fig) = plot_checked(dir, &[json.to_path_buf()]);
    let layout = layout.panels;
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
    assert_eq!(
        std::fs::read(&png_path).unwrap(),
        std::fs::read(dir.join("lib.png")).unwrap(),
        "the command draws the PNG the library drew"
    );
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
    // Faceted: more than one panel pair, each of at most 8 series.
    assert!(l.len() >= 4, "{} panels", l.len());
    let all = first_table(&doc);
    let first = &all[0];
    let same = all
        .iter()
        .filter(|r| r["protocol"] == first["protocol"] && r["name"] == first["name"]);
    check_series(&svg, &l, 0, in_us(same, "packets", "time_ns"));

    let j = sim_json(&d, "bcast", &["bcast", "--np", "4,8", "--method", "all"]);
    let (svg, l, doc) = plot_both(&d, &j);
    // Flagged rows (the forwarders' OL_i may be overstated) are not drawn.
    let oli = rows(&doc, "OL_i, binomial broadcast of 256 B over 8 ranks");
    let valid = oli.iter().filter(|r| r["valid"] == true);
    check_series(&svg, &l, 1, in_us(valid, "rank", "ol_ns"));
    // Rank counts on a log axis, ticked at the counts; destination ranks
    // as categories, the axis not reaching back to 0.
    assert!(l[0].x_log, "{:?}", l[0]);
    assert!(l[0].x_range.0 > 2.0 && l[0].x_range.1 < 16.0, "{:?}", l[0]);
    let t = texts(&svg);
    assert!(t.iter().any(|s| s == "4") && t.iter().any(|s| s == "8"));
    assert!(!l[1].x_log && l[1].x_range.0 > 0.0, "{:?}", l[1]);

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
    one_line_per_series(&svg, &layout.panels, &fig);
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

/// The real runs of docs/figures/json/, overlaid as ci/figures overlays
/// them: TCP's spiky logp (probed sizes a pixel apart) and bw's interval
/// are where drawing went wrong.
#[test]
fn docs_figures_stay_inside_and_bands_are_their_fields() {
    let d = Scratch::new("plot-docs");
    let json = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/figures/json");
    for c in [
        "latency", "bw", "overhead", "overlap", "logp", "bcast", "commtest",
    ] {
        let mut files = vec![
            json.join(format!("{c}-tcp.json")),
            json.join(format!("{c}-sim.json")),
        ];
        if c == "overhead" {
            files.push(json.join("overhead-sim-recv.json"));
        }
        let (svg, _, fig) = plot_checked(&d, &files);
        if c == "bw" {
            let t = texts(&svg);
            let banded: Vec<_> = fig.panels[0]
                .series
                .iter()
                .filter(|s| !s.band.is_empty())
                .collect();
            assert_eq!(banded.len(), 2, "one band per run");
            for s in banded {
                let of = s.band_of.as_ref().unwrap();
                assert!(of.brackets && of.lo.pointer.starts_with("/window_bytes_per_sec/"));
                assert!(
                    t.iter().any(|x| *x == format!("band: {}", of.name)),
                    "{t:?}"
                );
            }
        }
    }
}

/// A line through sizes a pixel apart that leaps between the axis' ends
/// (logp's probed sizes over TCP): plotters' bitmap outline of it as one
/// polyline put vertices 200 px past the turns, through the title.
#[test]
fn spikes_stay_inside_the_png() {
    use ovbench::plot::figure::{Axis, Figure, Panel, Series};
    let d = Scratch::new("plot-spikes");
    let mut p = Panel::new("spikes", Axis::sizes("size [B]"), Axis::log("time [µs]"));
    let mut s = Series::new("leaps");
    // Deterministic leaps: a fixed pattern of lows and highs.
    let mut v: u32 = 7;
    for k in 0..60 {
        v = v.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let y = if k % 2 == 0 {
            5.0
        } else {
            50.0 + f64::from(v % 5000) / 10.0
        };
        s.push(Some(900.0 + 4.0 * f64::from(k)), Some(y));
    }
    s.push(Some(1.0), Some(5.0));
    s.push(Some(262_144.0), Some(20.0));
    p.series.push(s);
    p.drop_unplottable();
    let fig = Figure {
        title: "spikes".into(),
        panels: vec![p],
    };
    let png = d.join("spikes.png");
    let layout = ovbench::plot::render::render(&fig, &png).unwrap();
    png_inside(&png, &layout);
}
