//! [`UcxTransport`]: the contract over one UCP worker.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use ovbench_core::{
    Arrivals, Caps, Completion, CompletionStamps, Ctx, Idle, LocalSlice, MrHandle, Msg, OpKind,
    Posted, Progress, Rank, RegionId, Registered, Rma, RmaOp, Tagged, Transport, TransportError,
    TransportInfo,
};
use ovbench_ucx_sys as sys;

use crate::address;
use crate::devices::Sysfs;
use crate::dgid_check::{self, DgidCheck};
use crate::ffi::context::{self, Context};
use crate::ffi::endpoint::Endpoint;
use crate::ffi::listener::Listener;
use crate::ffi::memory::{Memory, RmaBuf};
use crate::ffi::request::{self, Op};
use crate::ffi::worker::Worker;
use crate::lanes::{self, RmaPath};
use crate::liveness;
use crate::ops::{self, Shared, MAX_SPARE_OPS};
use crate::progress::ProgressThread;
use crate::seal;
use crate::settings::{self, Settings};
use crate::status;
use crate::{UcxConnect, UcxOptions};
use ovbench_core::fabric::peer_watch::{self, PeerWatch};
use ovbench_core::fabric::peers;

mod client_server;
mod lifecycle;
mod poll;
mod sends;
mod tagged;

/// Largest two-sided message (ovbench header plus payload).
pub const EAGER_BUF_SIZE: usize = 64 * 1024;
/// How long connect waits for the endpoints' wire-up.
const WIRE_UP_DEADLINE: Duration = Duration::from_secs(30);

/// The UCX transport. See the crate docs for how each contract item maps
/// onto UCP calls.
pub struct UcxTransport {
    rank: Rank,
    size: u32,
    progress: Progress,
    thread: Option<ProgressThread>,
    /// Unpacked peer keys (in `mem`) go before the endpoints, and the
    /// endpoints before the registrations and the worker: see `Drop`.
    mem: Memory,
    eps: Vec<Endpoint>,
    send_seq: Vec<u32>,
    rma: RmaPath,
    /// Pids of peers on this host, to notice one that died; peers known dead.
    /// Same-host peer processes, checked for a death without goodbye.
    watch: PeerWatch,
    gone: Vec<bool>,
    /// Whether endpoints report a dead peer (error mode PEER).
    peer_failure_detection: bool,
    /// Whether every endpoint finished its wire-up. Endpoints that did
    /// not are never closed (see `Drop`).
    wired: bool,
    /// Completions of operations UCX finished inside the posting call:
    /// queued here on the rank's own thread, without the inbox mutex.
    done: Vec<Completion>,
    /// Boxes of completed operations, reused for the next posts: those
    /// completed inline, and the callbacks' (from the inbox) when empty.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Op>>,
    /// Send staging buffers owned by this thread (refilled from the
    /// inbox's pool, where callbacks return theirs, when empty).
    send_pool: Vec<Vec<u8>>,
    /// Receive buffers handed back by the user, moved to the inbox's pool
    /// by the next poll that takes the inbox lock anyway.
    recycled: Vec<Vec<u8>>,
    /// Owns the state its callbacks write to ([`Shared`]) and outlives
    /// everything above that holds UCX objects (each holds it alive).
    worker: Worker,
    ctx: Context,
    settings: Settings,
    /// The client-server path's listener (until connect has accepted
    /// every higher rank), and how this rank connects, for the header.
    listener: Option<Listener>,
    /// The accepted side of the client-server path's endpoint to itself
    /// (its client side is `eps[rank]`).
    loopback: Option<Endpoint>,
    connect_path: String,
    /// The lanes UCX chose to the first peer (after connect).
    lanes: String,
    dgid: DgidCheck,
}

