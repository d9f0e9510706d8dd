//! The method's rules that need no communicator, kept apart so unit tests
//! can drive them with fixed samples: base_t's filter and the stop rule,
//! the spread of the repeats, and the check for impossible figures.

use serde::Serialize;

use crate::methods::common::Verdict;

/// base_t and the stop rule of mpi_overhead, fed one `iter_t` per work
/// value. The first sample is the starting base_t; after that a sample
/// above `thresh·base_t` stops the doubling, and every sample below
/// `bthresh·base_t` joins the running mean — also after a noisy sample
/// was left out, so one spike does not end the estimate (the original's
/// "low pass filter", not a latch).
#[derive(Debug, Clone)]
pub(crate) struct BaseFilter {
    thresh: f64,
    bthresh: f64,
    started: bool,
    sum: f64,
    n: u32,
    base: f64,
}

impl BaseFilter {
    pub(crate) fn new(thresh: f64, bthresh: f64) -> BaseFilter {
        BaseFilter {
            thresh,
            bthresh,
            started: false,
            sum: 0.0,
            n: 0,
            base: 0.0,
        }
    }

    /// Take one work value's `iter_t`; true when the doubling stops here
    /// (`iter_t > thresh·base_t`, checked before the sample may join).
    pub(crate) fn offer(&mut self, iter_t: f64) -> bool {
        if !self.started {
            self.started = true;
            self.base = iter_t;
        }
        if iter_t > self.thresh * self.base {
            return true;
        }
        // deviation: base-filter-unlatched — later samples below bthresh·base_t still join, see docs/methods/overhead.md
        if iter_t < self.bthresh * self.base {
            self.sum += iter_t;
            self.n += 1;
            self.base = self.sum / f64::from(self.n);
        }
        false
    }

    /// The current base_t.
    pub(crate) fn base(&self) -> f64 {
        self.base
    }
}

/// Median and min–max of the repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Spread {
    /// Of `x` (the middle value, or the mean of the middle two).
    pub(crate) fn of(x: &[f64]) -> Spread {
        let mut v = x.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Spread::default();
        }
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            lo: v[0],
            hi: v[n - 1],
        }
    }
}

/// The repeat a row shows: the one with the median of `x` (the lower of
/// the middle two for an even count), so the row's columns come from one
/// measurement and agree with each other (a median per column need not).
pub(crate) fn median_repeat(x: &[f64]) -> usize {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]).then(a.cmp(&b)));
    order
        .get(x.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(0)
}

/// How far the repeats' overheads spread: max/min, where min is above 0.
pub(crate) fn spread_ratio(s: &Spread) -> Option<f64> {
    (s.lo > 0.0).then(|| s.hi / s.lo)
}

/// Whether the repeats disagree by more than `thresh` (max/min above it;
/// a min of 0 or less under a larger max is no ratio at all, and noisy).
pub(crate) fn noisy(s: &Spread, thresh: f64) -> bool {
    spread_ratio(s).map_or(s.hi > s.lo, |r| r > thresh)
}

/// How often the min–max of `n` independent repeats covers the true
/// median: every repeat falls on one side of it with probability 2·0.5^n.
pub fn coverage(n: usize) -> f64 {
    1.0 - 2.0 * 0.5f64.powi(n.min(1000) as i32)
}

/// What makes one measurement impossible (empty when it is possible):
/// overhead below zero, availability outside 0–100 %, or a base_t that is
/// no time at all — each with what it shows about the run.
pub(crate) fn problems(
    overhead_ns: f64,
    avail_pct: f64,
    base_ns: f64,
    work_ns: f64,
) -> Vec<String> {
    let mut p = Vec::new();
    if !(base_ns > 0.0 && base_ns.is_finite()) {
        p.push(format!("base_t {:.3} us is not a time", base_ns / 1000.0));
    }
    if !(overhead_ns >= 0.0 && overhead_ns.is_finite()) {
        p.push(format!(
            "overhead {:.3} us < 0 (the work-only loop ran slower than the messaging loop with the same work: it was stalled)",
            overhead_ns / 1000.0
        ));
    } else if avail_pct < 0.0 && work_ns < base_ns {
        p.push(format!(
            "availability {avail_pct:.1}% < 0 (work_t {:.3} us below base_t: a noisy iter_t crossed thresh*base_t before the work covered the transfer)",
            work_ns / 1000.0
        ));
    } else if !((0.0..=100.0).contains(&avail_pct)) {
        p.push(format!("availability {avail_pct:.1}% outside 0-100%"));
    }
    p
}

/// The row's verdict from its repeats' `problems` (one list per repeat,
/// after `retries` re-measurements of each impossible one).
pub(crate) fn verdict(per_repeat: &[Vec<String>], retries: u32, cause: &str) -> Verdict {
    let bad: Vec<&Vec<String>> = per_repeat.iter().filter(|p| !p.is_empty()).collect();
    Verdict::of(bad.is_empty(), || {
        format!(
            "unreliable: {} of {} repeats impossible after {retries} re-measurements ({}); likely cause: {cause}",
            bad.len(),
            per_repeat.len(),
            bad[0].join(", ")
        )
    })
}

