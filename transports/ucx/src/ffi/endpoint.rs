//! Endpoints (`ucp_ep_create`, `ucp_ep_close_nbx`) and the operations
//! posted on them: active-message and tagged sends, put, get, flush.
//!
//! Two ways to post: from a caller's buffer with `FORCE_IMM_CMPL`
//! (`*_imm`: done inside the call or refused, nothing outlives it), or
//! with an [`Op`] that owns what UCX reads until the completion callback
//! (the staging buffer of an active message) or a [`RegionBuf`] of the
//! transport's own memory.

use std::ffi::c_void;
use std::net::SocketAddr;
use std::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ovbench_core::{Completion, OpKind, Rank};
use ovbench_ucx_sys as sys;

use super::context::printed;
use super::listener::{to_raw, ConnRequest};
use super::memory::{RegionBuf, RmaBuf};
use super::request::{self, Op, Posted, Request};
use super::rkey::Rkey;
use super::worker::{Worker, WorkerInner};
use crate::ops::Shared;
use crate::status::status_str;

/// How long dropping an endpoint waits for its close.
const CLOSE_DEADLINE: Duration = Duration::from_secs(2);

/// What the endpoint error handler needs to name the peer.
struct EpErrArg {
    shared: *const Shared,
    peer: Rank,
}

/// An endpoint to one peer; keeps its worker alive and is closed (forced,
/// progressing the worker up to two seconds) on drop.
pub(crate) struct Endpoint {
    raw: sys::ucp_ep_h,
    pub(super) worker: Arc<WorkerInner>,
    /// Boxed so the address given to UCX stays put; freed after the close.
    _err: Box<EpErrArg>,
}

// SAFETY: the endpoint is used by one thread at a time (the transport's
// &mut self); the error-handler argument points to the worker's Shared,
// reached only through its cell.
unsafe impl Send for Endpoint {}

impl Endpoint {
    /// Connect to the worker at `address` (`peer`, for error reports).
    /// With `detect`, ask for error mode PEER (a dead peer becomes an
    /// error completion); transports that refuse it (shared memory
    /// without keepalive) get an endpoint without, and the second value
    /// says which was made.
    pub fn create(
        worker: &Worker,
        address: &[u8],
        peer: Rank,
        detect: bool,
    ) -> Result<(Endpoint, bool), sys::ucs_status_t> {
        let arg = Box::new(EpErrArg {
            shared: worker.shared(),
            peer,
        });
        let mut params = sys::ucp_ep_params_t {
            field_mask: (sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
                | sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER) as u64,
            address: address.as_ptr().cast(),
            err_mode: sys::UCP_ERR_HANDLING_MODE_PEER,
            err_handler: sys::ucp_err_handler_t {
                cb: Some(ep_err_cb),
                arg: &*arg as *const EpErrArg as *mut c_void,
            },
            ..Default::default()
        };
        if !detect {
            params.field_mask = sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS as u64;
        }
        let mut raw: sys::ucp_ep_h = ptr::null_mut();
        // SAFETY: the worker is live; the address bytes stay valid for the
        // call (UCX unpacks them); the error-handler arg is boxed and kept
        // by the endpoint until after its close.
        let mut st = unsafe { sys::ucp_ep_create(worker.raw(), &params, &mut raw) };
        let mut detecting = detect;
        if st == sys::UCS_ERR_UNREACHABLE && detect {
            // Shared-memory transports without keepalive (posix, sysv)
            // refuse peer-failure detection: connect without it and
            // rely on the callers' deadlines instead.
            let mut plain = params;
            plain.field_mask = sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS as u64;
            // SAFETY: as above.
            st = unsafe { sys::ucp_ep_create(worker.raw(), &plain, &mut raw) };
            detecting = false;
        }
        if st != sys::UCS_OK {
            return Err(st);
        }
        let ep = Endpoint {
            raw,
            worker: worker.inner.clone(),
            _err: arg,
        };
        Ok((ep, detecting))
    }

    /// Connect as a client to the listener at `at` (UCX's client-server
    /// path), sending the worker's client id (the rank) so the server
    /// knows which peer this is; error mode PEER.
    pub fn connect_to(
        worker: &Worker,
        at: SocketAddr,
        peer: Rank,
    ) -> Result<Endpoint, sys::ucs_status_t> {
        let (storage, len) = to_raw(at);
        Endpoint::with_peer_errors(worker, peer, |params| {
            params.field_mask |=
                (sys::UCP_EP_PARAM_FIELD_SOCK_ADDR | sys::UCP_EP_PARAM_FIELD_FLAGS) as u64;
            params.flags =
                sys::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER | sys::UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID;
            params.sockaddr = sys::ucs_sock_addr_t {
                addr: ptr::from_ref(&storage).cast(),
                addrlen: len,
            };
        })
    }

