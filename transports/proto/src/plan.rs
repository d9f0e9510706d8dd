//! The message plan: which protocol a message of each size runs, decided
//! once from the protocol and the limits and owned by the engine. Every
//! layer that needs to know how a message moves (the communicator's
//! xfer_time, the overlap method's eager/rendezvous split, the header)
//! reads this plan instead of deciding again.

use crate::{Mode, Protocol, RawOp, Space};

/// Which protocol one message runs: what the plan decides per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Bounce-buffer packets: one, or a train above one packet.
    Eager,
    /// RTS, CTS with the receiver's key, write, FIN.
    RdmaWrite,
    /// RTS with the sender's key, read, FIN.
    RdmaRead,
    /// The first fragment eagerly, then PUT, write and FIN per fragment.
    Pipelined,
    /// One bare operation.
    Raw(RawOp),
}

/// How the engine moves messages: the protocol, the size up to which
/// auto sends eagerly, the pipelined fragment size, whether auto reads
/// or writes above its limit, and the largest payload of one packet.
///
/// Built from the command line with [`Plan::new`] and its `with_*`
/// settings; the engine fits it to its transport's packets
/// ([`Plan::fitted`]) when it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    protocol: Protocol,
    eager_limit: usize,
    frag_size: usize,
    prefer_read: bool,
    max_payload: usize,
}

/// Auto's eager limit when none is given.
pub const DEFAULT_EAGER_LIMIT: usize = 16 * 1024;
/// Pipelined's fragment size when none is given.
pub const DEFAULT_FRAG_SIZE: usize = 128 * 1024;

impl Default for Plan {
    fn default() -> Plan {
        Plan::new(Protocol::Auto)
    }
}

impl Plan {
    /// `protocol` with the default limits (16 KiB eager limit, 128 KiB
    /// fragments, rdma-write above the limit), not yet fitted to packets.
    pub const fn new(protocol: Protocol) -> Plan {
        Plan {
            protocol,
            eager_limit: DEFAULT_EAGER_LIMIT,
            frag_size: DEFAULT_FRAG_SIZE,
            prefer_read: false,
            max_payload: usize::MAX,
        }
    }

    /// Auto sends messages of up to and including `bytes` eagerly.
    pub const fn with_eager_limit(self, bytes: usize) -> Plan {
        Plan {
            eager_limit: bytes,
            ..self
        }
    }

    /// Pipelined moves `bytes` per fragment after the first.
    pub const fn with_frag_size(self, bytes: usize) -> Plan {
        Plan {
            frag_size: bytes,
            ..self
        }
    }

    /// Auto uses rdma-read above its limit (RMA native and offloaded).
    pub const fn with_prefer_read(self, read: bool) -> Plan {
        Plan {
            prefer_read: read,
            ..self
        }
    }

    /// The same plan under another protocol.
    pub const fn with_protocol(self, protocol: Protocol) -> Plan {
        Plan { protocol, ..self }
    }

    /// The plan for packets of at most `max_payload` payload bytes.
    pub const fn fitted(self, max_payload: usize) -> Plan {
        Plan {
            max_payload,
            ..self
        }
    }

    /// The protocol user messages run.
    pub const fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Auto's eager limit: eager up to and including this size.
    pub const fn eager_limit(&self) -> usize {
        self.eager_limit
    }

    /// Pipelined's bytes per fragment after the first.
    pub const fn frag_size(&self) -> usize {
        self.frag_size
    }

    /// Whether auto reads (rather than writes) above its limit.
    pub const fn prefer_read(&self) -> bool {
        self.prefer_read
    }

    /// Largest payload of one packet (`usize::MAX` before [`Self::fitted`]).
    pub const fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// The route of a message of `len` bytes sent in `mode` from
    /// `space`: the one place the engine's protocol is decided from the
    /// size. Internal traffic, empty messages and buffered sends go
    /// eager (nothing to move by RDMA, or the mode promises a copy);
    /// raw runs its bare operation for every user message.
    #[inline]
    pub fn route(&self, len: usize, mode: Mode, space: Space) -> Route {
        if space == Space::Internal {
            return Route::Eager;
        }
        if let Protocol::Raw(op) = self.protocol {
            return Route::Raw(op);
        }
        if len == 0 || mode == Mode::Buffered {
            return Route::Eager;
        }
        match self.protocol {
            Protocol::Eager => Route::Eager,
            Protocol::RdmaWrite => Route::RdmaWrite,
            Protocol::RdmaRead => Route::RdmaRead,
            Protocol::Pipelined => Route::Pipelined,
            Protocol::Auto if len <= self.eager_limit => Route::Eager,
            Protocol::Auto if self.prefer_read => Route::RdmaRead,
            Protocol::Auto => Route::RdmaWrite,
            Protocol::Raw(op) => Route::Raw(op),
        }
    }

