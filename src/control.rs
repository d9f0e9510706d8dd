//! Out-of-band control between ranks: how per-rank facts and figures
//! (affinity, CPU use, operation counts, elapsed times) reach rank 0
//! without travelling through — and disturbing — the protocol being
//! measured.
//!
//! Two phases, so that no implementation ever blocks inside a rank of the
//! simulator (whose ranks take turns on one baton): every rank
//! [`Control::deposit`]s its bytes *before* a closing communicator
//! barrier, and rank 0 [`Control::collect`]s them *after* it. Real jobs
//! carry them over the launcher's bootstrap service ([`BootstrapControl`]);
//! ranks that share a process (the simulator) through memory
//! ([`SharedControl`]).

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Result};
use serde::{de::DeserializeOwned, Serialize};

/// Collective side channel of a job.
pub trait Control {
    fn rank(&self) -> u32;
    fn size(&self) -> u32;
    /// Leave this rank's bytes for rank 0 (call before a barrier).
    fn deposit(&mut self, mine: Vec<u8>) -> Result<()>;
    /// Every rank's deposit, in rank order, at rank 0 (call after that
    /// barrier); `None` on other ranks.
    fn collect(&mut self) -> Result<Option<Vec<Vec<u8>>>>;
}

/// A rank's bytes between [`Control::deposit`] and [`Control::collect`],
/// for channels that send them only when rank 0 collects (a gather is
/// collective, so it cannot run before the barrier).
#[derive(Debug, Default)]
pub struct Deposit(Option<Vec<u8>>);

impl Deposit {
    pub fn put(&mut self, mine: Vec<u8>) -> Result<()> {
        self.0 = Some(mine);
        Ok(())
    }
    /// The deposited bytes; an error where `collect` comes first.
    pub fn take(&mut self) -> Result<Vec<u8>> {
        self.0
            .take()
            .ok_or_else(|| anyhow!("control channel: collect without a deposit"))
    }
}

/// The control channel over the job's exchange: the launcher's bootstrap
/// service, or the PMIx / PMI-2 service of mpirun and srun.
#[derive(Debug)]
pub struct BootstrapControl {
    boot: Box<dyn ovbench_launcher::Exchange>,
    pending: Deposit,
}

impl BootstrapControl {
    pub fn new(boot: Box<dyn ovbench_launcher::Exchange>) -> BootstrapControl {
        BootstrapControl {
            boot,
            pending: Deposit::default(),
        }
    }
    /// The exchange (for the address exchange and the goodbye).
    pub fn bootstrap(&mut self) -> &mut dyn ovbench_launcher::Exchange {
        self.boot.as_mut()
    }
    pub fn into_inner(self) -> Box<dyn ovbench_launcher::Exchange> {
        self.boot
    }
}

impl Control for BootstrapControl {
    fn rank(&self) -> u32 {
        self.boot.rank()
    }
    fn size(&self) -> u32 {
        self.boot.size()
    }
    fn deposit(&mut self, mine: Vec<u8>) -> Result<()> {
        self.pending.put(mine)
    }
    fn collect(&mut self) -> Result<Option<Vec<Vec<u8>>>> {
        let all = self.boot.allgather(&self.pending.take()?)?;
        Ok((self.boot.rank() == 0).then_some(all))
    }
}

/// The control channel of ranks in one process: slots in shared memory.
/// Depositing never blocks; rank 0 takes every slot after the barrier.
#[derive(Debug, Clone)]
pub struct SharedControl {
    rank: u32,
    slots: Arc<Mutex<Vec<Option<Vec<u8>>>>>,
}

impl SharedControl {
    /// One handle per rank, all on the same slots.
    pub fn group(size: u32) -> Vec<SharedControl> {
        let slots = Arc::new(Mutex::new(vec![None; size as usize]));
        (0..size)
            .map(|rank| SharedControl {
                rank,
                slots: slots.clone(),
            })
            .collect()
    }
}

impl Control for SharedControl {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.slots.lock().map(|s| s.len() as u32).unwrap_or(0)
    }
    fn deposit(&mut self, mine: Vec<u8>) -> Result<()> {
        let mut s = self
            .slots
            .lock()
            .map_err(|_| anyhow!("control channel: another rank panicked"))?;
        s[self.rank as usize] = Some(mine);
        Ok(())
    }
    fn collect(&mut self) -> Result<Option<Vec<Vec<u8>>>> {
        if self.rank != 0 {
            return Ok(None);
        }
        let mut s = self
            .slots
            .lock()
            .map_err(|_| anyhow!("control channel: another rank panicked"))?;
        let mut out = Vec::with_capacity(s.len());
        for (r, slot) in s.iter_mut().enumerate() {
            match slot.take() {
                Some(b) => out.push(b),
                None => bail!("control channel: rank {r} deposited nothing before the barrier"),
            }
        }
        Ok(Some(out))
    }
}

/// Deposit a serialisable value.
pub fn deposit_value<T: Serialize>(ctl: &mut dyn Control, mine: &T) -> Result<()> {
    ctl.deposit(serde_json::to_vec(mine)?)
}

/// Collect every rank's value at rank 0.
pub fn collect_values<T: DeserializeOwned>(ctl: &mut dyn Control) -> Result<Option<Vec<T>>> {
    match ctl.collect()? {
        None => Ok(None),
        Some(all) => all
            .iter()
            .enumerate()
            .map(|(r, b)| {
                serde_json::from_slice(b).map_err(|e| {
                    anyhow!("rank {r} sent an unreadable report over the control channel: {e}")
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
    fn shared_slots_reach_rank_zero_in_rank_order() {
        let mut g = SharedControl::group(3);
        for (r, c) in g.iter_mut().enumerate().rev() {
            deposit_value(c, &(r as u32 * 10)).unwrap();
        }
        assert_eq!(collect_values::<u32>(&mut g[1]).unwrap(), None);
        assert_eq!(
            collect_values::<u32>(&mut g[0]).unwrap(),
            Some(vec![0, 10, 20])
        );
        // Slots are emptied: collecting again without deposits is an error naming the rank.
        let e = g[0].collect().unwrap_err().to_string();
        assert!(e.contains("rank 0 deposited nothing"), "{e}");
        assert_eq!(g[2].size(), 3);
    }
}