    /// Accept a client's connection request (`peer`, as its client id
    /// said); error mode PEER.
    pub fn accept(
        worker: &Worker,
        req: ConnRequest,
        peer: Rank,
    ) -> Result<Endpoint, sys::ucs_status_t> {
        Endpoint::with_peer_errors(worker, peer, |params| {
            params.field_mask |= sys::UCP_EP_PARAM_FIELD_CONN_REQUEST as u64;
            params.conn_request = req.raw;
        })
    }

    /// `ucp_ep_create` with error mode PEER and the error handler naming
    /// `peer`, plus what `set` adds (a socket address or a request).
    fn with_peer_errors(
        worker: &Worker,
        peer: Rank,
        set: impl FnOnce(&mut sys::ucp_ep_params_t),
    ) -> Result<Endpoint, sys::ucs_status_t> {
        let arg = Box::new(EpErrArg {
            shared: worker.shared(),
            peer,
        });
        let mut params = sys::ucp_ep_params_t {
            field_mask: (sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER) as u64,
            err_mode: sys::UCP_ERR_HANDLING_MODE_PEER,
            err_handler: sys::ucp_err_handler_t {
                cb: Some(ep_err_cb),
                arg: &*arg as *const EpErrArg as *mut c_void,
            },
            ..Default::default()
        };
        set(&mut params);
        let mut raw: sys::ucp_ep_h = ptr::null_mut();
        // SAFETY: the worker is live; what `set` points to (a socket
        // address on the caller's frame, a connection request UCX gave)
        // is valid for the call, which consumes the request; the
        // error-handler arg is boxed and kept by the endpoint until after
        // its close.
        let st = unsafe { sys::ucp_ep_create(worker.raw(), &params, &mut raw) };
        if st != sys::UCS_OK {
            return Err(st);
        }
        Ok(Endpoint {
            raw,
            worker: worker.inner.clone(),
            _err: arg,
        })
    }

    /// The raw handle, for unpacking keys.
    pub(super) fn raw(&self) -> sys::ucp_ep_h {
        self.raw
    }

    /// What `ucp_ep_print_info` writes (the lane table).
    pub fn print_info(&self) -> Option<String> {
        let raw = self.raw;
        // SAFETY: the endpoint is live; the stream is an open FILE* (libc's
        // and UCX's FILE are the same C type).
        printed(|f| unsafe { sys::ucp_ep_print_info(raw, f.cast()) })
    }

    /// Flush without a callback (the wire-up): `None` when done at once,
    /// else the request to poll.
    pub fn flush(&self) -> Result<Option<Request>, sys::ucs_status_t> {
        let p = sys::ucp_request_param_t::default();
        // SAFETY: the endpoint is live; the request has no callback and is
        // owned by the Request made from it.
        unsafe { Request::from_status_ptr(sys::ucp_ep_flush_nbx(self.raw, &p)) }
    }

    /// Flush completing through `op`: every put posted before it is then
    /// placed at the target.
    #[inline]
    pub fn flush_op(&self, op: Box<Op>) -> Posted {
        request::post(op, |user_data| {
            let p = request::send_params(user_data);
            // SAFETY: the endpoint is live; user_data is the op (post()).
            unsafe { sys::ucp_ep_flush_nbx(self.raw, &p) }
        })
    }

