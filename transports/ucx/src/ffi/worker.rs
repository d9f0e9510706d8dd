//! The UCP worker: its creation with ovbench's two active-message
//! handlers, its address and wake-up file descriptor, progress, and what
//! its callbacks may reach: the callback state ([`Shared`], owned by the
//! worker so it outlives every callback), the cell that guards it, and the
//! caller's taker lent for the length of one poll.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ops::{Deref, DerefMut};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use ovbench_core::{Arrivals, Completion, OpKind, Rank, TransportError};
use ovbench_ucx_sys as sys;

use super::context::{Context, ContextInner};
use super::memory::{Memory, RegionBuf};
use super::request::{self, Op, Posted};
use crate::ops::{hello, revoke, Shared, AM_ID, HELLO_AM_ID, REVOKE_AM_ID};
use crate::status::{check, local};

/// The raw worker and the state its callbacks write to; destroyed when
/// the transport's handle, every endpoint and remote key, and a progress
/// thread's handle are gone.
pub(crate) struct WorkerInner {
    raw: sys::ucp_worker_h,
    /// Dropped after the worker is destroyed (no callback runs then).
    shared: Box<Shared>,
    _ctx: Arc<ContextInner>,
}

// SAFETY: the worker is used by one thread at a time (the transport's
// &mut self), or created in UCS_THREAD_MODE_MULTI when a progress thread
// shares it; `Shared` is reached from callbacks only through its cell.
unsafe impl Send for WorkerInner {}
// SAFETY: as above: shared references only keep the worker alive or call
// it where its thread mode allows.
unsafe impl Sync for WorkerInner {}

impl WorkerInner {
    /// Drive the worker once; returns whether anything happened.
    pub(super) fn progress(&self) -> bool {
        // SAFETY: the worker is live for the life of self.
        unsafe { sys::ucp_worker_progress(self.raw) != 0 }
    }
}

impl Drop for WorkerInner {
    fn drop(&mut self) {
        // SAFETY: endpoints, remote keys and threads hold an Arc to this,
        // so none is left; the worker is destroyed once, before `shared`.
        unsafe { sys::ucp_worker_destroy(self.raw) };
    }
}

/// The worker's handle and wake-up fd: what driving it and sleeping on
/// it need, from the transport's thread or a progress thread.
#[derive(Clone, Copy)]
pub(crate) struct Handle {
    raw: sys::ucp_worker_h,
    efd: RawFd,
}

impl Handle {
    /// Drive the worker once; returns whether anything happened.
    #[inline]
    pub fn progress(&self) -> bool {
        // SAFETY: the worker outlives every holder of its handle (the
        // transport's worker, or a progress thread's, in MULTI mode).
        unsafe { sys::ucp_worker_progress(self.raw) != 0 }
    }

    /// Arm the wake-up fd; `false` means events are already pending.
    pub fn arm(&self) -> Result<bool, TransportError> {
        arm(self.raw)
    }

    /// Wait up to `ms` milliseconds for the armed wake-up fd.
    pub fn wait(&self, ms: libc::c_int) -> std::io::Result<()> {
        wait_efd(self.efd, ms)
    }
}

/// The transport's worker.
pub(crate) struct Worker {
    /// Copied out of `inner` for the hot path (one load, not two).
    h: Handle,
    shared: *const Shared,
    address: Vec<u8>,
    multi: bool,
    pub(super) inner: Arc<WorkerInner>,
}

// SAFETY: as for WorkerInner; `shared` points into `inner`.
unsafe impl Send for Worker {}

