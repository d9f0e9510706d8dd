//! [`TcpTransport`]: the [`Transport`] contract over TCP sockets.

use std::io::Read;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use ovbench_core::fabric::progress_thread::ProgressThread;
use ovbench_core::{
    Arrivals, Caps, Completion, CompletionStamps, Ctx, Idle, LocalSlice, MrHandle, Msg, OpKind,
    Posted, Progress, Rank, RegionId, Registered, RemoteKey, RmaKind, RmaOp, RmaProgress,
    Transport, TransportError, TransportInfo,
};

use crate::engine::{Engine, Pending};
use crate::mesh;
use crate::thread::{self, Shared, WAKE_TOKEN};
use crate::tx::{TxData, TxItem};
use crate::wire::{key_blob, parse_key_blob, Header, Kind, HDR_LEN};

/// How a [`TcpTransport`] runs.
#[derive(Clone, Debug)]
pub struct TcpOptions {
    /// Progress by polling only, or also by a thread blocking in epoll.
    pub progress: Progress,
    /// Address to listen on (the peers connect to it).
    pub bind: IpAddr,
    /// Largest two-sided message, header included.
    pub eager_buf_size: usize,
    /// Deadline for building the mesh.
    pub timeout: Duration,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            progress: Progress::Poll,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            eager_buf_size: 64 * 1024,
            timeout: Duration::from_secs(60),
        }
    }
}

/// The smallest eager buffer accepted: room for protocol headers and keys.
const MIN_EAGER: usize = 1024;
/// Longest a dropped transport spends pushing out its goodbye.
const SHUTDOWN_BUDGET: Duration = Duration::from_millis(500);

/// The progress thread and the sockets that talk to it.
struct Worker {
    handle: ProgressThread,
    wake: UnixStream,
    notify: UnixStream,
}

/// A TCP endpoint set: one connection per peer rank.
pub struct TcpTransport {
    rank: Rank,
    size: u32,
    opts: TcpOptions,
    listener: Option<TcpListener>,
    address: SocketAddr,
    shared: Arc<Shared>,
    epoll: Arc<Epoll>,
    worker: Option<Worker>,
    /// The test hook armed by OVBENCH_TCP_STALL (test builds only).
    #[cfg(feature = "fault-inject")]
    stall: Option<crate::stall::Stall>,
}

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("address", &self.address)
            .field("progress", &self.opts.progress)
            .finish()
    }
}

fn local(op: OpKind, detail: String) -> TransportError {
    TransportError::Local { op, detail }
}

