//! [`MpiTransport`]: the contract over MPI. Control and eager messages of
//! ovbench's own protocols travel on a communicator of their own; writes
//! and reads are `MPI_Put`/`MPI_Get` on the one dynamic window, made
//! complete by `MPI_Win_flush` at the next poll.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ovbench_core::{
    Arrivals, Caps, Completion, CompletionStamps, Ctx, LocalSlice, MrHandle, Msg, OpKind, Posted,
    Progress, Rank, RegionId, Registered, Rma, RmaKind, RmaOp, RmaProgress, Tagged, Transport,
    TransportError, TransportInfo,
};

use crate::ffi::comm::Comm;
use crate::ffi::ctrl::CtrlChannel;
use crate::ffi::memory::{revocation, revoked_by, target, Memory};
use crate::ffi::window::Window;
use crate::tagged::TaggedOps;
use crate::{MpiError, MpiJob, MpiOptions};

/// The context of the transport's own revocation messages (callers'
/// contexts never reach it).
const REVOKE_CTX: Ctx = u64::MAX - (1 << 40);

/// Largest two-sided message of the own protocols (header plus payload).
pub const EAGER_BUF_SIZE: usize = 64 * 1024;

/// What the transport posted to MPI, counted where the calls are made
/// (the JSON's `mpi_calls`; tests compare them with a PMPI wrapper's).
#[derive(Debug, Default)]
pub struct CallCounts {
    /// `MPI_Put` calls.
    pub puts: AtomicU64,
    /// `MPI_Get` calls.
    pub gets: AtomicU64,
    /// `MPI_Win_flush` calls.
    pub flushes: AtomicU64,
}

impl CallCounts {
    /// `(puts, gets, flushes)` so far.
    pub fn read(&self) -> (u64, u64, u64) {
        (
            self.puts.load(Ordering::Relaxed),
            self.gets.load(Ordering::Relaxed),
            self.flushes.load(Ordering::Relaxed),
        )
    }
}

/// A one-sided operation waiting for its flush.
#[derive(Debug)]
struct PendingRma {
    peer: Rank,
    ctx: Ctx,
    op: Rma,
    len: usize,
}

/// The own protocols' machinery, built at connect.
#[derive(Debug)]
struct Connected {
    ctrl: CtrlChannel,
    win: Window,
    rma: Vec<PendingRma>,
}

/// The MPI transport of one rank.
#[derive(Debug)]
pub struct MpiTransport {
    pub(crate) job: Arc<MpiJob>,
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    /// Native point-to-point and collectives.
    pub(crate) data: Comm,
    pub(crate) mem: Memory,
    pub(crate) tagged: TaggedOps,
    own: Option<Connected>,
    counts: Arc<CallCounts>,
    /// Keys peers revoked (and this rank's own), as `(owner, checksum)`.
    revoked: HashSet<(Rank, u64)>,
    sent: Vec<(Ctx, Vec<u8>)>,
    pool: Vec<Vec<u8>>,
}

/// The error of an operation towards a rank the job does not have (out
/// of the message path).
#[cold]
#[inline(never)]
fn no_such_rank(op: OpKind, peer: Rank, size: u32) -> TransportError {
    TransportError::Invalid(format!("{op} to rank {peer}, but the job has {size} ranks"))
}

/// An MPI call's failure as a transport error with `peer`.
pub(crate) fn peer_err(peer: Rank, op: OpKind) -> impl FnOnce(String) -> TransportError {
    move |status| TransportError::Peer { peer, op, status }
}

/// An MPI call's failure with no one peer.
pub(crate) fn local_err(op: OpKind) -> impl FnOnce(String) -> TransportError {
    move |detail| TransportError::Local { op, detail }
}

impl MpiTransport {
    pub(crate) fn new(job: Arc<MpiJob>, opts: MpiOptions) -> Result<MpiTransport, MpiError> {
        if opts.progress == Progress::Thread && !job.multiple() {
            return Err(MpiError::Unsupported(format!(
                "--progress thread over MPI needs MPI_THREAD_MULTIPLE, and this library gave {} to ovbench's request for FUNNELED: drop --progress thread (MPI progresses inside its calls)",
                job.thread_level()
            )));
        }
        if opts.progress == Progress::Thread {
            return Err(MpiError::Unsupported(
                "--progress thread over MPI: ovbench asks MPI for FUNNELED, so its progress thread could not call MPI: drop --progress thread".into(),
            ));
        }
        let data = Comm::dup_world(job.watch.clone()).map_err(MpiError::Init)?;
        Ok(MpiTransport {
            rank: data.rank,
            size: data.size,
            data,
            job,
            mem: Memory::default(),
            tagged: TaggedOps::default(),
            own: None,
            counts: Arc::new(CallCounts::default()),
            revoked: HashSet::new(),
            sent: Vec::new(),
            pool: Vec::new(),
        })
    }