impl Worker {
    /// Create a worker on `ctx` (`multi`: UCS_THREAD_MODE_MULTI, for a
    /// progress thread) whose active-message handlers deliver to `shared`.
    /// `client_id` is what its client-server endpoints tell the listener
    /// they connect to (ovbench: the rank).
    pub fn new(
        ctx: &Context,
        multi: bool,
        shared: Shared,
        client_id: u64,
    ) -> Result<Worker, TransportError> {
        let wparams = sys::ucp_worker_params_t {
            field_mask: (sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE
                | sys::UCP_WORKER_PARAM_FIELD_CLIENT_ID) as u64,
            client_id,
            thread_mode: if multi {
                sys::UCS_THREAD_MODE_MULTI
            } else {
                sys::UCS_THREAD_MODE_SINGLE
            },
            ..Default::default()
        };
        let mut raw: sys::ucp_worker_h = ptr::null_mut();
        // SAFETY: the context is live; raw receives the handle.
        let st = unsafe { sys::ucp_worker_create(ctx.raw(), &wparams, &mut raw) };
        check(OpKind::Connect, "ucp_worker_create", st)?;
        let inner = Arc::new(WorkerInner {
            raw,
            shared: Box::new(shared),
            _ctx: ctx.inner.clone(),
        });
        let shared: *const Shared = &*inner.shared;
        let hp = sys::ucp_am_handler_param_t {
            field_mask: (sys::UCP_AM_HANDLER_PARAM_FIELD_ID
                | sys::UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                | sys::UCP_AM_HANDLER_PARAM_FIELD_CB
                | sys::UCP_AM_HANDLER_PARAM_FIELD_ARG) as u64,
            id: AM_ID,
            flags: sys::UCP_AM_FLAG_WHOLE_MSG,
            cb: Some(am_recv_cb),
            arg: shared as *mut c_void,
        };
        // SAFETY: the worker is live; arg points to the boxed Shared, which
        // the worker owns and drops after it is destroyed.
        let st = unsafe { sys::ucp_worker_set_am_recv_handler(raw, &hp) };
        check(OpKind::Connect, "ucp_worker_set_am_recv_handler", st)?;
        let rp = sys::ucp_am_handler_param_t {
            id: REVOKE_AM_ID,
            cb: Some(am_revoke_cb),
            ..hp
        };
        // SAFETY: as above.
        let st = unsafe { sys::ucp_worker_set_am_recv_handler(raw, &rp) };
        check(
            OpKind::Connect,
            "ucp_worker_set_am_recv_handler(revoke)",
            st,
        )?;
        let hh = sys::ucp_am_handler_param_t {
            id: HELLO_AM_ID,
            cb: Some(am_hello_cb),
            ..hp
        };
        // SAFETY: as above.
        let st = unsafe { sys::ucp_worker_set_am_recv_handler(raw, &hh) };
        check(OpKind::Connect, "ucp_worker_set_am_recv_handler(hello)", st)?;

        let mut addr: *mut sys::ucp_address_t = ptr::null_mut();
        let mut alen = 0usize;
        // SAFETY: the worker is live; addr/alen receive a UCX-owned buffer.
        let st = unsafe { sys::ucp_worker_get_address(raw, &mut addr, &mut alen) };
        check(OpKind::Connect, "ucp_worker_get_address", st)?;
        // SAFETY: UCX returned alen readable bytes at addr.
        let address = unsafe { std::slice::from_raw_parts(addr as *const u8, alen) }.to_vec();
        // SAFETY: addr came from ucp_worker_get_address on this worker.
        unsafe { sys::ucp_worker_release_address(raw, addr) };

        let mut efd: libc::c_int = -1;
        // SAFETY: the worker is live and its context has WAKEUP.
        let st = unsafe { sys::ucp_worker_get_efd(raw, &mut efd) };
        check(OpKind::Connect, "ucp_worker_get_efd", st)?;
        Ok(Worker {
            h: Handle { raw, efd },
            shared,
            address,
            multi,
            inner,
        })
    }

    /// The callbacks' state.
    #[inline]
    pub fn shared(&self) -> &Shared {
        // SAFETY: points into `inner`, which lives as long as self.
        unsafe { &*self.shared }
    }

    /// The address peers connect to.
    pub fn address(&self) -> &[u8] {
        &self.address
    }

