//! The run flow: choose the role (launcher, rank, or the in-process
//! simulation), build the communicator, print the header on rank 0 and
//! run the command.
//!
//! * No job environment, a real transport: this process is the launcher;
//!   it spawns `--np` ranks of itself and exits with their status.
//! * A rank (spawned, or under srun/mpirun): `rank::run`.
//! * `--transport sim`: no processes; every rank is a thread on virtual
//!   time (`sim::run`).

mod comm;
mod command;
mod eager_limit;
pub mod features;
pub mod job;
mod launch_report;
#[cfg(feature = "mpi")]
mod mpi;
mod protocols;
mod rank;
#[cfg(feature = "sim")]
mod sim;

use std::ffi::OsString;
use std::io::Write;

use anyhow::{bail, Result};
use ovbench_core::{Communicator, Progress};
use ovbench_launcher::LaunchOptions;
use serde_json::Value;

pub use command::execute;
use command::execute_rank;

use crate::cli::common::{ProtoArg, TransportKind};
use crate::cli::effects::Launch;
use crate::cli::{Cli, Command};
use crate::env::{Environment, RankFacts};
use crate::export::FileExports;
use crate::header::{self, RunFacts};
use crate::methods::MethodCommand;
use crate::output::{ReportSink, SweepProgress};

/// A command line that cannot run, found before any rank starts: the
/// process exits 2, as for the parser's own errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub(crate) fn usage(e: anyhow::Error) -> anyhow::Error {
    anyhow::Error::new(UsageError(format!("{e:#}")))
}

/// Run the parsed command line; the process's exit code on success.
pub fn run(cli: &Cli) -> Result<i32> {
    if let Command::Tool(t) = &cli.command {
        crate::tools::check_options(cli).map_err(usage)?;
        return crate::tools::run(t);
    }
    features::check(cli.common.transport).map_err(usage)?;
    crate::files::run_files::check(cli).map_err(usage)?;
    if cli.protos.len() > 1 {
        return protocols::run(cli);
    }
    let nps = cli.nps();
    if nps.len() > 1
        && !(cli.common.transport == TransportKind::Sim
            && matches!(cli.command, Command::Method(MethodCommand::Bcast(_))))
    {
        return Err(usage(anyhow::anyhow!(
            "a list of rank counts (--np {}) is bcast's sweep under --transport sim; give one --np here",
            nps.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        )));
    }
    #[cfg(feature = "sim")]
    if cli.common.transport == TransportKind::Sim {
        let model = sim::params(cli).map_err(usage)?;
        sim::check_clock(cli, &model).map_err(usage)?;
        for &np in &nps {
            preflight(cli, np).map_err(usage)?;
            ovbench_sim::capacity::check(np).map_err(|e| usage(anyhow::anyhow!(e)))?;
        }
        // Ctrl-C, SIGTERM and SIGHUP stop the simulated ranks' waits as
        // they stop a real rank's; main exits with 128 + the signal.
        ovbench_launcher::signals::catch()
            .map_err(|e| anyhow::anyhow!("catching SIGTERM, SIGINT and SIGHUP: {e}"))?;
        let done = sim::run(cli).map(|()| 0);
        return match ovbench_launcher::signals::requested() {
            Some(sig) => {
                let name = ovbench_core::stop::signal_name(sig);
                let _ = writeln!(
                    std::io::stderr(),
                    "ovbench: received {name}; the simulation stopped (exit {}; the JSON so far is kept, complete: false)",
                    128 + sig
                );
                Ok(128 + sig)
            }
            None => done,
        };
    }
    #[cfg(feature = "mpi")]
    if cli.common.transport == TransportKind::Mpi {
        return mpi::run(cli);
    }
    match job::decide(cli).map_err(usage)? {
        job::Start::Local(np) => {
            check_flags(cli, Some(Launch::Local)).map_err(usage)?;
            preflight(cli, np).map_err(usage)?;
            local_capacity(cli, np).map_err(usage)?;
            launch(cli, np)
        }
        job::Start::Ssh(hosts) => {
            check_flags(cli, Some(Launch::Ssh)).map_err(usage)?;
            preflight(cli, hosts.len() as u32).map_err(usage)?;
            launch_ssh(cli, &hosts)
        }
        job::Start::Rank(env) => {
            if env.source != ovbench_launcher::JobSource::Launcher {
                // mpirun/srun started the ranks: each checks what the
                // launcher would have, and exits 2 the same way.
                check_flags(cli, Some(Launch::Job)).map_err(usage)?;
                preflight(cli, env.size).map_err(usage)?;
            }
            rank::run(env, cli).map(|()| 0)
        }
    }
}

