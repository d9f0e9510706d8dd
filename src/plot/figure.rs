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

/// An axis: its title (with the unit), scale and where its ticks go.
#[derive(Clone, Debug)]
pub struct Axis {
    pub title: String,
    pub log: bool,
    pub ticks: Ticks,
}

/// Where an axis' ticks go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticks {
    /// Round numbers (1, 2, 5 times powers of ten on a log axis).
    Round,
    /// Powers of two, labelled as sizes (1K, 64K): message sizes.
    Pow2,
    /// At the values the data holds, nothing between: counts such as
    /// ranks, where only the measured ones mean anything.
    Data,
}

impl Axis {
    pub fn linear(title: impl Into<String>) -> Axis {
        Axis {
            title: title.into(),
            log: false,
            ticks: Ticks::Round,
        }
    }
    pub fn log(title: impl Into<String>) -> Axis {
        Axis {
            title: title.into(),
            log: true,
            ticks: Ticks::Round,
        }
    }
    /// A log axis of sizes in bytes, ticked at powers of two.
    pub fn sizes(title: impl Into<String>) -> Axis {
        Axis {
            ticks: Ticks::Pow2,
            ..Axis::log(title)
        }
    }
    /// A log axis of counts, ticked at the counts measured (4, 8, 16 ranks).
    pub fn counts(title: impl Into<String>) -> Axis {
        Axis {
            ticks: Ticks::Data,
            ..Axis::log(title)
        }
    }
    /// A linear axis of categories that are numbered (destination ranks):
    /// one tick each, no zero unless one is drawn.
    pub fn categories(title: impl Into<String>) -> Axis {
        Axis {
            ticks: Ticks::Data,
            ..Axis::linear(title)
        }
    }
}

/// Which field of a row a drawn value comes from: the value is
/// `row[pointer] / per` (`per` 1000 draws ns in µs).
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// A JSON pointer into the row, e.g. `/window_bytes_per_sec/lower`.
    pub pointer: String,
    pub per: f64,
}

impl Field {
    pub fn new(pointer: impl Into<String>, per: f64) -> Field {
        Field {
            pointer: pointer.into(),
            per,
        }
    }
    /// The drawn value of `row`'s field.
    pub fn of(&self, row: &serde_json::Value) -> Option<f64> {
        super::load::num_at(row, &self.pointer).map(|v| v / self.per)
    }
}

/// What a series' band is: an interval of the plotted quantity whose
/// ends are two fields of each row, named in the legend.
#[derive(Clone, Debug, PartialEq)]
pub struct BandOf {
    /// The legend's words for it, e.g. "p99 to p99.9".
    pub name: String,
    pub x: Field,
    pub lo: Field,
    pub hi: Field,
    /// Whether the line lies inside the band (an estimate's interval, a
    /// minimum's min..max) rather than beside it (latency's tail).
    pub brackets: bool,
}

/// A labelled line through points, with an optional band (an interval
/// per x) and marked points (e.g. logp's probed sizes).
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// (x, low, high) per point; drawn as a shaded band.
    pub band: Vec<(f64, f64, f64)>,
    /// Where the band's values come from (set with the first band point).
    pub band_of: Option<BandOf>,
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
    /// Add `row`'s band point, its values read from the fields `of` names.
    pub fn push_band(&mut self, row: &serde_json::Value, of: &BandOf) {
        self.band_of.get_or_insert_with(|| of.clone());
        if let (Some(x), Some(lo), Some(hi)) = (of.x.of(row), of.lo.of(row), of.hi.of(row)) {
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
