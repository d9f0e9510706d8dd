//! Transport errors: always name the peer and the operation.

use crate::Rank;

/// The operation an error or completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Send,
    Recv,
    Write,
    Read,
    Register,
    Connect,
    TaggedSend,
    TaggedRecv,
    Poll,
}

impl std::fmt::Display for OpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            OpKind::Send => "send",
            OpKind::Recv => "receive",
            OpKind::Write => "RDMA write",
            OpKind::Read => "RDMA read",
            OpKind::Register => "memory registration",
            OpKind::Connect => "connect",
            OpKind::TaggedSend => "tagged send",
            OpKind::TaggedRecv => "tagged receive",
            OpKind::Poll => "poll",
        };
        f.write_str(s)
    }
}

/// Everything a transport can fail with. Messages tell the user what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The peer misbehaved or vanished (closed socket, QP in error, bad header).
    #[error("{op} with rank {peer} failed: {status}")]
    Peer {
        peer: Rank,
        op: OpKind,
        status: String,
    },
    /// A remote key or offset from the wire did not check out.
    #[error("rank {peer} sent an invalid remote key or range: {detail}")]
    BadKey { peer: Rank, detail: String },
    /// A local resource problem (registration, allocation, device).
    #[error("{op} failed: {detail}")]
    Local { op: OpKind, detail: String },
    /// The transport cannot do this (e.g. native tagged path missing).
    #[error("{0}")]
    Unsupported(String),
    /// An argument the caller passed is out of range.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A wait passed its deadline (`--timeout`); `what` names the
    /// operation, the peer and the size.
    #[error("timed out after {secs} s: {what}; a peer may have died or be stuck (raise --timeout if it is only slow)")]
    Timeout {
        peer: Option<Rank>,
        what: String,
        secs: f64,
    },
    /// A signal asked this rank to stop ([`crate::stop`]): the job is
    /// being torn down, and this rank unwinds so its transports close.
    #[error("stopped by {}", crate::stop::signal_name(*signal))]
    Stopped { signal: i32 },
    /// Operating system error with context.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl TransportError {
    /// Wrap an `io::Error` with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TransportError::Io {
            context: context.into(),
            source,
        }
    }
}