impl UcxTransport {
    /// Create the context and worker for `rank` of `size`. Connect with
    /// [`Transport::connect`] after exchanging [`Transport::address`].
    pub fn new(rank: Rank, size: u32, opts: UcxOptions) -> Result<UcxTransport, TransportError> {
        if size == 0 || rank >= size {
            return Err(TransportError::Invalid(format!(
                "rank {rank} of {size} ranks"
            )));
        }
        let mut settings = settings::settings(opts.tls.as_deref(), opts.net_devices.as_deref());
        let rma = lanes::guess(&settings.tls);
        let sysfs = Sysfs::system();
        let soft: Vec<String> = sysfs
            .selected_rdma(&settings.net_devices)
            .into_iter()
            .filter(|d| sysfs.is_soft(d))
            .collect();
        let dgid = DgidCheck::decide(
            &settings.tls,
            &soft,
            std::env::var(dgid_check::USER_VAR).ok(),
        );
        let extra: Vec<(&str, &str)> = dgid.setting().into_iter().collect();
        let ctx = Context::new(&settings.tls, &settings.net_devices, &extra)?;
        settings.resources = ctx
            .print_info()
            .as_deref()
            .map(lanes::resources)
            .unwrap_or_default();
        // UCX only warns about names it does not know and carries on with
        // the rest; left with nothing but `self`, no peer is reachable.
        let only_self = settings.resources.iter().all(|r| r.starts_with("self/"));
        if only_self && settings.tls.split(',').any(|t| t != "self") {
            return Err(TransportError::Local {
                op: OpKind::Connect,
                detail: format!(
                    "UCX found no usable transport in UCX_TLS={} (UCX_NET_DEVICES={}) besides self; `ucx_info -d` lists the transports and devices this UCX has",
                    settings.tls, settings.net_devices
                ),
            });
        }
        if opts.connect == UcxConnect::Sockaddr && !lanes::detects_peer_failure(&settings.tls) {
            return Err(TransportError::Invalid(format!(
                "--ucx-connect sockaddr needs a network transport in UCX_TLS={} (tcp, rc_verbs, ...): UCX's client-server endpoints cannot wire up over shared memory alone; add one with --ucx-tls or use --ucx-connect worker",
                settings.tls
            )));
        }
        let threaded = opts.progress == Progress::Thread;
        let shared = Shared::new(rank, size, EAGER_BUF_SIZE, threaded);
        let worker = Worker::new(&ctx, threaded, shared, u64::from(rank))?;
        let (listener, connect_path) = match opts.connect {
            UcxConnect::Worker => (
                None,
                "worker (UCX worker addresses through the bootstrap exchange; wire-up over UCX's own messages)".to_string(),
            ),
            UcxConnect::Sockaddr => {
                let (l, path) = client_server::listen(&worker, &sysfs, &settings.net_devices)?;
                (Some(l), path)
            }
        };
        let mut t = UcxTransport {
            rank,
            size,
            progress: opts.progress,
            thread: None,
            mem: Memory::default(),
            eps: Vec::new(),
            send_seq: vec![0; size as usize],
            rma,
            watch: PeerWatch::new(size, liveness::signal_zero),
            gone: vec![false; size as usize],
            peer_failure_detection: lanes::detects_peer_failure(&settings.tls),
            wired: false,
            done: Vec::with_capacity(64),
            spare: Vec::new(),
            send_pool: Vec::new(),
            recycled: Vec::new(),
            worker,
            ctx,
            settings,
            listener,
            loopback: None,
            connect_path,
            lanes: String::new(),
            dgid,
        };
        if threaded {
            t.thread = Some(ProgressThread::spawn(&t.worker)?);
        }
        Ok(t)
    }

    /// The callbacks' state.
    #[inline]
    fn shared(&self) -> &Shared {
        self.worker.shared()
    }

    /// The index of the endpoint to `peer`, after checking it is usable.
    #[inline]
    fn ep(&self, peer: Rank, op: OpKind) -> Result<usize, TransportError> {
        if self.gone.get(peer as usize).copied().unwrap_or(false) {
            return Err(TransportError::Peer {
                peer,
                op,
                status: format!("rank {peer} has died; the run cannot continue with it"),
            });
        }
        match self.eps.get(peer as usize) {
            Some(_) => Ok(peer as usize),
            None => Err(peers::no_endpoint(peer, self.size, op)),
        }
    }

