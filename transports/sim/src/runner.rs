//! Running N ranks: one coroutine per rank under the scheduler's baton, each
//! given its transport, clock and work loop; the results come back in
//! rank order with the simulator's [`SimReport`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use generator::Gn;

use ovbench_core::Rank;

use crate::sched::{list, Abort, Shared};
use crate::{Ps, SimClock, SimParams, SimReport, SimTransport, SimWork};

/// Stack of each rank's coroutine: the engine and methods keep little on
/// it, and untouched pages cost no memory.
const RANK_STACK: usize = 1 << 20;

/// Why a simulated run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// Bad `--sim` parameters for this run.
    #[error("{0}")]
    Params(String),
    /// Every live rank waited for something that could never come.
    #[error("simulation deadlock at {} ns: ranks {} are blocked and nothing is in flight", *.at_ps as f64 / 1000.0, list(.ranks))]
    Deadlock { ranks: Vec<Rank>, at_ps: Ps },
    /// A time passed the virtual clock's bound; every rank was stopped.
    #[error("{}", crate::sched::clock_overflow(*.rank))]
    Clock { rank: Rank },
    /// A rank's code panicked; the others were stopped.
    #[error("rank {rank} panicked: {message}")]
    Panicked { rank: Rank, message: String },
    /// A rank's communicator could not be built.
    #[error("rank {rank}: cannot build the communicator: {message}")]
    Comm { rank: Rank, message: String },
}

/// What each rank's code gets: its endpoint, clock and work loop.
#[derive(Debug)]
pub struct RankKit {
    pub rank: Rank,
    pub transport: SimTransport,
    pub clock: Arc<SimClock>,
    pub work: SimWork,
}

/// Run `f` on `np` simulated ranks with the bare transport (the runner
/// for the engine's communicator builds on this). Returns each rank's
/// result in rank order and the truth.
pub fn run_raw<R: Send>(
    np: u32,
    params: &SimParams,
    f: impl Fn(RankKit) -> R + Sync,
) -> Result<(Vec<R>, SimReport), SimError> {
    run_with(np, params, true, f)
}

fn run_with<R: Send>(
    np: u32,
    params: &SimParams,
    lookahead: bool,
    f: impl Fn(RankKit) -> R + Sync,
) -> Result<(Vec<R>, SimReport), SimError> {
    if np == 0 {
        return Err(SimError::Params(
            "a simulated run needs at least one rank".into(),
        ));
    }
    params.check_ranks(np).map_err(SimError::Params)?;
    let mut shared = Shared::new(np, params.clone(), false);
    shared.lookahead = lookahead;
    let shared = Arc::new(shared);
    let results = drive(&shared, &f);
    let g = shared.lock();
    match &g.abort {
        Some(Abort::Deadlock { ranks, at }) => Err(SimError::Deadlock {
            ranks: ranks.clone(),
            at_ps: *at,
        }),
        Some(Abort::Panic { rank, message }) => Err(SimError::Panicked {
            rank: *rank,
            message: message.clone(),
        }),
        Some(Abort::Clock { rank }) => Err(SimError::Clock { rank: *rank }),
        None => {
            let report = SimReport {
                ranks: g.w.ranks.iter().map(|r| r.truth.clone()).collect(),
                switches: g.switches,
            };
            let results = results
                .into_iter()
                .map(|r| r.expect("rank finished"))
                .collect();
            Ok((results, report))
        }
    }
}

