//! Every call into the MPI library, one file per resource: the job
//! (initialisation, the library's facts, abort), communicators and their
//! point-to-point and collective calls, requests, and the dynamic window.
//! Each owns its handle and frees it on drop; the transport above calls
//! safe functions only (`tests/architecture.rs` keeps `unsafe` here).
//!
//! Threads: MPI is initialised FUNNELED, so only the thread that created
//! the job calls MPI. The handles are `Send` so the transport can be
//! boxed as the contract asks, and a rank moves it between threads only
//! while no call is running (the communicator is used by one thread).
//! The one exception is the watchdog's `MPI_Abort` ([`job::abort`]),
//! the last call of a rank that is stuck.

pub(crate) mod bound;
pub(crate) mod comm;
pub(crate) mod ctrl;
pub(crate) mod job;
pub(crate) mod memory;
pub(crate) mod requests;
pub(crate) mod tool;
pub(crate) mod window;

use std::os::raw::c_int;

use mpi::ffi;

/// The library's words for error code `rc` (`MPI_Error_string`).
pub(crate) fn error_string(rc: c_int) -> String {
    let mut buf = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_ERROR_STRING bytes as the call requires;
    // `len` is a valid out-parameter. The call is allowed at any time.
    let ok = unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr().cast(), &mut len) };
    if ok != 0 {
        return format!("MPI error code {rc}");
    }
    buf.truncate(len.max(0) as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

/// `Ok` for `MPI_SUCCESS`, else the call's name and the library's words.
/// Inlined into every call site: a message's path checks two codes, and
/// as a call of its own this was ~22 instructions each.
#[inline(always)]
pub(crate) fn check(rc: c_int, call: &str) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(failed(rc, call))
    }
}

/// The error of call `call` that returned `rc` (out of the message path).
#[cold]
#[inline(never)]
fn failed(rc: c_int, call: &str) -> String {
    format!("{call}: {}", error_string(rc))
}

/// A count argument: MPI takes `int` counts.
#[inline(always)]
pub(crate) fn count(len: usize, call: &str) -> Result<c_int, String> {
    match c_int::try_from(len) {
        Ok(n) => Ok(n),
        Err(_) => Err(too_long(len, call)),
    }
}

#[cold]
#[inline(never)]
fn too_long(len: usize, call: &str) -> String {
    format!(
        "{call}: {len} bytes is more than one MPI call moves as bytes (at most {})",
        c_int::MAX
    )
}

/// What a finished receive carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub(crate) source: c_int,
    pub(crate) tag: c_int,
    pub(crate) len: usize,
}

/// A status's envelope (its byte count by `MPI_Get_count`).
#[inline]
pub(crate) fn envelope(st: &ffi::MPI_Status) -> Envelope {
    let mut n: c_int = 0;
    // SAFETY: `st` is a status the library filled; RSMPI_UINT8_T is the
    // predefined byte type; `n` is a valid out-parameter.
    unsafe { ffi::MPI_Get_count(st, ffi::RSMPI_UINT8_T, &mut n) };
    Envelope {
        source: st.MPI_SOURCE,
        tag: st.MPI_TAG,
        len: n.max(0) as usize,
    }
}

/// A status for the library to fill.
#[inline]
pub(crate) fn blank_status() -> ffi::MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers, valid when zeroed.
    unsafe { std::mem::zeroed() }
}
