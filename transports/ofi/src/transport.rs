//! [`OfiTransport`]: one libfabric [`Endpoint`], driven by the caller's
//! polls (`--progress poll`) or also by a progress thread
//! (`--progress thread`).
//!
//! The thread sleeps on the completion queue's wait fd (never spinning),
//! and when woken reads the CQ exactly as `poll` does — which is what
//! makes tcp;ofi_rxm and shm serve arrivals and one-sided requests while
//! the rank computes. The endpoint then sits behind a mutex (libfabric's
//! domain is opened `FI_THREAD_DOMAIN`, so every call is serialised by it)
//! and a condition variable wakes a rank blocked in [`Transport::block`].
//! With polling only there is no mutex at all.

use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ovbench_core::fabric::progress_thread::ProgressThread;
use ovbench_core::{
    Arrivals, Completion, Ctx, Idle, LocalSlice, MrHandle, Msg, Posted, Progress, Rank, RegionId,
    Registered, RmaOp, TagRecv, TagSend, Tagged, Transport, TransportError, TransportInfo, Waited,
};

use crate::endpoint::Endpoint;
use crate::progress;
use crate::OfiOptions;

/// The endpoint and the condition variable signalled when it has
/// completions for the rank.
pub(crate) type Shared = Arc<(Mutex<Endpoint>, Condvar)>;

enum Mode {
    Poll(Box<Endpoint>),
    Thread {
        shared: Shared,
        handle: Option<ProgressThread>,
    },
}

/// The libfabric transport. See the crate docs for the mapping.
pub struct OfiTransport {
    mode: Mode,
}

pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, Endpoint> {
    // A panic on the progress thread leaves consistent queues behind.
    shared.0.lock().unwrap_or_else(|p| p.into_inner())
}

/// `f` on the endpoint under the progress thread's lock.
#[cold]
#[inline(never)]
fn with_locked<R>(shared: &Shared, f: impl FnOnce(&mut Endpoint) -> R) -> R {
    f(&mut lock(shared))
}

impl OfiTransport {
    /// Open the provider for `rank` of `size`. Connect with
    /// [`Transport::connect`] after exchanging [`Transport::address`].
    pub fn new(rank: Rank, size: u32, opts: OfiOptions) -> Result<OfiTransport, TransportError> {
        let thread = opts.progress == Progress::Thread;
        let ep = Endpoint::new(rank, size, opts)?;
        if !thread {
            return Ok(OfiTransport {
                mode: Mode::Poll(Box::new(ep)),
            });
        }
        let Some(fd) = ep.fabric.attrs.wait_fd else {
            return Err(TransportError::Unsupported(format!(
                "provider {} offers no wait object for its completion queue, so a progress thread could only spin; use --progress poll",
                ep.info().device
            )));
        };
        let shared: Shared = Arc::new((Mutex::new(ep), Condvar::new()));
        let handle = progress::spawn(Arc::clone(&shared), fd, rank)
            .map_err(|e| TransportError::io("starting the libfabric progress thread", e))?;
        Ok(OfiTransport {
            mode: Mode::Thread {
                shared,
                handle: Some(handle),
            },
        })
    }

    /// `f` on the endpoint, locked from the progress thread where there
    /// is one. (A closure, not a guard: the guard cost a match more per
    /// call, and its drop another, on every message.)
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&Endpoint) -> R) -> R {
        match &self.mode {
            Mode::Poll(ep) => f(ep),
            Mode::Thread { shared, .. } => f(&lock(shared)),
        }
    }

    /// The locked arm lives in a cold function of its own: inline, its
    /// lock and unlock made every polled call save more registers.
    #[inline]
    fn with_mut<R>(&mut self, f: impl FnOnce(&mut Endpoint) -> R) -> R {
        match &mut self.mode {
            Mode::Poll(ep) => f(ep),
            Mode::Thread { shared, .. } => with_locked(shared, f),
        }
    }

    /// How writes become visible at the target with this provider.
    pub fn write_visibility(&self) -> &'static str {
        self.with(|e| e.write_visibility())
    }
}