impl TcpTransport {
    /// Listen on `opts.bind` (an ephemeral port); [`Transport::address`]
    /// then gives the bytes the peers need.
    pub fn new(rank: Rank, size: u32, opts: TcpOptions) -> Result<TcpTransport, TransportError> {
        if size == 0 || rank >= size {
            return Err(TransportError::Invalid(format!(
                "rank {rank} in a job of {size} ranks"
            )));
        }
        if opts.eager_buf_size < MIN_EAGER || opts.eager_buf_size > u32::MAX as usize {
            return Err(TransportError::Invalid(format!(
                "eager buffer of {} bytes: use {MIN_EAGER} bytes to 4 GiB",
                opts.eager_buf_size
            )));
        }
        if opts.bind.is_unspecified() {
            return Err(TransportError::Invalid(format!(
                "rank {rank}: the TCP transport cannot hand {} to its peers as an address: bind to this host's address on the network the ranks share",
                opts.bind
            )));
        }
        let listener = TcpListener::bind(SocketAddr::new(opts.bind, 0)).map_err(|e| {
            TransportError::io(
                format!(
                    "rank {rank} cannot listen on {}: pick an address of this host",
                    opts.bind
                ),
                e,
            )
        })?;
        let address = listener
            .local_addr()
            .map_err(|e| TransportError::io("reading the listening address", e))?;
        let epoll = Arc::new(
            Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)
                .map_err(|e| TransportError::io("creating an epoll instance", e.into()))?,
        );
        let engine = Engine::new(rank, size, opts.eager_buf_size, epoll.clone());
        // The test hook, armed by OVBENCH_TCP_CORRUPT (test builds only).
        #[cfg(feature = "fault-inject")]
        let engine = {
            let mut e = engine;
            e.fault = crate::fault::Fault::from_env(rank)?;
            e
        };
        #[cfg(feature = "fault-inject")]
        let stall = crate::stall::Stall::from_env(rank)?;
        Ok(TcpTransport {
            #[cfg(feature = "fault-inject")]
            stall,
            rank,
            size,
            opts,
            listener: Some(listener),
            address,
            shared: Arc::new(Shared {
                engine: Mutex::new(engine),
                notified: AtomicBool::new(false),
            }),
            epoll,
            worker: None,
        })
    }

    fn start_worker(&mut self) -> Result<(), TransportError> {
        let pair = || {
            let (a, b) = UnixStream::pair()?;
            a.set_nonblocking(true)?;
            b.set_nonblocking(true)?;
            Ok::<_, std::io::Error>((a, b))
        };
        let io = |e| TransportError::io("starting the TCP progress thread", e);
        let (wake, wake_rx) = pair().map_err(io)?;
        let (notify_tx, notify) = pair().map_err(io)?;
        self.epoll
            .add(
                wake_rx.as_fd(),
                EpollEvent::new(EpollFlags::EPOLLIN, WAKE_TOKEN),
            )
            .map_err(|e| io(e.into()))?;
        let handle = thread::spawn(
            self.shared.clone(),
            self.epoll.clone(),
            wake_rx,
            notify_tx,
            self.rank,
        )
        .map_err(io)?;
        self.worker = Some(Worker {
            handle,
            wake,
            notify,
        });
        Ok(())
    }

    /// Common checks and bookkeeping of write and read.
    fn rma_op(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        let RmaOp {
            op,
            local,
            mr,
            remote,
            remote_offset,
        } = rma;
        let op = op.op();
        let mut g = self.shared.lock();
        g.peer_for(peer, op, local.len)?;
        let bad = |detail: String| {
            TransportError::Invalid(format!(
                "{op} of {} bytes at offset {remote_offset} of rank {peer}: {detail}",
                local.len
            ))
        };
        g.mem.check_local(mr, local).map_err(bad)?;
        let (reg, check) = parse_key_blob(&remote.blob).ok_or_else(|| {
            bad(format!(
                "the remote key's blob has {} bytes, a TCP key has 12: it is not a key of this transport",
                remote.blob.len()
            ))
        })?;
        remote
            .check_range(remote_offset, local.len as u64)
            .map_err(bad)?;
        let q = Pending {
            peer,
            op,
            ctx,
            local,
            remote_offset,
        };
        if peer == self.rank {
            g.loop_rma(q, reg, check);
            return Ok(());
        }
        let id = g.next_id();
        g.pending.insert(id, q);
        let mut h = Header::new(if op == OpKind::Write {
            Kind::WriteReq
        } else {
            Kind::ReadReq
        });
        h.id = id;
        h.offset = remote_offset;
        h.len = local.len as u64;
        h.reg = reg;
        h.check = check;
        let data = if op == OpKind::Write {
            TxData::Region(local)
        } else {
            TxData::None
        };
        #[cfg(feature = "fault-inject")]
        let data = {
            let e = &mut *g;
            crate::fault::apply(&mut e.fault, &e.mem, data, 0)
        };
        g.enqueue(peer, TxItem::new(h, data, None));
        Ok(())
    }
}

impl Transport for TcpTransport {
    fn info(&self) -> TransportInfo {
        TransportInfo {
            caps: Caps {
                rma: RmaKind::Emulated,
                rma_progress: RmaProgress::TargetProgress,
                progress: self.opts.progress,
                eager_buf_size: self.opts.eager_buf_size,
                native_sync_send: false,
                completion_stamps: CompletionStamps::Host,
                // The send's copy into an owned buffer; at the receiver
                // the buffer's zero-fill and the copy into the user's.
                eager_copies: 3,
            },
            rank: self.rank,
            size: self.size,
            name: "tcp".into(),
            device: self.opts.bind.to_string(),
            library: String::new(),
            extra: vec![
                ("listen".into(), self.address.to_string()),
                (
                    "eager_buf_size".into(),
                    self.opts.eager_buf_size.to_string(),
                ),
                ("progress".into(), self.opts.progress.to_string()),
            ],
        }
    }