    /// The wake-up file descriptor.
    pub fn efd(&self) -> RawFd {
        self.h.efd
    }

    /// As [`Handle::progress`], on the transport's thread.
    #[inline]
    pub fn progress(&self) -> bool {
        self.h.progress()
    }

    /// As [`Handle::arm`].
    pub fn arm(&self) -> Result<bool, TransportError> {
        self.h.arm()
    }

    /// As [`Handle::wait`].
    pub fn wait(&self, ms: libc::c_int) -> std::io::Result<()> {
        self.h.wait(ms)
    }

    /// Wake a thread blocked on the wake-up fd.
    pub fn signal(&self) {
        // SAFETY: the worker is live; ucp_worker_signal is thread-safe.
        unsafe { sys::ucp_worker_signal(self.h.raw) };
    }

    /// A handle for a progress thread; only for a worker made `multi`.
    pub fn thread_handle(&self) -> Option<ThreadWorker> {
        self.multi.then(|| ThreadWorker {
            h: self.h,
            _inner: self.inner.clone(),
        })
    }

    /// Never destroy this worker, its context, nor its callbacks' state:
    /// destroying a worker whose endpoints never finished wire-up closes
    /// them, which aborts inside UCX. The process is about to report the
    /// failed connect and exit.
    pub fn leak(&self) {
        std::mem::forget(self.inner.clone());
    }

    /// Post a tagged receive into `buf` completing through `op`.
    #[inline]
    pub fn tag_recv(&self, buf: RegionBuf, tag: u64, mask: u64, op: Box<Op>) -> Posted {
        request::post(op, |user_data| {
            let p = request::recv_params(user_data, Some(request::tag_recv_cb));
            // SAFETY: the worker is live; buf lies in a live transport
            // region, kept until this receive completes (see `ffi`).
            unsafe { sys::ucp_tag_recv_nbx(self.h.raw, buf.ptr().cast(), buf.len(), tag, mask, &p) }
        })
    }

    /// The raw handle, for the other resources of this layer.
    pub(super) fn raw(&self) -> sys::ucp_worker_h {
        self.h.raw
    }

    /// Run `f` with `arrivals` and `mem` lent to the active-message
    /// callback, which hands in-order messages to `arrivals` and copies
    /// their placements into `mem`. Returns `f`'s result and how many
    /// messages were handed over (or the first error doing so). Callbacks
    /// must run on this thread (no progress thread).
    #[inline]
    pub fn lending<R>(
        &self,
        arrivals: &mut dyn Arrivals,
        mem: &Memory,
        f: impl FnOnce() -> R,
    ) -> (R, Result<usize, TransportError>) {
        let a: *mut (dyn Arrivals + '_) = arrivals;
        // SAFETY: only the lifetime bound changes; the lend ends before
        // this function returns (on unwinding too: Lend's drop), so the
        // taker is never reached after the borrow ends.
        let a: *mut (dyn Arrivals + 'static) = unsafe { std::mem::transmute(a) };
        let shared = self.shared();
        shared.lock().taker = Some(Taker {
            arrivals: a,
            mem: ptr::from_ref(mem),
        });
        let lend = Lend { shared };
        let r = f();
        (r, lend.end())
    }
}

/// Arm a worker's wake-up fd; `false` means events are already pending.
fn arm(raw: sys::ucp_worker_h) -> Result<bool, TransportError> {
    // SAFETY: callers hold the worker alive; it has WAKEUP.
    let st = unsafe { sys::ucp_worker_arm(raw) };
    match st {
        sys::UCS_OK => Ok(true),
        sys::UCS_ERR_BUSY => Ok(false),
        _ => Err(local(OpKind::Poll, "ucp_worker_arm", st, "")),
    }
}

/// `poll(2)` on a wake-up fd for up to `ms` milliseconds.
fn wait_efd(efd: RawFd, ms: libc::c_int) -> std::io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: efd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is a valid pollfd array of length 1.
    if unsafe { libc::poll(&mut pfd, 1, ms) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The worker as a progress thread holds it.
pub(crate) struct ThreadWorker {
    pub(crate) h: Handle,
    _inner: Arc<WorkerInner>,
}

// SAFETY: made only for a worker in UCS_THREAD_MODE_MULTI, where UCX
// serialises concurrent calls on it.
unsafe impl Send for ThreadWorker {}

/// A value the worker's callbacks and the transport share.
///
/// With a progress thread every access locks the mutex. Without one,
/// every callback runs inside a UCX call made by the rank's own thread, so
/// no lock is taken (two atomic operations per lock were a visible part
/// of a shared-memory round trip); that is sound as long as no guard
/// lives across a UCX call (whose callbacks take their own), the rule of
/// [`lock`](Self::lock).
pub(crate) struct CallbackCell<T> {
    threaded: bool,
    mutex: Mutex<()>,
    value: UnsafeCell<T>,
}

/// Exclusive access to a [`CallbackCell`]'s value.
pub(crate) struct CellGuard<'a, T> {
    _lock: Option<MutexGuard<'a, ()>>,
    value: &'a mut T,
}

impl<T> Deref for CellGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> DerefMut for CellGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
    }
}

