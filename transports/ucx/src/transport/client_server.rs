//! `--ucx-connect sockaddr`: UCX's client-server path. Of each pair the
//! lower rank listens and accepts, the higher one connects to the socket
//! address the lower one published; UCX's connection manager (rdmacm on
//! an RDMA device's address, tcp elsewhere) carries the lanes' wire-up.

use std::net::SocketAddr;
use std::time::Instant;

use ovbench_core::{OpKind, Rank, TransportError};

use super::{UcxTransport, WIRE_UP_DEADLINE};
use crate::address::PeerAddress;
use crate::devices::{self, Sysfs};
use crate::ffi::endpoint::Endpoint;
use crate::ffi::listener::Listener;
use crate::ffi::worker::Worker;
use crate::ops::HELLO_AM_ID;
use crate::status;

/// Open the listener on the address of the first selected device's
/// interface; returns it and the header's description of the path.
pub(super) fn listen(
    worker: &Worker,
    sysfs: &Sysfs,
    net_devices: &str,
) -> Result<(Listener, String), TransportError> {
    let (ip, how) = sysfs
        .listen_ip(net_devices, devices::ipv4_of)
        .map_err(|detail| TransportError::Local {
            op: OpKind::Connect,
            detail,
        })?;
    let l = Listener::new(worker, SocketAddr::new(ip, 0)).map_err(|st| {
        status::local(
            OpKind::Connect,
            &format!("ucp_listener_create on {ip}"),
            st,
            "; UCX's connection managers (rdmacm, tcp: `ucx_info -d` lists them) could not listen there; use --ucx-connect worker",
        )
    })?;
    let path = format!(
        "sockaddr (client-server: lower ranks listen, higher ranks connect; this rank listens on {} of {how}; wire-up through UCX's connection manager)",
        l.bound()
    );
    Ok((l, path))
}

impl UcxTransport {
    /// Make every endpoint: as a client to every lower rank and to
    /// itself, and from the connection request of every higher rank (and
    /// its own, kept as `loopback`); then the listener is closed. The
    /// endpoint to itself goes through its own listener too: from the
    /// worker address UCX refuses it when rc has no auxiliary transport
    /// (`UCX_TLS=rc_verbs`: "Destination is unreachable"). Endpoints made
    /// before a failure are kept in `self.eps` unwired, so they are
    /// abandoned, never closed (see `Drop`).
    pub(super) fn connect_client_server(
        &mut self,
        peers: &[PeerAddress<'_>],
    ) -> Result<(), TransportError> {
        let me = self.rank as usize;
        let mut eps: Vec<Option<Endpoint>> = (0..peers.len()).map(|_| None).collect();
        let result = self.make_endpoints(peers, &mut eps);
        let complete = eps.iter().all(Option::is_some) && self.loopback.is_some();
        if result.is_ok() && complete {
            self.eps = eps.into_iter().flatten().collect();
            self.listener = None;
            return Ok(());
        }
        // Kept for `abandon`: indices no longer match ranks, but nothing
        // reaches them once the connect failed.
        self.eps = eps.into_iter().flatten().collect();
        result.and(Err(TransportError::Peer {
            peer: me as Rank,
            op: OpKind::Connect,
            status: "not every endpoint was made".into(),
        }))
    }

    fn make_endpoints(
        &mut self,
        peers: &[PeerAddress<'_>],
        eps: &mut [Option<Endpoint>],
    ) -> Result<(), TransportError> {
        let me = self.rank as usize;
        for (peer, p) in peers.iter().enumerate().take(me + 1) {
            let at = p.listener.expect("decoded on the client-server path");
            let ep = Endpoint::connect_to(&self.worker, at, peer as Rank).map_err(|st| {
                status::peer(
                    peer as Rank,
                    OpKind::Connect,
                    &format!("ucp_ep_create to {at}"),
                    st,
                )
            })?;
            eps[peer] = Some(ep);
        }
        let listener = self.listener.as_ref().expect("made by new");
        let deadline = Instant::now() + WIRE_UP_DEADLINE;
        while eps.iter().any(Option::is_none) || self.loopback.is_none() {
            for req in listener.take() {
                let peer = req.client_id.map(|id| id as usize);
                let free = match peer {
                    Some(p) if p == me => self.loopback.is_none(),
                    Some(p) if p > me && p < eps.len() => eps[p].is_none(),
                    _ => false,
                };
                match peer {
                    Some(p) if free => {
                        let ep = Endpoint::accept(&self.worker, req, p as Rank).map_err(|st| {
                            status::peer(
                                p as Rank,
                                OpKind::Connect,
                                "ucp_ep_create from its connection request",
                                st,
                            )
                        })?;
                        if p == me {
                            self.loopback = Some(ep);
                        } else {
                            eps[p] = Some(ep);
                        }
                    }
                    // Not a rank this one waits for: a stray client.
                    _ => listener.reject(req),
                }
            }
            if Instant::now() > deadline {
                let missing: Vec<String> = eps
                    .iter()
                    .enumerate()
                    .filter(|&(r, e)| e.is_none() || (r == me && self.loopback.is_none()))
                    .map(|(r, _)| r.to_string())
                    .collect();
                return Err(TransportError::Peer {
                    peer: missing[0].parse().unwrap_or(0),
                    op: OpKind::Connect,
                    status: format!(
                        "no connection from rank(s) {} reached this rank's listener {} within {} s: they are not running, cannot reach this address, or were started with another --ucx-connect",
                        missing.join(","),
                        listener.bound(),
                        WIRE_UP_DEADLINE.as_secs()
                    ),
                });
            }
            self.worker.progress();
        }
        Ok(())
    }
}

impl UcxTransport {
    /// Send every peer this rank's hello and wait for all of theirs,
    /// progressing meanwhile. On this path a client's endpoint is wired
    /// once the server has answered, but the server's endpoint is ready
    /// only after the client's UCX has progressed further (the connection
    /// manager's notice, the lanes' own connections): a client that left
    /// connect at once and stopped progressing (waiting on the bootstrap)
    /// left the server's wire-up hanging. A hello is sent only when UCX
    /// takes it inside the call, so one that went out needs no further
    /// progress of its sender.
    pub(super) fn handshake(&mut self) -> Result<(), TransportError> {
        let me = self.rank as usize;
        let mut sent: Vec<bool> = (0..self.eps.len()).map(|p| p == me).collect();
        let msg = self.rank.to_le_bytes();
        let deadline = Instant::now() + WIRE_UP_DEADLINE;
        loop {
            for (p, done) in sent.iter_mut().enumerate().filter(|(_, d)| !**d) {
                *done = self.eps[p]
                    .am_send_imm(HELLO_AM_ID, &msg, msg.len())
                    .map_err(|st| {
                        status::peer(p as Rank, OpKind::Connect, "ucp_am_send_nbx (hello)", st)
                    })?;
            }
            let unheard = {
                let g = self.shared().lock();
                (0..self.eps.len()).find(|&p| p != me && !g.hellos[p])
            };
            let unsent = sent.iter().position(|d| !d);
            let Some(peer) = unheard.or(unsent) else {
                return Ok(());
            };
            if Instant::now() > deadline {
                return Err(TransportError::Peer {
                    peer: peer as Rank,
                    op: OpKind::Connect,
                    status: format!(
                        "the client-server handshake with rank {peer} did not finish within {} s ({}): its endpoints connected but it stopped making progress or died",
                        WIRE_UP_DEADLINE.as_secs(),
                        if unheard.is_some() { "its hello never arrived" } else { "our hello could not be sent" }
                    ),
                });
            }
            self.worker.progress();
        }
    }
}