/// The 1-minute load average (Linux), if it can be read.
pub fn load1() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The likely cause of an impossible figure, with what is known of the
/// machine: the two loops are timed apart, so anything that takes the
/// CPU from a rank in one of them (other processes, ranks sharing cores)
/// moves the difference by far more than the overhead. Under the sim
/// only its jitter on L can.
pub(crate) fn likely_cause(
    virtual_clock: bool,
    load: Option<f64>,
    cpus: usize,
    ranks: u32,
) -> String {
    if virtual_clock {
        return "the sim's jitter on L: more --iterations average it out".into();
    }
    let load = match load {
        Some(l) => format!("load average {l:.2} on {cpus} CPUs"),
        None => format!("{cpus} CPUs"),
    };
    format!(
        "timing noise from load or oversubscription ({load}, {ranks} busy-polling ranks): a rank that loses its core in one timed loop and not the other moves the difference by more than the overhead; rerun on an idle machine, one rank per core"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `samples` until the filter stops; (base_t, stopped at index).
    fn run(samples: &[f64]) -> (f64, Option<usize>) {
        let mut f = BaseFilter::new(1.5, 1.02);
        for (i, &s) in samples.iter().enumerate() {
            if f.offer(s) {
                return (f.base(), Some(i));
            }
        }
        (f.base(), None)
    }

    #[test]
    fn base_keeps_adding_samples_after_a_spike() {
        // A spike at 10.5 (above 1.02·base, below 1.5·base) is left out;
        // the two flat samples after it still join the mean, as the
        // original's low-pass filter does. A latch would give 10.05.
        let (base, stop) = run(&[10.0, 10.1, 10.5, 9.9, 10.0, 16.0]);
        assert_eq!(stop, Some(5));
        assert!((base - 10.0).abs() < 1e-12, "{base}");
    }

    #[test]
    fn base_is_the_running_mean_of_flat_samples() {
        let (base, stop) = run(&[4.0, 4.04, 4.2, 7.0]);
        // 4.04 < 1.02·4 joins; 4.2 does not; 7.0 > 1.5·4.02 stops.
        assert_eq!(stop, Some(3));
        assert!((base - 4.02).abs() < 1e-12, "{base}");
    }

    #[test]
    fn stop_is_checked_against_the_base_before_the_sample() {
        // 6.1 > 1.5·4 stops at once; it never joins base_t.
        let (base, stop) = run(&[4.0, 6.1]);
        assert_eq!((base, stop), (4.0, Some(1)));
        assert_eq!(run(&[4.0, 5.9]).1, None);
    }

    #[test]
    fn spread_is_median_and_min_max() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0, -1.0]);
        assert_eq!((s.median, s.lo, s.hi), (2.0, -1.0, 10.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!((s.median, s.lo, s.hi), (2.5, 1.0, 4.0));
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    #[test]
    fn the_row_is_the_median_repeat() {
        assert_eq!(median_repeat(&[3.0, 1.0, 2.0, 10.0, -1.0]), 2);
        // Even count: the lower middle (2.0, repeat 2), not a mean.
        assert_eq!(median_repeat(&[4.0, 1.0, 2.0, 3.0]), 2);
        // Ties keep the earlier repeat.
        assert_eq!(median_repeat(&[5.0, 5.0, 5.0]), 1);
        assert_eq!(median_repeat(&[7.0]), 0);
        assert_eq!(median_repeat(&[]), 0);
    }

    #[test]
    fn repeats_apart_by_more_than_thresh_are_noisy() {
        let s = |lo, hi| Spread { median: lo, lo, hi };
        assert!(!noisy(&s(1.0, 1.5), 1.5));
        assert!(noisy(&s(1.0, 1.51), 1.5));
        assert_eq!(spread_ratio(&s(2.0, 3.0)), Some(1.5));
        // A min of 0 under a larger max has no ratio and is noisy; all
        // equal is not.
        assert_eq!(spread_ratio(&s(0.0, 3.0)), None);
        assert!(noisy(&s(0.0, 3.0), 1.5));
        assert!(!noisy(&s(0.0, 0.0), 1.5));
    }

    #[test]
    fn coverage_of_min_max() {
        assert_eq!(coverage(5), 0.9375);
        assert_eq!(coverage(1), 0.0);
        assert_eq!(coverage(3), 0.75);
    }

    #[test]
    fn impossible_figures_are_named() {
        assert!(problems(300.0, 92.5, 4000.0, 8692.0).is_empty());
        assert!(problems(0.0, 100.0, 4000.0, 8000.0).is_empty());
        assert!(problems(4000.0, 0.0, 4000.0, 8000.0).is_empty());
        // The first run's figures: overhead -132 us at 589 %, and -205 %.
        let p = problems(-132_000.0, 589.0, 27_000.0, 200_000.0);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("-132.000 us < 0"), "{p:?}");
        let p = problems(90_000.0, -205.0, 29_000.0, 5_000.0);
        assert!(
            p.len() == 1 && p[0].contains("before the work covered"),
            "{p:?}"
        );
        let p = problems(90_000.0, -205.0, 29_000.0, 50_000.0);
        assert!(p.len() == 1 && p[0].contains("outside 0-100%"), "{p:?}");
        assert!(!problems(1.0, 101.0, 4000.0, 1.0).is_empty());
        assert!(!problems(f64::NAN, f64::NAN, 0.0, 0.0).is_empty());
    }

    #[test]
    fn one_impossible_repeat_flags_the_row() {
        let ok = verdict(&[vec![], vec![]], 3, "x");
        assert!(ok.valid());
        let v = verdict(&[vec![], vec!["overhead -1.000 us < 0".into()]], 3, "load");
        assert!(!v.valid());
        assert!(
            v.reason().contains("1 of 2") && v.reason().contains("likely cause: load"),
            "{}",
            v.reason()
        );
    }
}
