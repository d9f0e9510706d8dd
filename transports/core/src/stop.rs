//! Stopping on a signal. A rank asked to stop (SIGTERM from the launcher's
//! teardown or a batch system, SIGINT from Ctrl-C, SIGHUP) leaves its wait
//! loops with [`TransportError::Stopped`] and unwinds instead of dying where
//! it stands: its transports then close, and the libraries remove the
//! shared-memory files they made. A rank killed outright leaves them in
//! /dev/shm (16 MiB per rank for libfabric's shm provider), and the
//! launcher's SIGKILL after its grace period still follows a rank that
//! does not get out in time.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::TransportError;

/// The signal that asked this process to stop; 0 while none has.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The signals [`catch`] turns into a stop.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

extern "C" fn record(sig: libc::c_int) {
    // An atomic store is all a signal handler may safely do here.
    SIGNAL.store(sig, Ordering::Relaxed);
}

/// From now on SIGTERM, SIGINT and SIGHUP only ask for a stop, which the
/// wait loops notice through [`check`]; they are unblocked too, in case
/// whatever started this process left them blocked. A signal ignored now
/// stays ignored (`nohup` ignores SIGHUP; a shell ignores SIGINT for a
/// background job). Libraries loaded before `main` may already have
/// replaced that: UCX's libucs catches SIGHUP (`UCX_DEBUG_SIGNO`), and
/// libinfinipath (libfabric's psm provider) SIGINT and SIGTERM, so a build
/// with them cannot see an ignore it was started with. Not for ranks whose
/// waits happen inside a library that never returns to ovbench's loops
/// (MPI): they must keep dying on the signal.
pub fn catch() -> io::Result<()> {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset to
    // initialise; the calls only touch the set given and this thread's mask.
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in STOP_SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    for sig in STOP_SIGNALS {
        if ignored(sig)? {
            continue;
        }
        // SAFETY: a zeroed sigaction is a valid value to fill in; `record`
        // is async-signal-safe; sigemptyset and sigaction only read and
        // write the struct given.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = record as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // System calls resume: every blocking wait ovbench makes has
            // its own deadline or polls `check`.
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether `sig` is ignored (SIG_IGN) now.
fn ignored(sig: libc::c_int) -> io::Result<bool> {
    // SAFETY: with a null new action, sigaction only writes the current
    // one into `old`, a valid zeroed struct.
    let (rc, old) = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(sig, std::ptr::null(), &mut old), old)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old.sa_sigaction == libc::SIG_IGN)
}

/// The signal that asked for a stop, if one has.
pub fn requested() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        s => Some(s),
    }
}

/// `Err(Stopped)` once a stop was asked for. Cheap (one load): wait loops
/// call it where they look at their deadline.
#[inline]
pub fn check() -> Result<(), TransportError> {
    match requested() {
        None => Ok(()),
        Some(signal) => Err(TransportError::Stopped { signal }),
    }
}

/// "SIGTERM", "SIGINT", "SIGHUP", else "signal N".
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        s => format!("signal {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catching_keeps_an_ignored_signal_ignored() {
        // SAFETY: sets SIGHUP's disposition in this test process only.
        unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
        catch().expect("catch");
        assert!(ignored(libc::SIGHUP).unwrap(), "SIGHUP was ignored before");
        for sig in [libc::SIGTERM, libc::SIGINT] {
            // SAFETY: a null new action only reads the current one.
            let handler = unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut sa);
                sa.sa_sigaction
            };
            assert_eq!(
                handler,
                record as extern "C" fn(libc::c_int) as libc::sighandler_t
            );
        }
        // Nothing was raised: no stop is asked for.
        assert_eq!(requested(), None);
        for sig in STOP_SIGNALS {
            // SAFETY: gives this test process its default dispositions back
            // (Ctrl-C stops the test run again).
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }

    #[test]
    fn stop_signals_are_named() {
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(signal_name(libc::SIGHUP), "SIGHUP");
        assert_eq!(signal_name(10), "signal 10");
    }
}
