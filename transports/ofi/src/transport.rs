//! [`OfiTransport`]: the contract over one libfabric RDM endpoint.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::ptr;
use std::time::{Duration, Instant};

use ovbench_core::{
    Caps, Completion, Ctx, LocalSlice, MrHandle, OpKind, Progress, Rank, RegionId, RemoteKey,
    RmaKind, RmaProgress, Tag, Transport, TransportError, TransportInfo,
};
use ovbench_ofi_sys as sys;

use crate::cma::{self, CmaStatus};
use crate::error::{fi_str, peer as peer_err};
use crate::fabric::Fabric;
use crate::memory::{remote_target, Memory};
use crate::ops::{Fence, Kind, Op, SRC_HDR, TAG_SRC_SHIFT};
use crate::OfiOptions;

/// Largest two-sided message (ovbench header plus payload).
pub const EAGER_BUF_SIZE: usize = 64 * 1024;
/// Receive buffers kept posted.
const RECV_BUFS: usize = 64;
/// How long a post may keep getting `-FI_EAGAIN` before it is an error.
const EAGAIN_DEADLINE: Duration = Duration::from_secs(30);
/// Providers whose `FI_DELIVERY_COMPLETE` on a tagged send waits for the
/// receive to be matched (checked by `tests/pair.rs`).
const DC_WAITS_FOR_MATCH: &[&str] = &["shm"];
const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
const EAVAIL: isize = -(sys::FI_EAVAIL as isize);

/// The libfabric transport. See the crate docs for the mapping.
pub struct OfiTransport {
    rank: Rank,
    size: u32,
    mem: Memory,
    peers: Vec<sys::fi_addr_t>,
    /// Completions found while retrying a post, handed out by `poll`.
    pending: VecDeque<Completion>,
    recv_bufs: Vec<*mut Op>,
    recv_pool: Vec<Vec<u8>>,
    send_pool: Vec<Vec<u8>>,
    in_flight: usize,
    /// Posts the provider refused with `-FI_EAGAIN`, retried in order by
    /// `poll` (later posts queue behind them to keep posting order).
    backlog: VecDeque<Deferred>,
    cma: Option<CmaStatus>,
    fabric: Fabric,
}

// SAFETY: the libfabric objects are used only through &mut self, one
// thread at a time (domain threading FI_THREAD_DOMAIN).
unsafe impl Send for OfiTransport {}

impl OfiTransport {
    /// Open the provider for `rank` of `size`. Connect with
    /// [`Transport::connect`] after exchanging [`Transport::address`].
    pub fn new(rank: Rank, size: u32, opts: OfiOptions) -> Result<OfiTransport, TransportError> {
        if size == 0 || rank >= size {
            return Err(TransportError::Invalid(format!(
                "rank {rank} of {size} ranks"
            )));
        }
        if opts.progress == Progress::Thread {
            return Err(TransportError::Unsupported(
                "--progress thread is not implemented for --transport ofi; use --progress poll (providers with FI_PROGRESS_AUTO progress on their own)".into(),
            ));
        }
        let is_shm = opts.provider.split(';').any(|p| p == "shm");
        let cma = is_shm.then(cma::prepare);
        let node = match (&opts.node, is_shm) {
            (Some(n), _) => Some(n.as_str()),
            (None, true) => None,
            (None, false) => Some("127.0.0.1"),
        };
        let fabric = Fabric::open(&opts.provider, node, opts.delivery_complete)?;
        let mut t = OfiTransport {
            rank,
            size,
            mem: Memory::new(fabric.attrs.mr_mode),
            peers: Vec::new(),
            pending: VecDeque::new(),
            recv_bufs: Vec::new(),
            recv_pool: Vec::new(),
            send_pool: Vec::new(),
            in_flight: 0,
            backlog: VecDeque::new(),
            cma,
            fabric,
        };
        for _ in 0..RECV_BUFS {
            let op = Op::boxed(Kind::RecvBuf, 0, 0, vec![0u8; t.eager_size()]);
            t.recv_bufs.push(op);
            t.post_recv_buf(op)?;
        }
        Ok(t)
    }

    fn eager_size(&self) -> usize {
        EAGER_BUF_SIZE.min(self.fabric.attrs.max_msg_size.max(SRC_HDR + 1))
    }

