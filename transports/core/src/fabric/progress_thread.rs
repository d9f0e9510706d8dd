//! The asynchronous progress thread of `--progress thread`, one design for
//! every fabric: a named thread that serves the library whenever it may
//! have work and sleeps on the library's wake-up object otherwise (never
//! spinning), until [`ProgressThread::stop`].
//!
//! The fabric crate supplies a [`Driver`]: how to serve (drive the
//! library, wake a blocked rank) and how to sleep (its event fd, epoll
//! set or completion-queue wait object). The loop, the stop flag, the
//! join and the report of a driver that fails or panics live here; the
//! error on failure to start is the caller's, so each fabric keeps its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest a driver sleeps before the loop looks at its stop flag
/// again (a stop also wakes it at once through the caller's wake-up).
pub const WAKE_EVERY: Duration = Duration::from_millis(100);

/// What a round of serving found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// More work may be ready at once: serve again without sleeping.
    Again,
    /// Nothing is pending: sleep until the library signals or
    /// [`WAKE_EVERY`] passes.
    Idle,
    /// Work is in flight that the library cannot sleep on (libfabric with
    /// a backlog, or when `fi_trywait` refuses): give up the CPU, then
    /// serve again.
    Busy,
}

/// A fabric's part of the progress thread.
pub trait Driver: Send + 'static {
    /// Drive the library once and hand finished work to the rank. An
    /// error ends the thread (the rank still progresses by polling).
    fn serve(&mut self) -> Result<Round, String>;
    /// Sleep until the library may have work or `max` passes. An
    /// interrupted sleep returns `Ok`.
    fn sleep(&mut self, max: Duration) -> Result<(), String>;
}

/// A running progress thread.
#[derive(Debug)]
pub struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    name: String,
}

impl ProgressThread {
    /// Start `driver` on a thread called `name` (e.g. `ovbench-ucx-progress-0`).
    /// The caller words the error (e.g. "starting the TCP progress thread").
    pub fn spawn(name: String, mut driver: impl Driver) -> std::io::Result<ProgressThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let label = name.clone();
        let handle = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || run(&mut driver, &flag, &label))?;
        Ok(ProgressThread {
            stop,
            handle: Some(handle),
            name,
        })
    }

    /// Whether the thread has ended (its driver failed or panicked).
    pub fn ended(&self) -> bool {
        self.handle.as_ref().map_or(true, JoinHandle::is_finished)
    }

    /// Stop and join the thread: raise the flag, then `wake` (the
    /// library's own signal, so a sleeping thread notices at once).
    /// Call it before the library objects the driver uses are destroyed.
    pub fn stop(mut self, wake: impl FnOnce()) {
        self.stop_now(wake);
    }

    fn stop_now(&mut self, wake: impl FnOnce()) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        self.stop.store(true, Ordering::Release);
        wake();
        if handle.join().is_err() {
            eprintln!("ovbench: the progress thread {} panicked", self.name);
        }
    }
}

impl Drop for ProgressThread {
    /// A thread not stopped explicitly is stopped without a wake-up: it
    /// notices within [`WAKE_EVERY`].
    fn drop(&mut self) {
        self.stop_now(|| {});
    }
}

