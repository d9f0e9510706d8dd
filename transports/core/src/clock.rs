//! Clocks: the invariant TSC calibrated against the monotonic clock, with
//! the monotonic clock as fallback. Under sim the communicator supplies a
//! virtual clock through the same trait.

use std::time::{Duration, Instant};

use serde::Serialize;

/// A source of timestamps. `ticks` must be cheap (it stamps events).
pub trait Clock: Send + Sync {
    /// Current time in ticks.
    fn ticks(&self) -> u64;
    /// Nanoseconds per tick.
    fn ns_per_tick(&self) -> f64;
    /// Convert a tick difference to nanoseconds.
    fn to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * self.ns_per_tick()
    }
    /// Convert nanoseconds to ticks (rounded).
    #[allow(clippy::wrong_self_convention)] // the clock's rate is per instance
    fn from_ns(&self, ns: f64) -> u64 {
        (ns / self.ns_per_tick()).round().max(0.0) as u64
    }
    /// Source, resolution and call cost, for the header.
    fn info(&self) -> ClockInfo;
    /// The tick value this clock read (or would have read) at host time
    /// `t`: how a time taken elsewhere (a NIC's completion timestamp
    /// converted to the host clock) becomes one of this clock's stamps.
    /// `None` (the default, e.g. a virtual clock) where there is no such
    /// mapping; the caller then stamps with [`Clock::ticks`].
    fn ticks_at(&self, t: Instant) -> Option<u64> {
        let _ = t;
        None
    }
}

/// A linear map between two time bases, `y = y0 + (x - x0) * rate`,
/// fitted to sample pairs `(x, y)` read close together (least squares
/// over two or more samples; a nominal rate with one). Used to carry a
/// NIC's clock onto the host's and the host's onto a communicator clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeMap {
    x0: i128,
    y0: i128,
    /// Offset of the fitted line at `x0` from `y0`, in y units.
    y_off: f64,
    rate: f64,
}

impl TimeMap {
    /// The map through `(x0, y0)` with slope `rate` (y units per x unit).
    pub fn new(x0: i128, y0: i128, rate: f64) -> Option<TimeMap> {
        (rate.is_finite() && rate > 0.0).then_some(TimeMap {
            x0,
            y0,
            y_off: 0.0,
            rate,
        })
    }

    /// The least-squares line through `samples`. With one sample, or
    /// samples that all share one `x`, the slope is `nominal_rate`.
    pub fn fit(samples: &[(i128, i128)], nominal_rate: f64) -> Option<TimeMap> {
        let &(x0, y0) = samples.first()?;
        let n = samples.len() as f64;
        let d = |&(x, y): &(i128, i128)| ((x - x0) as f64, (y - y0) as f64);
        let (sx, sy) = samples
            .iter()
            .map(d)
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
        let (mx, my) = (sx / n, sy / n);
        let (sxx, sxy) = samples.iter().map(d).fold((0.0, 0.0), |(a, b), (x, y)| {
            (a + (x - mx) * (x - mx), b + (x - mx) * (y - my))
        });
        let rate = if sxx > 0.0 { sxy / sxx } else { nominal_rate };
        let mut m = TimeMap::new(x0, y0, rate)?;
        m.y_off = my - rate * mx;
        Some(m)
    }

    /// Slope in y units per x unit.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The `y` of `x` (rounded to the nearest unit).
    pub fn map(&self, x: i128) -> i128 {
        self.y0 + (self.y_off + (x - self.x0) as f64 * self.rate).round() as i128
    }
}

/// Signed nanoseconds from `anchor` to `t`.
pub fn ns_since(anchor: Instant, t: Instant) -> i128 {
    match t.checked_duration_since(anchor) {
        Some(d) => d.as_nanos() as i128,
        None => -(anchor.duration_since(t).as_nanos() as i128),
    }
}

/// What the header says about the clock.
#[derive(Clone, Debug, Serialize)]
pub struct ClockInfo {
    /// `tsc`, `monotonic` or `virtual`.
    pub source: String,
    /// Ticks per second.
    pub hz: f64,
    /// Smallest observable difference between two reads, ns.
    pub resolution_ns: f64,
    /// Mean cost of one read, ns.
    pub call_cost_ns: f64,
}

/// The cycle counter, calibrated at start.
#[derive(Debug)]
pub struct TscClock {
    ns_per_tick: f64,
    /// Host time (ns since `anchor`) to ticks, from the calibration's
    /// two (host, TSC) samples.
    host_to_ticks: Option<TimeMap>,
    anchor: Instant,
    info: ClockInfo,
}

