//! Communicators (duplicates of `MPI_COMM_WORLD`, errors returned, never
//! fatal) and the point-to-point and collective calls made on them. A
//! blocking call is marked in the rank's [`CallWatch`] for the watchdog.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use mpi::ffi;
use ovbench_core::fabric::watchdog::CallWatch;
use ovbench_core::{LocalSlice, SendMode};

use super::memory::Memory;
use super::requests::Request;
use super::{blank_status, check, count, envelope, Envelope};

/// The blocking calls the watch names (indices of [`CALL_NAMES`]).
#[derive(Clone, Copy, Debug)]
#[repr(u32)]
pub(crate) enum Blocking {
    Send,
    Ssend,
    Rsend,
    Bsend,
    Recv,
    Sendrecv,
    Wait,
    Waitall,
    Barrier,
    Bcast,
    WinFlush,
    Gather,
}

/// The names of [`Blocking`]'s calls, in order.
pub(crate) const CALL_NAMES: &[&str] = &[
    "MPI_Send",
    "MPI_Ssend",
    "MPI_Rsend",
    "MPI_Bsend",
    "MPI_Recv",
    "MPI_Sendrecv",
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Win_flush",
    "MPI_Gather",
];

/// `f` inside blocking call `call` towards `peer` moving `size` bytes.
#[inline]
pub(crate) fn watched<T>(
    w: &CallWatch,
    call: Blocking,
    peer: Option<u32>,
    size: usize,
    f: impl FnOnce() -> T,
) -> T {
    w.enter(call as u32, peer, size as u64);
    let r = f();
    w.exit();
    r
}

/// The wildcard or the rank, as MPI takes a source.
#[inline]
pub(crate) fn source(src: Option<u32>) -> c_int {
    // SAFETY: reading an initialised constant of the shim.
    src.map_or(unsafe { ffi::RSMPI_ANY_SOURCE }, |r| r as c_int)
}

/// The wildcard or the tag, as MPI takes a receive's tag.
#[inline]
pub(crate) fn rtag(tag: Option<c_int>) -> c_int {
    // SAFETY: reading an initialised constant of the shim.
    tag.unwrap_or(unsafe { ffi::RSMPI_ANY_TAG })
}

/// An owned communicator.
pub(crate) struct Comm {
    raw: ffi::MPI_Comm,
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) watch: Arc<CallWatch>,
}

// SAFETY: the handle is used by one thread at a time (FUNNELED; see the
// module docs of `ffi`); MPI handles are not tied to a thread.
unsafe impl Send for Comm {}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl Comm {
    /// A duplicate of `MPI_COMM_WORLD` whose errors return.
    pub(crate) fn dup_world(watch: Arc<CallWatch>) -> Result<Comm, String> {
        // SAFETY: MPI is initialised (callers hold the job).
        Self::dup_of(unsafe { ffi::RSMPI_COMM_WORLD }, watch)
    }

    /// Another communicator over the same ranks (a context of its own).
    pub(crate) fn dup(&self) -> Result<Comm, String> {
        Self::dup_of(self.raw, self.watch.clone())
    }

