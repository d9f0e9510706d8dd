//! NIC completion timestamps on the host's clock.
//!
//! A device with `completion_timestamp_mask != 0` stamps completions with
//! its free-running core clock (`hca_core_clock` kHz). [`NicClock`] maps
//! those ticks onto `CLOCK_MONOTONIC` nanoseconds from a reference pair
//! (NIC raw clock read between two host reads; the tightest of several
//! tries wins), handling the counter's wrap at the mask.

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

/// The conversion from NIC ticks to host nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicClock {
    khz: u64,
    mask: u64,
    ref_nic: u64,
    ref_host_ns: u64,
}

impl NicClock {
    /// `None` unless the clock rate and mask are usable.
    pub fn new(khz: u64, mask: u64, ref_nic: u64, ref_host_ns: u64) -> Option<NicClock> {
        (khz > 0 && mask > 0).then_some(NicClock {
            khz,
            mask,
            ref_nic: ref_nic & mask,
            ref_host_ns,
        })
    }

    /// Calibrate with `read_nic` (the NIC's raw clock) against the host
    /// clock: eight tries, keeping the one with the shortest host window.
    pub fn calibrate(
        khz: u64,
        mask: u64,
        mut read_nic: impl FnMut() -> Option<u64>,
    ) -> Option<NicClock> {
        let mut best: Option<(u64, u64, u64)> = None;
        for _ in 0..8 {
            let t0 = host_monotonic_ns();
            let nic = read_nic()?;
            let t1 = host_monotonic_ns();
            let w = t1.saturating_sub(t0);
            if best.map_or(true, |(bw, _, _)| w < bw) {
                best = Some((w, nic, t0 + w / 2));
            }
        }
        let (_, nic, host) = best?;
        NicClock::new(khz, mask, nic, host)
    }

    /// Ticks to nanoseconds.
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        ((ticks as u128 * 1_000_000) / self.khz as u128) as u64
    }

    /// The host time of NIC timestamp `ts`. Stamps up to half the counter
    /// range before the reference are taken as earlier, the rest as later.
    pub fn to_host_ns(&self, ts: u64) -> u64 {
        let ts = ts & self.mask;
        let ahead = ts.wrapping_sub(self.ref_nic) & self.mask;
        if ahead <= self.mask / 2 {
            self.ref_host_ns + self.ticks_to_ns(ahead)
        } else {
            let behind = self.ref_nic.wrapping_sub(ts) & self.mask;
            self.ref_host_ns.saturating_sub(self.ticks_to_ns(behind))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_ticks_at_the_core_clock_rate() {
        // 156.25 MHz = 156_250 kHz: 156_250 ticks are one millisecond.
        let c = NicClock::new(156_250, u64::MAX, 100_000, 5_000_000).unwrap();
        assert_eq!(c.to_host_ns(100_000), 5_000_000);
        assert_eq!(c.to_host_ns(100_000 + 156_250), 6_000_000);
        assert_eq!(c.to_host_ns(100_000 + 157), 5_001_004);
        // earlier than the reference
        assert_eq!(c.to_host_ns(100_000 - 15_625), 4_900_000);
    }

    #[test]
    fn handles_the_wrap_of_a_narrow_counter() {
        // a 32-bit counter at 1 GHz (1_000_000 kHz): 1 tick = 1 ns
        let mask = u32::MAX as u64;
        let c = NicClock::new(1_000_000, mask, mask - 10, 1_000_000).unwrap();
        assert_eq!(c.to_host_ns(5), 1_000_016);
        assert_eq!(c.to_host_ns(mask - 20), 999_990);
        // bits above the mask are ignored
        assert_eq!(c.to_host_ns((1 << 40) | 5), 1_000_016);
    }

    #[test]
    fn calibration_follows_the_host_clock() {
        // A fake NIC clock that is the host clock in 1 GHz ticks, offset by 12345.
        let c = NicClock::calibrate(1_000_000, u64::MAX, || Some(host_monotonic_ns() + 12_345))
            .unwrap();
        let now = host_monotonic_ns();
        let back = c.to_host_ns(now + 12_345);
        assert!(back.abs_diff(now) < 1_000_000, "{back} vs {now}");
        assert!(NicClock::new(0, u64::MAX, 0, 0).is_none());
        assert!(NicClock::calibrate(1, 1, || None).is_none());
    }
}
