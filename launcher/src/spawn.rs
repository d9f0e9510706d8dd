//! Local mode: spawn `np` ranks of ourselves, watch them, and tear them all
//! down as soon as one fails or the user interrupts.
//!
//! The launcher blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD and reads them
//! from a signalfd, so a rank's death wakes it at once (no busy polling
//! while the benchmark runs) and Ctrl-C reaches the teardown code instead
//! of killing the launcher and orphaning the ranks. The ranks start with
//! an empty signal mask, set in the child before exec: they inherited the
//! launcher's (SIGTERM blocked), so a teardown's SIGTERM went unseen and
//! only the SIGKILL after the grace period stopped them.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::output::{drain, forward, Sink};
use crate::pinning::plan_pinning;
use crate::service::Service;
use crate::signals::ignored;

/// How [`launch_local`] runs the job.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    /// Deadline of every bootstrap wait, and how long the other ranks may
    /// keep running after one rank finished successfully.
    pub timeout: Duration,
    /// Program to run as the ranks; `None`: this executable.
    pub program: Option<PathBuf>,
    /// Pin each rank to a core (`OVBENCH_CPU`).
    pub pin: bool,
    /// Progress threads per rank, counted when deciding oversubscription.
    pub progress_threads: u32,
    /// Between SIGTERM and SIGKILL in a teardown.
    pub grace: Duration,
    /// Stop the whole job after this long; `None`: no limit.
    pub job_timeout: Option<Duration>,
    /// Called with the pid of each rank a signal killed (a crash, SIGKILL),
    /// before it is reaped: its pid cannot be reused yet, so files named
    /// after it are still its own. For what the rank would have removed
    /// had it exited (libfabric shm segments).
    pub on_killed: Option<fn(u32)>,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            timeout: Duration::from_secs(60),
            program: None,
            pin: true,
            progress_threads: 0,
            grace: Duration::from_secs(1),
            job_timeout: None,
            on_killed: None,
        }
    }
}

/// Exit code when the job ran out of time (as timeout(1)).
pub const EXIT_TIMEOUT: i32 = 124;

/// Runs `np` ranks of the program with `args` on this host and returns
/// the job's exit code: 0 when every rank succeeded, else the failing
/// rank's code (128 + signal when killed; 128 + signal when the launcher
/// itself was interrupted; [`EXIT_TIMEOUT`] for a deadline). Errors are
/// problems starting the job. No rank outlives this call.
pub fn launch_local(np: u32, args: &[OsString], opts: &LaunchOptions) -> Result<i32> {
    if np == 0 {
        bail!("--np must be at least 1");
    }
    let program = match &opts.program {
        Some(p) => p.clone(),
        None => {
            std::env::current_exe().context("cannot find this executable to start the ranks")?
        }
    };
    // Block before any thread starts so every thread inherits the mask.
    let signals = JobSignals::block()?;
    let secret = crate::secret::generate()?;
    // Every rank is on this host: the service listens on loopback only.
    let service = Service::start(([127, 0, 0, 1], 0).into(), np, secret.as_bytes())?;
    let plan = plan_pinning(np);
    if opts.pin {
        for w in &plan.warnings {
            eprintln!("ovbench: warning: {w}");
        }
    }
    let oversubscribed = plan.oversubscribed_with(opts.progress_threads);

    // The ranks' stderr is a pipe to us; tell them what it ends up on.
    let stderr_tty = std::io::stderr().is_terminal();
    let mut cmds = Vec::new();
    for rank in 0..np {
        let mut cmd = Command::new(&program);
        cmd.args(args)
            .stdin(Stdio::null())
            .env("OVBENCH_RANK", rank.to_string())
            .env("OVBENCH_SIZE", np.to_string())
            .env("OVBENCH_LOCAL_RANK", rank.to_string())
            .env("OVBENCH_LOCAL_SIZE", np.to_string())
            .env("OVBENCH_BOOTSTRAP", service.addr().to_string())
            .env("OVBENCH_SECRET", &secret)
            .env("OVBENCH_NCPUS", plan.available.len().to_string())
            .env(
                "OVBENCH_OVERSUBSCRIBED",
                u8::from(oversubscribed).to_string(),
            )
            .env("OVBENCH_LAUNCHER_PID", std::process::id().to_string())
            .env("OVBENCH_STDERR_TTY", u8::from(stderr_tty).to_string());
        if opts.pin {
            cmd.env("OVBENCH_CPU", plan.cpus[rank as usize].to_string());
        }
        cmds.push(RankCommand {
            rank,
            cmd,
            what: program.display().to_string(),
            stdin: None,
        });
    }
    run_ranks(&signals, cmds, &service, opts)
}

