//! The decisions of logp_mpi as pure functions, so that each is tested
//! on its own: the confidence interval that stops the repetitions, the
//! saturation test's stop rule, g(m) from round trips, and the k_max
//! extension's "g still decreasing".

use serde::Serialize;

use super::super::common::{mean, stddev, Verdict};
use crate::stats::{slope, student, Estimate};

/// The saturation test's first train, as logp_mpi.c's START_RUNS.
pub(crate) const START_RUNS: u64 = 10;
/// It never stops before this many messages…
pub(crate) const MIN_RUNS: u64 = 2 * START_RUNS;
/// …and always at this many (logp_mpi.c: 128 × the minimum).
pub(crate) const MAX_RUNS: u64 = 128 * MIN_RUNS;

/// A measured figure (ns): the mean, the interval logp_mpi reports
/// (mean ± half-width), the smallest sample and the sample count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Figure {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
    pub min: f64,
    pub samples: usize,
}

impl Figure {
    /// The figure of samples `x` at confidence `level` (see [`half_width`]).
    pub(crate) fn of(x: &[f64], level: f64) -> Figure {
        let m = mean(x);
        let h = half_width(x, level);
        Figure {
            mean: m,
            lo: m - h,
            hi: m + h,
            min: x.iter().copied().reduce(f64::min).unwrap_or(0.0),
            samples: x.len(),
        }
    }

    /// A figure known as `value` ± `half` from `samples` messages.
    pub(crate) fn around(value: f64, half: f64, samples: usize) -> Figure {
        Figure {
            mean: value,
            lo: value - half,
            hi: value + half,
            min: value,
            samples,
        }
    }

    pub fn half(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }

    /// logp_mpi.c's test for enough repetitions: the half-width at most
    /// 2·eps of the mean.
    pub(crate) fn narrow(&self, eps: f64) -> bool {
        self.half() <= 2.0 * eps * self.mean.abs()
    }
}

/// Half-width of the interval of the mean of `x`: t·s/√n with the
/// one-sided Student t quantile at `level` and n − 1 degrees of freedom.
/// One-sided because the overheads are bounded below (logp_mpi.c's
/// comment says so); the original's logp_stats.c passes the degrees of
/// freedom and the tail count to its t table in each other's places and
/// so always reads the row of 1 degree of freedom (t = 6.314 at 90 %) —
/// that is not repeated here. Zero below two samples.
pub(crate) fn half_width(x: &[f64], level: f64) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let df = (x.len() - 1) as f64;
    // deviation: t-quantile — the one-sided t of n − 1 df that logp_stats.c meant, see docs/methods/logp.md
    student::quantile(level, df) * stddev(x) / (x.len() as f64).sqrt()
}

/// One step of the saturation test: `runs` messages in a row took
/// `total` ns up to the acknowledgement; `gap` is the per-message gap
/// estimated from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SatStep {
    pub runs: u64,
    pub total: f64,
    pub gap: f64,
}

/// The per-message gap of a train of `runs` messages plus its
/// acknowledgement that took `total`, given the round trip `rtt` of one
/// message and the acknowledgement: (total − rtt)/(runs − 1).
pub(crate) fn train_gap(total: f64, rtt: f64, runs: u64) -> f64 {
    // deviation: g0-estimator — (total − RTT)/(n−1), not the send loop / n, see docs/methods/logp.md
    (total - rtt) / (runs.max(2) - 1) as f64
}

/// Relative change from `prev` to `now` (0 when both are 0).
fn change(prev: f64, now: f64) -> f64 {
    if prev == now {
        0.0
    } else {
        ((now - prev) / prev).abs()
    }
}

/// logp_mpi.c's rule for ending the saturation test after step `now`
/// (the first step never ends it): at the maximum number of messages, or
/// past the minimum with the gap changed by less than 1 % (1.5 % for
/// sizes above 64 KiB; 8 % once the train is a quarter of the maximum),
/// the round trip below eps/2 of the total, and the total about double
/// the previous one.
pub(crate) fn sat_stop(prev: SatStep, now: SatStep, rtt: f64, eps: f64, big: bool) -> bool {
    if now.runs >= MAX_RUNS {
        return true;
    }
    let max_change = if now.runs >= MAX_RUNS / 4 {
        0.08
    } else if big {
        0.015
    } else {
        0.01
    };
    now.runs >= MIN_RUNS
        && change(prev.gap, now.gap) < max_change
        && rtt / now.total < eps / 2.0
        && ((2.0 * prev.total - rtt / 2.0) / now.total).abs() < 1.0 + eps
}

