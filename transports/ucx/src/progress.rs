//! `--progress thread`: the core kit's progress thread, sleeping on the
//! worker's event fd (never spinning) and driving `ucp_worker_progress`
//! when it wakes, so active messages and target-side RMA are served while
//! the rank computes.

use std::time::Duration;

use ovbench_core::fabric::progress_thread::{self, Driver, Round};
use ovbench_core::TransportError;

use crate::ffi::worker::{ThreadWorker, Worker};

/// The running thread; [`stop`](Self::stop) it before the worker goes.
pub(crate) struct ProgressThread(progress_thread::ProgressThread);

impl ProgressThread {
    /// Start the thread on `worker` (made for a progress thread).
    pub fn spawn(worker: &Worker) -> Result<ProgressThread, TransportError> {
        let w = worker.thread_handle().ok_or_else(|| {
            TransportError::Invalid("a progress thread needs a worker in multi-thread mode".into())
        })?;
        progress_thread::ProgressThread::spawn("ovbench-ucx-progress".into(), UcxDriver(w))
            .map(ProgressThread)
            .map_err(|e| TransportError::io("starting the UCX progress thread", e))
    }

    /// Stop and join the thread (before the worker is destroyed); the
    /// worker's signal wakes it from its fd at once.
    pub fn stop(self, worker: &Worker) {
        self.0.stop(|| worker.signal());
    }
}

struct UcxDriver(ThreadWorker);

impl Driver for UcxDriver {
    fn serve(&mut self) -> Result<Round, String> {
        while self.0.h.progress() {}
        // Arming fails (false) when events arrived since the last
        // progress: drive again rather than sleep past them.
        match self.0.h.arm() {
            Ok(true) => Ok(Round::Idle),
            Ok(false) => Ok(Round::Again),
            Err(e) => Err(e.to_string()),
        }
    }

    fn sleep(&mut self, max: Duration) -> Result<(), String> {
        let ms = max.as_millis().min(libc::c_int::MAX as u128) as libc::c_int;
        // A failed poll (EINTR) just serves again.
        let _ = self.0.h.wait(ms);
        Ok(())
    }
}
