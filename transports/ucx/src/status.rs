//! UCX status codes turned into messages that name what failed.

use ovbench_core::{OpKind, Rank, TransportError};
use ovbench_ucx_sys as sys;

/// `ucs_status_string(status)` plus the numeric code.
pub(crate) fn status_str(status: sys::ucs_status_t) -> String {
    let s = crate::ffi::context::status_string(status);
    format!("{s} (UCX status {status})")
}

/// A failed local UCX call (context, worker, registration).
pub(crate) fn local(
    op: OpKind,
    call: &str,
    status: sys::ucs_status_t,
    hint: &str,
) -> TransportError {
    TransportError::Local {
        op,
        detail: format!("{call} returned {}{}", status_str(status), hint),
    }
}

/// A failed operation towards `peer`.
pub(crate) fn peer(
    peer: Rank,
    op: OpKind,
    call: &str,
    status: sys::ucs_status_t,
) -> TransportError {
    TransportError::Peer {
        peer,
        op,
        status: format!(
            "{call} returned {}; check that rank {peer} is alive and that UCX_TLS names a transport both ranks share (ucx_info -d lists them)",
            status_str(status)
        ),
    }
}

/// Turn a status into `Ok(())` or a local error.
pub(crate) fn check(
    op: OpKind,
    call: &str,
    status: sys::ucs_status_t,
) -> Result<(), TransportError> {
    if status == sys::UCS_OK {
        Ok(())
    } else {
        Err(local(op, call, status, ""))
    }
}
