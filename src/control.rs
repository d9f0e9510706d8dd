//! Out-of-band control between ranks: how per-rank facts and figures
//! (affinity, CPU use, operation counts, elapsed times) reach rank 0
//! without travelling through — and disturbing — the protocol being
//! measured. Real jobs use the launcher's bootstrap service; a job of
//! one rank needs nothing.

use anyhow::Result;
use serde::{de::DeserializeOwned, Serialize};

/// Collective side channel of a job.
pub trait Control {
    fn rank(&self) -> u32;
    fn size(&self) -> u32;
    /// Every rank's bytes at rank 0 (in rank order); `None` elsewhere.
    fn gather(&mut self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>>;
}

/// The control channel of a single-rank job.
#[derive(Debug, Default)]
pub struct Solo;

impl Control for Solo {
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn gather(&mut self, mine: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        Ok(Some(vec![mine.to_vec()]))
    }
}

/// Gather a serialisable value from every rank to rank 0.
pub fn gather_values<T: Serialize + DeserializeOwned>(
    ctl: &mut dyn Control,
    mine: &T,
) -> Result<Option<Vec<T>>> {
    let bytes = serde_json::to_vec(mine)?;
    match ctl.gather(&bytes)? {
        None => Ok(None),
        Some(all) => all
            .iter()
            .enumerate()
            .map(|(r, b)| {
                serde_json::from_slice(b).map_err(|e| {
                    anyhow::anyhow!(
                        "rank {r} sent an unreadable report over the control channel: {e}"
                    )
                })
            })
            .collect::<Result<Vec<T>>>()
            .map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solo_gathers_its_own_value() {
        let v = gather_values(&mut Solo, &vec![1u32, 2, 3])
            .unwrap()
            .unwrap();
        assert_eq!(v, vec![vec![1, 2, 3]]);
    }
}
