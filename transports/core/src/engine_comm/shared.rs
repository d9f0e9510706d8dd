//! What [`EngineComm`](super::EngineComm) and
//! [`NativeComm`](super::NativeComm) do the same way: the CALL_ENTER /
//! CALL_EXIT bracketing, turning instrumentation on, the barrier's
//! scratch region, the wait loops' tuning and timeout error, the plumbing methods that only forward to the
//! transport, clock and work loop, and the blocking calls that count as
//! one communicator call each.

use super::EngineConfig;
use crate::instrument::{Instrumentation, XferTable};
use crate::{Buf, Clock, Rank, Transport, TransportError};

/// Polls between deadline checks (an `Instant::now()` costs ~25 ns).
pub(crate) const CHECK_EVERY: u32 = 64;
/// Polls without progress before an oversubscribed rank blocks.
pub(crate) const SPIN_BEFORE_BLOCK: u32 = 2000;

/// The error of a wait that passed [`EngineConfig::timeout`]; `what`
/// names the rank, the operation, the size and the peer.
#[cold]
pub(crate) fn timeout(cfg: &EngineConfig, peer: Option<Rank>, what: String) -> TransportError {
    TransportError::Timeout {
        peer,
        what,
        secs: cfg.timeout.as_secs_f64(),
    }
}

/// CALL_ENTER at the clock's current tick, when instrumenting; the tick
/// read (0 when not instrumenting, and then the clock is not read).
#[inline]
pub(crate) fn call_enter(instr: &mut Option<Instrumentation>, clock: &dyn Clock) -> u64 {
    match instr.as_mut() {
        Some(i) => {
            let t = clock.ticks();
            i.call_enter(t);
            t
        }
        None => 0,
    }
}

/// CALL_EXIT at the clock's current tick, when instrumenting.
#[inline]
pub(crate) fn call_exit(instr: &mut Option<Instrumentation>, clock: &dyn Clock) {
    if let Some(i) = instr.as_mut() {
        i.call_exit(clock.ticks());
    }
}

/// Record into `table` from now on: a new table for a running
/// instrumentation, or a fresh one at the clock's resolution.
pub(crate) fn enable(instr: &mut Option<Instrumentation>, clock: &dyn Clock, table: XferTable) {
    let npt = clock.ns_per_tick();
    match instr.as_mut() {
        Some(i) => i.set_table(table),
        None => *instr = Some(Instrumentation::new(table, npt)),
    }
}

/// The barrier's small region, allocated on first use.
pub(crate) fn scratch(
    t: &mut dyn Transport,
    scratch: &mut Option<Buf>,
) -> Result<Buf, TransportError> {
    match *scratch {
        Some(b) => Ok(b),
        None => {
            let region = t.alloc(64)?;
            let b = Buf { region, len: 64 };
            *scratch = Some(b);
            Ok(b)
        }
    }
}

/// The blocking calls as the trait's defaults compose them, but each
/// run inside `self.$call(|c| ..)`, so that it is one communicator call
/// (one CALL_ENTER/CALL_EXIT pair) for the instrumentation.
macro_rules! blocking_as_one_call {
    (@sends $call:ident; $($name:ident $post:ident),*) => {$(
        fn $name(
            &mut self,
            buf: Buf,
            off: usize,
            len: usize,
            dst: Rank,
            tag: Tag,
        ) -> Result<(), TransportError> {
            self.$call(|c| {
                let r = c.$post(buf, off, len, dst, tag)?;
                c.wait(r).map(|_| ())
            })
        }
    )*};
    // `send` and `recv`: while nothing is recorded, the communicator's own
    // `$send_now(buf, off, len, dst, tag)` and `$recv_now(buf, off, len,
    // src, tag)` (`None`: the general path after all), posting and waiting
    // in one frame; the general path's nested calls moved each result
    // through three of them.
    (@direct $call:ident, $send_now:ident, $recv_now:ident) => {
        fn send(
            &mut self,
            buf: Buf,
            off: usize,
            len: usize,
            dst: Rank,
            tag: Tag,
        ) -> Result<(), TransportError> {
            if self.instr.is_none() {
                return self.$send_now(buf, off, len, dst, tag);
            }
            self.$call(|c| {
                let r = c.isend(buf, off, len, dst, tag)?;
                c.wait(r).map(|_| ())
            })
        }

        fn recv(
            &mut self,
            buf: Buf,
            off: usize,
            len: usize,
            src: Source,
            tag: TagSel,
        ) -> Result<Status, TransportError> {
            if self.instr.is_none() {
                if let Some(r) = self.$recv_now(buf, off, len, src, tag) {
                    return r;
                }
            }
            self.$call(|c| {
                let r = c.irecv(buf, off, len, src, tag)?;
                c.wait(r)
            })
        }
    };
    (@rest $call:ident) => {
        fn sendrecv(
            &mut self,
            sbuf: Buf,
            soff: usize,
            slen: usize,
            dst: Rank,
            stag: Tag,
            rbuf: Buf,
            roff: usize,
            rlen: usize,
            src: Source,
            rtag: TagSel,
        ) -> Result<Status, TransportError> {
            self.$call(|c| {
                let r = c.irecv(rbuf, roff, rlen, src, rtag)?;
                let s = c.isend(sbuf, soff, slen, dst, stag)?;
                c.wait(s)?;
                c.wait(r)
            })
        }

        fn waitall(&mut self, reqs: &[Req]) -> Result<Vec<Status>, TransportError> {
            self.$call(|c| reqs.iter().map(|&r| c.wait(r)).collect())
        }
    };
}

pub(crate) use blocking_as_one_call;
