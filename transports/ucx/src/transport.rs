//! [`UcxTransport`]: the contract over one UCP worker.

use std::ffi::c_void;
use std::os::fd::RawFd;
use std::ptr;
use std::time::{Duration, Instant};

use ovbench_core::{
    Arrivals, Caps, Completion, Ctx, LocalSlice, MrHandle, OpKind, Progress, Rank, RegionId,
    RemoteKey, RmaKind, Tag, Transport, TransportError, TransportInfo, Waited,
};
use ovbench_ucx_sys as sys;

use crate::handover::Lend;
use crate::lanes::{self, RmaPath};
use crate::liveness;
use crate::memory::Memory;
use crate::ops::{self, EpErrArg, Op, Shared, AM_ID, MAX_SPARE_OPS, REVOKE_AM_ID, TAG_SRC_SHIFT};
use crate::progress::ProgressThread;
use crate::seal;
use crate::status::{self, check};
use crate::ucp::{self, Ucp};
use crate::UcxOptions;
use ovbench_core::fabric::peer_watch::{self, PeerWatch};

mod lifecycle;
mod poll;
mod sends;
mod wait;

/// Largest two-sided message (ovbench header plus payload).
pub const EAGER_BUF_SIZE: usize = 64 * 1024;
/// ovbench's header in front of UCX's worker address: magic, pid, and the
/// host/pid-namespace identity ([`peer_watch::identity`]).
const ADDR_MAGIC: &[u8; 4] = b"OVUA";
const ADDR_HDR: usize = 4 + peer_watch::IDENTITY_LEN;
/// Largest worker address accepted from the bootstrap exchange.
const MAX_ADDRESS: usize = 64 * 1024;
/// How long connect waits for the endpoints' wire-up.
const WIRE_UP_DEADLINE: Duration = Duration::from_secs(30);
/// How long teardown waits for an endpoint close.
const CLOSE_DEADLINE: Duration = Duration::from_secs(2);

/// The UCX transport. See the crate docs for how each contract item maps
/// onto UCP calls.
pub struct UcxTransport {
    rank: Rank,
    size: u32,
    progress: Progress,
    thread: Option<ProgressThread>,
    mem: Memory,
    eps: Vec<sys::ucp_ep_h>,
    /// Boxed so the addresses given to UCX stay put as the Vec grows.
    #[allow(clippy::vec_box)]
    ep_args: Vec<Box<EpErrArg>>,
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
    /// Declared after everything that holds UCX objects and before
    /// `shared`: the worker must be destroyed before the state its
    /// callbacks write to.
    ucp: Ucp,
    shared: Box<Shared>,
}

// SAFETY: the raw UCX handles are used only through &mut self (one thread
// at a time); with `--progress thread` the worker is created in
// UCS_THREAD_MODE_MULTI and the progress thread touches only the worker
// and `Shared`, which is behind a mutex.
unsafe impl Send for UcxTransport {}