/// One rank to start: its command, and what to write on its stdin
/// (kept open afterwards, so the rank can tell when the launcher goes).
pub(crate) struct RankCommand {
    pub rank: u32,
    pub cmd: Command,
    /// Named in the error when the command cannot start.
    pub what: String,
    pub stdin: Option<Vec<u8>>,
}

/// The launcher's signal mask and the signalfd it reads them from; made
/// before any thread starts, so every thread inherits the mask.
pub(crate) struct JobSignals {
    sfd: SignalFd,
    _restore: MaskGuard,
}

impl JobSignals {
    pub(crate) fn block() -> Result<JobSignals> {
        let mask = watched_signals();
        let restore = MaskGuard(mask.thread_swap_mask(SigmaskHow::SIG_BLOCK)?);
        let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .context("signalfd")?;
        Ok(JobSignals {
            sfd,
            _restore: restore,
        })
    }
}

impl Drop for JobSignals {
    /// A second Ctrl-C while the ranks were torn down is still queued:
    /// taken here, before the mask is restored, it cannot kill the
    /// launcher and change its exit status.
    fn drop(&mut self) {
        while let Ok(Some(_)) = self.sfd.read_signal() {}
    }
}

/// Starts every rank of `cmds`, forwards their output, watches them and
/// tears them all down; the job's exit code (see [`launch_local`]).
pub(crate) fn run_ranks(
    signals: &JobSignals,
    cmds: Vec<RankCommand>,
    service: &Service,
    opts: &LaunchOptions,
) -> Result<i32> {
    let mut ranks = Ranks {
        live: Vec::new(),
        forwarders: Vec::new(),
        on_killed: opts.on_killed,
    };
    for RankCommand {
        rank,
        mut cmd,
        what,
        stdin,
    } in cmds
    {
        crate::signals::unblock_all_in_child(&mut cmd);
        cmd.stderr(Stdio::piped());
        if rank > 0 {
            cmd.stdout(Stdio::piped());
        }
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start rank {rank} ({what})"))?;
        if let (Some(bytes), Some(pipe)) = (&stdin, child.stdin.as_mut()) {
            // A rank that died at once is seen by the monitor below.
            let _ = pipe.write_all(bytes).and_then(|()| pipe.flush());
        }
        let label = if rank == 0 {
            String::new()
        } else {
            format!("[rank {rank}] ")
        };
        if let Some(out) = child.stdout.take() {
            ranks
                .forwarders
                .extend(forward(out, label.clone(), Sink::Stdout));
        }
        if let Some(err) = child.stderr.take() {
            ranks.forwarders.extend(forward(err, label, Sink::Stderr));
        }
        ranks.live.push(Some((rank, child)));
    }
    let code = monitor(&mut ranks, &signals.sfd, service, opts);
    ranks.teardown(opts.grace);
    drain(
        std::mem::take(&mut ranks.forwarders),
        Instant::now() + Duration::from_secs(1),
    );
    Ok(code)
}

/// The signals the launcher reads from its signalfd: SIGCHLD, and SIGINT,
/// SIGTERM and SIGHUP unless ignored. A blocked signal is queued even when
/// ignored, so blocking an ignored one would stop the job on it (`nohup`
/// ignores SIGHUP; a shell ignores SIGINT for a background job).
fn watched_signals() -> SigSet {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // A disposition that cannot be read is taken as not ignored.
        if !ignored(s).unwrap_or(false) {
            mask.add(s);
        }
    }
    mask
}

/// Restores the signal mask [`launch_local`] found.
struct MaskGuard(SigSet);

impl Drop for MaskGuard {
    fn drop(&mut self) {
        let _ = self.0.thread_set_mask();
    }
}

/// The children; dropping this kills whatever still runs.
#[derive(Default)]
struct Ranks {
    live: Vec<Option<(u32, Child)>>,
    forwarders: Vec<JoinHandle<()>>,
    on_killed: Option<fn(u32)>,
}

