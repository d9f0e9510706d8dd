//! Drawing a [`Figure`] with plotters, in-process, as SVG or PNG. Text is
//! laid out with the DejaVu Sans font compiled into the binary (so a
//! machine without fonts draws the same figure).
//!
//! Per panel: the chart on the left, the legend (colour swatches, not
//! lines) on the right (src/plot/chart.rs). The renderer reports where it
//! drew: each panel's plot area and every text's box, so that a test can
//! tell a stray stroke from a label.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::chart;
use super::figure::Figure;

/// The font's bytes (DejaVu Sans; licence in assets/fonts/).
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
pub(super) const FAMILY: &str = "sans-serif";

const WIDTH: u32 = 1100;
const PANEL_HEIGHT: u32 = 480;
/// Of a figure of more than two panels.
const SHORT_PANEL_HEIGHT: u32 = 360;
const TITLE_HEIGHT: u32 = 40;

/// A rectangle of pixels of the image, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl Rect {
    pub fn contains(&self, x: f64, y: f64) -> bool {
        x >= self.x0 as f64 && x <= self.x1 as f64 && y >= self.y0 as f64 && y <= self.y1 as f64
    }
}

/// Where a figure was drawn: its size, its panels, and the box of every
/// text and legend swatch drawn (all else lies inside a plot area).
#[derive(Clone, Debug)]
pub struct Layout {
    pub width: u32,
    pub height: u32,
    pub panels: Vec<PanelLayout>,
    pub texts: Vec<Rect>,
}

/// Where a panel's chart lies in the image and what its axes span, so
/// a reader of the SVG (the tests) can map values to pixels.
#[derive(Clone, Debug)]
pub struct PanelLayout {
    /// The plot area: every line, band and mark of the panel lies in it.
    pub plot: Rect,
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
pub fn render(fig: &Figure, path: &Path) -> Result<Layout> {
    register_font();
    let dims = size(fig);
    let format = Format::of(path)?;
    let panels = match format {
        Format::Svg => draw_into(SVGBackend::new(path, dims), fig, path, format),
        Format::Png => draw_into(BitMapBackend::new(path, dims), fig, path, format),
    }?;
    Ok(panels)
}

/// Draw `fig` on `backend` and write it out to `path`.
fn draw_into<DB: DrawingBackend>(
    backend: DB,
    fig: &Figure,
    path: &Path,
    format: Format,
) -> Result<Layout> {
    let root = backend.into_drawing_area();
    let l = draw(&root, fig, format)?;
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

pub(super) fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the figure: {e}")
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
    format: Format,
) -> Result<Layout> {
    root.fill(&WHITE).map_err(err)?;
    let (width, height) = root.dim_in_pixel();
    let (title, body) = root.split_vertically(TITLE_HEIGHT);
    let mut texts = Vec::new();
    chart::write(&title, &fig.title, (12, 8), 24, &mut texts)?;
    let areas = body.split_evenly((fig.panels.len().max(1), 1));
    let mut panels = Vec::new();
    for (p, area) in fig.panels.iter().zip(areas.iter()) {
        panels.push(chart::draw_panel(area, p, format, &mut texts)?);
    }
    Ok(Layout {
        width,
        height,
        panels,
        texts,
    })
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
}
