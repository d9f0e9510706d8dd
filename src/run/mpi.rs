//! `--transport mpi`: a rank of an MPI job (mpirun, mpiexec, srun). MPI
//! gives the rank and size and carries the address-free setup, so no
//! bootstrap service is joined; per-rank facts reach rank 0 over a
//! communicator of their own ([`MpiControl`]). A rank that fails ends the
//! whole job with `MPI_Abort`, and a rank stuck inside an MPI call past
//! `--timeout` is ended by the job's watchdog.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use ovbench_core::clock::best_clock;
use ovbench_core::{Clock, Communicator, Link, Transport, WorkLoop};
use ovbench_mpi::{GatherChannel, MpiJob, MpiOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{comm, command, rank0_header, rank0_sink, usage};
use crate::cli::Cli;
use crate::control::{collect_values, deposit_value, Control, Deposit};
use crate::env::RankFacts;
use crate::methods::MethodCommand;
use crate::report::{NullSink, Sink};

/// How long the work loop calibrates.
const WORK_CALIBRATION: Duration = Duration::from_millis(20);

/// The variables by which a launcher says this process is a rank of an
/// MPI job, and the job's size among them.
const JOB_SIZE_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_SIZE",
    "SLURM_NTASKS",
];
const JOB_RANK_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
];

/// The launcher's word for this process, if one started it.
fn launched_by(var: &dyn Fn(&str) -> Option<String>) -> Option<(u32, Option<u32>)> {
    let rank = JOB_RANK_VARS
        .iter()
        .find_map(|k| var(k).and_then(|v| v.parse().ok()))?;
    let size = JOB_SIZE_VARS
        .iter()
        .find_map(|k| var(k).and_then(|v| v.parse().ok()));
    Some((rank, size))
}

/// `--transport mpi` runs only inside an MPI job, and then the job, not
/// `--np`, sets the rank count: one line saying what to run instead.
fn check_launch(cli: &Cli, var: &dyn Fn(&str) -> Option<String>) -> Result<(u32, Option<u32>)> {
    let cmd = cli.command.name();
    let Some((rank, size)) = launched_by(var) else {
        bail!(
            "--transport mpi runs inside an MPI job: start it with `mpirun -np {np} ovbench {cmd} --transport mpi` (Open MPI), `mpiexec -n {np} ovbench {cmd} --transport mpi` (MPICH) or `srun --mpi=pmix -n {np} ovbench {cmd} --transport mpi`",
            np = cli.np()
        );
    };
    if cli.gave("np") {
        bail!(
            "--np {}: under an MPI launcher the job's size is the launcher's (this job has {} ranks): drop --np and give the count to mpirun -np / mpiexec -n",
            cli.np(),
            size.map_or("an unknown number of".to_string(), |s| s.to_string())
        );
    }
    Ok((rank, size))
}

/// The command line with the MPI defaults filled in where the user chose
/// nothing: `--proto native` (the library's own point-to-point), and for
/// bcast `--algorithm library` (MPI_Bcast).
fn with_mpi_defaults(cli: &Cli) -> Result<Option<Cli>> {
    let mut extra: Vec<&str> = Vec::new();
    if !cli.gave("proto") {
        extra.extend(["--proto", "native"]);
    }
    if matches!(
        cli.command,
        crate::cli::Command::Method(MethodCommand::Bcast(_))
    ) && !cli.gave("algorithm")
    {
        extra.extend(["--algorithm", "library"]);
    }
    if extra.is_empty() {
        return Ok(None);
    }
    let mut args: Vec<OsString> = std::env::args_os().collect();
    args.extend(extra.into_iter().map(OsString::from));
    let mut filled = Cli::try_parse_from(args)
        .map_err(|e| anyhow!("adding the MPI defaults to the command line: {e}"))?;
    filled.given = cli.given.clone();
    Ok(Some(filled))
}