/// Every rank a coroutine on this thread: resume whichever holds the
/// baton until none can run; after an abort, run each to its end (every
/// transport call then fails at once).
fn drive<R: Send>(shared: &Arc<Shared>, f: &(impl Fn(RankKit) -> R + Sync)) -> Vec<Option<R>> {
    let slots: Vec<Mutex<Option<R>>> = (0..shared.np).map(|_| Mutex::new(None)).collect();
    let mut ranks: Vec<_> = slots
        .iter()
        .enumerate()
        .map(|(r, slot)| {
            let sh = Arc::clone(shared);
            Gn::<()>::new_opt(RANK_STACK / std::mem::size_of::<usize>(), move || {
                let v = rank_main(sh, r as Rank, f);
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = v;
            })
        })
        .collect();
    shared.start();
    loop {
        match shared.baton() {
            Some(n) if !ranks[n as usize].is_done() => {
                // Let the next rank's lines come in while this one runs.
                if let Some(m) = shared.prefetch_next() {
                    ranks[m as usize].prefetch();
                }
                ranks[n as usize].resume();
            }
            _ => break,
        }
    }
    for c in ranks.iter_mut() {
        while !c.is_done() {
            c.resume();
        }
    }
    drop(ranks);
    slots
        .into_iter()
        .map(|s| s.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

fn rank_main<R>(shared: Arc<Shared>, r: Rank, f: &(impl Fn(RankKit) -> R + Sync)) -> Option<R> {
    drop(shared.enter(r));
    if shared.lock().abort.is_some() {
        shared.finish(r, None);
        return None;
    }
    let kit = RankKit {
        rank: r,
        transport: SimTransport::new(Arc::clone(&shared), r),
        clock: Arc::new(SimClock::new(Arc::clone(&shared), r)),
        work: SimWork::new(Arc::clone(&shared), r),
    };
    match catch_unwind(AssertUnwindSafe(|| f(kit))) {
        Ok(v) => {
            shared.finish(r, None);
            Some(v)
        }
        Err(e) => {
            let message = e
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            shared.finish(r, Some(message));
            None
        }
    }
}

/// `np` endpoints of one simulated machine for a single thread that drives
/// them all in turn (the conformance suite, the engine's pair tests). No
/// baton: each call acts at its rank's virtual time; a poll that finds
/// nothing processes the machine's next event and moves the polling rank's
/// clock up to it, so a driver that polls everyone in turn sees every
/// message arrive, in order, with the model's costs charged. Timing across
/// ranks is only as causal as the driver's order: use [`run_raw`] for
/// measurements. Dropping an endpoint makes its rank a dead peer.
pub fn endpoints(np: u32, params: &SimParams) -> Result<Vec<SimTransport>, SimError> {
    if np == 0 {
        return Err(SimError::Params(
            "a simulated run needs at least one rank".into(),
        ));
    }
    params.check_ranks(np).map_err(SimError::Params)?;
    let shared = Arc::new(Shared::new(np, params.clone(), true));
    Ok((0..np)
        .map(|r| SimTransport::new(Arc::clone(&shared), r))
        .collect())
}

#[cfg(test)]
mod tests {
    use ovbench_core::{Clock, Completion, LocalSlice, Msg, Transport, Work};

    use super::*;

    /// Irregular traffic: every rank computes varying amounts and sends
    /// messages of varying sizes to varying peers, polling as it goes,
    /// then receives what was addressed to it. Returns, per rank, each
    /// message's (arrival time, source, length) and the end time.
    #[allow(clippy::type_complexity)]
    fn irregular(lookahead: bool, params: &str) -> (Vec<(Vec<(Ps, Rank, usize)>, Ps)>, u64) {
        const NP: u32 = 6;
        const N: u32 = 20;
        let dst = |r: u32, i: u32| (r + 1 + i % 5) % NP;
        let p = SimParams::parse(params).unwrap();
        let (res, rep) = run_with(NP, &p, lookahead, |mut k| {
            let r = k.rank;
            let want = (0..NP)
                .flat_map(|s| (0..N).map(move |i| dst(s, i)))
                .filter(|&d| d == r)
                .count();
            let t = &mut k.transport;
            let region = t.alloc(4096).unwrap();
            let mut got = Vec::new();
            let mut out = Vec::new();
            let take = |out: &mut Vec<Completion>, got: &mut Vec<_>, now| {
                for c in out.drain(..) {
                    if let Completion::Recv { peer, data } = c {
                        got.push((now, peer, data.len()));
                    }
                }
            };
            for i in 0..N {
                k.work.work(u64::from((r * 37 + i * 13) % 50) * 10);
                let len = ((i * 331 + r * 97) % 4000) as usize;
                let payload = LocalSlice::new(region, 0, len);
                t.post_send(dst(r, i), Msg::new(b"h", Some(payload)), 0)
                    .unwrap();
                t.poll(&mut out, None).unwrap();
                take(&mut out, &mut got, k.clock.ticks());
            }
            while got.len() < want {
                t.poll(&mut out, None).unwrap();
                take(&mut out, &mut got, k.clock.ticks());
            }
            (got, k.clock.ticks())
        })
        .unwrap();
        (res, rep.switches)
    }

    #[test]
    fn lookahead_changes_nothing() {
        let p = "g=150ns,offload=no";
        let (strict, strict_switches) = irregular(false, p);
        assert_eq!(strict.iter().map(|r| r.0.len()).sum::<usize>(), 120);
        let (ahead, switches) = irregular(true, p);
        assert_eq!(ahead, strict);
        assert!(
            switches < strict_switches,
            "{switches} vs {strict_switches}"
        );
    }

    /// Jitter is drawn per message from the seed, not in the order the
    /// scheduler happens to run ranks: another interleaving (strict time
    /// order instead of lookahead) gives the same run.
    #[test]
    fn jitter_is_independent_of_the_interleaving() {
        let p = "g=150ns,offload=no,jitter=700ns,seed=11";
        let (strict, strict_switches) = irregular(false, p);
        let (ahead, switches) = irregular(true, p);
        assert_ne!(switches, strict_switches, "the interleavings differ");
        assert_eq!(ahead, strict);
        let (other_seed, _) = irregular(true, "g=150ns,offload=no,jitter=700ns,seed=12");
        assert_ne!(other_seed, ahead, "the seed matters");
    }

    /// A run whose virtual time would pass 2^64 ps stops with the clock's
    /// bound named, whether the work loop or a message passes it; the
    /// clock never wraps back to small times.
    #[test]
    fn the_clock_stops_the_run_at_its_bound_and_never_wraps() {
        let p = SimParams::default();
        // The work loop: two halves of the clock, then a call.
        let e = run_raw(2, &p, |mut k| {
            k.work.work(u64::MAX / 2_000);
            k.work.work(u64::MAX / 2_000);
            k.work.work(u64::MAX / 2_000);
            let t = k.clock.ticks();
            let mut out = Vec::new();
            let polled = k.transport.poll(&mut out, None);
            (t, polled.is_err())
        })
        .unwrap_err();
        assert!(matches!(e, SimError::Clock { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("2^64 - 1 ps") && text.contains("--sim"),
            "{text}"
        );
        // A message: its arrival passes the bound (one hour of L after
        // almost the whole clock of work).
        let p = SimParams::parse("L=3600s").unwrap();
        let e = run_raw(2, &p, |mut k| {
            let t = &mut k.transport;
            let region = t.alloc(8).unwrap();
            if k.rank == 0 {
                k.work.work(u64::MAX / 1_000 - 1_000_000_000);
                let _ = t.post_send(1, Msg::new(b"h", Some(LocalSlice::new(region, 0, 8))), 0);
            }
            let mut out = Vec::new();
            for _ in 0..4 {
                if t.poll(&mut out, None).is_err() {
                    break;
                }
            }
            k.clock.ticks()
        })
        .unwrap_err();
        assert!(matches!(e, SimError::Clock { .. }), "{e:?}");
    }
}
