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
    let cost = (last - t0) as f64 * ns_per_tick / N as f64;
    let res = if min_step == u64::MAX {
        f64::NAN
    } else {
        min_step as f64 * ns_per_tick
    };
    (res, cost)
}

impl TscClock {
    /// Calibrate the TSC against the monotonic clock over `span`.
    /// Returns `None` where the TSC is missing or not invariant.
    #[cfg(target_arch = "x86_64")]
    pub fn calibrate(span: Duration) -> Option<TscClock> {
        if !tsc_is_invariant() {
            return None;
        }
        let i0 = Instant::now();
        let c0 = rdtsc();
        while i0.elapsed() < span {
            std::hint::spin_loop();
        }
        let c1 = rdtsc();
        let ns = i0.elapsed().as_nanos() as f64;
        if c1 <= c0 {
            return None;
        }
        let ns_per_tick = ns / (c1 - c0) as f64;
        let (res, cost) = characterise(&rdtsc, ns_per_tick);
        Some(TscClock {
            ns_per_tick,
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
}

impl MonotonicClock {
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
    fn tsc_agrees_with_monotonic() {
        let Some(c) = TscClock::calibrate(Duration::from_millis(20)) else {
            return; // no invariant TSC here: MonotonicClock is used instead
        };
        let i0 = Instant::now();
        let t0 = c.ticks();
        std::thread::sleep(Duration::from_millis(30));
        let ns_tsc = c.to_ns(c.ticks() - t0);
        let ns_mono = i0.elapsed().as_nanos() as f64;
        // Loose: calibration over 20 ms on a noisy VM; the point is the unit.
        assert!(
            (ns_tsc / ns_mono - 1.0).abs() < 0.05,
            "{ns_tsc} vs {ns_mono}"
        );
        assert!(c.info().call_cost_ns > 0.0);
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
