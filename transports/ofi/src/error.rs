//! libfabric return codes turned into messages that name what failed.

use ovbench_core::{OpKind, Rank, TransportError};

/// `fi_strerror(-rc)` plus the numeric code.
pub(crate) fn fi_str(rc: i64) -> String {
    let code = rc.unsigned_abs().min(i32::MAX as u64) as libc::c_int;
    format!(
        "{} (libfabric error {})",
        crate::fi::fabric::strerror(code),
        -i64::from(code)
    )
}

/// A failed local libfabric call (setup, registration).
pub(crate) fn local(op: OpKind, call: &str, rc: i64, hint: &str) -> TransportError {
    TransportError::Local {
        op,
        detail: format!("{call} returned {}{hint}", fi_str(rc)),
    }
}

/// A failed operation towards `peer`.
pub(crate) fn peer(peer: Rank, op: OpKind, call: &str, rc: i64) -> TransportError {
    TransportError::Peer {
        peer,
        op,
        status: format!(
            "{call} returned {}; check that rank {peer} is alive and uses the same --provider",
            fi_str(rc)
        ),
    }
}

/// `Ok(())` for 0, a local error otherwise.
pub(crate) fn check(op: OpKind, call: &str, rc: libc::c_int) -> Result<(), TransportError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(local(op, call, i64::from(rc), ""))
    }
}
