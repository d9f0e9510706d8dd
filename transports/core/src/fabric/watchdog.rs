//! The deadline of a call that cannot time out by itself: a blocking
//! library call (`MPI_Recv`, `MPI_Wait`, `MPI_Win_flush`, …) that waits
//! for a peer which never comes. The calling thread marks each such call
//! in a [`CallWatch`] (a few relaxed stores, no clock read, no lock);
//! a [`Watchdog`] thread samples it and, when the same call is still
//! running past the deadline, hands the call's description to its
//! `on_stuck`, which ends the job (MPI: print it, then `MPI_Abort`).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a blocking call is, as the watch records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The library call's name (`"MPI_Recv"`).
    pub op: &'static str,
    /// The peer it waits for (`None`: any, or all).
    pub peer: Option<u32>,
    /// Bytes it moves.
    pub size: u64,
}

/// The call the owning thread is in, written by that thread only.
#[derive(Debug, Default)]
pub struct CallWatch {
    /// Odd while inside a call; bumped on entry and exit, so the
    /// watchdog tells one long call from many short ones.
    seq: AtomicU64,
    /// Index into `names` of the call's name.
    op: AtomicU32,
    /// Peer + 1 (0: any).
    peer: AtomicU32,
    size: AtomicU64,
    names: std::sync::OnceLock<&'static [&'static str]>,
}

impl CallWatch {
    /// A watch over calls named by an index into `names`.
    pub fn new(names: &'static [&'static str]) -> Arc<CallWatch> {
        let w = CallWatch::default();
        let _ = w.names.set(names);
        Arc::new(w)
    }

    /// Mark the entry of call `names[op]` towards `peer` moving `size`
    /// bytes. Only the owning thread calls it.
    #[inline]
    pub fn enter(&self, op: u32, peer: Option<u32>, size: u64) {
        self.op.store(op, Ordering::Relaxed);
        self.peer
            .store(peer.map_or(0, |p| p.saturating_add(1)), Ordering::Relaxed);
        self.size.store(size, Ordering::Relaxed);
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s | 1, Ordering::Release);
    }

    /// Mark the exit of the call [`Self::enter`] began.
    #[inline]
    pub fn exit(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store((s | 1) + 1, Ordering::Release);
    }

    /// The running call and its sequence number, if inside one.
    fn current(&self) -> Option<(u64, Call)> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 == 0 {
            return None;
        }
        let names = self.names.get().copied().unwrap_or(&[]);
        let op = names
            .get(self.op.load(Ordering::Relaxed) as usize)
            .copied()
            .unwrap_or("a library call");
        let peer = self.peer.load(Ordering::Relaxed);
        Some((
            seq,
            Call {
                op,
                peer: peer.checked_sub(1),
                size: self.size.load(Ordering::Relaxed),
            },
        ))
    }
}

/// The thread that ends a call stuck past its deadline.
#[derive(Debug)]
pub struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Watch `watch`: a call still running `deadline` after the watchdog
    /// first saw it goes to `on_stuck` (once; the watchdog then ends).
    pub fn spawn(
        name: String,
        watch: Arc<CallWatch>,
        deadline: Duration,
        on_stuck: impl FnOnce(Call, Duration) + Send + 'static,
    ) -> std::io::Result<Watchdog> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // Samples often enough that a stuck call ends within a tenth of
        // the deadline past it (and at least every second).
        let period = (deadline / 10).clamp(Duration::from_millis(5), Duration::from_secs(1));
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            let mut seen: Option<(u64, Instant)> = None;
            while !flag.load(Ordering::Acquire) {
                std::thread::park_timeout(period);
                match watch.current() {
                    None => seen = None,
                    Some((seq, call)) => match seen {
                        Some((s, since)) if s == seq => {
                            if since.elapsed() >= deadline {
                                on_stuck(call, since.elapsed());
                                return;
                            }
                        }
                        _ => seen = Some((seq, Instant::now())),
                    },
                }
            }
        })?;
        Ok(Watchdog {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    const NAMES: &[&str] = &["MPI_Recv", "MPI_Send"];

    /// A watch over [`NAMES`], a watchdog with `deadline` over it, and
    /// the calls the watchdog reports.
    fn watched(deadline: Duration) -> (Arc<CallWatch>, Watchdog, mpsc::Receiver<Call>) {
        let w = CallWatch::new(NAMES);
        let (tx, rx) = mpsc::channel();
        let report = move |c, _| {
            let _ = tx.send(c);
        };
        let dog = Watchdog::spawn("wd".into(), w.clone(), deadline, report).unwrap();
        (w, dog, rx)
    }

    // The deadlines here are 10x and more what a loaded machine's
    // preemption can add to a call: a short call preempted past the
    // deadline is truly long to the watchdog, and its report would be
    // right, so a test that asks for none must leave a margin a schedule
    // cannot eat (these were 50 ms and 200 ms).

    #[test]
    fn a_call_stuck_past_the_deadline_is_reported_with_its_peer_and_size() {
        let (w, _dog, rx) = watched(Duration::from_millis(300));
        // Short calls, many of them over three deadlines, are never
        // reported.
        let until = Instant::now() + Duration::from_millis(900);
        while Instant::now() < until {
            w.enter(1, Some(3), 8);
            w.exit();
        }
        assert!(rx.try_recv().is_err(), "short calls were reported");
        w.enter(0, Some(1), 4096);
        let c = rx.recv_timeout(Duration::from_secs(5)).expect("reported");
        assert_eq!(
            c,
            Call {
                op: "MPI_Recv",
                peer: Some(1),
                size: 4096
            }
        );
    }

    #[test]
    fn a_call_that_returns_in_time_is_not_reported() {
        // A call of 0.4 deadlines, sampled a few times: reported by a
        // watchdog that took a fraction of the deadline for all of it.
        let (w, dog, rx) = watched(Duration::from_secs(1));
        w.enter(0, None, 0);
        std::thread::sleep(Duration::from_millis(400));
        w.exit();
        // Past the deadline, so a late report of the ended call would show.
        std::thread::sleep(Duration::from_millis(1200));
        drop(dog);
        assert!(rx.try_recv().is_err());
    }
}
