//! What UCX holds while an operation is in flight: the boxed [`Op`] given
//! as `user_data` and taken back by the completion callback, the
//! callback-less [`Request`] polled to its end (wire-up, close), and the
//! blocking tagged receive whose callback fills a slot on its own frame.
//!
//! Ownership of an [`Op`] is explicit: [`post`] hands it to UCX and says,
//! as [`Posted`], whether UCX kept it (the callback takes it back exactly
//! once) or gave it back at once (done inside the call, or failed).

use std::ffi::c_void;

use ovbench_core::{Ctx, OpKind, Rank};
use ovbench_ucx_sys as sys;

use super::memory::RegionBuf;
use super::worker::{Worker, WorkerInner};
use crate::ops::Shared;

/// The context of one request in flight, boxed and passed to UCX as
/// `user_data`; the completion callback takes it back (see `ops` for what
/// finishing it does).
pub(crate) struct Op {
    /// The worker's callback state (lives as long as the worker).
    pub shared: *const Shared,
    pub ctx: Ctx,
    pub peer: Rank,
    pub kind: OpKind,
    /// The copied message of an active-message send: its first bytes are
    /// the AM header, the rest the data.
    pub staging: Option<Vec<u8>>,
    /// Internal traffic (key revocations): no completion for the user.
    pub silent: bool,
}

// SAFETY: `shared` points to the worker's callback state, which is owned
// by the worker and reached from any thread only through its lock (see
// `worker::CallbackCell`); the rest is owned data.
unsafe impl Send for Op {}

/// What became of an operation handed to UCX.
pub(crate) enum Posted {
    /// UCX finished it inside the call; no callback will run.
    Done(Box<Op>),
    /// In flight: its callback will run once and take the op back.
    InFlight,
    /// UCX refused it with this status; no callback will run.
    Failed(Box<Op>, sys::ucs_status_t),
}

/// Hand `op` to UCX through `call`, which must pass the pointer it gets
/// as the `user_data` of a request whose callback is [`send_cb`] or
/// [`tag_recv_cb`] (the parameter builders below), and return what the
/// `*_nbx` call returned.
#[inline]
pub(super) fn post(op: Box<Op>, call: impl FnOnce(*mut c_void) -> sys::ucs_status_ptr_t) -> Posted {
    let p = Box::into_raw(op);
    let r = call(p.cast());
    if r.is_null() {
        // SAFETY: NULL: done inside the call, the callback will not run;
        // the box is ours again and taken back once.
        Posted::Done(unsafe { Box::from_raw(p) })
    } else if sys::ptr_is_err(r) {
        // SAFETY: an error pointer: no request, no callback; as above.
        Posted::Failed(unsafe { Box::from_raw(p) }, sys::ptr_status(r))
    } else {
        Posted::InFlight
    }
}

/// Parameters of a send, flush or get completing through [`send_cb`].
#[inline]
pub(super) fn send_params(user_data: *mut c_void) -> sys::ucp_request_param_t {
    let mut p = sys::ucp_request_param_t {
        op_attr_mask: sys::UCP_OP_ATTR_FIELD_CALLBACK | sys::UCP_OP_ATTR_FIELD_USER_DATA,
        user_data,
        ..Default::default()
    };
    p.cb.send = Some(send_cb);
    p
}

/// The parameters of a tagged receive whose callback `cb` gets
/// `user_data`. UCX 1.13 does not fill RECV_INFO when a receive matches
/// an unexpected message inside the call, so immediate completion is
/// turned off: the callback always runs and always has the envelope.
#[inline]
pub(super) fn recv_params(
    user_data: *mut c_void,
    cb: sys::ucp_tag_recv_nbx_callback_t,
) -> sys::ucp_request_param_t {
    let mut p = sys::ucp_request_param_t {
        op_attr_mask: sys::UCP_OP_ATTR_FIELD_CALLBACK
            | sys::UCP_OP_ATTR_FIELD_USER_DATA
            | sys::UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        user_data,
        ..Default::default()
    };
    p.cb.recv = cb;
    p
}

/// Completion callback of sends, flushes (writes) and gets.
pub(super) unsafe extern "C" fn send_cb(
    request: *mut c_void,
    status: sys::ucs_status_t,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the Box<Op> leaked by post(); UCX calls this
    // callback exactly once per request.
    let op = unsafe { Box::from_raw(user_data as *mut Op) };
    // SAFETY: op.shared points to the worker's Shared, which the worker
    // drops only after ucp_worker_destroy (no callback runs after it).
    let shared = unsafe { &*op.shared };
    op.finish(shared, status, None);
    // SAFETY: request is a live request handed to this callback; freeing
    // it here is the documented way to release it.
    unsafe { sys::ucp_request_free(request) };
}

