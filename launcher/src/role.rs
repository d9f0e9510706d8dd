//! Who am I? The launcher, a rank it spawned, or a rank of srun/mpirun.
//!
//! Environment variables read here (all set by the launcher for its
//! children; the last two are for users under srun/mpirun):
//!
//! | variable | meaning |
//! |---|---|
//! | `OVBENCH_RANK`, `OVBENCH_SIZE` | this rank and the number of ranks |
//! | `OVBENCH_LOCAL_RANK`, `OVBENCH_LOCAL_SIZE` | the same among the ranks of this host |
//! | `OVBENCH_BOOTSTRAP` | `host:port` of the bootstrap service |
//! | `OVBENCH_SECRET` | the job secret every connection must prove it holds (it is never sent) |
//! | `OVBENCH_CPU` | the core this rank pins itself to |
//! | `OVBENCH_NCPUS` | CPUs the launcher could use (for oversubscription) |
//! | `OVBENCH_OVERSUBSCRIBED` | `1` when ranks plus progress threads exceed them |
//! | `OVBENCH_STDERR_TTY` | `1` when the launcher's stderr (where the rank's goes) is a terminal |
//! | `OVBENCH_LAUNCHER_PID` | the launcher; a rank dies with it |
//! | `OVBENCH_BOOTSTRAP_HOST` | under srun/mpirun: host of rank 0, which runs the service |
//!
//! Under srun/mpirun, rank 0 hosts the service on the port of
//! `OVBENCH_BOOTSTRAP` if set, else on a port derived from the job id; the
//! host is `OVBENCH_BOOTSTRAP_HOST`, else loopback when the whole job is on
//! one node, else the first node of the Slurm node list (rank 0's node
//! under srun's default block distribution). Without `OVBENCH_SECRET` the
//! secret is derived from the job id: it then only keeps stray connections
//! out, so export a random `OVBENCH_SECRET` on shared clusters.

#![deny(clippy::arithmetic_side_effects)]

use std::env;

use anyhow::{bail, Context, Result};
use nix::sys::signal::Signal;
use nix::unistd::{getppid, Pid};

use crate::secret::JobSecret;

/// What this process is in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// No job environment: spawn `np` ranks of ourselves.
    Launcher { np: u32 },
    /// One rank of a job.
    Rank(RankEnv),
}

/// Which system started the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobSource {
    /// ovbench's own local launcher.
    Launcher,
    Slurm,
    OpenMpi,
    /// MPICH/Hydra's PMI.
    Pmi,
    Pmix,
}

impl JobSource {
    /// What the user can check when the bootstrap service is unreachable.
    pub fn hint(self) -> &'static str {
        match self {
            JobSource::Launcher => "started by the local ovbench launcher",
            _ => "under srun/mpirun: set OVBENCH_BOOTSTRAP_HOST to the host of rank 0, or OVBENCH_BOOTSTRAP=host:port, and export it to every rank",
        }
    }
}

/// A rank's identity and how to reach its job's bootstrap service.
///
/// Its `Debug` leaves the secret out ([`JobSecret`]), so no error or log
/// line that prints a `RankEnv` can leak it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankEnv {
    pub rank: u32,
    pub size: u32,
    pub local_rank: u32,
    /// Ranks on this host, when the job system says.
    pub local_size: Option<u32>,
    /// `host:port` of the bootstrap service.
    pub bootstrap: String,
    pub secret: JobSecret,
    /// Core to pin to (set by the local launcher only; srun/mpirun bind).
    pub cpu: Option<usize>,
    /// CPUs available to the job on this host, when the launcher says.
    pub ncpus: Option<u32>,
    pub source: JobSource,
    /// This rank runs the service (rank 0 under srun/mpirun).
    pub hosts_service: bool,
    /// The launcher found ranks plus progress threads over the CPUs.
    pub launcher_oversubscribed: bool,
    /// Whether stderr ends on a terminal, when the launcher says (a
    /// spawned rank's stderr is a pipe through the launcher).
    pub stderr_tty: Option<bool>,
    /// The CPUs srun/mpirun bound this rank to, when they bound it to
    /// fewer than the host has: kept as it is, never pinned again.
    pub launcher_binding: Option<Vec<usize>>,
}