impl UcxTransport {
    /// Create the context and worker for `rank` of `size`. Connect with
    /// [`Transport::connect`] after exchanging [`Transport::address`].
    pub fn new(rank: Rank, size: u32, opts: UcxOptions) -> Result<UcxTransport, TransportError> {
        if size == 0 || rank >= size {
            return Err(TransportError::Invalid(format!(
                "rank {rank} of {size} ranks"
            )));
        }
        let settings = ucp::settings(opts.tls.as_deref(), opts.net_devices.as_deref());
        let rma = lanes::guess(&settings.tls);
        let settings_tls = settings.tls.clone();
        let ucp = Ucp::new(settings, opts.progress == Progress::Thread)?;
        let threaded = opts.progress == Progress::Thread;
        let shared = Box::new(Shared::new(rank, size, EAGER_BUF_SIZE, threaded));
        let arg = &*shared as *const Shared as *mut c_void;
        let hp = sys::ucp_am_handler_param_t {
            field_mask: (sys::UCP_AM_HANDLER_PARAM_FIELD_ID
                | sys::UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                | sys::UCP_AM_HANDLER_PARAM_FIELD_CB
                | sys::UCP_AM_HANDLER_PARAM_FIELD_ARG) as u64,
            id: AM_ID,
            flags: sys::UCP_AM_FLAG_WHOLE_MSG,
            cb: Some(ops::am_recv_cb),
            arg,
        };
        // SAFETY: the worker is live; arg points to the boxed Shared, which
        // outlives the worker (field order of UcxTransport).
        let st = unsafe { sys::ucp_worker_set_am_recv_handler(ucp.worker, &hp) };
        check(OpKind::Connect, "ucp_worker_set_am_recv_handler", st)?;
        let rp = sys::ucp_am_handler_param_t {
            id: REVOKE_AM_ID,
            cb: Some(ops::am_revoke_cb),
            ..hp
        };
        // SAFETY: as above.
        let st = unsafe { sys::ucp_worker_set_am_recv_handler(ucp.worker, &rp) };
        check(
            OpKind::Connect,
            "ucp_worker_set_am_recv_handler(revoke)",
            st,
        )?;
        let mut t = UcxTransport {
            rank,
            size,
            progress: opts.progress,
            thread: None,
            mem: Memory::default(),
            eps: Vec::new(),
            ep_args: Vec::new(),
            send_seq: vec![0; size as usize],
            rma,
            watch: PeerWatch::new(size, liveness::signal_zero),
            gone: vec![false; size as usize],
            peer_failure_detection: lanes::detects_peer_failure(&settings_tls),
            wired: false,
            done: Vec::with_capacity(64),
            spare: Vec::new(),
            send_pool: Vec::new(),
            recycled: Vec::new(),
            ucp,
            shared,
        };
        if opts.progress == Progress::Thread {
            t.thread = Some(ProgressThread::spawn(t.ucp.worker, t.ucp.efd)?);
        }
        Ok(t)
    }

    fn ep(&self, peer: Rank, op: OpKind) -> Result<sys::ucp_ep_h, TransportError> {
        if self.gone.get(peer as usize).copied().unwrap_or(false) {
            return Err(TransportError::Peer {
                peer,
                op,
                status: format!("rank {peer} has died; the run cannot continue with it"),
            });
        }
        match self.eps.get(peer as usize) {
            Some(ep) if !ep.is_null() => Ok(*ep),
            _ if peer >= self.size => Err(TransportError::Invalid(format!(
                "{op} to rank {peer}, but the job has {} ranks",
                self.size
            ))),
            _ => Err(TransportError::Peer {
                peer,
                op,
                status: "not connected: call connect() with every rank's address first".into(),
            }),
        }
    }

    /// A tagged receive's UCX tag and mask for source `src` and `tag`
    /// (`None`: any), after checking the source is a rank of the job.
    fn recv_selector(
        &self,
        src: Option<Rank>,
        tag: Option<Tag>,
    ) -> Result<(u64, u64), TransportError> {
        if let Some(s) = src {
            if s >= self.size {
                return Err(TransportError::Invalid(format!(
                    "tagged receive from rank {s}, but the job has {} ranks",
                    self.size
                )));
            }
        }
        let utag = (u64::from(src.unwrap_or(0)) << TAG_SRC_SHIFT) | u64::from(tag.unwrap_or(0));
        let mask = if src.is_some() {
            0xffff_ffff_0000_0000
        } else {
            0
        } | if tag.is_some() { 0xffff_ffff } else { 0 };
        Ok((utag, mask))
    }

    fn shared_ptr(&self) -> *const Shared {
        &*self.shared
    }

