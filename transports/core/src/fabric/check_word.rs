//! Remote keys for fabrics with no library key of their own (TCP, the
//! simulator): a key names a registration by its handle and carries a
//! check word drawn for that registration. A target resolves every access
//! through [`Regions::resolve`] before touching memory: a forged key names
//! no live registration or carries the wrong word, and a stale one (its
//! slot reused since) carries the old registration's word.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use super::regions::{Mr, Regions};
use crate::{LocalSlice, MrHandle, RemoteKey, TransportError};

/// Bytes of a check-word key blob: registration handle (4), word (8).
pub const CHECK_BLOB_LEN: usize = 12;

/// The word a registration's keys must carry (a registration's `H`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckWord(pub u64);

/// Where check words come from: a splitmix64 sequence, so every
/// registration of one table gets a distinct word.
#[derive(Debug)]
pub struct CheckWords {
    state: u64,
}

impl CheckWords {
    /// A sequence no other process or run can predict (TCP: a key of an
    /// earlier run must not match).
    pub fn random() -> CheckWords {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        CheckWords::seeded(h.finish())
    }

    /// A sequence fixed by `seed` (the simulator: runs repeat exactly).
    pub fn seeded(seed: u64) -> CheckWords {
        CheckWords { state: seed }
    }

    /// The next word.
    pub fn next_word(&mut self) -> CheckWord {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        CheckWord(z ^ (z >> 31))
    }
}

/// The key blob naming registration `mr` guarded by `check`.
pub fn check_blob(mr: MrHandle, check: CheckWord) -> Vec<u8> {
    let mut v = Vec::with_capacity(CHECK_BLOB_LEN);
    v.extend_from_slice(&mr.0.to_le_bytes());
    v.extend_from_slice(&check.0.to_le_bytes());
    v
}

/// The registration and word of a key blob; `None` when its length is
/// not [`CHECK_BLOB_LEN`].
pub fn parse_check_blob(blob: &[u8]) -> Option<(MrHandle, CheckWord)> {
    let blob: &[u8; CHECK_BLOB_LEN] = blob.try_into().ok()?;
    let (reg, check) = blob.split_at(4);
    Some((
        MrHandle(u32::from_le_bytes(reg.try_into().ok()?)),
        CheckWord(u64::from_le_bytes(check.try_into().ok()?)),
    ))
}

/// Why a target refused an access through a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRefusal {
    /// No live registration has the key's handle (deregistered or forged).
    UnknownRegistration,
    /// The registration lives but its word differs (stale or forged key).
    BadCheckWord,
    /// The access reaches outside the registration's `registered` bytes.
    OutOfRange {
        /// Bytes the registration covers.
        registered: usize,
    },
}

impl<A> Regions<A, CheckWord> {
    /// Register `s` (checked to lie in its region) under a new word from
    /// `words`; `key` makes its remote key from the handle and word.
    pub fn register_checked(
        &mut self,
        s: LocalSlice,
        words: &mut CheckWords,
        key: impl FnOnce(MrHandle, CheckWord) -> RemoteKey,
    ) -> Result<MrHandle, TransportError> {
        self.holding(s)?;
        let check = words.next_word();
        Ok(self.add_mr_with(|h| Mr {
            handle: check,
            slice: s,
            key: key(h, check),
        }))
    }

    /// The local slice `n` bytes at `offset` of registration `mr` reach,
    /// when `check` is its word and the range lies inside it; nothing of
    /// the request is trusted.
    pub fn resolve(
        &self,
        mr: MrHandle,
        check: CheckWord,
        offset: u64,
        n: u64,
    ) -> Result<LocalSlice, KeyRefusal> {
        let m = self.mr(mr).map_err(|_| KeyRefusal::UnknownRegistration)?;
        if m.handle != check {
            return Err(KeyRefusal::BadCheckWord);
        }
        match offset.checked_add(n) {
            Some(end) if end <= m.slice.len as u64 => Ok(m.slice.sub(offset as usize, n as usize)),
            _ => Err(KeyRefusal::OutOfRange {
                registered: m.slice.len,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Table = Regions<(), CheckWord>;

    fn key(h: MrHandle, c: CheckWord) -> RemoteKey {
        RemoteKey {
            addr: 0,
            len: 0,
            blob: check_blob(h, c),
        }
    }

    #[test]
    fn words_differ_and_seeds_repeat() {
        let mut a = CheckWords::seeded(1);
        let w: Vec<_> = (0..100).map(|_| a.next_word()).collect();
        let mut b = CheckWords::seeded(1);
        assert!(w.iter().all(|&x| x == b.next_word()));
        let mut d = w.iter().map(|c| c.0).collect::<Vec<_>>();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), w.len());
        assert_ne!(CheckWords::random().next_word(), w[0]);
    }

    #[test]
    fn blobs_round_trip_and_refuse_other_lengths() {
        let b = check_blob(MrHandle(5), CheckWord(42));
        assert_eq!(b.len(), CHECK_BLOB_LEN);
        assert_eq!(parse_check_blob(&b), Some((MrHandle(5), CheckWord(42))));
        assert_eq!(parse_check_blob(&b[..11]), None);
        assert_eq!(parse_check_blob(&[0; 13]), None);
    }

    #[test]
    fn resolve_checks_handle_word_and_range() {
        let mut t = Table::default();
        let mut words = CheckWords::seeded(7);
        let r = t.add((), 100);
        assert!(t
            .register_checked(LocalSlice::new(r, 60, 41), &mut words, key)
            .is_err());
        let mr = t
            .register_checked(LocalSlice::new(r, 10, 50), &mut words, key)
            .unwrap();
        let (h, c) = parse_check_blob(&t.remote_key(mr).blob).unwrap();
        assert_eq!(h, mr);
        assert_eq!(t.resolve(h, c, 0, 50), Ok(LocalSlice::new(r, 10, 50)));
        assert_eq!(t.resolve(h, c, 40, 10), Ok(LocalSlice::new(r, 50, 10)));
        let out = Err(KeyRefusal::OutOfRange { registered: 50 });
        assert_eq!(t.resolve(h, c, 41, 10), out);
        assert_eq!(t.resolve(h, c, u64::MAX, 2), out);
        assert_eq!(
            t.resolve(h, CheckWord(c.0 ^ 1), 0, 1),
            Err(KeyRefusal::BadCheckWord)
        );
        assert_eq!(
            t.resolve(MrHandle(9), c, 0, 1),
            Err(KeyRefusal::UnknownRegistration)
        );
        // Deregistered, then the slot reused: the old key is stale.
        t.take_mr(mr).unwrap();
        assert_eq!(t.resolve(h, c, 0, 1), Err(KeyRefusal::UnknownRegistration));
        let again = t
            .register_checked(LocalSlice::new(r, 10, 50), &mut words, key)
            .unwrap();
        assert_eq!(again, mr);
        assert_eq!(t.resolve(h, c, 0, 1), Err(KeyRefusal::BadCheckWord));
    }
}
