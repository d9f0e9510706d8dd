//! Engine errors: every one names the peer (where there is one), the
//! operation and the size, and says what to do.

use crate::Rank;

/// Why the engine refused an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// A message from `peer` failed a check (header, sequence, state).
    BadMessage {
        /// The rank the message came from.
        peer: Rank,
        /// Which check failed, in words.
        detail: String,
    },
    /// A key or range from `peer` did not check out.
    BadKey {
        /// The rank the key came from.
        peer: Rank,
        /// Which check failed, in words.
        detail: String,
    },
    /// A message from `peer` does not fit the matching receive.
    Truncated {
        /// The sender.
        peer: Rank,
        /// The message's tag.
        tag: u32,
        /// The message's length in bytes.
        len: u64,
        /// The matching receive's size in bytes (less than `len`).
        capacity: usize,
    },
    /// A ready-mode message from `peer` arrived with no receive posted.
    NotReady {
        /// The sender.
        peer: Rank,
        /// The message's tag.
        tag: u32,
        /// The message's length in bytes.
        len: u64,
    },
    /// The caller asked for something this configuration cannot do.
    Invalid(String),
}

impl std::fmt::Display for ProtoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtoError::BadMessage { peer, detail } => {
                write!(f, "invalid message from rank {peer}: {detail}")
            }
            ProtoError::BadKey { peer, detail } => {
                write!(f, "rank {peer} sent an invalid remote key or range: {detail}")
            }
            ProtoError::Truncated {
                peer,
                tag,
                len,
                capacity,
            } => write!(
                f,
                "rank {peer} sent {len} bytes with tag {tag} but the matching receive holds only {capacity}: post a larger receive"
            ),
            ProtoError::NotReady { peer, tag, len } => write!(
                f,
                "ready-mode message of {len} bytes with tag {tag} from rank {peer} arrived before its receive was posted: the program must post the receive before the partner's rsend"
            ),
            ProtoError::Invalid(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ProtoError {}

impl ProtoError {
    pub(crate) fn bad(peer: Rank, detail: impl Into<String>) -> ProtoError {
        ProtoError::BadMessage {
            peer,
            detail: detail.into(),
        }
    }
    pub(crate) fn key(peer: Rank, detail: impl Into<String>) -> ProtoError {
        ProtoError::BadKey {
            peer,
            detail: detail.into(),
        }
    }
    /// The peer the error is about, if any.
    pub fn peer(&self) -> Option<Rank> {
        match self {
            ProtoError::BadMessage { peer, .. }
            | ProtoError::BadKey { peer, .. }
            | ProtoError::Truncated { peer, .. }
            | ProtoError::NotReady { peer, .. } => Some(*peer),
            ProtoError::Invalid(_) => None,
        }
    }
}
