//! What a rank announces at connect: the protocol engine's wire version,
//! then its transport's address. Ranks of different builds may speak
//! different wire formats (a new kind of packet, a changed header); the
//! engine checks every packet's version, but only once messages flow.
//! Checking the version beside the addresses refuses such a job at
//! start-up, with one line naming the rank, before any message is sent.

use crate::{Rank, TransportError};

/// Marks an announcement, so that a build from before the version was
/// announced (its bare address) is told apart from a mismatched version.
const MAGIC: &[u8; 3] = b"OVW";

/// The wire version this build's engine speaks.
pub const WIRE_VERSION: u8 = ovbench_proto::wire::VERSION;

/// The bytes to exchange for `address`: the engine's wire version first.
pub fn announce(address: &[u8]) -> Vec<u8> {
    announce_as(WIRE_VERSION, address)
}

/// [`announce`] speaking `version` (tests play a rank of another build).
pub fn announce_as(version: u8, address: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 1 + address.len());
    out.extend_from_slice(MAGIC);
    out.push(version);
    out.extend_from_slice(address);
    out
}

/// Every rank's transport address from what each announced, in rank
/// order; refused, naming the first rank that differs, unless every rank
/// speaks this build's wire version.
pub fn addresses(announced: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, TransportError> {
    announced
        .iter()
        .enumerate()
        .map(|(rank, a)| address_of(rank as Rank, a))
        .collect()
}

fn address_of(rank: Rank, a: &[u8]) -> Result<Vec<u8>, TransportError> {
    let head = MAGIC.len() + 1;
    if a.len() < head || &a[..MAGIC.len()] != MAGIC {
        return Err(TransportError::Invalid(format!(
            "rank {rank} announced no protocol wire version at connect: it runs an ovbench build older than this one, whose engine speaks version {WIRE_VERSION}; run the same ovbench build on every rank"
        )));
    }
    let version = a[MAGIC.len()];
    if version != WIRE_VERSION {
        return Err(TransportError::Invalid(format!(
            "rank {rank} speaks protocol wire version {version}, this build speaks {WIRE_VERSION}: run the same ovbench build on every rank"
        )));
    }
    Ok(a[head..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_come_back_once_every_rank_speaks_this_version() {
        let all = vec![announce(b"127.0.0.1:1"), announce(b"")];
        assert_eq!(
            addresses(&all).unwrap(),
            vec![b"127.0.0.1:1".to_vec(), vec![]]
        );
    }

    #[test]
    fn another_version_or_none_is_refused_naming_the_rank() {
        let other = WIRE_VERSION.wrapping_add(1);
        let all = vec![announce(b"a"), announce_as(other, b"b")];
        let e = addresses(&all).unwrap_err().to_string();
        assert!(
            e.contains("rank 1 speaks protocol wire version")
                && e.contains(&format!("this build speaks {WIRE_VERSION}"))
                && e.contains("same ovbench build"),
            "{e}"
        );
        let e = addresses(&[b"127.0.0.1:9".to_vec()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rank 0 announced no protocol wire version"),
            "{e}"
        );
        assert!(addresses(&[b"OV".to_vec()]).is_err());
    }
}
