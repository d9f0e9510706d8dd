//! [`Endpoint`]: the contract over one libfabric RDM endpoint (wrapped by
//! [`crate::OfiTransport`], which adds the optional progress thread).

use std::collections::VecDeque;
use std::collections::{BTreeMap, HashSet};
use std::os::fd::RawFd;
use std::time::Duration;

use ovbench_core::fabric::{peers, wire_tag};
use ovbench_core::{
    Arrivals, Caps, Completion, CompletionStamps, Ctx, MrHandle, OpKind, Progress, Rank, Rma,
    RmaKind, RmaOp, RmaProgress, TagRecv, TransportError, TransportInfo,
};
use ovbench_ofi_sys as sys;

use crate::cma::{self, CmaStatus};
use crate::fabric::Libfabric;
use crate::memory::{remote_target, Memory};
use crate::ops::{Fence, Kind, Op, SRC_HDR};
use crate::OfiOptions;

mod backlog;
mod control;
mod cq;
mod sends;

use backlog::{Call, Deferred, Post, Req};
use cq::Sink;

/// Largest two-sided message (ovbench header plus payload).
pub const EAGER_BUF_SIZE: usize = 64 * 1024;
/// Receive buffers kept posted.
const RECV_BUFS: usize = 64;
/// Operation boxes kept for reuse.
const SPARE_OPS: usize = 64;
/// How long a post may keep getting `-FI_EAGAIN` before it is an error.
const EAGAIN_DEADLINE: Duration = Duration::from_secs(30);
/// Providers whose `FI_DELIVERY_COMPLETE` on a tagged send waits for the
/// receive to be matched (checked by `tests/pair.rs`).
const DC_WAITS_FOR_MATCH: &[&str] = &["shm"];
const EAGAIN: isize = -(sys::FI_EAGAIN as isize);
const EAVAIL: isize = -(sys::FI_EAVAIL as isize);

/// The libfabric transport. See the crate docs for the mapping.
///
/// Fields drop in order (see `Drop`): the libfabric objects first, the
/// memory they may still touch after.
pub(crate) struct Endpoint {
    /// Endpoint (with its receive slots), queue, address vector, domain
    /// and fabric.
    pub(crate) fabric: Libfabric,
    /// Regions and registrations: the registrations close right after the
    /// libfabric objects (the last one closes the domain), the regions
    /// after that; every other buffer is freed after this field.
    pub(crate) mem: Memory,
    /// Writes ask for `FI_DELIVERY_COMPLETE` (else the fence read).
    write_dc: bool,
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    peers: Vec<sys::fi_addr_t>,
    /// Completions found while retrying a post, handed out by `poll`.
    pending: VecDeque<Completion>,
    /// How many of `pending` are `Recv`s: a message goes to
    /// the arrivals taker of `poll` only while none is (one might be its peer's,
    /// ahead of it), and a counter spares scanning the queue per message.
    queued_recvs: usize,
    pub(crate) recv_pool: Vec<Vec<u8>>,
    send_pool: Vec<Vec<u8>>,
    in_flight: usize,
    /// Posts the provider refused with `-FI_EAGAIN`, retried in order by
    /// `poll` (later posts queue behind them to keep posting order).
    backlog: VecDeque<Deferred>,
    /// Next sequence number to each peer / expected from each peer, and
    /// messages that overtook an earlier one.
    send_seq: Vec<u32>,
    expected: Vec<u32>,
    held: Vec<BTreeMap<u32, Vec<u8>>>,
    /// Peers that said goodbye or whose process died.
    gone: Vec<bool>,
    /// Pids of peers on this host (from their hello), to notice a death.
    /// Same-host peer processes, checked for a death without goodbye.
    watch: ovbench_core::fabric::peer_watch::PeerWatch,
    /// Peers whose hello has arrived.
    hellos: Vec<bool>,
    /// Keys their owners revoked: (owner, checksum), bounded.
    revoked: HashSet<(Rank, u64)>,
    revoked_order: VecDeque<(Rank, u64)>,
    cma: Option<CmaStatus>,
    /// Ranks blocked on the progress thread's condition variable (counted
    /// under its mutex): the thread notifies only when one is.
    pub(crate) waiters: usize,
    /// Boxes of completed operations, reused by the next posts instead of
    /// a malloc and a free per message.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Op>>,
}

