//! The progress thread of `Progress::Thread`, on the core kit: it sleeps
//! in `epoll_wait` (never spins) on every peer socket, serves what arrives
//! under the engine's lock, and wakes sleepers of `wait_fd` when
//! completions are queued.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::epoll::{Epoll, EpollEvent};
use ovbench_core::fabric::progress_thread::{Driver, ProgressThread, Round};

use crate::engine::Engine;

/// epoll data value of the wake-up socket.
pub const WAKE_TOKEN: u64 = u64::MAX;

/// State shared by the application and the progress thread.
pub struct Shared {
    pub engine: Mutex<Engine>,
    /// Set when the thread wrote to the notify socket and nobody drained it.
    pub notified: AtomicBool,
}

impl Shared {
    /// The engine, even if a panicking holder poisoned the lock (the
    /// engine's invariants hold between calls).
    pub fn lock(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Start the thread. `wake` is read when the transport stops it (the
/// other end is written by the stop's wake-up); `notify` is written when
/// completions wait for `poll`.
pub fn spawn(
    shared: Arc<Shared>,
    epoll: Arc<Epoll>,
    wake: UnixStream,
    notify: UnixStream,
    rank: u32,
) -> std::io::Result<ProgressThread> {
    let driver = TcpDriver {
        shared,
        epoll,
        wake,
        notify,
        readable: false,
    };
    ProgressThread::spawn(format!("ovbench-tcp-progress-{rank}"), driver)
}

struct TcpDriver {
    shared: Arc<Shared>,
    epoll: Arc<Epoll>,
    wake: UnixStream,
    notify: UnixStream,
    /// The last sleep ended on a peer socket (not a timeout or a stop).
    readable: bool,
}

impl Driver for TcpDriver {
    fn serve(&mut self) -> Result<Round, String> {
        // Only a socket event is worth the engine's lock.
        if !std::mem::take(&mut self.readable) {
            return Ok(Round::Idle);
        }
        let mut g = self.shared.lock();
        g.progress_all();
        let ready = !g.done.is_empty();
        drop(g);
        if ready && !self.shared.notified.swap(true, Ordering::AcqRel) {
            let _ = self.notify.write(&[1]);
        }
        // epoll is level-triggered: what is left wakes the sleep at once.
        Ok(Round::Idle)
    }

    fn sleep(&mut self, max: Duration) -> Result<(), String> {
        let mut events = [EpollEvent::empty(); 64];
        let ms = max.as_millis().min(u128::from(u16::MAX)) as u16;
        let n = match self.epoll.wait(&mut events, ms) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => return Ok(()),
            Err(e) => return Err(format!("waiting on the TCP sockets: {e}")),
        };
        if events[..n].iter().any(|e| e.data() == WAKE_TOKEN) {
            // A stop: drain it and let the loop see the flag.
            let mut sink = [0u8; 64];
            let _ = self.wake.read(&mut sink);
            return Ok(());
        }
        self.readable = n > 0;
        Ok(())
    }
}
