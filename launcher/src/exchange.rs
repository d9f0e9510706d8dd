//! How the ranks of a job swap their transport addresses and report to
//! rank 0: through the job's PMIx server when the launcher runs one,
//! else through the PMI-2 key-value service (PMI_FD/PMI_PORT), else
//! through rank 0's bootstrap service. [`join`] picks one.
//!
//! All three offer the same two collectives, which is all a rank needs:
//! an allgather of a byte string (addresses, then each report to rank 0)
//! and a barrier.

use std::time::Duration;

use anyhow::{bail, Result};

use crate::role::{JobSource, RankEnv};
use crate::Bootstrap;

/// The channel a job's ranks exchange addresses through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeKind {
    /// The launcher's PMIx server (Open MPI's mpirun, `srun --mpi=pmix`).
    Pmix,
    /// The PMI-2 wire protocol (`srun --mpi=pmi2`, MPICH's Hydra).
    Pmi2,
    /// ovbench's own bootstrap service (its launchers, or rank 0 under
    /// a launcher that offers neither).
    Bootstrap,
}

impl ExchangeKind {
    /// The name the header and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            ExchangeKind::Pmix => "pmix",
            ExchangeKind::Pmi2 => "pmi2",
            ExchangeKind::Bootstrap => "bootstrap",
        }
    }
}

/// Where a rank stands in its job: its rank and the job's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seat {
    pub rank: u32,
    pub size: u32,
}

impl Seat {
    /// An error unless the job's channel (`channel`: PMIx, PMI-2) seats
    /// this rank where the launcher's environment `env` does.
    pub(crate) fn agrees_with(self, channel: &str, env: &RankEnv) -> Result<()> {
        if (self.rank, self.size) != (env.rank, env.size) {
            bail!(
                "{channel} says this is rank {} of {}, the launcher's environment says {} of {}",
                self.rank,
                self.size,
                env.rank,
                env.size
            );
        }
        Ok(())
    }
}

impl std::fmt::Display for Seat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {}/{}", self.rank, self.size)
    }
}

/// A joined job's collectives.
pub trait Exchange: std::fmt::Debug {
    fn kind(&self) -> ExchangeKind;
    /// One line for the header: the channel and where it is.
    fn describe(&self) -> String;
    /// This rank's seat in the job, as the channel gave it.
    fn seat(&self) -> Seat;
    fn rank(&self) -> u32 {
        self.seat().rank
    }
    fn size(&self) -> u32 {
        self.seat().size
    }
    /// Every rank's `mine`, in rank order.
    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Returns once every rank has entered it.
    fn barrier(&mut self) -> Result<()>;
    /// Leaves the job's channel in order (a rank that hosts the bootstrap
    /// service waits for the others to leave first).
    fn finish(self: Box<Self>) -> Result<()>;
    /// The stall watchdog for this rank's wait loops: reports over the
    /// bootstrap connection where there is one, else on stderr.
    fn watchdog(&self) -> Box<dyn ovbench_core::watch::Observer> {
        Box::new(crate::watchdog::StderrWatch { rank: self.rank() })
    }
}

/// Whether rank 0's bootstrap service may be used (`--bootstrap off`
/// forbids it, so a run proves the launcher's own channel works alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootstrapUse {
    Allowed,
    Off,
}

/// Joins the job's exchange: the bootstrap service for ranks that
/// ovbench started itself, else PMIx, else PMI-2, else the service.
pub fn join(env: &RankEnv, boot: BootstrapUse, timeout: Duration) -> Result<Box<dyn Exchange>> {
    join_from(&|k| std::env::var(k).ok(), env, boot, timeout)
}