    /// Box an operation for UCX's `user_data` (reusing a spare box).
    #[inline]
    fn op(&mut self, ctx: Ctx, peer: Rank, kind: OpKind, staging: Option<Vec<u8>>) -> Box<Op> {
        let op = Op {
            shared: self.worker.shared(),
            ctx,
            peer,
            kind,
            staging,
            silent: false,
        };
        if self.spare.is_empty() {
            // The callbacks' boxes, all at once.
            std::mem::swap(&mut self.spare, &mut self.worker.shared().lock().spare);
        }
        match self.spare.pop() {
            Some(mut b) => {
                *b = op;
                b
            }
            None => Box::new(op),
        }
    }

    /// A send staging buffer: from this thread's pool, refilled from the
    /// inbox's (one lock for all the callbacks returned) when empty.
    fn staging(&mut self) -> Vec<u8> {
        if let Some(b) = self.send_pool.pop() {
            return b;
        }
        std::mem::swap(
            &mut self.send_pool,
            &mut self.worker.shared().lock().send_pool,
        );
        self.send_pool.pop().unwrap_or_default()
    }

    /// Take back an operation UCX did not keep (done inline, or failed):
    /// its staging buffer and box are kept for reuse; one-sided operations
    /// leave the in-flight count (the only part that needs the inbox).
    fn reclaim(&mut self, mut op: Box<Op>) -> Box<Op> {
        if op.is_rma() {
            let mut g = self.worker.shared().lock();
            g.rma_in_flight = g.rma_in_flight.saturating_sub(1);
        }
        if let Some(b) = op.staging.take() {
            self.send_pool.push(b);
        }
        op
    }

    /// Settle a posted operation: done at once queues its completion here
    /// (the callback will not run), a failure is returned (the callback
    /// will not run either), in flight completes through the callback.
    fn settle(&mut self, posted: request::Posted, call: &str) -> Result<(), TransportError> {
        match posted {
            request::Posted::InFlight => Ok(()),
            request::Posted::Done(op) => {
                let op = self.reclaim(op);
                self.done.extend(op.completion(sys::UCS_OK, None));
                if self.spare.len() < MAX_SPARE_OPS {
                    self.spare.push(op);
                }
                Ok(())
            }
            request::Posted::Failed(op, st) => {
                let op = self.reclaim(op);
                Err(status::peer(op.peer, op.kind, call, st))
            }
        }
    }

    /// Common checks of a one-sided operation; returns the endpoint's
    /// index, the local buffer, the key's checksum (its unpacked form is
    /// then cached: [`Memory::cached_rkey`]) and the remote address.
    fn rma_prep(
        &mut self,
        peer: Rank,
        rma: &RmaOp<'_>,
    ) -> Result<(usize, RmaBuf, u64, u64), TransportError> {
        let (op, local, remote) = (rma.op.op(), rma.local, rma.remote);
        let i = self.ep(peer, op)?;
        let sealed = seal::SEAL
            .unseal(remote)
            .map_err(|detail| TransportError::BadKey {
                peer,
                detail: format!("{op}: {detail}"),
            })?;
        remote
            .check_range(rma.remote_offset, local.len as u64)
            .map_err(|detail| TransportError::BadKey {
                peer,
                detail: format!("{op}: {detail}"),
            })?;
        let buf = self.mem.local_rma(rma.mr, local)?;
        // Let revocations that have arrived be seen before the key is used.
        self.worker.progress();
        let (revoked, in_flight) = {
            let g = self.shared().lock();
            (g.revoked.contains(&(peer, sealed.sum)), g.rma_in_flight)
        };
        if revoked {
            self.mem.forget_rkey(peer, sealed.sum, in_flight);
            return Err(TransportError::BadKey {
                peer,
                detail: format!("{op} through a key whose registration rank {peer} has dropped"),
            });
        }
        self.mem.rkey(&self.eps[i], peer, &sealed, in_flight)?;
        Ok((i, buf, sealed.sum, remote.addr + rma.remote_offset))
    }

