//! `Transport::trecv_wait`: a blocking tagged receive that waits inside
//! the transport, as ucx_perftest's does. Its callback writes the result
//! into a slot on this stack frame; no operation box, no completion
//! queue, no poll round trip through the caller. The frame outlives the
//! request: every way out first makes sure the callback has run.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use ovbench_core::{stop, Completion, LocalSlice, OpKind, Rank, Tag, TransportError, Waited};
use ovbench_ucx_sys as sys;

use super::UcxTransport;
use crate::ops::TAG_SRC_SHIFT;
use crate::status;

/// Progress calls between two looks at the clock and the peers.
const SPINS_PER_CHECK: u32 = 1024;

/// Where the receive's callback leaves its result.
struct Slot {
    done: bool,
    status: sys::ucs_status_t,
    sender_tag: u64,
    len: usize,
}

/// Completion callback of a [`UcxTransport::recv_here`] receive.
unsafe extern "C" fn slot_cb(
    request: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the Slot of the recv_here frame that posted this
    // request; that frame does not return before this callback has run.
    let slot = unsafe { &mut *(user_data as *mut Slot) };
    slot.status = status;
    if !info.is_null() {
        // SAFETY: UCX passes a valid info for the duration of the callback.
        let i = unsafe { &*info };
        slot.sender_tag = i.sender_tag;
        slot.len = i.length;
    }
    slot.done = true;
    // SAFETY: request is live and handed to this callback, which frees it.
    unsafe { sys::ucp_request_free(request) };
}

impl UcxTransport {
    /// The receive of `trecv_wait` (not with a progress thread, whose
    /// callbacks would run on another thread than this frame's).
    pub(super) fn recv_here(
        &mut self,
        src: Option<Rank>,
        tag: Option<Tag>,
        dst: LocalSlice,
        timeout: Duration,
    ) -> Result<Waited, TransportError> {
        if self.thread.is_some() {
            return Ok(Waited::Unsupported);
        }
        let (utag, mask) = self.recv_selector(src, tag)?;
        let p = self.mem.ptr(dst)?;
        let mut slot = Slot {
            done: false,
            status: sys::UCS_OK,
            sender_tag: 0,
            len: 0,
        };
        let slot_ptr: *mut Slot = &mut slot;
        let params = Self::tag_recv_params(slot_ptr.cast(), Some(slot_cb));
        // SAFETY: the worker is live; dst lies in a live region; `slot`
        // outlives the request (see the loop below).
        let r = unsafe {
            sys::ucp_tag_recv_nbx(self.ucp.worker, p.cast(), dst.len, utag, mask, &params)
        };
        if sys::ptr_is_err(r) {
            return Err(status::peer(
                src.unwrap_or(self.rank),
                OpKind::TaggedRecv,
                "ucp_tag_recv_nbx",
                sys::ptr_status(r),
            ));
        }
        let done = |s: *mut Slot| {
            // SAFETY: the callback writes the slot only inside UCX calls
            // made below, never concurrently with this read.
            unsafe { std::ptr::read_volatile(&(*s).done) }
        };
        // The deadline's clock starts at the first check: most receives
        // finish before it.
        let mut start: Option<Instant> = None;
        let mut spins = 0u32;
        while !done(slot_ptr) {
            self.ucp.progress();
            spins = spins.wrapping_add(1);
            if spins % SPINS_PER_CHECK != 0 || done(slot_ptr) {
                continue;
            }
            let timed_out = start.get_or_insert_with(Instant::now).elapsed() > timeout;
            // A stop asked for by signal ends the wait as a dead peer does.
            let dead = stop::check().err().or_else(|| self.dead_peer(src));
            if timed_out || dead.is_some() {
                // Withdraw the receive; the callback still runs (cancelled,
                // or done if it matched meanwhile) and must run before this
                // frame returns.
                // SAFETY: r is this worker's live request (its callback has
                // not run).
                unsafe { sys::ucp_request_cancel(self.ucp.worker, r) };
                while !done(slot_ptr) {
                    self.ucp.progress();
                }
                if slot.status == sys::UCS_ERR_CANCELED {
                    return match dead {
                        Some(e) => Err(e),
                        None => Ok(Waited::TimedOut),
                    };
                }
                break;
            }
        }
        if slot.status != sys::UCS_OK {
            // As the posted path reports a failed receive (e.g. "Message
            // truncated" for a message longer than `dst`).
            return Err(TransportError::Peer {
                peer: src.unwrap_or(self.rank),
                op: OpKind::TaggedRecv,
                status: status::status_str(slot.status),
            });
        }
        // The sender's rank travels in the tag: checked, not trusted.
        let peer = slot.sender_tag >> TAG_SRC_SHIFT;
        if peer >= u64::from(self.size) || slot.len > dst.len {
            return Err(TransportError::Peer {
                peer: src.unwrap_or(self.rank),
                op: OpKind::TaggedRecv,
                status: format!(
                    "a tagged message names sender {peer} of {} ranks and {} bytes for a {}-byte receive; is another program sharing this UCX worker?",
                    self.size, slot.len, dst.len
                ),
            });
        }
        Ok(Waited::Done {
            peer: peer as Rank,
            tag: slot.sender_tag as u32 as Tag,
            len: slot.len,
        })
    }

    /// Check the peers (their processes at most every CHECK_EVERY): the
    /// error of a dead or failed `src` (any peer, for a wildcard source),
    /// from the process watch or an endpoint error UCX reported. The error
    /// completion stays queued for the caller's next poll too.
    fn dead_peer(&mut self, src: Option<Rank>) -> Option<TransportError> {
        let shared = &self.shared;
        self.watch.check(&mut self.gone, |c| shared.push(c));
        if !self.shared.has_queued() {
            return None;
        }
        let g = self.shared.lock();
        g.completions.iter().find_map(|c| match c {
            Completion::Error {
                peer, op, status, ..
            } if src.map_or(true, |s| s == *peer) => Some(TransportError::Peer {
                peer: *peer,
                op: *op,
                status: status.clone(),
            }),
            _ => None,
        })
    }
}