    /// The MPI calls this transport made, readable after it is boxed.
    pub fn call_counts(&self) -> Arc<CallCounts> {
        self.counts.clone()
    }

    /// A peer's rank, checked.
    #[inline(always)]
    pub(crate) fn peer(&self, peer: Rank, op: OpKind) -> Result<(), TransportError> {
        if peer < self.size {
            Ok(())
        } else {
            Err(no_such_rank(op, peer, self.size))
        }
    }

    fn own(&mut self) -> Result<&mut Connected, TransportError> {
        self.own
            .as_mut()
            .ok_or_else(|| TransportError::Invalid("the MPI transport is not connected yet".into()))
    }

    /// Finished control sends: completions, buffers back to the pool.
    fn poll_sends(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        let Some(c) = self.own.as_mut() else {
            return Ok(0);
        };
        c.ctrl
            .poll_sends(&mut self.sent)
            .map_err(local_err(OpKind::Send))?;
        let n = self.sent.len();
        for (ctx, buf) in self.sent.drain(..) {
            self.pool.push(buf);
            // A revocation is the transport's own message: nobody waits.
            if ctx != REVOKE_CTX {
                out.push(Completion::Send { ctx });
            }
        }
        Ok(n)
    }

    /// Arrived control messages, handed over or queued.
    fn poll_recvs(
        &mut self,
        out: &mut Vec<Completion>,
        mut arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        let Some(c) = self.own.as_mut() else {
            return Ok(0);
        };
        let (mem, pool, revoked) = (&mut self.mem, &mut self.pool, &mut self.revoked);
        c.ctrl.poll_recvs(|peer, bytes| {
            if let Some(sum) = revoked_by(bytes) {
                revoked.insert((peer, sum));
                return Ok(());
            }
            match arrivals.as_deref_mut() {
                Some(a) => {
                    if let Some(p) = a.arrived(peer, bytes)? {
                        let src = bytes
                            .get(p.src_start..p.src_start + p.dst.len)
                            .ok_or_else(|| TransportError::Invalid(format!(
                                "a placement of {} bytes at {} of a {}-byte message from rank {peer}",
                                p.dst.len, p.src_start, bytes.len()
                            )))?;
                        mem.table.slice_mut(p.dst)?.copy_from_slice(src);
                    }
                }
                None => {
                    let mut data = pool.pop().unwrap_or_default();
                    data.clear();
                    data.extend_from_slice(bytes);
                    out.push(Completion::Recv { peer, data });
                }
            }
            Ok(())
        })
    }

    /// Flush every peer with one-sided operations waiting: they complete.
    fn poll_rma(&mut self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        let Some(c) = self.own.as_mut() else {
            return Ok(0);
        };
        if c.rma.is_empty() {
            return Ok(0);
        }
        let n = c.rma.len();
        let mut peers: Vec<Rank> = c.rma.iter().map(|p| p.peer).collect();
        peers.sort_unstable();
        peers.dedup();
        for peer in peers {
            let size = c.rma.iter().filter(|p| p.peer == peer).map(|p| p.len).sum();
            c.win
                .flush(peer, &self.job.watch, size)
                .map_err(peer_err(peer, OpKind::Write))?;
            self.counts.flushes.fetch_add(1, Ordering::Relaxed);
        }
        for p in c.rma.drain(..) {
            out.push(match p.op {
                Rma::Write => Completion::Write { ctx: p.ctx },
                Rma::Read => Completion::Read { ctx: p.ctx },
            });
        }
        Ok(n)
    }
}

impl Transport for MpiTransport {
    fn info(&self) -> TransportInfo {
        let mut extra = vec![
            ("threads".to_string(), self.job.thread_level().to_string()),
            ("host".to_string(), self.job.host().to_string()),
        ];
        if let Some(o) = self.job.osc() {
            extra.push(("osc".into(), format!("{} ({})", o.component, o.how)));
            extra.push(("rma".into(), o.rma_note()));
        } else {
            extra.push((
                "rma".into(),
                "MPI one-sided on a dynamic window: counted as emulated and served by the target's progress".into(),
            ));
        }
        TransportInfo {
            name: "mpi".into(),
            device: match self.job.osc() {
                Some(o) => format!("MPI_COMM_WORLD, osc {}", o.component),
                None => "MPI_COMM_WORLD".into(),
            },
            library: self.job.library().to_string(),
            extra,
            caps: Caps {
                rma: RmaKind::Emulated,
                rma_progress: RmaProgress::TargetProgress,
                progress: Progress::Poll,
                eager_buf_size: EAGER_BUF_SIZE,
                native_sync_send: true,
                completion_stamps: CompletionStamps::Host,
                // The send's staging copy and the placement out of the
                // receive buffer.
                eager_copies: 2,
            },
            rank: self.rank,
            size: self.size,
        }
    }

