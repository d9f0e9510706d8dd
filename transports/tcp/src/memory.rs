//! Transport-owned memory and its registrations.
//!
//! Regions are plain heap blocks (TCP needs no pinning), aligned to a page
//! by over-allocating so callers get what the contract promises without
//! `unsafe`. A registration is a range of a region plus a random check
//! word that travels in the key blob: a forged or stale key names no live
//! registration or carries the wrong word, and is refused before any
//! memory is touched.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use ovbench_core::{LocalSlice, MrHandle, OpKind, RegionId, TransportError};

use crate::wire::Refusal;

const PAGE: usize = 4096;

/// One allocated block: `buf[start..start+len]` is the page-aligned region.
struct Block {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

/// A live registration.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    pub region: RegionId,
    pub offset: usize,
    pub len: usize,
    pub check: u64,
}

/// Regions and registrations of one transport.
#[derive(Default)]
pub struct Memory {
    blocks: HashMap<u32, Block>,
    regs: HashMap<u32, Registration>,
    next_region: u32,
    next_reg: u32,
}

fn random_word(salt: u64) -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(salt);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

impl Memory {
    pub fn alloc(&mut self, len: usize) -> Result<RegionId, TransportError> {
        let total = len.checked_add(PAGE).ok_or_else(|| {
            TransportError::Invalid(format!("allocation of {len} bytes is too large"))
        })?;
        let mut buf = Vec::new();
        buf.try_reserve_exact(total)
            .map_err(|e| TransportError::Local {
                op: OpKind::Register,
                detail: format!("cannot allocate {len} bytes ({e}): reduce --sizes or free memory"),
            })?;
        buf.resize(total, 0);
        let misalign = buf.as_ptr() as usize % PAGE;
        let start = if misalign == 0 { 0 } else { PAGE - misalign };
        let id = self.next_region;
        self.next_region = self.next_region.wrapping_add(1);
        self.blocks.insert(id, Block { buf, start, len });
        Ok(RegionId(id))
    }

    pub fn free(&mut self, region: RegionId) -> Result<(), TransportError> {
        if self.regs.values().any(|r| r.region == region) {
            return Err(TransportError::Invalid(format!(
                "region {} still has live registrations: deregister them before freeing",
                region.0
            )));
        }
        self.blocks
            .remove(&region.0)
            .map(|_| ())
            .ok_or_else(|| TransportError::Invalid(format!("free of unknown region {}", region.0)))
    }

    /// The whole region, or `None` if it does not exist.
    pub fn region(&self, region: RegionId) -> Option<&[u8]> {
        self.blocks
            .get(&region.0)
            .map(|b| &b.buf[b.start..b.start + b.len])
    }

    pub fn region_mut(&mut self, region: RegionId) -> Option<&mut [u8]> {
        self.blocks
            .get_mut(&region.0)
            .map(|b| &mut b.buf[b.start..b.start + b.len])
    }

    fn check_slice(&self, s: LocalSlice) -> Result<(), TransportError> {
        let len = self
            .blocks
            .get(&s.region.0)
            .map(|b| b.len)
            .ok_or_else(|| TransportError::Invalid(format!("unknown region {}", s.region.0)))?;
        match s.offset.checked_add(s.len) {
            Some(end) if end <= len => Ok(()),
            _ => Err(TransportError::Invalid(format!(
                "range {}+{} is outside region {} of {len} bytes",
                s.offset, s.len, s.region.0
            ))),
        }
    }

    pub fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        self.check_slice(s)?;
        let r = self.region(s.region).expect("checked above");
        Ok(&r[s.offset..s.offset + s.len])
    }

    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        self.check_slice(s)?;
        let r = self.region_mut(s.region).expect("checked above");
        Ok(&mut r[s.offset..s.offset + s.len])
    }

    pub fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError> {
        self.check_slice(s)?;
        let id = self.next_reg;
        self.next_reg = self.next_reg.wrapping_add(1);
        let check = random_word(u64::from(id) << 32 | u64::from(s.region.0));
        self.regs.insert(
            id,
            Registration {
                region: s.region,
                offset: s.offset,
                len: s.len,
                check,
            },
        );
        Ok(MrHandle(id))
    }

    pub fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.regs.remove(&mr.0).map(|_| ()).ok_or_else(|| {
            TransportError::Invalid(format!("deregister of unknown registration {}", mr.0))
        })
    }

    pub fn registration(&self, mr: MrHandle) -> Option<Registration> {
        self.regs.get(&mr.0).copied()
    }

    /// Check that `local` lies inside registration `mr` (the initiator's side).
    pub fn check_local(&self, mr: MrHandle, local: LocalSlice) -> Result<(), String> {
        let r = self
            .registration(mr)
            .ok_or_else(|| format!("local registration {} does not exist", mr.0))?;
        let inside = local.region == r.region
            && local.offset >= r.offset
            && local
                .offset
                .checked_add(local.len)
                .is_some_and(|e| e <= r.offset + r.len);
        if inside {
            Ok(())
        } else {
            Err(format!(
                "local buffer {}+{} of region {} is outside registration {} ({}+{} of region {})",
                local.offset, local.len, local.region.0, mr.0, r.offset, r.len, r.region.0
            ))
        }
    }

    /// Resolve a request from the wire to a local slice, or say why not.
    pub fn resolve(
        &self,
        reg: u32,
        check: u64,
        offset: u64,
        len: u64,
    ) -> Result<LocalSlice, Refusal> {
        let r = self.regs.get(&reg).ok_or(Refusal::UnknownRegistration)?;
        if r.check != check {
            return Err(Refusal::BadCheckWord);
        }
        match offset.checked_add(len) {
            Some(end) if end <= r.len as u64 => Ok(LocalSlice::new(
                r.region,
                r.offset + offset as usize,
                len as usize,
            )),
            _ => Err(Refusal::OutOfRange),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_zeroed_and_aligned() {
        let mut m = Memory::default();
        let r = m.alloc(10_000).unwrap();
        let s = m.region(r).unwrap();
        assert_eq!(s.len(), 10_000);
        assert_eq!(s.as_ptr() as usize % PAGE, 0);
        assert!(s.iter().all(|&b| b == 0));
    }

    #[test]
    fn resolve_checks_everything() {
        let mut m = Memory::default();
        let r = m.alloc(100).unwrap();
        let mr = m.register(LocalSlice::new(r, 10, 50)).unwrap();
        let reg = m.registration(mr).unwrap();
        assert_eq!(
            m.resolve(mr.0, reg.check, 0, 50),
            Ok(LocalSlice::new(r, 10, 50))
        );
        assert_eq!(
            m.resolve(mr.0, reg.check ^ 1, 0, 1),
            Err(Refusal::BadCheckWord)
        );
        assert_eq!(m.resolve(mr.0, reg.check, 1, 50), Err(Refusal::OutOfRange));
        assert_eq!(
            m.resolve(mr.0, reg.check, u64::MAX, 2),
            Err(Refusal::OutOfRange)
        );
        assert_eq!(
            m.resolve(mr.0 + 1, reg.check, 0, 1),
            Err(Refusal::UnknownRegistration)
        );
        assert!(m.free(r).is_err(), "free with a live registration");
        m.deregister(mr).unwrap();
        assert_eq!(
            m.resolve(mr.0, reg.check, 0, 1),
            Err(Refusal::UnknownRegistration)
        );
        m.free(r).unwrap();
        assert!(m.slice(LocalSlice::new(r, 0, 1)).is_err());
    }
}
