//! One panel drawn: its plot area, grid, frame, ticks and axis titles,
//! the series (line, band, points, rings) and the legend. Every text is
//! written through [`write`], which notes its box in the layout.
//!
//! Nothing of a series may fall outside the plot area: the axes keep a
//! margin of [`MARK_PX`] for the largest mark, and in a PNG a thick line
//! is drawn one segment at a time, since plotters' bitmap outline of a
//! whole polyline sends its joins far off at sharp turns (logp's probed
//! sizes drew spikes through the title; an SVG viewer strokes the
//! polyline itself).

use std::ops::Range;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::figure::{Panel, Ticks};
use super::render::{err, hex, palette, Format, PanelLayout, Rect, FAMILY};
use super::scale::{tick, Scale};

/// The share of a panel's width the chart takes (the rest is the legend).
const CHART_SHARE: f64 = 0.68;
/// The plot area's distance from the chart's edges: room for the caption
/// and the y axis' title above, tick labels left and below, the x axis'
/// title below.
const TOP: u32 = 50;
const BOTTOM: u32 = 46;
const LEFT: u32 = 72;
const RIGHT: u32 = 14;
/// The largest mark's reach from its point (a probed size's ring, 7 px,
/// stroke 2), kept clear at the plot area's edges.
const MARK_PX: f64 = 12.0;
const TICK_PX: i32 = 5;

/// Write `s` with its top left corner at `at` (in `area`'s pixels), in
/// black at `size` px, and note the box its glyphs may cover.
pub fn write<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    s: &str,
    at: (i32, i32),
    size: u32,
    texts: &mut Vec<Rect>,
) -> Result<()> {
    let font = (FAMILY, size).into_font().color(&BLACK);
    area.draw(&Text::new(s.to_string(), at, font))
        .map_err(err)?;
    let (w, _) = measure(area, s, size)?;
    let (bx, by) = area.get_base_pixel();
    let sz = size as i32;
    // Glyphs reach a little above the anchor and below the nominal
    // height (ascenders, descenders, antialiasing).
    texts.push(Rect {
        x0: bx + at.0 - 2,
        y0: by + at.1 - sz * 3 / 10 - 1,
        x1: bx + at.0 + w + 3,
        y1: by + at.1 + sz + 1,
    });
    Ok(())
}

/// The width and height `s` takes at `size` px.
fn measure<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    s: &str,
    size: u32,
) -> Result<(i32, i32)> {
    let font: TextStyle = (FAMILY, size).into_font().into();
    let (w, h) = area.estimate_text_size(s, &font).map_err(err)?;
    Ok((w as i32, h as i32))
}

