//! The progress thread of `--progress thread`, on the core kit: it reads
//! the CQ whenever the provider may have work, sleeps on the CQ's wait fd
//! otherwise (never spinning), and wakes a rank blocked in
//! [`Transport::block`](ovbench_core::Transport::block) through the
//! condition variable.

use std::os::fd::RawFd;
use std::time::Duration;

use ovbench_core::fabric::progress_thread::{Driver, ProgressThread, Round};
use ovbench_core::Rank;

use crate::endpoint::sleep_on;
use crate::transport::{lock, Shared};

/// Start the thread on `shared`'s endpoint, sleeping on `fd`.
pub(crate) fn spawn(shared: Shared, fd: RawFd, rank: Rank) -> std::io::Result<ProgressThread> {
    let name = format!("ovbench-ofi-progress-{rank}");
    ProgressThread::spawn(name, OfiDriver { shared, fd })
}

struct OfiDriver {
    shared: Shared,
    fd: RawFd,
}

impl Driver for OfiDriver {
    fn serve(&mut self) -> Result<Round, String> {
        let mut ep = lock(&self.shared);
        ep.progress(None).map_err(|e| e.to_string())?;
        // Only a blocked rank needs the futex wake-up; one that polls
        // finds the completions itself.
        if ep.waiters > 0 && ep.has_pending() {
            self.shared.1.notify_all();
        }
        if !ep.may_sleep() {
            // fi_trywait refused: the provider needs driving, not a sleep.
            return Ok(Round::Busy);
        }
        ep.watch_soon();
        Ok(Round::Idle)
    }

    fn sleep(&mut self, max: Duration) -> Result<(), String> {
        sleep_on(self.fd, max).map_err(|e| e.to_string())
    }
}
