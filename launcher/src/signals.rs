//! A rank's stop signals. A rank asked to stop (SIGTERM from the
//! launcher's teardown or a batch system, SIGINT from Ctrl-C, SIGHUP)
//! leaves its wait loops with `TransportError::Stopped` and unwinds
//! instead of dying where it stands: its transports then close, and the
//! libraries remove the shared-memory files they made. A rank killed
//! outright leaves them in /dev/shm (16 MiB per rank for libfabric's shm
//! provider), and the launcher's SIGKILL after its grace period still
//! follows a rank that does not get out in time.
//!
//! The handler only records the signal here (for the exit status,
//! [`requested`]) and raises the process-wide stop flag of
//! `ovbench_core::stop`, which is all the wait loops look at.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// The signal that asked this process to stop; 0 while none has.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The signals [`catch`] turns into a stop.
const STOP_SIGNALS: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

extern "C" fn record(sig: nix::libc::c_int) {
    // Two atomic operations: all a signal handler may safely do here. The
    // first signal is kept: a second Ctrl-C while stopping does not change
    // the exit status.
    if SIGNAL
        .compare_exchange(0, sig, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        ovbench_core::stop::request(sig);
    }
}

/// From now on SIGTERM, SIGINT and SIGHUP only ask for a stop, which the
/// wait loops notice through `ovbench_core::stop::check`; they are
/// unblocked too, in case whatever started this process left them
/// blocked. A signal ignored now stays ignored (`nohup` ignores SIGHUP; a
/// shell ignores SIGINT for a background job). Libraries loaded before
/// `main` may already have replaced that: UCX's libucs catches SIGHUP
/// (`UCX_DEBUG_SIGNO`), and libinfinipath (libfabric's psm provider)
/// SIGINT and SIGTERM, so a build with them cannot see an ignore it was
/// started with. Not for ranks whose waits happen inside a library that
/// never returns to ovbench's loops (MPI): they must keep dying on the
/// signal.
pub fn catch() -> io::Result<()> {
    let mut set = SigSet::empty();
    for sig in STOP_SIGNALS {
        set.add(sig);
    }
    set.thread_unblock()?;
    // System calls resume: every blocking wait ovbench makes has its own
    // deadline or polls the stop flag.
    let action = SigAction::new(
        SigHandler::Handler(record),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in STOP_SIGNALS {
        if ignored(sig)? {
            continue;
        }
        // SAFETY: `record` is async-signal-safe (two atomic stores), and
        // replacing the disposition of a stop signal breaks no other
        // handler's assumptions: this process owns them.
        unsafe { sigaction(sig, &action) }?;
    }
    Ok(())
}

/// The signal that asked for a stop, if one has.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// Whether `sig`'s disposition is SIG_IGN now.
pub(crate) fn ignored(sig: Signal) -> io::Result<bool> {
    // SAFETY: with a null new action, sigaction only writes the current
    // one into `old`, a valid zeroed struct.
    let (rc, old) = unsafe {
        let mut old: nix::libc::sigaction = std::mem::zeroed();
        (
            nix::libc::sigaction(sig as i32, std::ptr::null(), &mut old),
            old,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old.sa_sigaction == nix::libc::SIG_IGN)
}

/// Set `sig` to SIG_IGN (`ignore`) or back to SIG_DFL: what `nohup` does
/// to SIGHUP before it starts a program, for the tests that check an
/// inherited ignore is kept. Neither disposition runs code of ours.
pub fn set_ignored(sig: Signal, ignore: bool) -> io::Result<()> {
    let handler = if ignore {
        SigHandler::SigIgn
    } else {
        SigHandler::SigDfl
    };
    // SAFETY: SIG_IGN and SIG_DFL install no handler function, so no
    // signal-safety rule can be broken; the caller owns the disposition.
    unsafe { nix::sys::signal::signal(sig, handler) }?;
    Ok(())
}

/// Have `cmd`'s child start with an empty signal mask. A child inherits
/// its parent's mask, and the launcher blocks its stop signals for its
/// signalfd: a rank started with them blocked never receives the
/// teardown's SIGTERM.
pub(crate) fn unblock_all_in_child(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only
    // calls sigprocmask, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::signal::sigprocmask(
                nix::sys::signal::SigmaskHow::SIG_SETMASK,
                Some(&SigSet::empty()),
                None,
            )
            .map_err(io::Error::from)
        });
    }
}

/// Makes the child get SIGTERM when the launcher dies (even by SIGKILL),
/// so an ssh client never keeps a remote rank alive after its launcher.
pub(crate) fn die_with_launcher(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only
    // calls prctl, a system call and so async-signal-safe.
    unsafe {
        cmd.pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(io::Error::from));
    }
}