/// What a rank of `cmd` allocates for its messages, and the option that
/// sets it: the largest message's send and receive buffers (logp: eight
/// times --max-size, its k_max may go that far; bcast and overlap: one).
#[deny(clippy::arithmetic_side_effects)]
fn message_memory(cmd: &Command) -> (&'static str, usize, usize) {
    let two = |flag, b: usize| (flag, b, b.saturating_mul(2));
    match cmd {
        Command::Latency(a) => two("--sizes", a.sweep.sizes.max()),
        Command::Bw(w) | Command::Bibw(w) | Command::Msgrate(w) => {
            two("--sizes", w.sweep.sizes.max())
        }
        Command::Method(m) => match m {
            MethodCommand::Overhead(a) => match (&a.sizes, a.msgsize) {
                (Some(s), _) => ("--sizes", s.max(), s.max()),
                (None, Some(b)) => ("--msgsize", b.bytes(), b.bytes()),
                (None, None) => ("--msgsize", 8, 8),
            },
            MethodCommand::Logp(a) => {
                let b = a.max_size.bytes();
                ("--max-size", b, b.saturating_mul(8))
            }
            MethodCommand::Bcast(a) => ("--msgsize", a.msgsize.bytes(), a.msgsize.bytes()),
            MethodCommand::Commtest(a) => two("--total", a.total.bytes()),
            MethodCommand::Overlap(a) => ("--sizes", a.sizes.max(), a.sizes.max()),
        },
        Command::Tool(_) => ("", 0, 0),
    }
}

/// The messages of `np` ranks fit in the memory this process may take:
/// an oversized `--sizes 1024G` is refused here rather than by a rank's
/// failed (or, under sim, aborting) allocation or the OOM killer. The
/// limits are the host's MemAvailable, the memory cgroups' and RLIMIT_AS
/// (per process: every simulated rank shares this one).
#[deny(clippy::arithmetic_side_effects)]
fn check_memory(cli: &Cli, np: u32) -> Result<()> {
    let (flag, largest, per_rank) = message_memory(&cli.command);
    let need = per_rank.saturating_mul(np as usize) as u64;
    let limits = ovbench_core::host_limits::HostLimits::default();
    let one_process = cli.common.transport == TransportKind::Sim;
    let process_need = if one_process { need } else { per_rank as u64 };
    let binding = [
        limits.memory().map(|l| (need, l)),
        limits.address_space().map(|l| (process_need, l)),
    ]
    .into_iter()
    .flatten()
    .find(|(n, l)| *n > l.left);
    if let Some((n, l)) = binding {
        bail!(
            "{flag}: messages of {} need about {} MiB ({np} ranks × {} MiB of buffers) and {} MiB are left under {}: use smaller {flag} or fewer ranks",
            crate::sizes::format_bytes(largest),
            n >> 20,
            per_rank >> 20,
            l.left >> 20,
            l.what
        );
    }
    Ok(())
}

/// An option that has no effect in this run is a mistake to point out,
/// not to ignore: the table of where each acts (`cli::effects`) says.
/// `launch` is how the ranks start, where that is known.
fn check_flags(cli: &Cli, launch: Option<Launch>) -> Result<()> {
    match crate::cli::effects::refusal(cli, launch) {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => Ok(()),
    }
}