impl Endpoint {
    /// Open the provider for `rank` of `size`. Connect with
    /// [`ovbench_core::Transport::connect`] after exchanging
    /// [`ovbench_core::Transport::address`].
    pub fn new(rank: Rank, size: u32, opts: OfiOptions) -> Result<Endpoint, TransportError> {
        if size == 0 || rank >= size {
            return Err(TransportError::Invalid(format!(
                "rank {rank} of {size} ranks"
            )));
        }
        let is_shm = opts.provider.split(';').any(|p| p == "shm");
        let cma = is_shm.then(cma::prepare);
        let node = match (&opts.node, is_shm) {
            (Some(n), _) => Some(n.as_str()),
            (None, true) => None,
            (None, false) => Some("127.0.0.1"),
        };
        // A wait fd only for the progress thread, which sleeps on it; the
        // rank's own polls (and block(), which then yields) need none.
        let fabric = Libfabric::open(
            &opts.provider,
            node,
            opts.progress == Progress::Thread,
            size,
        )?;
        let offered = fabric.attrs.delivery_complete;
        let cma_ok = cma.as_ref().is_some_and(|c| c.usable);
        let write_dc = match opts.delivery_complete {
            Some(true) if !offered => {
                return Err(TransportError::Unsupported(format!(
                    "provider {} offers no FI_DELIVERY_COMPLETE; let ovbench choose (it falls back to a read-after-write fence)",
                    fabric.attrs.provider
                )))
            }
            Some(want) => want,
            // shm with CMA: write and fence read are both done by the
            // initiator, so the target is never needed.
            None => offered && !(is_shm && cma_ok),
        };
        let mut t = Endpoint {
            rank,
            size,
            mem: Memory::new(fabric.attrs.mr_mode),
            write_dc,
            peers: Vec::new(),
            pending: VecDeque::new(),
            queued_recvs: 0,
            recv_pool: Vec::new(),
            send_pool: Vec::new(),
            in_flight: 0,
            backlog: VecDeque::new(),
            send_seq: vec![0; size as usize],
            expected: vec![0; size as usize],
            held: (0..size).map(|_| BTreeMap::new()).collect(),
            hellos: vec![false; size as usize],
            gone: vec![false; size as usize],
            watch: ovbench_core::fabric::peer_watch::PeerWatch::new(
                size,
                crate::liveness::signal_zero,
            ),
            revoked: HashSet::new(),
            revoked_order: VecDeque::new(),
            cma,
            waiters: 0,
            spare: Vec::new(),
            fabric,
        };
        for slot in 0..RECV_BUFS {
            let op = Op::boxed(Kind::RecvBuf, slot as Ctx, 0, vec![0u8; t.eager_size()]);
            t.post_recv_buf(op)?;
        }
        Ok(t)
    }

    /// A fresh operation context for the provider (a spare box if any).
    pub(crate) fn op(&mut self, kind: Kind, ctx: Ctx, peer: Rank, buf: Vec<u8>) -> Box<Op> {
        match self.spare.pop() {
            Some(mut b) => {
                *b = Op::new(kind, ctx, peer, buf);
                b
            }
            None => Op::boxed(kind, ctx, peer, buf),
        }
    }

    /// Keep a completed operation's box (its buffer already taken) for
    /// reuse.
    pub(crate) fn spare_op(&mut self, op: Box<Op>) {
        if self.spare.len() < SPARE_OPS {
            self.spare.push(op);
        }
    }

    fn eager_size(&self) -> usize {
        EAGER_BUF_SIZE.min(self.fabric.attrs.max_msg_size.max(SRC_HDR + 1))
    }

    fn addr(&self, peer: Rank, op: OpKind) -> Result<sys::fi_addr_t, TransportError> {
        self.check_not_gone(peer, op)?;
        match self.peers.get(peer as usize) {
            Some(a) => Ok(*a),
            None => Err(peers::no_endpoint(peer, self.size, op)),
        }
    }

    /// Whether nothing is pending and the provider agrees that sleeping on
    /// the CQ's fd is safe now (`fi_trywait`).
    pub(crate) fn may_sleep(&mut self) -> bool {
        if !self.pending.is_empty()
            || !self.backlog.is_empty()
            || self.fabric.attrs.wait_fd.is_none()
        {
            return false;
        }
        self.fabric.trywait()
    }

    /// The caller is about to sleep: let the next `progress` check peers
    /// (it would otherwise read the clock only every few hundred calls).
    pub(crate) fn watch_soon(&mut self) {
        self.watch.soon();
    }

    /// Whether completions are waiting to be handed out by `poll`.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Put completions a blocking wait polled out (and did not want) back
    /// at the head of the queue, in their order.
    pub(crate) fn requeue_front(&mut self, held: Vec<Completion>) {
        for c in held.into_iter().rev() {
            if matches!(c, Completion::Recv { .. }) {
                self.queued_recvs += 1;
            }
            self.pending.push_front(c);
        }
    }

