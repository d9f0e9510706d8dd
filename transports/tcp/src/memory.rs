//! Transport-owned memory and its registrations, on the core region kit.
//!
//! Regions are page-aligned plain heap blocks ([`PageBlock`]: TCP needs
//! no pinning). A registration is a range of a region plus a random check
//! word that travels in the key blob: a forged or stale key names no live
//! registration or carries the wrong word, and is refused before any
//! memory is touched ([`Regions::resolve`]).

use ovbench_core::fabric::check_word::{check_blob, CheckWord, CheckWords, KeyRefusal};
use ovbench_core::fabric::page_block::PageBlock;
use ovbench_core::fabric::regions::Regions;
use ovbench_core::{LocalSlice, MrHandle, RemoteKey, TransportError};

use crate::wire::Refusal;

/// A live registration, as the transport reads it to build its key.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    pub len: usize,
    pub check: u64,
}

/// Regions and registrations of one transport.
pub struct Memory {
    /// The regions (the transport allocates and frees through it).
    pub table: Regions<PageBlock, CheckWord>,
    words: CheckWords,
}

impl Default for Memory {
    fn default() -> Self {
        Memory {
            table: Regions::default(),
            // Random per endpoint: a key from an earlier run never matches.
            words: CheckWords::random(),
        }
    }
}

impl From<KeyRefusal> for Refusal {
    fn from(r: KeyRefusal) -> Refusal {
        match r {
            KeyRefusal::UnknownRegistration => Refusal::UnknownRegistration,
            KeyRefusal::BadCheckWord => Refusal::BadCheckWord,
            KeyRefusal::OutOfRange { .. } => Refusal::OutOfRange,
        }
    }
}

impl Memory {
    pub fn slice(&self, s: LocalSlice) -> Result<&[u8], TransportError> {
        self.table.slice(s)
    }

    pub fn slice_mut(&mut self, s: LocalSlice) -> Result<&mut [u8], TransportError> {
        self.table.slice_mut(s)
    }

    pub fn register(&mut self, s: LocalSlice) -> Result<MrHandle, TransportError> {
        self.table
            .register_checked(s, &mut self.words, |h, check| RemoteKey {
                addr: 0,
                len: s.len as u64,
                blob: check_blob(h, check),
            })
    }

    pub fn deregister(&mut self, mr: MrHandle) -> Result<(), TransportError> {
        self.table.take_mr(mr).map(drop)
    }

    pub fn registration(&self, mr: MrHandle) -> Option<Registration> {
        self.table.mr(mr).ok().map(|m| Registration {
            len: m.slice.len,
            check: m.handle.0,
        })
    }

    /// Check that `local` lies inside registration `mr` (the initiator's
    /// side); the reason alone, for the caller to prefix.
    pub fn check_local(&self, mr: MrHandle, local: LocalSlice) -> Result<(), String> {
        match self.table.covering(mr, local) {
            Ok(_) => Ok(()),
            Err(TransportError::Invalid(why)) => Err(why),
            Err(e) => Err(e.to_string()),
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
        Ok(self
            .table
            .resolve(MrHandle(reg), CheckWord(check), offset, len)?)
    }
}

#[cfg(test)]
mod tests {
    use ovbench_core::fabric::regions::PAGE;

    use super::*;

    #[test]
    fn alloc_is_zeroed_and_aligned() {
        let mut m = Memory::default();
        let r = m.table.alloc(10_000).unwrap();
        let s = m.slice(LocalSlice::new(r, 0, 10_000)).unwrap();
        assert_eq!(s.as_ptr() as usize % PAGE, 0);
        assert!(s.iter().all(|&b| b == 0));
        assert!(m.slice(LocalSlice::new(r, 1, 10_000)).is_err());
    }

    /// The kit checks keys (its own tests); here: a local slice outside
    /// its registration is named, each refusal reaches the wire as its
    /// status, and freeing waits for deregistration.
    #[test]
    fn registrations_are_checked_both_sides() {
        let mut m = Memory::default();
        let r = m.table.alloc(100).unwrap();
        let mr = m.register(LocalSlice::new(r, 10, 50)).unwrap();
        assert!(m.check_local(mr, LocalSlice::new(r, 30, 30)).is_ok());
        let e = m.check_local(mr, LocalSlice::new(r, 30, 31)).unwrap_err();
        assert!(e.contains("not inside registration"), "{e}");
        assert!(m
            .check_local(MrHandle(9), LocalSlice::new(r, 10, 1))
            .is_err());
        let check = m.registration(mr).unwrap().check;
        let ok = m.resolve(mr.0, check, 0, 50);
        assert_eq!(ok, Ok(LocalSlice::new(r, 10, 50)));
        let cases = [
            (mr.0, check ^ 1, 0, Refusal::BadCheckWord),
            (mr.0, check, 1, Refusal::OutOfRange),
            (mr.0 + 1, check, 0, Refusal::UnknownRegistration),
        ];
        for (reg, word, offset, why) in cases {
            assert_eq!(m.resolve(reg, word, offset, 50), Err(why));
        }
        assert!(m.table.free(r).is_err(), "free with a live registration");
        m.deregister(mr).unwrap();
        assert_eq!(
            m.resolve(mr.0, check, 0, 1),
            Err(Refusal::UnknownRegistration)
        );
        m.table.free(r).unwrap();
        assert!(m.slice(LocalSlice::new(r, 0, 1)).is_err());
    }
}
