//! An axis' mapping of values to pixels (linear or logarithmic), the span
//! it covers and where its ticks go, with their labels.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

use super::figure::{Axis, Ticks};

/// One axis's mapping of values to pixels, linear or logarithmic, with
/// its tick positions (plotters' own log axis labels only powers of ten).
#[derive(Clone, Debug)]
pub struct Scale {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
    pub ticks: Vec<f64>,
}

impl Scale {
    /// The scale of `axis` for values from `lo` to `hi` (those in `data`
    /// where the ticks go at the data), keeping `pad` of its length clear
    /// at either end so that marks at the extremes stay inside.
    pub fn of(axis: &Axis, (lo, hi): (f64, f64), data: &[f64], pad: f64) -> Scale {
        let (lo, hi) = span(lo, hi, axis, pad);
        let ticks = match axis.ticks {
            Ticks::Data => at_data(data, (lo, hi)),
            t => ticks((lo, hi), axis.log, t == Ticks::Pow2),
        };
        Scale {
            lo,
            hi,
            log: axis.log,
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
        let f = if f.is_finite() { f } else { 0.0 };
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

/// The axis span for values from `lo` to `hi`: `pad` of the length
/// clear at each end (at least a 5 % margin, ×1.25 on a log axis); a
/// linear axis of non-negative values reaches down to 0 (and a margin
/// below it, for marks at 0); categories get half a step either side.
pub fn span(lo: f64, hi: f64, axis: &Axis, pad: f64) -> (f64, f64) {
    let pad = pad.clamp(0.0, 0.3);
    if axis.log {
        let (l0, l1) = (lo.log10(), hi.log10());
        let (l0, l1) = if l0 == l1 {
            (l0 - 2f64.log10(), l1 + 2f64.log10())
        } else {
            (l0, l1)
        };
        let m = ((l1 - l0) * pad / (1.0 - 2.0 * pad)).max(1.25f64.log10());
        return (10f64.powf(l0 - m), 10f64.powf(l1 + m));
    }
    let categories = axis.ticks == Ticks::Data;
    let lo = if lo >= 0.0 && !categories { 0.0 } else { lo };
    let (lo, hi) = if lo == hi {
        (lo - 1.0, hi + 1.0)
    } else {
        (lo, hi)
    };
    let least = if categories { 0.5 } else { (hi - lo) * 0.05 };
    let m = ((hi - lo) * pad / (1.0 - 2.0 * pad)).max(least);
    (lo - m, hi + m)
}

/// Ticks at the distinct values of `data` inside `span`, thinned to 16.
fn at_data(data: &[f64], (lo, hi): (f64, f64)) -> Vec<f64> {
    let mut v: Vec<f64> = data
        .iter()
        .copied()
        .filter(|x| *x >= lo && *x <= hi)
        .collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    let every = v.len().div_ceil(16).max(1);
    v.into_iter().step_by(every).collect()
}

/// Tick positions in `span`: on a size axis powers of two, on another
/// log axis 1, 2 and 5 times powers of ten, on a linear axis a round step;
/// thinned to about ten.
pub fn ticks(span: (f64, f64), log: bool, bytes: bool) -> Vec<f64> {
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
pub fn tick(v: f64, bytes: bool) -> String {
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
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    // "-0" from a tick a rounding step below zero.
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn spans_pad_and_reach_zero() {
        let lin = Axis::linear("x");
        let (lo, hi) = span(2.0, 10.0, &lin, 0.0);
        assert!(lo < 0.0 && lo > -1.0 && hi > 10.0, "{lo} {hi}");
        let log = Axis::log("y");
        let (lo, hi) = span(10.0, 1000.0, &log, 0.0);
        assert!(lo < 10.0 && hi > 1000.0);
        let (lo, hi) = span(5.0, 5.0, &log, 0.0);
        assert!(lo < 5.0 && hi > 5.0);
        // A pad of a tenth keeps a tenth clear at each end.
        let (lo, hi) = span(10.0, 1e5, &log, 0.1);
        let f = Scale::fraction(lo, hi, true, 10.0);
        assert!((f - 0.1).abs() < 1e-9, "{f}");
    }

    #[test]
    fn counts_tick_at_the_data_and_categories_do_not_start_at_zero() {
        let ranks = Axis::counts("ranks");
        let s = Scale::of(&ranks, (4.0, 16.0), &[4.0, 8.0, 16.0, 8.0], 0.05);
        assert!(s.log && s.lo < 4.0 && s.hi > 16.0);
        assert_eq!(s.ticks, vec![4.0, 8.0, 16.0]);
        let dest = Axis::categories("destination rank");
        let s = Scale::of(&dest, (1.0, 3.0), &[1.0, 2.0, 3.0], 0.0);
        assert!(!s.log && s.lo == 0.5 && s.hi == 3.5, "{s:?}");
        assert_eq!(s.ticks, vec![1.0, 2.0, 3.0]);
    }
}