/// Errors that need no rank to find, reported once before any starts.
#[deny(clippy::arithmetic_side_effects)]
pub fn preflight(cli: &Cli, np: u32) -> Result<()> {
    check_flags(cli, None)?;
    let c = &cli.common;
    // Where the rank count came from, as the refusals name it: a host
    // list sets it where --np was not given.
    let l = &c.launch;
    let ranks = if np == 1 { "rank" } else { "ranks" };
    let given = match (&l.hosts, &l.hostfile) {
        (Some(_), _) if c.np.is_none() => format!("{np} {ranks} from --hosts, one per host"),
        (_, Some(_)) if c.np.is_none() => format!("{np} {ranks} from --hostfile, one per host"),
        _ => format!("--np {np}"),
    };
    if c.proto == ProtoArg::Native && matches!(c.transport, TransportKind::Tcp | TransportKind::Sim)
    {
        bail!(ovbench_core::engine_comm::native_unavailable(
            c.transport.name()
        ));
    }
    if let Command::Method(MethodCommand::Bcast(a)) = &cli.command {
        if a.algorithm == crate::methods::bcast::Algorithm::Library
            && c.transport != TransportKind::Mpi
        {
            bail!("--algorithm library is the MPI library's own broadcast (MPI_Bcast): add --transport mpi (under mpirun), or choose binomial, linear, backward or flat");
        }
    }
    if c.frag_size.is_some_and(|f| f.bytes() == 0) {
        bail!("--frag-size 0: a fragment needs at least 1 byte: give a size such as 64K, or drop --frag-size for the engine's");
    }
    if let Command::Method(m) = &cli.command {
        if c.proto == ProtoArg::Raw {
            match m {
                MethodCommand::Overlap(a) if a.write_xfer_table.is_none() => bail!(
                    "--proto raw: under it overlap measures xfer_time only: add --write-xfer-table FILE, then run the protocols with --xfer-table FILE"
                ),
                MethodCommand::Overlap(_) => {}
                _ => bail!(crate::methods::raw_refused()),
            }
        }
        crate::methods::preflight_given(m, np, &given)?;
    }
    match &cli.command {
        Command::Latency(_) if np < 2 => {
            bail!("latency runs between ranks 0 and 1: use --np 2 or more, or list 2 hosts (got {given})")
        }
        Command::Bw(w) | Command::Bibw(w) | Command::Msgrate(w)
            if u64::from(np) < u64::from(w.pairs).saturating_mul(2) =>
        {
            let need = u64::from(w.pairs).saturating_mul(2);
            bail!(
                "{} with --pairs {} needs {need} ranks (ranks i and i+{} pair up): use --np {need} (got {given})",
                cli.command.name(),
                w.pairs,
                w.pairs,
            )
        }
        _ => Ok::<(), anyhow::Error>(()),
    }?;
    check_memory(cli, np)?;
    check_locked_memory(cli)
}

/// Bytes of /dev/shm one rank of libfabric's shm provider maps (its
/// segment, named after the rank's pid).
const OFI_SHM_SEGMENT: u64 = 16 << 20;

/// `np` ranks fit this host: processes (RLIMIT_NPROC, free tasks), ranks
/// per core, and /dev/shm for libfabric's shm provider.
#[deny(clippy::arithmetic_side_effects)]
fn local_capacity(cli: &Cli, np: u32) -> Result<()> {
    use ovbench_launcher::capacity;
    capacity::check_local(np).map_err(|e| anyhow::anyhow!(e))?;
    let cpus = ovbench_launcher::current_cpus().map_or(1, |c| c.len());
    capacity::check_per_core(np, cpus, cli.common.launch.oversubscribe)
        .map_err(|e| anyhow::anyhow!(e))?;
    let c = &cli.common;
    if c.transport == TransportKind::Ofi && c.fabric.ofi.provider == "shm" {
        let need = OFI_SHM_SEGMENT.saturating_mul(u64::from(np));
        let what = format!("{np} ranks of libfabric's shm provider (16 MiB each)");
        capacity::check_shm_space(std::path::Path::new("/dev/shm"), need, &what)
            .map_err(|e| anyhow::anyhow!(e))?;
    }
    Ok(())
}