fn run(driver: &mut impl Driver, stop: &AtomicBool, name: &str) {
    while !stop.load(Ordering::Acquire) {
        let round = match driver.serve() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("ovbench: the progress thread {name} stops: {e}");
                return;
            }
        };
        match round {
            Round::Again => {}
            Round::Busy => std::thread::yield_now(),
            Round::Idle if stop.load(Ordering::Acquire) => {}
            Round::Idle => {
                if let Err(e) = driver.sleep(WAKE_EVERY) {
                    eprintln!("ovbench: the progress thread {name} stops: {e}");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Mutex;
    use std::time::Instant;

    /// Serves a queue of rounds, recording each serve and sleep.
    struct Script {
        rounds: Vec<Result<Round, String>>,
        log: Arc<Mutex<Vec<&'static str>>>,
        woke: mpsc::Receiver<()>,
        /// How long a sleep lasts unless woken: the thread's `max`, or,
        /// when set, this instead.
        nap: Option<Duration>,
    }

    impl Driver for Script {
        fn serve(&mut self) -> Result<Round, String> {
            self.log.lock().unwrap().push("serve");
            if self.rounds.is_empty() {
                Ok(Round::Idle)
            } else {
                self.rounds.remove(0)
            }
        }
        fn sleep(&mut self, max: Duration) -> Result<(), String> {
            self.log.lock().unwrap().push("sleep");
            let _ = self.woke.recv_timeout(self.nap.unwrap_or(max));
            Ok(())
        }
    }

    fn script(
        rounds: Vec<Result<Round, String>>,
    ) -> (Script, Arc<Mutex<Vec<&'static str>>>, mpsc::Sender<()>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let s = Script {
            rounds,
            log: Arc::clone(&log),
            woke: rx,
            nap: None,
        };
        (s, log, tx)
    }

    /// Two `busy` rounds, then an idle one: three serves, then a sleep.
    fn serves_twice_more_then_sleeps(busy: Round) {
        let (s, log, tx) = script(vec![Ok(busy), Ok(busy), Ok(Round::Idle)]);
        let t = ProgressThread::spawn("test-progress".into(), s).unwrap();
        let start = Instant::now();
        while log.lock().unwrap().len() < 4 && start.elapsed() < Duration::from_secs(5) {
            std::thread::yield_now();
        }
        t.stop(move || tx.send(()).unwrap());
        let log = log.lock().unwrap();
        assert_eq!(log[..4], ["serve", "serve", "serve", "sleep"], "{log:?}");
    }

    #[test]
    fn serves_again_without_sleeping_then_sleeps_when_idle() {
        serves_twice_more_then_sleeps(Round::Again);
    }

    #[test]
    fn a_busy_round_serves_again_without_sleeping() {
        serves_twice_more_then_sleeps(Round::Busy);
    }

    #[test]
    fn the_thread_has_its_name() {
        let (s, _log, tx) = script(vec![]);
        let (name_tx, name_rx) = mpsc::channel();
        struct Named<D>(D, Option<mpsc::Sender<Option<String>>>);
        impl<D: Driver> Driver for Named<D> {
            fn serve(&mut self) -> Result<Round, String> {
                if let Some(tx) = self.1.take() {
                    let _ = tx.send(std::thread::current().name().map(String::from));
                }
                self.0.serve()
            }
            fn sleep(&mut self, max: Duration) -> Result<(), String> {
                self.0.sleep(max)
            }
        }
        let t =
            ProgressThread::spawn("ovbench-x-progress-3".into(), Named(s, Some(name_tx))).unwrap();
        let name = name_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        t.stop(move || drop(tx));
        assert_eq!(name.as_deref(), Some("ovbench-x-progress-3"));
    }

    /// The thread sleeps 60 s unless woken, so only stop's wake ends the
    /// sleep in time: the bound (10 s) is a hang guard far from both the
    /// loaded machine's wake-up (milliseconds) and the unwoken sleep. (It
    /// asked for less than WAKE_EVERY, 100 ms, the length of an unwoken
    /// sleep, which a loaded machine's scheduling of the woken thread
    /// and the join could pass.)
    #[test]
    fn stop_wakes_a_sleeping_thread_at_once() {
        let (mut s, log, tx) = script(vec![]);
        s.nap = Some(Duration::from_secs(60));
        let t = ProgressThread::spawn("test-progress".into(), s).unwrap();
        while !log.lock().unwrap().contains(&"sleep") {
            std::thread::yield_now();
        }
        let start = Instant::now();
        t.stop(move || tx.send(()).unwrap());
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "stop took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_failing_driver_ends_the_thread() {
        let (s, _log, tx) = script(vec![Err("the library broke".into())]);
        let t = ProgressThread::spawn("test-progress".into(), s).unwrap();
        let start = Instant::now();
        while !t.ended() && start.elapsed() < Duration::from_secs(5) {
            std::thread::yield_now();
        }
        assert!(t.ended());
        t.stop(move || drop(tx));
    }
}
