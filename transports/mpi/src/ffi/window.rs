//! The communicator's one dynamic window (`MPI_Win_create_dynamic`):
//! registrations attach to it, one `MPI_Win_lock_all` epoch stays open
//! for its life, and `MPI_Win_flush` makes operations complete at the
//! target.

use std::os::raw::c_int;

use mpi::ffi;

use ovbench_core::{LocalSlice, Rma};

use super::comm::{watched, Blocking, Comm};
use super::memory::Memory;
use super::{check, count};

/// A dynamic window in a passive-target epoch towards every rank.
#[derive(Debug)]
pub(crate) struct Window {
    raw: ffi::MPI_Win,
    locked: bool,
}

// SAFETY: used by one thread at a time (FUNNELED; module docs of `ffi`).
unsafe impl Send for Window {}

impl Window {
    /// Create the window over `comm` (collective) and open the epoch.
    pub(crate) fn create(comm: &Comm) -> Result<Window, String> {
        // SAFETY: an all-zero handle is a valid out-slot.
        let mut raw: ffi::MPI_Win = unsafe { std::mem::zeroed() };
        // SAFETY: a valid communicator; MPI_INFO_NULL; `raw` out-parameter.
        let rc = unsafe { ffi::MPI_Win_create_dynamic(ffi::RSMPI_INFO_NULL, comm.raw(), &mut raw) };
        check(rc, "MPI_Win_create_dynamic")?;
        let mut w = Window { raw, locked: false };
        // SAFETY: the window was just created.
        let rc = unsafe { ffi::MPI_Win_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN) };
        check(rc, "MPI_Win_set_errhandler")?;
        // SAFETY: as above; NOCHECK: no rank takes an exclusive lock.
        let rc = unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, raw) };
        check(rc, "MPI_Win_lock_all")?;
        w.locked = true;
        Ok(w)
    }

    /// `MPI_Win_attach` of transport memory `s`: where it starts here
    /// (for the detach) and its address as peers name it
    /// (`MPI_Get_address`). The region table refuses to free a region
    /// while a registration covers it, so it outlives the attachment.
    pub(crate) fn attach(&self, mem: &mut Memory, s: LocalSlice) -> Result<(usize, u64), String> {
        let ptr = mem.ptr(s).map_err(|e| e.to_string())?;
        let len = s.len;
        // SAFETY: `ptr..ptr+len` was checked in its region, which lives
        // until detached (above).
        let rc = unsafe { ffi::MPI_Win_attach(self.raw, ptr.cast(), len as ffi::MPI_Aint) };
        check(rc, "MPI_Win_attach")?;
        let mut addr: ffi::MPI_Aint = 0;
        // SAFETY: any address may be asked for; `addr` is an out-parameter.
        let rc = unsafe { ffi::MPI_Get_address(ptr.cast(), &mut addr) };
        check(rc, "MPI_Get_address")?;
        Ok((ptr as usize, addr as u64))
    }

    /// `MPI_Win_detach` of memory attached at `base`.
    pub(crate) fn detach(&self, base: usize) -> Result<(), String> {
        // SAFETY: detaching an address this side attached; a wrong one
        // returns an error (errors return on this window).
        let rc = unsafe { ffi::MPI_Win_detach(self.raw, base as *const std::os::raw::c_void) };
        check(rc, "MPI_Win_detach")
    }

    /// `MPI_Put` of transport memory `s` to `peer`'s address `disp`
    /// ([`Rma::Write`]), or `MPI_Get` from there into `s` ([`Rma::Read`]);
    /// `s` stays alive until the flush completes it, by the contract's
    /// rule on `free`.
    pub(crate) fn rma(
        &self,
        op: Rma,
        mem: &mut Memory,
        s: LocalSlice,
        peer: u32,
        disp: u64,
    ) -> Result<(), String> {
        let call = match op {
            Rma::Write => "MPI_Put",
            Rma::Read => "MPI_Get",
        };
        let ptr = mem.ptr(s).map_err(|e| e.to_string())?;
        let n = count(s.len, call)?;
        let (target, disp) = (peer as c_int, disp as ffi::MPI_Aint);
        // SAFETY: the origin range was checked in its region, which lives
        // until the operation's completion is polled (a get writes it); the
        // target range is checked by the library against the window; the
        // byte type is an initialised constant of the shim.
        let rc = unsafe {
            let bytes = ffi::RSMPI_UINT8_T;
            match op {
                Rma::Write => ffi::MPI_Put(
                    ptr.cast_const().cast(),
                    n,
                    bytes,
                    target,
                    disp,
                    n,
                    bytes,
                    self.raw,
                ),
                Rma::Read => ffi::MPI_Get(ptr.cast(), n, bytes, target, disp, n, bytes, self.raw),
            }
        };
        check(rc, call)
    }

    /// `MPI_Win_flush` towards `peer`: every put and get to it so far is
    /// complete at the target and at the origin.
    pub(crate) fn flush(
        &self,
        peer: u32,
        watch: &ovbench_core::fabric::watchdog::CallWatch,
        size: usize,
    ) -> Result<(), String> {
        let rc = watched(watch, Blocking::WinFlush, Some(peer), size, || {
            // SAFETY: a valid window inside its lock_all epoch.
            unsafe { ffi::MPI_Win_flush(peer as c_int, self.raw) }
        });
        check(rc, "MPI_Win_flush")
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the window is ours; the epoch opened in `create` is
        // closed once, then the window freed once (collective: every rank
        // drops its transport at the end of the run).
        unsafe {
            if self.locked {
                ffi::MPI_Win_unlock_all(self.raw);
            }
            ffi::MPI_Win_free(&mut self.raw);
        }
    }
}
