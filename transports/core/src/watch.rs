//! The stall watchdog's side in the wait loops. A wait loop already reads
//! its clock every few thousand polls to check its deadline; there it also
//! calls [`waiting`], which does nothing for the first
//! [`QUIET`] of a wait. Past that, and only where the runtime installed an
//! [`Observer`], it asks the observer every [`QUIET`] whether the job is
//! still there (a rank whose launcher, or rank 0, is gone stops instead of
//! waiting out its deadline), and once per wait, after a quarter of the
//! timeout, has it report the stall: the phase ([`set_phase`]), the
//! operation and the peer. No thread of its own: a rank that is not
//! waiting has nothing to report, and one that is runs this loop.
//!
//! Like [`crate::stop`], this crate only keeps the state; what "report"
//! means (a frame to the bootstrap service, a line on stderr) is the
//! runtime's business.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::{OpKind, Rank, TransportError};

/// How long a wait runs before the watchdog looks at it at all, and how
/// often it asks the observer whether the job is still alive after that.
pub const QUIET: Duration = Duration::from_millis(100);

/// A wait that has lasted a quarter of its timeout.
#[derive(Debug)]
pub struct Stall<'a> {
    /// How long it has waited so far.
    pub waited: Duration,
    /// Its deadline (`--timeout`).
    pub timeout: Duration,
    /// The rank it waits on, when there is one.
    pub peer: Option<Rank>,
    /// The operation, peer and size, in words (as a timeout would say).
    pub what: &'a str,
    /// What the rank was doing ([`set_phase`]): command, size, step.
    pub phase: &'a str,
}

