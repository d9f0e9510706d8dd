//! `--cm`: connecting the queue pairs through rdma_cm instead of writing
//! the path attributes by hand.
//!
//! The QPs stay ours (created on our own device context, receive buffers
//! already posted); rdma_cm resolves the route from IP addresses, carries
//! the QP numbers in its REQ/REP, and computes the RTR/RTS attributes
//! (`rdma_init_qp_attr`), as it does for applications that manage their own
//! QPs. Every rank listens on an ephemeral port of the IPv4 address of its
//! RoCE GID; a rank connects actively to every lower rank and accepts the
//! higher ones. Every wait has a deadline.

use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::net::Ipv4Addr;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

use ovbench_core::Rank;
use ovbench_verbs_sys as sys;

use crate::QueuePair;

const PRIV_MAGIC: &[u8; 4] = b"OVBC";
const RESOLVE_MS: c_int = 5000;

/// `rdma_connect` and `rdma_accept` alike.
type ConnCall = unsafe extern "C" fn(*mut sys::rdma_cm_id, *mut sys::rdma_conn_param) -> c_int;

/// One connection step that rdma_cm drives for a peer.
pub(crate) struct CmPeer<'a> {
    pub rank: Rank,
    pub qp: &'a QueuePair,
    /// Where the peer listens (for the ranks this one connects to).
    pub addr: Option<(Ipv4Addr, u16)>,
}

/// The event channel, the listener and every connection's id.
pub struct CmEndpoint {
    channel: *mut sys::rdma_event_channel,
    listener: *mut sys::rdma_cm_id,
    ids: Vec<*mut sys::rdma_cm_id>,
    ip: Ipv4Addr,
    port: u16,
}

// SAFETY: rdma_cm ids and channels may be used from any thread; &mut
// serialises our use.
unsafe impl Send for CmEndpoint {}

