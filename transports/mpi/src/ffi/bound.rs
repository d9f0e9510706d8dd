//! A ping-pong's `MPI_Send` and `MPI_Recv` with every argument resolved
//! once ([`ovbench_core::Bound`]): each message is then the watch's marks
//! and the library's call, as a plain C loop's (NetPIPE's) is the call.

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};

use mpi::ffi;
use ovbench_core::LocalSlice;

use super::comm::{rtag, source, watched, Blocking, Comm};
use super::memory::Memory;
use super::{blank_status, check, count};

/// One call's buffer and envelope, as MPI takes them.
#[derive(Debug)]
struct Args {
    ptr: *mut c_void,
    count: c_int,
    peer: c_int,
    tag: c_int,
    /// The peer as the watch names it (`None`: any).
    watched_peer: Option<u32>,
}

/// The bound send and receive; the borrow of the memory keeps both
/// buffers' regions alive (nothing can free them while it lasts).
#[derive(Debug)]
pub(crate) struct Pair<'a> {
    comm: &'a Comm,
    send: Args,
    recv: Args,
    status: ffi::MPI_Status,
    _mem: PhantomData<&'a mut Memory>,
}

impl<'a> Pair<'a> {
    /// The standard send of `out` to `dst` with `stag`, and the receive
    /// into `into` from `src` with `rtag` (`None`: the wildcards), on
    /// `comm`: the slices checked in `mem`, the counts in MPI's range.
    pub(crate) fn new(
        comm: &'a Comm,
        mem: &'a mut Memory,
        (dst, stag, out): (u32, c_int, LocalSlice),
        (src, tag, into): (Option<u32>, Option<c_int>, LocalSlice),
    ) -> Result<Pair<'a>, String> {
        let sptr = mem.ptr(out).map_err(|e| e.to_string())?;
        let rptr = mem.ptr(into).map_err(|e| e.to_string())?;
        Ok(Pair {
            comm,
            send: Args {
                ptr: sptr.cast(),
                count: count(out.len, "MPI_Send")?,
                peer: dst as c_int,
                tag: stag,
                watched_peer: Some(dst),
            },
            recv: Args {
                ptr: rptr.cast(),
                count: count(into.len, "MPI_Recv")?,
                peer: source(src),
                tag: rtag(tag),
                watched_peer: src,
            },
            status: blank_status(),
            _mem: PhantomData,
        })
    }

    /// `MPI_Send` of the bound buffer.
    #[inline(always)]
    pub(crate) fn send(&mut self) -> Result<(), String> {
        let a = &self.send;
        let raw = self.comm.raw();
        let rc = watched(
            &self.comm.watch,
            Blocking::Send,
            a.watched_peer,
            a.count as usize,
            || {
                // SAFETY: the buffer lies in a region checked at `new` and
                // kept alive by the memory's borrow; bytes are RSMPI_UINT8_T.
                unsafe {
                    ffi::MPI_Send(
                        a.ptr.cast_const(),
                        a.count,
                        ffi::RSMPI_UINT8_T,
                        a.peer,
                        a.tag,
                        raw,
                    )
                }
            },
        );
        check(rc, "MPI_Send")
    }

    /// `MPI_Recv` into the bound buffer.
    #[inline(always)]
    pub(crate) fn recv(&mut self) -> Result<(), String> {
        let a = &self.recv;
        let raw = self.comm.raw();
        let st = &mut self.status;
        let rc = watched(
            &self.comm.watch,
            Blocking::Recv,
            a.watched_peer,
            a.count as usize,
            || {
                // SAFETY: as for `send`, and the memory's borrow is mutable:
                // nothing else writes the buffer while the pair lasts.
                unsafe { ffi::MPI_Recv(a.ptr, a.count, ffi::RSMPI_UINT8_T, a.peer, a.tag, raw, st) }
            },
        );
        check(rc, "MPI_Recv")
    }

    /// The peer a failed call names.
    pub(crate) fn peer(&self) -> u32 {
        self.send.peer as u32
    }
}
