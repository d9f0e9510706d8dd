//! UCX's client-server path: a listener on a socket address
//! (`ucp_listener_create`) whose connection requests are queued with the
//! client id each client sent (`ucp_conn_request_query`), and the socket
//! addresses handed to UCX.
//!
//! UCX picks the connection manager by its `UCX_SOCKADDR_TLS_PRIORITY`
//! (`rdmacm,tcp` by default): rdmacm on an RDMA device's IP address, the
//! tcp one elsewhere. Either way the lanes are then wired up through the
//! connection's private data, so no auxiliary transport (UD) is needed.

use std::ffi::c_void;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ptr;
use std::sync::{Arc, Mutex};

use ovbench_ucx_sys as sys;

use super::worker::{Worker, WorkerInner};

/// A connection request a client made, not yet accepted nor rejected.
pub(crate) struct ConnRequest {
    pub(super) raw: sys::ucp_conn_request_h,
    /// What the client put in its worker's `client_id` (ovbench: its
    /// rank); `None` when UCX could not say.
    pub client_id: Option<u64>,
}

// SAFETY: a connection request is a handle UCX gives once to the
// listener's callback; it is used (accepted or rejected) exactly once,
// by whichever thread takes it out of the queue.
unsafe impl Send for ConnRequest {}

/// A listening socket address on a worker; pending requests are rejected
/// and the listener destroyed on drop.
pub(crate) struct Listener {
    raw: sys::ucp_listener_h,
    /// Boxed so the address given to UCX as the callback's argument stays
    /// put; the callback may run on a progress thread, hence the mutex.
    pending: Box<Mutex<Vec<ConnRequest>>>,
    bound: SocketAddr,
    _worker: Arc<WorkerInner>,
}

// SAFETY: the listener is used by the transport's thread only (creation,
// queue draining, destruction); its callback reaches `pending` through
// the mutex.
unsafe impl Send for Listener {}

impl Listener {
    /// Listen on `at` (port 0: any free port) on `worker`.
    pub fn new(worker: &Worker, at: SocketAddr) -> Result<Listener, sys::ucs_status_t> {
        let pending: Box<Mutex<Vec<ConnRequest>>> = Box::default();
        let (storage, len) = to_raw(at);
        let params = sys::ucp_listener_params_t {
            field_mask: (sys::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR
                | sys::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER) as u64,
            sockaddr: sys::ucs_sock_addr_t {
                addr: ptr::from_ref(&storage).cast(),
                addrlen: len,
            },
            conn_handler: sys::ucp_listener_conn_handler_t {
                cb: Some(conn_cb),
                arg: ptr::from_ref::<Mutex<Vec<ConnRequest>>>(&pending) as *mut c_void,
            },
            ..Default::default()
        };
        let mut raw: sys::ucp_listener_h = ptr::null_mut();
        // SAFETY: the worker is live; the socket address is read during the
        // call only; the callback's argument is the boxed queue, which
        // outlives the listener (destroyed first in Drop).
        let st = unsafe { sys::ucp_listener_create(worker.raw(), &params, &mut raw) };
        if st != sys::UCS_OK {
            return Err(st);
        }
        let mut attr = sys::ucp_listener_attr_t {
            field_mask: sys::UCP_LISTENER_ATTR_FIELD_SOCKADDR as u64,
            ..Default::default()
        };
        // SAFETY: the listener was just created; attr is a valid out-param.
        let st = unsafe { sys::ucp_listener_query(raw, &mut attr) };
        let bound = if st == sys::UCS_OK {
            from_raw(&attr.sockaddr).unwrap_or(at)
        } else {
            at
        };
        Ok(Listener {
            raw,
            pending,
            bound,
            _worker: worker.inner.clone(),
        })
    }

    /// The address it listens on, with the port UCX chose.
    pub fn bound(&self) -> SocketAddr {
        self.bound
    }

    /// Take every request that arrived (the worker's progress runs the
    /// callback that queues them).
    pub fn take(&self) -> Vec<ConnRequest> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Refuse a request (a client that is not expected, or a duplicate).
    pub fn reject(&self, req: ConnRequest) {
        // SAFETY: the listener is live; the request came from its callback
        // and is used here once (taken by value).
        unsafe { sys::ucp_listener_reject(self.raw, req.raw) };
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        for req in self.take() {
            self.reject(req);
        }
        // SAFETY: created in new(), destroyed once; no callback runs after
        // this returns, so `pending` may go after it.
        unsafe { sys::ucp_listener_destroy(self.raw) };
    }
}

/// The connection handler: note the client's id and queue the request.
unsafe extern "C" fn conn_cb(conn_request: sys::ucp_conn_request_h, arg: *mut c_void) {
    let mut attr = sys::ucp_conn_request_attr_t {
        field_mask: sys::UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID as u64,
        ..Default::default()
    };
    // SAFETY: the request is live inside its callback; attr is a valid
    // out-param.
    let st = unsafe { sys::ucp_conn_request_query(conn_request, &mut attr) };
    let client_id = (st == sys::UCS_OK).then_some(attr.client_id);
    // SAFETY: arg is the listener's boxed queue, alive until after the
    // listener is destroyed.
    let pending = unsafe { &*(arg as *const Mutex<Vec<ConnRequest>>) };
    pending
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(ConnRequest {
            raw: conn_request,
            client_id,
        });
}

/// A socket address as C's `sockaddr_storage`, and its length.
pub(super) fn to_raw(at: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero bytes are a valid sockaddr_storage (plain integers).
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match at {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for
            // sockaddr_in, as the socket API guarantees.
            unsafe { ptr::write(ptr::from_mut(&mut storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { ptr::write(ptr::from_mut(&mut storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The IPv4 or IPv6 address in a `sockaddr_storage` UCX filled in.
fn from_raw(s: &sys::sockaddr_storage) -> Option<SocketAddr> {
    let base: *const sys::sockaddr_storage = s;
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, and
            // storage is larger than it (unaligned read: bindgen's storage
            // type may be less aligned than libc's).
            let sin: libc::sockaddr_in = unsafe { ptr::read_unaligned(base.cast()) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: libc::sockaddr_in6 = unsafe { ptr::read_unaligned(base.cast()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::new(
                IpAddr::V6(ip),
                u16::from_be(sin6.sin6_port),
            ))
        }
        _ => None,
    }
}