impl Ranks {
    /// SIGTERM to every live rank, SIGKILL after `grace`, reap them all.
    fn teardown(&mut self, grace: Duration) {
        if self.reap_all() {
            return;
        }
        self.signal_all(Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && !self.reap_all() {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.signal_all(Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.reap_all() {
            if Instant::now() >= deadline {
                for (rank, child) in self.live.iter().flatten() {
                    eprintln!(
                        "ovbench: rank {rank} (pid {}) survived SIGKILL (stuck in the kernel?); kill it by hand",
                        child.id()
                    );
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal_all(&self, sig: Signal) {
        for (_, child) in self.live.iter().flatten() {
            let _ = kill(Pid::from_raw(child.id() as i32), sig);
        }
    }

    /// Waits until `deadline` for `rank` to exit; its exit if it failed.
    fn reap_rank_until(&mut self, rank: u32, deadline: Instant) -> Option<Exit> {
        let slot = self
            .live
            .iter_mut()
            .find(|s| s.as_ref().is_some_and(|(r, _)| *r == rank))?;
        let on_killed = self.on_killed;
        loop {
            let (_, child) = slot.as_mut()?;
            let pid = child.id();
            match reap(child, on_killed) {
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => return None,
                Ok(Some(status)) => {
                    *slot = None;
                    return (!status.success()).then_some(Exit { rank, pid, status });
                }
                Err(_) => return None,
            }
        }
    }

    /// Reaps what has exited; true when none is left.
    fn reap_all(&mut self) -> bool {
        for slot in &mut self.live {
            if let Some((_, child)) = slot {
                if !matches!(reap(child, self.on_killed), Ok(None)) {
                    *slot = None;
                }
            }
        }
        self.live.iter().all(Option::is_none)
    }
}

impl Drop for Ranks {
    /// Only reached with ranks alive when starting the job failed midway.
    fn drop(&mut self) {
        self.teardown(Duration::ZERO);
    }
}

/// `child.try_wait()`, with `on_killed` called first, while the child is
/// still a zombie, if a signal killed it.
fn reap(child: &mut Child, on_killed: Option<fn(u32)>) -> std::io::Result<Option<ExitStatus>> {
    if let Some(hook) = on_killed {
        let pid = Pid::from_raw(child.id() as i32);
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        if let Ok(WaitStatus::Signaled(..)) = waitid(Id::Pid(pid), flags) {
            hook(child.id());
        }
    }
    child.try_wait()
}

/// A rank that exited, and how.
struct Exit {
    rank: u32,
    pid: u32,
    status: ExitStatus,
}

/// Watches the ranks until all succeeded or something must stop the job;
/// returns the job's exit code. Leaves teardown to the caller.
fn monitor(ranks: &mut Ranks, sfd: &SignalFd, service: &Service, opts: &LaunchOptions) -> i32 {
    let start = Instant::now();
    let mut first_done: Option<Instant> = None;
    loop {
        if let Some(sig) = interrupted(sfd) {
            eprintln!("ovbench: received {}; stopping all ranks", sig.as_str());
            return 128 + sig as i32;
        }
        let mut failed = Vec::new();
        for slot in &mut ranks.live {
            let Some((rank, child)) = slot else { continue };
            let status = match reap(child, ranks.on_killed) {
                Ok(None) => continue,
                Ok(Some(s)) => s,
                // Cannot happen for our own child; treat it as lost.
                Err(_) => ExitStatus::from_raw(255 << 8),
            };
            if !status.success() {
                failed.push(Exit {
                    rank: *rank,
                    pid: child.id(),
                    status,
                });
            }
            *slot = None;
            first_done.get_or_insert_with(Instant::now);
        }
        if !failed.is_empty() {
            if let Some(sig) = interrupted(sfd) {
                eprintln!("ovbench: received {}; stopping all ranks", sig.as_str());
                return 128 + sig as i32;
            }
            let died = service.died();
            // A rank whose connection dropped first may not be reaped yet
            // (it closes its files before it becomes a zombie); wait a
            // moment so the blame goes to it, not to its victims.
            let settle = Instant::now() + Duration::from_millis(500);
            for &d in &died {
                failed.extend(ranks.reap_rank_until(d, settle));
            }
            return report_failure(failed, &died);
        }
        if ranks.live.iter().all(Option::is_none) {
            return 0;
        }
        let now = Instant::now();
        if first_done.is_some_and(|t| now - t > opts.timeout) {
            let still: Vec<String> = ranks
                .live
                .iter()
                .flatten()
                .map(|(r, c)| format!("rank {r} (pid {})", c.id()))
                .collect();
            eprintln!(
                "ovbench: {} still running {:.0} s after another rank finished; stopping it (raise --timeout if that is expected)",
                still.join(", "),
                opts.timeout.as_secs_f64()
            );
            return EXIT_TIMEOUT;
        }
        if opts.job_timeout.is_some_and(|t| now - start > t) {
            eprintln!(
                "ovbench: the job ran past its limit of {:.0} s; stopping all ranks",
                opts.job_timeout.unwrap_or_default().as_secs_f64()
            );
            return EXIT_TIMEOUT;
        }
        // Woken at once by SIGCHLD or a signal; the timeout is a safety net.
        let mut fds = [PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::from(200u8));
    }
}

/// Drains the signalfd; the first terminating signal, if any.
fn interrupted(sfd: &SignalFd) -> Option<Signal> {
    let mut got = None;
    while let Ok(Some(info)) = sfd.read_signal() {
        let sig = Signal::try_from(info.ssi_signo as i32).ok();
        if sig != Some(Signal::SIGCHLD) && got.is_none() {
            got = sig;
        }
    }
    got
}

/// Prints which rank failed and how; returns the job's exit code.
///
/// When several ranks ended at once, the one to blame is the one whose
/// bootstrap connection dropped first, else one killed by a signal (the
/// others most likely failed because of it), else the lowest rank.
fn report_failure(mut failed: Vec<Exit>, died_first: &[u32]) -> i32 {
    let pick = died_first
        .iter()
        .find_map(|d| failed.iter().position(|e| e.rank == *d))
        .or_else(|| failed.iter().position(|e| e.status.signal().is_some()))
        .unwrap_or(0);
    let culprit = failed.remove(pick);
    eprintln!(
        "ovbench: rank {} (pid {}) {}; stopping the other ranks",
        culprit.rank,
        culprit.pid,
        describe(culprit.status)
    );
    for e in &failed {
        eprintln!(
            "ovbench: rank {} (pid {}) also {}",
            e.rank,
            e.pid,
            describe(e.status)
        );
    }
    exit_code(culprit.status)
}

/// "exited with status 3", "was killed by signal 9 (SIGKILL)".
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => match Signal::try_from(s) {
            Ok(sig) => format!("was killed by signal {s} ({})", sig.as_str()),
            Err(_) => format!("was killed by signal {s}"),
        },
        _ => format!("ended with {status}"),
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) if c != 0 => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ignored_signal_is_not_watched() {
        // Whatever the test runner inherited (a shell's background job
        // starts with SIGINT ignored), SIGINT and SIGTERM are handled here.
        for s in [Signal::SIGINT, Signal::SIGTERM] {
            crate::signals::set_ignored(s, false).unwrap();
        }
        crate::signals::set_ignored(Signal::SIGHUP, true).unwrap();
        let mask = watched_signals();
        crate::signals::set_ignored(Signal::SIGHUP, false).unwrap();
        assert!(!mask.contains(Signal::SIGHUP));
        for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGCHLD] {
            assert!(mask.contains(s), "{s}");
        }
        assert!(watched_signals().contains(Signal::SIGHUP));
    }

    #[test]
    fn statuses_are_described() {
        assert_eq!(
            describe(ExitStatus::from_raw(3 << 8)),
            "exited with status 3"
        );
        assert_eq!(
            describe(ExitStatus::from_raw(9)),
            "was killed by signal 9 (SIGKILL)"
        );
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let opts = LaunchOptions {
            program: Some("/nonexistent/ovbench".into()),
            ..LaunchOptions::default()
        };
        let e = launch_local(2, &[], &opts).unwrap_err();
        assert!(format!("{e:#}").contains("cannot start rank 0"), "{e:#}");
        assert!(launch_local(0, &[], &opts).is_err());
    }

    #[test]
    fn the_first_dead_connection_is_blamed() {
        let e = |rank, raw| Exit {
            rank,
            pid: 100 + rank,
            status: ExitStatus::from_raw(raw),
        };
        // Rank 2 failed because rank 1's connection dropped first.
        assert_eq!(report_failure(vec![e(2, 1 << 8), e(1, 9)], &[1]), 137);
        // No connection record: the signal is the likelier cause.
        assert_eq!(report_failure(vec![e(0, 1 << 8), e(3, 15)], &[]), 143);
        assert_eq!(report_failure(vec![e(0, 5 << 8)], &[]), 5);
    }
}