    fn addr(&self, peer: Rank, op: OpKind) -> Result<sys::fi_addr_t, TransportError> {
        match self.peers.get(peer as usize) {
            Some(a) => Ok(*a),
            None if peer >= self.size => Err(TransportError::Invalid(format!(
                "{op} to rank {peer}, but the job has {} ranks",
                self.size
            ))),
            None => Err(TransportError::Peer {
                peer,
                op,
                status: "not connected: call connect() with every rank's address first".into(),
            }),
        }
    }

    fn post_recv_buf(&mut self, op: *mut Op) -> Result<(), TransportError> {
        let ep = self.fabric.ep;
        // SAFETY: op is one of our live receive slots; its buffer is not
        // touched by us until its completion.
        let (p, n) = unsafe { ((*op).buf.as_mut_ptr(), (*op).buf.len()) };
        self.submit(
            Some(op),
            Deferred::new(self.rank, OpKind::Recv, "fi_recv", None, move || {
                // SAFETY: ep is enabled; the buffer and context stay valid
                // until the completion (slots are freed after the ep closes).
                unsafe {
                    sys::fi_recv(
                        ep,
                        p.cast(),
                        n,
                        ptr::null_mut(),
                        sys::FI_ADDR_UNSPEC,
                        op.cast(),
                    )
                }
            }),
        )
    }

    /// Hand an operation to the provider. `-FI_EAGAIN` is not an error:
    /// the post waits in the backlog and `poll` retries it after reading
    /// the CQ (tcp and shm free resources only when progressed, and in a
    /// one-process test the peer progresses only between our polls).
    fn submit(&mut self, op: Option<*mut Op>, mut d: Deferred) -> Result<(), TransportError> {
        d.op = op;
        if !self.backlog.is_empty() {
            self.backlog.push_back(d);
            return Ok(());
        }
        match (d.post)() {
            0 => {
                self.posted(&d);
                Ok(())
            }
            EAGAIN => {
                self.backlog.push_back(d);
                Ok(())
            }
            rc => Err(self.refused(d, rc)),
        }
    }

    /// Book-keeping once the provider accepted a post.
    fn posted(&mut self, d: &Deferred) {
        match (d.op, d.inject_ctx) {
            (Some(op), _) => {
                // SAFETY: op is live until its completion.
                if unsafe { (*op).kind } != Kind::RecvBuf {
                    self.in_flight += 1;
                }
            }
            (None, Some(ctx)) => self.pending.push_back(Completion::Send { ctx }),
            (None, None) => {}
        }
    }

    /// The provider refused a post for good: take the op back, name it.
    fn refused(&mut self, d: Deferred, rc: isize) -> TransportError {
        let mut e = peer_err(d.peer, d.kind, d.call, rc as i64);
        if rc == EAGAIN {
            if let TransportError::Peer { status, .. } = &mut e {
                status.push_str(&format!(
                    " for {} s: rank {} stopped progressing",
                    EAGAIN_DEADLINE.as_secs(),
                    d.peer
                ));
            }
        }
        if let Some(op) = d.op {
            // SAFETY: the provider did not accept the operation, so it
            // holds no reference to op.
            let op = unsafe { Box::from_raw(op) };
            if op.kind == Kind::RecvBuf {
                // A receive slot stays owned by recv_bufs; do not free it.
                std::mem::forget(op);
            } else {
                self.recycle_send(op.buf);
            }
        }
        e
    }

    /// Retry backlogged posts in order until one is refused again.
    fn flush_backlog(&mut self) {
        while let Some(mut d) = self.backlog.pop_front() {
            match (d.post)() {
                0 => self.posted(&d),
                EAGAIN if d.since.elapsed() < EAGAIN_DEADLINE => {
                    self.backlog.push_front(d);
                    return;
                }
                rc => {
                    let (peer, kind, ctx) = (
                        d.peer,
                        d.kind,
                        d.op.map(|o| {
                            // SAFETY: op is live until taken back in refused().
                            unsafe { (*o).ctx }
                        })
                        .or(d.inject_ctx),
                    );
                    let e = self.refused(d, rc);
                    self.pending.push_back(Completion::Error {
                        ctx,
                        peer,
                        op: kind,
                        status: e.to_string(),
                    });
                }
            }
        }
    }

