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
    Arrivals, Caps, Completion, Ctx, LocalSlice, MrHandle, Progress, Rank, RegionId, RemoteKey,
    Tag, Transport, TransportError, TransportInfo,
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

    #[inline]
    fn with_mut<R>(&mut self, f: impl FnOnce(&mut Endpoint) -> R) -> R {
        match &mut self.mode {
            Mode::Poll(ep) => f(ep),
            Mode::Thread { shared, .. } => f(&mut lock(shared)),
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
        self.with(|e| e.info())
    }

    fn caps(&self) -> Caps {
        let mut c = self.with(|e| e.caps());
        if matches!(self.mode, Mode::Thread { .. }) {
            c.progress = Progress::Thread;
        }
        c
    }

    fn rank(&self) -> Rank {
        self.with(|e| e.rank)
    }

    fn size(&self) -> u32 {
        self.with(|e| e.size)
    }

    fn address(&self) -> Vec<u8> {
        self.with(|e| e.fabric.address.clone())
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        self.with_mut(|e| e.connect(addresses))
    }

    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        self.with_mut(|e| e.mem.alloc(len))
    }

    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.with_mut(|e| e.mem.free(region))
    }

    fn read_region(&self, s: LocalSlice, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError> {
        self.with(|e| e.mem.slice(s).map(f))
    }

    fn write_region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        self.with_mut(|e| e.mem.slice_mut(s).map(f))
    }

    fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError> {
        self.with_mut(|e| e.mem.register(&e.fabric.domain, s))
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.with_mut(|e| e.deregister(mr))
    }

    fn remote_key(&self, mr: MrHandle) -> RemoteKey {
        self.with(|e| e.mem.mr(mr).map(|m| m.key.clone()))
            .expect("remote_key of a registration this transport does not hold")
    }

    fn post_send(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.with_mut(|e| e.post_send(peer, header, payload, ctx))
    }

    fn post_send_inline(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        self.with_mut(|e| e.send_msg(peer, header, payload, ctx))
    }

    fn post_write(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.with_mut(|e| e.post_write(peer, local, mr, remote, remote_offset, ctx))
    }

    fn post_read(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.with_mut(|e| e.post_read(peer, local, mr, remote, remote_offset, ctx))
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        self.with_mut(|e| e.poll(out))
    }

    fn poll_arrivals(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: &mut dyn Arrivals,
    ) -> Result<usize, TransportError> {
        match &mut self.mode {
            Mode::Poll(ep) => ep.poll_arrivals(out, arrivals),
            // The progress thread queues most arrivals before the rank
            // polls, so a hand-over would rarely happen: plain poll.
            Mode::Thread { .. } => self.poll(out),
        }
    }

    fn recycle(&mut self, data: Vec<u8>) {
        self.with_mut(|e| e.recycle(data))
    }

    fn wait_fd(&self) -> Option<RawFd> {
        match &self.mode {
            Mode::Poll(ep) => ep.fabric.attrs.wait_fd,
            // The progress thread owns the fd's arming.
            Mode::Thread { .. } => None,
        }
    }

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

    fn tsend(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        sync: bool,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.with_mut(|e| e.tsend(peer, tag, src, sync, ctx))
    }

    fn tsend_inline(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        sync: bool,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        self.with_mut(|e| e.tag_send(peer, tag, src, sync, ctx))
    }

    fn trecv(
        &mut self,
        src: Option<Rank>,
        tag: Option<Tag>,
        dst: LocalSlice,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        self.with_mut(|e| e.trecv(src, tag, dst, ctx))
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
