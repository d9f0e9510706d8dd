//! The baton: every rank is a coroutine on the runner's thread and exactly
//! one runs at a time — the one with the smallest virtual time (ties
//! broken by rank), after every event up to that time has been processed,
//! or one within the lookahead of it. A rank that makes a transport call
//! while another rank or an event is behind it hands the baton over and
//! yields, so causality holds and runs repeat exactly. If no rank can run
//! and no event is pending while some rank is blocked, the run is a
//! deadlock: every waiting rank is released with an error that names the
//! blocked ranks.

use std::cmp::Reverse;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ovbench_core::{OpKind, Rank, TransportError};

use crate::owned::{Owned, OwnedGuard};
use crate::prefetch;
use crate::world::{RankState, Status, World};
use crate::{Ps, SimParams};

/// Why a run stopped early; copied into every rank's later errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Abort {
    Deadlock {
        ranks: Vec<Rank>,
        at: Ps,
    },
    Panic {
        rank: Rank,
        message: String,
    },
    /// A rank's time would have passed the clock's bound.
    Clock {
        rank: Rank,
    },
}

/// Why a run stopped at the clock's bound, with the fix.
pub(crate) fn clock_overflow(rank: Rank) -> String {
    format!(
        "the run's virtual time passed {} at rank {rank}; the clock never wraps, so the run stops here: give fewer iterations or sizes, or a model with smaller costs (--sim)",
        crate::params::CLOCK_BOUND
    )
}

impl Abort {
    pub(crate) fn error(&self) -> TransportError {
        let detail = match self {
            Abort::Deadlock { ranks, at } => format!(
                "simulation deadlock at {} ns: ranks {} are blocked and nothing is in flight",
                *at as f64 / 1000.0,
                list(ranks)
            ),
            Abort::Panic { rank, message } => {
                format!("simulation stopped: rank {rank} panicked: {message}")
            }
            Abort::Clock { rank } => format!("simulation stopped: {}", clock_overflow(*rank)),
        };
        TransportError::Local {
            op: OpKind::Poll,
            detail,
        }
    }
}

/// `0, 3, 7` (at most 32 named, then a count).
pub(crate) fn list(ranks: &[Rank]) -> String {
    let mut s: Vec<String> = ranks.iter().take(32).map(|r| r.to_string()).collect();
    if ranks.len() > 32 {
        s.push(format!("and {} more", ranks.len() - 32));
    }
    s.join(", ")
}

/// The scheduler's lock-protected part.
#[derive(Debug)]
pub(crate) struct Sched {
    pub w: World,
    pub abort: Option<Abort>,
    /// Baton handoffs between ranks (performance figure).
    pub switches: u64,
}

/// State every rank's transport, clock and work loop share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub np: u32,
    /// Free-running: one thread drives every endpoint (see
    /// [`crate::endpoints`]); no baton, and idle calls step the world.
    pub free: bool,
    /// Let a rank act within L of the ranks behind it (always on in runs;
    /// off only to prove, in tests, that it changes nothing).
    pub lookahead: bool,
    pub params: SimParams,
    state: Owned<Sched>,
    /// Each rank's CPU time, readable without the lock by its clock.
    pub times: Vec<AtomicU64>,
    /// Who holds the baton ([`NO_ONE`] before the start), and whether the
    /// run was aborted: mirrors of the locked state, so that a rank
    /// waiting for its turn, and the runner choosing whom to resume, need
    /// no lock (written only under it).
    baton: AtomicU32,
    stopped: AtomicBool,
    /// Prefetch hints (see [`crate::prefetch`]), never dereferenced: the
    /// rank likely to get the baton after its holder (the ready queue's
    /// next, [`NO_ONE`] if none) and the message last delivered to it;
    /// where each rank's stack stood when it last yielded, and what its
    /// transport touches first when it wakes (see [`Self::note_touch`]);
    /// where the world's rank states lie (they never move).
    next: AtomicU32,
    next_msg: AtomicUsize,
    yielded_at: Vec<AtomicUsize>,
    touch: Vec<[AtomicUsize; 2]>,
    states: usize,
}

