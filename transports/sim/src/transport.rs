//! [`SimTransport`]: one rank's endpoint into the simulated machine. Every
//! call that other ranks can influence (posting, polling, registration)
//! first syncs with the scheduler, so it takes effect at the rank's
//! virtual time in global time order; memory access is local and free.
//!
//! Costs (docs/architecture.md § The simulator): each post charges o_s to the
//! caller; each two-sided message consumed by [`Transport::poll`] charges
//! o_r (progress=poll), as does each one-sided request served there
//! (offload=no). A message's size m is its payload: header bytes are free,
//! so a 0-byte message is exact in the closed forms.
//!
//! With progress=thread, arrivals cost the application nothing and
//! one-sided requests that are not offloaded are served on arrival, as a
//! progress thread would serve them.
//!
//! A rank that polls [`SPIN_LIMIT`] times at one virtual time with nothing
//! deliverable is spinning; it then jumps to its next event, as does
//! [`Transport::block`] at once. The completion of a send whose context
//! carries `QUIET_CTX` (the engine's: nothing waits on it, it records
//! nothing) is no such event: under the runner, where no rank leaves, it
//! is queued as the send is posted and handed to the rank's next poll
//! (free running, it comes one L after arrival and still wakes no one).
//! A rank that sleeps inside the engine's wait therefore behaves exactly
//! as if woken for it; one spinning on `test` in its own loop goes round
//! fewer times, with nothing else changed.

use std::sync::Arc;

use ovbench_core::{
    Arrivals, Caps, Completion, CompletionStamps, CompletionTime, Ctx, Idle, LocalSlice, MrHandle,
    Msg, OpKind, Posted, Progress, Rank, RegionId, Registered, Rma, RmaKind, RmaOp, RmaProgress,
    Transport, TransportError, TransportInfo, MAX_KEY_BLOB,
};

use ovbench_core::engine_comm::QUIET_CTX;

use crate::clock::SimClock;
use crate::sched::{Guard, Shared};
use crate::world::{RmaKind as Req, RmaReq};
use crate::Ps;

/// Largest two-sided message, header included.
pub const EAGER_BUF_SIZE: usize = 64 * 1024;

/// Empty polls at one virtual time after which a rank is taken to be
/// spinning and jumps to its next event. Above 1 so that a library call
/// that polls once and then returns to the user does not lose time.
pub const SPIN_LIMIT: u32 = 4;

/// Most recycled message buffers a rank keeps; beyond that they go to the
/// machine's shared spares, up to `SPARE_MAX`.
const POOL_MAX: usize = 64;
const SPARE_MAX: usize = 4096;

/// One rank's transport under sim.
#[derive(Debug)]
pub struct SimTransport {
    shared: Arc<Shared>,
    rank: Rank,
    /// Consecutive empty polls at virtual time `spin_at` (spinning
    /// detection). Kept here, not in the shared world: only this rank's
    /// own calls change them.
    empty_polls: u32,
    spin_at: Ps,
    /// Message buffers handed back by [`Transport::recycle`], reused by
    /// the next sends (a bounded pool, so no allocation per message).
    pool: Vec<Vec<u8>>,
    /// The last poll's completions of this rank's own operations, by
    /// index, with the virtual time they finished (read on this rank's
    /// clock when asked): the sim's
    /// NIC stamps completions, as a NIC with completion timestamps does.
    /// Arrivals are not stamped: the engine's work in response to one
    /// happens when the rank takes it.
    nic_times: Vec<(usize, Ps)>,
    clock: SimClock,
}

impl SimTransport {
    pub(crate) fn new(shared: Arc<Shared>, rank: Rank) -> SimTransport {
        let clock = SimClock::new(shared.clone(), rank);
        SimTransport {
            shared,
            rank,
            empty_polls: 0,
            nic_times: Vec::new(),
            clock,
            spin_at: 0,
            pool: Vec::new(),
        }
    }

    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        if peer < self.shared.np {
            Ok(())
        } else {
            Err(TransportError::Invalid(format!(
                "rank {peer} does not exist in a {}-rank run",
                self.shared.np
            )))
        }
    }

    /// Refuse at once an operation aimed at a rank that has left.
    fn check_alive(g: &Guard<'_>, peer: Rank, op: OpKind) -> Result<(), TransportError> {
        if g.w.ranks[peer as usize].dead {
            return Err(TransportError::Peer {
                peer,
                op,
                status: format!("rank {peer} has left the run"),
            });
        }
        Ok(())
    }

    fn synced(&self) -> Result<Guard<'_>, TransportError> {
        self.shared.sync(self.shared.lock(), self.rank)
    }

    /// Validate and copy the local side of a write/read, then post it.
    #[allow(clippy::too_many_arguments)]
    fn rma_op(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        let (local, remote) = (rma.local, rma.remote);
        let write = rma.op == Rma::Write;
        self.check_peer(peer)?;
        if remote.blob.len() > MAX_KEY_BLOB {
            return Err(TransportError::Invalid(format!(
                "remote key blob of {} bytes exceeds the {MAX_KEY_BLOB}-byte cap",
                remote.blob.len()
            )));
        }
        let mut g = self.shared.sync(self.shared.lock(), self.rank)?;
        let op = if write { OpKind::Write } else { OpKind::Read };
        Self::check_alive(&g, peer, op)?;
        let me = &g.w.ranks[self.rank as usize];
        me.mem.check_local(rma.mr, local)?;
        let kind = if write {
            Req::Write {
                data: me.mem.slice(local)?.to_vec(),
            }
        } else {
            Req::Read {
                len: local.len as u64,
                local,
            }
        };
        let req = RmaReq {
            from: self.rank,
            key: remote.clone(),
            offset: rma.remote_offset,
            ctx,
            op: 0,
            kind,
        };
        g.w.post_rma(self.rank, peer, req);
        self.empty_polls = 0;
        self.shared.publish(&mut g, self.rank);
        Ok(())
    }
}

