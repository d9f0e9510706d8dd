//! The ovbench transport contract and the communicator built on it.
//!
//! Layer 1 of the stack: a [`Transport`] is a connected set of endpoints,
//! one per peer rank, with registered memory, two-sided sends into
//! transport-owned pre-posted buffers, one-sided write/read against a
//! peer's [`RemoteKey`], and non-blocking completion polling. Every fabric
//! crate (tcp, verbs, ucx, ofi, mpi, sim) implements it, and every one runs
//! the generic conformance suite of the `ovbench-conformance` crate (a
//! dev-dependency only: no test harness is compiled into this crate).
//!
//! Layer 3 is the [`Communicator`]: the point-to-point API every method in
//! `src/` is written against, plus the clock and work loop, so that under
//! the sim transport both become virtual. [`Comm`] implements it over any
//! transport with the `ovbench-proto` engine's protocols ([`Comm::engine`])
//! or over a library's own tagged path ([`Comm::native`]); [`WorkLoop`] is the
//! calibrated computation and [`instrument`] the CALL/XFER event recorder
//! with the overlap-bounds processor.
//!
//! # How the contract maps onto the fabrics
//!
//! | contract item | verbs | UCX | libfabric |
//! |---|---|---|---|
//! | [`Transport::register`] → [`Registered`] `{ mr, key: RemoteKey }` | `ibv_reg_mr`; key = `rkey` (4 B) | `ucp_mem_map` + `ucp_rkey_pack` (tens–hundreds of B) | `fi_mr_reg` (requested key when `mr_mode` lacks `FI_MR_PROV_KEY`); key = `fi_mr_key` (8 B) |
//! | [`Transport::post_send`] | `ibv_post_send(IBV_WR_SEND)` into pre-posted `ibv_post_recv` buffers, credit-counted | `ucp_am_send_nbx` | `fi_send` into pre-posted `fi_recv` buffers |
//! | [`Transport::post_rma`] [`Rma::Write`] (completion = visible at target) | `ibv_post_send(IBV_WR_RDMA_WRITE)`; RC completion implies placement | `ucp_put_nbx` **then** `ucp_ep_flush_nbx` (put completion is only local) | `fi_write`; `tcp;ofi_rxm` completes early, so the target's CQ is progressed / `FI_DELIVERY_COMPLETE` requested |
//! | [`Transport::post_rma`] [`Rma::Read`] | `ibv_post_send(IBV_WR_RDMA_READ)` | `ucp_get_nbx` | `fi_read` |
//! | [`Transport::poll`] (with or without `arrivals`) | `ibv_poll_cq` | `ucp_worker_progress` + request callbacks | `fi_cq_read` (+ `fi_cq_readerr`) |
//! | `wait_fd` (inherent to each transport, not in the contract) | completion channel fd (`ibv_get_cq_event`) | `ucp_worker_get_efd` + `ucp_worker_arm` | `fi_control(FI_GETWAIT)` |
//! | [`Transport::tagged`] → [`Tagged::tsend`] / [`Tagged::trecv`] | — | `ucp_tag_send_nbx` / `ucp_tag_recv_nbx` / `ucp_tag_send_sync_nbx` | `fi_tsend` / `fi_trecv` |
//! | [`Posted::Done`] from [`Transport::post_send`] / [`Tagged::tsend`] (done inside the call: no completion queued) | never | `FORCE_IMM_CMPL` sends | `fi_inject` / `fi_tinject` |
//! | [`Tagged::trecv_wait`] (a blocking tagged receive waited for inside the transport) | — | `ucp_tag_recv_nbx` into a stack slot, then `ucp_worker_progress` until its callback ran | posted and polled ([`trecv_wait_polling`]) |
//! | [`Tagged::library`] → [`LibraryCalls`] (each blocking and completing call is the library's own) | — | — | — |
//! | [`Transport::address`] / [`Transport::connect`] | LID, GID, QPN, PSN → `ibv_modify_qp` RTR/RTS | `ucp_worker_get_address` → `ucp_ep_create` | `fi_getname` → `fi_av_insert` |

#![deny(missing_docs)]

pub mod announce;
mod bound;
mod caps;
pub mod clock;
pub mod clock_sync;
mod comm;
pub mod eager_limit;
pub mod engine_comm;
mod error;
pub mod fabric;
pub mod host_limits;
pub mod instrument;
mod key;
mod library;
mod link;
pub mod shown;
pub mod stop;
mod transport;
pub mod watch;
pub mod work;
pub mod work_loop;

pub use bound::{Bound, BoundPair};
pub use caps::{Caps, CompletionStamps, Progress, RmaKind, RmaProgress};
pub use clock::{Clock, ClockInfo};
pub use clock_sync::ClockSync;
pub use comm::{
    Buf, CommInfo, CommPath, Communicator, OpCounts, Req, SendMode, Source, Span, Status, TagSel,
    ANY_SOURCE, ANY_TAG,
};
pub use eager_limit::{EagerInputs, EagerLimit, EagerSource};
pub use engine_comm::{Comm, EngineConfig};
pub use error::{OpKind, Result, TransportError};
pub use instrument::{Instrumentation, OverlapReport, XferTable};
pub use key::{RemoteKey, RemoteKeyError, MAX_KEY_BLOB};
pub use library::LibraryCalls;
pub use link::Link;
pub use transport::{
    trecv_wait_polling, Arrivals, Completion, CompletionTime, Ctx, Idle, LocalSlice, MrHandle, Msg,
    Placement, Posted, Rank, RegionId, Registered, Rma, RmaOp, Tag, TagRecv, TagSend, Tagged,
    Transport, TransportInfo, Waited,
};
pub use work::Work;
pub use work_loop::WorkLoop;
