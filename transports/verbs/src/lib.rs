//! ovbench over InfiniBand/RoCE verbs.
//!
//! The safe layer over `ovbench-verbs-sys` follows rust-ibverbs: one file
//! per resource ([`DeviceList`], [`Context`], [`ProtectionDomain`],
//! [`MemoryRegion`], [`CompChannel`], [`CompletionQueue`], [`QueuePair`]),
//! each holding an `Arc` to its parent so that, say, a memory region cannot
//! outlive its protection domain; `Drop` frees; posting work is an
//! `unsafe fn` with its rules in `# Safety`. Unsafe code lives only in
//! those files (plus `owned`, the one owner type, [`memory`] and
//! [`timestamp`]).
//!
//! [`VerbsTransport`] implements the ovbench [`ovbench_core::Transport`]
//! contract on top: one RC queue pair per peer, connected from the address
//! bytes of the bootstrap exchange (LID, GID, QPN, PSN, MTU, window);
//! two-sided messages go into pre-posted receive buffers under
//! credit-based flow control ([`credits`]), so a receiver-not-ready retry
//! can never be needed (`rnr_retry` is 0); RDMA write and read use the
//! device's `max_rd_atomic`, and an RC write's completion means the data
//! is placed at the target. Error completions become
//! [`ovbench_core::Completion::Error`] naming the peer, the operation and
//! `ibv_wc_status_str`. Where the NIC stamps completions, the stamps are
//! converted to the host clock ([`timestamp::NicClock`]).

mod channel;
mod cm;
mod connect;
mod context;
mod cq;
pub mod credits;
mod device;
mod error;
pub mod gid;
pub mod inventory;
pub mod memory;
mod mr;
mod options;
mod owned;
mod pd;
mod peer;
mod progress;
mod qp;
mod setup;
pub mod timestamp;
mod transport;
pub mod wire;

pub use channel::CompChannel;
pub use context::{Context, DeviceAttr, PortAttr};
pub use cq::{CompletionQueue, CqConfig, WorkCompletion};
pub use device::DeviceList;
pub use error::VerbsError;
pub use mr::MemoryRegion;
pub use options::{eager_buf_for, mtu_bytes, mtu_code, VerbsOptions};
pub use pd::{Access, ProtectionDomain};
pub use qp::{QpCap, QueuePair, RtrAttr, RtsAttr, SendOp, Sge};
pub use transport::VerbsTransport;
