//! One rank's memory: plain byte vectors as regions, and registrations
//! whose remote keys are checked on every one-sided access exactly as a
//! real NIC would (owner, live registration, check word, range) — nothing
//! that arrives in a key is trusted.

use ovbench_core::{LocalSlice, MrHandle, Rank, RegionId, RemoteKey, TransportError};

/// Key blob: owner rank (4), registration index (4), check word (8).
const BLOB_LEN: usize = 16;

#[derive(Debug)]
struct Mr {
    slice: LocalSlice,
    /// Changes with every registration so a stale key never matches a
    /// reused index.
    check: u64,
}

/// Regions and registrations of one rank.
#[derive(Debug)]
pub(crate) struct Memory {
    rank: Rank,
    regions: Vec<Option<Vec<u8>>>,
    mrs: Vec<Option<Mr>>,
    next_check: u64,
}

impl Memory {
    pub(crate) fn new(rank: Rank) -> Memory {
        Memory {
            rank,
            regions: Vec::new(),
            mrs: Vec::new(),
            next_check: 0x5157_0000_0000_0001 ^ (u64::from(rank) << 32),
        }
    }

    pub(crate) fn alloc(&mut self, len: usize) -> RegionId {
        self.regions.push(Some(vec![0; len]));
        RegionId((self.regions.len() - 1) as u32)
    }

    pub(crate) fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        if self.mrs.iter().flatten().any(|m| m.slice.region == region) {
            return Err(invalid(format!(
                "region {} is still registered; deregister it first",
                region.0
            )));
        }
        let slot = self
            .regions
            .get_mut(region.0 as usize)
            .filter(|r| r.is_some())
            .ok_or_else(|| invalid(format!("region {} does not exist", region.0)))?;
        *slot = None;
        Ok(())
    }

    /// The bytes of a local slice, bounds-checked.
    pub(crate) fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        let r = self.region(s.region)?;
        let end = check_end(s, r.len())?;
        Ok(&r[s.offset..end])
    }

    pub(crate) fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        let r = self
            .regions
            .get_mut(s.region.0 as usize)
            .and_then(|r| r.as_mut())
            .ok_or_else(|| invalid(format!("region {} does not exist", s.region.0)))?;
        let end = check_end(s, r.len())?;
        Ok(&mut r[s.offset..end])
    }

    fn region(&self, id: RegionId) -> Result<&Vec<u8>, TransportError> {
        self.regions
            .get(id.0 as usize)
            .and_then(|r| r.as_ref())
            .ok_or_else(|| invalid(format!("region {} does not exist", id.0)))
    }

    pub(crate) fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError> {
        self.slice(s)?;
        self.next_check = self
            .next_check
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1);
        self.mrs.push(Some(Mr {
            slice: s,
            check: self.next_check,
        }));
        Ok(MrHandle((self.mrs.len() - 1) as u32))
    }

    pub(crate) fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        let slot = self
            .mrs
            .get_mut(mr.0 as usize)
            .filter(|m| m.is_some())
            .ok_or_else(|| invalid(format!("registration {} is not live", mr.0)))?;
        *slot = None;
        Ok(())
    }

    pub(crate) fn remote_key(&self, mr: MrHandle) -> RemoteKey {
        match self.mrs.get(mr.0 as usize).and_then(|m| m.as_ref()) {
            Some(m) => {
                let mut blob = Vec::with_capacity(BLOB_LEN);
                blob.extend_from_slice(&self.rank.to_le_bytes());
                blob.extend_from_slice(&mr.0.to_le_bytes());
                blob.extend_from_slice(&m.check.to_le_bytes());
                RemoteKey {
                    addr: m.slice.offset as u64,
                    len: m.slice.len as u64,
                    blob,
                }
            }
            // A dead handle yields a key no target accepts.
            None => RemoteKey::default(),
        }
    }

    /// Check that `local` lies inside the live registration `mr`.
    pub(crate) fn check_local(
        &self,
        mr: MrHandle,
        local: LocalSlice,
    ) -> Result<(), TransportError> {
        let m = self
            .mrs
            .get(mr.0 as usize)
            .and_then(|m| m.as_ref())
            .ok_or_else(|| invalid(format!("local registration {} is not live", mr.0)))?;
        let inside = local.region == m.slice.region
            && local.offset >= m.slice.offset
            && local.offset + local.len <= m.slice.offset + m.slice.len;
        if inside {
            Ok(())
        } else {
            Err(invalid(format!(
                "local buffer {}+{} of region {} is outside registration {}",
                local.offset, local.len, local.region.0, mr.0
            )))
        }
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
        let owner = u32::from_le_bytes(key.blob[0..4].try_into().expect("4 bytes"));
        let idx = u32::from_le_bytes(key.blob[4..8].try_into().expect("4 bytes"));
        let check = u64::from_le_bytes(key.blob[8..16].try_into().expect("8 bytes"));
        if owner != self.rank {
            return Err(format!(
                "key belongs to rank {owner}, not rank {}",
                self.rank
            ));
        }
        let m = self
            .mrs
            .get(idx as usize)
            .and_then(|m| m.as_ref())
            .filter(|m| m.check == check)
            .ok_or_else(|| format!("registration {idx} is not live"))?;
        let within = offset
            .checked_add(n)
            .is_some_and(|end| end <= m.slice.len as u64);
        if !within || key.len != m.slice.len as u64 {
            return Err(format!(
                "range {offset}+{n} is outside the registered {} bytes",
                m.slice.len
            ));
        }
        Ok(m.slice.sub(offset as usize, n as usize))
    }
}

fn check_end(s: LocalSlice, have: usize) -> Result<usize, TransportError> {
    s.offset
        .checked_add(s.len)
        .filter(|&e| e <= have)
        .ok_or_else(|| {
            invalid(format!(
                "slice {}+{} is outside region {} of {have} bytes",
                s.offset, s.len, s.region.0
            ))
        })
}

fn invalid(s: String) -> TransportError {
    TransportError::Invalid(s)
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
        let other = Memory::new(3);
        assert!(other.resolve(&k, 0, 1).unwrap_err().contains("rank 2"));
        assert!(m.free(r).is_err(), "registered region must not be freed");
        m.deregister(mr).unwrap();
        assert!(m.resolve(&k, 0, 1).unwrap_err().contains("not live"));
        assert!(m.deregister(mr).is_err());
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