    fn recycle_send(&mut self, b: Vec<u8>) {
        if self.send_pool.len() < 256 {
            self.send_pool.push(b);
        }
    }

    /// Read every available completion entry into `pending`.
    fn drain_cq(&mut self) -> Result<(), TransportError> {
        let mut entries = [sys::fi_cq_tagged_entry::default(); 32];
        loop {
            // SAFETY: cq is open with FI_CQ_FORMAT_TAGGED; entries has room
            // for 32 of them.
            let n = unsafe {
                sys::fi_cq_read(self.fabric.cq, entries.as_mut_ptr().cast(), entries.len())
            };
            if n > 0 {
                for e in &entries[..n as usize] {
                    self.complete(e.op_context.cast(), e.len, e.tag, None)?;
                }
            } else if n == EAGAIN {
                return Ok(());
            } else if n == EAVAIL {
                let mut err = sys::fi_cq_err_entry::default();
                // SAFETY: cq is open; err is a valid entry to fill.
                let rc = unsafe { sys::fi_cq_readerr(self.fabric.cq, &mut err, 0) };
                if rc != 1 {
                    return Err(crate::error::local(
                        OpKind::Poll,
                        "fi_cq_readerr",
                        rc as i64,
                        "",
                    ));
                }
                // SAFETY: cq is open; err came from it; the returned string
                // is owned by the provider until the next call.
                let s = unsafe {
                    sys::fi_cq_strerror(
                        self.fabric.cq,
                        err.prov_errno,
                        err.err_data,
                        ptr::null_mut(),
                        0,
                    )
                };
                let prov = if s.is_null() {
                    String::new()
                } else {
                    // SAFETY: a NUL-terminated provider string.
                    unsafe { std::ffi::CStr::from_ptr(s) }
                        .to_string_lossy()
                        .into_owned()
                };
                let mut status = format!("{}; provider says: {prov}", fi_str(i64::from(err.err)));
                if let Some(c) = self.cma.as_ref().filter(|c| !c.usable) {
                    status.push_str(&format!("; {}", c.detail));
                }
                self.complete(err.op_context.cast(), err.len, err.tag, Some(status))?;
            } else {
                return Err(crate::error::local(
                    OpKind::Poll,
                    "fi_cq_read",
                    n as i64,
                    "",
                ));
            }
        }
    }

    /// Turn one completion entry into the contract's completion.
    fn complete(
        &mut self,
        op: *mut Op,
        len: usize,
        tag: u64,
        err: Option<String>,
    ) -> Result<(), TransportError> {
        if op.is_null() {
            return Ok(());
        }
        // SAFETY: every context we post is an `Op` we allocated; the
        // provider returns it exactly once per posted operation.
        if unsafe { (*op).kind } == Kind::RecvBuf {
            let c = match err {
                Some(status) => Completion::Error {
                    ctx: None,
                    peer: self.rank,
                    op: OpKind::Recv,
                    status,
                },
                None => {
                    // SAFETY: as above; the buffer is ours again until reposted.
                    let b = unsafe { &(*op).buf };
                    let n = len.min(b.len());
                    let src = (n >= SRC_HDR)
                        .then(|| u32::from_le_bytes(b[..SRC_HDR].try_into().expect("4 bytes")));
                    match src {
                        Some(src) if src < self.size => {
                            let mut data = self.recv_pool.pop().unwrap_or_default();
                            data.clear();
                            data.extend_from_slice(&b[SRC_HDR..n]);
                            Completion::Recv { peer: src, data }
                        }
                        _ => Completion::Error {
                            ctx: None,
                            peer: self.rank,
                            op: OpKind::Recv,
                            status: format!(
                                "a {len}-byte message without a valid ovbench source header (rank {src:?} of {}); another program shares this endpoint",
                                self.size
                            ),
                        },
                    }
                }
            };
            self.pending.push_back(c);
            return self.post_recv_buf(op);
        }
        // SAFETY: a non-receive Op is owned by the provider until this
        // completion, which returns it to us.
        let op = unsafe { Box::from_raw(op) };
        self.in_flight = self.in_flight.saturating_sub(1);
        let (ctx, peer) = (op.ctx, op.peer);
        if let Some(status) = err {
            self.pending.push_back(Completion::Error {
                ctx: Some(ctx),
                peer,
                op: op.kind.op(),
                status,
            });
            self.recycle_send(op.buf);
            return Ok(());
        }
        let c = match op.kind {
            Kind::Send => Completion::Send { ctx },
            Kind::Write | Kind::Fence => Completion::Write { ctx },
            Kind::Read => Completion::Read { ctx },
            Kind::TaggedSend => Completion::TaggedSend { ctx },
            Kind::TaggedRecv => Completion::TaggedRecv {
                ctx,
                peer: (tag >> TAG_SRC_SHIFT) as Rank,
                tag: tag as u32 as Tag,
                len,
            },
            Kind::WriteThenFence => {
                let f = op.fence.expect("a fenced write carries its fence");
                return self.post_fence(peer, ctx, f);
            }
            Kind::RecvBuf => unreachable!("handled above"),
        };
        self.recycle_send(op.buf);
        self.pending.push_back(c);
        Ok(())
    }

