//! What a communicator is configured with (from the command line).

use std::time::Duration;

pub use ovbench_proto::{Plan, Protocol, RawOp, Route, DEFAULT_EAGER_LIMIT, DEFAULT_FRAG_SIZE};

use crate::{Caps, RmaKind, RmaProgress};

/// Settings of a [`super::Comm`], on either path.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// How the engine moves messages: `--proto` (`native` is
    /// [`super::Comm::native`]), `--eager-limit`, `--frag-size`. The
    /// communicator fits it to its transport (packet size, whether auto
    /// reads) and every layer reads it from there.
    pub plan: Plan,
    /// `--reg-cache on|off`.
    pub reg_cache: bool,
    /// `--timeout`: the deadline of every wait.
    pub timeout: Duration,
    /// More ranks (plus progress threads) than cores: spin briefly, then
    /// block on the transport (or yield) so every rank progresses.
    pub oversubscribed: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            plan: Plan::default(),
            reg_cache: true,
            timeout: Duration::from_secs(60),
            oversubscribed: false,
        }
    }
}

impl EngineConfig {
    /// The defaults under `protocol`.
    pub fn with_protocol(protocol: Protocol) -> EngineConfig {
        EngineConfig {
            plan: Plan::new(protocol),
            ..EngineConfig::default()
        }
    }
}

/// Every `--proto` value, as users type it: the one list each message
/// that names the valid protocols is built from (the CLI's enum is
/// checked against it).
pub const PROTOCOLS: [&str; 7] = [
    "eager",
    "rdma-write",
    "rdma-read",
    "pipelined",
    "auto",
    "raw",
    "native",
];

/// [`PROTOCOLS`] without `leave_out`, as a list a sentence can end with
/// (`eager, rdma-write or auto`).
pub fn protocols_but(leave_out: &[&str]) -> String {
    let keep: Vec<&str> = PROTOCOLS
        .into_iter()
        .filter(|p| !leave_out.contains(p))
        .collect();
    match keep.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Why `--proto native` cannot run over the `transport` transport, and
/// what to use instead.
pub fn native_unavailable(transport: &str) -> String {
    format!(
        "--proto native needs a library's tagged protocol, which the {transport} transport lacks: use --transport ucx or ofi, or --proto {}",
        protocols_but(&["native"])
    )
}

/// Whether auto picks rdma-read above the eager limit: RMA native and
/// offloaded, so the receiver's read needs no CPU at the sender.
pub fn prefers_read(caps: &Caps) -> bool {
    caps.rma == RmaKind::Native && caps.rma_progress == RmaProgress::Offloaded
}

/// How a communicator moves one message: the engine's plan, and whether
/// its messages take a library's native path instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineShape {
    /// A library's native path: its messages move by the library's own
    /// protocol; `plan` is the engine's over the same transport.
    pub native: bool,
    /// The engine's plan, fitted to the transport.
    pub plan: Plan,
}

impl EngineShape {
    /// Whether messages of `len` bytes move in packets only (the eager
    /// path), not by a rendezvous: the engine's plan, or on a native path
    /// the library's eager limit as the plan assumes it (see
    /// [`Self::data_ops`]).
    pub fn is_eager(&self, len: usize) -> bool {
        self.data_ops(len).iter().all(|o| o.0 == RawOp::Send)
    }

    /// The data transfers of one message of `len` bytes as the overlap
    /// bounds count them, as (operation, bytes): an eager message is one
    /// transfer, a train of packets when it exceeds one (see the engine's
    /// eager path); the others are their operations.
    pub fn transfers(&self, len: usize) -> Vec<(RawOp, usize)> {
        let ops = self.data_ops(len);
        if !self.native && ops.iter().all(|o| o.0 == RawOp::Send) {
            return vec![(RawOp::Send, len)];
        }
        ops.into_iter().map(|(op, bytes, _)| (op, bytes)).collect()
    }

    /// The bare operations one message of `len` bytes moves its data
    /// with, as (operation, bytes, count), in the order they are posted:
    /// the engine's plan ([`Plan::data_ops`]); on a native path, what the
    /// library is taken to do — one send where the plan (auto, the
    /// native path's) sends eagerly in one packet, a one-sided write
    /// otherwise.
    pub fn data_ops(&self, len: usize) -> Vec<(RawOp, usize, usize)> {
        if !self.native {
            return self.plan.data_ops(len);
        }
        if self.plan.is_eager(len) && len <= self.plan.max_payload() {
            vec![(RawOp::Send, len, 1)]
        } else {
            vec![(RawOp::Write, len, 1)]
        }
    }
}

#[cfg(test)]
mod shape_tests {
    use super::*;

    #[test]
    fn protocol_lists_read_as_english() {
        assert_eq!(
            protocols_but(&["raw", "native", "auto", "pipelined"]),
            "eager, rdma-write or rdma-read"
        );
        assert_eq!(protocols_but(&PROTOCOLS[1..]), "eager");
        assert!(native_unavailable("tcp").ends_with("pipelined, auto or raw"));
    }

    #[test]
    fn a_native_shape_guesses_the_library_and_an_engine_one_reads_the_plan() {
        let plan = Plan::new(Protocol::Eager).fitted(1000);
        let e = EngineShape {
            native: false,
            plan,
        };
        assert_eq!(e.data_ops(2500), plan.data_ops(2500));
        assert_eq!(e.transfers(2500), vec![(RawOp::Send, 2500)]);
        let n = EngineShape { native: true, plan };
        assert_eq!(n.data_ops(8), vec![(RawOp::Send, 8, 1)]);
        assert_eq!(n.data_ops(20000), vec![(RawOp::Write, 20000, 1)]);
        assert!(n.is_eager(1000) && !n.is_eager(1001));
    }
}
