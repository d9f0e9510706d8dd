//! Which core each local rank runs on (docs/architecture.md § Conventions "Ranks vs
//! cores"): its own physical core while there are any, then the SMT
//! siblings, then round-robin with a warning so waits turn into yields.

#![deny(clippy::arithmetic_side_effects)]

use std::fmt;
use std::fs;

use anyhow::{Context, Result};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The launcher's plan: one CPU per local rank, plus what the user must
/// be warned about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinPlan {
    /// `cpus[i]` is local rank `i`'s CPU.
    pub cpus: Vec<usize>,
    /// CPUs the launcher may use (its affinity mask).
    pub available: Vec<usize>,
    /// More ranks than CPUs: ranks share CPUs.
    pub oversubscribed: bool,
    /// Some ranks sit on SMT siblings of one physical core.
    pub shares_physical_core: bool,
    /// Sentences for stderr and the report header.
    pub warnings: Vec<String>,
}

impl PinPlan {
    /// Whether ranks plus `progress_threads_per_rank` threads each
    /// outnumber the available CPUs (then waits must yield or block).
    pub fn oversubscribed_with(&self, progress_threads_per_rank: u32) -> bool {
        let threads = (self.cpus.len() as u64)
            .saturating_mul(u64::from(progress_threads_per_rank).saturating_add(1));
        threads > self.available.len() as u64
    }
}

/// Plans `np_local` ranks over this process's affinity mask.
pub fn plan_pinning(np_local: u32) -> PinPlan {
    let available = current_cpus().unwrap_or_else(|_| vec![0]);
    plan(np_local, &available, &|cpu| smt_siblings(cpu))
}

/// The planning rule over explicit CPUs and a sibling lookup (tested
/// without depending on the machine).
fn plan(np_local: u32, available: &[usize], siblings: &dyn Fn(usize) -> Vec<usize>) -> PinPlan {
    // First thread of every physical core, then the second threads, ...
    let mut order: Vec<(usize, usize)> = available
        .iter()
        .map(|&cpu| {
            let sib = siblings(cpu);
            let pos = sib.iter().position(|&s| s == cpu).unwrap_or(0);
            (pos, cpu)
        })
        .collect();
    order.sort_unstable();
    let order: Vec<usize> = order.into_iter().map(|(_, c)| c).collect();
    let n = np_local as usize;
    let cpus: Vec<usize> = (0..n)
        .filter_map(|i| i.checked_rem(order.len()).map(|k| order[k]))
        .collect();
    let oversubscribed = n > order.len();
    let mut warnings = Vec::new();
    if oversubscribed {
        warnings.push(format!(
            "{n} ranks on {} CPUs: ranks share CPUs round-robin, waits will yield, and timings will be noisy",
            order.len()
        ));
    }
    let mut shares_physical_core = false;
    for (i, &a) in cpus.iter().enumerate() {
        let sib = siblings(a);
        if let Some(j) = cpus[..i].iter().position(|&b| b != a && sib.contains(&b)) {
            shares_physical_core = true;
            warnings.push(format!(
                "ranks {j} and {i} share a physical core (CPUs {} and {a} are SMT siblings)",
                cpus[j]
            ));
        }
    }
    PinPlan {
        cpus,
        available: available.to_vec(),
        oversubscribed,
        shares_physical_core,
        warnings,
    }
}

/// The CPUs in this process's affinity mask.
pub fn current_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).context("sched_getaffinity")?;
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect();
    if cpus.is_empty() {
        anyhow::bail!("sched_getaffinity returned an empty CPU mask");
    }
    Ok(cpus)
}

/// The CPUs this process's job may use on this host: its cgroup's
/// effective cpuset where readable, else every online CPU.
pub fn online_cpus() -> Option<Vec<usize>> {
    let cgroup = fs::read_to_string("/proc/self/cgroup").ok().and_then(|c| {
        let path = c.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
        fs::read_to_string(format!("/sys/fs/cgroup{path}/cpuset.cpus.effective")).ok()
    });
    cgroup
        .or_else(|| fs::read_to_string("/sys/devices/system/cpu/online").ok())
        .and_then(|s| parse_cpu_list(&s))
        .filter(|l| !l.is_empty())
}

