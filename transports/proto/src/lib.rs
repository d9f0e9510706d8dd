//! The ovbench protocol engine: eager and rendezvous protocols as pure
//! state machines, with no I/O and no clock reads (layer 2, between the
//! transport contract and the communicator of `ovbench-core`).
//!
//! In the style of quinn-proto, the caller feeds the [`Engine`] what
//! happened — a user call ([`Engine::isend`], [`Engine::irecv`]), an
//! arrived message ([`Engine::on_message`]), a finished operation
//! ([`Engine::on_completion`]), a finished registration
//! ([`Engine::on_registered`]) — always with the current time `now` in
//! the caller's clock ticks, and pulls back the operations to perform
//! ([`Engine::poll_op`]) and the instrumentation events
//! ([`Engine::poll_event`]). After every input, drain [`Engine::poll_op`]
//! until it returns `None`, performing each operation in order; an
//! operation's result (a registration, a completion) is fed back the same
//! way, and may queue further operations.
//!
//! Nothing that arrives is trusted: every header field and key is checked
//! and a violation is a [`ProtoError`] naming the peer, never a panic, and
//! the engine never asks for a write outside a slice the user handed it.
//!
//! # Protocols
//!
//! * **eager** — the payload travels in the message; above one bounce
//!   buffer (`eager_buf_size − HEADER_LEN`) as a train of packets.
//! * **rdma-write** — RTS → the receiver registers its buffer and answers
//!   CTS with the key → the sender writes → FIN.
//! * **rdma-read** — RTS carries the sender's key → the receiver reads →
//!   FIN back to the sender.
//! * **pipelined** — the first fragment travels eagerly with the request;
//!   the receiver acknowledges, then per `frag_size` fragment registers it
//!   and sends PUT with its key; the sender registers its fragment, writes
//!   it and sends FIN. Registrations are never cached here (the default
//!   Open MPI scheme studied by Shet, Sadayappan, Bernholdt, Nieplocha and
//!   Tipparaju, "A Framework for Characterizing Overlap of Communication
//!   and Computation in Parallel Applications").
//! * **auto** — eager up to the plan's eager limit, above it rdma-read
//!   where RMA is native and offloaded ([`Plan::prefer_read`]), else
//!   rdma-write.
//!
//! Which protocol a message runs is decided in one place, the engine's
//! [`Plan`]; every layer above reads it from there. A one-packet eager
//! message of the user's takes a fast path while nothing is recorded:
//! a 16-byte header ([`wire::short`]) checked by one compare on arrival,
//! and no request state on either side.
//! * **raw** — one bare data operation per message, see [`RawOp`].
//!
//! Zero-length messages, internal ([`Space::Internal`]) messages and
//! [`Mode::Buffered`] sends always go eager: there is nothing to move by
//! RDMA, or the mode promises the data is copied out at once.

#![deny(missing_docs)]

mod engine;
mod error;
mod flight;
mod hash;
mod idmap;
mod matching;
mod outbox;
mod peers;
mod plan;
mod requests;
mod state;
mod types;
pub mod wire;

pub use engine::{Engine, MIN_EAGER_BUF, QUIET_CTX};
pub use error::ProtoError;
pub use idmap::IdMap;
pub use plan::{Plan, Route, DEFAULT_EAGER_LIMIT, DEFAULT_FRAG_SIZE};
pub use types::{
    Config, Counts, Direct, Event, EventKind, HeaderBytes, Key, Mode, MrId, OneSided, Op,
    Placement, Protocol, Rank, RawOp, ReqId, Slice, Space, Status, Tag, Watch,
};
pub use wire::short::SHORT_LEN;
pub use wire::HEADER_LEN;