/// Verbs registers every message buffer: they must fit under the
/// locked-memory limit.
#[deny(clippy::arithmetic_side_effects)]
fn check_locked_memory(cli: &Cli) -> Result<()> {
    if cli.common.transport != TransportKind::Verbs {
        return Ok(());
    }
    let (_, _, per_rank) = message_memory(&cli.command);
    ovbench_launcher::capacity::check_memlock(per_rank as u64).map_err(|e| anyhow::anyhow!(e))
}

/// Spawn the ranks on this host and wait for them.
fn launch(cli: &Cli, np: u32) -> Result<i32> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let opts = LaunchOptions {
        timeout: cli.common.timeout.0,
        progress_threads: u32::from(cli.common.progress == Progress::Thread),
        on_killed: ON_KILLED,
        ..LaunchOptions::default()
    };
    ovbench_launcher::launch_local(np, &args, &opts)
}

/// Start one rank per host over ssh, after checking that every host
/// runs this same binary (a failed check is a usage error: no rank ran).
fn launch_ssh(cli: &Cli, hosts: &[String]) -> Result<i32> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let opts = LaunchOptions {
        timeout: cli.common.timeout.0,
        progress_threads: u32::from(cli.common.progress == Progress::Thread),
        ..LaunchOptions::default()
    };
    let program = std::env::current_exe()?;
    let check = cli.common.timeout.0.min(std::time::Duration::from_secs(30));
    ovbench_launcher::ssh::check_hosts(hosts, &program, check).map_err(usage)?;
    ovbench_launcher::ssh::launch_ssh(hosts, &args, &opts)
}

/// What a rank killed by a signal leaves that its exit would have removed:
/// its libfabric shm segments, 16 MiB each, named after its pid.
#[cfg(feature = "ofi")]
const ON_KILLED: Option<fn(u32)> = Some(|pid| {
    for s in ovbench_ofi::shm_segments_of(pid) {
        let _ = std::fs::remove_file(s);
    }
});
#[cfg(not(feature = "ofi"))]
const ON_KILLED: Option<fn(u32)> = None;

/// Rank 0's sink for `header` (from [`rank0_header`]): the header
/// printed, the export files created.
pub(crate) fn rank0_sink(cli: &Cli, header: (Value, Vec<String>)) -> Result<ReportSink> {
    let (json, lines) = header;
    let files = FileExports::new(cli.common.json.as_deref(), cli.common.csv.as_deref());
    let c = &cli.common;
    let shown = !c.quiet
        && c.progress_bar
            .shows(crate::output::stderr_reaches_terminal());
    let progress = SweepProgress::new(&cli.command.name(), shown);
    // Under --json -, stdout carries the JSON alone: the tables go to stderr.
    let out = crate::files::stdout::tables(c.json.as_deref());
    Ok(ReportSink::new(json, &lines, files, out)?.with_progress(progress))
}

/// Rank 0's environment and run header: its JSON and the lines to print.
/// `model` adds the simulator's parameters. Warnings go into the header
/// and, with `echo_warnings`, to stderr (the local launcher has already
/// said its own there).
pub(crate) fn rank0_header(
    cli: &Cli,
    facts: Vec<RankFacts>,
    comm: &dyn Communicator,
    np: u32,
    model: &[(String, String)],
    echo_warnings: bool,
) -> (Value, Vec<String>) {
    let env = Environment::capture(facts);
    let info = comm.info();
    let clock = comm.clock().info();
    let name = cli.command.name();
    let mut h = header::build(
        &env,
        &RunFacts {
            command: &name,
            common: &cli.common,
            comm: &info,
            clock: &clock,
            work_unit_ns: comm.work_unit_ns(),
            np,
        },
    );
    if echo_warnings && !cli.common.quiet {
        for w in &h.warnings {
            eprintln!("ovbench: warning: {w}");
        }
    }
    if !model.is_empty() {
        // The lines come from the sim transport's own facts; JSON keeps the model apart.
        let m: serde_json::Map<String, Value> = model
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        h.json["sim_model"] = Value::Object(m);
    }
    // overhead --nohdr (mpi_overhead's -n): no header lines; JSON keeps them.
    let lines = if wants_no_header(&cli.command) {
        Vec::new()
    } else {
        h.lines
    };
    (h.json, lines)
}

