//! Per-peer sequence numbers, O(1) per lookup and small at any job size:
//! a two-level table whose pages of [`PAGE`] peers are made the first
//! time a peer of theirs is sent to or heard from. A rank of a 65,536-rank
//! job that talks to a few peers holds a 256-entry page directory (2 KiB)
//! and a page or two (2 KiB each), not two arrays of 65,536 counters.

use crate::Rank;

/// Peers per page.
pub(crate) const PAGE: usize = 256;

/// The counters of one (this rank, peer) pair.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seqs {
    /// Number of the next message to that peer.
    pub send: u32,
    /// Number of the next message expected from it.
    pub recv: u32,
}

/// Every peer's [`Seqs`].
#[derive(Debug)]
pub(crate) struct Peers {
    pages: Vec<Option<Box<[Seqs; PAGE]>>>,
}

impl Peers {
    /// No message sent or received yet, for a job of `size` ranks.
    pub fn new(size: u32) -> Peers {
        Peers {
            pages: (0..(size as usize).div_ceil(PAGE)).map(|_| None).collect(),
        }
    }

    /// The counters of `peer`, which the caller checked is in the job;
    /// its page is made on first use.
    #[inline(always)]
    pub fn of(&mut self, peer: Rank) -> &mut Seqs {
        let (page, at) = (peer as usize / PAGE, peer as usize % PAGE);
        let p = match &mut self.pages[page] {
            Some(p) => p,
            none => fresh(none),
        };
        &mut p[at]
    }

    /// The number of the next message to `peer`, counted as sent.
    #[inline]
    pub fn next_send(&mut self, peer: Rank) -> u32 {
        let s = self.of(peer);
        let seq = s.send;
        s.send = seq.wrapping_add(1);
        seq
    }

    /// Bytes these tables hold (the tests hold it against the job's size).
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        let pages = self.pages.iter().filter(|p| p.is_some()).count();
        self.pages.len() * std::mem::size_of::<Option<Box<[Seqs; PAGE]>>>()
            + pages * std::mem::size_of::<[Seqs; PAGE]>()
    }
}

/// A page made for `slot` (out of line: the first message to or from a
/// page's peers only).
#[cold]
#[inline(never)]
fn fresh(slot: &mut Option<Box<[Seqs; PAGE]>>) -> &mut [Seqs; PAGE] {
    slot.insert(Box::new([Seqs::default(); PAGE]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_per_peer_and_pages_come_on_first_use() {
        let mut p = Peers::new(65_536);
        assert_eq!(p.bytes(), 256 * 8, "the directory only");
        assert_eq!(p.next_send(70_00), 0);
        assert_eq!(p.next_send(70_00), 1);
        assert_eq!(p.next_send(65_535), 0);
        p.of(3).recv = 9;
        assert_eq!(p.of(3).recv, 9);
        assert_eq!(p.of(70_00).send, 2);
        assert_eq!(p.bytes(), 256 * 8 + 3 * PAGE * 8);
        assert_eq!(Peers::new(1).bytes(), 8);
    }
}