impl Transport for SimTransport {
    fn info(&self) -> TransportInfo {
        TransportInfo {
            name: "sim".into(),
            device: "loggp".into(),
            library: "ovbench-sim".into(),
            extra: self.shared.params.describe(),
            caps: self.caps(),
            rank: self.rank,
            size: self.shared.np,
        }
    }

    fn address(&self) -> Vec<u8> {
        self.rank.to_le_bytes().to_vec()
    }

    fn connect(&mut self, addresses: &[Vec<u8>]) -> Result<(), TransportError> {
        if addresses.len() != self.shared.np as usize {
            return Err(TransportError::Invalid(format!(
                "{} addresses for a {}-rank run",
                addresses.len(),
                self.shared.np
            )));
        }
        for (i, a) in addresses.iter().enumerate() {
            if a.as_slice() != (i as u32).to_le_bytes() {
                return Err(TransportError::Invalid(format!(
                    "address {i} is not a sim address of rank {i}"
                )));
            }
        }
        Ok(())
    }

    fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        Ok(self.shared.lock().w.ranks[self.rank as usize]
            .mem
            .alloc(len))
    }

    fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.shared.lock().w.ranks[self.rank as usize]
            .mem
            .free(region)
    }

    fn region(
        &mut self,
        s: LocalSlice,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), TransportError> {
        let mut g = self.shared.lock();
        f(g.w.ranks[self.rank as usize].mem.slice_mut(s)?);
        Ok(())
    }

    fn register(&mut self, s: LocalSlice) -> Result<Registered, TransportError> {
        let mut g = self.shared.sync(self.shared.lock(), self.rank)?;
        let mem = &mut g.w.ranks[self.rank as usize].mem;
        let mr = mem.register(s)?;
        Ok(Registered {
            mr,
            key: mem.remote_key(mr),
        })
    }

    fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        let mut g = self.shared.sync(self.shared.lock(), self.rank)?;
        g.w.ranks[self.rank as usize].mem.deregister(mr)
    }

    fn post_send(&mut self, peer: Rank, msg: Msg<'_>, ctx: Ctx) -> Result<Posted, TransportError> {
        self.check_peer(peer)?;
        msg.within(peer, EAGER_BUF_SIZE)?;
        let Msg { header, payload } = msg;
        let plen = payload.map_or(0, |p| p.len);
        let mut g = self.shared.sync(self.shared.lock(), self.rank)?;
        Self::check_alive(&g, peer, OpKind::Send)?;
        let mut data = match self.pool.pop() {
            Some(b) => b,
            None => g.w.spare.pop().unwrap_or_default(),
        };
        data.clear();
        data.extend_from_slice(header);
        if let Some(p) = payload {
            data.extend_from_slice(g.w.ranks[self.rank as usize].mem.slice(p)?);
        }
        g.w.post_send(self.rank, peer, data, plen as u64, ctx);
        self.empty_polls = 0;
        self.shared.publish(&mut g, self.rank);
        Ok(Posted::Queued)
    }

    fn post_rma(&mut self, peer: Rank, rma: RmaOp<'_>, ctx: Ctx) -> Result<(), TransportError> {
        self.rma_op(peer, rma, ctx)
    }

    /// Hands nothing over: a message's arrival is a virtual-time event
    /// whose receive overhead is charged as it is queued.
    fn poll(
        &mut self,
        out: &mut Vec<Completion>,
        _arrivals: Option<&mut dyn Arrivals>,
    ) -> Result<usize, TransportError> {
        let free = self.shared.free;
        // A repeated empty poll at the same virtual time, with no call of
        // this rank's in between, finds nothing: the previous one brought
        // the world up to this time, and no other rank runs while this one
        // holds the baton. Count it without taking the lock.
        // The SPIN_LIMIT-th such poll goes to sleep at once, for the same
        // reason without syncing again.
        let quiet = !free && self.empty_polls > 0 && self.spin_at == self.shared.now(self.rank);
        if quiet && self.empty_polls + 1 < SPIN_LIMIT {
            self.empty_polls += 1;
            return Ok(0);
        }
        let mut g = if quiet {
            self.shared.lock()
        } else {
            self.shared.sync(self.shared.lock(), self.rank)?
        };
        let r = self.rank as usize;
        if !g.w.ranks[r].has_work() {
            let now = g.w.ranks[r].now;
            if self.spin_at != now {
                (self.spin_at, self.empty_polls) = (now, 0);
            }
            self.empty_polls += 1;
            if self.empty_polls < SPIN_LIMIT && !free {
                return Ok(0);
            }
            let me = std::ptr::addr_of!(*self) as usize;
            self.shared.note_touch(self.rank, out.as_ptr() as usize, me);
            g = self.shared.block(g, self.rank)?;
            if !g.w.ranks[r].has_work() {
                return Ok(0); // free running: the next event was another rank's
            }
        }
        self.empty_polls = 0;
        let charge = g.w.p.progress == Progress::Poll;
        let (o_r, start) = (g.w.p.o_r, out.len());
        // One-sided requests waiting for this library call (offload=no).
        let served = !g.w.ranks[r].rma.is_empty();
        while let Some(req) = g.w.ranks[r].rma.pop_front() {
            g.w.ranks[r].now = crate::world::later(g.w.ranks[r].now, o_r);
            let t = g.w.ranks[r].now;
            g.w.serve(self.rank, t, req);
        }
        let st = &mut g.w.ranks[r];
        let arrived = !st.inbox.is_empty();
        while let Some((peer, data)) = st.inbox.pop_front() {
            if charge {
                st.now = crate::world::later(st.now, o_r);
            }
            out.push(Completion::Recv { peer, data });
        }
        self.nic_times.clear();
        while let Some((c, at)) = st.done.pop_front() {
            // The virtual time only: the clock reading is made if the
            // caller asks (it does while recording).
            self.nic_times.push((out.len() - start, at));
            out.push(c);
        }
        // Only quiet send completions (handed over as their sends were
        // posted): the engine files them away and nothing changes, so for
        // spinning this poll was as empty as one that found nothing, and
        // the caller's next poll may skip the lock.
        let quiet_only = !free
            && !arrived
            && !served
            && out[start..]
                .iter()
                .all(|c| matches!(c, Completion::Send { ctx } if ctx & QUIET_CTX != 0));
        if quiet_only {
            (self.spin_at, self.empty_polls) = (st.now, 1);
        }
        self.shared.publish(&mut g, self.rank);
        Ok(out.len() - start)
    }

    fn completion_time(&self, index: usize) -> Option<CompletionTime> {
        self.nic_times
            .iter()
            .find(|&&(i, _)| i == index)
            .map(|&(_, t)| CompletionTime::Ticks(self.clock.reading_at(t)))
    }

    fn recycle(&mut self, data: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(data);
            return;
        }
        let mut g = self.shared.lock();
        if g.w.spare.len() < SPARE_MAX {
            g.w.spare.push(data);
        }
    }

    /// [`Idle::EmptyPoll`]: the caller polls on until something arrives,
    /// so its next poll may sleep at once. Polls 2..SPIN_LIMIT-1 at one
    /// virtual time would find nothing and change nothing (see
    /// [`Transport::poll`]), so skipping them leaves every figure as it
    /// was. [`Idle::Block`] sleeps until this rank has work (the timeout
    /// is wall time, which virtual time ignores).
    fn idle(&mut self, why: Idle) -> Result<(), TransportError> {
        match why {
            Idle::EmptyPoll => {
                if !self.shared.free
                    && self.empty_polls > 0
                    && self.spin_at == self.shared.now(self.rank)
                {
                    self.empty_polls = self.empty_polls.max(SPIN_LIMIT - 1);
                }
                Ok(())
            }
            // Memory written by a peer's one-sided operation arrives as a
            // virtual-time event that wakes this rank: nothing to do.
            Idle::WatchingMemory => Ok(()),
            Idle::Block(_) => {
                self.empty_polls = 0;
                let g = self.synced()?;
                if g.w.ranks[self.rank as usize].has_work() {
                    return Ok(());
                }
                self.shared.block(g, self.rank).map(drop)
            }
        }
    }
}

impl SimTransport {
    /// What the simulated transport can do.
    fn caps(&self) -> Caps {
        let p = &self.shared.params;
        Caps {
            rma: RmaKind::Native,
            rma_progress: if p.offload {
                RmaProgress::Offloaded
            } else {
                RmaProgress::TargetProgress
            },
            progress: p.progress,
            eager_buf_size: EAGER_BUF_SIZE,
            native_sync_send: false,
            completion_stamps: CompletionStamps::Nic,
            // The model charges no time for copies.
            eager_copies: 0,
        }
    }
}

impl Drop for SimTransport {
    /// Free running, a dropped endpoint is a peer that died: traffic to it
    /// fails, naming it. Under the runner, an endpoint drops as its rank
    /// finishes, like a process in finalize: late traffic is absorbed.
    fn drop(&mut self) {
        if self.shared.free {
            self.shared.lock().w.ranks[self.rank as usize].dead = true;
        }
    }
}