    /// Box an operation for UCX's `user_data` (reusing a spare box).
    fn op(&mut self, ctx: Ctx, peer: Rank, kind: OpKind, staging: Option<Vec<u8>>) -> *mut Op {
        let op = Op {
            shared: self.shared_ptr(),
            ctx,
            peer,
            kind,
            staging,
            silent: false,
        };
        if self.spare.is_empty() {
            // The callbacks' boxes, all at once.
            std::mem::swap(&mut self.spare, &mut self.shared.lock().spare);
        }
        let b = match self.spare.pop() {
            Some(mut b) => {
                *b = op;
                b
            }
            None => Box::new(op),
        };
        Box::into_raw(b)
    }

    /// A send staging buffer: from this thread's pool, refilled from the
    /// inbox's (one lock for all the callbacks returned) when empty.
    fn staging(&mut self) -> Vec<u8> {
        if let Some(b) = self.send_pool.pop() {
            return b;
        }
        std::mem::swap(&mut self.send_pool, &mut self.shared.lock().send_pool);
        self.send_pool.pop().unwrap_or_default()
    }

    /// Take back an operation UCX did not keep (done inline, or failed):
    /// its staging buffer and box are kept for reuse; one-sided operations
    /// leave the in-flight count (the only part that needs the inbox).
    fn reclaim(&mut self, op: *mut Op) -> Box<Op> {
        // SAFETY: UCX did not keep `op` (the call completed inline or
        // failed, so no callback will run); it is ours again.
        let mut op = unsafe { Box::from_raw(op) };
        if op.is_rma() {
            let mut g = self.shared.lock();
            g.rma_in_flight = g.rma_in_flight.saturating_sub(1);
        }
        if let Some(b) = op.staging.take() {
            self.send_pool.push(b);
        }
        op
    }

    /// Settle what an `*_nbx` call returned: NULL means done at once (the
    /// callback will not run), an error pointer means it failed (the
    /// callback will not run either), anything else is in flight.
    fn settle(
        &mut self,
        r: sys::ucs_status_ptr_t,
        op: *mut Op,
        call: &str,
        tag: Option<(u64, usize)>,
    ) -> Result<(), TransportError> {
        if r.is_null() {
            let op = self.reclaim(op);
            self.done.extend(op.completion(sys::UCS_OK, tag));
            if self.spare.len() < MAX_SPARE_OPS {
                self.spare.push(op);
            }
            Ok(())
        } else if sys::ptr_is_err(r) {
            let op = self.reclaim(op);
            Err(status::peer(op.peer, op.kind, call, sys::ptr_status(r)))
        } else {
            Ok(())
        }
    }

    /// The parameters of a tagged receive whose callback `cb` gets
    /// `user_data`. UCX 1.13 does not fill RECV_INFO when a receive
    /// matches an unexpected message inside the call, so immediate
    /// completion is turned off: the callback always runs and always has
    /// the envelope.
    fn tag_recv_params(
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

    fn cb_params(op: *mut Op) -> sys::ucp_request_param_t {
        let mut p = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_CALLBACK | sys::UCP_OP_ATTR_FIELD_USER_DATA,
            user_data: op.cast(),
            ..Default::default()
        };
        p.cb.send = Some(ops::send_cb);
        p
    }

    /// Common checks of a one-sided operation; returns the endpoint, the
    /// local memh and pointer, the unpacked rkey and the remote address.
    fn rma_prep(
        &mut self,
        peer: Rank,
        op: OpKind,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
    ) -> Result<(sys::ucp_ep_h, sys::ucp_mem_h, *mut u8, sys::ucp_rkey_h, u64), TransportError>
    {
        let ep = self.ep(peer, op)?;
        let sealed = seal::SEAL
            .unseal(remote)
            .map_err(|detail| TransportError::BadKey {
                peer,
                detail: format!("{op}: {detail}"),
            })?;
        remote
            .check_range(remote_offset, local.len as u64)
            .map_err(|detail| TransportError::BadKey {
                peer,
                detail: format!("{op}: {detail}"),
            })?;
        let (memh, lp) = self.mem.local_rma(mr, local)?;
        // Let revocations that have arrived be seen before the key is used.
        self.ucp.progress();
        let (revoked, in_flight) = {
            let g = self.shared.lock();
            (g.revoked.contains(&(peer, sealed.sum)), g.rma_in_flight)
        };
        if revoked {
            self.mem.forget_rkey(peer, sealed.sum);
            return Err(TransportError::BadKey {
                peer,
                detail: format!("{op} through a key whose registration rank {peer} has dropped"),
            });
        }
        let rkey = self.mem.rkey(ep, peer, &sealed, in_flight)?;
        Ok((ep, memh, lp, rkey, remote.addr + remote_offset))
    }

