//! What UCX callbacks touch: the completion queue, the active-message
//! inbox with its per-peer reordering, and the boxed context of every
//! request in flight.
//!
//! Callbacks run inside `ucp_worker_progress` — on the rank's own thread,
//! or on the progress thread with `--progress thread` — so everything here
//! sits behind one mutex and a condition variable wakes a sleeping rank.

use std::cell::UnsafeCell;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ffi::c_void;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use ovbench_core::{Completion, Ctx, OpKind, Rank, Tag, TransportError};
use ovbench_ucx_sys as sys;

use crate::handover::Taker;
use crate::status::status_str;

/// Active-message id ovbench registers its handler under.
pub(crate) const AM_ID: u32 = 0x0b;
/// Active-message id of key revocations: a rank that deregisters memory
/// tells every peer the checksum of the dropped key.
pub(crate) const REVOKE_AM_ID: u32 = 0x0c;
/// Revocations remembered per transport (oldest forgotten first).
const MAX_REVOKED: usize = 1 << 16;
/// Bytes of the AM header ovbench puts in front of every message:
/// source rank and per-peer sequence number, both little-endian `u32`.
pub(crate) const AM_HDR_LEN: usize = 8;
/// How far a message may overtake the next expected one before the peer
/// is declared broken (UCX reorders across lanes only a little).
const MAX_AHEAD: u32 = 1 << 16;
/// Native tags carry the source rank in the upper 32 bits.
pub(crate) const TAG_SRC_SHIFT: u32 = 32;
/// Receive buffers kept for reuse.
pub(crate) const MAX_POOL: usize = 1024;
/// Operation boxes kept for reuse.
pub(crate) const MAX_SPARE_OPS: usize = 64;

/// The mutable part of [`Shared`].
pub(crate) struct Inbox {
    /// Finished work, in the order UCX reported it.
    pub completions: Vec<Completion>,
    /// Next sequence number expected from each peer.
    expected: Vec<u32>,
    /// Messages that overtook an earlier one (UCX does not order AMs
    /// across lanes), keyed by sequence number.
    held: Vec<BTreeMap<u32, Vec<u8>>>,
    /// Receive buffers handed back through `Transport::recycle`.
    pub recv_pool: Vec<Vec<u8>>,
    /// Send staging buffers whose request has completed.
    pub send_pool: Vec<Vec<u8>>,
    /// Boxes of completed operations, for the next posts (a box per
    /// receive was a malloc and a free on every message).
    #[allow(clippy::vec_box)]
    pub spare: Vec<Box<Op>>,
    /// One-sided operations in flight (unpacked rkeys are only destroyed
    /// when none are).
    pub rma_in_flight: usize,
    /// Keys their owners deregistered: (owner rank, key checksum).
    pub revoked: HashSet<(Rank, u64)>,
    revoked_order: VecDeque<(Rank, u64)>,
    /// Threads sleeping on [`Shared::ready`] (only `block` with a progress
    /// thread): completions are signalled only when one is, since an
    /// unconditional notify costs a futex syscall per completion.
    pub waiters: usize,
    /// The caller's taker while a `poll_arrivals` runs (see `handover`).
    pub taker: Option<Taker>,
    /// Messages handed to the taker in this lend.
    pub handed: usize,
    /// The first error handing over gave; the taker is withdrawn then.
    pub taker_err: Option<TransportError>,
}

impl Inbox {
    /// Whether a thread sleeps on [`Shared::ready`] and must be woken.
    pub fn has_waiters(&self) -> bool {
        self.waiters > 0
    }
}