/// What the runtime does for the watchdog.
pub trait Observer: Send + Sync {
    /// `Ok` while the job this rank belongs to is still there; an error
    /// saying what is gone ends the wait.
    fn alive(&self) -> Result<(), String>;
    /// Reports `stall` to whoever tells the user (rank 0, the launcher).
    fn stalled(&self, stall: &Stall<'_>);
}

static OBSERVER: OnceLock<Box<dyn Observer>> = OnceLock::new();
static PHASE: Mutex<String> = Mutex::new(String::new());

/// Where the watchdog is within the current wait.
struct Tracker {
    /// The wait it last looked at (its start), so each is reported once.
    wait: Option<Instant>,
    reported: bool,
    next_alive_check: Duration,
}

static TRACKER: Mutex<Tracker> = Mutex::new(Tracker {
    wait: None,
    reported: false,
    next_alive_check: QUIET,
});

/// Installs the runtime's observer (once per process; later calls are
/// ignored and say so).
pub fn install(observer: Box<dyn Observer>) -> bool {
    OBSERVER.set(observer).is_ok()
}

/// Records what this rank is doing, for stall reports and errors:
/// command, size, step ("latency, 8 B, measuring"). Called per size or
/// step, never per message.
pub fn set_phase(phase: impl Into<String>) {
    let phase = phase.into();
    if let Ok(mut p) = PHASE.lock() {
        *p = phase;
    }
}

/// What [`set_phase`] last recorded ("" before any).
pub fn phase() -> String {
    PHASE.lock().map(|p| p.clone()).unwrap_or_default()
}

/// Called by a wait loop where it checks its deadline: `start` identifies
/// the wait, `waited` is how long it has run, `timeout` its deadline.
/// `what` says (peer, operation with size) and is only called for a
/// report. An error ends the wait: the job is gone.
#[inline]
pub fn waiting(
    start: Instant,
    waited: Duration,
    timeout: Duration,
    what: impl FnOnce() -> (Option<Rank>, String),
) -> Result<(), TransportError> {
    if waited < QUIET {
        return Ok(());
    }
    match OBSERVER.get() {
        None => Ok(()),
        Some(o) => look(o.as_ref(), start, waited, timeout, &mut Some(what)),
    }
}

/// The check a polling wait makes every so many polls: a stop signal
/// ends it (the error), so does its deadline (`Ok(true)`: the caller says
/// what timed out), and a long wait is reported as [`waiting`] does.
/// `start` is the wait's first check, set by that check: most waits end
/// before it, and reading the clock costs more than a poll.
#[inline]
pub fn check_wait(
    start: &mut Option<Instant>,
    timeout: Duration,
    what: impl FnOnce() -> (Option<Rank>, String),
) -> Result<bool, TransportError> {
    crate::stop::check()?;
    let began = *start.get_or_insert_with(Instant::now);
    let waited = began.elapsed();
    if waited > timeout {
        return Ok(true);
    }
    waiting(began, waited, timeout, what)?;
    Ok(false)
}

#[cold]
fn look<F: FnOnce() -> (Option<Rank>, String)>(
    o: &dyn Observer,
    start: Instant,
    waited: Duration,
    timeout: Duration,
    what: &mut Option<F>,
) -> Result<(), TransportError> {
    // A progress thread's wait may hold it; that one looks for both.
    let Ok(mut t) = TRACKER.try_lock() else {
        return Ok(());
    };
    if t.wait != Some(start) {
        *t = Tracker {
            wait: Some(start),
            reported: false,
            next_alive_check: QUIET,
        };
    }
    if waited >= t.next_alive_check {
        t.next_alive_check = waited + QUIET;
        o.alive().map_err(|detail| TransportError::Local {
            op: OpKind::Poll,
            detail,
        })?;
    }
    if !t.reported && waited >= timeout / 4 {
        t.reported = true;
        if let Some(f) = what.take() {
            let (peer, what) = f();
            let phase = phase();
            o.stalled(&Stall {
                waited,
                timeout,
                peer,
                what: &what,
                phase: &phase,
            });
        }
    }
    Ok(())
}

/// A blocking receive in words, for a stall report.
pub fn receive_what(src: Option<Rank>, tag: Option<crate::Tag>, len: usize) -> String {
    format!(
        "native receive of {len} bytes from {} (tag {})",
        src.map_or("any rank".to_string(), |p| format!("rank {p}")),
        tag.map_or("any".to_string(), |t| t.to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    static STALLS: AtomicU32 = AtomicU32::new(0);
    static GONE: AtomicBool = AtomicBool::new(false);

    struct Counting;
    impl Observer for Counting {
        fn alive(&self) -> Result<(), String> {
            if GONE.load(Ordering::Relaxed) {
                Err("the launcher is gone".into())
            } else {
                Ok(())
            }
        }
        fn stalled(&self, s: &Stall<'_>) {
            assert_eq!(s.peer, Some(3));
            assert_eq!(s.what, "receive of 8 bytes from rank 3");
            assert_eq!(s.phase, "latency, 8 B, measuring");
            STALLS.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_wait_is_reported_once_at_a_quarter_and_ends_when_the_job_is_gone() {
        let what = || (Some(3), "receive of 8 bytes from rank 3".to_string());
        let t = Duration::from_secs(4);
        let start = Instant::now();
        // No observer yet: nothing happens at all.
        waiting(start, Duration::from_secs(2), t, what).unwrap();
        assert!(install(Box::new(Counting)));
        assert!(!install(Box::new(Counting)));
        set_phase("latency, 8 B, measuring");
        waiting(start, Duration::from_millis(900), t, what).unwrap();
        assert_eq!(STALLS.load(Ordering::Relaxed), 0, "before a quarter");
        waiting(start, Duration::from_millis(1000), t, what).unwrap();
        waiting(start, Duration::from_millis(1500), t, what).unwrap();
        assert_eq!(STALLS.load(Ordering::Relaxed), 1, "once per wait");
        // A new wait is a new report.
        let later = start + Duration::from_millis(1);
        waiting(later, Duration::from_millis(1200), t, what).unwrap();
        assert_eq!(STALLS.load(Ordering::Relaxed), 2);
        GONE.store(true, Ordering::Relaxed);
        let e = waiting(later, Duration::from_millis(1400), t, what).unwrap_err();
        assert!(e.to_string().contains("the launcher is gone"), "{e}");
    }
}
