//! The native path over a library that has its own call for each
//! operation ([`crate::LibraryCalls`], MPI): every communicator call is
//! the one library call of its name, bracketed by the communicator's
//! CALL_ENTER/CALL_EXIT. A blocking call's transfer begins at its entry
//! and ends at its exit (call-bounded, as every native transfer).

use super::native::{send_req, NativeState};
use super::shared::Shared;
use crate::{
    LibraryCalls, LocalSlice, Rank, Result, SendMode, Source, Status, Tag, TagRecv, TagSel,
    TagSend, TransportError,
};

/// The library's calls of `s`'s transport (present: checked when the
/// path was built). Inlined into each call: the two trait-object hops
/// (`tagged`, `library`) are then the only steps between a communicator
/// call and the library's, the error built out of line.
#[inline(always)]
fn lib(s: &mut Shared) -> Result<&mut dyn LibraryCalls> {
    match s.t.tagged().and_then(|t| t.library()) {
        Some(l) => Ok(l),
        None => Err(calls_gone()),
    }
}

/// A recorded blocking call's XFER_END, now.
#[inline(never)]
fn xfer_end(s: &mut Shared, id: u64, len: usize) {
    if let Some(i) = s.instr.as_mut() {
        i.xfer_end(id, len as u64, s.clock.ticks());
    }
}

#[cold]
#[inline(never)]
fn calls_gone() -> TransportError {
    TransportError::Invalid("the transport's library calls went away".into())
}

impl NativeState {
    /// A fresh id for an operation or a blocking call's transfer.
    fn fresh(&mut self) -> u64 {
        let id = self.next;
        self.next += 1;
        id
    }

    /// Run the blocking library call `f` moving `len` bytes, its
    /// communicator call entered at `at`: one call-bounded transfer,
    /// XFER_BEGIN at the call's entry and XFER_END as the library returns.
    /// While nothing is recorded the transfer has no id and no events:
    /// the call is the library's and nothing else (a ping-pong's
    /// messages take this step twice a round trip, inlined).
    #[inline(always)]
    fn blocking<T>(
        &mut self,
        s: &mut Shared,
        at: u64,
        len: usize,
        f: impl FnOnce(&mut dyn LibraryCalls) -> Result<T>,
    ) -> Result<T> {
        if s.instr.is_none() {
            return f(lib(s)?);
        }
        let id = self.xfer_begin(s, at, len);
        let r = f(lib(s)?);
        xfer_end(s, id, len);
        r
    }

    /// A recorded blocking call's XFER_BEGIN at `at`; its transfer's id.
    #[inline(never)]
    fn xfer_begin(&mut self, s: &mut Shared, at: u64, len: usize) -> u64 {
        let id = self.fresh();
        if let Some(i) = s.instr.as_mut() {
            i.xfer_begin(id, len as u64, at, true);
        }
        id
    }

    // deviation: per-call-layers — ovbench's request table and checks around each MPI call, see docs/methods/overhead.md
    pub(super) fn lib_isend(
        &mut self,
        s: &mut Shared,
        ls: LocalSlice,
        dst: Rank,
        tag: Tag,
        mode: SendMode,
        at: u64,
    ) -> Result<u64> {
        let id = self.fresh();
        lib(s)?.isend(dst, tag, ls, mode, id)?;
        self.sends += 1;
        self.bytes += ls.len as u64;
        Ok(self.track(s, id, send_req(dst, tag, ls.len, false), at))
    }

    /// The envelope of a finished operation `id`: a receive's from the
    /// library, a send's from its request.
    fn finish(&mut self, s: &mut Shared, id: u64, env: Option<Status>) -> Status {
        let env = env.map(|st| (st.source, st.tag, st.len));
        // `complete` fails only for an id never posted, which `take` then
        // reports as not pending.
        let _ = self.complete(id, env);
        self.take(s, id).unwrap_or_default()
    }

    fn pending(&self, id: u64) -> Result<()> {
        if self.reqs.get(&id).is_some() {
            Ok(())
        } else {
            Err(TransportError::Invalid(format!(
                "request {id} is not pending"
            )))
        }
    }

    pub(super) fn lib_test(&mut self, s: &mut Shared, id: u64) -> Result<Option<Status>> {
        self.pending(id)?;
        let done = lib(s)?.test(id)?;
        Ok(done.map(|env| self.finish(s, id, env)))
    }

    pub(super) fn lib_wait(&mut self, s: &mut Shared, id: u64) -> Result<Status> {
        self.pending(id)?;
        let env = lib(s)?.wait(id)?;
        Ok(self.finish(s, id, env))
    }

    /// Every request of `ids` waited for by one library call.
    pub(crate) fn lib_waitall(&mut self, s: &mut Shared, ids: &[u64]) -> Result<Vec<Status>> {
        // Requests a poll already finished are taken first; the library
        // waits for the rest.
        let mut done: Vec<Option<Status>> = ids.iter().map(|&id| self.take(s, id)).collect();
        let open: Vec<u64> = ids
            .iter()
            .zip(&done)
            .filter(|(_, d)| d.is_none())
            .map(|(&id, _)| id)
            .collect();
        for &id in &open {
            self.pending(id)?;
        }
        let mut envs = Vec::with_capacity(open.len());
        if !open.is_empty() {
            lib(s)?.waitall(&open, &mut envs)?;
        }
        let mut envs = envs.into_iter();
        for (slot, &id) in done.iter_mut().zip(ids) {
            if slot.is_none() {
                let env = envs.next().flatten();
                *slot = Some(self.finish(s, id, env));
            }
        }
        Ok(done.into_iter().map(Option::unwrap_or_default).collect())
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lib_send(
        &mut self,
        s: &mut Shared,
        at: u64,
        ls: LocalSlice,
        dst: Rank,
        tag: Tag,
        mode: SendMode,
    ) -> Result<()> {
        self.sends += 1;
        self.bytes += ls.len as u64;
        self.blocking(s, at, ls.len, |l| l.send(dst, tag, ls, mode))
    }

    #[inline(always)]
    pub(crate) fn lib_recv(
        &mut self,
        s: &mut Shared,
        at: u64,
        ls: LocalSlice,
        src: Source,
        tag: TagSel,
    ) -> Result<Status> {
        self.blocking(s, at, ls.len, |l| l.recv(src, tag, ls))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lib_sendrecv(
        &mut self,
        s: &mut Shared,
        at: u64,
        sb: LocalSlice,
        dst: Rank,
        stag: Tag,
        rb: LocalSlice,
        src: Source,
        rtag: TagSel,
    ) -> Result<Status> {
        self.sends += 1;
        self.bytes += sb.len as u64;
        let (out, into) = (
            TagSend::new(dst, stag, sb, false),
            TagRecv::new(src, rtag, rb),
        );
        self.blocking(s, at, sb.len.max(rb.len), |l| l.sendrecv(out, into))
    }

    pub(crate) fn lib_bcast(
        &mut self,
        s: &mut Shared,
        at: u64,
        ls: LocalSlice,
        root: Rank,
    ) -> Result<()> {
        self.blocking(s, at, ls.len, |l| l.bcast(root, ls))
    }
}
