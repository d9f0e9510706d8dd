//! What a figure shows, apart from how it is drawn: panels with axes
//! (title with unit, linear or log), series of points, interval bands and
//! marked points. The figure kinds build these from the JSON; the
//! renderer draws them; the tests compare them with the JSON and with
//! what the SVG holds.

/// One figure: a title over panels stacked top to bottom.
#[derive(Clone, Debug)]
pub struct Figure {
    pub title: String,
    pub panels: Vec<Panel>,
}

/// One chart.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Lines of text written in the panel's corner (L and G, notes).
    pub notes: Vec<String>,
}

/// An axis: its title (with the unit) and scale.
#[derive(Clone, Debug)]
pub struct Axis {
    pub title: String,
    pub log: bool,
}

impl Axis {
    pub fn linear(title: impl Into<String>) -> Axis {
        Axis {
            title: title.into(),
            log: false,
        }
    }
    pub fn log(title: impl Into<String>) -> Axis {
        Axis {
            title: title.into(),
            log: true,
        }
    }
}

/// A labelled line through points, with an optional band (an interval
/// per x) and marked points (e.g. logp's probed sizes).
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// (x, low, high) per point; drawn as a shaded band.
    pub band: Vec<(f64, f64, f64)>,
    /// Points drawn as circles on the line.
    pub marked: Vec<(f64, f64)>,
    /// Drawn dashed-looking (thin), e.g. a minimum under a median.
    pub thin: bool,
}

impl Series {
    pub fn new(label: impl Into<String>) -> Series {
        Series {
            label: label.into(),
            ..Series::default()
        }
    }
    /// Add a point, leaving out those a log axis cannot show.
    pub fn push(&mut self, x: Option<f64>, y: Option<f64>) {
        if let (Some(x), Some(y)) = (x, y) {
            if x.is_finite() && y.is_finite() {
                self.points.push((x, y));
            }
        }
    }
    pub fn push_band(&mut self, x: Option<f64>, lo: Option<f64>, hi: Option<f64>) {
        if let (Some(x), Some(lo), Some(hi)) = (x, lo, hi) {
            if x.is_finite() && lo.is_finite() && hi.is_finite() {
                self.band.push((x, lo.min(hi), hi.max(lo)));
            }
        }
    }
}

impl Panel {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Panel {
        Panel {
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Leave out what the axes cannot show (zero or negative values on a
    /// log axis), series left empty, and say so in a note; order each
    /// series' points by x.
    pub fn drop_unplottable(&mut self) {
        let (xl, yl) = (self.x.log, self.y.log);
        let ok = |v: f64, log: bool| !log || v > 0.0;
        let mut dropped = 0usize;
        for s in &mut self.series {
            let before = s.points.len();
            s.points.retain(|&(x, y)| ok(x, xl) && ok(y, yl));
            dropped += before - s.points.len();
            s.band.retain(|&(x, lo, _)| ok(x, xl) && ok(lo, yl));
            s.marked.retain(|&(x, y)| ok(x, xl) && ok(y, yl));
            // A line runs left to right (logp's probed sizes come last).
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        self.series.retain(|s| !s.points.is_empty());
        if dropped > 0 {
            self.notes
                .push(format!("{dropped} point(s) at 0 left out (log axis)"));
        }
    }

    /// The smallest and largest x and y of all series and bands.
    pub fn extent(&self) -> Option<((f64, f64), (f64, f64))> {
        let xs = self.series.iter().flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.0)
                .chain(s.band.iter().map(|b| b.0))
        });
        let ys = self.series.iter().flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.band.iter().flat_map(|b| [b.1, b.2]))
        });
        Some((min_max(xs)?, min_max(ys)?))
    }
}

fn min_max(v: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    v.fold(None, |acc, x| match acc {
        None => Some((x, x)),
        Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axes_drop_zeros_and_say_so() {
        let mut p = Panel::new("t", Axis::log("size [B]"), Axis::linear("x"));
        let mut s = Series::new("a");
        s.push(Some(0.0), Some(1.0));
        s.push(Some(8.0), Some(2.0));
        s.push(Some(16.0), None);
        p.series.push(s);
        p.drop_unplottable();
        assert_eq!(p.series[0].points, vec![(8.0, 2.0)]);
        assert!(p.notes[0].contains("1 point"));
        assert_eq!(p.extent(), Some(((8.0, 8.0), (2.0, 2.0))));
    }
}
