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

    /// This thread's user time so far, ns (getrusage RUSAGE_THREAD): a
    /// reference read apart from the code under test.
    fn thread_user_ns() -> u64 {
        let u = getrusage(UsageWho::RUSAGE_THREAD).unwrap();
        u.user_time().num_microseconds() as u64 * 1000
    }

    /// Spinning shows as the process's user time. The spin lasts until this
    /// thread has 60 ms of user CPU time, not 60 ms of wall time: on a busy
    /// 2-core machine 60 ms of wall can hold far less than 30 ms of CPU,
    /// and other tests' threads in this process add to RUSAGE_SELF, so no
    /// bound on user_pct (user against wall) holds for every schedule. What
    /// does: the process's user time holds this thread's (half of it, for
    /// the kernel's tick-sampled user/system split), and no process spends
    /// more CPU than wall time on every CPU. A swapped user/system, a
    /// missing microsecond scale or RUSAGE_CHILDREN fails.
    #[test]
    fn spinning_shows_as_user_time() {
        let a = CpuSnapshot::now();
        let t0 = thread_user_ns();
        let hang = Instant::now();
        let mut x = 0u64;
        while thread_user_ns() - t0 < 60_000_000 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            assert!(hang.elapsed().as_secs() < 120, "60 ms of CPU in 120 s");
        }
        let u = a.until(&CpuSnapshot::now());
        assert!(u.wall_ns >= 60_000_000, "{u:?}");
        assert!(u.user_ns >= 30_000_000, "{u:?}");
        let cpus = std::thread::available_parallelism().map_or(64, |n| n.get()) as u64;
        assert!(
            u.user_ns + u.sys_ns <= u.wall_ns * cpus + 10_000_000,
            "{u:?}"
        );
        assert!(u.user_pct > 0.0, "{u:?}");
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