/// Draw panel `p` into `area`; its texts' boxes are added to `texts`.
pub fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    format: Format,
    texts: &mut Vec<Rect>,
) -> Result<PanelLayout> {
    let (w, _) = area.dim_in_pixel();
    let (left, legend) = area.split_horizontally((w as f64 * CHART_SHARE) as u32);
    let (lw, _) = left.dim_in_pixel();
    let (cw, _) = measure(&left, &p.title, 18)?;
    write(&left, &p.title, ((lw as i32 - cw) / 2, 6), 18, texts)?;
    write(&left, &p.y.title, (8, 30), 14, texts)?;
    let plot = left.margin(TOP, BOTTOM, LEFT, RIGHT);
    let (pw, ph) = plot.dim_in_pixel();
    let (px, py) = plot.get_pixel_range();
    let rect = Rect {
        x0: px.start,
        y0: py.start,
        x1: px.end - 1,
        y1: py.end - 1,
    };
    let Some(((x0, x1), (y0, y1))) = p.extent() else {
        write(&plot, "nothing to draw", (8, 6), 14, texts)?;
        return Ok(PanelLayout {
            plot: rect,
            x_px: (0, 0),
            y_px: (0, 0),
            x_range: (0.0, 0.0),
            y_range: (0.0, 0.0),
            x_log: p.x.log,
            y_log: p.y.log,
            colors: Vec::new(),
        });
    };
    let xs: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.0))
        .collect();
    let ys: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1))
        .collect();
    let x = Scale::of(&p.x, (x0, x1), &xs, MARK_PX / pw.max(1) as f64);
    let y = Scale::of(&p.y, (y0, y1), &ys, MARK_PX / ph.max(1) as f64);
    let (xr, yr) = ((x.lo, x.hi), (y.lo, y.hi));
    let (xt, yt) = (x.ticks.clone(), y.ticks.clone());
    let mut ch = ChartBuilder::on(&plot)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    ch.configure_mesh()
        .disable_axes()
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(err)?;
    // The frame and the ticks, inside the plot area.
    let frame = BLACK.mix(0.55);
    plot.draw(&Rectangle::new(
        [(0, 0), (pw as i32 - 1, ph as i32 - 1)],
        frame.stroke_width(1),
    ))
    .map_err(err)?;
    let at = |v: (f64, f64)| {
        let (a, b) = ch.backend_coord(&v);
        (a - px.start, b - py.start)
    };
    let bytes = p.x.ticks == Ticks::Pow2;
    for &t in &xt {
        let (tx, _) = at((t, yr.0));
        plot.draw(&PathElement::new(
            vec![(tx, ph as i32 - 1), (tx, ph as i32 - 1 - TICK_PX)],
            frame,
        ))
        .map_err(err)?;
        let label = tick(t, bytes);
        let (lw, _) = measure(&left, &label, 12)?;
        let (gx, gy) = (tx + LEFT as i32, ph as i32 + TOP as i32);
        write(&left, &label, (gx - lw / 2, gy + 6), 12, texts)?;
    }
    for &t in &yt {
        let (_, ty) = at((xr.0, t));
        plot.draw(&PathElement::new(vec![(0, ty), (TICK_PX, ty)], frame))
            .map_err(err)?;
        let label = tick(t, false);
        let (lw, lh) = measure(&left, &label, 12)?;
        let gy = ty + TOP as i32;
        write(
            &left,
            &label,
            (LEFT as i32 - 6 - lw, gy - lh / 2),
            12,
            texts,
        )?;
    }
    let (tw, _) = measure(&left, &p.x.title, 14)?;
    let xt_at = (LEFT as i32 + (pw as i32 - tw) / 2, (TOP + ph) as i32 + 24);
    write(&left, &p.x.title, xt_at, 14, texts)?;
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
        let style = c.stroke_width(if s.thin { 1 } else { 2 });
        if format == Format::Png && !s.thin {
            let segments = s
                .points
                .windows(2)
                .map(|w| PathElement::new(w.to_vec(), style));
            ch.draw_series(segments).map_err(err)?;
        } else {
            ch.draw_series(LineSeries::new(s.points.iter().copied(), style))
                .map_err(err)?;
        }
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
    for (i, n) in p.notes.iter().enumerate() {
        write(&plot, n, (8, 8 + 16 * i as i32), 13, texts)?;
    }
    let (_, by) = legend.get_base_pixel();
    draw_legend(&legend, p, &colors, py.start - by..py.end - by, texts)?;
    let low = ch.backend_coord(&(xr.0, yr.0));
    let high = ch.backend_coord(&(xr.1, yr.1));
    Ok(PanelLayout {
        plot: rect,
        x_px: (low.0, high.0),
        y_px: (low.1, high.1),
        x_range: xr,
        y_range: yr,
        x_log: p.x.log,
        y_log: p.y.log,
        colors: colors.iter().map(hex).collect(),
    })
}

/// Swatches and labels, one row per series and one more under a series
/// with a band (a pale swatch, "band: " and what it is); squeezed when
/// there are many.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    colors: &[RGBColor],
    rows: Range<i32>,
    texts: &mut Vec<Rect>,
) -> Result<()> {
    let mut entries: Vec<(RGBAColor, String)> = Vec::new();
    for (s, c) in p.series.iter().zip(colors) {
        entries.push((c.to_rgba(), s.label.clone()));
        if let (Some(b), false) = (&s.band_of, s.band.is_empty()) {
            entries.push((c.mix(0.18), format!("band: {}", b.name)));
        }
    }
    let n = entries.len().max(1) as i32;
    let step = ((rows.end - rows.start) / n).clamp(9, 20);
    let font = if step < 14 { 10 } else { 13 };
    let (bx, by) = area.get_base_pixel();
    for (i, (c, label)) in entries.iter().enumerate() {
        let y = rows.start + step * i as i32;
        let swatch = [(6, y + 2), (22, y + step - 4)];
        area.draw(&Rectangle::new(swatch, c.filled()))
            .map_err(err)?;
        texts.push(Rect {
            x0: bx + 6,
            y0: by + y + 2,
            x1: bx + 22,
            y1: by + y + step - 4,
        });
        write(area, label, (28, y), font, texts)?;
    }
    Ok(())
}
