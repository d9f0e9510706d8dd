//! Test hook (feature `fault-inject`, never in a release build): corrupt
//! one payload byte of one data frame this rank sends, so that tests can
//! show `ovbench --verify` catches a single bad message.
//!
//! `OVBENCH_TCP_CORRUPT=SIZE:N[@RANK]` flips (XOR 0xff) the byte at
//! offset `SIZE / 2` of the payload of the `N`-th (1-based) data frame of
//! exactly `SIZE` payload bytes that this process sends — only on rank
//! `RANK` when given. Data frames are two-sided messages with a payload
//! (the protocol's header is not counted or touched), emulated write data
//! and read responses: every protocol's bytes pass through one of them. A
//! message larger than one frame (an eager train, pipelined fragments)
//! is counted by its frames, each of its own payload size. Only the bytes
//! on the wire change, never the sender's memory.

use ovbench_core::{Rank, TransportError};

use crate::memory::Memory;
use crate::tx::TxData;

/// The environment variable that arms the hook.
pub const VAR: &str = "OVBENCH_TCP_CORRUPT";

/// An armed hook: which frame to corrupt, and how many matched so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    size: usize,
    nth: u64,
    seen: u64,
}

impl Fault {
    /// The hook `OVBENCH_TCP_CORRUPT` asks for on rank `me`, if any.
    pub fn from_env(me: Rank) -> Result<Option<Fault>, TransportError> {
        match std::env::var(VAR) {
            Ok(v) => Fault::parse(&v, me),
            Err(_) => Ok(None),
        }
    }

    /// Parse `SIZE:N[@RANK]`; `None` when the hook names another rank.
    pub fn parse(v: &str, me: Rank) -> Result<Option<Fault>, TransportError> {
        let bad = || {
            TransportError::Invalid(format!(
                "{VAR}={v}: expected SIZE:N[@RANK] (corrupt the N-th data frame of SIZE payload bytes, N from 1)"
            ))
        };
        let (spec, rank) = match v.split_once('@') {
            Some((s, r)) => (s, Some(r.trim().parse::<Rank>().map_err(|_| bad())?)),
            None => (v, None),
        };
        let (size, nth) = spec.split_once(':').ok_or_else(bad)?;
        let size: usize = size.trim().parse().map_err(|_| bad())?;
        let nth: u64 = nth.trim().parse().map_err(|_| bad())?;
        if size == 0 || nth == 0 {
            return Err(bad());
        }
        if rank.is_some_and(|r| r != me) {
            return Ok(None);
        }
        Ok(Some(Fault { size, nth, seen: 0 }))
    }

    /// Count a data frame of `len` payload bytes; true if it is the one.
    fn hit(&mut self, len: usize) -> bool {
        if len != self.size || self.seen >= self.nth {
            return false;
        }
        self.seen += 1;
        self.seen == self.nth
    }
}

/// `data` as it should go on the wire: unchanged, or — for the frame the
/// hook names — a copy whose payload byte at `len / 2` is flipped. The
/// payload is `data` after its first `skip` bytes (a message's protocol
/// header).
pub fn apply(fault: &mut Option<Fault>, mem: &Memory, data: TxData, skip: usize) -> TxData {
    let Some(f) = fault.as_mut() else {
        return data;
    };
    let len = match &data {
        TxData::None => return data,
        TxData::Owned(v) => v.len().saturating_sub(skip),
        TxData::Region(s) => s.len,
    };
    if len == 0 || !f.hit(len) {
        return data;
    }
    let (mut bytes, at) = match data {
        TxData::Owned(v) => (v, skip + len / 2),
        TxData::Region(s) => match mem.slice(s) {
            Ok(b) => (b.to_vec(), len / 2),
            // A region the send path cannot read either: leave it be.
            Err(_) => return TxData::Region(s),
        },
        TxData::None => unreachable!("returned above"),
    };
    bytes[at] ^= 0xff;
    TxData::Owned(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_size_count_and_rank() {
        let f = Fault::parse("4096:7", 1).unwrap().unwrap();
        assert_eq!((f.size, f.nth), (4096, 7));
        assert!(Fault::parse("4096:7@0", 1).unwrap().is_none());
        assert!(Fault::parse("4096:7@1", 1).unwrap().is_some());
        for bad in ["", "4096", "4096:0", "0:1", "x:1", "8:1@r"] {
            let e = Fault::parse(bad, 0).unwrap_err().to_string();
            assert!(e.contains("SIZE:N[@RANK]"), "{bad}: {e}");
        }
    }

    #[test]
    fn flips_one_byte_of_the_nth_matching_payload_only() {
        let mem = Memory::default();
        let mut f = Fault::parse("4:2", 0).unwrap();
        let msg = |p: &[u8]| {
            let mut v = vec![0xaa, 0xbb];
            v.extend_from_slice(p);
            TxData::Owned(v)
        };
        let owned = |d: TxData| match d {
            TxData::Owned(v) => v,
            _ => panic!("not owned"),
        };
        // Another size does not count.
        assert_eq!(
            owned(apply(&mut f, &mem, msg(&[1, 2, 3]), 2)),
            [0xaa, 0xbb, 1, 2, 3]
        );
        assert_eq!(
            owned(apply(&mut f, &mem, msg(&[1, 2, 3, 4]), 2)),
            [0xaa, 0xbb, 1, 2, 3, 4]
        );
        assert_eq!(
            owned(apply(&mut f, &mem, msg(&[1, 2, 3, 4]), 2)),
            [0xaa, 0xbb, 1, 2, 3 ^ 0xff, 4]
        );
        // Only once.
        assert_eq!(
            owned(apply(&mut f, &mem, msg(&[1, 2, 3, 4]), 2)),
            [0xaa, 0xbb, 1, 2, 3, 4]
        );
        let mut none = None;
        assert_eq!(
            owned(apply(&mut none, &mem, msg(&[1, 2, 3, 4]), 2)),
            [0xaa, 0xbb, 1, 2, 3, 4]
        );
    }
}
