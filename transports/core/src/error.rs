//! Transport errors: always name the peer and the operation.

use crate::Rank;

/// The operation an error or completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A two-sided send ([`crate::Transport::post_send`]).
    Send,
    /// A two-sided arrival, or the connection it came on.
    Recv,
    /// A one-sided RDMA write ([`crate::Transport::post_rma`]).
    Write,
    /// A one-sided RDMA read ([`crate::Transport::post_rma`]).
    Read,
    /// A memory registration or deregistration, or an allocation.
    Register,
    /// Opening the device or library, or connecting to a peer.
    Connect,
    /// A native tagged send ([`crate::Tagged::tsend`]).
    TaggedSend,
    /// A native tagged receive ([`crate::Tagged::trecv`]).
    TaggedRecv,
    /// Driving progress or waiting for it ([`crate::Transport::poll`],
    /// [`crate::Transport::idle`]).
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

/// A transport's or communicator's result: `TransportError` unless named.
pub type Result<T, E = TransportError> = std::result::Result<T, E>;

/// Everything a transport can fail with. Messages tell the user what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The peer misbehaved or vanished (closed socket, QP in error, bad header).
    #[error("{op} with rank {peer} failed: {status}")]
    Peer {
        /// The rank the operation was with.
        peer: Rank,
        /// What was being done.
        op: OpKind,
        /// The library's status or what was seen, in words.
        status: String,
    },
    /// A remote key or offset from the wire did not check out.
    #[error("rank {peer} sent an invalid remote key or range: {detail}")]
    BadKey {
        /// The rank the key or range came from.
        peer: Rank,
        /// Which check failed, in words.
        detail: String,
    },
    /// A local resource problem (registration, allocation, device).
    #[error("{op} failed: {detail}")]
    Local {
        /// What was being done.
        op: OpKind,
        /// What went wrong and what to do about it.
        detail: String,
    },
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
        /// The peer waited for, when there is one.
        peer: Option<Rank>,
        /// The operation, peer and size waited for, in words.
        what: String,
        /// The timeout that ran out (`--timeout`), in seconds.
        secs: f64,
    },
    /// A signal asked this rank to stop ([`crate::stop`]): the job is
    /// being torn down, and this rank unwinds so its transports close.
    #[error("stopped by {}", crate::stop::signal_name(*signal))]
    Stopped {
        /// The signal's number (`SIGINT`, `SIGTERM`, …).
        signal: i32,
    },
    /// Operating system error with context.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, in words.
        context: String,
        /// The operating system's error.
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