/// g(m) = RTT(m) − RTT(0) + g(0), with RTT(0)'s smallest sample instead
/// of its mean when RTT(m) is not above it (as logp_mpi.c). The interval
/// combines the three half-widths in quadrature.
pub(crate) fn g_of(rtt_m: &Figure, rtt0: &Figure, g0: &Figure) -> Figure {
    let base = if rtt_m.mean > rtt0.mean {
        rtt0.mean
    } else {
        rtt0.min
    };
    let half = (rtt_m.half().powi(2) + rtt0.half().powi(2) + g0.half().powi(2)).sqrt();
    let mut g = Figure::around(rtt_m.mean - base + g0.mean, half, rtt_m.samples);
    g.min = rtt_m.min - base + g0.mean;
    g
}

/// The line through (m1, v1) and (m2, v2), at m.
pub(crate) fn extrapolate(m1: usize, v1: f64, m2: usize, v2: f64, m: usize) -> f64 {
    v2 + (v2 - v1) * (m as f64 - m2 as f64) / (m2 as f64 - m1 as f64)
}

/// How far g at size m lies below the extrapolation from the two sizes
/// before it, relative to the extrapolation; 0 when it is not below
/// (logp_mpi.c's "g decreasing": k_max is doubled while this exceeds eps).
pub(crate) fn g_decrease(p1: (usize, f64), p2: (usize, f64), at: (usize, f64)) -> f64 {
    let ext = extrapolate(p1.0, p1.1, p2.0, p2.1, at.0);
    if at.1 < ext && ext > 0.0 {
        (ext - at.1) / ext
    } else {
        0.0
    }
}

/// Relative miss of `v` against the extrapolation from two sizes before m.
pub(crate) fn miss(m1: usize, v1: f64, m2: usize, v2: f64, m: usize, v: f64) -> f64 {
    let ext = extrapolate(m1, v1, m2, v2, m);
    let scale = ext.abs().max(v.abs() * 1e-3).max(1e-9);
    (v - ext) / scale
}