/// State shared between the transport and its UCX callbacks.
///
/// Without a progress thread every callback runs inside a UCX call made
/// by the rank's own thread, so the inbox needs no lock: [`Shared::lock`]
/// then takes none (two atomic operations per lock were a visible part of
/// a shared-memory round trip). With a progress thread it locks `mutex`.
pub(crate) struct Shared {
    pub rank: Rank,
    pub size: u32,
    /// Largest message (header included) a peer may send us.
    pub max_msg: usize,
    /// Whether callbacks may run on another thread (`--progress thread`).
    threaded: bool,
    mutex: Mutex<()>,
    /// Reached only through an [`InboxGuard`].
    inbox: UnsafeCell<Inbox>,
    /// Set (under the inbox lock) whenever a completion is queued and
    /// cleared by the poll that drains the queue: a poll that finds it
    /// clear skips the inbox.
    queued: AtomicBool,
    /// Signalled when a completion is queued and a thread waits for one.
    ready: Condvar,
}

/// Exclusive access to the inbox: the mutex's guard with a progress
/// thread, none without one (see [`Shared`]).
pub(crate) struct InboxGuard<'a> {
    _lock: Option<MutexGuard<'a, ()>>,
    inbox: &'a mut Inbox,
}

impl Deref for InboxGuard<'_> {
    type Target = Inbox;
    fn deref(&self) -> &Inbox {
        self.inbox
    }
}

impl DerefMut for InboxGuard<'_> {
    fn deref_mut(&mut self) -> &mut Inbox {
        self.inbox
    }
}

impl Shared {
    /// `threaded`: a progress thread will run callbacks.
    pub fn new(rank: Rank, size: u32, max_msg: usize, threaded: bool) -> Shared {
        Shared {
            rank,
            size,
            max_msg,
            threaded,
            mutex: Mutex::new(()),
            inbox: UnsafeCell::new(Inbox {
                completions: Vec::with_capacity(64),
                expected: vec![0; size as usize],
                held: (0..size).map(|_| BTreeMap::new()).collect(),
                recv_pool: Vec::new(),
                send_pool: Vec::new(),
                spare: Vec::new(),
                rma_in_flight: 0,
                revoked: HashSet::new(),
                revoked_order: VecDeque::new(),
                waiters: 0,
                taker: None,
                handed: 0,
                taker_err: None,
            }),
            queued: AtomicBool::new(false),
            ready: Condvar::new(),
        }
    }

