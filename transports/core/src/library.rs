//! A library's own point-to-point and collective calls (MPI's), reached
//! through [`crate::Tagged::library`].
//!
//! UCX and libfabric have one tagged send and one receive; the native
//! path builds ssend, waitall and the blocking calls from them. An MPI
//! library has a call for each (`MPI_Send`, `MPI_Ssend`, `MPI_Rsend`,
//! `MPI_Bsend`, `MPI_Sendrecv`, `MPI_Wait`, `MPI_Waitall`, `MPI_Test`,
//! `MPI_Barrier`, `MPI_Bcast`), and a benchmark of the library must time
//! those calls, not ovbench's composition of others. A transport that
//! offers them returns this trait from [`crate::Tagged::library`]; the
//! native path of [`crate::Comm`] then makes each communicator call as
//! the one library call of the same name.
//!
//! Requests are named by the caller's [`Ctx`], as everywhere in the
//! contract: an operation started with [`LibraryCalls::isend`] or
//! [`crate::Tagged::trecv`] is finished by exactly one of
//! [`LibraryCalls::wait`], [`LibraryCalls::waitall`],
//! [`LibraryCalls::test`] or a completion from [`crate::Transport::poll`].

use crate::{
    BoundPair, Ctx, LocalSlice, Rank, Result, SendMode, Source, Status, Tag, TagRecv, TagSel,
    TagSend,
};

/// The library's own calls (see the module docs).
pub trait LibraryCalls {
    /// A blocking send of `src` in `mode` (`MPI_Send`, `MPI_Ssend`,
    /// `MPI_Rsend`, `MPI_Bsend` with the library's attached buffer).
    fn send(&mut self, peer: Rank, tag: Tag, src: LocalSlice, mode: SendMode) -> Result<()>;
    /// A nonblocking send in `mode` (`MPI_Isend`, `MPI_Issend`,
    /// `MPI_Irsend`, `MPI_Ibsend`), finished by a wait, a test or a poll.
    fn isend(
        &mut self,
        peer: Rank,
        tag: Tag,
        src: LocalSlice,
        mode: SendMode,
        ctx: Ctx,
    ) -> Result<()>;
    /// A blocking receive into `dst` (`MPI_Recv`); `None` selectors are
    /// the wildcards.
    fn recv(&mut self, src: Source, tag: TagSel, dst: LocalSlice) -> Result<Status>;
    /// Make the send `out` (never synchronous) and the receive `into`
    /// at once (`MPI_Sendrecv`); the receive's envelope.
    fn sendrecv(&mut self, out: TagSend, into: TagRecv) -> Result<Status>;
    /// Block until operation `ctx` finishes (`MPI_Wait`): a receive's
    /// envelope, `None` for a send.
    fn wait(&mut self, ctx: Ctx) -> Result<Option<Status>>;
    /// Block until every operation of `ctxs` finishes (`MPI_Waitall`);
    /// `out` gets one entry per context, in order, as [`Self::wait`]'s.
    fn waitall(&mut self, ctxs: &[Ctx], out: &mut Vec<Option<Status>>) -> Result<()>;
    /// Whether operation `ctx` finished (`MPI_Test`): `None` while it
    /// runs, else what [`Self::wait`] would have returned.
    fn test(&mut self, ctx: Ctx) -> Result<Option<Option<Status>>>;
    /// Every rank enters before any leaves (`MPI_Barrier`).
    fn barrier(&mut self) -> Result<()>;
    /// The library's broadcast of `buf` from `root` (`MPI_Bcast`).
    fn bcast(&mut self, root: Rank, buf: LocalSlice) -> Result<()>;
    /// The standard send `out` and the receive `into` bound for a loop
    /// that repeats them ([`crate::Bound`]): checked here, once.
    fn bind<'a>(&'a mut self, out: TagSend, into: TagRecv) -> Result<Box<dyn BoundPair + 'a>>;
}
