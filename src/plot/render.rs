//! Drawing a [`Figure`] with plotters, in-process, as SVG or PNG. Text is
//! laid out with the DejaVu Sans font compiled into the binary (so a
//! machine without fonts draws the same figure).
//!
//! Per panel: the chart on the left, the legend (colour swatches, not
//! lines) on the right; each series one line, its band a shaded polygon,
//! its points small circles, marked points larger rings.

use std::ops::Range;
use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, bail, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::figure::{Figure, Panel};

/// The font's bytes (DejaVu Sans; licence in assets/fonts/).
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

const WIDTH: u32 = 1100;
const PANEL_HEIGHT: u32 = 480;
/// Of a figure of more than two panels.
const SHORT_PANEL_HEIGHT: u32 = 360;
const TITLE_HEIGHT: u32 = 40;
/// The share of a panel's width the chart takes (the rest is the legend).
const CHART_SHARE: f64 = 0.68;

/// Where a panel's chart lies in the image and what its axes span, so
/// a reader of the SVG (the tests) can map values to pixels.
#[derive(Clone, Debug)]
pub struct PanelLayout {
    /// The pixel columns the x axis's ends map to (low end, high end).
    pub x_px: (i32, i32),
    /// The pixel rows the y axis's ends map to (low end, high end: the
    /// low end is the lower row on the image, so the larger number).
    pub y_px: (i32, i32),
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    pub x_log: bool,
    pub y_log: bool,
    /// Each series' colour as the SVG writes it (`#RRGGBB`).
    pub colors: Vec<String>,
}

/// The image format, from the output file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    pub fn of(path: &Path) -> Result<Format> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => bail!(
                "-o {}: the figure's name must end in .svg or .png (the format is taken from it)",
                path.display()
            ),
        }
    }
}

/// The image's size for `fig`.
fn size(fig: &Figure) -> (u32, u32) {
    let n = fig.panels.len().max(1) as u32;
    let h = if n > 2 {
        SHORT_PANEL_HEIGHT
    } else {
        PANEL_HEIGHT
    };
    (WIDTH, TITLE_HEIGHT + h * n)
}

/// Draw `fig` into `path` (SVG or PNG by its extension).
pub fn render(fig: &Figure, path: &Path) -> Result<Vec<PanelLayout>> {
    register_font();
    let dims = size(fig);
    match Format::of(path)? {
        Format::Svg => draw_into(SVGBackend::new(path, dims), fig, path),
        Format::Png => draw_into(BitMapBackend::new(path, dims), fig, path),
    }
}

/// Draw `fig` on `backend` and write it out to `path`.
fn draw_into<DB: DrawingBackend>(
    backend: DB,
    fig: &Figure,
    path: &Path,
) -> Result<Vec<PanelLayout>> {
    let root = backend.into_drawing_area();
    let l = draw(&root, fig)?;
    root.present()
        .map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    Ok(l)
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are the font file itself; it always parses.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the figure: {e}")
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
) -> Result<Vec<PanelLayout>> {
    root.fill(&WHITE).map_err(err)?;
    let (title, body) = root.split_vertically(TITLE_HEIGHT);
    title
        .draw(&Text::new(
            fig.title.clone(),
            (12, 8),
            (FAMILY, 24).into_font().color(&BLACK),
        ))
        .map_err(err)?;
    let panels = body.split_evenly((fig.panels.len().max(1), 1));
    let mut out = Vec::new();
    for (p, area) in fig.panels.iter().zip(panels.iter()) {
        out.push(draw_panel(area, p)?);
    }
    Ok(out)
}

/// Distinct colours for `n` series (a fixed set first, then hues spread
/// around the circle), each a distinct `#RRGGBB`.
pub fn palette(n: usize) -> Vec<RGBColor> {
    const FIXED: [(u8, u8, u8); 8] = [
        (0x1f, 0x77, 0xb4),
        (0xd6, 0x27, 0x28),
        (0x2c, 0xa0, 0x2c),
        (0xff, 0x7f, 0x0e),
        (0x94, 0x67, 0xbd),
        (0x8c, 0x56, 0x4b),
        (0xe3, 0x77, 0xc2),
        (0x17, 0xbe, 0xcf),
    ];
    if n <= FIXED.len() {
        return FIXED[..n]
            .iter()
            .map(|&(r, g, b)| RGBColor(r, g, b))
            .collect();
    }
    let mut out: Vec<RGBColor> = Vec::new();
    for i in 0..n {
        let h = i as f64 / n as f64;
        let light = if i % 2 == 0 { 0.42 } else { 0.30 };
        let c = HSLColor(h, 0.75, light).to_rgba();
        let mut rgb = RGBColor(c.0, c.1, c.2);
        // Two hues may round to one colour: nudge until distinct.
        while out.contains(&rgb) {
            rgb = RGBColor(rgb.0, rgb.1, rgb.2.wrapping_add(1));
        }
        out.push(rgb);
    }
    out
}