    /// Exclusive access to the inbox. A guard must not live across a UCX
    /// call (whose callbacks take their own). A poisoned lock (a panic in
    /// another thread) still holds consistent queues, so it is used as is.
    pub fn lock(&self) -> InboxGuard<'_> {
        let lock = self
            .threaded
            .then(|| self.mutex.lock().unwrap_or_else(|p| p.into_inner()));
        // SAFETY: with a progress thread, the mutex held by `lock` excludes
        // every other guard. Without one, guards are only made on the
        // rank's thread — by the transport (through &mut self) or by a
        // callback inside a UCX call the transport makes — and none lives
        // across a UCX call, so no two exist at once.
        let inbox = unsafe { &mut *self.inbox.get() };
        InboxGuard { _lock: lock, inbox }
    }

    /// Sleep until a completion is queued or `deadline` passes (only with
    /// a progress thread, which queues them and signals `ready`).
    pub fn wait_ready(&self, deadline: Instant) {
        let mut g = self.mutex.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: as in lock(): the mutex is held by `g` whenever the inbox
        // is touched here, and the condition variable re-takes it before
        // returning.
        let inbox = |_: &MutexGuard<'_, ()>| unsafe { &mut *self.inbox.get() };
        while inbox(&g).completions.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Counted under the mutex, so a callback that queues a
            // completion after this check sees the waiter and notifies.
            inbox(&g).waiters += 1;
            g = self
                .ready
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            inbox(&g).waiters -= 1;
        }
    }

    pub fn push(&self, c: Completion) {
        let mut g = self.lock();
        g.completions.push(c);
        self.queued(g);
    }

    /// Completions were just queued under `g`: flag them for `poll` and
    /// wake a waiting thread, if any.
    fn queued(&self, g: InboxGuard<'_>) {
        self.queued.store(true, Ordering::Release);
        let wake = g.has_waiters();
        drop(g);
        if wake {
            self.ready.notify_all();
        }
    }

    /// Whether completions wait to be drained.
    #[inline]
    pub fn has_queued(&self) -> bool {
        self.queued.load(Ordering::Acquire)
    }

    /// Move every queued completion to `out`; returns how many. Without
    /// queued completions (the flag is only set under the mutex, and
    /// cleared here under it) the mutex is not taken. Receive buffers the
    /// user handed back meanwhile (`recycled`) go to the pool under the
    /// same lock, so recycling costs no lock of its own.
    pub fn drain(&self, out: &mut Vec<Completion>, recycled: &mut Vec<Vec<u8>>) -> usize {
        if !self.has_queued() {
            return 0;
        }
        let mut g = self.lock();
        self.queued.store(false, Ordering::Relaxed);
        let room = MAX_POOL.saturating_sub(g.recv_pool.len());
        let keep = recycled.len().saturating_sub(room);
        g.recv_pool.extend(recycled.drain(keep..));
        recycled.clear();
        let n = g.completions.len();
        out.append(&mut g.completions);
        n
    }

    /// An active message arrived: check the header, copy the data into a
    /// transport buffer and deliver it in the peer's posting order.
    fn deliver(&self, header: &[u8], data: &[u8]) {
        if header.len() != AM_HDR_LEN {
            self.push(Completion::Error {
                ctx: None,
                peer: self.rank,
                op: OpKind::Recv,
                status: format!(
                    "an active message arrived with a {}-byte header (ovbench sends {AM_HDR_LEN}); is another program sharing this UCX worker?",
                    header.len()
                ),
            });
            return;
        }
        let src = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
        let seq = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
        if src >= self.size || data.len() > self.max_msg {
            self.push(Completion::Error {
                ctx: None,
                peer: src.min(self.size.saturating_sub(1)),
                op: OpKind::Recv,
                status: format!(
                    "bad active message: source rank {src} of {} ranks, {} bytes (limit {}); the peers run different ovbench builds or settings",
                    self.size,
                    data.len(),
                    self.max_msg
                ),
            });
            return;
        }
        let mut g = self.lock();
        let s = src as usize;
        // Handed over only when nothing queued could be ahead of it.
        if seq == g.expected[s] && g.completions.is_empty() && g.taker.is_some() {
            g.expected[s] = seq.wrapping_add(1);
            self.hand(&mut g, src, data);
            self.release_held(g, src);
            return;
        }
        let mut buf = g.recv_pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        if seq != g.expected[s] {
            let ahead = seq.wrapping_sub(g.expected[s]);
            if ahead > MAX_AHEAD {
                drop(g);
                self.push(Completion::Error {
                    ctx: None,
                    peer: src,
                    op: OpKind::Recv,
                    status: format!(
                        "message sequence {seq} is {ahead} ahead of the expected one; rank {src} restarted or is not ovbench"
                    ),
                });
                return;
            }
            g.held[s].insert(seq, buf);
            return;
        }
        g.expected[s] = seq.wrapping_add(1);
        g.completions.push(Completion::Recv {
            peer: src,
            data: buf,
        });
        self.release_held(g, src);
    }

    /// Give `data` from `src` to the lent taker (present); an error
    /// withdraws the taker, so what follows is queued.
    fn hand(&self, g: &mut Inbox, src: Rank, data: &[u8]) {
        let t = g.taker.expect("hand() is called with a taker lent");
        g.handed += 1;
        // SAFETY: a taker is present only while its Lend lives (the lend
        // takes it back when dropped), and callbacks run on the lending
        // thread without a progress thread; the taker never calls UCX.
        if let Err(e) = unsafe { t.hand(src, data) } {
            g.taker = None;
            g.taker_err = Some(e);
        }
    }

    /// Messages from `src` that overtook the one just delivered and are
    /// now next: handed over while a taker is lent, else queued.
    fn release_held(&self, mut g: InboxGuard<'_>, src: Rank) {
        let s = src as usize;
        loop {
            let next = g.expected[s];
            let Some(b) = g.held[s].remove(&next) else {
                break;
            };
            g.expected[s] = next.wrapping_add(1);
            if g.taker.is_some() && g.completions.is_empty() {
                self.hand(&mut g, src, &b);
                if g.recv_pool.len() < MAX_POOL {
                    g.recv_pool.push(b);
                }
            } else {
                g.completions.push(Completion::Recv { peer: src, data: b });
            }
        }
        // Also for a hand-over: the poll's progress loop stops on it.
        self.queued(g);
    }
}

