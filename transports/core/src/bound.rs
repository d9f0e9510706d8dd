//! A ping-pong's blocking send and receive, bound once to their memory,
//! peer and tag ([`crate::Communicator::bind_pair`]) and then made again
//! and again with nothing looked up or checked per message.
//!
//! A latency loop repeats the same two calls. Through the communicator
//! each one finds its path, its transport's library calls (two trait
//! objects), its region and its tag afresh and checks them: ~245
//! instructions a message over MPI, where NetPIPE's loop has none of
//! them. A library path ([`crate::LibraryCalls::bind`]) resolves all of
//! that once; the loop then makes the library's own two calls.

use crate::{Clock, Result};

/// The library's side of a bound pair: its two calls with their
/// arguments resolved (`MPI_Send` and `MPI_Recv`).
pub trait BoundPair {
    /// The blocking send (standard mode).
    fn send(&mut self) -> Result<()>;
    /// The blocking receive.
    fn recv(&mut self) -> Result<()>;
}

/// A communicator's bound pair: the library's, its clock, and the
/// communicator's send counters, which it keeps as the unbound calls do.
pub struct Bound<'a> {
    pair: Box<dyn BoundPair + 'a>,
    clock: &'a dyn Clock,
    sends: &'a mut u64,
    bytes: &'a mut u64,
    len: u64,
}

impl<'a> Bound<'a> {
    /// `pair`, sending `len` bytes a message, timed by `clock`, counted
    /// in `sends` and `bytes`.
    pub(crate) fn new(
        pair: Box<dyn BoundPair + 'a>,
        clock: &'a dyn Clock,
        sends: &'a mut u64,
        bytes: &'a mut u64,
        len: usize,
    ) -> Bound<'a> {
        Bound {
            pair,
            clock,
            sends,
            bytes,
            len: len as u64,
        }
    }

    /// The send, as [`crate::Communicator::send`] of the bound memory.
    #[inline]
    pub fn send(&mut self) -> Result<()> {
        self.pair.send()?;
        *self.sends += 1;
        *self.bytes += self.len;
        Ok(())
    }

    /// The receive, as [`crate::Communicator::recv`] into the bound memory.
    #[inline]
    pub fn recv(&mut self) -> Result<()> {
        self.pair.recv()
    }

    /// The communicator's clock, now.
    #[inline]
    pub fn now(&self) -> u64 {
        self.clock.ticks()
    }
}

impl std::fmt::Debug for Bound<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound").field("len", &self.len).finish()
    }
}