/// Completion callback of posted tagged receives.
pub(super) unsafe extern "C" fn tag_recv_cb(
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

/// A request posted without a callback, polled with [`status`](Self::status)
/// and released on drop (UCX frees an unfinished one once it completes).
pub(crate) struct Request {
    raw: *mut c_void,
}

impl Request {
    /// What a callback-less `*_nbx` call returned: `Ok(None)` done,
    /// `Ok(Some)` in flight, `Err` the status it failed with.
    ///
    /// # Safety
    /// `r` must come from an `*_nbx` call posted without a completion
    /// callback, and not be released elsewhere.
    pub(super) unsafe fn from_status_ptr(
        r: sys::ucs_status_ptr_t,
    ) -> Result<Option<Request>, sys::ucs_status_t> {
        if r.is_null() {
            Ok(None)
        } else if sys::ptr_is_err(r) {
            Err(sys::ptr_status(r))
        } else {
            Ok(Some(Request { raw: r }))
        }
    }

    /// `UCS_INPROGRESS` while in flight, then the final status.
    pub fn status(&self) -> sys::ucs_status_t {
        // SAFETY: raw is a live request until dropped.
        unsafe { sys::ucp_request_check_status(self.raw) }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        // SAFETY: raw is released exactly once.
        unsafe { sys::ucp_request_free(self.raw) };
    }
}

/// What a callback-less call with `FORCE_IMM_CMPL` returned: true when
/// done, false when UCX refused to finish it inside the call
/// (`UCS_ERR_NO_RESOURCE`), the status otherwise. A request despite the
/// flag (not seen with UCX 1.13) may still read the caller's buffer, so
/// it is progressed to its end here, before the buffer can go.
///
/// # Safety
/// As [`Request::from_status_ptr`]; `worker` is the request's worker.
#[inline]
pub(super) unsafe fn immediate(
    worker: &WorkerInner,
    r: sys::ucs_status_ptr_t,
) -> Result<bool, sys::ucs_status_t> {
    if r.is_null() {
        return Ok(true);
    }
    // SAFETY: the caller's promise.
    match unsafe { Request::from_status_ptr(r) } {
        Ok(None) => Ok(true),
        Err(sys::UCS_ERR_NO_RESOURCE) => Ok(false),
        Err(st) => Err(st),
        Ok(Some(req)) => {
            while req.status() == sys::UCS_INPROGRESS {
                worker.progress();
            }
            match req.status() {
                sys::UCS_OK => Ok(true),
                st => Err(st),
            }
        }
    }
}

/// What a blocking tagged receive got: its status (`UCS_ERR_CANCELED`
/// when withdrawn), the sender's tag and the length received.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvInfo {
    pub status: sys::ucs_status_t,
    pub sender_tag: u64,
    pub len: usize,
}

/// Where the receive's callback leaves its result.
struct Slot {
    done: bool,
    info: RecvInfo,
}

/// Completion callback of a [`Worker::tag_recv_wait`] receive.
unsafe extern "C" fn slot_cb(
    request: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the Slot of the tag_recv_wait frame that posted
    // this request; that frame does not end before this callback has run.
    let slot = unsafe { &mut *(user_data as *mut Slot) };
    slot.info.status = status;
    if !info.is_null() {
        // SAFETY: UCX passes a valid info for the duration of the callback.
        let i = unsafe { &*info };
        slot.info.sender_tag = i.sender_tag;
        slot.info.len = i.length;
    }
    slot.done = true;
    // SAFETY: request is live and handed to this callback, which frees it.
    unsafe { sys::ucp_request_free(request) };
}

/// Withdraws the receive and waits for its callback if the wait unwinds,
/// so the slot never goes while UCX may still write it.
struct SlotGuard<'a> {
    worker: &'a Worker,
    request: *mut c_void,
    slot: *mut Slot,
}

impl SlotGuard<'_> {
    fn done(&self) -> bool {
        // SAFETY: the callback writes the slot only inside UCX calls made
        // on this thread, never concurrently with this read.
        unsafe { std::ptr::read_volatile(&(*self.slot).done) }
    }

    /// Withdraw the receive and progress until its callback has run
    /// (cancelled, or done if it matched meanwhile).
    fn cancel(&self) {
        if !self.done() {
            // SAFETY: request is this worker's live request: its callback,
            // which frees it, has not run (the slot says so).
            unsafe { sys::ucp_request_cancel(self.worker.raw(), self.request) };
        }
        while !self.done() {
            self.worker.progress();
        }
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl Worker {
    /// A tagged receive into `buf` that waits here, as ucx_perftest's
    /// does: no operation box, no completion queue. Every `every`
    /// progress calls `give_up` is asked whether to withdraw the receive;
    /// the result is then `UCS_ERR_CANCELED`, or the message if it matched
    /// meanwhile. `Err`: UCX refused the receive. Only where callbacks run
    /// on this thread (no progress thread).
    pub fn tag_recv_wait(
        &self,
        buf: RegionBuf,
        tag: u64,
        mask: u64,
        every: u32,
        mut give_up: impl FnMut() -> bool,
    ) -> Result<RecvInfo, sys::ucs_status_t> {
        let mut slot = Slot {
            done: false,
            info: RecvInfo {
                status: sys::UCS_OK,
                sender_tag: 0,
                len: 0,
            },
        };
        let slot_ptr: *mut Slot = &mut slot;
        let params = recv_params(slot_ptr.cast(), Some(slot_cb));
        // SAFETY: the worker is live; buf lies in a live transport region;
        // `slot` outlives the request: the guard below (also on unwinding)
        // returns only once the callback has run.
        let r = unsafe {
            sys::ucp_tag_recv_nbx(self.raw(), buf.ptr().cast(), buf.len(), tag, mask, &params)
        };
        if sys::ptr_is_err(r) {
            return Err(sys::ptr_status(r));
        }
        let guard = SlotGuard {
            worker: self,
            request: r,
            slot: slot_ptr,
        };
        let mut spins = 0u32;
        while !guard.done() {
            self.progress();
            spins = spins.wrapping_add(1);
            if spins % every != 0 || guard.done() {
                continue;
            }
            if give_up() {
                guard.cancel();
                break;
            }
        }
        drop(guard);
        Ok(slot.info)
    }
}