/// A revocation arrived: `header` is the owner's rank, `data` the key's
/// checksum.
fn revoke(shared: &Shared, header: &[u8], data: &[u8]) {
    let (Ok(src), Ok(sum)) = (<[u8; 4]>::try_from(header), <[u8; 8]>::try_from(data)) else {
        shared.push(Completion::Error {
            ctx: None,
            peer: shared.rank,
            op: OpKind::Recv,
            status: format!(
                "a key revocation of {}+{} bytes (ovbench sends 4+8); the peers run different ovbench builds",
                header.len(),
                data.len()
            ),
        });
        return;
    };
    let key = (u32::from_le_bytes(src), u64::from_le_bytes(sum));
    let mut g = shared.lock();
    if g.revoked.insert(key) {
        g.revoked_order.push_back(key);
        if g.revoked_order.len() > MAX_REVOKED {
            if let Some(old) = g.revoked_order.pop_front() {
                g.revoked.remove(&old);
            }
        }
    }
}

/// The context of one request in flight, boxed and passed to UCX as
/// `user_data`; the completion callback takes it back.
pub(crate) struct Op {
    pub shared: *const Shared,
    pub ctx: Ctx,
    pub peer: Rank,
    pub kind: OpKind,
    /// The copied message of an active-message send.
    pub staging: Option<Vec<u8>>,
    /// Internal traffic (key revocations): no completion for the user.
    pub silent: bool,
}

impl Op {
    /// The completion the user sees for this operation finishing with
    /// `status` (`tag`: a tagged receive's sender tag and length); none
    /// for internal traffic.
    pub fn completion(
        &self,
        status: sys::ucs_status_t,
        tag: Option<(u64, usize)>,
    ) -> Option<Completion> {
        if self.silent {
            return None;
        }
        Some(if status != sys::UCS_OK {
            Completion::Error {
                ctx: Some(self.ctx),
                peer: self.peer,
                op: self.kind,
                status: status_str(status),
            }
        } else {
            match self.kind {
                OpKind::Send => Completion::Send { ctx: self.ctx },
                OpKind::Write => Completion::Write { ctx: self.ctx },
                OpKind::Read => Completion::Read { ctx: self.ctx },
                OpKind::TaggedSend => Completion::TaggedSend { ctx: self.ctx },
                _ => {
                    let (sender_tag, len) = tag.unwrap_or((0, 0));
                    Completion::TaggedRecv {
                        ctx: self.ctx,
                        peer: (sender_tag >> TAG_SRC_SHIFT) as Rank,
                        tag: sender_tag as u32 as Tag,
                        len,
                    }
                }
            }
        })
    }

    /// Whether this is a one-sided operation (counted in `rma_in_flight`).
    pub fn is_rma(&self) -> bool {
        matches!(self.kind, OpKind::Write | OpKind::Read)
    }

    /// Queue this operation's completion (or error) and recycle its
    /// staging buffer: the callback path, which may run on the progress
    /// thread.
    pub fn finish(
        mut self: Box<Self>,
        shared: &Shared,
        status: sys::ucs_status_t,
        tag: Option<(u64, usize)>,
    ) {
        let c = self.completion(status, tag);
        let mut g = shared.lock();
        if self.is_rma() {
            g.rma_in_flight = g.rma_in_flight.saturating_sub(1);
        }
        if let Some(b) = self.staging.take() {
            g.send_pool.push(b);
        }
        if g.spare.len() < MAX_SPARE_OPS {
            g.spare.push(self);
        }
        if let Some(c) = c {
            g.completions.push(c);
            shared.queued(g);
        }
    }
}

