//! One rank's memory, on the core region kit: plain byte vectors as
//! regions, and registrations whose remote keys are checked on every
//! one-sided access exactly as a real NIC would (owner, live registration,
//! check word, range) — nothing that arrives in a key is trusted.
//!
//! Regions stay `vec![0; n]` rather than page-aligned blocks: simulated
//! memory is never handed to hardware, and a zeroed vector leaves the
//! pages a rank never touches unmapped, which thousands of ranks need.

use ovbench_core::fabric::check_word::{
    check_blob, parse_check_blob, CheckWord, CheckWords, KeyRefusal, CHECK_BLOB_LEN,
};
use ovbench_core::fabric::regions::Regions;
use ovbench_core::{LocalSlice, MrHandle, Rank, RegionId, RemoteKey, TransportError};

/// Key blob: owner rank (4), then the kit's registration and word (12).
const BLOB_LEN: usize = 4 + CHECK_BLOB_LEN;

/// Regions and registrations of one rank.
#[derive(Debug)]
pub(crate) struct Memory {
    rank: Rank,
    table: Regions<Vec<u8>, CheckWord>,
    /// Seeded by the rank: a run repeats exactly, key bytes included.
    words: CheckWords,
}

impl Memory {
    pub(crate) fn new(rank: Rank) -> Memory {
        Memory {
            rank,
            table: Regions::default(),
            words: CheckWords::seeded(0x5157_0000_0000_0001 ^ (u64::from(rank) << 32)),
        }
    }

    pub(crate) fn alloc(&mut self, len: usize) -> RegionId {
        self.table.add(vec![0; len], len)
    }

    pub(crate) fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        self.table.free(region)
    }

    /// The bytes of a local slice, bounds-checked.
    pub(crate) fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        self.table.slice(s)
    }

    pub(crate) fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        self.table.slice_mut(s)
    }

    pub(crate) fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError> {
        let owner = self.rank.to_le_bytes();
        self.table
            .register_checked(s, &mut self.words, |h, check| RemoteKey {
                addr: s.offset as u64,
                len: s.len as u64,
                blob: [&owner[..], &check_blob(h, check)].concat(),
            })
    }

    pub(crate) fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.table.take_mr(mr).map(drop)
    }

    /// The key of `mr`; a dead handle yields a key no target accepts.
    pub(crate) fn remote_key(&self, mr: MrHandle) -> RemoteKey {
        self.table.remote_key(mr)
    }

    /// Check that `local` lies inside the live registration `mr`.
    pub(crate) fn check_local(
        &self,
        mr: MrHandle,
        local: LocalSlice,
    ) -> Result<(), TransportError> {
        self.table.covering(mr, local).map(drop)
    }

    /// Resolve an access of `n` bytes at `offset` through `key` to the
    /// local slice it targets; the error text names what failed.
    pub(crate) fn resolve(
        &self,
        key: &RemoteKey,
        offset: u64,
        n: u64,
    ) -> Result<LocalSlice, String> {
        if key.blob.len() != BLOB_LEN {
            return Err(format!(
                "key blob of {} bytes, expected {BLOB_LEN}",
                key.blob.len()
            ));
        }
        let (owner, rest) = key.blob.split_at(4);
        let owner = u32::from_le_bytes(owner.try_into().expect("4 bytes"));
        if owner != self.rank {
            return Err(format!(
                "key belongs to rank {owner}, not rank {}",
                self.rank
            ));
        }
        let (idx, check) = parse_check_blob(rest).expect("length checked above");
        let outside = |registered: usize| {
            format!("range {offset}+{n} is outside the registered {registered} bytes")
        };
        match self.table.resolve(idx, check, offset, n) {
            // The key's own length must match too: a garbled one is refused.
            Ok(s) => match self.table.mr(idx) {
                Ok(m) if key.len != m.slice.len as u64 => Err(outside(m.slice.len)),
                _ => Ok(s),
            },
            Err(KeyRefusal::UnknownRegistration | KeyRefusal::BadCheckWord) => {
                Err(format!("registration {} is not live", idx.0))
            }
            Err(KeyRefusal::OutOfRange { registered }) => Err(outside(registered)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        let mut m = Memory::new(2);
        let r = m.alloc(100);
        let mr = m.register(LocalSlice::new(r, 10, 50)).unwrap();
        let k = m.remote_key(mr);
        assert_eq!(m.resolve(&k, 0, 50).unwrap(), LocalSlice::new(r, 10, 50));
        assert_eq!(m.resolve(&k, 40, 10).unwrap(), LocalSlice::new(r, 50, 10));
        assert!(m.resolve(&k, 41, 10).unwrap_err().contains("outside"));
        assert!(m.resolve(&k, u64::MAX, 2).is_err());
        let mut forged = k.clone();
        forged.blob[8] ^= 1;
        assert!(m.resolve(&forged, 0, 1).unwrap_err().contains("not live"));
        let mut long = k.clone();
        long.len += 1;
        assert!(m.resolve(&long, 0, 1).unwrap_err().contains("outside"));
        let mut short = k.clone();
        short.blob.pop();
        assert!(m.resolve(&short, 0, 1).unwrap_err().contains("expected 16"));
        let other = Memory::new(3);
        assert!(other.resolve(&k, 0, 1).unwrap_err().contains("rank 2"));
        assert!(m.free(r).is_err(), "registered region must not be freed");
        m.deregister(mr).unwrap();
        assert!(m.resolve(&k, 0, 1).unwrap_err().contains("not live"));
        assert!(m.deregister(mr).is_err());
        assert_eq!(m.remote_key(mr), RemoteKey::default());
        m.free(r).unwrap();
        assert!(m.slice(LocalSlice::new(r, 0, 1)).is_err());
    }

    #[test]
    fn local_checks() {
        let mut m = Memory::new(0);
        let r = m.alloc(64);
        assert!(m.register(LocalSlice::new(r, 60, 8)).is_err());
        let mr = m.register(LocalSlice::new(r, 0, 32)).unwrap();
        assert!(m.check_local(mr, LocalSlice::new(r, 16, 16)).is_ok());
        assert!(m.check_local(mr, LocalSlice::new(r, 16, 17)).is_err());
        assert!(m.slice_mut(LocalSlice::new(r, 63, 2)).is_err());
        m.slice_mut(LocalSlice::new(r, 0, 2))
            .unwrap()
            .copy_from_slice(&[7, 8]);
        assert_eq!(m.slice(LocalSlice::new(r, 0, 2)).unwrap(), &[7, 8]);
    }
}
