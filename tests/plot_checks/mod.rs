//! What tests/plot.rs checks of every drawn figure: nothing of a series
//! outside its plot area (the SVG's elements, the PNG's pixels apart from
//! the texts' boxes), and every band drawn at the row fields it names.

use std::path::Path;

use ovbench::plot::{Figure, Layout};
use serde_json::Value;

/// Where `v` lands between the pixel ends `px` of an axis spanning `range`.
pub fn pixel(v: f64, range: (f64, f64), log: bool, px: (i32, i32)) -> f64 {
    let f = if log {
        (v.log10() - range.0.log10()) / (range.1.log10() - range.0.log10())
    } else {
        (v - range.0) / (range.1 - range.0)
    };
    px.0 as f64 + f * (px.1 - px.0) as f64
}

fn points(attr: Option<&str>) -> Vec<(f64, f64)> {
    attr.unwrap_or("")
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

fn attr(n: &roxmltree::Node, name: &str) -> f64 {
    n.attribute(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Every polyline's and polygon's points and every circle's whole disc
/// (radius and half its stroke) lie inside one panel's plot area.
pub fn svg_inside(svg: &str, layout: &Layout) {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses");
    let mut n_checked = 0;
    for n in doc.descendants() {
        let pts = match n.tag_name().name() {
            "polyline" | "polygon" => points(n.attribute("points")),
            "circle" => {
                let (cx, cy) = (attr(&n, "cx"), attr(&n, "cy"));
                let stroked = n.attribute("stroke").is_some_and(|s| s != "none");
                let reach = attr(&n, "r")
                    + if stroked {
                        attr(&n, "stroke-width") / 2.0
                    } else {
                        0.0
                    };
                vec![
                    (cx - reach, cy),
                    (cx + reach, cy),
                    (cx, cy - reach),
                    (cx, cy + reach),
                ]
            }
            _ => continue,
        };
        n_checked += 1;
        let inside = layout
            .panels
            .iter()
            .any(|p| pts.iter().all(|&(x, y)| p.plot.contains(x, y)));
        assert!(
            inside,
            "<{}> reaches outside every plot area {:?}: {:?}",
            n.tag_name().name(),
            layout.panels.iter().map(|p| p.plot).collect::<Vec<_>>(),
            pts.iter()
                .filter(|&&(x, y)| !layout.panels.iter().any(|p| p.plot.contains(x, y)))
                .take(4)
                .collect::<Vec<_>>()
        );
    }
    assert!(n_checked > 0, "no series drawn");
}

/// Every pixel that is not the white background lies in a plot area or
/// in the box of a text or legend swatch.
pub fn png_inside(path: &Path, layout: &Layout) {
    let dec = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = dec.read_info().expect("the PNG decodes");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!((info.width, info.height), (layout.width, layout.height));
    let step = info.color_type.samples();
    let px = &buf[..info.buffer_size()];
    let mut stray = Vec::new();
    for (i, p) in px.chunks(step).enumerate() {
        if p[..3] == [255, 255, 255] {
            continue;
        }
        let (x, y) = (
            (i % info.width as usize) as f64,
            (i / info.width as usize) as f64,
        );
        let ok = layout.panels.iter().any(|l| l.plot.contains(x, y))
            || layout.texts.iter().any(|t| t.contains(x, y));
        if !ok {
            stray.push((x as i32, y as i32, [p[0], p[1], p[2]]));
        }
    }
    assert!(
        stray.is_empty(),
        "{}: {} pixels drawn outside the plot areas and texts, e.g. {:?}",
        path.display(),
        stray.len(),
        &stray[..stray.len().min(8)]
    );
}

/// The `fill` colour and points of every `<polygon>` (the bands).
fn polygons(svg: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses");
    doc.descendants()
        .filter(|n| n.has_tag_name("polygon"))
        .map(|n| {
            let fill = n.attribute("fill").unwrap_or("").to_string();
            (fill, points(n.attribute("points")))
        })
        .collect()
}

/// Every row of every table of `doc` (and of each run of a `--proto`
/// list's file).
fn all_rows(doc: &Value) -> Vec<&Value> {
    let runs = std::iter::once(doc).chain(
        doc.get("protocols")
            .and_then(Value::as_array)
            .into_iter()
            .flatten(),
    );
    runs.flat_map(|d| d["tables"].as_array().into_iter().flatten())
        .flat_map(|t| t["rows"].as_array().into_iter().flatten())
        .collect()
}

/// Each series' band: the legend names it ("band: …"); each of its
/// points is a row's x and its two named fields, exactly; a band that
/// brackets its line holds the line's point at that x; and the SVG's
/// polygon of the band's colour in the panel runs through those points
/// (low ends left to right, high ends back), within a pixel.
pub fn bands_are_their_fields(svg: &str, layout: &Layout, fig: &Figure, docs: &[Value]) {
    let texts: Vec<String> = roxmltree::Document::parse(svg)
        .unwrap()
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect();
    let polys = polygons(svg);
    let rows: Vec<&Value> = docs.iter().flat_map(all_rows).collect();
    for (p, l) in fig.panels.iter().zip(&layout.panels) {
        for (s, c) in p.series.iter().zip(&l.colors) {
            if s.band.is_empty() {
                continue;
            }
            let of = s.band_of.as_ref().expect("a band names its fields");
            let name = format!("band: {}", of.name);
            assert!(texts.contains(&name), "{}: legend lacks {name}", s.label);
            for &(x, lo, hi) in &s.band {
                let found = rows.iter().any(|r| {
                    let (a, b) = (of.lo.of(r), of.hi.of(r));
                    of.x.of(r) == Some(x)
                        && ((a == Some(lo) && b == Some(hi)) || (a == Some(hi) && b == Some(lo)))
                });
                assert!(
                    found,
                    "{}: band ({x}, {lo}, {hi}) is no row's {of:?}",
                    s.label
                );
                if of.brackets {
                    for &(_, y) in s.points.iter().filter(|q| q.0 == x) {
                        assert!(
                            lo <= y && y <= hi,
                            "{}: {y} outside its band {lo}..{hi} at {x}",
                            s.label
                        );
                    }
                }
            }
            let drawn: Vec<&Vec<(f64, f64)>> = polys
                .iter()
                .filter(|(f, pts)| f == c && pts.iter().all(|&(x, y)| l.plot.contains(x, y)))
                .map(|(_, pts)| pts)
                .collect();
            assert_eq!(drawn.len(), 1, "{}: one band polygon in {c}", s.label);
            let mut b = s.band.clone();
            b.sort_by(|a, b| a.0.total_cmp(&b.0));
            let expect: Vec<(f64, f64)> = b
                .iter()
                .map(|&(x, lo, _)| (x, lo))
                .chain(b.iter().rev().map(|&(x, _, hi)| (x, hi)))
                .collect();
            assert_eq!(drawn[0].len(), expect.len(), "{}", s.label);
            for (&(x, y), &(dx, dy)) in expect.iter().zip(drawn[0]) {
                let px = pixel(x, l.x_range, l.x_log, l.x_px);
                let py = pixel(y, l.y_range, l.y_log, l.y_px);
                assert!(
                    (px - dx).abs() <= 1.0 && (py - dy).abs() <= 1.0,
                    "{}: band point ({x}, {y}) belongs at ({px:.1}, {py:.1}), drawn at ({dx}, {dy})",
                    s.label
                );
            }
        }
    }
}