impl RankEnv {
    /// Whether this rank's stderr reaches a terminal (for progress bars).
    pub fn stderr_is_terminal(&self) -> bool {
        self.stderr_tty
            .unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr()))
    }

    /// Whether ranks plus progress threads on this host outnumber its
    /// cores, so waits must yield or block instead of spinning.
    ///
    /// Under srun/mpirun: the ranks the launcher put on this host against
    /// its CPUs, and this rank's threads against the CPUs the launcher
    /// bound it to.
    pub fn oversubscribed(&self, progress_threads_per_rank: u32) -> bool {
        let threads = 1 + u64::from(progress_threads_per_rank);
        self.launcher_oversubscribed
            || match (self.local_size, self.ncpus) {
                (Some(n), Some(cpus)) => u64::from(n).saturating_mul(threads) > u64::from(cpus),
                _ => false,
            }
            || self
                .launcher_binding
                .as_ref()
                .is_some_and(|b| threads > b.len() as u64)
    }

    /// Which launcher started this rank, in words.
    pub fn launcher_name(&self) -> &'static str {
        match self.source {
            JobSource::Launcher => "ovbench",
            JobSource::Slurm => "srun",
            JobSource::OpenMpi => "mpirun (Open MPI)",
            JobSource::Pmi => "a PMI launcher (srun --mpi=pmi2, MPICH's mpiexec)",
            JobSource::Pmix => "a PMIx launcher",
        }
    }
}

/// `--launcher`: how ovbench decides whether it is a rank or starts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LauncherChoice {
    /// A rank when srun/mpirun say so, else start the ranks.
    #[default]
    Auto,
    /// Start the ranks on this host, whatever the environment says.
    Local,
    /// Must be a rank of srun/mpirun; an error otherwise.
    Env,
    /// Start the ranks on `--hosts` over ssh.
    Ssh,
}

/// Decides the role from the environment. `np_flag` is `--np` if given.
///
/// A rank spawned by the launcher also asks the kernel to kill it when
/// the launcher dies, so no rank can outlive the `ovbench` the user ran.
pub fn detect(np_flag: Option<u32>) -> Result<Role> {
    detect_with(LauncherChoice::Auto, np_flag)
}

/// [`detect`] under a `--launcher` choice.
pub fn detect_with(choice: LauncherChoice, np_flag: Option<u32>) -> Result<Role> {
    detect_choice(&|k| env::var(k).ok(), choice, np_flag).and_then(|role| {
        let mut role = role;
        if let Role::Rank(
            env @ RankEnv {
                source: JobSource::Launcher,
                ..
            },
        ) = &mut role
        {
            tie_to_launcher()?;
            if env::var("OVBENCH_SECRET_STDIN").is_ok_and(|v| v == "1") {
                env.secret = crate::remote::secret_from_stdin(env.rank)?.into();
            }
        }
        Ok(role)
    })
}

fn tie_to_launcher() -> Result<()> {
    let Some(pid) = env::var("OVBENCH_LAUNCHER_PID").ok() else {
        return Ok(());
    };
    let pid: i32 = pid
        .parse()
        .with_context(|| format!("OVBENCH_LAUNCHER_PID={pid:?} is not a process id"))?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).context("prctl(PR_SET_PDEATHSIG)")?;
    // The launcher may have died before the request took effect.
    if getppid() != Pid::from_raw(pid) {
        bail!("the ovbench launcher (pid {pid}) is gone; this rank stops");
    }
    Ok(())
}

/// [`detect`] over any variable lookup (tests pass a map).
pub fn detect_from(var: &dyn Fn(&str) -> Option<String>, np_flag: Option<u32>) -> Result<Role> {
    detect_choice(var, LauncherChoice::Auto, np_flag)
}

/// [`detect_with`] over any variable lookup.
pub fn detect_choice(
    var: &dyn Fn(&str) -> Option<String>,
    choice: LauncherChoice,
    np_flag: Option<u32>,
) -> Result<Role> {
    // A rank ovbench started itself carries the user's --launcher too.
    if var("OVBENCH_RANK").is_some() {
        return spawned_rank(var).map(Role::Rank);
    }
    if matches!(choice, LauncherChoice::Auto | LauncherChoice::Env) {
        if let Some(env) = external_rank(var)? {
            return Ok(Role::Rank(env));
        }
    }
    if choice == LauncherChoice::Env {
        bail!("--launcher env: this process is no rank of a job (none of OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK with PMIX_SIZE, or SLURM_STEP_ID of a job step with SLURM_NTASKS above 1 is set): start ovbench with mpirun or srun, or use --launcher auto");
    }
    let np = np_flag.unwrap_or(2);
    if np == 0 {
        bail!("--np must be at least 1");
    }
    Ok(Role::Launcher { np })
}

