//! [`IdMap`]: the engine's tables of requests and transport contexts,
//! keyed by ids from one counter that only grows.

use std::ops::Index;

use crate::hash::HashMap;

/// Most direct slots a table grows to; beyond, colliding ids spill.
const MAX_SLOTS: usize = 1 << 12;
/// Slots of a table's first allocation. Few: ids rotate through every
/// slot, and with a request or two live at once (a blocking receive, a
/// send) a small table keeps touching the same few cache lines — at a
/// thousand simulated ranks, 16 slots of requests were 4 KiB per rank
/// that fell out of the caches between turns.
const MIN_SLOTS: usize = 2;

/// A map from ids to values, for ids handed out in increasing order and
/// mostly retired soon after: each id has one direct slot (`id` modulo a
/// power of two), so a lookup is an index and a compare instead of a hash
/// probe. An id whose slot is held by an older, longer-lived id goes to a
/// small hash map, `spill`, which lookups consult only on a miss. The
/// table doubles when half full (up to 4096 slots), so it stays about
/// twice the number of ids live at once.
#[derive(Debug)]
pub struct IdMap<V> {
    slots: Vec<Option<(u64, V)>>,
    /// Ids held in `slots`.
    direct: usize,
    spill: HashMap<u64, V>,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            slots: Vec::new(),
            direct: 0,
            spill: HashMap::default(),
        }
    }
}

impl<V> IdMap<V> {
    #[inline]
    fn slot(&self, id: u64) -> usize {
        (id as usize) & (self.slots.len().wrapping_sub(1))
    }

    /// Number of ids held.
    #[inline]
    pub fn len(&self) -> usize {
        self.direct + self.spill.len()
    }

    /// Whether no id is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `id`, if held.
    #[inline]
    pub fn get(&self, id: &u64) -> Option<&V> {
        if !self.slots.is_empty() {
            if let Some((k, v)) = &self.slots[self.slot(*id)] {
                if k == id {
                    return Some(v);
                }
            }
        }
        if self.spill.is_empty() {
            return None;
        }
        self.spill.get(id)
    }

    /// The value of `id` to modify, if held.
    #[inline]
    pub fn get_mut(&mut self, id: &u64) -> Option<&mut V> {
        if !self.slots.is_empty() {
            let s = self.slot(*id);
            if matches!(&self.slots[s], Some((k, _)) if k == id) {
                return self.slots[s].as_mut().map(|(_, v)| v);
            }
        }
        if self.spill.is_empty() {
            return None;
        }
        self.spill.get_mut(id)
    }

    /// Insert or replace; returns the value `id` had.
    #[inline]
    pub fn insert(&mut self, id: u64, v: V) -> Option<V> {
        if !self.spill.is_empty() && self.spill.contains_key(&id) {
            return self.spill.insert(id, v);
        }
        if self.slots.is_empty() {
            self.slots.resize_with(MIN_SLOTS, || None);
        }
        let mut s = self.slot(id);
        if let Some((k, _)) = &self.slots[s] {
            if *k == id {
                return self.slots[s].replace((id, v)).map(|(_, old)| old);
            }
            if self.direct * 2 >= self.slots.len() && self.slots.len() < MAX_SLOTS {
                self.grow();
                s = self.slot(id);
            }
        }
        if self.slots[s].is_some() {
            return self.spill.insert(id, v);
        }
        self.slots[s] = Some((id, v));
        self.direct += 1;
        None
    }

    /// Take `id` out of the table, returning its value if it was held.
    #[inline]
    pub fn remove(&mut self, id: &u64) -> Option<V> {
        if !self.slots.is_empty() {
            let s = self.slot(*id);
            if matches!(&self.slots[s], Some((k, _)) if k == id) {
                self.direct -= 1;
                return self.slots[s].take().map(|(_, v)| v);
            }
        }
        if self.spill.is_empty() {
            return None;
        }
        self.spill.remove(id)
    }

    /// Drop the entry for `id`, if any, where it lies ([`remove`](Self::remove)
    /// without moving a large value out first); true if there was one.
    #[inline]
    pub fn discard(&mut self, id: &u64) -> bool {
        if !self.slots.is_empty() {
            let s = self.slot(*id);
            if matches!(&self.slots[s], Some((k, _)) if k == id) {
                self.direct -= 1;
                self.slots[s] = None;
                return true;
            }
        }
        !self.spill.is_empty() && self.spill.remove(id).is_some()
    }

    /// Every value, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots
            .iter()
            .flatten()
            .map(|(_, v)| v)
            .chain(self.spill.values())
    }

    /// Double the slots. Ids in distinct slots stay in distinct slots
    /// (one more bit of each id picks among twice as many).
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let old = std::mem::take(&mut self.slots);
        self.slots.resize_with(n, || None);
        for (k, v) in old.into_iter().flatten() {
            let s = self.slot(k);
            self.slots[s] = Some((k, v));
        }
    }
}

impl<V> Index<&u64> for IdMap<V> {
    type Output = V;
    fn index(&self, id: &u64) -> &V {
        self.get(id).expect("no entry for this id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a HashMap: long-lived ids among many short-lived ones
    /// (spills, growth, replacement, removal of absent ids).
    #[test]
    fn matches_a_hash_map() {
        let mut m: IdMap<u64> = IdMap::default();
        let mut h: std::collections::HashMap<u64, u64> = Default::default();
        let mut x = 7u64;
        for id in 1..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            assert_eq!(m.insert(id, id * 3), h.insert(id, id * 3));
            if x % 5 == 0 {
                assert_eq!(m.insert(id, id * 5), h.insert(id, id * 5));
            }
            // Retire an older id: mostly recent ones, sometimes very old.
            let back = if x % 97 == 0 {
                (x >> 8) % id
            } else {
                (x >> 8) % 8
            };
            let old = id.saturating_sub(back);
            if x % 3 != 0 {
                assert_eq!(m.remove(&old), h.remove(&old));
            }
            if let Some(v) = m.get_mut(&(id / 2)) {
                *v += 1;
                *h.get_mut(&(id / 2)).expect("present in both") += 1;
            }
            assert_eq!(m.get(&old), h.get(&old));
            assert_eq!(m.get(&(id + 1)), None);
            assert_eq!(m.len(), h.len());
        }
        for (k, v) in &h {
            assert_eq!(m[k], *v);
        }
    }
}
