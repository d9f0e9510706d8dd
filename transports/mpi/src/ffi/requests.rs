//! Requests of nonblocking calls: wait, test, wait for all, test some.

use std::os::raw::c_int;

use mpi::ffi;
use ovbench_core::fabric::watchdog::CallWatch;

use super::comm::{watched, Blocking};
use super::{blank_status, check, envelope, Envelope};

/// One request; `repr(transparent)` so a slice of them is the array
/// `MPI_Waitall` and `MPI_Testsome` take.
#[repr(transparent)]
pub(crate) struct Request(ffi::MPI_Request);

// SAFETY: a request handle is not tied to a thread; one thread uses it
// at a time (FUNNELED, see the module docs of `ffi`).
unsafe impl Send for Request {}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_null() {
            "Request(null)"
        } else {
            "Request(active)"
        })
    }
}

impl Request {
    pub(crate) fn null() -> Request {
        // SAFETY: reading an initialised constant of the shim.
        Request(unsafe { ffi::RSMPI_REQUEST_NULL })
    }

    /// Where a starting call writes the handle.
    pub(crate) fn slot(&mut self) -> *mut ffi::MPI_Request {
        &mut self.0
    }

    /// Finished and freed (or never started).
    pub(crate) fn is_null(&self) -> bool {
        // SAFETY: reading an initialised constant of the shim.
        self.0 == unsafe { ffi::RSMPI_REQUEST_NULL }
    }

    /// `MPI_Wait`: block until it finishes; the envelope only where
    /// `want` (a receive's). A send's status says nothing the caller
    /// keeps, and reading it (`MPI_Get_count`) was 44 of the library's
    /// instructions on every send's wait (callgrind, Open MPI 4.1.4).
    pub(crate) fn wait(
        &mut self,
        watch: &CallWatch,
        peer: Option<u32>,
        size: usize,
        want: bool,
    ) -> Result<Option<Envelope>, String> {
        let mut st = blank_status();
        let rc = watched(watch, Blocking::Wait, peer, size, || {
            // SAFETY: a request this side started (or null, which returns
            // at once); `st` is an out-parameter.
            unsafe { ffi::MPI_Wait(&mut self.0, &mut st) }
        });
        check(rc, "MPI_Wait").map(|()| want.then(|| envelope(&st)))
    }

    /// `MPI_Test`: its envelope if it finished.
    pub(crate) fn test(&mut self) -> Result<Option<Envelope>, String> {
        let mut st = blank_status();
        let mut flag: c_int = 0;
        // SAFETY: as for `wait`; `flag` is an out-parameter.
        let rc = unsafe { ffi::MPI_Test(&mut self.0, &mut flag, &mut st) };
        check(rc, "MPI_Test")?;
        Ok((flag != 0).then(|| envelope(&st)))
    }

    /// Withdraw a request that has not finished (`MPI_Cancel`, then wait
    /// for the cancel); one that finished meanwhile is simply freed.
    pub(crate) fn cancel(&mut self) {
        if self.is_null() {
            return;
        }
        let mut st = blank_status();
        // SAFETY: an active request of this side; after the cancel,
        // MPI_Wait returns (the operation either finished or is cancelled).
        unsafe {
            ffi::MPI_Cancel(&mut self.0);
            ffi::MPI_Wait(&mut self.0, &mut st);
        }
    }
}

/// `MPI_Waitall` over `reqs`: one envelope per request, in order.
pub(crate) fn waitall(reqs: &mut [Request], watch: &CallWatch) -> Result<Vec<Envelope>, String> {
    let n = super::count(reqs.len(), "MPI_Waitall")?;
    let mut sts: Vec<ffi::MPI_Status> = (0..reqs.len()).map(|_| blank_status()).collect();
    let rc = watched(watch, Blocking::Waitall, None, 0, || {
        // SAFETY: `reqs` is `n` request handles (repr(transparent)); `sts`
        // holds `n` statuses.
        unsafe { ffi::MPI_Waitall(n, reqs.as_mut_ptr().cast(), sts.as_mut_ptr()) }
    });
    check(rc, "MPI_Waitall")?;
    Ok(sts.iter().map(envelope).collect())
}

/// `MPI_Testsome` over `reqs`: the indices that finished, with their
/// envelopes, appended to `done`.
pub(crate) fn testsome(
    reqs: &mut [Request],
    idx: &mut Vec<c_int>,
    sts: &mut Vec<ffi::MPI_Status>,
    done: &mut Vec<(usize, Envelope)>,
) -> Result<(), String> {
    if reqs.is_empty() {
        return Ok(());
    }
    let n = super::count(reqs.len(), "MPI_Testsome")?;
    idx.resize(reqs.len(), 0);
    sts.resize_with(reqs.len(), blank_status);
    let mut outcount: c_int = 0;
    // SAFETY: `reqs` is `n` handles; `idx` and `sts` hold `n` entries each.
    let rc = unsafe {
        ffi::MPI_Testsome(
            n,
            reqs.as_mut_ptr().cast(),
            &mut outcount,
            idx.as_mut_ptr(),
            sts.as_mut_ptr(),
        )
    };
    check(rc, "MPI_Testsome")?;
    // MPI_UNDEFINED: no active request in the set.
    for k in 0..outcount.max(0) as usize {
        done.push((idx[k] as usize, envelope(&sts[k])));
    }
    Ok(())
}