impl<T> CallbackCell<T> {
    /// `threaded`: a progress thread will run callbacks.
    pub fn new(value: T, threaded: bool) -> CallbackCell<T> {
        CallbackCell {
            threaded,
            mutex: Mutex::new(()),
            value: UnsafeCell::new(value),
        }
    }

    /// Exclusive access to the value. A guard must not live across a UCX
    /// call. A poisoned lock (a panic in another thread) still holds a
    /// consistent value, so it is used as is.
    #[inline]
    pub fn lock(&self) -> CellGuard<'_, T> {
        let lock = self
            .threaded
            .then(|| self.mutex.lock().unwrap_or_else(|p| p.into_inner()));
        // SAFETY: with a progress thread, the mutex held by `lock` excludes
        // every other guard. Without one, guards are only made on the
        // rank's thread — by the transport or by a callback inside a UCX
        // call the transport makes — and none lives across a UCX call, so
        // no two exist at once.
        let value = unsafe { &mut *self.value.get() };
        CellGuard { _lock: lock, value }
    }

    /// Sleep on `cv` until `ready(value)` or `deadline` (only with a
    /// progress thread, whose callbacks notify `cv`); `sleeping(value,
    /// true)` and `(value, false)` bracket each sleep, under the mutex.
    pub fn wait(
        &self,
        cv: &Condvar,
        deadline: Instant,
        ready: impl Fn(&T) -> bool,
        sleeping: impl Fn(&mut T, bool),
    ) {
        let mut g = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: as in lock(): the mutex is held by `g` whenever the value
        // is touched here, and the condition variable re-takes it before
        // returning.
        let value = |_: &MutexGuard<'_, ()>| unsafe { &mut *self.value.get() };
        while !ready(value(&g)) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            sleeping(value(&g), true);
            g = cv
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            sleeping(value(&g), false);
        }
    }
}

/// The caller's taker and the memory placements land in, reachable from
/// the active-message callback while [`Worker::lending`] runs. Made only
/// there and removed from the callback state before it returns.
pub(crate) struct Taker {
    arrivals: *mut (dyn Arrivals + 'static),
    mem: *const Memory,
}

impl Taker {
    /// Hand `data` from `peer` over and copy the placement it asks for.
    /// Not from inside the taker itself (it never calls UCX).
    #[inline]
    pub fn hand(&self, peer: Rank, data: &[u8]) -> Result<(), TransportError> {
        // SAFETY: the taker is reachable only while its lend is alive, on
        // the lending thread: `arrivals` is a live, unaliased &mut for the
        // length of this call.
        let arrivals = unsafe { &mut *self.arrivals };
        // The placement is read where the taker returned it, field by
        // field: moved out whole, it was copied in wider loads than it was
        // stored with, a store-forwarding stall per message (~4 ns of the
        // callback's critical path, with timestamps along it).
        match arrivals.arrived(peer, data) {
            Ok(None) => Ok(()),
            // SAFETY: as above; the memory is only read (its table) meanwhile.
            Ok(Some(ref p)) => crate::handover::place(unsafe { &*self.mem }, p, data),
            Err(e) => Err(e),
        }
    }
}

/// A lent taker; dropping it (also on unwinding) takes it back.
struct Lend<'a> {
    shared: &'a Shared,
}