/// Run this process as a rank of an MPI job.
pub fn run(cli: &Cli) -> Result<i32> {
    let var = |k: &str| std::env::var(k).ok();
    let (_, size) = check_launch(cli, &var).map_err(usage)?;
    let filled = with_mpi_defaults(cli).map_err(usage)?;
    let cli = filled.as_ref().unwrap_or(cli);
    super::check_flags(cli, Some(crate::cli::effects::Launch::Job)).map_err(usage)?;
    if let Some(np) = size {
        super::preflight(cli, np).map_err(usage)?;
    }
    let job = MpiJob::init().context("--transport mpi")?;
    let _watchdog = job
        .watchdog(cli.common.timeout.0)
        .context("starting the MPI watchdog thread")?;
    match run_rank(cli, &job) {
        Ok(()) => Ok(0),
        Err(e) => {
            // The other ranks may wait in MPI for this one: end the job
            // after saying why, rather than leave them to the watchdog.
            eprintln!("ovbench: error: rank {}: {e:#}", job.rank());
            job.abort(1)
        }
    }
}

/// What each rank reports after the run: the MPI calls its transport
/// made, beside the communicator's own operation counts.
#[derive(Debug, Serialize, Deserialize)]
struct MpiCalls {
    rank: u32,
    #[serde(rename = "MPI_Put")]
    puts: u64,
    #[serde(rename = "MPI_Get")]
    gets: u64,
    #[serde(rename = "MPI_Win_flush")]
    flushes: u64,
    writes: u64,
    reads: u64,
}

fn run_rank(cli: &Cli, job: &Arc<MpiJob>) -> Result<()> {
    let common = &cli.common;
    let (rank, size) = (job.rank(), job.size());
    let mut transport = job
        .transport(MpiOptions {
            progress: common.progress,
        })
        .with_context(|| format!("rank {rank}: creating the MPI transport"))?;
    transport
        .connect(&[])
        .with_context(|| format!("rank {rank}: creating the MPI window"))?;
    let calls = transport.call_counts();
    let clock: Arc<dyn Clock> = Arc::from(best_clock());
    let work = WorkLoop::calibrate(clock.clone(), WORK_CALIBRATION);
    // A rank shares its core when the job put more ranks on this host than
    // it has online CPUs (not this process's allowed CPUs: under
    // `mpirun --bind-to core` each rank is allowed one).
    let local = std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE")
        .or_else(|_| std::env::var("MPI_LOCALNRANKS"))
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(size as usize);
    let cpus = crate::env::core_map().len().max(1);
    let shared = local > cpus;
    let mut comm = comm::build(
        common,
        Link::Tagged(Box::new(transport)),
        clock.clone(),
        Box::new(work),
        shared,
    )?;
    super::eager_limit::settle(common, comm.as_mut(), None)?;
    let mut ctl = MpiControl::new(job.gather_channel()?, rank, size);
    deposit_value(&mut ctl, &RankFacts::here(rank))?;
    let facts: Option<Vec<RankFacts>> = collect_values(&mut ctl)
        .with_context(|| format!("rank {rank}: gathering the ranks' facts"))?;
    let mut sink = facts
        .map(|facts| {
            let (mut json, mut lines) = rank0_header(cli, facts, comm.as_ref(), size, &[], true);
            add_mpi_header(job, &mut json, &mut lines);
            let sink = rank0_sink(cli, (json, lines))?;
            Ok::<_, anyhow::Error>(if shared {
                sink.with_shared_cpus(super::rank::SHARED_CPUS)
            } else {
                sink
            })
        })
        .transpose()?;
    let mut null = NullSink;
    let out: &mut dyn Sink = match sink.as_mut() {
        Some(s) => s,
        None => &mut null,
    };
    if let Err(e) = command::execute(&cli.command, common, comm.as_mut(), &mut ctl, out, true) {
        // Tearing the communicator down deregisters its memory, which
        // under osc rdma waits on peers that may themselves wait on this
        // rank: the error would not be told until the watchdog fired.
        // The job is aborted next, so nothing is lost by skipping it.
        std::mem::forget(comm);
        return Err(e);
    }
    report_calls(comm.as_ref(), &calls, &mut ctl, out)?;
    drop(comm);
    sink.map_or(Ok(()), crate::output::ReportSink::finish)
}