    /// Move every pending completion to `out`; returns how many.
    fn hand_out(&mut self, out: &mut Vec<Completion>) -> usize {
        let n = self.pending.len();
        // Most polls find nothing: no drain to build and drop.
        if n == 0 {
            return 0;
        }
        out.extend(self.pending.drain(..));
        self.queued_recvs = 0;
        n
    }

    /// Read the CQ, retry the backlog and watch peers: what `poll` does
    /// before handing out completions (the progress thread calls it).
    /// Messages go to `sink` where order allows (`poll` with arrivals).
    pub(crate) fn progress(&mut self, sink: Option<&mut Sink<'_>>) -> Result<(), TransportError> {
        self.drain_cq(sink)?;
        if !self.backlog.is_empty() {
            self.flush_backlog();
        }
        let pending = &mut self.pending;
        self.watch.check(&mut self.gone, |c| pending.push_back(c));
        Ok(())
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
        if self.write_dc {
            "FI_DELIVERY_COMPLETE: the write completes once the target has placed the data"
        } else {
            "read-after-write fence: a 1-byte fi_read of the written range follows each write; its completion proves placement"
        }
    }
}

/// The contract's operations that take more than a field (called by
/// [`crate::OfiTransport`]'s `Transport` impl, which does the rest).
impl Endpoint {
    pub(crate) fn info(&self) -> TransportInfo {
        let a = &self.fabric.attrs;
        let v = crate::fi::fabric::version();
        let mut extra = vec![
            ("provider".into(), a.provider.clone()),
            ("fabric".into(), a.fabric.clone()),
            ("domain".into(), a.domain.clone()),
            ("mr_mode".into(), format!("{:#x}", a.mr_mode)),
            ("inject_size".into(), a.inject_size.to_string()),
            ("data_progress".into(), if a.data_progress_auto { "auto" } else { "manual" }.into()),
            ("write_visibility".into(), self.write_visibility().into()),
            ("universe_size".into(), a.universe.describe()),
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
            caps: self.caps(),
            rank: self.rank,
            size: self.size,
        }
    }

    pub(crate) fn caps(&self) -> Caps {
        let prov = &self.fabric.attrs.provider;
        let hw = prov
            .split(';')
            .any(|p| p == "verbs" || p == "efa" || p == "cxi" || p == "psm3");
        // shm with CMA and the fence: the initiator alone moves the data.
        let cma_alone =
            prov == "shm" && !self.write_dc && self.cma.as_ref().is_some_and(|c| c.usable);
        // tcp, sockets and udp carry RMA as messages the target's provider
        // unpacks: emulated, whatever the API calls them.
        let by_messages = !hw
            && !cma_alone
            && prov
                .split(';')
                .any(|p| p == "tcp" || p == "sockets" || p == "udp");
        Caps {
            rma: if by_messages {
                RmaKind::Emulated
            } else {
                RmaKind::Native
            },
            rma_progress: if hw || cma_alone {
                RmaProgress::Offloaded
            } else {
                RmaProgress::TargetProgress
            },
            // A provider with automatic data progress (sockets) runs its
            // own threads: two-sided traffic moves without our polls.
            progress: if self.fabric.attrs.data_progress_auto {
                Progress::Thread
            } else {
                Progress::Poll
            },
            eager_buf_size: self.eager_size() - SRC_HDR,
            native_sync_send: self.sync_send_flag().is_some(),
            completion_stamps: CompletionStamps::Host,
            // The send's staging copy and the placement out of the
            // posted receive buffer.
            eager_copies: 2,
        }
    }