    /// Read one byte back from the written range: the provider serves the
    /// read after the write it follows on the same ordered connection, so
    /// its completion proves the write was placed.
    fn post_fence(&mut self, peer: Rank, ctx: Ctx, f: Fence) -> Result<(), TransportError> {
        let ep = self.fabric.ep;
        let addr = self.peers[peer as usize];
        let op = Op::boxed(Kind::Fence, ctx, peer, vec![0u8; 1]);
        // SAFETY: op is freshly boxed and ours until submitted.
        let p = unsafe { (*op).buf.as_mut_ptr() };
        self.submit(
            Some(op),
            Deferred::new(
                peer,
                OpKind::Write,
                "fi_read (write fence)",
                None,
                move || {
                    // SAFETY: ep is enabled; p is a 1-byte buffer owned by op
                    // until its completion; address and key were checked.
                    unsafe {
                        sys::fi_read(
                            ep,
                            p.cast(),
                            1,
                            ptr::null_mut(),
                            addr,
                            f.addr,
                            f.key,
                            op.cast(),
                        )
                    }
                },
            ),
        )
    }

    /// The flag that makes a tagged send synchronous (complete once the
    /// target matched it with a receive): `FI_MATCH_COMPLETE` where the
    /// provider offers it; else `FI_DELIVERY_COMPLETE` on providers that
    /// hold it until the match (shm, verified by the tests — tcp;ofi_rxm
    /// and sockets complete it into their unexpected buffer); else none.
    fn sync_send_flag(&self) -> Option<u64> {
        let a = &self.fabric.attrs;
        if a.match_complete {
            Some(u64::from(sys::FI_MATCH_COMPLETE))
        } else if a.delivery_complete
            && a.provider
                .split(';')
                .all(|p| DC_WAITS_FOR_MATCH.contains(&p))
        {
            Some(u64::from(sys::FI_DELIVERY_COMPLETE))
        } else {
            None
        }
    }

    /// Which provider runs, and how writes become visible.
    pub fn write_visibility(&self) -> &'static str {
        if self.fabric.attrs.delivery_complete {
            "FI_DELIVERY_COMPLETE: the write completes once the target has placed the data"
        } else {
            "read-after-write fence: a 1-byte fi_read of the written range follows each write; its completion proves placement"
        }
    }
}

impl Transport for OfiTransport {
    fn info(&self) -> TransportInfo {
        let a = &self.fabric.attrs;
        // SAFETY: fi_version has no preconditions.
        let v = unsafe { sys::fi_version() };
        let mut extra = vec![
            ("provider".into(), a.provider.clone()),
            ("fabric".into(), a.fabric.clone()),
            ("domain".into(), a.domain.clone()),
            ("mr_mode".into(), format!("{:#x}", a.mr_mode)),
            ("inject_size".into(), a.inject_size.to_string()),
            ("data_progress".into(), if a.data_progress_auto { "auto" } else { "manual" }.into()),
            ("write_visibility".into(), self.write_visibility().into()),
            (
                "native_ssend".into(),
                match self.sync_send_flag() {
                    Some(f) if f == u64::from(sys::FI_MATCH_COMPLETE) => "fi_tsendmsg(FI_MATCH_COMPLETE)".into(),
                    Some(_) => "fi_tsendmsg(FI_DELIVERY_COMPLETE), which this provider completes only once matched".into(),
                    None => "n/a: no FI_MATCH_COMPLETE, and FI_DELIVERY_COMPLETE completes into the unexpected buffer".into(),
                },
            ),
        ];
        if let Some(c) = &self.cma {
            extra.push(("cma".into(), c.detail.clone()));
        }
        TransportInfo {
            name: "ofi".into(),
            device: format!("{} ({})", a.provider, a.domain),
            library: format!("libfabric {}.{}", v >> 16, v & 0xffff),
            extra,
        }
    }