    /// Which UCX transports serve RMA to the first peer (after connect).
    pub fn rma_path(&self) -> &RmaPath {
        &self.rma
    }
}

impl Transport for UcxTransport {
    fn info(&self) -> TransportInfo {
        let s = &self.settings;
        TransportInfo {
            name: "ucx".into(),
            device: s.tls.clone(),
            library: format!("UCX {}", context::version()),
            extra: vec![
                ("UCX_TLS".into(), s.tls.clone()),
                ("UCX_NET_DEVICES".into(), s.net_devices.clone()),
                ("ucx_resources".into(), s.resources.join(" ")),
                ("ucx_connect".into(), self.connect_path.clone()),
                ("ucx_lanes".into(), self.lanes.clone()),
                ("ud_eth_dgid_check".into(), self.dgid.describe()),
                ("rma_lanes".into(), self.rma.lanes.clone()),
                ("rma_progress".into(), self.rma.reason.clone()),
                (
                    "peer_failure_detection".into(),
                    if self.peer_failure_detection {
                        "yes (UCP error mode PEER)".into()
                    } else {
                        "no: these transports cannot detect a dead peer; the --timeout deadline stops the run".into()
                    },
                ),
            ],
            caps: Caps {
                rma: self.rma.kind,
                rma_progress: self.rma.progress,
                progress: self.progress,
                eager_buf_size: EAGER_BUF_SIZE,
                native_sync_send: true,
                completion_stamps: CompletionStamps::Host,
                // The send's staging copy (am_layout) and the placement
                // out of the library's buffer.
                eager_copies: 2,
            },
            rank: self.rank,
            size: self.size,
        }
    }