/// The CPUs a launcher (srun --cpu-bind, mpirun --bind-to) bound this
/// process to: its affinity when narrower than [`online_cpus`].
pub fn launcher_binding() -> Option<Vec<usize>> {
    let mine = current_cpus().ok()?;
    let all = online_cpus()?;
    (mine.len() < all.len()).then_some(mine)
}

/// `cpu`'s SMT siblings (itself included) from sysfs; just `cpu` if unknown.
pub fn smt_siblings(cpu: usize) -> Vec<usize> {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    fs::read_to_string(path)
        .ok()
        .and_then(|s| parse_cpu_list(&s))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| vec![cpu])
}

/// Parses the kernel's CPU list format: `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b.saturating_sub(a) > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// The affinity a rank ended up with, for the report header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Affinity {
    /// CPUs the rank may now run on (one after a successful pin).
    pub cpus: Vec<usize>,
    /// SMT siblings of the pinned CPU, itself included.
    pub siblings: Vec<usize>,
}

impl fmt::Display for Affinity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.cpus.iter().map(usize::to_string).collect();
        write!(f, "cpu {}", list.join(","))?;
        if self.siblings.len() > 1 {
            let sib: Vec<String> = self.siblings.iter().map(usize::to_string).collect();
            write!(f, " (SMT siblings {})", sib.join(","))?;
        }
        Ok(())
    }
}

/// Pins the calling process (all threads created afterwards) to `cpu`.
pub fn pin_self(cpu: usize) -> Result<Affinity> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .with_context(|| format!("CPU {cpu} is beyond what this system supports"))?;
    sched_setaffinity(Pid::from_raw(0), &set).with_context(|| {
        format!("cannot pin to CPU {cpu}: it is outside this process's allowed CPUs (check taskset/cgroup cpusets)")
    })?;
    Ok(Affinity {
        cpus: current_cpus()?,
        siblings: smt_siblings(cpu),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 cores with 2 threads each, Linux's usual numbering: cpu i and i+4.
    fn smt(cpu: usize) -> Vec<usize> {
        let c = cpu % 4;
        vec![c, c.saturating_add(4)]
    }

    #[test]
    fn physical_cores_first_then_siblings() {
        let all: Vec<usize> = (0..8).collect();
        let p = plan(4, &all, &smt);
        assert_eq!(p.cpus, vec![0, 1, 2, 3]);
        assert!(!p.oversubscribed && !p.shares_physical_core && p.warnings.is_empty());
        let p = plan(5, &all, &smt);
        assert_eq!(p.cpus, vec![0, 1, 2, 3, 4]);
        assert!(p.shares_physical_core && !p.oversubscribed);
        assert!(p.warnings[0].contains("ranks 0 and 4"), "{:?}", p.warnings);
        assert!(p.oversubscribed_with(1));
    }

    #[test]
    fn round_robin_beyond_the_cpus() {
        let p = plan(5, &[2, 3], &|c| vec![c]);
        assert_eq!(p.cpus, vec![2, 3, 2, 3, 2]);
        assert!(p.oversubscribed);
        assert!(p.warnings[0].contains("5 ranks on 2 CPUs"));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-2,5\n"), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn this_machine() {
        let p = plan_pinning(2);
        assert_eq!(p.cpus.len(), 2);
        assert!(p.cpus.iter().all(|c| p.available.contains(c)));
        let cpus = current_cpus().unwrap();
        assert!(!cpus.is_empty());
        // sched_setaffinity(0) acts on the calling thread: pin a helper
        // thread so the other tests keep their mask.
        let last = *cpus.last().unwrap();
        let got = std::thread::spawn(move || pin_self(last)).join().unwrap();
        assert_eq!(got.unwrap().cpus, vec![last]);
        assert!(pin_self(CpuSet::count() + 1).is_err());
    }
}