/// G, the per-byte gap: the least-squares slope of g(m) over `big` (the
/// largest sizes' (m, g(m))), with its interval at `level`, and whether
/// it can be a result: a per-byte gap is positive, so G ≤ 0 (g not
/// growing with m, or falling) says the run did not resolve it, and two
/// sizes or fewer leave it without an interval or unknown.
pub(crate) fn per_byte_gap(big: &[(f64, f64)], level: f64) -> (Option<Estimate>, Verdict) {
    let e = slope::slope(big, level);
    let mut v = Verdict::default();
    match e {
        None => {
            v.check(false, || {
                format!(
                    "G is unknown: {} sizes above 0, at least 2 are needed",
                    big.len()
                )
            });
        }
        Some(e) => {
            v.check(e.point > 0.0, || {
                format!(
                    "G = {:.6} ns/byte is not positive: g(m) does not grow over the {} largest sizes, so the run did not resolve the per-byte gap",
                    e.point,
                    big.len()
                )
            });
        }
    }
    (e, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_byte_gap_that_does_not_grow_is_flagged() {
        // g(m) falling with m (a rendezvous step, noise): G < 0.
        let falling = [
            (1024.0, 900.0),
            (2048.0, 880.0),
            (4096.0, 850.0),
            (8192.0, 700.0),
        ];
        let (e, v) = per_byte_gap(&falling, 0.9);
        assert!(e.unwrap().point < 0.0);
        assert!(
            !v.valid() && v.reason().contains("not positive"),
            "{}",
            v.reason()
        );
        // Flat (the NIC's g above everything): G = 0, flagged too.
        let flat = [(1024.0, 12e3), (2048.0, 12e3), (4096.0, 12e3)];
        assert!(!per_byte_gap(&flat, 0.9).1.valid());
        // Growing by 0.1 ns/B: a result, its interval around it.
        let rising: Vec<(f64, f64)> = [1024.0, 2048.0, 4096.0, 8192.0]
            .iter()
            .map(|&m| (m, 500.0 + 0.1 * m))
            .collect();
        let (e, v) = per_byte_gap(&rising, 0.9);
        let e = e.unwrap();
        assert!(v.valid() && (e.point - 0.1).abs() < 1e-9);
        assert!(e.ci.lower <= 0.1 && 0.1 <= e.ci.upper);
        assert!(
            !per_byte_gap(&rising[..1], 0.9).1.valid(),
            "one size: unknown"
        );
    }

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} vs {b}");
    }

    #[test]
    fn half_width_uses_the_one_sided_t_of_n_minus_1_degrees() {
        // 1, 2, 3: s = 1; one-sided 90 % t with 2 df is 1.886 (the t
        // tables' 0.10 one-tailed column), so h = 1.886/√3.
        close(half_width(&[1.0, 2.0, 3.0], 0.9), 1.886 / 3f64.sqrt(), 1e-3);
        // Six samples, 5 df: 1.476; 95 %: 2.015.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let s = stddev(&x);
        close(half_width(&x, 0.9), 1.476 * s / 6f64.sqrt(), 1e-3);
        close(half_width(&x, 0.95), 2.015 * s / 6f64.sqrt(), 1e-3);
        assert_eq!(half_width(&[4.0], 0.9), 0.0);
    }

    #[test]
    fn narrow_is_half_width_within_two_eps() {
        // Mean 100, one-sided 90 % t(2) = 1.886: s = 3 gives h = 3.27 < 6.
        let f = Figure::of(&[97.0, 100.0, 103.0], 0.9);
        assert!(f.narrow(0.03), "{f:?}");
        assert_eq!(f.min, 97.0);
        // s = 6 gives h = 6.53 > 6: one more round.
        assert!(!Figure::of(&[94.0, 100.0, 106.0], 0.9).narrow(0.03));
    }

    #[test]
    fn saturation_stops_only_when_every_condition_holds() {
        let step = |runs: u64, gap: f64| SatStep {
            runs,
            total: 1000.0 + (runs - 1) as f64 * gap,
            gap,
        };
        let rtt = 1000.0;
        // Stable gap, but the round trip is still 1/3 of the total.
        assert!(!sat_stop(
            step(20, 100.0),
            step(40, 100.0),
            rtt,
            0.03,
            false
        ));
        // The round trip below 1.5 % of the total: stops.
        assert!(sat_stop(
            step(1280, 100.0),
            step(2560, 100.0),
            rtt,
            0.03,
            false
        ));
        assert!(sat_stop(
            step(640, 100.0),
            step(1280, 100.0),
            rtt,
            0.03,
            false
        ));
        // Never below the minimum of 20 messages.
        assert!(!sat_stop(step(5, 1e6), step(10, 1e6), rtt, 0.03, false));
        // A 1.2 % change ends a big size's test, not a small one's.
        let (a, b) = (step(160, 1e5), step(320, 1.012e5));
        assert!(!sat_stop(a, b, rtt, 0.03, false));
        assert!(sat_stop(a, b, rtt, 0.03, true));
        // From a quarter of the maximum, 8 %.
        assert!(sat_stop(
            step(320, 1e5),
            step(640, 1.07e5),
            rtt,
            0.03,
            false
        ));
        // At the maximum, whatever the change.
        assert!(sat_stop(step(1280, 1.0), step(2560, 9.0), rtt, 0.03, false));
        // The total must about double: one that grew by 2/3 while the
        // train doubled is no saturated pipe yet.
        let stalled = SatStep {
            runs: 640,
            total: 1e6,
            gap: 100.0,
        };
        let prev = SatStep {
            runs: 320,
            total: 0.6e6,
            gap: 100.0,
        };
        assert!(!sat_stop(prev, stalled, rtt, 0.03, false));
    }

    #[test]
    fn train_gap_counts_the_gaps_between_messages() {
        // 20 messages 500 ns apart after a 3 µs round trip.
        close(train_gap(3000.0 + 19.0 * 500.0, 3000.0, 20), 500.0, 1e-9);
    }

    #[test]
    fn g_of_round_trips_and_its_interval() {
        let rtt0 = Figure {
            mean: 1000.0,
            lo: 970.0,
            hi: 1030.0,
            min: 990.0,
            samples: 3,
        };
        let rtt_m = Figure {
            mean: 1400.0,
            lo: 1360.0,
            hi: 1440.0,
            min: 1395.0,
            samples: 3,
        };
        let g0 = Figure::around(300.0, 120.0, 640);
        let g = g_of(&rtt_m, &rtt0, &g0);
        close(g.mean, 700.0, 1e-9);
        close(
            g.half(),
            (40f64.powi(2) + 30f64.powi(2) + 120f64.powi(2)).sqrt(),
            1e-9,
        );
        // RTT(m) not above RTT(0): RTT(0)'s minimum instead of its mean.
        let low = Figure {
            mean: 995.0,
            ..rtt_m
        };
        close(g_of(&low, &rtt0, &g0).mean, 995.0 - 990.0 + 300.0, 1e-9);
    }

    #[test]
    fn k_max_extends_only_while_g_is_below_the_line() {
        // The line through (1K, 100) and (2K, 200) gives 400 at 4K.
        assert_eq!(g_decrease((1024, 100.0), (2048, 200.0), (4096, 400.0)), 0.0);
        close(
            g_decrease((1024, 100.0), (2048, 200.0), (4096, 300.0)),
            0.25,
            1e-12,
        );
        // Above the line (a jump up) is no reason to go on.
        assert_eq!(g_decrease((1024, 100.0), (2048, 200.0), (4096, 600.0)), 0.0);
    }
}
