//! NIC completion timestamps on the host's clock.
//!
//! A device with `completion_timestamp_mask != 0` stamps completions with
//! its free-running core clock (`hca_core_clock` kHz). [`NicClock`] maps
//! those ticks onto host time: (NIC raw clock, host time) pairs are read
//! with the NIC read between two host reads (the tightest of several tries
//! wins), two such pairs a few milliseconds apart give the offset and the
//! actual rate ([`TimeMap`]; the nominal rate when only one is usable), and
//! the counter's wrap at the mask is undone around the first pair. The
//! communicator's clock then turns the host time into its own ticks
//! ([`ovbench_core::Clock::ticks_at`]).

use std::time::{Duration, Instant};

use ovbench_core::clock::{ns_since, TimeMap};

/// Host `CLOCK_MONOTONIC` in nanoseconds.
pub fn host_monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The conversion from NIC ticks to host time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NicClock {
    mask: u64,
    /// The first sample's NIC ticks (masked): the point wraps are undone around.
    ref_nic: u64,
    /// Unwrapped NIC ticks (relative to `ref_nic`) to host ns since `anchor`.
    map: TimeMap,
    anchor: Instant,
}

impl NicClock {
    /// From (NIC ticks, host ns since `anchor`) samples; `None` unless the
    /// nominal rate and mask are usable and there is a sample.
    pub fn from_samples(
        khz: u64,
        mask: u64,
        samples: &[(u64, i128)],
        anchor: Instant,
    ) -> Option<NicClock> {
        if khz == 0 || mask == 0 {
            return None;
        }
        let ref_nic = samples.first()?.0 & mask;
        let unwrapped: Vec<(i128, i128)> = samples
            .iter()
            .map(|&(nic, host)| (unwrap(mask, ref_nic, nic), host))
            .collect();
        let map = TimeMap::fit(&unwrapped, 1e6 / khz as f64)?;
        Some(NicClock {
            mask,
            ref_nic,
            map,
            anchor,
        })
    }

    /// Calibrate with `read_nic` (the NIC's raw clock) against the host
    /// clock: two samples `spacing` apart, each the tightest of eight tries.
    pub fn calibrate(
        khz: u64,
        mask: u64,
        spacing: Duration,
        mut read_nic: impl FnMut() -> Option<u64>,
    ) -> Option<NicClock> {
        let anchor = Instant::now();
        let mut sample = || -> Option<(u64, i128)> {
            let mut best: Option<(u128, u64, i128)> = None;
            for _ in 0..8 {
                let t0 = Instant::now();
                let nic = read_nic()?;
                let w = t0.elapsed().as_nanos();
                if best.map_or(true, |(bw, _, _)| w < bw) {
                    best = Some((w, nic, ns_since(anchor, t0) + (w / 2) as i128));
                }
            }
            best.map(|(_, nic, host)| (nic, host))
        };
        let first = sample()?;
        let t = Instant::now();
        while t.elapsed() < spacing {
            std::hint::spin_loop();
        }
        let samples = match sample() {
            Some(second) => vec![first, second],
            None => vec![first],
        };
        NicClock::from_samples(khz, mask, &samples, anchor)
    }

    /// NIC ticks per host nanosecond, as calibrated, in GHz.
    pub fn rate_ghz(&self) -> f64 {
        1.0 / self.map.rate()
    }

    /// Host ns (since the calibration's anchor) of NIC timestamp `ts`.
    pub fn to_host_ns(&self, ts: u64) -> i128 {
        self.map.map(unwrap(self.mask, self.ref_nic, ts))
    }

    /// The host time of NIC timestamp `ts`.
    pub fn to_instant(&self, ts: u64) -> Instant {
        let ns = self.to_host_ns(ts);
        if ns >= 0 {
            self.anchor + Duration::from_nanos(ns as u64)
        } else {
            self.anchor
                .checked_sub(Duration::from_nanos(ns.unsigned_abs() as u64))
                .unwrap_or(self.anchor)
        }
    }
}

