//! Criterion-style estimates: a point value with its confidence interval
//! (criterion.rs `Estimate`), so every reported figure carries its spread.

use serde::Serialize;

use super::student;

/// The confidence level ovbench reports unless a method asks otherwise.
pub const DEFAULT_LEVEL: f64 = 0.95;

/// A confidence interval of a figure.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ConfidenceInterval {
    /// Confidence level, e.g. 0.95.
    pub level: f64,
    pub lower: f64,
    pub upper: f64,
}

impl ConfidenceInterval {
    /// Half the interval's width.
    pub fn half_width(&self) -> f64 {
        (self.upper - self.lower) / 2.0
    }
}

/// A point estimate with its interval and standard error: the one
/// estimate type of every row ([`Estimate::ser_ns`], [`Estimate::ser_mean`]
/// give its JSON forms).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub point: f64,
    pub ci: ConfidenceInterval,
    pub standard_error: f64,
}

impl Estimate {
    /// The JSON form of a mean in ns, `{"level", "lower_ns", "upper_ns"}`
    /// (the point is the row's `mean_ns`), rounded to two decimals
    /// (`#[serde(serialize_with)]` on an `Option<Estimate>`).
    pub fn ser_ns<S: serde::Serializer>(e: &Option<Estimate>, s: S) -> Result<S::Ok, S::Error> {
        Self::ser_fields(e, s, &["level", "lower_ns", "upper_ns"])
    }
    /// The JSON form of a rate, `{"mean", "level", "lower", "upper"}`.
    pub fn ser_mean<S: serde::Serializer>(e: &Option<Estimate>, s: S) -> Result<S::Ok, S::Error> {
        Self::ser_fields(e, s, &["mean", "level", "lower", "upper"])
    }
    /// The named fields of `point`, `level`, `lower` and `upper` (the
    /// names keep the column headers the CSV has always had).
    fn ser_fields<S: serde::Serializer>(
        e: &Option<Estimate>,
        s: S,
        names: &[&'static str],
    ) -> Result<S::Ok, S::Error> {
        use crate::output::round2;
        use serde::ser::SerializeMap;
        let Some(e) = e else {
            return s.serialize_none();
        };
        let mut m = s.serialize_map(Some(names.len()))?;
        for &n in names {
            let v = match n {
                "level" => e.ci.level,
                "lower" | "lower_ns" => round2(e.ci.lower),
                "upper" | "upper_ns" => round2(e.ci.upper),
                _ => round2(e.point),
            };
            m.serialize_entry(n, &v)?;
        }
        m.end()
    }
}

/// A sample of at least two finite values (the invariant a variance and
/// an interval need).
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a>(&'a [f64]);

impl<'a> Sample<'a> {
    /// `None` when there are fewer than two values or any is not finite.
    pub fn new(data: &'a [f64]) -> Option<Sample<'a>> {
        (data.len() >= 2 && data.iter().all(|x| x.is_finite())).then_some(Sample(data))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn mean(&self) -> f64 {
        self.0.iter().sum::<f64>() / self.0.len() as f64
    }
    /// Sample (n − 1) standard deviation, by Welford's update.
    pub fn std_dev(&self) -> f64 {
        let mut mean = 0.0;
        let mut m2 = 0.0;
        for (i, &x) in self.0.iter().enumerate() {
            let d = x - mean;
            mean += d / (i + 1) as f64;
            m2 += d * (x - mean);
        }
        (m2 / (self.0.len() - 1) as f64).sqrt()
    }
    /// The mean with a Student-t confidence interval at `level`: the
    /// interval of the classic methods (logp_mpi repeats until it is
    /// narrow enough).
    pub fn mean_estimate(&self, level: f64) -> Estimate {
        let n = self.0.len() as f64;
        let mean = self.mean();
        let se = self.std_dev() / n.sqrt();
        let t = student::critical(level, n - 1.0);
        Estimate {
            point: mean,
            ci: ConfidenceInterval {
                level,
                lower: mean - t * se,
                upper: mean + t * se,
            },
            standard_error: se,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_has_no_spread() {
        assert!(Sample::new(&[1.0]).is_none());
        assert!(Sample::new(&[1.0, f64::NAN]).is_none());
        assert!(Sample::new(&[1.0, 2.0]).is_some());
    }

    #[test]
    fn mean_interval_of_known_data() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample sd = sqrt(32/7).
        let d = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let s = Sample::new(&d).unwrap();
        assert_eq!(s.mean(), 5.0);
        let sd = (32.0f64 / 7.0).sqrt();
        assert!((s.std_dev() - sd).abs() < 1e-12);
        let e = s.mean_estimate(0.95);
        let se = sd / 8f64.sqrt();
        assert!((e.standard_error - se).abs() < 1e-12);
        // t(0.975, 7) = 2.3646.
        assert!((e.ci.half_width() - 2.3646 * se).abs() < 1e-3);
        assert!(e.ci.lower < 5.0 && e.ci.upper > 5.0);
        assert_eq!(e.ci.level, 0.95);
    }

    #[test]
    fn constant_data_has_zero_width() {
        let d = [3.0; 10];
        let e = Sample::new(&d).unwrap().mean_estimate(0.99);
        assert_eq!(e.ci.lower, 3.0);
        assert_eq!(e.ci.upper, 3.0);
    }
}