    pub(crate) fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        peers::check_connect(addresses, self.size, !self.peers.is_empty())?;
        self.peers = self.fabric.insert(addresses)?;
        self.hello_all()
    }

    pub(crate) fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        let sum = crate::seal::sum_of(&self.mem.mr(mr)?.key.blob);
        self.mem.deregister(mr)?;
        self.revoke_everywhere(sum);
        Ok(())
    }

    /// An RMA write or read of `local` (inside `mr`) against `remote` at
    /// `remote_offset`: one check of peer, range and key for both.
    pub(crate) fn post_rma(
        &mut self,
        peer: Rank,
        rma: RmaOp<'_>,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        let (kind, local) = (rma.op.op(), rma.local);
        let addr = self.addr(peer, kind)?;
        let target = remote_target(
            peer,
            rma.remote,
            rma.remote_offset,
            local.len,
            self.mem.virt_addr,
        )?;
        let buf = self.mem.local_rma(rma.mr, local)?;
        self.check_not_revoked(peer, target.sum, kind)?;
        let (raddr, key) = (target.addr, target.key);
        if rma.op == Rma::Read {
            let op = self.op(Kind::Read, ctx, peer, Vec::new());
            let req = Req::Read {
                dst: buf,
                src: addr,
                raddr,
                key,
            };
            return self.submit(Post::new(peer, kind, "fi_read", req.with(op)));
        }
        if local.len == 0 {
            self.pending.push_back(Completion::Write { ctx });
            return Ok(());
        }
        let dc = self.write_dc;
        let kind = if dc {
            Kind::Write
        } else {
            Kind::WriteThenFence(Fence {
                addr: raddr + local.len as u64 - 1,
                key,
            })
        };
        let op = self.op(kind, ctx, peer, Vec::new());
        let flags = u64::from(sys::FI_COMPLETION)
            | if dc {
                u64::from(sys::FI_DELIVERY_COMPLETE)
            } else {
                0
            };
        let req = Req::Write {
            src: buf,
            dest: addr,
            raddr,
            key,
            flags,
        };
        self.submit(Post::new(peer, OpKind::Write, "fi_writemsg", req.with(op)))
    }

    pub(crate) fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        self.progress(None)?;
        Ok(self.hand_out(out))
    }

    pub(crate) fn poll_arrivals(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: &mut dyn Arrivals,
    ) -> Result<usize, TransportError> {
        let mut sink = Sink::new(arrivals);
        self.progress(Some(&mut sink))?;
        // A refusal fails this poll; what came after it stays queued.
        let handed = sink.finish()?;
        Ok(self.hand_out(out) + handed)
    }

    pub(crate) fn recycle(&mut self, data: Vec<u8>) {
        if self.recv_pool.len() < 1024 {
            self.recv_pool.push(data);
        }
    }

    pub(crate) fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        // Polls after a sleep are slow: let the next one check peers.
        self.watch.soon();
        let Some(fd) = self.fabric.attrs.wait_fd else {
            std::thread::yield_now();
            return Ok(());
        };
        if self.may_sleep() {
            sleep_on(fd, timeout)?;
        }
        Ok(())
    }

    pub(crate) fn trecv(&mut self, op: TagRecv, ctx: Ctx) -> Result<(), TransportError> {
        let TagRecv { src, tag, dst } = op;
        let (utag, mask) = wire_tag::recv_selector(src, tag, self.size)?;
        let dst = self.mem.buf(dst)?;
        let peer = src.unwrap_or(self.rank);
        let op = self.op(Kind::TaggedRecv, ctx, peer, Vec::new());
        let req = Req::TRecv {
            dst,
            tag: utag,
            ignore: !mask,
        };
        let call = req.with(op);
        self.submit(Post::new(peer, OpKind::TaggedRecv, "fi_trecv", call))
    }
}

impl Drop for Endpoint {
    /// Teardown in libfabric's order, and our memory only after all of it:
    /// 1. goodbyes out (and whatever the peers sent read), so no peer
    ///    keeps sending to an endpoint that is going away (here);
    /// 2. the endpoint closed (field `fabric`, first): the provider
    ///    discards what is still posted (fi_endpoint(3)) and stops
    ///    touching our buffers and contexts; its completion queue and the
    ///    address vector closed after it (verbs;ofi_rxm's are left open
    ///    for the process's exit: `fabric::close_crashes`);
    /// 3. the registrations closed (field `mem`, second), while their
    ///    domain is open and the memory they cover still mapped (fi_mr(3));
    ///    then the domain (freeing the endpoint's receive slots once
    ///    closed) and the fabric;
    /// 4. only then regions, staging buffers and operation boxes freed
    ///    (`mem`'s regions, then the later fields): a provider part that
    ///    outlives the endpoint (rxm's connection handling, the domain's
    ///    registration cache and its memory monitor) never sees memory it
    ///    still tracks freed under it.
    fn drop(&mut self) {
        self.say_goodbye();
    }
}

/// Sleep until `fd` is readable or `timeout` passes (EINTR is a wake-up).
pub(crate) fn sleep_on(fd: RawFd, timeout: Duration) -> Result<(), TransportError> {
    crate::fi::cq::sleep_on(fd, timeout)
        .map_err(|e| TransportError::io("poll on the libfabric CQ's wait fd", e))
}
