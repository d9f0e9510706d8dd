//! The safe layer over `ovbench-ucx-sys`, one file per UCP resource as the
//! verbs crate keeps its own: [`context`] (configuration, `ucp_init`, and
//! the library-wide calls), [`worker`] (progress, wake-up, the state its
//! callbacks reach), [`endpoint`] (creation, posting, close),
//! [`listener`] (the client-server path: a listening socket address and
//! its connection requests), [`rkey`] (unpacked peer keys), [`memory`]
//! (transport regions and their `ucp_mem_map`s) and [`request`] (what UCX
//! holds while an operation is in flight, and the completion callbacks).
//!
//! Each resource owns its raw handle and frees it in `Drop`, and keeps its
//! parent alive through an `Arc` (a worker its context, an endpoint or a
//! remote key its worker), so the order UCX needs holds by construction.
//! The rest of the crate calls only safe functions: the calls into C, the
//! raw pointers UCX hands back and the callbacks it runs are handled in
//! these files alone, each such block with its `SAFETY` line.
//!
//! What the types here do not enforce, and the rest of the crate keeps:
//!
//! - Buffers handed to UCX past the call (a tagged send or receive, a put
//!   or get) are [`memory::RegionBuf`]s: a range checked, when made by
//!   [`memory::Memory`], to lie inside one of the transport's regions.
//!   The region must stay allocated until the operation completes: the
//!   transport's user does not free a region with operations on it in
//!   flight (as with every transport whose device or library reads the
//!   memory later; `Transport::free` does not say it in words yet).
//! - Without a progress thread the callbacks' state is reached without a
//!   lock ([`worker::CallbackCell`]): no guard of it may live across a
//!   UCX call.
//! - A [`worker::Taker`] is reachable only while [`worker::Worker::lending`]
//!   runs; nothing takes it out of the callback state.
//! - [`rkey::Rkey::unpack`] parses a key that `seal`'s `unseal` checked
//!   (length and checksum of what `ucp_rkey_pack` wrote): UCX's parser
//!   takes no length.

pub(crate) mod context;
pub(crate) mod endpoint;
pub(crate) mod listener;
pub(crate) mod memory;
pub(crate) mod request;
pub mod resources;
pub(crate) mod rkey;
pub(crate) mod worker;