/// The baton before anyone holds it.
const NO_ONE: u32 = u32::MAX;

pub(crate) type Guard<'a> = OwnedGuard<'a, Sched>;

impl Shared {
    pub(crate) fn new(np: u32, params: SimParams, free: bool) -> Shared {
        let w = World::new(np, params.clone(), free);
        let states = w.ranks.as_ptr() as usize;
        Shared {
            np,
            free,
            lookahead: true,
            state: Owned::new(Sched {
                w,
                abort: None,
                switches: 0,
            }),
            params,
            times: (0..np).map(|_| AtomicU64::new(0)).collect(),
            baton: AtomicU32::new(NO_ONE),
            stopped: AtomicBool::new(false),
            next: AtomicU32::new(NO_ONE),
            next_msg: AtomicUsize::new(0),
            yielded_at: (0..np).map(|_| AtomicUsize::new(0)).collect(),
            touch: (0..np).map(|_| Default::default()).collect(),
            states,
        }
    }

    /// The rank holding the baton, unless the run was aborted.
    pub(crate) fn baton(&self) -> Option<Rank> {
        if self.stopped.load(Ordering::Acquire) {
            return None;
        }
        match self.baton.load(Ordering::Acquire) {
            NO_ONE => None,
            r => Some(r),
        }
    }

    /// Prefetch the stack top and state of the rank likely to run after
    /// the baton's holder, and return it (its coroutine's context is the
    /// runner's to prefetch).
    pub(crate) fn prefetch_next(&self) -> Option<Rank> {
        let m = match self.next.load(Ordering::Relaxed) {
            NO_ONE => return None,
            m => m,
        };
        let sp = self.yielded_at[m as usize].load(Ordering::Relaxed);
        if sp != 0 {
            prefetch::lines::<{ prefetch::STACK_BYTES }>(sp);
        }
        let size = std::mem::size_of::<RankState>();
        prefetch::lines::<{ std::mem::size_of::<RankState>() }>(self.states + m as usize * size);
        let msg = self.next_msg.load(Ordering::Relaxed);
        if msg != 0 {
            prefetch::lines::<{ prefetch::MSG_BYTES }>(msg);
        }
        for a in &self.touch[m as usize] {
            let a = a.load(Ordering::Relaxed);
            if a != 0 {
                prefetch::lines::<{ prefetch::TOUCH_BYTES }>(a);
            }
        }
        Some(m)
    }

    /// What `r`'s transport touches first when it wakes from the sleep it
    /// is about to enter (prefetch hints; 0 for none).
    pub(crate) fn note_touch(&self, r: Rank, a: usize, b: usize) {
        let t = &self.touch[r as usize];
        t[0].store(a, Ordering::Relaxed);
        t[1].store(b, Ordering::Relaxed);
    }

    /// Stop the run (the first reason stays).
    fn set_abort(&self, g: &mut Guard<'_>, a: Abort) {
        if g.abort.is_none() {
            g.abort = Some(a);
        }
        self.stopped.store(true, Ordering::Release);
    }