    /// Which UCX transports serve RMA to the first peer (after connect).
    pub fn rma_path(&self) -> &RmaPath {
        &self.rma
    }
}

impl Transport for UcxTransport {
    fn info(&self) -> TransportInfo {
        let s = &self.ucp.settings;
        TransportInfo {
            name: "ucx".into(),
            device: s.tls.clone(),
            library: format!("UCX {}", ucp::version()),
            extra: vec![
                ("UCX_TLS".into(), s.tls.clone()),
                ("UCX_NET_DEVICES".into(), s.net_devices.clone()),
                ("ucx_resources".into(), s.resources.join(" ")),
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
        }
    }

    fn caps(&self) -> Caps {
        Caps {
            rma: RmaKind::Native,
            rma_progress: self.rma.progress,
            progress: self.progress,
            max_inline: 0,
            eager_buf_size: EAGER_BUF_SIZE,
            native_tagged: true,
            native_sync_send: true,
        }
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    /// `OVUA`, pid, host/pid-namespace identity, then UCX's worker address.
    fn address(&self) -> Vec<u8> {
        let mut a = Vec::with_capacity(ADDR_HDR + self.ucp.address.len());
        a.extend_from_slice(ADDR_MAGIC);
        a.extend_from_slice(&peer_watch::identity());
        a.extend_from_slice(&self.ucp.address);
        a
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        if addresses.len() != self.size as usize {
            return Err(TransportError::Invalid(format!(
                "connect needs {} addresses, got {}",
                self.size,
                addresses.len()
            )));
        }
        if !self.eps.is_empty() {
            return Err(TransportError::Invalid("connect called twice".into()));
        }
        for (peer, a) in addresses.iter().enumerate() {
            let peer = peer as Rank;
            if a.len() <= ADDR_HDR || a.len() > MAX_ADDRESS || &a[..4] != ADDR_MAGIC {
                return Err(TransportError::Peer {
                    peer,
                    op: OpKind::Connect,
                    status: format!(
                        "its address is {} bytes or lacks ovbench's UCX header (must be {}..={MAX_ADDRESS} bytes starting with OVUA); the ranks run different transports or the bootstrap exchange is corrupt",
                        a.len(),
                        ADDR_HDR + 1
                    ),
                });
            }
            self.watch.note(peer, &a[4..ADDR_HDR]);
            let a = &a[ADDR_HDR..];
            let arg = Box::new(EpErrArg {
                shared: self.shared_ptr(),
                peer,
            });
            let mut params = sys::ucp_ep_params_t {
                field_mask: (sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
                    | sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                    | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER) as u64,
                address: a.as_ptr().cast(),
                err_mode: sys::UCP_ERR_HANDLING_MODE_PEER,
                err_handler: sys::ucp_err_handler_t {
                    cb: Some(ops::ep_err_cb),
                    arg: &*arg as *const EpErrArg as *mut c_void,
                },
                ..Default::default()
            };
            if !self.peer_failure_detection {
                params.field_mask = sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS as u64;
            }
            let mut ep: sys::ucp_ep_h = ptr::null_mut();
            // SAFETY: worker is live; the address bytes stay valid for the
            // call (UCX unpacks them); the error-handler arg is boxed and
            // kept in ep_args as long as the endpoint.
            let mut st = unsafe { sys::ucp_ep_create(self.ucp.worker, &params, &mut ep) };
            if st == sys::UCS_ERR_UNREACHABLE && self.peer_failure_detection {
                // Shared-memory transports without keepalive (posix, sysv)
                // refuse peer-failure detection: connect without it and
                // rely on the callers' deadlines instead.
                let mut plain = params;
                plain.field_mask = sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS as u64;
                // SAFETY: as above.
                st = unsafe { sys::ucp_ep_create(self.ucp.worker, &plain, &mut ep) };
                self.peer_failure_detection = false;
            }
            if st != sys::UCS_OK {
                return Err(status::peer(peer, OpKind::Connect, "ucp_ep_create", st));
            }
            self.eps.push(ep);
            self.ep_args.push(arg);
        }
        self.wire_up()?;
        self.wired = true;
        let probe = (self.rank + 1) % self.size;
        if let Some(path) = lanes::probe(self.eps[probe as usize]) {
            self.rma = path;
        }
        Ok(())
    }

    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        self.mem.alloc(len)
    }

    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.mem.free(region)
    }