    /// The route of a user's standard send of `len` bytes.
    #[inline]
    pub fn route_of(&self, len: usize) -> Route {
        self.route(len, Mode::Standard, Space::User)
    }

    /// Whether a user's message of `len` bytes moves in packets only
    /// (eager, or a raw send), not by a rendezvous.
    pub fn is_eager(&self, len: usize) -> bool {
        matches!(self.route_of(len), Route::Eager | Route::Raw(RawOp::Send))
    }

    /// One past the largest standard user message that leaves as one
    /// eager packet: the fast path's bound (0: no size does).
    pub fn one_packet_bound(&self) -> usize {
        if self.protocol == Protocol::Auto || self.protocol == Protocol::Eager {
            let most = match self.protocol {
                Protocol::Auto => self.eager_limit.min(self.max_payload),
                _ => self.max_payload,
            };
            // Empty messages are one packet under every protocol, but
            // the bound is a size range starting at 0.
            most.saturating_add(1)
        } else {
            0
        }
    }

    /// The bare operations a user message of `len` bytes moves its data
    /// with, as (operation, bytes, count), in the order the engine posts
    /// them: the operations whose post→completion time is xfer_time for
    /// the overlap bounds. One packet per bounce buffer for eager, one
    /// write or read for the rendezvous protocols (a packet when empty),
    /// the first packet and then one write per fragment for pipelined.
    pub fn data_ops(&self, len: usize) -> Vec<(RawOp, usize, usize)> {
        let max = self.max_payload.max(1);
        let packets = |len: usize| {
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
        match self.route_of(len) {
            Route::Raw(op) => vec![(op, len, 1)],
            Route::Eager => packets(len),
            Route::RdmaWrite => rendezvous(RawOp::Write),
            Route::RdmaRead => rendezvous(RawOp::Read),
            Route::Pipelined => {
                let first = max.min(len);
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
mod tests {
    use super::*;

    fn plan(p: Protocol) -> Plan {
        Plan::new(p).with_frag_size(300).fitted(1000)
    }

    #[test]
    fn routes_follow_the_protocol_and_the_limit() {
        let a = plan(Protocol::Auto).with_eager_limit(2048);
        assert_eq!(a.route_of(2048), Route::Eager);
        assert_eq!(a.route_of(2049), Route::RdmaWrite);
        assert_eq!(a.with_prefer_read(true).route_of(2049), Route::RdmaRead);
        assert_eq!(a.route(1 << 20, Mode::Buffered, Space::User), Route::Eager);
        assert_eq!(
            a.route(1 << 20, Mode::Standard, Space::Internal),
            Route::Eager
        );
        assert_eq!(plan(Protocol::RdmaRead).route_of(0), Route::Eager);
        let raw = plan(Protocol::Raw(RawOp::Write));
        assert_eq!(raw.route_of(0), Route::Raw(RawOp::Write));
        assert_eq!(raw.route(8, Mode::Standard, Space::Internal), Route::Eager);
    }

    #[test]
    fn the_one_packet_bound_is_the_smaller_of_limit_and_packet() {
        assert_eq!(plan(Protocol::Eager).one_packet_bound(), 1001);
        let a = plan(Protocol::Auto);
        assert_eq!(a.with_eager_limit(100).one_packet_bound(), 101);
        assert_eq!(a.with_eager_limit(5000).one_packet_bound(), 1001);
        assert_eq!(plan(Protocol::RdmaWrite).one_packet_bound(), 0);
        assert_eq!(plan(Protocol::Raw(RawOp::Send)).one_packet_bound(), 0);
        assert_eq!(Plan::new(Protocol::Eager).one_packet_bound(), usize::MAX);
    }

    #[test]
    fn data_ops_follow_the_routes() {
        let e = plan(Protocol::Eager);
        assert_eq!(e.data_ops(10), vec![(RawOp::Send, 10, 1)]);
        assert_eq!(
            e.data_ops(2500),
            vec![(RawOp::Send, 1000, 2), (RawOp::Send, 500, 1)]
        );
        assert_eq!(e.data_ops(0), vec![(RawOp::Send, 0, 1)]);
        assert_eq!(
            plan(Protocol::Pipelined).data_ops(1700),
            vec![
                (RawOp::Send, 1000, 1),
                (RawOp::Write, 300, 2),
                (RawOp::Write, 100, 1)
            ]
        );
        let a = plan(Protocol::Auto);
        assert_eq!(
            a.with_prefer_read(true).data_ops(20000),
            vec![(RawOp::Read, 20000, 1)]
        );
        assert_eq!(a.data_ops(20000), vec![(RawOp::Write, 20000, 1)]);
        assert!(a.is_eager(16384) && !a.is_eager(16385));
    }
}