    pub(crate) fn lock(&self) -> Guard<'_> {
        self.state.lock()
    }

    /// A rank's true virtual time.
    pub(crate) fn now(&self, r: Rank) -> Ps {
        self.times[r as usize].load(Ordering::Relaxed)
    }

    /// Set a rank's time (in the world and in its clock's mirror).
    pub(crate) fn set_now(&self, g: &mut Guard<'_>, r: Rank, t: Ps) {
        g.w.ranks[r as usize].now = t;
        g.w.overflowed |= t == Ps::MAX;
        self.times[r as usize].store(t, Ordering::Relaxed);
    }

    /// Mirror the world's time of `r` into its clock after a cost was charged.
    pub(crate) fn publish(&self, g: &mut Guard<'_>, r: Rank) {
        let t = g.w.ranks[r as usize].now;
        g.w.overflowed |= t == Ps::MAX;
        self.times[r as usize].store(t, Ordering::Relaxed);
    }

    /// Stop the run if a time reached the clock's bound (`r` acting).
    fn check_clock(&self, g: &mut Guard<'_>, r: Rank) {
        if g.w.overflowed {
            self.set_abort(g, Abort::Clock { rank: r });
        }
    }

    /// Advance `r`'s CPU by `d` outside any library call (work, delay).
    pub(crate) fn advance(&self, r: Rank, d: Ps, compute: bool) {
        let mut g = self.lock();
        let t0 = g.w.ranks[r as usize].now;
        let t1 = crate::world::later(t0, d);
        if compute && self.params.truth {
            g.w.ranks[r as usize].truth.add_compute(t0, t1);
        }
        self.set_now(&mut g, r, t1);
        self.check_clock(&mut g, r);
    }

    /// Yield to the runner (which resumes the baton's holder) until the
    /// baton is `r`'s or the run is aborted.
    fn wait_turn(&self, r: Rank) -> Guard<'_> {
        loop {
            if self.baton.load(Ordering::Acquire) == r || self.stopped.load(Ordering::Acquire) {
                return self.lock();
            }
            // The free function is the only way to yield from deep inside
            // the engine's calls: the scoped API would need its scope
            // threaded through the Transport trait.
            let here = 0u8;
            self.yielded_at[r as usize].store(std::ptr::addr_of!(here) as usize, Ordering::Relaxed);
            #[allow(deprecated)]
            generator::yield_with(());
        }
    }

    /// Wait for the first turn of `r` (its coroutine's start).
    pub(crate) fn enter(&self, r: Rank) -> Guard<'_> {
        let mut g = self.wait_turn(r);
        g.w.ranks[r as usize].status = Status::Running;
        g
    }

    /// Bring the world up to `r`'s current time before it acts: process
    /// every event at or before it and let every rank behind it run first
    /// (unless it is within the lookahead, see [`Self::within_lookahead`]).
    pub(crate) fn sync<'a>(
        &'a self,
        mut g: Guard<'a>,
        r: Rank,
    ) -> Result<Guard<'a>, TransportError> {
        self.check_clock(&mut g, r);
        if let Some(a) = &g.abort {
            return Err(a.error());
        }
        let t = g.w.ranks[r as usize].now;
        loop {
            // A rank behind `r` runs before any event after its own time.
            let first_ready = match self.free {
                true => None,
                false => g.w.ready.peek().map(|Reverse(k)| *k),
            };
            let due =
                g.w.next_event()
                    .is_some_and(|e| e <= t && first_ready.map_or(true, |(rt, _)| e <= rt));
            if due {
                g.w.step();
                continue;
            }
            let behind = first_ready.is_some_and(|k| k < (t, r));
            if !behind {
                return Ok(g);
            }
            if self.within_lookahead(t, first_ready) {
                g.w.step_owned(r, t);
                return Ok(g);
            }
            g.w.ranks[r as usize].status = Status::Ready;
            g.w.ready.push(Reverse((t, r)));
            return self.switch(g, r);
        }
    }

    /// Whether `r` may act at `t` although the first ready rank is behind
    /// it, at `t_s`. Every effect of one rank on another takes at least L
    /// (a wire, a completion's return), and every event at or before
    /// `t_s` has been processed. So when `t < t_s + L`, nothing the ranks
    /// behind will do, nor any pending event of another rank, can reach
    /// `r` by `t`, and nothing `r` does at `t` reaches another rank before
    /// `t + L`: once `r` has processed its own events up to `t`, acting
    /// now gives exactly what strict time order gives, without the thread
    /// handoffs strict order costs.
    fn within_lookahead(&self, t: Ps, first_ready: Option<(Ps, Rank)>) -> bool {
        if !self.lookahead {
            return false;
        }
        first_ready.map_or(true, |(t_s, _)| t < t_s.saturating_add(self.params.l))
    }

    /// `r` has nothing to do: sleep until an event makes it ready. Free
    /// running, process the world's next event instead and move `r`'s
    /// clock up to it.
    pub(crate) fn block<'a>(
        &'a self,
        mut g: Guard<'a>,
        r: Rank,
    ) -> Result<Guard<'a>, TransportError> {
        if self.free {
            if let Some(e) = g.w.next_event() {
                g.w.step();
                let t = g.w.ranks[r as usize].now.max(e);
                self.set_now(&mut g, r, t);
            }
            return Ok(g);
        }
        g.w.ranks[r as usize].status = Status::Blocked;
        self.switch(g, r)
    }

    /// Give the baton to the next rank in time order (processing events
    /// on the way) and wait until it comes back to `r`.
    fn switch<'a>(&'a self, mut g: Guard<'a>, r: Rank) -> Result<Guard<'a>, TransportError> {
        // An overflow stops the run as an abort does: the ranks' waits
        // return at once, and the match below fails this call.
        self.check_clock(&mut g, r);
        match self.pick(&mut g) {
            Some(n) if n == r => {}
            Some(_) => {
                g.switches += 1;
                drop(g);
                g = self.wait_turn(r);
            }
            None => {
                if g.abort.is_none() {
                    let ranks = blocked(&g.w);
                    let at = g.w.ranks[r as usize].now;
                    self.set_abort(&mut g, Abort::Deadlock { ranks, at });
                }
            }
        }
        match &g.abort {
            Some(a) => Err(a.error()),
            None => Ok(g),
        }
    }

    /// Choose the next rank to run and hand it the baton; `None` when
    /// nothing can run.
    fn pick(&self, g: &mut Guard<'_>) -> Option<Rank> {
        loop {
            let ev = g.w.next_event();
            let rd = g.w.ready.peek().map(|Reverse(k)| *k);
            match (ev, rd) {
                (Some(e), Some((t, _))) if e <= t => g.w.step(),
                (_, Some((t, n))) => {
                    g.w.ready.pop();
                    let st = &mut g.w.ranks[n as usize];
                    st.status = Status::Running;
                    let t = t.max(st.now);
                    self.set_now(g, n, t);
                    let next = g.w.ready.peek().map_or(NO_ONE, |Reverse((_, m))| *m);
                    let msg = match next {
                        NO_ONE => 0,
                        m => g.w.last_msg[m as usize],
                    };
                    self.next.store(next, Ordering::Relaxed);
                    self.next_msg.store(msg, Ordering::Relaxed);
                    self.baton.store(n, Ordering::Release);
                    return Some(n);
                }
                (Some(_), None) => g.w.step(),
                (None, None) => return None,
            }
        }
    }

    /// `r`'s closure returned (or panicked): record its end and pass on.
    pub(crate) fn finish(&self, r: Rank, panic: Option<String>) {
        let mut g = self.lock();
        let st = &mut g.w.ranks[r as usize];
        st.status = Status::Done;
        st.truth.end_ps = st.now;
        if let Some(message) = panic {
            self.set_abort(&mut g, Abort::Panic { rank: r, message });
        }
        self.check_clock(&mut g, r);
        if g.abort.is_some() {
            return;
        }
        match self.pick(&mut g) {
            Some(_) => g.switches += 1,
            None => {
                let ranks = blocked(&g.w);
                if !ranks.is_empty() {
                    let at = g.w.ranks[r as usize].now;
                    self.set_abort(&mut g, Abort::Deadlock { ranks, at });
                }
            }
        }
    }

    /// Hand the baton to the first rank (all ranks start ready at 0).
    pub(crate) fn start(&self) {
        let mut g = self.lock();
        if g.abort.is_none() {
            self.pick(&mut g);
        }
    }
}

fn blocked(w: &World) -> Vec<Rank> {
    (0..w.ranks.len() as Rank)
        .filter(|&i| w.ranks[i as usize].status == Status::Blocked)
        .collect()
}
