//! What UCX callbacks touch: the completion queue, the active-message
//! inbox with its per-peer reordering, and the boxed context of every
//! request in flight.
//!
//! Callbacks run inside `ucp_worker_progress` — on the rank's own thread,
//! or on the progress thread with `--progress thread` — so everything here
//! sits behind one mutex and a condition variable wakes a sleeping rank.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Condvar;
use std::time::Instant;

use ovbench_core::fabric::wire_tag;
use ovbench_core::{Completion, OpKind, Rank, TransportError};
use ovbench_ucx_sys as sys;

use crate::ffi::request::Op;
use crate::ffi::worker::{CallbackCell, CellGuard, Taker};
use crate::status::status_str;

/// Active-message id ovbench registers its handler under.
pub(crate) const AM_ID: u32 = 0x0b;
/// Active-message id of key revocations: a rank that deregisters memory
/// tells every peer the checksum of the dropped key.
pub(crate) const REVOKE_AM_ID: u32 = 0x0c;
/// Active-message id of the client-server path's closing handshake: a
/// rank's rank, sent to every peer once its endpoints are wired.
pub(crate) const HELLO_AM_ID: u32 = 0x0d;
/// Revocations remembered per transport (oldest forgotten first).
const MAX_REVOKED: usize = 1 << 16;
/// Bytes of the AM header ovbench puts in front of every message:
/// source rank and per-peer sequence number, both little-endian `u32`.
pub(crate) const AM_HDR_LEN: usize = 8;
/// How far a message may overtake the next expected one before the peer
/// is declared broken (UCX reorders across lanes only a little).
const MAX_AHEAD: u32 = 1 << 16;
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
    /// Peers whose hello (`HELLO_AM_ID`) has arrived.
    pub hellos: Vec<bool>,
    /// Threads sleeping on [`Shared::ready`] (only `block` with a progress
    /// thread): completions are signalled only when one is, since an
    /// unconditional notify costs a futex syscall per completion.
    pub waiters: usize,
    /// The caller's taker while a `poll` with arrivals runs (see `handover`
    /// and `Worker::lending`).
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

/// State shared between the transport and its UCX callbacks, owned by the
/// worker (so it outlives every callback).
///
/// Without a progress thread every callback runs inside a UCX call made
/// by the rank's own thread, so the inbox needs no lock: [`Shared::lock`]
/// then takes none (see [`CallbackCell`]). With a progress thread it
/// locks a mutex.
pub(crate) struct Shared {
    pub rank: Rank,
    pub size: u32,
    /// Largest message (header included) a peer may send us.
    pub max_msg: usize,
    inbox: CallbackCell<Inbox>,
    /// Set (under the inbox lock) whenever a completion is queued and
    /// cleared by the poll that drains the queue: a poll that finds it
    /// clear skips the inbox.
    queued: AtomicBool,
    /// Signalled when a completion is queued and a thread waits for one.
    ready: Condvar,
}

/// Exclusive access to the inbox.
pub(crate) type InboxGuard<'a> = CellGuard<'a, Inbox>;

impl Shared {
    /// `threaded`: a progress thread will run callbacks.
    pub fn new(rank: Rank, size: u32, max_msg: usize, threaded: bool) -> Shared {
        Shared {
            rank,
            size,
            max_msg,
            inbox: CallbackCell::new(
                Inbox {
                    completions: Vec::with_capacity(64),
                    expected: vec![0; size as usize],
                    held: (0..size).map(|_| BTreeMap::new()).collect(),
                    recv_pool: Vec::new(),
                    send_pool: Vec::new(),
                    spare: Vec::new(),
                    rma_in_flight: 0,
                    revoked: HashSet::new(),
                    revoked_order: VecDeque::new(),
                    hellos: vec![false; size as usize],
                    waiters: 0,
                    taker: None,
                    handed: 0,
                    taker_err: None,
                },
                threaded,
            ),
            queued: AtomicBool::new(false),
            ready: Condvar::new(),
        }
    }

    /// Exclusive access to the inbox. A guard must not live across a UCX
    /// call (whose callbacks take their own).
    #[inline]
    pub fn lock(&self) -> InboxGuard<'_> {
        self.inbox.lock()
    }

    /// Sleep until a completion is queued or `deadline` passes (only with
    /// a progress thread, which queues them and signals `ready`). The
    /// waiter is counted under the mutex, so a callback that queues a
    /// completion after the check sees it and notifies.
    pub fn wait_ready(&self, deadline: Instant) {
        self.inbox.wait(
            &self.ready,
            deadline,
            |i| !i.completions.is_empty(),
            |i, asleep| {
                if asleep {
                    i.waiters += 1;
                } else {
                    i.waiters -= 1;
                }
            },
        );
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
    #[inline]
    pub(crate) fn deliver(&self, header: &[u8], data: &[u8]) {
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
        g.handed += 1;
        let r = g
            .taker
            .as_ref()
            .expect("hand() is called with a taker lent")
            .hand(src, data);
        if let Err(e) = r {
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
/// A peer's hello: note that it arrived (a malformed one is ignored: the
/// handshake then times out naming the peer).
pub(crate) fn hello(shared: &Shared, header: &[u8]) {
    if let Ok(src) = <[u8; 4]>::try_from(header) {
        let src = u32::from_le_bytes(src) as usize;
        if let Some(h) = shared.lock().hellos.get_mut(src) {
            *h = true;
        }
    }
}

pub(crate) fn revoke(shared: &Shared, header: &[u8], data: &[u8]) {
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

// The request context the callbacks finish (see `ffi::request`).
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
                    let (peer, tag) = wire_tag::split(sender_tag);
                    Completion::TaggedRecv {
                        ctx: self.ctx,
                        peer,
                        tag,
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
