//! The progress thread of `Progress::Thread`: it sleeps in `epoll_wait`
//! (never spins) on every peer socket, serves what arrives under the
//! engine's lock, and wakes sleepers of `wait_fd` when completions are
//! queued.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use nix::sys::epoll::{Epoll, EpollEvent};

use crate::engine::Engine;

/// epoll data value of the wake-up socket.
pub const WAKE_TOKEN: u64 = u64::MAX;

/// State shared by the application and the progress thread.
pub struct Shared {
    pub engine: Mutex<Engine>,
    pub stop: AtomicBool,
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

/// Start the thread. `wake` is read when the transport is dropped;
/// `notify` is written when completions wait for `poll`.
pub fn spawn(
    shared: Arc<Shared>,
    epoll: Arc<Epoll>,
    mut wake: UnixStream,
    mut notify: UnixStream,
    rank: u32,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("ovbench-tcp-progress-{rank}"))
        .spawn(move || {
            let mut events = [EpollEvent::empty(); 64];
            while !shared.stop.load(Ordering::Acquire) {
                let n = match epoll.wait(&mut events, 1000u16) {
                    Ok(n) => n,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => break,
                };
                if n == 0 {
                    continue;
                }
                if events[..n].iter().any(|e| e.data() == WAKE_TOKEN) {
                    let mut sink = [0u8; 64];
                    let _ = wake.read(&mut sink);
                    continue;
                }
                let mut g = shared.lock();
                g.progress_all();
                let ready = !g.done.is_empty();
                drop(g);
                if ready && !shared.notified.swap(true, Ordering::AcqRel) {
                    let _ = notify.write(&[1]);
                }
            }
        })
}
