//! `--progress thread`: a thread that sleeps on the worker's event fd
//! (never spinning) and drives `ucp_worker_progress` when it wakes, so
//! active messages and target-side RMA are served while the rank computes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use ovbench_core::TransportError;

use crate::ffi::worker::{ThreadWorker, Worker};

/// How long the thread sleeps between checks of its stop flag.
const WAKE_MS: libc::c_int = 100;

pub(crate) struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl ProgressThread {
    /// Start the thread on `worker` (made for a progress thread).
    pub fn spawn(worker: &Worker) -> Result<ProgressThread, TransportError> {
        let w = worker.thread_handle().ok_or_else(|| {
            TransportError::Invalid("a progress thread needs a worker in multi-thread mode".into())
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("ovbench-ucx-progress".into())
            .spawn(move || run(&w, &flag))
            .map_err(|e| TransportError::io("starting the UCX progress thread", e))?;
        Ok(ProgressThread { stop, handle })
    }

    /// Stop and join the thread (before the worker is destroyed).
    pub fn stop(self, worker: &Worker) {
        self.stop.store(true, Ordering::Release);
        worker.signal();
        if self.handle.join().is_err() {
            eprintln!("ovbench: the UCX progress thread panicked during shutdown");
        }
    }
}

fn run(worker: &ThreadWorker, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        while worker.progress() {}
        match worker.arm() {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) => {
                eprintln!("ovbench: UCX progress thread stops: {e}");
                return;
            }
        }
        // A failed poll (EINTR) just loops.
        let _ = worker.wait(WAKE_MS);
    }
}
