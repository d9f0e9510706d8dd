//! The dissemination barrier (Hensgen, Finkel and Manber): in round k
//! each rank sends to rank + 2^k and receives from rank − 2^k, for
//! ⌈log2 N⌉ rounds. Its messages are internal ([`Space::Internal`]), so
//! they never match a user receive, whatever its wildcards.

use ovbench_proto::{Mode, Slice, Space};

use super::EngineComm;
use crate::TransportError;

/// Rounds of a dissemination barrier over `size` ranks.
pub(crate) fn rounds(size: u32) -> u32 {
    if size <= 1 {
        0
    } else {
        32 - (size - 1).leading_zeros()
    }
}

impl EngineComm {
    pub(crate) fn dissemination_barrier(&mut self) -> Result<(), TransportError> {
        if self.size <= 1 {
            return Ok(());
        }
        let scratch = super::shared::scratch(self.t.as_mut(), &mut self.scratch)?;
        let empty = Slice::new(scratch.region.0, 0, 0);
        let epoch = self.barrier_epoch;
        self.barrier_epoch = epoch.wrapping_add(1);
        for k in 0..rounds(self.size) {
            let d = 1u32 << k;
            let to = (self.rank + d) % self.size;
            let from = (self.rank + self.size - d % self.size) % self.size;
            let tag = (epoch << 6) | k;
            let r = self.post_recv(empty, empty, Some(from), Some(tag), Space::Internal)?;
            let s = self.post_send(empty, empty, to, tag, Mode::Standard, Space::Internal)?;
            self.wait_req(s)?;
            self.wait_req(r).map_err(|e| match e {
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