    /// Active message `id` of `msg` (the first `hdr_len` bytes its
    /// header), only if UCX sends it inside the call: true when sent,
    /// false when UCX would have to keep it.
    #[inline]
    pub fn am_send_imm(
        &self,
        id: u32,
        msg: &[u8],
        hdr_len: usize,
    ) -> Result<bool, sys::ucs_status_t> {
        let (h, d) = msg.split_at(hdr_len);
        let mut params = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_FLAGS | sys::UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
            ..Default::default()
        };
        params.flags = sys::UCP_AM_SEND_FLAG_EAGER;
        // SAFETY: the endpoint is live; `msg` outlives the call, and with
        // FORCE_IMM_CMPL UCX either sends it inside the call or refuses
        // (immediate() finishes a request that came back anyway).
        unsafe {
            let r = sys::ucp_am_send_nbx(
                self.raw,
                id,
                h.as_ptr().cast(),
                h.len(),
                d.as_ptr().cast(),
                d.len(),
                &params,
            );
            request::immediate(&self.worker, r)
        }
    }

    /// Active message `id` of `op`'s staging buffer (the first `hdr_len`
    /// bytes its header), eager; the op owns the buffer until completion.
    #[inline]
    pub fn am_send(&self, id: u32, hdr_len: usize, op: Box<Op>) -> Posted {
        let (base, len) = op
            .staging
            .as_ref()
            .map_or((ptr::null(), 0), |b| (b.as_ptr(), b.len()));
        let hdr_len = hdr_len.min(len);
        request::post(op, |user_data| {
            let mut p = request::send_params(user_data);
            p.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_FLAGS;
            p.flags = sys::UCP_AM_SEND_FLAG_EAGER;
            // SAFETY: the endpoint is live; header and data point into the
            // staging buffer owned by the op, whose heap block stays put
            // until the callback (or post() hands the op back).
            unsafe {
                sys::ucp_am_send_nbx(
                    self.raw,
                    id,
                    base.cast(),
                    hdr_len,
                    base.add(hdr_len).cast(),
                    len - hdr_len,
                    &p,
                )
            }
        })
    }

    /// UCX's tagged send of `buf`, only if done inside the call.
    #[inline]
    pub fn tag_send_imm(&self, buf: RegionBuf, tag: u64) -> Result<bool, sys::ucs_status_t> {
        let params = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
            ..Default::default()
        };
        // SAFETY: the endpoint is live; buf lies in a live transport region
        // and, as in am_send_imm, nothing outlives the call.
        unsafe {
            let r = sys::ucp_tag_send_nbx(self.raw, buf.ptr().cast(), buf.len(), tag, &params);
            request::immediate(&self.worker, r)
        }
    }

    /// UCX's tagged send of `buf` (`sync`: the synchronous one) completing
    /// through `op`.
    #[inline]
    pub fn tag_send(&self, buf: RegionBuf, tag: u64, sync: bool, op: Box<Op>) -> Posted {
        request::post(op, |user_data| {
            let p = request::send_params(user_data);
            // SAFETY: the endpoint is live; buf lies in a live transport
            // region, kept until this send completes (see `ffi`).
            unsafe {
                if sync {
                    sys::ucp_tag_send_sync_nbx(self.raw, buf.ptr().cast(), buf.len(), tag, &p)
                } else {
                    sys::ucp_tag_send_nbx(self.raw, buf.ptr().cast(), buf.len(), tag, &p)
                }
            }
        })
    }

    /// Put `local` at `raddr` through `rkey`, without a completion of its
    /// own: a later [`flush_op`](Self::flush_op) reports it.
    pub fn put(&self, local: RmaBuf, raddr: u64, rkey: &Rkey) -> Result<(), sys::ucs_status_t> {
        let p = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_MEMH,
            memh: local.memh(),
            ..Default::default()
        };
        let b = local.buf();
        // SAFETY: the endpoint and rkey are live; the local range lies in a
        // registration that stays mapped until the flush completes; the
        // remote range was checked against the key. The request has no
        // callback; dropping it releases it (UCX frees it when done).
        unsafe {
            let r = sys::ucp_put_nbx(self.raw, b.ptr().cast(), b.len(), raddr, rkey.raw(), &p);
            Request::from_status_ptr(r).map(drop)
        }
    }

    /// Get `raddr` through `rkey` into `local`, completing through `op`.
    pub fn get(&self, local: RmaBuf, raddr: u64, rkey: &Rkey, op: Box<Op>) -> Posted {
        let b = local.buf();
        request::post(op, |user_data| {
            let mut p = request::send_params(user_data);
            p.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMH;
            p.memh = local.memh();
            // SAFETY: the endpoint and rkey are live; the local range lies
            // in a registration kept until this get completes.
            unsafe { sys::ucp_get_nbx(self.raw, b.ptr().cast(), b.len(), raddr, rkey.raw(), &p) }
        })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let p = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_FLAGS,
            flags: sys::UCP_EP_CLOSE_FLAG_FORCE,
            ..Default::default()
        };
        // SAFETY: the endpoint is live and closed once; the request has no
        // callback and is owned by the Request made from it.
        let r = unsafe { Request::from_status_ptr(sys::ucp_ep_close_nbx(self.raw, &p)) };
        if let Ok(Some(req)) = r {
            let deadline = Instant::now() + CLOSE_DEADLINE;
            while req.status() == sys::UCS_INPROGRESS && Instant::now() < deadline {
                self.worker.progress();
            }
        }
    }
}

/// Endpoint error handler: the peer is gone or the link failed.
unsafe extern "C" fn ep_err_cb(arg: *mut c_void, _ep: sys::ucp_ep_h, status: sys::ucs_status_t) {
    // SAFETY: arg is the endpoint's boxed EpErrArg, freed only after the
    // endpoint is closed.
    let a = unsafe { &*(arg as *const EpErrArg) };
    // SAFETY: the worker's Shared outlives the worker and its endpoints.
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
