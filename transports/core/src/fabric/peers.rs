//! What every fabric checks about the ranks it is asked to reach: the
//! addresses `connect` gets, and a peer with no endpoint.

use crate::{OpKind, Rank, TransportError};

/// What every fabric's `connect` checks first: it was not called before
/// (`connected`), and it got one address per rank of the job.
pub fn check_connect(
    addresses: &[Vec<u8>],
    size: u32,
    connected: bool,
) -> Result<(), TransportError> {
    if connected {
        return Err(TransportError::Invalid("connect called twice".into()));
    }
    if addresses.len() != size as usize {
        return Err(TransportError::Invalid(format!(
            "connect got {} addresses for a job of {size} ranks",
            addresses.len()
        )));
    }
    Ok(())
}

/// The error for `op` to `peer`, which has no endpoint: a rank outside a
/// job of `size` ranks, or one not connected yet.
#[cold]
pub fn no_endpoint(peer: Rank, size: u32, op: OpKind) -> TransportError {
    if peer >= size {
        return TransportError::Invalid(format!(
            "{op} to rank {peer}, but the job has {size} ranks"
        ));
    }
    TransportError::Peer {
        peer,
        op,
        status: "not connected: call connect() with every rank's address first".into(),
    }
}