    fn dup_of(of: ffi::MPI_Comm, watch: Arc<CallWatch>) -> Result<Comm, String> {
        // SAFETY: an all-zero handle is a valid out-slot.
        let mut raw: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        // SAFETY: `of` is a valid communicator; `raw` an out-parameter.
        check(unsafe { ffi::MPI_Comm_dup(of, &mut raw) }, "MPI_Comm_dup")?;
        let mut c = Comm {
            raw,
            rank: 0,
            size: 0,
            watch,
        };
        // SAFETY: `raw` was just created; RSMPI_ERRORS_RETURN is predefined.
        let rc = unsafe { ffi::MPI_Comm_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN) };
        check(rc, "MPI_Comm_set_errhandler")?;
        let (mut r, mut n) = (0, 0);
        // SAFETY: valid communicator, out-parameters.
        check(unsafe { ffi::MPI_Comm_rank(raw, &mut r) }, "MPI_Comm_rank")?;
        // SAFETY: as above.
        check(unsafe { ffi::MPI_Comm_size(raw, &mut n) }, "MPI_Comm_size")?;
        c.rank = r as u32;
        c.size = n as u32;
        Ok(c)
    }

    pub(crate) fn raw(&self) -> ffi::MPI_Comm {
        self.raw
    }

    /// A blocking send of `buf` in `mode`.
    #[inline]
    pub(crate) fn send(
        &self,
        mode: SendMode,
        peer: u32,
        tag: c_int,
        buf: &[u8],
    ) -> Result<(), String> {
        let (ptr, len) = (buf.as_ptr(), buf.len());
        let (call, f, name): (Blocking, SendFn, &str) = match mode {
            SendMode::Standard => (Blocking::Send, ffi::MPI_Send, "MPI_Send"),
            SendMode::Synchronous => (Blocking::Ssend, ffi::MPI_Ssend, "MPI_Ssend"),
            SendMode::Ready => (Blocking::Rsend, ffi::MPI_Rsend, "MPI_Rsend"),
            SendMode::Buffered => (Blocking::Bsend, ffi::MPI_Bsend, "MPI_Bsend"),
        };
        let n = count(len, name)?;
        let rc = watched(&self.watch, call, Some(peer), len, || {
            // SAFETY: `buf` is borrowed for the call; the communicator is
            // valid; bytes are RSMPI_UINT8_T.
            unsafe {
                f(
                    ptr.cast(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    peer as c_int,
                    tag,
                    self.raw,
                )
            }
        });
        check(rc, name)
    }

    /// Start a send of transport memory `s` in `mode`. The contract's
    /// rule (no region freed with an operation in flight) keeps the
    /// memory alive until the request ends.
    pub(crate) fn isend(
        &self,
        mode: SendMode,
        peer: u32,
        tag: c_int,
        mem: &mut Memory,
        s: LocalSlice,
    ) -> Result<Request, String> {
        let ptr = mem.ptr(s).map_err(|e| e.to_string())?;
        // SAFETY: `ptr` heads `s.len` checked bytes of a region that lives
        // until the request ends (the contract's rule on `free`).
        unsafe { self.isend_raw(mode, peer, tag, ptr, s.len) }
    }

    /// Start a send of `len` bytes at `ptr` in `mode`.
    ///
    /// # Safety
    /// `ptr..ptr+len` stays alive and unmodified until the request ends.
    pub(crate) unsafe fn isend_raw(
        &self,
        mode: SendMode,
        peer: u32,
        tag: c_int,
        ptr: *const u8,
        len: usize,
    ) -> Result<Request, String> {
        let (f, name): (IsendFn, &str) = match mode {
            SendMode::Standard => (ffi::MPI_Isend, "MPI_Isend"),
            SendMode::Synchronous => (ffi::MPI_Issend, "MPI_Issend"),
            SendMode::Ready => (ffi::MPI_Irsend, "MPI_Irsend"),
            SendMode::Buffered => (ffi::MPI_Ibsend, "MPI_Ibsend"),
        };
        let n = count(len, name)?;
        let mut req = Request::null();
        // SAFETY: the caller keeps the buffer alive until the request ends;
        // `req` is an out-parameter.
        let rc = unsafe {
            f(
                ptr.cast(),
                n,
                ffi::RSMPI_UINT8_T,
                peer as c_int,
                tag,
                self.raw,
                req.slot(),
            )
        };
        check(rc, name).map(|()| req)
    }

    /// Start a receive into transport memory `s` (alive until the
    /// request ends by the contract's rule on `free`).
    pub(crate) fn irecv(
        &self,
        src: Option<u32>,
        tag: Option<c_int>,
        mem: &mut Memory,
        s: LocalSlice,
    ) -> Result<Request, String> {
        let ptr = mem.ptr(s).map_err(|e| e.to_string())?;
        // SAFETY: as for `isend`.
        unsafe { self.irecv_raw(src, tag, ptr, s.len) }
    }

    /// Start a receive of up to `len` bytes into `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` is writable and stays alive until the request ends.
    pub(crate) unsafe fn irecv_raw(
        &self,
        src: Option<u32>,
        tag: Option<c_int>,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Request, String> {
        let n = count(len, "MPI_Irecv")?;
        let mut req = Request::null();
        // SAFETY: the caller keeps the buffer alive until the request ends.
        let rc = unsafe {
            ffi::MPI_Irecv(
                ptr.cast(),
                n,
                ffi::RSMPI_UINT8_T,
                source(src),
                rtag(tag),
                self.raw,
                req.slot(),
            )
        };
        check(rc, "MPI_Irecv").map(|()| req)
    }

    /// A blocking receive into `buf`.
    #[inline]
    pub(crate) fn recv(
        &self,
        src: Option<u32>,
        tag: Option<c_int>,
        buf: &mut [u8],
    ) -> Result<Envelope, String> {
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let n = count(len, "MPI_Recv")?;
        let mut st = blank_status();
        let rc = watched(&self.watch, Blocking::Recv, src, len, || {
            // SAFETY: `buf` is borrowed mutably for the call.
            unsafe {
                ffi::MPI_Recv(
                    ptr.cast(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    source(src),
                    rtag(tag),
                    self.raw,
                    &mut st,
                )
            }
        });
        check(rc, "MPI_Recv").map(|()| envelope(&st))
    }

    /// `MPI_Sendrecv` of transport memory `sb` into `rb`, which must not
    /// overlap.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sendrecv(
        &self,
        mem: &mut Memory,
        dst: u32,
        stag: c_int,
        sb: LocalSlice,
        src: Option<u32>,
        tag: Option<c_int>,
        rb: LocalSlice,
    ) -> Result<Envelope, String> {
        if sb.region == rb.region
            && sb.offset < rb.offset + rb.len
            && rb.offset < sb.offset + sb.len
        {
            return Err("MPI_Sendrecv: the send and receive buffers overlap".into());
        }
        let sptr = mem.ptr(sb).map_err(|e| e.to_string())?.cast_const();
        let rptr = mem.ptr(rb).map_err(|e| e.to_string())?;
        let (slen, rlen) = (sb.len, rb.len);
        let sn = count(slen, "MPI_Sendrecv")?;
        let rn = count(rlen, "MPI_Sendrecv")?;
        let mut st = blank_status();
        let rc = watched(&self.watch, Blocking::Sendrecv, Some(dst), slen, || {
            // SAFETY: both ranges were checked in their regions, which
            // live for the call, and do not overlap.
            unsafe {
                ffi::MPI_Sendrecv(
                    sptr.cast(),
                    sn,
                    ffi::RSMPI_UINT8_T,
                    dst as c_int,
                    stag,
                    rptr.cast(),
                    rn,
                    ffi::RSMPI_UINT8_T,
                    source(src),
                    rtag(tag),
                    self.raw,
                    &mut st,
                )
            }
        });
        check(rc, "MPI_Sendrecv").map(|()| envelope(&st))
    }

    /// `MPI_Barrier`.
    pub(crate) fn barrier(&self) -> Result<(), String> {
        let rc = watched(&self.watch, Blocking::Barrier, None, 0, || {
            // SAFETY: a valid communicator.
            unsafe { ffi::MPI_Barrier(self.raw) }
        });
        check(rc, "MPI_Barrier")
    }

    /// `MPI_Bcast` of `buf` from `root`.
    pub(crate) fn bcast(&self, root: u32, buf: &mut [u8]) -> Result<(), String> {
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let n = count(len, "MPI_Bcast")?;
        let rc = watched(&self.watch, Blocking::Bcast, Some(root), len, || {
            // SAFETY: `buf` is borrowed mutably for the call.
            unsafe {
                ffi::MPI_Bcast(
                    ptr.cast::<c_void>(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    root as c_int,
                    self.raw,
                )
            }
        });
        check(rc, "MPI_Bcast")
    }

    /// Every rank's `mine`, in rank order, at rank 0 (`MPI_Gather` of the
    /// lengths, then `MPI_Gatherv`); `None` elsewhere.
    pub(crate) fn gather_bytes(&self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>, String> {
        let n = count(mine.len(), "MPI_Gather")?;
        let root = self.rank == 0;
        let mut lens = vec![0 as c_int; if root { self.size as usize } else { 0 }];
        let rc = watched(&self.watch, Blocking::Gather, Some(0), 4, || {
            // SAFETY: one int sent from `n`; at the root `lens` holds one
            // int per rank (ignored elsewhere).
            unsafe {
                ffi::MPI_Gather(
                    (&n as *const c_int).cast(),
                    1,
                    ffi::RSMPI_INT32_T,
                    lens.as_mut_ptr().cast(),
                    1,
                    ffi::RSMPI_INT32_T,
                    0,
                    self.raw,
                )
            }
        });
        check(rc, "MPI_Gather")?;
        let mut displs = Vec::with_capacity(lens.len());
        let mut total: usize = 0;
        for &l in &lens {
            displs.push(count(total, "MPI_Gatherv")?);
            total += l.max(0) as usize;
        }
        let mut all = vec![0u8; total];
        let rc = watched(&self.watch, Blocking::Gather, Some(0), mine.len(), || {
            // SAFETY: `mine` is readable for `n` bytes; at the root `all`
            // holds the sum of `lens` bytes at the offsets `displs`.
            unsafe {
                ffi::MPI_Gatherv(
                    mine.as_ptr().cast(),
                    n,
                    ffi::RSMPI_UINT8_T,
                    all.as_mut_ptr().cast(),
                    lens.as_ptr(),
                    displs.as_ptr(),
                    ffi::RSMPI_UINT8_T,
                    0,
                    self.raw,
                )
            }
        });
        check(rc, "MPI_Gatherv")?;
        if !root {
            return Ok(None);
        }
        Ok(Some(
            lens.iter()
                .zip(&displs)
                .map(|(&l, &d)| all[d as usize..d as usize + l as usize].to_vec())
                .collect(),
        ))
    }
}

type SendFn = unsafe extern "C" fn(
    *const c_void,
    c_int,
    ffi::MPI_Datatype,
    c_int,
    c_int,
    ffi::MPI_Comm,
) -> c_int;
type IsendFn = unsafe extern "C" fn(
    *const c_void,
    c_int,
    ffi::MPI_Datatype,
    c_int,
    c_int,
    ffi::MPI_Comm,
    *mut ffi::MPI_Request,
) -> c_int;

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: `raw` is ours (a duplicate) and freed once.
        unsafe { ffi::MPI_Comm_free(&mut self.raw) };
    }
}
