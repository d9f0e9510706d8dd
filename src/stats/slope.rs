//! The least-squares slope of a line through points, with its interval:
//! ordinary least squares, the slope's standard error from the residuals
//! (n − 2 degrees of freedom) and a two-sided Student-t interval.

use super::{student, ConfidenceInterval, Estimate};

/// The slope of the least-squares line through `pts` (x, y) with its
/// interval at `level`; `None` below two points or when every x is the
/// same. With two points the line goes through both: the interval is
/// unknown (infinite).
pub fn slope(pts: &[(f64, f64)], level: f64) -> Option<Estimate> {
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let b = sxy / sxx;
    let (half, se) = if pts.len() > 2 {
        let a = my - b * mx;
        let sse: f64 = pts.iter().map(|p| (p.1 - a - b * p.0).powi(2)).sum();
        let se = (sse / (n - 2.0) / sxx).sqrt();
        (student::critical(level, n - 2.0) * se, se)
    } else {
        (f64::INFINITY, f64::INFINITY)
    };
    Some(Estimate {
        point: b,
        ci: ConfidenceInterval {
            level,
            lower: b - half,
            upper: b + half,
        },
        standard_error: se,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straight_line_has_its_slope_and_no_spread() {
        let e = slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)], 0.9).unwrap();
        assert!((e.point - 2.0).abs() < 1e-12);
        assert!(e.ci.half_width() < 1e-9);
    }

    #[test]
    fn scatter_widens_the_interval_by_the_t_of_n_minus_2() {
        // y = x + (+1, -1, -1, +1): Sxx = 5, Sxy = 5, so b = 1, a = 0;
        // residuals ±1: SSE = 4, se = sqrt(4 / 2 / 5) = 0.6325;
        // t(0.975, 2) = 4.303.
        let pts = [(0.0, 1.0), (1.0, 0.0), (2.0, 1.0), (3.0, 4.0)];
        let e = slope(&pts, 0.95).unwrap();
        assert!((e.point - 1.0).abs() < 1e-12);
        assert!((e.standard_error - 0.6325).abs() < 1e-3);
        assert!((e.ci.half_width() - 4.303 * 0.6325).abs() < 1e-2);
        assert!(slope(&[(1.0, 2.0)], 0.9).is_none());
        assert!(slope(&[(1.0, 2.0), (1.0, 3.0)], 0.9).is_none());
        assert!(slope(&[(1.0, 2.0), (2.0, 3.0)], 0.9)
            .unwrap()
            .ci
            .half_width()
            .is_infinite());
    }
}