pub fn hex(c: &RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The axis span for values from `lo` to `hi`: a margin around them; a
/// linear axis of non-negative values starts at 0.
fn span(lo: f64, hi: f64, log: bool) -> (f64, f64) {
    if log {
        let (lo, hi) = if lo == hi {
            (lo / 2.0, hi * 2.0)
        } else {
            (lo, hi)
        };
        (lo / 1.25, hi * 1.25)
    } else {
        let lo = if lo >= 0.0 { 0.0 } else { lo };
        let (lo, hi) = if lo == hi {
            (lo - 1.0, hi + 1.0)
        } else {
            (lo, hi)
        };
        let pad = (hi - lo) * 0.05;
        (if lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
    }
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<PanelLayout> {
    let Some(((x0, x1), (y0, y1))) = p.extent() else {
        area.draw(&Text::new(
            format!("{}: nothing to draw", p.title),
            (20, 20),
            (FAMILY, 16).into_font(),
        ))
        .map_err(err)?;
        return Ok(PanelLayout {
            x_px: (0, 0),
            y_px: (0, 0),
            x_range: (0.0, 0.0),
            y_range: (0.0, 0.0),
            x_log: p.x.log,
            y_log: p.y.log,
            colors: Vec::new(),
        });
    };
    let (xs, ys) = (span(x0, x1, p.x.log), span(y0, y1, p.y.log));
    let x = Scale::new(xs, p.x.log, ticks(xs, p.x.log, p.x.title.contains("[B]")));
    let y = Scale::new(ys, p.y.log, ticks(ys, p.y.log, false));
    chart(area, p, x, y)
}

/// One axis's mapping of values to pixels, linear or logarithmic, with
/// its tick positions (plotters' own log axis labels only powers of ten).
#[derive(Clone, Debug)]
pub struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

impl Scale {
    fn new(span: (f64, f64), log: bool, ticks: Vec<f64>) -> Scale {
        Scale {
            lo: span.0,
            hi: span.1,
            log,
            ticks,
        }
    }
    /// Where `v` lies between the ends, 0 to 1.
    pub fn fraction(lo: f64, hi: f64, log: bool, v: f64) -> f64 {
        if log {
            (v.log10() - lo.log10()) / (hi.log10() - lo.log10())
        } else {
            (v - lo) / (hi - lo)
        }
    }
}

impl Ranged for Scale {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = Scale::fraction(self.lo, self.hi, self.log, *v);
        let f = if f.is_finite() {
            f.clamp(-1.0, 2.0)
        } else {
            0.0
        };
        limit.0 + ((limit.1 - limit.0) as f64 * f).round() as i32
    }
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }
    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// Tick positions in `span`: on a size axis powers of two, on another
/// log axis 1, 2 and 5 times powers of ten, on a linear axis a round step;
/// thinned to about ten.
fn ticks(span: (f64, f64), log: bool, bytes: bool) -> Vec<f64> {
    let (lo, hi) = span;
    let inside = |v: &f64| *v >= lo && *v <= hi;
    if log && bytes {
        let all: Vec<f64> = (lo.log2().ceil() as i32..=hi.log2().floor() as i32)
            .map(|e| 2f64.powi(e))
            .collect();
        let every = all.len().div_ceil(10).max(1);
        return all.into_iter().step_by(every).collect();
    }
    if log {
        let decades = lo.log10().floor() as i32..=hi.log10().ceil() as i32;
        let with = |ms: &[f64]| -> Vec<f64> {
            decades
                .clone()
                .flat_map(|e| ms.iter().map(move |m| m * 10f64.powi(e)))
                .filter(inside)
                .collect()
        };
        let dense = with(&[1.0, 2.0, 5.0]);
        return if dense.len() > 12 {
            let ones = with(&[1.0]);
            let every = ones.len().div_ceil(10).max(1);
            ones.into_iter().step_by(every).collect()
        } else if dense.len() < 3 {
            with(&[1.0, 1.5, 2.0, 3.0, 5.0, 7.0])
        } else {
            dense
        };
    }
    let raw = (hi - lo) / 8.0;
    if raw.is_nan() || raw <= 0.0 {
        return vec![lo];
    }
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// A tick label: short, without trailing zeros; sizes in K/M/G.
fn tick(v: f64, bytes: bool) -> String {
    if bytes && v >= 1.0 && (v.log2().fract().abs() < 1e-9) {
        return crate::sizes::format_bytes(v.round() as usize);
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        return format!("{v:.0e}");
    }
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    x: Scale,
    y: Scale,
) -> Result<PanelLayout> {
    let (xs, ys) = ((x.lo, x.hi), (y.lo, y.hi));
    let (w, _) = area.dim_in_pixel();
    let (left, legend) = area.split_horizontally((w as f64 * CHART_SHARE) as u32);
    let mut ch = ChartBuilder::on(&left)
        .caption(p.title.clone(), (FAMILY, 18))
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    let xbytes = p.x.title.contains("[B]");
    ch.configure_mesh()
        .x_desc(p.x.title.clone())
        .y_desc(p.y.title.clone())
        .axis_desc_style((FAMILY, 15))
        .label_style((FAMILY, 12))
        .x_label_formatter(&|v| tick(*v, xbytes))
        .y_label_formatter(&|v| tick(*v, false))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(err)?;
    let colors = palette(p.series.len());
    for (s, c) in p.series.iter().zip(&colors) {
        if !s.band.is_empty() {
            let mut b = s.band.clone();
            b.sort_by(|a, b| a.0.total_cmp(&b.0));
            let poly: Vec<(f64, f64)> = b
                .iter()
                .map(|&(x, lo, _)| (x, lo))
                .chain(b.iter().rev().map(|&(x, _, hi)| (x, hi)))
                .collect();
            ch.draw_series(std::iter::once(Polygon::new(poly, c.mix(0.18).filled())))
                .map_err(err)?;
        }
        let width = if s.thin { 1 } else { 2 };
        ch.draw_series(LineSeries::new(
            s.points.iter().copied(),
            c.stroke_width(width),
        ))
        .map_err(err)?;
        ch.draw_series(
            s.points
                .iter()
                .map(|&pt| Circle::new(pt, if s.thin { 2 } else { 3 }, c.filled())),
        )
        .map_err(err)?;
        ch.draw_series(
            s.marked
                .iter()
                .map(|&pt| Circle::new(pt, 7, c.stroke_width(2))),
        )
        .map_err(err)?;
    }
    let (px, py) = ch.plotting_area().get_pixel_range();
    // Pixel ranges are the image's; drawing areas count from their corner.
    let (bx, by) = left.get_base_pixel();
    for (i, n) in p.notes.iter().enumerate() {
        left.draw(&Text::new(
            n.clone(),
            (px.start - bx + 8, py.start - by + 6 + 16 * i as i32),
            (FAMILY, 13).into_font().color(&BLACK),
        ))
        .map_err(err)?;
    }
    draw_legend(&legend, p, &colors, py.start - by..py.end - by)?;
    let low = ch.plotting_area().map_coordinate(&(xs.0, ys.0));
    let high = ch.plotting_area().map_coordinate(&(xs.1, ys.1));
    Ok(PanelLayout {
        x_px: (low.0, high.0),
        y_px: (low.1, high.1),
        x_range: xs,
        y_range: ys,
        x_log: p.x.log,
        y_log: p.y.log,
        colors: colors.iter().map(hex).collect(),
    })
}

/// Swatches and labels, one row each; squeezed when there are many.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    colors: &[RGBColor],
    rows: Range<i32>,
) -> Result<()> {
    let n = p.series.len().max(1) as i32;
    let step = ((rows.end - rows.start) / n).clamp(9, 20);
    let font = if step < 14 { 10 } else { 13 };
    for (i, (s, c)) in p.series.iter().zip(colors).enumerate() {
        let y = rows.start + step * i as i32;
        area.draw(&Rectangle::new(
            [(6, y + 2), (22, y + step - 4)],
            c.filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(
            s.label.clone(),
            (28, y),
            (FAMILY, font).into_font().color(&BLACK),
        ))
        .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palettes_are_distinct() {
        for n in [1, 8, 9, 40] {
            let p: Vec<String> = palette(n).iter().map(hex).collect();
            let mut q = p.clone();
            q.sort();
            q.dedup();
            assert_eq!(q.len(), n, "{p:?}");
        }
    }

    #[test]
    fn ticks_read_well() {
        assert_eq!(tick(1024.0, true), "1K");
        assert_eq!(tick(1000.0, true), "1000");
        assert_eq!(tick(2.5, false), "2.5");
        assert_eq!(tick(0.125, false), "0.125");
        assert_eq!(tick(1e7, false), "1e7");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks((6.0, 70.0), true, true), vec![8.0, 16.0, 32.0, 64.0]);
        assert_eq!(ticks((0.9, 11.0), true, false), vec![1.0, 2.0, 5.0, 10.0]);
        assert_eq!(
            ticks((0.0, 9.0), false, false),
            vec![0.0, 2.0, 4.0, 6.0, 8.0]
        );
        assert_eq!(ticks((1.0, 4e6), true, true).len(), 8);
    }

    #[test]
    fn spans_pad_and_start_at_zero() {
        assert_eq!(span(2.0, 10.0, false).0, 0.0);
        let (lo, hi) = span(10.0, 1000.0, true);
        assert!(lo < 10.0 && hi > 1000.0);
        let (lo, hi) = span(5.0, 5.0, true);
        assert!(lo < 5.0 && hi > 5.0);
    }
}
