//! The safe layer over `ovbench-ucx-sys`, one file per UCP resource as the
//! verbs crate keeps its own: [`context`] (configuration, `ucp_init`, and
//! the library-wide calls), [`worker`] (progress, wake-up, the state its
//! callbacks reach), [`endpoint`] (creation, posting, close), [`rkey`]
//! (unpacked peer keys), [`memory`] (transport regions and their
//! `ucp_mem_map`s) and [`request`] (what UCX holds while an operation is in
//! flight, and the completion callbacks).
//!
//! Each resource owns its raw handle and frees it in `Drop`, and keeps its
//! parent alive through an `Arc` (a worker its context, an endpoint or a
//! remote key its worker), so the order UCX needs holds by construction.
//! The rest of the crate calls only safe functions: the calls into C, the
//! raw pointers UCX hands back and the callbacks it runs are handled in
//! these files alone, each such block with its `SAFETY` line.
//!
//! Buffers handed to UCX past the call (a tagged send or receive, a put or
//! get) are [`memory::RegionBuf`]s: a range checked to lie inside one of
//! the transport's own regions, made only by [`memory::Memory`]. Those
//! regions stay allocated while an operation on them is in flight because
//! the transport's user frees a region only after its operations completed
//! (the contract's rule for every transport, which UCX relies on as the
//! verbs NIC does).

pub(crate) mod context;
pub(crate) mod endpoint;
pub(crate) mod memory;
pub(crate) mod request;
pub(crate) mod rkey;
pub(crate) mod worker;