    fn address(&self) -> Vec<u8> {
        self.address.to_string().into_bytes()
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        let listener = self.listener.take().ok_or_else(|| {
            TransportError::Invalid(format!("rank {} is already connected", self.rank))
        })?;
        let deadline = Instant::now() + self.opts.timeout;
        let streams = mesh::build(self.rank, self.size, &listener, addresses, deadline)?;
        self.shared.lock().attach(streams)?;
        if self.opts.progress == Progress::Thread {
            self.start_worker()?;
        }
        Ok(())
    }

    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        self.shared.lock().mem.table.alloc(len)
    }

    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        let mut g = self.shared.lock();
        if let Some(q) = g.pending.values().find(|q| q.local.region == region) {
            return Err(TransportError::Invalid(format!(
                "region {} still has a {} with rank {} in flight: wait for its completion before freeing",
                region.0, q.op, q.peer
            )));
        }
        g.mem.table.free(region)
    }

    fn region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        let mut g = self.shared.lock();
        f(g.mem.slice_mut(s)?);
        Ok(())
    }

    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        let mut g = self.shared.lock();
        let mr = g.mem.register(s)?;
        let r = g.mem.registration(mr).ok_or_else(|| {
            TransportError::Invalid(format!("registration {} vanished as it was made", mr.0))
        })?;
        let key = RemoteKey {
            addr: 0,
            len: r.len as u64,
            blob: key_blob(mr.0, r.check),
        };
        Ok(Registered { mr, key })
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.shared.lock().mem.deregister(mr)
    }

    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        let total = msg.within(peer, self.opts.eager_buf_size)?;
        let Msg { header, payload } = msg;
        let mut g = self.shared.lock();
        g.peer_for(peer, OpKind::Send, total)?;
        let mut data = g.pool.pop().unwrap_or_default();
        data.clear();
        data.reserve(total);
        data.extend_from_slice(header);
        if let Some(p) = payload {
            let bytes = g.mem.slice(p).map_err(|e| {
                TransportError::Invalid(format!("send of {total} bytes to rank {peer}: {e}"))
            })?;
            data.extend_from_slice(bytes);
        }
        if peer == self.rank {
            g.loop_send(data, ctx);
            return Ok(Posted::Queued);
        }
        let mut h = Header::new(Kind::Msg);
        h.len = total as u64;
        let data = TxData::Owned(data);
        #[cfg(feature = "fault-inject")]
        let data = {
            let e = &mut *g;
            crate::fault::apply(&mut e.fault, &e.mem, data, header.len())
        };
        g.enqueue(peer, TxItem::new(h, data, Some(Completion::Send { ctx })));
        #[cfg(feature = "fault-inject")]
        if let Some(s) = self.stall {
            drop(g);
            s.after_send(total);
        }
        Ok(Posted::Queued)
    }

    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        self.rma_op(peer, rma, ctx)
    }

    /// Hands nothing over: every message is queued as a
    /// [`Completion::Recv`] (the socket reader owns the bytes).
    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        _arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        if let Some(w) = &self.worker {
            if self.shared.notified.swap(false, Ordering::AcqRel) {
                let mut sink = [0u8; 64];
                while matches!((&w.notify).read(&mut sink), Ok(n) if n > 0) {}
            }
        }
        let mut g = self.shared.lock();
        g.progress_all();
        let n = g.done.len();
        out.extend(g.done.drain(..));
        Ok(n)
    }

    fn recycle(&mut self, mut data: Vec<u8>) {
        let mut g = self.shared.lock();
        if g.pool.len() < 256 && data.capacity() <= 2 * self.opts.eager_buf_size + HDR_LEN {
            data.clear();
            g.pool.push(data);
        }
    }

    fn idle(&mut self, why: Idle) -> Result<(), TransportError> {
        match why {
            Idle::Block(timeout) => self.block(timeout),
            Idle::EmptyPoll | Idle::WatchingMemory => Ok(()),
        }
    }
}

impl TcpTransport {
    /// A file descriptor that becomes readable when a poll may find
    /// something, for ranks that sleep instead of spinning.
    pub fn wait_fd(&self) -> Option<RawFd> {
        Some(match &self.worker {
            Some(w) => w.notify.as_raw_fd(),
            None => self.epoll.0.as_raw_fd(),
        })
    }

    /// Sleep until something may be ready or `timeout` passes.
    fn block(&mut self, timeout: Duration) -> Result<(), TransportError> {
        if !self.shared.lock().done.is_empty() {
            return Ok(());
        }
        let ms = timeout.as_millis().min(u128::from(u16::MAX)) as u16;
        let res = match &self.worker {
            Some(w) => {
                let mut fds = [nix::poll::PollFd::new(
                    w.notify.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                )];
                let r = nix::poll::poll(&mut fds, ms).map(|_| ());
                // Drain the wake-up so a stale byte cannot make every later
                // block return at once (a spin); completions queued since
                // are caught by the check on entry.
                self.shared.notified.store(false, Ordering::Release);
                let mut sink = [0u8; 64];
                while matches!((&w.notify).read(&mut sink), Ok(n) if n > 0) {}
                r
            }
            None => {
                let mut ev = [EpollEvent::empty(); 1];
                self.epoll.wait(&mut ev, ms).map(|_| ())
            }
        };
        match res {
            Ok(()) | Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(local(
                OpKind::Poll,
                format!("waiting for the TCP sockets: {e}"),
            )),
        }
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            w.handle.stop(|| {
                let _ = (&w.wake).write(&[1]);
            });
        }
        self.shared.lock().shutdown(SHUTDOWN_BUDGET);
    }
}