    /// MPI knows its ranks: nothing to exchange.
    fn address(&self) -> Vec<u8> {
        Vec::new()
    }

    /// The control communicator, the window and its epoch, and one
    /// control receive per peer (collective).
    fn connect(&mut self, _addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        if self.own.is_some() {
            return Ok(());
        }
        let comm = self.data.dup().map_err(local_err(OpKind::Connect))?;
        let win = Window::create(&comm).map_err(|e| {
            let hint = match self.job.osc() {
                Some(o) => format!(
                    " (Open MPI's osc {} could not serve it: try OMPI_MCA_osc=pt2pt or rdma)",
                    o.component
                ),
                None => String::new(),
            };
            TransportError::Local {
                op: OpKind::Connect,
                detail: format!("{e}{hint}"),
            }
        })?;
        let ctrl = CtrlChannel::new(comm, EAGER_BUF_SIZE).map_err(local_err(OpKind::Connect))?;
        self.own = Some(Connected {
            ctrl,
            win,
            rma: Vec::new(),
        });
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
        f(self.mem.table.slice_mut(s)?);
        Ok(())
    }

    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        let rank = self.rank;
        let Some(c) = self.own.as_mut() else {
            return Err(TransportError::Invalid(
                "the MPI transport is not connected yet".into(),
            ));
        };
        let new = match self.mem.unattached_region(s)? {
            Some(whole) => Some(
                c.win
                    .attach(&mut self.mem, whole)
                    .map_err(local_err(OpKind::Register))?,
            ),
            None => None,
        };
        let (mr, key) = self.mem.add_mr(s, new, rank)?;
        Ok(Registered { mr, key })
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        let (sum, base) = self.mem.remove_mr(mr)?;
        let (me, size) = (self.rank, self.size);
        self.revoked.insert((me, sum));
        let c = self.own()?;
        // Every peer learns the key is gone before anything this rank
        // sends after (one receive per peer keeps the order).
        for peer in (0..size).filter(|&p| p != me) {
            if let Some(buf) = c
                .ctrl
                .send(peer, revocation(sum), REVOKE_CTX)
                .map_err(peer_err(peer, OpKind::Register))?
            {
                drop(buf);
            }
        }
        match base {
            Some(base) => c.win.detach(base).map_err(local_err(OpKind::Register)),
            None => Ok(()),
        }
    }

    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        self.peer(peer, OpKind::Send)?;
        msg.within(peer, EAGER_BUF_SIZE)?;
        let Msg { header, payload } = msg;
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(header);
        if let Some(p) = payload {
            buf.extend_from_slice(self.mem.table.slice(p)?);
        }
        let c = self.own()?;
        // A small message usually leaves inside the call: no completion
        // to queue and poll for.
        match c
            .ctrl
            .send(peer, buf, ctx)
            .map_err(peer_err(peer, OpKind::Send))?
        {
            Some(buf) => {
                self.pool.push(buf);
                Ok(Posted::Done(None))
            }
            None => Ok(Posted::Queued),
        }
    }

    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        let (op, local) = (rma.op, rma.local);
        self.peer(peer, op.op())?;
        self.mem.table.covering(rma.mr, local)?;
        let len = local.len as u64;
        let disp = target(rma.remote, peer, rma.remote_offset, len, &self.revoked)
            .map_err(|detail| TransportError::BadKey { peer, detail })?;
        let Some(c) = self.own.as_mut() else {
            return Err(TransportError::Invalid(
                "the MPI transport is not connected yet".into(),
            ));
        };
        c.win
            .rma(op, &mut self.mem, local, peer, disp)
            .map_err(peer_err(peer, op.op()))?;
        let count = match op {
            Rma::Write => &self.counts.puts,
            Rma::Read => &self.counts.gets,
        };
        count.fetch_add(1, Ordering::Relaxed);
        c.rma.push(PendingRma {
            peer,
            ctx,
            op,
            len: local.len,
        });
        Ok(())
    }

    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        let mut n = self.poll_tagged(out)?;
        if self.own.is_some() {
            n += self.poll_rma(out)?;
            n += self.poll_sends(out)?;
            n += self.poll_recvs(out, arrivals)?;
        }
        Ok(n)
    }

    fn recycle(&mut self, data: Vec<u8>) {
        if self.pool.len() < 64 {
            self.pool.push(data);
        }
    }

    fn tagged(&mut self) -> Option<&mut dyn Tagged> {
        Some(self)
    }
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        // Withdraw what is still posted before the buffers go; the window
        // and communicators free themselves after (field order).
        self.tagged.cancel_all();
        // Every rank's window goes together: nobody still reads or writes
        // memory about to be freed (MPI_Win_free is collective too).
        if let Some(c) = self.own.as_ref() {
            let _ = c.ctrl.comm.barrier();
        }
    }
}