/// Completion callback of sends, flushes (writes) and gets.
pub(crate) unsafe extern "C" fn send_cb(
    request: *mut c_void,
    status: sys::ucs_status_t,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the Box<Op> leaked when the request was posted;
    // UCX calls this callback exactly once per request.
    let op = unsafe { Box::from_raw(user_data as *mut Op) };
    // SAFETY: op.shared points to the transport's Shared, which outlives
    // the worker (it is dropped after ucp_worker_destroy).
    let shared = unsafe { &*op.shared };
    op.finish(shared, status, None);
    // SAFETY: request is a live request handed to this callback; freeing
    // it here is the documented way to release it.
    unsafe { sys::ucp_request_free(request) };
}

/// Completion callback of native tagged receives.
pub(crate) unsafe extern "C" fn tag_recv_cb(
    request: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    // SAFETY: as in send_cb: user_data is our leaked Box<Op>, called once.
    let op = unsafe { Box::from_raw(user_data as *mut Op) };
    // SAFETY: as in send_cb: Shared outlives the worker.
    let shared = unsafe { &*op.shared };
    let tag = if info.is_null() {
        None
    } else {
        // SAFETY: UCX passes a valid info for the duration of the callback.
        let i = unsafe { &*info };
        Some((i.sender_tag, i.length))
    };
    op.finish(shared, status, tag);
    // SAFETY: as in send_cb.
    unsafe { sys::ucp_request_free(request) };
}

/// The key-revocation handler.
pub(crate) unsafe extern "C" fn am_revoke_cb(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    _param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    // SAFETY: arg is the transport's Shared (see am_recv_cb).
    let shared = unsafe { &*(arg as *const Shared) };
    // SAFETY: UCX guarantees header_length and length readable bytes for
    // the duration of the callback (both tiny eager messages).
    let (h, d) = unsafe { (bytes(header, header_length), bytes(data, length)) };
    revoke(shared, h, d);
    sys::UCS_OK
}

/// A byte slice from a UCX callback argument (empty for NULL).
///
/// # Safety
/// `p` must point to `n` readable bytes that outlive the returned slice.
unsafe fn bytes<'a>(p: *const c_void, n: usize) -> &'a [u8] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: the caller guarantees n readable bytes at p.
        unsafe { std::slice::from_raw_parts(p as *const u8, n) }
    }
}

/// The active-message handler: copies the whole message out (so UCX's
/// buffer is released at once) and queues it.
pub(crate) unsafe extern "C" fn am_recv_cb(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    // SAFETY: arg is the transport's Shared, registered with the handler
    // and alive as long as the worker.
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
    let hdr: &[u8] = if header_length == 0 || header.is_null() {
        &[]
    } else {
        // SAFETY: UCX guarantees header_length readable bytes at header
        // for the duration of the callback.
        unsafe { std::slice::from_raw_parts(header as *const u8, header_length) }
    };
    let body: &[u8] = if length == 0 || data.is_null() {
        &[]
    } else {
        // SAFETY: an eager (non-rendezvous) message's data holds `length`
        // readable bytes for the duration of the callback.
        unsafe { std::slice::from_raw_parts(data as *const u8, length) }
    };
    shared.deliver(hdr, body);
    sys::UCS_OK
}

/// Endpoint error handler: the peer is gone or the link failed.
pub(crate) unsafe extern "C" fn ep_err_cb(
    arg: *mut c_void,
    _ep: sys::ucp_ep_h,
    status: sys::ucs_status_t,
) {
    // SAFETY: arg is a Box<EpErrArg> the transport keeps alive as long
    // as the endpoint.
    let a = unsafe { &*(arg as *const EpErrArg) };
    // SAFETY: as in send_cb: Shared outlives the worker.
    let shared = unsafe { &*a.shared };
    shared.push(Completion::Error {
        ctx: None,
        peer: a.peer,
        op: OpKind::Connect,
        status: format!(
            "the endpoint to rank {} failed: {}; the peer process died or the network path broke",
            a.peer,
            status_str(status)
        ),
    });
}

/// What the endpoint error handler needs to name the peer.
pub(crate) struct EpErrArg {
    pub shared: *const Shared,
    pub peer: Rank,
}
