//! CPU use per rank: user and system time against wall time, as qperf
//! reports it (getrusage of the whole process, so a progress thread's
//! time counts too).

use std::time::Instant;

use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeValLike;
use serde::{Deserialize, Serialize};

/// A point in time with the process's CPU times so far.
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    at: Instant,
    user_ns: u64,
    sys_ns: u64,
}

/// CPU use over an interval, as percentages of its wall time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct CpuUse {
    pub wall_ns: u64,
    pub user_ns: u64,
    pub sys_ns: u64,
    pub user_pct: f64,
    pub sys_pct: f64,
}

impl CpuSnapshot {
    /// Now. getrusage cannot fail for RUSAGE_SELF; if it ever did the
    /// times read as zero rather than stopping a measurement.
    pub fn now() -> CpuSnapshot {
        let (user_ns, sys_ns) = match getrusage(UsageWho::RUSAGE_SELF) {
            Ok(u) => (
                u.user_time().num_microseconds().max(0) as u64 * 1000,
                u.system_time().num_microseconds().max(0) as u64 * 1000,
            ),
            Err(_) => (0, 0),
        };
        CpuSnapshot {
            at: Instant::now(),
            user_ns,
            sys_ns,
        }
    }
    /// Use between `self` and a later snapshot.
    pub fn until(&self, later: &CpuSnapshot) -> CpuUse {
        let wall_ns = later.at.duration_since(self.at).as_nanos() as u64;
        let user_ns = later.user_ns.saturating_sub(self.user_ns);
        let sys_ns = later.sys_ns.saturating_sub(self.sys_ns);
        CpuUse::new(wall_ns, user_ns, sys_ns)
    }
}

impl CpuUse {
    pub fn new(wall_ns: u64, user_ns: u64, sys_ns: u64) -> CpuUse {
        let pct = |x: u64| {
            if wall_ns == 0 {
                0.0
            } else {
                100.0 * x as f64 / wall_ns as f64
            }
        };
        CpuUse {
            wall_ns,
            user_ns,
            sys_ns,
            user_pct: pct(user_ns),
            sys_pct: pct(sys_ns),
        }
    }
    /// Sum of two intervals' use.
    pub fn add(&self, other: &CpuUse) -> CpuUse {
        CpuUse::new(
            self.wall_ns + other.wall_ns,
            self.user_ns + other.user_ns,
            self.sys_ns + other.sys_ns,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_shows_as_user_time() {
        let a = CpuSnapshot::now();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 60 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let u = a.until(&CpuSnapshot::now());
        assert!(u.wall_ns >= 60_000_000);
        // A busy loop is mostly user time (loose: shared 2-core machine).
        assert!(u.user_pct > 30.0 && u.user_pct <= 110.0, "{u:?}");
    }

    #[test]
    fn percentages() {
        let u = CpuUse::new(1000, 500, 250);
        assert_eq!((u.user_pct, u.sys_pct), (50.0, 25.0));
        let s = u.add(&CpuUse::new(1000, 1000, 0));
        assert_eq!(s.user_pct, 75.0);
        assert_eq!(CpuUse::new(0, 5, 5).user_pct, 0.0);
    }
}