    fn caps(&self) -> Caps {
        let hw = self
            .fabric
            .attrs
            .provider
            .split(';')
            .any(|p| p == "verbs" || p == "efa" || p == "cxi" || p == "psm3");
        Caps {
            rma: RmaKind::Native,
            rma_progress: if hw {
                RmaProgress::Offloaded
            } else {
                RmaProgress::TargetProgress
            },
            progress: Progress::Poll,
            max_inline: self.fabric.attrs.inject_size.saturating_sub(SRC_HDR),
            eager_buf_size: self.eager_size() - SRC_HDR,
            native_tagged: true,
            native_sync_send: self.sync_send_flag().is_some(),
        }
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn address(&self) -> Vec<u8> {
        self.fabric.address.clone()
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        if addresses.len() != self.size as usize {
            return Err(TransportError::Invalid(format!(
                "connect needs {} addresses, got {}",
                self.size,
                addresses.len()
            )));
        }
        if !self.peers.is_empty() {
            return Err(TransportError::Invalid("connect called twice".into()));
        }
        self.peers = self.fabric.insert(addresses)?;
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
        self.mem.register(self.fabric.domain, s)
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.mem.deregister(mr)
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
        let dest = self.addr(peer, OpKind::Send)?;
        let total = SRC_HDR + header.len() + payload.map_or(0, |p| p.len);
        if total > self.eager_size() {
            return Err(TransportError::Invalid(format!(
                "a {}-byte message to rank {peer} exceeds the {}-byte eager buffer",
                total - SRC_HDR,
                self.eager_size() - SRC_HDR
            )));
        }
        let mut buf = self.send_pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&self.rank.to_le_bytes());
        buf.extend_from_slice(header);
        if let Some(p) = payload {
            match self.mem.slice(p) {
                Ok(b) => buf.extend_from_slice(b),
                Err(e) => {
                    self.recycle_send(buf);
                    return Err(e);
                }
            }
        }
        let ep = self.fabric.ep;
        if total <= self.fabric.attrs.inject_size {
            // The closure owns the bytes until fi_inject has copied them.
            return self.submit(
                None,
                Deferred::new(peer, OpKind::Send, "fi_inject", Some(ctx), move || {
                    // SAFETY: ep is enabled; fi_inject copies the bytes
                    // before returning.
                    unsafe { sys::fi_inject(ep, buf.as_ptr().cast(), buf.len(), dest) }
                }),
            );
        }
        let (p, n) = (buf.as_ptr(), buf.len());
        let op = Op::boxed(Kind::Send, ctx, peer, buf);
        self.submit(
            Some(op),
            Deferred::new(peer, OpKind::Send, "fi_send", None, move || {
                // SAFETY: ep is enabled; the staging buffer is owned by op
                // until its completion (the Vec's heap block did not move).
                unsafe { sys::fi_send(ep, p.cast(), n, ptr::null_mut(), dest, op.cast()) }
            }),
        )
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
        let dest = self.addr(peer, OpKind::Write)?;
        let (raddr, key) =
            remote_target(peer, remote, remote_offset, local.len, self.mem.virt_addr)?;
        let (mut desc, lp) = self.mem.local_rma(mr, local)?;
        if local.len == 0 {
            self.pending.push_back(Completion::Write { ctx });
            return Ok(());
        }
        let ep = self.fabric.ep;
        let dc = self.fabric.attrs.delivery_complete;
        let kind = if dc {
            Kind::Write
        } else {
            Kind::WriteThenFence
        };
        let op = Op::boxed(kind, ctx, peer, Vec::new());
        if !dc {
            // SAFETY: op is freshly boxed and ours until submitted.
            unsafe {
                (*op).fence = Some(Fence {
                    addr: raddr + local.len as u64 - 1,
                    key,
                })
            };
        }
        let len = local.len;
        let flags = u64::from(sys::FI_COMPLETION)
            | if dc {
                u64::from(sys::FI_DELIVERY_COMPLETE)
            } else {
                0
            };
        self.submit(
            Some(op),
            Deferred::new(peer, OpKind::Write, "fi_writemsg", None, move || {
                let iov = libc::iovec {
                    iov_base: lp.cast(),
                    iov_len: len,
                };
                let rma = sys::fi_rma_iov {
                    addr: raddr,
                    len,
                    key,
                };
                let msg = sys::fi_msg_rma {
                    msg_iov: (&iov as *const libc::iovec).cast(),
                    desc: &mut desc,
                    iov_count: 1,
                    addr: dest,
                    rma_iov: &rma,
                    rma_iov_count: 1,
                    context: op.cast(),
                    data: 0,
                };
                // SAFETY: ep is enabled; msg and its iovs live through the
                // call; the local range lies in registration mr; the remote
                // range was checked against the key.
                unsafe { sys::fi_writemsg(ep, &msg, flags) }
            }),
        )
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
        let src = self.addr(peer, OpKind::Read)?;
        let (raddr, key) =
            remote_target(peer, remote, remote_offset, local.len, self.mem.virt_addr)?;
        let (desc, lp) = self.mem.local_rma(mr, local)?;
        let ep = self.fabric.ep;
        let op = Op::boxed(Kind::Read, ctx, peer, Vec::new());
        let len = local.len;
        self.submit(
            Some(op),
            Deferred::new(peer, OpKind::Read, "fi_read", None, move || {
                // SAFETY: ep is enabled; the local range lies in registration
                // mr, whose region cannot be freed while registered.
                unsafe { sys::fi_read(ep, lp.cast(), len, desc, src, raddr, key, op.cast()) }
            }),
        )
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        self.drain_cq()?;
        if !self.backlog.is_empty() {
            self.flush_backlog();
        }
        let n = self.pending.len();
        out.extend(self.pending.drain(..));
        Ok(n)
    }