fn os_err(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

fn sockaddr(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn event_name(e: sys::rdma_cm_event_type) -> String {
    // SAFETY: rdma_event_str returns a static string for any value.
    unsafe { CStr::from_ptr(sys::rdma_event_str(e)) }
        .to_string_lossy()
        .into_owned()
}

impl CmEndpoint {
    /// Listen on an ephemeral port of `ip`.
    pub fn listen(ip: Ipv4Addr) -> Result<CmEndpoint, String> {
        // SAFETY: no arguments; the channel is owned or NULL.
        let channel = unsafe { sys::rdma_create_event_channel() };
        if channel.is_null() {
            return Err(os_err(
                "rdma_create_event_channel (is the rdma_ucm module loaded? `modprobe rdma_ucm`)",
            ));
        }
        let mut ep = CmEndpoint {
            channel,
            listener: std::ptr::null_mut(),
            ids: Vec::new(),
            ip,
            port: 0,
        };
        // SAFETY: `channel` is a valid, owned, blocking channel; set O_NONBLOCK on its fd.
        let ok = unsafe {
            let fd = (*channel).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(os_err("fcntl(O_NONBLOCK) on the rdma_cm event channel"));
        }
        let mut id: *mut sys::rdma_cm_id = std::ptr::null_mut();
        // SAFETY: valid channel and out-pointer.
        if unsafe { sys::rdma_create_id(channel, &mut id, std::ptr::null_mut(), sys::RDMA_PS_TCP) }
            != 0
        {
            return Err(os_err("rdma_create_id"));
        }
        ep.listener = id;
        let mut sa = sockaddr(ip, 0);
        // SAFETY: id is live; sa is a valid sockaddr_in for the call's duration.
        if unsafe { sys::rdma_bind_addr(id, (&mut sa as *mut libc::sockaddr_in).cast()) } != 0 {
            return Err(os_err(&format!("rdma_bind_addr to {ip}")));
        }
        // SAFETY: bound id.
        if unsafe { sys::rdma_listen(id, 64) } != 0 {
            return Err(os_err(&format!("rdma_listen on {ip}")));
        }
        // SAFETY: bound id; the port comes back in network order.
        ep.port = u16::from_be(unsafe { sys::rdma_get_src_port(id) });
        Ok(ep)
    }

    /// The address peers connect to.
    pub fn addr(&self) -> (Ipv4Addr, u16) {
        (self.ip, self.port)
    }

    /// Connect to every peer in `peers` (active towards those with an
    /// address, passive for the rest) and bring each QP to RTS.
    pub(crate) fn connect(
        &mut self,
        me: Rank,
        peers: &[CmPeer<'_>],
        rd_atomic: (u8, u8),
        retry: (u8, u8),
        ack_timeout: u8,
        deadline: Duration,
    ) -> Result<(), (Option<Rank>, String)> {
        let end = Instant::now() + deadline;
        let mut by_id: HashMap<usize, usize> = HashMap::new();
        let by_rank: HashMap<Rank, usize> =
            peers.iter().enumerate().map(|(i, p)| (p.rank, i)).collect();
        let mut done = vec![false; peers.len()];
        let private = {
            let mut v = PRIV_MAGIC.to_vec();
            v.extend_from_slice(&me.to_le_bytes());
            v
        };
        for (i, p) in peers.iter().enumerate() {
            let Some((ip, port)) = p.addr else { continue };
            let mut id: *mut sys::rdma_cm_id = std::ptr::null_mut();
            // SAFETY: live channel, valid out-pointer.
            if unsafe {
                sys::rdma_create_id(
                    self.channel,
                    &mut id,
                    std::ptr::null_mut(),
                    sys::RDMA_PS_TCP,
                )
            } != 0
            {
                return Err((Some(p.rank), os_err("rdma_create_id")));
            }
            self.ids.push(id);
            by_id.insert(id as usize, i);
            let mut src = sockaddr(self.ip, 0);
            let mut dst = sockaddr(ip, port);
            // SAFETY: live id; both sockaddrs valid during the call.
            let rc = unsafe {
                sys::rdma_resolve_addr(
                    id,
                    (&mut src as *mut libc::sockaddr_in).cast(),
                    (&mut dst as *mut libc::sockaddr_in).cast(),
                    RESOLVE_MS,
                )
            };
            if rc != 0 {
                return Err((
                    Some(p.rank),
                    os_err(&format!("rdma_resolve_addr to {ip}:{port}")),
                ));
            }
        }
        while done.iter().any(|d| !d) {
            let ev = self.next_event(end).map_err(|e| {
                let missing: Vec<Rank> = peers
                    .iter()
                    .zip(&done)
                    .filter(|(_, d)| !**d)
                    .map(|(p, _)| p.rank)
                    .collect();
                (
                    missing.first().copied(),
                    format!("{e} (still unconnected: ranks {missing:?})"),
                )
            })?;
            // Copy what is needed, then acknowledge (the event owns its private data).
            // SAFETY: ev is a live event until acknowledged below.
            let (id, kind, status, priv_data) = unsafe {
                let e = &*ev;
                let c = e.param.conn;
                let pd = if c.private_data.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(
                        c.private_data as *const u8,
                        c.private_data_len as usize,
                    )
                    .to_vec()
                };
                (e.id, e.event, e.status, pd)
            };
            // SAFETY: ev came from rdma_get_cm_event and is acknowledged once.
            unsafe { sys::rdma_ack_cm_event(ev) };
            let step = match kind {
                sys::RDMA_CM_EVENT_CONNECT_REQUEST => {
                    self.ids.push(id);
                    let from = (priv_data.len() >= 8 && &priv_data[..4] == PRIV_MAGIC)
                        .then(|| u32::from_le_bytes(priv_data[4..8].try_into().expect("4 bytes")));
                    match from.and_then(|r| by_rank.get(&r).map(|&i| (r, i))) {
                        Some((r, i)) if peers[i].addr.is_none() && !done[i] => {
                            by_id.insert(id as usize, i);
                            self.accept(id, peers[i].qp, &private, rd_atomic, retry, ack_timeout)
                                .map_err(|e| (Some(r), e))
                        }
                        _ => {
                            // SAFETY: a request id we do not want: reject it (it is destroyed on drop).
                            unsafe { sys::rdma_reject(id, std::ptr::null(), 0) };
                            Ok(())
                        }
                    }
                }
                _ => {
                    let Some(&i) = by_id.get(&(id as usize)) else {
                        continue;
                    };
                    let p = &peers[i];
                    let fail = |what: &str| {
                        (
                            Some(p.rank),
                            format!("{what}: {} (status {status})", event_name(kind)),
                        )
                    };
                    match kind {
                        sys::RDMA_CM_EVENT_ADDR_RESOLVED => {
                            // SAFETY: live id with a resolved address.
                            if unsafe { sys::rdma_resolve_route(id, RESOLVE_MS) } != 0 {
                                Err((Some(p.rank), os_err("rdma_resolve_route")))
                            } else {
                                Ok(())
                            }
                        }
                        sys::RDMA_CM_EVENT_ROUTE_RESOLVED => {
                            let connect = ("rdma_connect", sys::rdma_connect as ConnCall);
                            Self::conn_call(connect, id, p.qp, &private, rd_atomic, retry)
                                .map_err(|e| (Some(p.rank), e))
                        }
                        sys::RDMA_CM_EVENT_CONNECT_RESPONSE => {
                            let r = to_state(id, p.qp, sys::IBV_QPS_RTR, ack_timeout)
                                .and_then(|_| to_state(id, p.qp, sys::IBV_QPS_RTS, ack_timeout))
                                // SAFETY: live id whose QP we moved to RTS.
                                .and_then(|_| match unsafe { sys::rdma_establish(id) } {
                                    0 => Ok(()),
                                    _ => Err(os_err("rdma_establish")),
                                });
                            done[i] = r.is_ok();
                            r.map_err(|e| (Some(p.rank), e))
                        }
                        sys::RDMA_CM_EVENT_ESTABLISHED if done[i] => Ok(()),
                        sys::RDMA_CM_EVENT_ESTABLISHED => {
                            let r = to_state(id, p.qp, sys::IBV_QPS_RTS, ack_timeout);
                            done[i] = r.is_ok();
                            r.map_err(|e| (Some(p.rank), e))
                        }
                        sys::RDMA_CM_EVENT_REJECTED => Err(fail("the connection was rejected")),
                        sys::RDMA_CM_EVENT_TIMEWAIT_EXIT | sys::RDMA_CM_EVENT_DISCONNECTED => {
                            Ok(())
                        }
                        _ => Err(fail("rdma_cm connection failed")),
                    }
                }
            };
            step?;
        }
        Ok(())
    }

    fn conn_param(
        qp: &QueuePair,
        private: &[u8],
        rd_atomic: (u8, u8),
        retry: (u8, u8),
    ) -> sys::rdma_conn_param {
        sys::rdma_conn_param {
            private_data: private.as_ptr().cast(),
            private_data_len: private.len() as u8,
            responder_resources: rd_atomic.0,
            initiator_depth: rd_atomic.1,
            retry_count: retry.0,
            rnr_retry_count: retry.1,
            qp_num: qp.qp_num(),
            ..Default::default()
        }
    }

    /// `rdma_connect` or `rdma_accept` (`call`, named for errors) on `id`
    /// with this QP's connection parameters: the two differ only in which.
    fn conn_call(
        (name, call): (&str, ConnCall),
        id: *mut sys::rdma_cm_id,
        qp: &QueuePair,
        private: &[u8],
        rd_atomic: (u8, u8),
        retry: (u8, u8),
    ) -> Result<(), String> {
        let mut param = Self::conn_param(qp, private, rd_atomic, retry);
        // SAFETY: live id (with a resolved route, or a request being
        // accepted); param and its private data live across the call.
        if unsafe { call(id, &mut param) } != 0 {
            return Err(os_err(name));
        }
        Ok(())
    }

    fn accept(
        &self,
        id: *mut sys::rdma_cm_id,
        qp: &QueuePair,
        private: &[u8],
        rd_atomic: (u8, u8),
        retry: (u8, u8),
        ack_timeout: u8,
    ) -> Result<(), String> {
        to_state(id, qp, sys::IBV_QPS_RTR, ack_timeout)?;
        let accept = ("rdma_accept", sys::rdma_accept as ConnCall);
        Self::conn_call(accept, id, qp, private, rd_atomic, retry)
    }

    /// The next event, waiting at most until `end`.
    fn next_event(&self, end: Instant) -> Result<*mut sys::rdma_cm_event, String> {
        loop {
            let mut ev: *mut sys::rdma_cm_event = std::ptr::null_mut();
            // SAFETY: live non-blocking channel, valid out-pointer.
            if unsafe { sys::rdma_get_cm_event(self.channel, &mut ev) } == 0 {
                return Ok(ev);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(format!("rdma_get_cm_event: {e}"));
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("timed out waiting for rdma_cm".into());
            }
            let mut p = libc::pollfd {
                // SAFETY: live channel; fd is a plain field.
                fd: unsafe { (*self.channel).fd },
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 1000) as c_int) };
        }
    }
}