    /// ovbench's header, the listener's socket address on the
    /// client-server path, then UCX's worker address (see `address`).
    fn address(&self) -> Vec<u8> {
        address::encode(
            &peer_watch::identity(),
            self.listener.as_ref().map(Listener::bound),
            self.worker.address(),
        )
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        peers::check_connect(addresses, self.size, !self.eps.is_empty())?;
        let sockaddr = self.listener.is_some();
        let mut peers = Vec::with_capacity(addresses.len());
        for (peer, a) in addresses.iter().enumerate() {
            let peer = peer as Rank;
            let p = address::decode(a, sockaddr).map_err(|status| TransportError::Peer {
                peer,
                op: OpKind::Connect,
                status,
            })?;
            self.watch.note(peer, p.identity);
            peers.push(p);
        }
        if sockaddr {
            self.connect_client_server(&peers)?;
        } else {
            for (peer, p) in peers.iter().enumerate() {
                let peer = peer as Rank;
                let (ep, detecting) =
                    Endpoint::create(&self.worker, p.worker, peer, self.peer_failure_detection)
                        .map_err(|st| status::peer(peer, OpKind::Connect, "ucp_ep_create", st))?;
                self.peer_failure_detection = detecting;
                self.eps.push(ep);
            }
        }
        self.wire_up()?;
        if sockaddr {
            self.handshake()?;
        }
        self.wired = true;
        let probe = (self.rank + 1) % self.size;
        if let Some(table) = self.eps[probe as usize].print_info() {
            self.rma = lanes::from_lane_table(&table);
            self.lanes = lanes::name_cm(
                lanes::summary(&table),
                std::path::Path::new("/dev/infiniband/rdma_cm").exists(),
            );
        }
        Ok(())
    }

    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        self.mem.table.alloc(len)
    }

    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.mem.table.free(region)
    }

    fn region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        f(self.mem.slice_mut(s)?);
        Ok(())
    }

    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        let mr = self.mem.register(&self.ctx, s)?;
        let key = self.mem.mr(mr)?.key.clone();
        Ok(Registered { mr, key })
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        let sum = seal::sum_of(&self.mem.mr(mr)?.key.blob);
        self.mem.deregister(mr)?;
        // UCX cannot refuse an access at the target, so tell every peer
        // the key is dead; they refuse it once this has arrived (an access
        // racing the revocation is still performed).
        for peer in 0..self.eps.len() as Rank {
            self.send_revocation(peer, sum);
        }
        Ok(())
    }

    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        let done = self.am_send(peer, msg.header, msg.payload, ctx)?;
        Ok(Posted::done_if(done))
    }

    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        let (i, buf, sum, raddr) = self.rma_prep(peer, &rma)?;
        match rma.op {
            Rma::Write => {
                let rkey = self
                    .mem
                    .cached_rkey(peer, sum)
                    .expect("unpacked by rma_prep");
                self.eps[i]
                    .put(buf, raddr, rkey)
                    .map_err(|st| status::peer(peer, OpKind::Write, "ucp_put_nbx", st))?;
                // The put's own completion is only local: the flush
                // completes once the data is placed at the target, which
                // is the contract's rule.
                self.shared().lock().rma_in_flight += 1;
                let op = self.op(ctx, peer, OpKind::Write, None);
                let posted = self.eps[i].flush_op(op);
                self.settle(posted, "ucp_ep_flush_nbx")
            }
            // A get, complete once its data is in local memory.
            Rma::Read => {
                self.shared().lock().rma_in_flight += 1;
                let op = self.op(ctx, peer, OpKind::Read, None);
                let rkey = self
                    .mem
                    .cached_rkey(peer, sum)
                    .expect("unpacked by rma_prep");
                let posted = self.eps[i].get(buf, raddr, rkey, op);
                self.settle(posted, "ucp_get_nbx")
            }
        }
    }

    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        // A progress thread's callbacks cannot reach the caller's taker.
        let Some(arrivals) = arrivals.filter(|_| self.thread.is_none()) else {
            return self.poll_parts().0.poll(out);
        };
        let (p, mem) = self.poll_parts();
        let worker = p.worker;
        let (r, handed) = worker.lending(arrivals, mem, || p.poll(out));
        let handed = handed?;
        Ok(r? + handed)
    }

    fn recycle(&mut self, data: Vec<u8>) {
        if self.recycled.len() < ops::MAX_POOL {
            self.recycled.push(data);
        }
    }

    fn idle(&mut self, why: Idle) -> Result<(), TransportError> {
        match why {
            Idle::Block(timeout) => self.block(timeout),
            Idle::EmptyPoll | Idle::WatchingMemory => Ok(()),
        }
    }

    fn tagged(&mut self) -> Option<&mut dyn Tagged> {
        Some(self)
    }
}

impl UcxTransport {
    /// The worker's event fd, readable when a poll may find something
    /// (none with a progress thread, which owns its arming).
    pub fn wait_fd(&self) -> Option<RawFd> {
        // With a progress thread, that thread owns the fd's arming.
        (self.thread.is_none()).then_some(self.worker.efd())
    }

    /// Sleep until something may be ready or `timeout` passes.
    fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        // Polls after a sleep are slow: let the next one check peers.
        self.watch.soon();
        let deadline = Instant::now() + timeout;
        if self.thread.is_some() {
            if !self.done.is_empty() {
                return Ok(());
            }
            self.shared().wait_ready(deadline);
            return Ok(());
        }
        // (The queued flag, not a lock on the inbox: a guard alive across
        // `progress` would deadlock with the callbacks it runs.)
        if !self.done.is_empty()
            || self.shared().has_queued()
            || self.worker.progress()
            || !self.worker.arm()?
        {
            return Ok(());
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        if let Err(e) = self.worker.wait(ms) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(TransportError::io("poll on the UCX worker's event fd", e));
            }
        }
        Ok(())
    }
}