    fn recycle(&mut self, data: Vec<u8>) {
        if self.recv_pool.len() < 1024 {
            self.recv_pool.push(data);
        }
    }

    fn wait_fd(&self) -> Option<RawFd> {
        self.fabric.attrs.wait_fd
    }

    fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        let Some(fd) = self.fabric.attrs.wait_fd else {
            std::thread::yield_now();
            return Ok(());
        };
        if !self.pending.is_empty() || !self.backlog.is_empty() {
            return Ok(());
        }
        // SAFETY: cq is open; fids is an array of one fid pointer.
        let mut fids = [unsafe { &mut (*self.fabric.cq).fid as *mut sys::fid }];
        // SAFETY: fabric is open; fids holds one open CQ fid.
        if unsafe { sys::fi_trywait(self.fabric.fabric, fids.as_mut_ptr(), 1) } != 0 {
            return Ok(());
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: pfd is a valid array of one pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(TransportError::io("poll on the libfabric CQ's wait fd", e));
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
        let dest = self.addr(peer, OpKind::TaggedSend)?;
        let sync_flag = match self.sync_send_flag() {
            Some(f) => f,
            None if sync => {
                return Err(TransportError::Unsupported(format!(
                    "provider {} offers no FI_MATCH_COMPLETE and its FI_DELIVERY_COMPLETE completes once the message sits in the target's unexpected buffer, so a synchronous native send (complete once matched) cannot be expressed; ssend rows are n/a on --transport ofi --proto native with this provider",
                    self.fabric.attrs.provider
                )));
            }
            None => 0,
        };
        let p = self.mem.ptr(src)?;
        let utag = (u64::from(self.rank) << TAG_SRC_SHIFT) | u64::from(tag);
        let ep = self.fabric.ep;
        let op = Op::boxed(Kind::TaggedSend, ctx, peer, Vec::new());
        let len = src.len;
        if !sync {
            return self.submit(
                Some(op),
                Deferred::new(peer, OpKind::TaggedSend, "fi_tsend", None, move || {
                    // SAFETY: ep is enabled; src lies in a live region the
                    // caller keeps until this completion.
                    unsafe {
                        sys::fi_tsend(ep, p.cast(), len, ptr::null_mut(), dest, utag, op.cast())
                    }
                }),
            );
        }
        let flags = u64::from(sys::FI_COMPLETION) | sync_flag;
        self.submit(
            Some(op),
            Deferred::new(
                peer,
                OpKind::TaggedSend,
                "fi_tsendmsg (synchronous)",
                None,
                move || {
                    let iov = libc::iovec {
                        iov_base: p.cast(),
                        iov_len: len,
                    };
                    let mut desc: *mut libc::c_void = ptr::null_mut();
                    let msg = sys::fi_msg_tagged {
                        msg_iov: (&iov as *const libc::iovec).cast(),
                        desc: &mut desc,
                        iov_count: 1,
                        addr: dest,
                        tag: utag,
                        ignore: 0,
                        context: op.cast(),
                        data: 0,
                    };
                    // SAFETY: as for fi_tsend; msg and iov live through the call.
                    unsafe { sys::fi_tsendmsg(ep, &msg, flags) }
                },
            ),
        )
    }