    fn read_region(&self, s: LocalSlice, f: &mut dyn FnMut(&[u8])) -> Result<(), TransportError> {
        f(self.mem.slice(s)?);
        Ok(())
    }

    fn write_region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        f(self.mem.slice_mut(s)?);
        Ok(())
    }

    fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError> {
        self.mem.register(self.ucp.context, s)
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        let sum = seal::sum_of(&self.mem.mr(mr)?.key.blob);
        self.mem.deregister(self.ucp.context, mr)?;
        // UCX cannot refuse an access at the target, so tell every peer
        // the key is dead; they refuse it once this has arrived (an access
        // racing the revocation is still performed).
        for peer in 0..self.eps.len() as Rank {
            self.send_revocation(peer, sum);
        }
        Ok(())
    }

    fn remote_key(&self, mr: MrHandle) -> RemoteKey {
        self.mem
            .mr(mr)
            .map(|m| m.key.clone())
            .expect("remote_key of a registration this transport does not hold")
    }

    fn post_send(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        if self.am_send(peer, header, payload, ctx)? {
            self.done.push(Completion::Send { ctx });
        }
        Ok(())
    }

    fn post_send_inline(
        &mut self,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        self.am_send(peer, header, payload, ctx)
    }

    fn post_write(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        let (ep, memh, lp, rkey, raddr) =
            self.rma_prep(peer, OpKind::Write, local, mr, remote, remote_offset)?;
        let put = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_MEMH,
            memh,
            ..Default::default()
        };
        // SAFETY: ep and rkey are live; lp..lp+len lies in registration mr;
        // the remote range was checked against the key.
        let r = unsafe { sys::ucp_put_nbx(ep, lp.cast(), local.len, raddr, rkey, &put) };
        if sys::ptr_is_err(r) {
            return Err(status::peer(
                peer,
                OpKind::Write,
                "ucp_put_nbx",
                sys::ptr_status(r),
            ));
        }
        if !r.is_null() {
            // SAFETY: a live request without a callback; UCX releases it
            // when it completes. The flush below reports completion.
            unsafe { sys::ucp_request_free(r) };
        }
        // The put's own completion is only local: the flush completes once
        // the data is placed at the target, which is the contract's rule.
        self.shared.lock().rma_in_flight += 1;
        let op = self.op(ctx, peer, OpKind::Write, None);
        let p = Self::cb_params(op);
        // SAFETY: ep is live; op is owned by UCX until the callback.
        let r = unsafe { sys::ucp_ep_flush_nbx(ep, &p) };
        self.settle(r, op, "ucp_ep_flush_nbx", None)
    }

    fn post_read(
        &mut self,
        peer: Rank,
        local: LocalSlice,
        mr: MrHandle,
        remote: &RemoteKey,
        remote_offset: u64,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        let (ep, memh, lp, rkey, raddr) =
            self.rma_prep(peer, OpKind::Read, local, mr, remote, remote_offset)?;
        self.shared.lock().rma_in_flight += 1;
        let op = self.op(ctx, peer, OpKind::Read, None);
        let mut p = Self::cb_params(op);
        p.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMH;
        p.memh = memh;
        // SAFETY: ep and rkey are live; lp..lp+len lies in registration mr
        // and stays allocated (regions with registrations cannot be freed).
        let r = unsafe { sys::ucp_get_nbx(ep, lp.cast(), local.len, raddr, rkey, &p) };
        self.settle(r, op, "ucp_get_nbx", None)
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        self.poll_parts().0.poll(out)
    }

    fn poll_arrivals(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: &mut dyn Arrivals,
    ) -> Result<usize, TransportError> {
        // A progress thread's callbacks cannot reach the caller's taker.
        if self.thread.is_some() {
            return self.poll(out);
        }
        let (p, mem) = self.poll_parts();
        // SAFETY: the lend ends below, before `arrivals` is used again;
        // nothing changes `mem` meanwhile (the poll borrows other fields)
        // and callbacks run on this thread.
        let lend = unsafe { Lend::new(p.shared, arrivals, mem) };
        let r = p.poll(out);
        let handed = lend.end()?;
        Ok(r? + handed)
    }

    fn recycle(&mut self, data: Vec<u8>) {
        if self.recycled.len() < ops::MAX_POOL {
            self.recycled.push(data);
        }
    }

    fn wait_fd(&self) -> Option<RawFd> {
        // With a progress thread, that thread owns the fd's arming.
        (self.thread.is_none()).then_some(self.ucp.efd)
    }

    fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        // Polls after a sleep are slow: let the next one check peers.
        self.watch.soon();
        let deadline = Instant::now() + timeout;
        if self.thread.is_some() {
            if !self.done.is_empty() {
                return Ok(());
            }
            self.shared.wait_ready(deadline);
            return Ok(());
        }
        // (The queued flag, not a lock on the inbox: a guard alive across
        // `progress` would deadlock with the callbacks it runs.)
        if !self.done.is_empty()
            || self.shared.has_queued()
            || self.ucp.progress()
            || !self.ucp.arm()?
        {
            return Ok(());
        }
        let mut pfd = libc::pollfd {
            fd: self.ucp.efd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: pfd is a valid pollfd array of length 1.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(TransportError::io("poll on the UCX worker's event fd", e));
            }
        }
        Ok(())
    }

    fn tsend(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        sync: bool,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        if self.tag_send(peer, tag, src, sync, ctx)? {
            self.done.push(Completion::TaggedSend { ctx });
        }
        Ok(())
    }

    fn tsend_inline(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        sync: bool,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        self.tag_send(peer, tag, src, sync, ctx)
    }

    fn trecv_wait(
        &mut self,
        src: Option<Rank>,
        tag: Option<Tag>,
        dst: LocalSlice,
        timeout: Duration,
    ) -> Result<Waited, TransportError> {
        self.recv_here(src, tag, dst, timeout)
    }

    fn trecv(
        &mut self,
        src: Option<Rank>,
        tag: Option<Tag>,
        dst: LocalSlice,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        let (utag, mask) = self.recv_selector(src, tag)?;
        let p = self.mem.ptr(dst)?;
        let op = self.op(ctx, src.unwrap_or(self.rank), OpKind::TaggedRecv, None);
        let params = Self::tag_recv_params(op.cast(), Some(ops::tag_recv_cb));
        // SAFETY: the worker is live; dst lies in a live region that the
        // caller keeps until this receive's completion.
        let r = unsafe {
            sys::ucp_tag_recv_nbx(self.ucp.worker, p.cast(), dst.len, utag, mask, &params)
        };
        self.settle(r, op, "ucp_tag_recv_nbx", None)
    }
}