/// Move `qp` to `state` with the attributes rdma_cm computed for `id`,
/// except the local ACK timeout: rdma_cm's default (about 1 s per try)
/// would report a dead peer only after many seconds, so ours (the
/// `timeout` exponent, perftest's 14, about 67 ms) replaces it.
fn to_state(
    id: *mut sys::rdma_cm_id,
    qp: &QueuePair,
    state: sys::ibv_qp_state,
    ack_timeout: u8,
) -> Result<(), String> {
    let mut attr = sys::ibv_qp_attr {
        qp_state: state,
        ..Default::default()
    };
    let mut mask: c_int = 0;
    // SAFETY: live id; attr and mask are valid in/out values.
    if unsafe { sys::rdma_init_qp_attr(id, &mut attr, &mut mask) } != 0 {
        return Err(os_err("rdma_init_qp_attr"));
    }
    if mask & sys::IBV_QP_TIMEOUT as c_int != 0 {
        attr.timeout = ack_timeout;
    }
    qp.modify_raw(&mut attr, mask).map_err(|e| e.to_string())
}

impl Drop for CmEndpoint {
    fn drop(&mut self) {
        for &id in self.ids.iter().chain(std::iter::once(&self.listener)) {
            if !id.is_null() {
                // SAFETY: each id is owned and destroyed once; our QPs are not
                // attached to them, so this only tears down the CM state.
                unsafe { sys::rdma_destroy_id(id) };
            }
        }
        // SAFETY: every id on the channel is gone; destroyed once.
        unsafe { sys::rdma_destroy_event_channel(self.channel) };
    }
}
