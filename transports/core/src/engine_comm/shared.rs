//! What a [`Comm`](super::Comm) holds whichever path moves its messages:
//! the transport, clock, work loop and settings, the instrumentation,
//! the barrier's scratch, and what the waits of both paths share (their
//! tuning and timeout error).

use std::sync::Arc;

use super::EngineConfig;
use crate::instrument::{Instrumentation, XferTable};
use crate::{
    Buf, Caps, Clock, Completion, CompletionTime, EagerLimit, Link, Rank, Result, TransportError,
    TransportInfo, Work,
};

/// Polls between deadline checks (an `Instant::now()` costs ~25 ns).
pub(crate) const CHECK_EVERY: u32 = 64;
/// Polls without progress before an oversubscribed rank blocks.
pub(crate) const SPIN_BEFORE_BLOCK: u32 = 2000;

/// The state both paths use; each path's own state takes it as an
/// argument, so that the two borrow apart.
pub(crate) struct Shared {
    pub(crate) t: Link,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) work: Box<dyn Work>,
    pub(crate) cfg: EngineConfig,
    pub(crate) caps: Caps,
    pub(crate) info: TransportInfo,
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    /// Completions of the last poll, the allocation kept between polls.
    pub(crate) comps: Vec<Completion>,
    pub(crate) instr: Option<Instrumentation>,
    /// A small region for barrier messages (zero-length slices of it).
    scratch: Option<Buf>,
    pub(crate) barrier_epoch: u32,
    /// Wall nanoseconds the waits spent yielding the CPU ([`Shared::block`]).
    pub(crate) yielded_ns: u64,
    /// Auto's eager limit and where it came from, for the header.
    pub(crate) eager: EagerLimit,
}

impl Shared {
    pub(crate) fn new(
        t: Link,
        clock: Arc<dyn Clock>,
        work: Box<dyn Work>,
        cfg: EngineConfig,
    ) -> Shared {
        let info = t.info();
        Shared {
            caps: info.caps.clone(),
            rank: info.rank,
            size: info.size,
            info,
            t,
            clock,
            work,
            comps: Vec::with_capacity(64),
            instr: None,
            scratch: None,
            barrier_epoch: 0,
            yielded_ns: 0,
            eager: EagerLimit::default_of(cfg.plan.eager_limit()),
            cfg,
        }
    }

    /// A wait with nothing to do gives its CPU away for up to 1 ms (only
    /// where ranks share CPUs), and counts how long that took: the run's
    /// summary says how much of its time went there.
    pub(crate) fn block(&mut self) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self
            .t
            .idle(crate::Idle::Block(std::time::Duration::from_millis(1)));
        self.yielded_ns = self
            .yielded_ns
            .saturating_add(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        r
    }

    /// CALL_ENTER at the clock's current tick, when instrumenting; the
    /// tick read (0 when not instrumenting, and then the clock is not
    /// read).
    #[inline]
    pub(crate) fn call_enter(&mut self) -> u64 {
        match self.instr.as_mut() {
            Some(i) => {
                let t = self.clock.ticks();
                i.call_enter(t);
                t
            }
            None => 0,
        }
    }

    /// CALL_EXIT at the clock's current tick, when instrumenting.
    #[inline]
    pub(crate) fn call_exit(&mut self) {
        if let Some(i) = self.instr.as_mut() {
            i.call_exit(self.clock.ticks());
        }
    }

    /// The engine's `now`: the clock only while instrumenting. The engine
    /// uses it for nothing but XFER events, and an eager message read the
    /// TSC (~9 ns a read here) three or four times on its way.
    #[inline]
    pub(crate) fn stamp(&self) -> u64 {
        if self.instr.is_some() {
            self.clock.ticks()
        } else {
            0
        }
    }

    /// [`Self::stamp`] for a completion the transport timed itself
    /// ([`crate::Posted::Done`]): its time where the clock can place it.
    pub(crate) fn stamp_at(&self, at: CompletionTime) -> u64 {
        if self.instr.is_none() {
            return 0;
        }
        match at {
            CompletionTime::Host(t) => self.clock.ticks_at(t),
            CompletionTime::Ticks(t) => Some(t),
        }
        .unwrap_or_else(|| self.clock.ticks())
    }

    /// Record into `table` from now on: a new table for a running
    /// instrumentation, or a fresh one at the clock's resolution.
    pub(crate) fn enable(&mut self, table: XferTable) {
        let npt = self.clock.ns_per_tick();
        match self.instr.as_mut() {
            Some(i) => i.set_table(table),
            None => self.instr = Some(Instrumentation::new(table, npt)),
        }
    }

    /// The barrier's small region, allocated on first use.
    pub(crate) fn scratch(&mut self) -> Result<Buf> {
        match self.scratch {
            Some(b) => Ok(b),
            None => {
                let region = self.t.alloc(64)?;
                let b = Buf { region, len: 64 };
                self.scratch = Some(b);
                Ok(b)
            }
        }
    }

    /// The error of a wait that passed [`EngineConfig::timeout`]; `what`
    /// names the rank, the operation, the size and the peer.
    #[cold]
    pub(crate) fn timeout(&self, peer: Option<Rank>, what: String) -> TransportError {
        TransportError::Timeout {
            peer,
            what,
            secs: self.cfg.timeout.as_secs_f64(),
        }
    }
}