fn num<T: std::str::FromStr>(
    var: &dyn Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<T>> {
    match var(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| anyhow::anyhow!("{name}={v:?} is not a valid number")),
    }
}

fn required<T: std::str::FromStr>(var: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<T> {
    num(var, name)?.with_context(|| {
        format!("OVBENCH_RANK is set but {name} is not: ovbench ranks are started by the ovbench launcher; unset OVBENCH_RANK to launch")
    })
}

fn spawned_rank(var: &dyn Fn(&str) -> Option<String>) -> Result<RankEnv> {
    let rank: u32 = required(var, "OVBENCH_RANK")?;
    let size: u32 = required(var, "OVBENCH_SIZE")?;
    if rank >= size {
        bail!("OVBENCH_RANK={rank} is not below OVBENCH_SIZE={size}");
    }
    let bootstrap = var("OVBENCH_BOOTSTRAP").context(
        "OVBENCH_RANK is set but OVBENCH_BOOTSTRAP is not; unset OVBENCH_RANK to launch",
    )?;
    // An ssh-started rank reads the secret from its stdin (in `detect`).
    let secret = match var("OVBENCH_SECRET") {
        Some(s) => JobSecret::from(s),
        None if var("OVBENCH_SECRET_STDIN").is_some_and(|v| v == "1") => JobSecret::default(),
        None => {
            bail!("OVBENCH_RANK is set but OVBENCH_SECRET is not; unset OVBENCH_RANK to launch")
        }
    };
    let local_rank: u32 = num(var, "OVBENCH_LOCAL_RANK")?.unwrap_or(rank);
    let local_size: u32 = num(var, "OVBENCH_LOCAL_SIZE")?.unwrap_or(size);
    let (mut cpu, mut ncpus) = (num(var, "OVBENCH_CPU")?, num(var, "OVBENCH_NCPUS")?);
    // ssh launch: the rank plans its core among its host's ranks itself.
    if cpu.is_none()
        && var("OVBENCH_PIN_LOCAL").is_some_and(|v| v == "1")
        && local_rank < local_size
    {
        let plan = crate::pinning::plan_pinning(local_size);
        cpu = plan.cpus.get(local_rank as usize).copied();
        ncpus = Some(plan.available.len() as u32);
    }
    Ok(RankEnv {
        rank,
        size,
        local_rank,
        local_size: Some(local_size),
        bootstrap,
        secret,
        cpu,
        ncpus,
        source: JobSource::Launcher,
        hosts_service: false,
        launcher_oversubscribed: var("OVBENCH_OVERSUBSCRIBED").is_some_and(|v| v == "1"),
        stderr_tty: var("OVBENCH_STDERR_TTY").map(|v| v == "1"),
        launcher_binding: None,
    })
}

/// A rank of srun, mpirun (Open MPI or Hydra) or a PMIx launcher.
fn external_rank(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<RankEnv>> {
    // (source, rank var, size var, local rank var, local size var)
    let kinds: [(JobSource, &str, &str, &str, &str); 4] = [
        (
            JobSource::OpenMpi,
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),
        // srun sets SLURM_STEP_ID; a batch script (no step) must launch locally.
        (
            JobSource::Slurm,
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_LOCALID",
            "",
        ),
        (
            JobSource::Pmi,
            "PMI_RANK",
            "PMI_SIZE",
            "MPI_LOCALRANKID",
            "MPI_LOCALNRANKS",
        ),
        (JobSource::Pmix, "PMIX_RANK", "PMIX_SIZE", "", ""),
    ];
    for (source, rv, sv, lrv, lsv) in kinds {
        let Some(rank) = num::<u32>(var, rv)? else {
            continue;
        };
        if source == JobSource::Slurm && !is_job_step(var("SLURM_STEP_ID").as_deref()) {
            continue;
        }
        let size = match num::<u32>(var, sv)? {
            Some(s) => s,
            None => bail!("{rv} is set but {sv} is not, so the job size is unknown; launch with srun or mpirun, which set both"),
        };
        if rank >= size {
            bail!("{rv}={rank} is not below {sv}={size}");
        }
        if size == 1 {
            // A one-task step is an allocation to launch inside, not a job.
            return Ok(None);
        }
        let local_rank = if lrv.is_empty() { None } else { num(var, lrv)? };
        let mut local_size = if lsv.is_empty() { None } else { num(var, lsv)? };
        let one_node = var("SLURM_STEP_NUM_NODES")
            .or_else(|| var("SLURM_NNODES"))
            .is_some_and(|n| n.trim() == "1")
            && source == JobSource::Slurm;
        if one_node {
            local_size = Some(size);
        } else if source == JobSource::Slurm && local_size.is_none() {
            local_size = var("SLURM_STEP_TASKS_PER_NODE")
                .zip(num::<usize>(var, "SLURM_NODEID")?)
                .and_then(|(list, node)| tasks_on_node(&list, node));
        }
        // Needed only when the job offers neither PMIx nor PMI-2; the
        // exchange says what is missing then (exchange::join).
        let bootstrap = bootstrap_address(var, size, local_size).unwrap_or_default();
        let secret = match var("OVBENCH_SECRET") {
            Some(s) => s,
            None => format!(
                "job-{:016x}",
                fnv1a(job_id(var).unwrap_or_default().as_bytes())
            ),
        }
        .into();
        return Ok(Some(RankEnv {
            rank,
            size,
            local_rank: local_rank.unwrap_or(0),
            local_size,
            bootstrap,
            secret,
            cpu: None,
            ncpus: crate::pinning::online_cpus().map(|c| c.len() as u32),
            source,
            hosts_service: rank == 0,
            launcher_oversubscribed: false,
            stderr_tty: None,
            launcher_binding: crate::pinning::launcher_binding(),
        }));
    }
    Ok(None)
}

/// Whether `SLURM_STEP_ID` names a job step srun started, not the batch
/// script (`batch`, 4294967294), the extern step (`extern`, 4294967295)
/// or an interactive allocation shell (4294967291, 4294967293): an
/// ovbench started in those launches its ranks itself.
fn is_job_step(step: Option<&str>) -> bool {
    match step.map(str::trim) {
        None | Some("batch" | "extern" | "interactive") => false,
        Some(s) => s.parse::<u64>().is_ok_and(|n| n < 0xFFFF_FFF0),
    }
}

/// The task count of node `node` in Slurm's `2(x3),1` notation.
pub fn tasks_on_node(list: &str, node: usize) -> Option<u32> {
    let mut seen = 0usize;
    for item in list.split(',') {
        let (count, repeat) = match item.split_once("(x") {
            Some((c, r)) => (c, r.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (item, 1),
        };
        let count: u32 = count.trim().parse().ok()?;
        // SLURM_TASKS_PER_NODE comes from the environment: `2(x18446744073709551615)` must not wrap.
        seen = seen.saturating_add(repeat);
        if node < seen {
            return Some(count);
        }
    }
    None
}

/// The job's identity, from whichever system started it.
fn job_id(var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(j) = var("SLURM_JOB_ID") {
        let step = var("SLURM_STEP_ID").unwrap_or_default();
        return Some(format!("slurm:{j}.{step}"));
    }
    [
        "OMPI_MCA_ess_base_jobid",
        "PMIX_NAMESPACE",
        "PMI_KVSNAME",
        "PMI_PORT",
    ]
    .into_iter()
    .find_map(|k| var(k).map(|v| format!("{k}:{v}")))
}

pub(crate) fn bootstrap_address(
    var: &dyn Fn(&str) -> Option<String>,
    size: u32,
    local_size: Option<u32>,
) -> Result<String> {
    const WHAT_TO_SET: &str = "set OVBENCH_BOOTSTRAP=host:port (host of rank 0, a free port) in every rank's environment (e.g. mpirun -x OVBENCH_BOOTSTRAP=$(hostname):47000)";
    let explicit = var("OVBENCH_BOOTSTRAP");
    if let Some(addr) = &explicit {
        if addr
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            return Ok(addr.clone());
        }
        bail!("OVBENCH_BOOTSTRAP={addr:?} is not host:port");
    }
    let Some(id) = job_id(var) else {
        bail!("cannot derive a bootstrap port: no job id (SLURM_JOB_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE) in the environment; {WHAT_TO_SET}");
    };
    let port = derive_port(&id);
    let host = if let Some(h) = var("OVBENCH_BOOTSTRAP_HOST") {
        h
    } else if local_size == Some(size) {
        "127.0.0.1".to_string()
    } else if let Some(list) = var("SLURM_STEP_NODELIST").or_else(|| var("SLURM_JOB_NODELIST")) {
        first_host(&list).with_context(|| format!("cannot read the Slurm node list {list:?}; set OVBENCH_BOOTSTRAP_HOST to the host of rank 0"))?
    } else {
        bail!("cannot tell which host runs rank 0; set OVBENCH_BOOTSTRAP_HOST to it (e.g. mpirun -x OVBENCH_BOOTSTRAP_HOST=$(hostname)), or {WHAT_TO_SET}");
    };
    Ok(format!("{host}:{port}"))
}

/// The ports a job id maps to: below Linux's default ephemeral range
/// (32768..60999), where the kernel hands out client and port-0 sockets,
/// so a connection another program has open on the host does not hold the
/// port rank 0 must listen on.
pub const DERIVED_PORTS: std::ops::Range<u16> = 20000..32768;

/// A port in [`DERIVED_PORTS`] that every rank of the job computes alike.
pub fn derive_port(job_id: &str) -> u16 {
    const SPAN: u16 = DERIVED_PORTS.end - DERIVED_PORTS.start;
    // SPAN is not 0, and the remainder below it fits in u16 and keeps the sum in range.
    let offset = fnv1a(job_id.as_bytes())
        .checked_rem(u64::from(SPAN))
        .unwrap_or(0) as u16;
    DERIVED_PORTS.start.saturating_add(offset)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The first host of a Slurm host list: `node[07-09,12],gpu1` → `node07`.
pub fn first_host(list: &str) -> Option<String> {
    let mut depth = 0;
    let mut end = list.len();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth = i32::saturating_add(depth, 1),
            ']' => depth = i32::saturating_sub(depth, 1),
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let item = list[..end].trim();
    let host = match item.split_once('[') {
        None => item.to_string(),
        Some((prefix, rest)) => {
            let (range, suffix) = rest.split_once(']')?;
            let first = range.split([',', '-']).next()?;
            format!("{prefix}{first}{suffix}")
        }
    };
    (!host.is_empty() && !host.contains(['[', ']'])).then_some(host)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The variable lookup of an environment holding just `vars`.
    pub(crate) fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn role(vars: &[(&str, &str)], np: Option<u32>) -> Result<Role> {
        detect_from(&lookup(vars), np)
    }

    /// The rank an environment holding just `vars` makes (a test failure
    /// where it makes a launcher or an error).
    fn rank(vars: &[(&str, &str)], np: Option<u32>) -> RankEnv {
        match role(vars, np) {
            Ok(Role::Rank(env)) => env,
            other => panic!("not a rank: {other:?}"),
        }
    }

    #[test]
    fn no_job_means_launcher() {
        assert_eq!(role(&[], None).unwrap(), Role::Launcher { np: 2 });
        assert_eq!(role(&[], Some(5)).unwrap(), Role::Launcher { np: 5 });
        assert!(role(&[], Some(0)).is_err());
        // A batch script (no step) and a one-task step launch locally.
        let batch = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_JOB_ID", "9"),
        ];
        assert_eq!(role(&batch, Some(3)).unwrap(), Role::Launcher { np: 3 });
        let one = [("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1")];
        assert_eq!(role(&one, None).unwrap(), Role::Launcher { np: 2 });
    }

    #[test]
    fn spawned_child() {
        let vars = [
            ("OVBENCH_RANK", "1"),
            ("OVBENCH_SIZE", "3"),
            ("OVBENCH_LOCAL_RANK", "1"),
            ("OVBENCH_BOOTSTRAP", "127.0.0.1:4000"),
            ("OVBENCH_SECRET", "ab"),
            ("OVBENCH_CPU", "5"),
            ("OVBENCH_NCPUS", "2"),
        ];
        let env = rank(&vars, Some(3));
        assert_eq!((env.rank, env.size, env.cpu), (1, 3, Some(5)));
        assert!(env.oversubscribed(0));
        assert!(!env.hosts_service);
        let shown = format!("{env:?} {:?}", Role::Rank(env.clone()));
        assert!(!shown.contains("\"ab\""), "the secret leaks: {shown}");
        let bad = [("OVBENCH_RANK", "3"), ("OVBENCH_SIZE", "3")];
        assert!(role(&bad, None).is_err());
        let missing = [("OVBENCH_RANK", "0"), ("OVBENCH_SIZE", "3")];
        let e = role(&missing, None).unwrap_err().to_string();
        assert!(e.contains("OVBENCH_BOOTSTRAP"), "{e}");
    }

    #[test]
    fn srun_rank_on_several_nodes() {
        let vars = [
            ("SLURM_PROCID", "2"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_JOB_ID", "777"),
            ("SLURM_NNODES", "2"),
            ("SLURM_JOB_NODELIST", "cn[012-013]"),
        ];
        let env = rank(&vars, None);
        assert_eq!(env.source, JobSource::Slurm);
        assert_eq!(
            env.bootstrap,
            format!("cn012:{}", derive_port("slurm:777.0"))
        );
        assert!(!env.hosts_service);
    }

    #[test]
    fn mpirun_rank() {
        let local = [
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("OMPI_MCA_ess_base_jobid", "123"),
        ];
        let env = rank(&local, None);
        assert!(env.hosts_service);
        assert!(env.bootstrap.starts_with("127.0.0.1:"));
        // Several nodes and nothing to say where rank 0 is: tell the user.
        let remote = [
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "4"),
            ("MPI_LOCALNRANKS", "2"),
            ("PMI_KVSNAME", "kvs_1"),
        ];
        let env = rank(&remote, None);
        assert_eq!(env.bootstrap, "", "no bootstrap address to guess");
        let e = bootstrap_address(&lookup(&remote), 4, Some(2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("OVBENCH_BOOTSTRAP_HOST"), "{e}");
        let mut named = remote.to_vec();
        named.push(("OVBENCH_BOOTSTRAP_HOST", "head"));
        let env = rank(&named, None);
        assert!(env.bootstrap.starts_with("head:"));
        let explicit = [
            ("PMIX_RANK", "0"),
            ("PMIX_SIZE", "2"),
            ("OVBENCH_BOOTSTRAP", "x:1"),
        ];
        let env = rank(&explicit, None);
        assert_eq!(env.bootstrap, "x:1");
        let no_size = [("PMIX_RANK", "0")];
        assert!(role(&no_size, None).is_err());
    }

    #[test]
    fn host_lists() {
        assert_eq!(first_host("node[07-09,12],gpu1").as_deref(), Some("node07"));
        assert_eq!(first_host("a1,a2").as_deref(), Some("a1"));
        assert_eq!(first_host("r[3,5]-ib").as_deref(), Some("r3-ib"));
        assert_eq!(first_host("x[1-"), None);
        assert_eq!(first_host(""), None);
        assert_eq!(derive_port("j"), derive_port("j"));
        // Below 32768, where Linux's default ephemeral range starts: a port
        // there can be held by any client socket on the host.
        let ports: std::collections::BTreeSet<u16> = (0..1000)
            .map(|i| derive_port(&format!("slurm:{i}.0")))
            .collect();
        assert!(
            ports.iter().all(|p| (20000..32768).contains(p)),
            "{ports:?}"
        );
        assert!(
            ports.len() > 900,
            "job ids crowd onto {} ports",
            ports.len()
        );
        // Unbalanced brackets: no host, no underflow.
        assert_eq!(first_host("]]]a,b"), None);
    }

    /// SLURM_TASKS_PER_NODE is read from the environment: a repeat count
    /// at u64::MAX saturates, never wraps.
    #[test]
    fn tasks_per_node_counts_saturate() {
        assert_eq!(tasks_on_node("2(x3),1", 0), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 2), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 3), Some(1));
        assert_eq!(tasks_on_node("2(x3),1", 4), None);
        let huge = "2(x18446744073709551615),5(x18446744073709551615)";
        assert_eq!(tasks_on_node(huge, usize::MAX - 1), Some(2));
        assert_eq!(tasks_on_node(huge, usize::MAX), None);
        assert_eq!(tasks_on_node("4294967296", 0), None);
    }
}