/// Whether the command asked to leave out the header lines.
fn wants_no_header(cmd: &Command) -> bool {
    matches!(cmd, Command::Method(MethodCommand::Overhead(a)) if a.nohdr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn check(args: &[&str], np: u32) -> Result<()> {
        let mut v = vec!["ovbench"];
        v.extend_from_slice(args);
        preflight(&Cli::try_parse_from(v).unwrap(), np)
    }

    #[test]
    fn rank_counts_and_protocols_are_checked_before_launch() {
        assert!(check(&["latency"], 2).is_ok());
        let e = check(&["latency"], 1).unwrap_err().to_string();
        assert!(e.contains("--np 2"), "{e}");
        let e = check(&["bw", "--pairs", "3"], 4).unwrap_err().to_string();
        assert!(e.contains("needs 6 ranks") && e.contains("--np 6"), "{e}");
        assert!(check(&["msgrate", "--pairs", "2"], 4).is_ok());
        let e = check(&["latency", "--proto", "native"], 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tcp transport lacks"), "{e}");
        assert!(check(&["overhead"], 2).is_ok());
        let e = check(&["bcast"], 2).unwrap_err().to_string();
        assert!(e.contains("3 ranks") && e.contains("--np 2"), "{e}");
    }

    #[test]
    fn oversized_messages_and_bad_method_options_are_refused_naming_the_flag() {
        for (args, flag) in [
            (&["latency", "--sizes", "0:1P"][..], "--sizes"),
            (&["overhead", "--msgsize", "1P"][..], "--msgsize"),
            (&["commtest", "--total", "1P"][..], "--total"),
            (&["logp", "--eps", "0"][..], "--eps"),
            (&["bcast", "--reps", "0"][..], "--reps"),
            (
                &["latency", "--proto", "pipelined", "--frag-size", "0"][..],
                "--frag-size",
            ),
            (&["logp", "--proto", "raw"][..], "--proto raw"),
        ] {
            let e = check(args, 4).unwrap_err().to_string();
            assert!(e.starts_with(flag), "{args:?}: {e}");
        }
        assert!(check(&["latency", "--sizes", "0:64K"], 2).is_ok());
    }

    #[test]
    fn counts_past_their_bounds_are_refused_by_the_parser_naming_the_flag() {
        let refused = |args: &[&str]| {
            let v = std::iter::once("ovbench").chain(args.iter().copied());
            Cli::try_parse_from(v).unwrap_err().to_string()
        };
        for (args, flag) in [
            (
                &["latency", "--iters", "18446744073709551615"][..],
                "--iters",
            ),
            (&["bw", "--warmup", "4294967295"][..], "--warmup"),
            (&["bw", "--window", "100000000"][..], "--window"),
            (&["overlap", "--max-comp", "1e12"][..], "--max-comp"),
            (&["overlap", "--steps", "4294967295"][..], "--steps"),
            (&["bcast", "--reps", "9223372036854775808"][..], "--reps"),
            (&["logp", "--max-its", "4294967295"][..], "--max-its"),
            (&["commtest", "--iters", "4294967295"][..], "--iters"),
        ] {
            let e = refused(args);
            assert!(e.contains(flag) && e.contains("give "), "{args:?}: {e}");
        }
        // --pairs near u32::MAX asks for more ranks than a u32 holds: no overflow.
        let e = check(&["bw", "--pairs", "4294967295"], 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs 8589934590 ranks"), "{e}");
    }

    #[test]
    fn overhead_nohdr_leaves_out_the_header_lines() {
        let cmd = |args: &[&str]| {
            let mut v = vec!["ovbench"];
            v.extend_from_slice(args);
            Cli::try_parse_from(v).unwrap().command
        };
        assert!(wants_no_header(&cmd(&["overhead", "--nohdr"])));
        assert!(!wants_no_header(&cmd(&["overhead"])));
        assert!(!wants_no_header(&cmd(&["latency"])));
    }
}