/// `std::time::Instant` as a clock (fallback when the TSC is not invariant).
#[derive(Debug)]
pub struct MonotonicClock {
    origin: Instant,
    info: ClockInfo,
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64; it only reads the counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Whether the CPU advertises an invariant TSC (constant rate, runs in
/// every C-state), so cycle counts convert to time.
pub fn tsc_is_invariant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let flags = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .unwrap_or("");
        let has = |f: &str| flags.split_whitespace().any(|x| x == f);
        has("constant_tsc") && has("nonstop_tsc")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Measure resolution and call cost of a tick function.
///
/// The resolution is the smallest difference between two reads, unless
/// the differences (with varying work between the reads, leaving out
/// those under half a read's cost) nearly all lie within a tick of a
/// multiple of the commonest one: the counter then moves in steps of that
/// size. Under this project's hypervisor the TSC moves in steps of 26
/// ticks (10 ns), with now and then a read 1 tick past the step: the
/// smallest difference alone said 0.4 ns there, while every one-way
/// latency came in 5 ns steps.
fn characterise(ticks: &dyn Fn() -> u64, ns_per_tick: f64) -> (f64, f64) {
    const N: u64 = 20_000;
    let t0 = ticks();
    let mut last = t0;
    let mut min_step = u64::MAX;
    for _ in 0..N {
        let t = ticks();
        if t > last {
            min_step = min_step.min(t - last);
        }
        last = t;
    }
    let cost_ticks = last.saturating_sub(t0) as f64 / N as f64;
    let mut diffs = Vec::with_capacity(N as usize);
    let mut work = 0u64;
    for i in 0..N {
        let a = ticks();
        for j in 0..i % 37 {
            work = std::hint::black_box(work.wrapping_add(j));
        }
        let d = ticks().saturating_sub(a);
        if d > 0 && d as f64 >= cost_ticks / 2.0 {
            diffs.push(d);
        }
    }
    let step = stepped(&mut diffs).unwrap_or(min_step);
    let res = if step == u64::MAX {
        f64::NAN
    } else {
        step as f64 * ns_per_tick
    };
    (res, cost_ticks * ns_per_tick)
}

/// The step a counter moves by, if at least 90 % of `diffs` lie within a
/// tick of a multiple of the commonest difference (above 1).
fn stepped(diffs: &mut [u64]) -> Option<u64> {
    diffs.sort_unstable();
    let mode = diffs
        .chunk_by(|a, b| a == b)
        .max_by_key(|run| run.len())
        .map(|run| run[0])?;
    if mode < 2 {
        return None;
    }
    let near = diffs
        .iter()
        .filter(|&&d| {
            let r = d % mode;
            r <= 1 || r + 1 >= mode
        })
        .count();
    (near * 10 >= diffs.len() * 9).then_some(mode)
}

/// A TSC read and the host time it was taken at: (ns since `anchor` at
/// the middle of the tightest of 8 bracketing pairs of monotonic reads,
/// the TSC, that bracket's width in ns). A preemption between a host read
/// and the TSC read widens only its own bracket, so the pair kept is off
/// by at most half the narrowest width, whatever the schedule.
#[cfg(target_arch = "x86_64")]
fn tsc_at_host_ns(anchor: Instant) -> (i128, u64, i128) {
    let mut best = (0, 0, i128::MAX);
    for _ in 0..8 {
        let a = ns_since(anchor, Instant::now());
        let c = rdtsc();
        let b = ns_since(anchor, Instant::now());
        if b - a < best.2 {
            best = ((a + b) / 2, c, b - a);
        }
    }
    best
}

impl TscClock {
    /// Calibrate the TSC against the monotonic clock over `span` (each
    /// end a bracketed pair of reads: see `tsc_at_host_ns`).
    /// Returns `None` where the TSC is missing or not invariant.
    #[cfg(target_arch = "x86_64")]
    pub fn calibrate(span: Duration) -> Option<TscClock> {
        if !tsc_is_invariant() {
            return None;
        }
        let i0 = Instant::now();
        let (h0, c0, _) = tsc_at_host_ns(i0);
        while i0.elapsed() < span {
            std::hint::spin_loop();
        }
        let (h1, c1, _) = tsc_at_host_ns(i0);
        let ns = (h1 - h0) as f64;
        if c1 <= c0 || ns <= 0.0 {
            return None;
        }
        let ns_per_tick = ns / (c1 - c0) as f64;
        let (res, cost) = characterise(&rdtsc, ns_per_tick);
        let samples = [(h0, c0 as i128), (h1, c1 as i128)];
        Some(TscClock {
            ns_per_tick,
            host_to_ticks: TimeMap::fit(&samples, 1.0 / ns_per_tick),
            anchor: i0,
            info: ClockInfo {
                source: "tsc".into(),
                hz: 1e9 / ns_per_tick,
                resolution_ns: res,
                call_cost_ns: cost,
            },
        })
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn calibrate(_span: Duration) -> Option<TscClock> {
        None
    }
}

impl Clock for TscClock {
    #[inline]
    fn ticks(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            rdtsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            unreachable!("TscClock is only built on x86_64")
        }
    }
    fn ns_per_tick(&self) -> f64 {
        self.ns_per_tick
    }
    fn info(&self) -> ClockInfo {
        self.info.clone()
    }
    fn ticks_at(&self, t: Instant) -> Option<u64> {
        let m = self.host_to_ticks?;
        u64::try_from(m.map(ns_since(self.anchor, t))).ok()
    }
}

impl MonotonicClock {
    /// A clock counting nanoseconds from now (1 tick = 1 ns), its
    /// resolution and read cost measured at once.
    pub fn new() -> MonotonicClock {
        let origin = Instant::now();
        let f = move || origin.elapsed().as_nanos() as u64;
        let (res, cost) = characterise(&f, 1.0);
        MonotonicClock {
            origin,
            info: ClockInfo {
                source: "monotonic".into(),
                hz: 1e9,
                resolution_ns: res,
                call_cost_ns: cost,
            },
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn ticks(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
    fn ns_per_tick(&self) -> f64 {
        1.0
    }
    fn info(&self) -> ClockInfo {
        self.info.clone()
    }
    fn ticks_at(&self, t: Instant) -> Option<u64> {
        Some(t.saturating_duration_since(self.origin).as_nanos() as u64)
    }
}

/// The best real clock here: the calibrated TSC, else the monotonic clock.
pub fn best_clock() -> Box<dyn Clock> {
    match TscClock::calibrate(Duration::from_millis(50)) {
        Some(c) => Box::new(c),
        None => Box::new(MonotonicClock::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn tsc_agrees_with_monotonic() {
        let Some(c) = TscClock::calibrate(Duration::from_millis(20)) else {
            return; // no invariant TSC here: MonotonicClock is used instead
        };
        // Both ends bracketed, as the calibration's are: a preemption
        // between a host read and a TSC read widens its bracket, and the
        // widths (the narrowest of 8, nanoseconds) are allowed for, so no
        // schedule can fail this; a wrong unit can (5 % of 30 ms).
        let i0 = Instant::now();
        let (h0, t0, w0) = tsc_at_host_ns(i0);
        std::thread::sleep(Duration::from_millis(30));
        let (h1, t1, w1) = tsc_at_host_ns(i0);
        let ns_tsc = c.to_ns(t1 - t0);
        let ns_mono = (h1 - h0) as f64;
        let slack = (w0 + w1) as f64;
        assert!(
            (ns_tsc - ns_mono).abs() < 0.05 * ns_mono + slack,
            "{ns_tsc} vs {ns_mono} (brackets {w0} + {w1} ns)"
        );
        assert!(c.info().call_cost_ns > 0.0);
    }

    /// A counter that advances `step` per read, except that every fifth
    /// second read of a pair differs from the first by 1 (the artifact seen
    /// under this project's hypervisor).
    fn stepping(step: u64) -> impl Fn() -> u64 {
        let state = std::cell::Cell::new((0u64, 0u64));
        move || {
            let (base, calls) = state.get();
            let calls = calls + 1;
            let (base, v) = if calls % 10 == 0 {
                (base, base + 1)
            } else {
                (base + step, base + step)
            };
            state.set((base, calls));
            v
        }
    }

    #[test]
    fn resolution_is_the_counters_step_not_a_stray_difference() {
        let (res, cost) = characterise(&stepping(26), 10.0 / 26.0);
        assert!((res - 10.0).abs() < 1e-9, "{res}");
        assert!(cost > 5.0 && cost < 10.0, "{cost}");
        let (res, _) = characterise(&stepping(1), 1.0);
        assert!((res - 1.0).abs() < 1e-9, "{res}");
    }

    #[test]
    fn time_map_fits_offset_and_rate() {
        // Host ns -> ticks of a 2.5 GHz counter that read 1_000_000 at host
        // time 0, sampled three times with the middle sample 1 tick off.
        let s = [
            (0, 1_000_000),
            (1_000_000, 3_500_001),
            (2_000_000, 6_000_000),
        ];
        let m = TimeMap::fit(&s, 1.0).unwrap();
        assert!((m.rate() - 2.5).abs() < 1e-9, "{}", m.rate());
        assert!(m.map(0).abs_diff(1_000_000) <= 1);
        assert!(m.map(4_000_000).abs_diff(11_000_000) <= 1);
        // before the first sample
        assert!(m.map(-400).abs_diff(999_000) <= 1);
        // one sample: the nominal rate through it
        let one = TimeMap::fit(&[(10, 100)], 3.0).unwrap();
        assert_eq!(one.map(20), 130);
        assert!(TimeMap::fit(&[], 1.0).is_none());
        assert!(TimeMap::fit(&[(1, 1)], 0.0).is_none());
    }

    #[test]
    fn ticks_at_matches_ticks_for_now() {
        let m = MonotonicClock::new();
        let t = Instant::now();
        let a = m.ticks_at(t).unwrap();
        assert!(a <= m.ticks());
        if let Some(c) = TscClock::calibrate(Duration::from_millis(20)) {
            let before = c.ticks();
            let at = c.ticks_at(Instant::now()).unwrap();
            let after = c.ticks();
            // within 1 ms of the reads around it (calibration noise)
            let slack = c.from_ns(1e6);
            assert!(
                at + slack >= before && at <= after + slack,
                "{before} {at} {after}"
            );
        }
    }

    #[test]
    fn monotonic_is_nanoseconds() {
        let c = MonotonicClock::new();
        assert_eq!(c.ns_per_tick(), 1.0);
        let a = c.ticks();
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.ticks() - a >= 2_000_000);
    }
}
