//! The dissemination barrier (Hensgen, Finkel and Manber): in round k
//! each rank sends to rank + 2^k and receives from rank − 2^k, for
//! ⌈log2 N⌉ rounds. On the engine path its messages are internal
//! ([`Space::Internal`]), so they never match a user receive, whatever
//! its wildcards; on the native path they use tags from
//! [`NATIVE_BARRIER_TAG`] up.

use ovbench_proto::{Mode, Slice, Space};

use super::engine::EngineState;
use super::native::{NativeState, NATIVE_BARRIER_TAG};
use super::shared::Shared;
use crate::{LocalSlice, Rank, Result, TagRecv, TagSend, TransportError};

/// Rounds of a dissemination barrier over `size` ranks.
pub(crate) fn rounds(size: u32) -> u32 {
    if size <= 1 {
        0
    } else {
        32 - (size - 1).leading_zeros()
    }
}

/// Each round of `rank`'s barrier among `size` ranks, as
/// `(round, to, from)`.
fn schedule(rank: Rank, size: u32) -> impl Iterator<Item = (u32, Rank, Rank)> {
    (0..rounds(size)).map(move |k| {
        let d = 1u32 << k;
        (k, (rank + d) % size, (rank + size - d % size) % size)
    })
}

impl EngineState {
    pub(crate) fn barrier(&mut self, s: &mut Shared) -> Result<()> {
        if s.size <= 1 {
            return Ok(());
        }
        let empty = Slice::new(s.scratch()?.region.0, 0, 0);
        let epoch = s.barrier_epoch;
        s.barrier_epoch = epoch.wrapping_add(1);
        for (k, to, from) in schedule(s.rank, s.size) {
            let tag = (epoch << 6) | k;
            let r = self.post_recv(s, empty, empty, Some(from), Some(tag), Space::Internal)?;
            let w = self.post_send(s, empty, empty, to, tag, Mode::Standard, Space::Internal)?;
            self.wait_req(s, w)?;
            self.wait_req(s, r).map_err(|e| match e {
                TransportError::Timeout { peer, what, secs } => TransportError::Timeout {
                    peer,
                    what: format!("barrier round {k} (waiting for rank {from}): {what}"),
                    secs,
                },
                e => e,
            })?;
        }
        Ok(())
    }
}

impl NativeState {
    /// The barrier; its traffic is not user data, so it records no XFER
    /// events.
    pub(crate) fn barrier(&mut self, s: &mut Shared) -> Result<()> {
        if self.lib {
            return super::native::tagged(s)?
                .library()
                .map_or(Ok(()), |l| l.barrier());
        }
        let instr = s.instr.take();
        let r = self.barrier_rounds(s);
        s.instr = instr;
        r
    }

    fn barrier_rounds(&mut self, s: &mut Shared) -> Result<()> {
        if s.size <= 1 {
            return Ok(());
        }
        let empty = LocalSlice::new(s.scratch()?.region, 0, 0);
        let epoch = s.barrier_epoch;
        s.barrier_epoch = epoch.wrapping_add(1);
        for (k, to, from) in schedule(s.rank, s.size) {
            let tag = NATIVE_BARRIER_TAG | ((epoch & 0x3FF) << 6) | k;
            let r = self.trecv(s, TagRecv::new(Some(from), Some(tag), empty), 0)?;
            let w = self.tsend(s, TagSend::new(to, tag, empty, false), 0)?;
            self.wait_id(s, w)?;
            self.wait_id(s, r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rounds_are_ceil_log2() {
        let r: Vec<u32> = [1, 2, 3, 4, 5, 8, 9, 1024]
            .iter()
            .map(|&n| super::rounds(n))
            .collect();
        assert_eq!(r, [0, 1, 2, 2, 3, 3, 4, 10]);
    }
}
