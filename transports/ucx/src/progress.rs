//! `--progress thread`: a thread that sleeps on the worker's event fd
//! (never spinning) and drives `ucp_worker_progress` when it wakes, so
//! active messages and target-side RMA are served while the rank computes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use ovbench_core::{OpKind, TransportError};
use ovbench_ucx_sys as sys;

use crate::ucp::Ucp;

/// How long the thread sleeps between checks of its stop flag.
const WAKE_MS: libc::c_int = 100;

/// A worker handle that may cross to the progress thread.
struct WorkerPtr(sys::ucp_worker_h);
// SAFETY: the worker is created in UCS_THREAD_MODE_MULTI when a progress
// thread exists, so UCX serialises concurrent calls on it.
unsafe impl Send for WorkerPtr {}

pub(crate) struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl ProgressThread {
    pub fn spawn(
        worker: sys::ucp_worker_h,
        efd: libc::c_int,
    ) -> Result<ProgressThread, TransportError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let w = WorkerPtr(worker);
        let handle = std::thread::Builder::new()
            .name("ovbench-ucx-progress".into())
            .spawn(move || run(w, efd, &flag))
            .map_err(|e| TransportError::io("starting the UCX progress thread", e))?;
        Ok(ProgressThread { stop, handle })
    }

    /// Stop and join the thread (before the worker is destroyed).
    pub fn stop(self, ucp: &Ucp) {
        self.stop.store(true, Ordering::Release);
        ucp.signal();
        if self.handle.join().is_err() {
            eprintln!("ovbench: the UCX progress thread panicked during shutdown");
        }
    }
}

fn run(w: WorkerPtr, efd: libc::c_int, stop: &AtomicBool) {
    let worker = w.0;
    while !stop.load(Ordering::Acquire) {
        // SAFETY: the worker outlives this thread (joined before destroy)
        // and is in MULTI thread mode.
        while unsafe { sys::ucp_worker_progress(worker) } != 0 {}
        // SAFETY: as above.
        let st = unsafe { sys::ucp_worker_arm(worker) };
        if st == sys::UCS_ERR_BUSY {
            continue;
        }
        if st != sys::UCS_OK {
            eprintln!(
                "ovbench: UCX progress thread stops: {}",
                crate::status::local(OpKind::Poll, "ucp_worker_arm", st, "")
            );
            return;
        }
        let mut pfd = libc::pollfd {
            fd: efd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid array of one pollfd; a failed poll (EINTR)
        // just loops.
        unsafe { libc::poll(&mut pfd, 1, WAKE_MS) };
    }
}
