//! The per-size summary of a latency sample: the percentiles users of
//! perftest (t_typical, 99 %, 99.9 %) and OSU expect, from an HDR
//! histogram built after the timed loop.

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{Estimate, Sample};

/// Picoseconds per histogram unit: values are recorded in ps so sub-µs
/// latencies keep three significant digits.
const PS_PER_NS: f64 = 1000.0;

/// Percentiles, moments and the mean's interval of a sample, in ns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub samples: u64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    pub stddev: f64,
    /// The mean with its Student-t interval (absent below two samples),
    /// its lower bound never below 0: the values are times.
    pub mean_ci: Option<Estimate>,
    /// The t interval reached below 0 (a small, skewed sample) and was
    /// cut there.
    pub ci_clamped: bool,
}

impl Summary {
    /// Summarise `values_ns` (nanoseconds, finite, non-negative). Min,
    /// max, mean and stddev are exact; percentiles come from an HDR
    /// histogram with 3 significant digits (relative error ≤ 0.1 %),
    /// each the highest value equivalent to the quantile's bucket.
    /// Returns `None` for an empty sample.
    pub fn of(values_ns: &[f64], level: f64) -> Option<Summary> {
        if values_ns.is_empty() {
            return None;
        }
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        h.auto(true);
        let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
        for &v in values_ns {
            let v = v.max(0.0);
            min = min.min(v);
            max = max.max(v);
            sum += v;
            h.record((v * PS_PER_NS).round() as u64)
                .expect("auto-resizing histogram accepts any u64");
        }
        let n = values_ns.len();
        let q = |p: f64| (h.value_at_quantile(p) as f64 / PS_PER_NS).clamp(min, max);
        let sample = Sample::new(values_ns);
        let mut mean_ci = sample.map(|s| s.mean_estimate(level));
        let ci_clamped = mean_ci.is_some_and(|e| e.ci.lower < 0.0);
        if let Some(e) = mean_ci.as_mut() {
            e.ci.lower = e.ci.lower.max(0.0);
        }
        Some(Summary {
            samples: n as u64,
            min,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            max,
            mean: sum / n as f64,
            stddev: sample.map_or(0.0, |s| s.std_dev()),
            mean_ci,
            ci_clamped,
        })
    }

    /// Whether the sample supports quantile `p` as a figure of its own:
    /// at least 1 / (1 − p) values (p99.9 needs 1000; below that it is
    /// simply the maximum, or next to it).
    pub fn supports(&self, p: f64) -> bool {
        self.samples as f64 * (1.0 - p) >= 1.0 - 1e-9
    }

    /// Quantile `p`'s value `v` where the sample supports it.
    pub fn supported(&self, p: f64, v: f64) -> Option<f64> {
        self.supports(p).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_one_to_thousand() {
        let v: Vec<f64> = (1..=1000).map(|x| x as f64).collect();
        let s = Summary::of(&v, 0.95).unwrap();
        assert_eq!(s.samples, 1000);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 1000.0);
        assert_eq!(s.mean, 500.5);
        let within = |got: f64, want: f64| (got / want - 1.0).abs() <= 0.001 + 1e-9;
        assert!(within(s.p50, 500.0), "{}", s.p50);
        assert!(within(s.p90, 900.0), "{}", s.p90);
        assert!(within(s.p99, 990.0), "{}", s.p99);
        assert!(within(s.p999, 999.0), "{}", s.p999);
        // Population of 1..=n has sample variance n(n+1)/12.
        assert!((s.stddev - (1000.0 * 1001.0 / 12.0f64).sqrt()).abs() < 1e-9);
        let ci = s.mean_ci.unwrap().ci;
        assert!(ci.lower < 500.5 && ci.upper > 500.5 && ci.upper - ci.lower < 40.0);
    }

    #[test]
    fn sub_nanosecond_resolution_and_outlier() {
        let mut v = vec![250.5; 999];
        v.push(1e6);
        let s = Summary::of(&v, 0.95).unwrap();
        assert!((s.p50 - 250.5).abs() < 0.3, "{}", s.p50);
        assert!((s.p99 - 250.5).abs() < 0.3);
        assert_eq!(s.max, 1e6);
        assert!(s.mean > 1000.0);
    }

    #[test]
    fn percentiles_need_their_samples_and_the_interval_stays_at_0_or_above() {
        let v: Vec<f64> = (0..200)
            .map(|i| if i % 50 == 0 { 1e5 } else { 10.0 })
            .collect();
        let s = Summary::of(&v, 0.95).unwrap();
        assert!(s.supports(0.99) && !s.supports(0.999));
        assert!(Summary::of(&vec![1.0; 1000], 0.95).unwrap().supports(0.999));
        assert!(!Summary::of(&vec![1.0; 999], 0.95).unwrap().supports(0.999));
        // Two values far apart: the t interval reaches below 0.
        let s = Summary::of(&[1.0, 30_000.0], 0.95).unwrap();
        assert!(s.ci_clamped);
        assert_eq!(s.mean_ci.unwrap().ci.lower, 0.0);
    }

    #[test]
    fn single_and_empty() {
        assert!(Summary::of(&[], 0.95).is_none());
        let s = Summary::of(&[42.0], 0.95).unwrap();
        assert_eq!((s.min, s.p50, s.max, s.stddev), (42.0, 42.0, 42.0, 0.0));
        assert!(s.mean_ci.is_none());
    }
}