/// `ts` relative to `ref_nic` on a counter that wraps at `mask`: up to half
/// the range before the reference counts as earlier, the rest as later.
fn unwrap(mask: u64, ref_nic: u64, ts: u64) -> i128 {
    let ts = ts & mask;
    let ahead = ts.wrapping_sub(ref_nic) & mask;
    if ahead <= mask / 2 {
        ahead as i128
    } else {
        -((ref_nic.wrapping_sub(ts) & mask) as i128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovbench_core::{clock::MonotonicClock, Clock};

    #[test]
    fn converts_ticks_at_the_nominal_rate_from_one_sample() {
        // 156.25 MHz = 156_250 kHz: 156_250 ticks are one millisecond.
        let a = Instant::now();
        let c = NicClock::from_samples(156_250, u64::MAX, &[(100_000, 5_000_000)], a).unwrap();
        assert_eq!(c.to_host_ns(100_000), 5_000_000);
        assert_eq!(c.to_host_ns(100_000 + 156_250), 6_000_000);
        assert_eq!(c.to_host_ns(100_000 + 157), 5_001_005);
        // earlier than the reference
        assert_eq!(c.to_host_ns(100_000 - 15_625), 4_900_000);
        assert_eq!(
            c.to_instant(100_000 + 156_250),
            a + Duration::from_millis(6)
        );
    }

    #[test]
    fn two_samples_correct_offset_and_rate() {
        // Nominal 1 GHz, but the NIC really runs 100 ppm fast and read
        // 7_000 at host time 2_000 ns.
        let real = |host: i128| (7_000.0 + (host - 2_000) as f64 * 1.0001).round() as u64;
        let s = [(real(2_000), 2_000), (real(1_002_000), 1_002_000)];
        let c = NicClock::from_samples(1_000_000, u64::MAX, &s, Instant::now()).unwrap();
        assert!((c.rate_ghz() - 1.0001).abs() < 1e-9, "{}", c.rate_ghz());
        for host in [0i128, 500_000, 10_000_000, 1_000_000_000] {
            assert!(c.to_host_ns(real(host)).abs_diff(host) <= 1, "{host}");
        }
    }

    #[test]
    fn handles_the_wrap_of_a_narrow_counter() {
        // a 32-bit counter at 1 GHz (1_000_000 kHz): 1 tick = 1 ns
        let mask = u32::MAX as u64;
        let c = NicClock::from_samples(1_000_000, mask, &[(mask - 10, 1_000_000)], Instant::now())
            .unwrap();
        assert_eq!(c.to_host_ns(5), 1_000_016);
        assert_eq!(c.to_host_ns(mask - 20), 999_990);
        // bits above the mask are ignored
        assert_eq!(c.to_host_ns((1 << 40) | 5), 1_000_016);
        // a second sample past the wrap still gives the 1 GHz rate
        let c = NicClock::from_samples(
            1_000_000,
            mask,
            &[(mask - 10, 0), (989, 1_000)],
            Instant::now(),
        )
        .unwrap();
        assert!((c.rate_ghz() - 1.0).abs() < 1e-12);
        assert_eq!(c.to_host_ns(1_989), 2_000);
    }

    /// NIC ticks -> host time -> the communicator clock's ticks, end to end.
    #[test]
    fn nic_ticks_become_communicator_ticks() {
        let clock = MonotonicClock::new();
        let anchor = Instant::now();
        // The NIC clock is host ns since `anchor`, times 0.5 (500 MHz), plus 42.
        let s = [(42, 0), (42 + 500_000, 1_000_000)];
        let c = NicClock::from_samples(500_000, u64::MAX, &s, anchor).unwrap();
        let base = clock.ticks_at(anchor).unwrap();
        let t = clock.ticks_at(c.to_instant(42 + 5_000)).unwrap();
        assert_eq!(t - base, 10_000);
    }

    #[test]
    fn calibration_follows_the_host_clock() {
        // A fake NIC clock that is the host clock in 1 GHz ticks, offset by 12345.
        let c = NicClock::calibrate(1_000_000, u64::MAX, Duration::from_millis(2), || {
            Some(host_monotonic_ns() + 12_345)
        })
        .unwrap();
        assert!((c.rate_ghz() - 1.0).abs() < 0.05, "{}", c.rate_ghz());
        // The NIC read maps back into the host reads that bracket it (it
        // was taken between them), within 1 ms: a preemption between the
        // reads widens the bracket instead of failing the test.
        let before = Instant::now();
        let nic = host_monotonic_ns() + 12_345;
        let after = Instant::now();
        let back = c.to_instant(nic);
        let (early, late) = (ns_since(back, before), ns_since(after, back));
        assert!(
            early < 1_000_000 && late < 1_000_000,
            "{early} ns before, {late} ns after the bracket"
        );
        assert!(NicClock::from_samples(0, u64::MAX, &[(0, 0)], after).is_none());
        assert!(NicClock::calibrate(1, 1, Duration::ZERO, || None).is_none());
    }
}
