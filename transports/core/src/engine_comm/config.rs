//! What a communicator is configured with (from the command line).

use std::time::Duration;

pub use ovbench_proto::{Protocol, RawOp};

use crate::{Caps, RmaKind, RmaProgress};

/// Settings of [`super::EngineComm`] and [`super::NativeComm`].
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The engine's protocol (`--proto`; `native` is [`super::NativeComm`]).
    pub protocol: Protocol,
    /// `--eager-limit` (auto): eager up to and including this size.
    pub eager_limit: usize,
    /// `--frag-size` (pipelined); `None`: [`DEFAULT_FRAG_SIZE`].
    pub frag_size: Option<usize>,
    /// `--reg-cache on|off`.
    pub reg_cache: bool,
    /// `--timeout`: the deadline of every wait.
    pub timeout: Duration,
    /// More ranks (plus progress threads) than cores: spin briefly, then
    /// block on the transport (or yield) so every rank progresses.
    pub oversubscribed: bool,
}

/// Pipelined fragment size when `--frag-size` is not given.
pub const DEFAULT_FRAG_SIZE: usize = 128 * 1024;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            protocol: Protocol::Auto,
            eager_limit: 16 * 1024,
            frag_size: None,
            reg_cache: true,
            timeout: Duration::from_secs(60),
            oversubscribed: false,
        }
    }
}

/// The name users type for a protocol (`--proto`), for headers and JSON.
pub fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Eager => "eager",
        Protocol::RdmaWrite => "rdma-write",
        Protocol::RdmaRead => "rdma-read",
        Protocol::Pipelined => "pipelined",
        Protocol::Auto => "auto",
        Protocol::Raw(RawOp::Send) => "raw-send",
        Protocol::Raw(RawOp::Write) => "raw-write",
        Protocol::Raw(RawOp::Read) => "raw-read",
    }
}

/// Whether auto picks rdma-read: RMA native and offloaded (DESIGN.md).
pub fn prefers_read(caps: &Caps) -> bool {
    caps.rma == RmaKind::Native && caps.rma_progress == RmaProgress::Offloaded
}
