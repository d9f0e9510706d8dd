//! What a communicator is configured with (from the command line).

use std::time::Duration;

pub use ovbench_proto::{Protocol, RawOp};

use crate::{Caps, RmaKind, RmaProgress};

/// Settings of a [`super::Comm`], on either path.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The engine's protocol (`--proto`; `native` is [`super::Comm::native`]).
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

/// What decides how the engine moves one message: its protocol and
/// limits, as the communicator was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineShape {
    /// A library's native path: its messages move by the library's own
    /// protocol; `protocol` is the engine's over the same transport.
    pub native: bool,
    /// The engine's protocol for this communicator's messages (on a
    /// native path, the one its transport's engine would run).
    pub protocol: Protocol,
    /// Bytes up to which auto sends eagerly (`--eager-limit`).
    pub eager_limit: usize,
    /// Largest payload of one packet (one bounce buffer less its header).
    pub max_payload: usize,
    /// Pipelined: bytes per fragment after the first (`--frag-size`).
    pub frag_size: usize,
    /// Auto: rdma-read rather than rdma-write above the eager limit (see
    /// [`prefers_read`]).
    pub prefer_read: bool,
}

impl EngineShape {
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
    /// with, as (operation, bytes, count), in the order the engine posts
    /// them — the operations whose post→completion time is xfer_time for
    /// the overlap bounds: one packet per bounce buffer for eager, one
    /// write or read for the rendezvous protocols, the first packet then
    /// one write per fragment for pipelined.
    pub fn data_ops(&self, len: usize) -> Vec<(RawOp, usize, usize)> {
        let packets = |len: usize| {
            let max = self.max_payload.max(1);
            let mut v = Vec::new();
            if len >= max {
                v.push((RawOp::Send, max, len / max));
            }
            if len % max != 0 || len == 0 {
                v.push((RawOp::Send, len % max, 1));
            }
            v
        };
        let rendezvous = |op| {
            if len == 0 {
                packets(0)
            } else {
                vec![(op, len, 1)]
            }
        };
        if self.native {
            // The library's eager path up to its eager limit (a raw send,
            // as one bounce buffer allows), a one-sided write above.
            return if len <= self.eager_limit.min(self.max_payload) {
                vec![(RawOp::Send, len, 1)]
            } else {
                vec![(RawOp::Write, len, 1)]
            };
        }
        match self.protocol {
            Protocol::Raw(op) => vec![(op, len, 1)],
            Protocol::Eager => packets(len),
            Protocol::RdmaWrite => rendezvous(RawOp::Write),
            Protocol::RdmaRead => rendezvous(RawOp::Read),
            Protocol::Auto if len <= self.eager_limit => packets(len),
            Protocol::Auto if self.prefer_read => rendezvous(RawOp::Read),
            Protocol::Auto => rendezvous(RawOp::Write),
            Protocol::Pipelined => {
                let first = self.max_payload.min(len);
                let mut v = vec![(RawOp::Send, first, 1)];
                let (rest, frag) = (len - first, self.frag_size.max(1));
                if rest >= frag {
                    v.push((RawOp::Write, frag, rest / frag));
                }
                if rest % frag != 0 {
                    v.push((RawOp::Write, rest % frag, 1));
                }
                v
            }
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
    fn data_ops_follow_the_engine_split() {
        let s = EngineShape {
            native: false,
            protocol: Protocol::Eager,
            eager_limit: 16384,
            max_payload: 1000,
            frag_size: 300,
            prefer_read: true,
        };
        assert_eq!(s.data_ops(10), vec![(RawOp::Send, 10, 1)]);
        assert_eq!(
            s.data_ops(2500),
            vec![(RawOp::Send, 1000, 2), (RawOp::Send, 500, 1)]
        );
        assert_eq!(s.data_ops(0), vec![(RawOp::Send, 0, 1)]);
        let p = EngineShape {
            protocol: Protocol::Pipelined,
            ..s
        };
        assert_eq!(
            p.data_ops(1700),
            vec![
                (RawOp::Send, 1000, 1),
                (RawOp::Write, 300, 2),
                (RawOp::Write, 100, 1)
            ]
        );
        let a = EngineShape {
            protocol: Protocol::Auto,
            ..s
        };
        assert_eq!(a.data_ops(20000), vec![(RawOp::Read, 20000, 1)]);
        assert_eq!(
            EngineShape {
                prefer_read: false,
                ..a
            }
            .data_ops(20000),
            vec![(RawOp::Write, 20000, 1)]
        );
        let n = EngineShape {
            native: true,
            eager_limit: 16384,
            ..s
        };
        assert_eq!(n.data_ops(8), vec![(RawOp::Send, 8, 1)]);
        assert_eq!(n.data_ops(20000), vec![(RawOp::Write, 20000, 1)]);
    }
}
