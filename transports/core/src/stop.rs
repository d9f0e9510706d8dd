//! The process-wide stop request the wait loops honour. Once a stop is
//! requested, every wait loop leaves with [`TransportError::Stopped`] at
//! its next [`check`] and the rank unwinds, closing its transports. Who
//! requests it is the runtime's business: a rank's signal handler
//! (`ovbench_launcher::signals`) calls [`request`]; this crate installs
//! no handler and touches no signal disposition.

use std::sync::atomic::{AtomicI32, Ordering};

use crate::TransportError;

/// The signal a stop was requested for; 0 while none was.
static STOP: AtomicI32 = AtomicI32::new(0);

/// Ask every wait loop of this process to stop, because of `signal`
/// (non-zero; reported in [`TransportError::Stopped`]). One atomic store,
/// so a signal handler may call it.
pub fn request(signal: i32) {
    STOP.store(signal, Ordering::Relaxed);
}

/// `Err(Stopped)` once a stop was requested. Cheap (one load): wait loops
/// call it where they look at their deadline.
#[inline]
pub fn check() -> Result<(), TransportError> {
    match STOP.load(Ordering::Relaxed) {
        0 => Ok(()),
        signal => Err(TransportError::Stopped { signal }),
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
    fn stop_signals_are_named() {
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(signal_name(libc::SIGHUP), "SIGHUP");
        assert_eq!(signal_name(10), "signal 10");
    }
}