/// The MPI calls of every rank into the JSON summary (`mpi_calls`), so a
/// PMPI profiler's counts can be held against ovbench's.
fn report_calls(
    comm: &dyn Communicator,
    calls: &ovbench_mpi::CallCounts,
    ctl: &mut dyn Control,
    out: &mut dyn Sink,
) -> Result<()> {
    let (puts, gets, flushes) = calls.read();
    let ops = comm.op_counts();
    let mine = MpiCalls {
        rank: comm.rank(),
        puts,
        gets,
        flushes,
        writes: ops.writes,
        reads: ops.reads,
    };
    deposit_value(ctl, &mine)?;
    if let Some(all) = collect_values::<MpiCalls>(ctl)? {
        let total = |f: fn(&MpiCalls) -> u64| all.iter().map(f).sum::<u64>();
        let line = format!(
            "MPI one-sided calls (all ranks): {} MPI_Put, {} MPI_Get, {} MPI_Win_flush",
            total(|c| c.puts),
            total(|c| c.gets),
            total(|c| c.flushes)
        );
        out.summary(json!({ "mpi_calls": all }), &[line]);
    }
    Ok(())
}

/// The MPI library and its settings in the header.
fn add_mpi_header(job: &MpiJob, json: &mut Value, lines: &mut Vec<String>) {
    let osc = job
        .osc()
        .map(|o| json!({ "component": o.component, "how": o.how, "rma": o.rma_note() }));
    json["mpi"] = json!({
        "library": job.library(),
        "thread_level": job.thread_level(),
        "tag_ub": job.tag_ub(),
        "osc": osc,
    });
    lines.push(format!("MPI library: {}", job.library()));
    lines.push(format!("MPI threads: {}", job.thread_level()));
}

/// The control channel of an MPI job: per-rank bytes gathered at rank 0
/// on a communicator of their own (`MPI_Gatherv`).
#[derive(Debug)]
pub struct MpiControl {
    channel: GatherChannel,
    rank: u32,
    size: u32,
    pending: Deposit,
}

impl MpiControl {
    fn new(channel: GatherChannel, rank: u32, size: u32) -> MpiControl {
        MpiControl {
            channel,
            rank,
            size,
            pending: Deposit::default(),
        }
    }
}

impl Control for MpiControl {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn deposit(&mut self, mine: Vec<u8>) -> Result<()> {
        self.pending.put(mine)
    }
    fn collect(&mut self) -> Result<Option<Vec<Vec<u8>>>> {
        Ok(self.channel.gather(&self.pending.take()?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        let mut v = vec!["ovbench"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).unwrap()
    }

    #[test]
    fn outside_a_launcher_the_error_names_mpirun() {
        let none = |_: &str| None;
        let e = check_launch(&cli(&["overhead", "--transport", "mpi"]), &none)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mpirun -np 2 ovbench overhead --transport mpi"),
            "{e}"
        );
        assert!(e.contains("mpiexec -n 2"), "{e}");
    }

    #[test]
    fn np_under_a_launcher_is_refused() {
        let ompi = |k: &str| match k {
            "OMPI_COMM_WORLD_RANK" => Some("1".to_string()),
            "OMPI_COMM_WORLD_SIZE" => Some("4".to_string()),
            _ => None,
        };
        let mut with_np = cli(&["latency", "--transport", "mpi", "--np", "2"]);
        with_np.given = vec!["np".into()];
        let e = check_launch(&with_np, &ompi).unwrap_err().to_string();
        assert!(e.contains("drop --np") && e.contains("4 ranks"), "{e}");
        assert_eq!(
            check_launch(&cli(&["latency", "--transport", "mpi"]), &ompi).unwrap(),
            (1, Some(4))
        );
        let hydra = |k: &str| match k {
            "PMI_RANK" => Some("0".to_string()),
            "PMI_SIZE" => Some("2".to_string()),
            _ => None,
        };
        assert_eq!(
            check_launch(&cli(&["latency", "--transport", "mpi"]), &hydra).unwrap(),
            (0, Some(2))
        );
    }
}