    fn trecv(
        &mut self,
        src: Option<Rank>,
        tag: Option<Tag>,
        dst: LocalSlice,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        if let Some(s) = src {
            if s >= self.size {
                return Err(TransportError::Invalid(format!(
                    "tagged receive from rank {s}, but the job has {} ranks",
                    self.size
                )));
            }
        }
        let p = self.mem.ptr(dst)?;
        let utag = (u64::from(src.unwrap_or(0)) << TAG_SRC_SHIFT) | u64::from(tag.unwrap_or(0));
        let ignore = if src.is_none() {
            0xffff_ffff_0000_0000
        } else {
            0
        } | if tag.is_none() { 0xffff_ffff } else { 0 };
        let ep = self.fabric.ep;
        let peer = src.unwrap_or(self.rank);
        let op = Op::boxed(Kind::TaggedRecv, ctx, peer, Vec::new());
        let len = dst.len;
        self.submit(
            Some(op),
            Deferred::new(peer, OpKind::TaggedRecv, "fi_trecv", None, move || {
                // SAFETY: ep is enabled; dst lies in a live region the caller
                // keeps until this completion.
                unsafe {
                    sys::fi_trecv(
                        ep,
                        p.cast(),
                        len,
                        ptr::null_mut(),
                        sys::FI_ADDR_UNSPEC,
                        utag,
                        ignore,
                        op.cast(),
                    )
                }
            }),
        )
    }
}

impl Drop for OfiTransport {
    fn drop(&mut self) {
        // Close the endpoint first so the provider lets go of every
        // context, then free the receive slots and the registrations.
        if !self.fabric.ep.is_null() {
            // SAFETY: ep is open and closed once; Fabric's drop skips it.
            unsafe { sys::fi_close(&mut (*self.fabric.ep).fid) };
            self.fabric.ep = ptr::null_mut();
        }
        self.backlog.clear();
        for op in self.recv_bufs.drain(..) {
            // SAFETY: each slot was boxed by us; the endpoint is closed.
            drop(unsafe { Box::from_raw(op) });
        }
        self.mem.close_all();
    }
}

/// A post waiting for the provider to accept it.
struct Deferred {
    op: Option<*mut Op>,
    /// For `fi_inject`: the context whose Send completion follows success.
    inject_ctx: Option<Ctx>,
    peer: Rank,
    kind: OpKind,
    call: &'static str,
    since: Instant,
    post: Box<dyn FnMut() -> isize>,
}

impl Deferred {
    fn new(
        peer: Rank,
        kind: OpKind,
        call: &'static str,
        inject_ctx: Option<Ctx>,
        post: impl FnMut() -> isize + 'static,
    ) -> Deferred {
        Deferred {
            op: None,
            inject_ctx,
            peer,
            kind,
            call,
            since: Instant::now(),
            post: Box::new(post),
        }
    }
}