fn join_from(
    var: &dyn Fn(&str) -> Option<String>,
    env: &RankEnv,
    boot: BootstrapUse,
    timeout: Duration,
) -> Result<Box<dyn Exchange>> {
    let mut tried: Vec<String> = Vec::new();
    if env.source != JobSource::Launcher {
        if crate::pmix::offered(var) {
            match crate::pmix::init(env, timeout) {
                Ok(p) => return Ok(p),
                Err(e) => tried.push(format!("PMIx: {e:#}")),
            }
        }
        if crate::pmi2::offered(var) {
            match crate::pmi2::Pmi2::init(var, env, timeout) {
                Ok(p) => return Ok(Box::new(p)),
                Err(e) => tried.push(format!("PMI-2: {e:#}")),
            }
        }
    }
    if boot == BootstrapUse::Off {
        if tried.is_empty() {
            bail!(
                "rank {}: --bootstrap off, and the job offers no PMIx or PMI-2 service (no PMIX_NAMESPACE, PMI_FD or PMI_PORT{}): launch with mpirun or srun --mpi=pmix|pmi2, or drop --bootstrap off",
                env.rank,
                if crate::pmix::COMPILED { "" } else { "; and this build has no PMIx: build with --features pmix" }
            );
        }
        bail!(
            "rank {}: --bootstrap off, and {}",
            env.rank,
            tried.join("; ")
        );
    }
    if env.bootstrap.is_empty() {
        // Why the service's address could not be derived, and what to set.
        let why = crate::role::bootstrap_address(var, env.size, env.local_size)
            .err()
            .map_or_else(|| "no bootstrap address".to_string(), |e| e.to_string());
        let alt = if tried.is_empty() {
            String::new()
        } else {
            format!(" ({})", tried.join("; "))
        };
        bail!(
            "rank {}: the job offers no PMIx or PMI-2 service{alt}, and {why}",
            env.rank
        );
    }
    for t in &tried {
        eprintln!(
            "ovbench: rank {}: {t}; using the bootstrap service instead",
            env.rank
        );
    }
    Ok(Box::new(Bootstrap::connect(env, timeout)?))
}

impl Exchange for Bootstrap {
    fn kind(&self) -> ExchangeKind {
        ExchangeKind::Bootstrap
    }
    fn describe(&self) -> String {
        format!("ovbench bootstrap service at {}", self.service_addr())
    }
    fn seat(&self) -> Seat {
        Seat {
            rank: Bootstrap::rank(self),
            size: Bootstrap::size(self),
        }
    }
    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        Bootstrap::allgather(self, mine)
    }
    fn barrier(&mut self) -> Result<()> {
        Bootstrap::barrier(self)
    }
    fn finish(self: Box<Self>) -> Result<()> {
        Bootstrap::finish(*self)
    }
    fn watchdog(&self) -> Box<dyn ovbench_core::watch::Observer> {
        match self.watch() {
            Ok(w) => Box::new(w),
            Err(_) => Box::new(crate::watchdog::StderrWatch { rank: self.rank() }),
        }
    }
}

/// Whom a failed collective of `rank` (of `size`) waited on, for its
/// error: in a job of two it can only be the other rank, which is then
/// named (PMIx's and PMI-2's fence failures say only that one is missing).
pub(crate) fn awaited(rank: u32, size: u32) -> String {
    if size == 2 {
        format!("rank {}, its only peer,", u32::from(rank == 0))
    } else {
        "a rank of the job".to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_job_of_two_names_the_peer_its_fence_waited_on() {
        assert_eq!(super::awaited(0, 2), "rank 1, its only peer,");
        assert_eq!(super::awaited(1, 2), "rank 0, its only peer,");
        assert_eq!(super::awaited(1, 4), "a rank of the job");
    }

    use super::*;

    fn env(source: JobSource) -> RankEnv {
        RankEnv {
            rank: 0,
            size: 1,
            local_rank: 0,
            local_size: Some(1),
            bootstrap: "127.0.0.1:0".into(),
            secret: String::from("s").into(),
            cpu: None,
            ncpus: None,
            source,
            hosts_service: true,
            launcher_oversubscribed: false,
            stderr_tty: None,
            launcher_binding: None,
        }
    }

    #[test]
    fn without_a_job_service_the_bootstrap_service_is_used_unless_off() {
        let none = |_: &str| None;
        let t = Duration::from_secs(5);
        let x = join_from(&none, &env(JobSource::OpenMpi), BootstrapUse::Allowed, t).unwrap();
        assert_eq!(x.kind(), ExchangeKind::Bootstrap);
        x.finish().unwrap();
        let e = join_from(&none, &env(JobSource::OpenMpi), BootstrapUse::Off, t).unwrap_err();
        assert!(e.to_string().contains("--bootstrap off"), "{e}");
    }

    #[test]
    fn a_broken_pmi_fd_falls_back_or_fails_naming_it() {
        let bad = crate::role::tests::lookup(&[("PMI_FD", "not-a-number"), ("PMI_RANK", "0")]);
        let t = Duration::from_secs(5);
        let e = join_from(&bad, &env(JobSource::Pmi), BootstrapUse::Off, t).unwrap_err();
        assert!(format!("{e:#}").contains("PMI_FD"), "{e:#}");
        let x = join_from(&bad, &env(JobSource::Pmi), BootstrapUse::Allowed, t).unwrap();
        assert_eq!(x.kind(), ExchangeKind::Bootstrap);
        x.finish().unwrap();
    }
}