/// The contract: small operations done here on the endpoint's fields,
/// the others by the `Endpoint` method of the same name.
impl Transport for OfiTransport {
    fn info(&self) -> TransportInfo {
        let mut i = self.with(|e| e.info());
        if matches!(self.mode, Mode::Thread { .. }) {
            i.caps.progress = Progress::Thread;
        }
        i
    }

    fn address(&self) -> Vec<u8> {
        self.with(|e| e.fabric.address.clone())
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        self.with_mut(|e| e.connect(addresses))
    }

    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        self.with_mut(|e| e.mem.table.alloc(len))
    }

    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.with_mut(|e| e.mem.table.free(region))
    }

    fn region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        self.with_mut(|e| e.mem.slice_mut(s).map(f))
    }

    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        self.with_mut(|e| {
            let mr = e.mem.register(&e.fabric.domain, s)?;
            let key = e.mem.mr(mr)?.key.clone();
            Ok(Registered { mr, key })
        })
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.with_mut(|e| e.deregister(mr))
    }

    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        let done = self.with_mut(|e| e.send_msg(peer, msg, ctx))?;
        Ok(Posted::done_if(done))
    }

    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        self.with_mut(|e| e.post_rma(peer, rma, ctx))
    }

    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        match (&mut self.mode, arrivals) {
            (Mode::Poll(ep), Some(a)) => ep.poll_arrivals(out, a),
            (Mode::Poll(ep), None) => ep.poll(out),
            // The progress thread queues most arrivals before the rank
            // polls, so a hand-over would rarely happen: plain poll.
            (Mode::Thread { shared, .. }, _) => with_locked(shared, |e| e.poll(out)),
        }
    }

    fn recycle(&mut self, data: Vec<u8>) {
        self.with_mut(|e| e.recycle(data))
    }

    fn idle(&mut self, why: Idle) -> Result<(), TransportError> {
        match why {
            Idle::Block(timeout) => self.block(timeout),
            Idle::EmptyPoll | Idle::WatchingMemory => Ok(()),
        }
    }

    fn tagged(&mut self) -> Option<&mut dyn Tagged> {
        Some(self)
    }
}

impl OfiTransport {
    /// The completion queue's wait object, readable when a poll may find
    /// something (none under a progress thread).
    pub fn wait_fd(&self) -> Option<RawFd> {
        match &self.mode {
            Mode::Poll(ep) => ep.fabric.attrs.wait_fd,
            // The progress thread owns the fd's arming.
            Mode::Thread { .. } => None,
        }
    }

    /// Sleep until something may be ready or `timeout` passes.
    fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        match &mut self.mode {
            Mode::Poll(ep) => ep.block(timeout),
            Mode::Thread { shared, .. } => {
                let deadline = Instant::now() + timeout;
                let mut ep = lock(shared);
                while !ep.has_pending() {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    ep.waiters += 1;
                    ep = shared
                        .1
                        .wait_timeout(ep, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    ep.waiters -= 1;
                }
                Ok(())
            }
        }
    }
}

impl Tagged for OfiTransport {
    fn tsend(&mut self, op: TagSend, ctx: Ctx) -> Result<Posted, TransportError> {
        let done = self.with_mut(|e| e.tag_send(op, ctx))?;
        Ok(Posted::done_if(done))
    }

    /// libfabric has no blocking receive: posted, then polled for.
    fn trecv_wait(&mut self, op: TagRecv, timeout: Duration) -> Result<Waited, TransportError> {
        // What the wait's polls took that was not its receive goes back
        // to the head of the endpoint's queue, for the next poll: the
        // common poll path keeps no queue of its own to look at.
        let mut held = Vec::new();
        let r = ovbench_core::trecv_wait_polling(self, &mut held, op, timeout);
        if !held.is_empty() {
            self.with_mut(|e| e.requeue_front(held));
        }
        r
    }

    fn trecv(&mut self, op: TagRecv, ctx: Ctx) -> Result<(), TransportError> {
        self.with_mut(|e| e.trecv(op, ctx))
    }
}

impl Drop for OfiTransport {
    fn drop(&mut self) {
        // Stopped before the endpoint goes, so it is destroyed here; there
        // is no CQ signal, so the thread notices within its sleep.
        if let Mode::Thread { handle, .. } = &mut self.mode {
            if let Some(h) = handle.take() {
                h.stop(|| {});
            }
        }
    }
}
