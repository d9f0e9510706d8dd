//! A rank's stop signals, in a test binary of their own: catching them
//! changes the whole process's dispositions.

use nix::sys::signal::{raise, Signal};
use ovbench_core::{stop, TransportError};
use ovbench_launcher::signals;

/// The stop a wait loop would see now, as the signal it names.
fn stopped_by() -> Option<i32> {
    match stop::check() {
        Ok(()) => None,
        Err(TransportError::Stopped { signal }) => Some(signal),
        Err(e) => panic!("unexpected {e}"),
    }
}

#[test]
fn stop_signals_are_caught_and_an_inherited_ignore_is_kept() {
    // A shell's nohup, as a rank would inherit it.
    signals::set_ignored(Signal::SIGHUP, true).expect("ignore SIGHUP");
    signals::catch().expect("catch");
    assert_eq!(signals::requested(), None);
    assert_eq!(stopped_by(), None);

    // Still ignored: no stop, and the process lives on.
    raise(Signal::SIGHUP).expect("raise SIGHUP");
    assert_eq!(signals::requested(), None, "SIGHUP was ignored before");
    assert_eq!(stopped_by(), None);

    // Caught: recorded for the exit status, and the wait loops stop.
    raise(Signal::SIGTERM).expect("raise SIGTERM");
    assert_eq!(signals::requested(), Some(Signal::SIGTERM as i32));
    assert_eq!(stopped_by(), Some(Signal::SIGTERM as i32));
    // A second signal while stopping changes nothing (the exit status
    // stays 128 + SIGTERM).
    raise(Signal::SIGINT).expect("raise SIGINT");
    assert_eq!(signals::requested(), Some(Signal::SIGTERM as i32));
    assert_eq!(stopped_by(), Some(Signal::SIGTERM as i32));
}
