//! `poll_arrivals` on UCX: the caller's taker is lent to the active-message
//! callback for the length of one poll, so an in-order message goes from
//! UCX's receive buffer straight to the protocol engine, and its payload
//! straight to the user's buffer, with no owned copy and no queue.

use std::ptr;

use ovbench_core::{Arrivals, Placement, Rank, TransportError};

use crate::memory::Memory;
use crate::ops::Shared;

/// The caller's taker and the memory placements land in, reachable from
/// the callback while a `poll_arrivals` runs (raw pointers: both are
/// borrowed by that call, which outlives every use, see [`Lend`]).
#[derive(Clone, Copy)]
pub(crate) struct Taker {
    arrivals: *mut (dyn Arrivals + 'static),
    mem: *const Memory,
}

impl Taker {
    /// Hand `data` from `peer` over and copy the placement it asks for.
    ///
    /// # Safety
    /// Only while the [`Lend`] that made this taker is alive, on its
    /// thread, and not from inside the taker itself.
    pub unsafe fn hand(&self, peer: Rank, data: &[u8]) -> Result<(), TransportError> {
        // SAFETY: the caller guarantees the lend is alive: the taker is a
        // live, unaliased &mut for the length of this call.
        let arrivals = unsafe { &mut *self.arrivals };
        // The placement is read where the taker returned it, field by
        // field: moved out whole, it was copied in wider loads than it was
        // stored with, a store-forwarding stall per message (~4 ns of the
        // callback's critical path, with timestamps along it).
        match arrivals.arrived(peer, data) {
            Ok(None) => Ok(()),
            // SAFETY: as above; the memory is only read (its table) meanwhile.
            Ok(Some(ref p)) => place(unsafe { &*self.mem }, p, data),
            Err(e) => Err(e),
        }
    }
}

/// Copy `data[p.src_start..][..p.dst.len]` to `p.dst`, both checked.
#[inline]
fn place(mem: &Memory, p: &Placement, data: &[u8]) -> Result<(), TransportError> {
    let src = p
        .src_start
        .checked_add(p.dst.len)
        .and_then(|end| data.get(p.src_start..end))
        .ok_or_else(|| {
            TransportError::Invalid(format!(
                "a placement of {} bytes from offset {} of a {}-byte message",
                p.dst.len,
                p.src_start,
                data.len()
            ))
        })?;
    let dst = mem.ptr(p.dst)?;
    // SAFETY: ptr() checked dst..dst+len lies in a live region; no Rust
    // borrow of that region exists during a poll; src is UCX's buffer.
    unsafe { ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
    Ok(())
}

/// A taker lent to the callback; dropping it (also on unwinding) takes it
/// back, so no callback outside the lending poll can reach it.
pub(crate) struct Lend {
    shared: *const Shared,
}

impl Lend {
    /// Lend `arrivals` and `mem` to `shared`'s callback.
    ///
    /// # Safety
    /// The returned lend must be dropped (or [`end`](Self::end)ed) before
    /// `arrivals`, `mem` or `shared` are used elsewhere or go away, and
    /// `mem` must not change while it lives.
    #[inline]
    pub unsafe fn new(shared: &Shared, arrivals: &mut dyn Arrivals, mem: &Memory) -> Lend {
        let a: *mut (dyn Arrivals + '_) = arrivals;
        // SAFETY: only the lifetime bound changes; the lend ends before
        // the borrow does (the caller's promise).
        let a: *mut (dyn Arrivals + 'static) = unsafe { std::mem::transmute(a) };
        shared.lock().taker = Some(Taker {
            arrivals: a,
            mem: ptr::from_ref(mem),
        });
        Lend {
            shared: ptr::from_ref(shared),
        }
    }

    /// Take the taker back: how many messages it got, or the first error
    /// it (or a placement) gave. Inlined, and the error moved only when
    /// there is one: on the idle poll's path, returning a large
    /// `Option<TransportError>` out of line cost a store-forwarding stall
    /// (seen with `perf annotate`).
    #[inline]
    pub fn end(self) -> Result<usize, TransportError> {
        // SAFETY: new()'s caller keeps shared alive while the lend lives.
        let mut g = unsafe { &*self.shared }.lock();
        g.taker = None;
        let handed = std::mem::take(&mut g.handed);
        let err = if g.taker_err.is_some() {
            g.taker_err.take()
        } else {
            None
        };
        drop(g);
        // Taken back already.
        std::mem::forget(self);
        match err {
            Some(e) => Err(e),
            None => Ok(handed),
        }
    }
}

impl Drop for Lend {
    fn drop(&mut self) {
        // SAFETY: as in end().
        unsafe { &*self.shared }.lock().taker = None;
    }
}