impl Lend<'_> {
    /// Take the taker back: how many messages it got, or the first error
    /// it (or a placement) gave. Inlined, and the error moved only when
    /// there is one: on the idle poll's path, returning a large
    /// `Option<TransportError>` out of line cost a store-forwarding stall
    /// (seen with `perf annotate`).
    #[inline]
    fn end(self) -> Result<usize, TransportError> {
        let mut g = self.shared.lock();
        g.taker = None;
        let handed = std::mem::take(&mut g.handed);
        let err = if g.taker_err.is_some() {
            g.taker_err.take()
        } else {
            None
        };
        drop(g);
        // Taken back already.
        std::mem::forget(self);
        match err {
            Some(e) => Err(e),
            None => Ok(handed),
        }
    }
}

impl Drop for Lend<'_> {
    fn drop(&mut self) {
        self.shared.lock().taker = None;
    }
}

/// A byte slice from a UCX callback argument (empty for NULL).
///
/// # Safety
/// `p` must point to `n` readable bytes that outlive the returned slice.
#[inline]
unsafe fn bytes<'a>(p: *const c_void, n: usize) -> &'a [u8] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: the caller guarantees n readable bytes at p.
        unsafe { std::slice::from_raw_parts(p as *const u8, n) }
    }
}

/// The active-message handler: the whole message is delivered (copied
/// out or handed over) before it returns, so UCX's buffer is released.
unsafe extern "C" fn am_recv_cb(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    // SAFETY: arg is the worker's Shared, registered with the handler and
    // alive as long as the worker.
    let shared = unsafe { &*(arg as *const Shared) };
    // SAFETY: param is valid for the duration of the callback.
    let attr = unsafe { (*param).recv_attr };
    if attr & sys::UCP_AM_RECV_ATTR_FLAG_RNDV as u64 != 0 {
        shared.push(Completion::Error {
            ctx: None,
            peer: shared.rank,
            op: OpKind::Recv,
            status: format!(
                "an active message of {length} bytes arrived as a rendezvous; ovbench sends eager messages only, so the sender is not ovbench or uses a larger eager size"
            ),
        });
        return sys::UCS_OK;
    }
    // SAFETY: UCX guarantees header_length readable bytes at header, and
    // an eager (non-rendezvous) message's data holds `length` readable
    // bytes, both for the duration of the callback.
    let (hdr, body) = unsafe { (bytes(header, header_length), bytes(data, length)) };
    shared.deliver(hdr, body);
    sys::UCS_OK
}

/// The key-revocation handler.
unsafe extern "C" fn am_revoke_cb(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    _param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    // SAFETY: arg is the worker's Shared (see am_recv_cb).
    let shared = unsafe { &*(arg as *const Shared) };
    // SAFETY: UCX guarantees header_length and length readable bytes for
    // the duration of the callback (both tiny eager messages).
    let (h, d) = unsafe { (bytes(header, header_length), bytes(data, length)) };
    revoke(shared, h, d);
    sys::UCS_OK
}

/// The client-server handshake's handler.
unsafe extern "C" fn am_hello_cb(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    _data: *mut c_void,
    _length: usize,
    _param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    // SAFETY: arg is the worker's Shared (see am_recv_cb).
    let shared = unsafe { &*(arg as *const Shared) };
    // SAFETY: UCX guarantees header_length readable bytes for the
    // duration of the callback.
    hello(shared, unsafe { bytes(header, header_length) });
    sys::UCS_OK
}
