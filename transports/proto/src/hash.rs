//! Hashing for the engine's maps.

use std::collections::HashMap as StdMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style hashing for the engine's integer keys (ids, sequence
/// numbers): SipHash costs more than the rest of a small message's path.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl IdHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.add(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

pub(crate) type HashMap<K, V> = StdMap<K, V, BuildHasherDefault<IdHasher>>;
