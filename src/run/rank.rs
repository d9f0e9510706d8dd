//! One rank of a real job (spawned by the local launcher, srun or
//! mpirun): pin, join the bootstrap service, create and connect the
//! transport, build the communicator, print the header on rank 0, run.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use ovbench_core::clock::best_clock;
use ovbench_core::{announce, watch, Clock, Link, Progress, WorkLoop};
use ovbench_launcher::route::{self, HostId, Reach};
use ovbench_launcher::{JobSource, RankEnv};

use super::{comm, execute_rank, rank0_header, rank0_sink};
use crate::cli::common::TransportKind;
use crate::cli::Cli;
use crate::control::{collect_values, deposit_value, BootstrapControl};
use crate::env::RankFacts;

/// How long the work loop calibrates.
const WORK_CALIBRATION: Duration = Duration::from_millis(20);

/// Run this rank to completion.
pub fn run(env: RankEnv, cli: &Cli) -> Result<()> {
    let common = &cli.common;
    let timeout = common.timeout.0;
    let (rank, size) = (env.rank, env.size);
    let launched = env.source == JobSource::Launcher;
    if let Some(cpu) = env.cpu {
        ovbench_launcher::pin_self(cpu).with_context(|| format!("rank {rank}"))?;
    }
    // A teardown's SIGTERM (or Ctrl-C) unwinds the rank, closing its
    // transports and their shared-memory files.
    ovbench_launcher::signals::catch()
        .with_context(|| format!("rank {rank}: catching SIGTERM, SIGINT and SIGHUP"))?;
    watch::set_phase("start-up, joining the job");
    let boot = ovbench_launcher::join(&env, super::job::bootstrap_use(cli), timeout)
        .with_context(|| format!("rank {rank}: joining the job's address exchange"))?;
    // Every wait from here on reports a stall to the job and stops when
    // the job is gone (docs/watchdog.md).
    watch::install(boot.watchdog());
    watch::set_phase(format!(
        "start-up, connecting the {} transport",
        common.transport
    ));
    let mut ctl = BootstrapControl::new(boot);
    let reach = reach(&mut ctl, rank)?;
    let mut transport = transport(common.transport, rank, size, cli, &reach)?;
    let announced = ctl
        .bootstrap()
        .allgather(&announcement(rank, &transport.address()))
        .with_context(|| format!("rank {rank}: exchanging transport addresses"))?;
    let addrs = announce::addresses(&announced).with_context(|| format!("rank {rank}"))?;
    transport
        .connect(&addrs)
        .with_context(|| format!("rank {rank}: connecting the {} transport", common.transport))?;
    let clock: Arc<dyn Clock> = Arc::from(best_clock());
    let work = WorkLoop::calibrate(clock.clone(), WORK_CALIBRATION);
    let threads = u32::from(common.progress == Progress::Thread);
    let shared = env.oversubscribed(threads);
    let mut comm = comm::build(common, transport, clock.clone(), Box::new(work), shared)?;
    super::eager_limit::settle(common, comm.as_mut(), None)?;

    watch::set_phase("start-up, gathering the ranks' facts");
    deposit_value(&mut ctl, &RankFacts::here(rank))?;
    let facts: Option<Vec<RankFacts>> = collect_values(&mut ctl)
        .with_context(|| format!("rank {rank}: gathering the ranks' facts"))?;
    let sink = facts
        .map(|facts| {
            let mut header = rank0_header(cli, facts, comm.as_ref(), size, &[], !launched);
            super::launch_report::add(&mut header, &env, ctl.bootstrap(), &reach);
            let sink = rank0_sink(cli, header)?;
            Ok::<_, anyhow::Error>(if shared {
                sink.with_shared_cpus(SHARED_CPUS)
            } else {
                sink
            })
        })
        .transpose()?;
    execute_rank(cli, comm.as_mut(), &mut ctl, rank, sink, true)?;
    watch::set_phase(format!("{}, finishing", cli.command.name()));
    drop(comm);
    ctl.into_inner()
        .finish()
        .with_context(|| format!("rank {rank}: leaving the bootstrap service"))
}

/// Why rows are marked when the ranks share CPUs.
pub(crate) const SHARED_CPUS: &str =
    "the ranks (and their progress threads) on this host outnumber its CPUs, so they share them";

/// What this rank announces at connect: its engine's wire version, then
/// its transport's address.
fn announcement(rank: u32, address: &[u8]) -> Vec<u8> {
    // Test hook: OVBENCH_TEST_WIRE_VERSION=RANK=V makes rank RANK announce
    // wire version V, as a rank of another build would
    // (tests/wire_version.rs).
    #[cfg(feature = "test-hooks")]
    if let Some(v) = std::env::var("OVBENCH_TEST_WIRE_VERSION")
        .ok()
        .and_then(|s| {
            let (r, v) = s.split_once('=')?;
            (r.parse::<u32>().ok()? == rank).then(|| v.parse::<u8>().ok())?
        })
    {
        return announce::announce_as(v, address);
    }
    let _ = rank;
    announce::announce(address)
}

/// Where this rank's transport listens: every rank says where it runs,
/// and a job across hosts (or network namespaces) leaves loopback.
fn reach(ctl: &mut BootstrapControl, rank: u32) -> Result<Reach> {
    let here = HostId::here();
    let all = ctl
        .bootstrap()
        .allgather(&here.encode())
        .with_context(|| format!("rank {rank}: exchanging host descriptions"))?;
    let all: Vec<HostId> = all
        .iter()
        .map(|b| HostId::decode(b))
        .collect::<Result<_>>()?;
    // Test hook: a wrong route, so a rank on another host meets a refused
    // connection at start-up (tests/cluster_ssh.rs).
    #[cfg(feature = "test-hooks")]
    if std::env::var_os("OVBENCH_TEST_ROUTE").is_some_and(|v| v == "loopback") {
        return Ok(Reach::Loopback);
    }
    route::choose(&here, &all).with_context(|| format!("rank {rank}"))
}

/// Create this rank's endpoint of the chosen transport, listening where
/// `reach` says (the user's --ucx-net-devices / --ofi-node win).
fn transport(kind: TransportKind, rank: u32, size: u32, cli: &Cli, reach: &Reach) -> Result<Link> {
    match kind {
        #[cfg(feature = "tcp")]
        TransportKind::Tcp => {
            let opts = ovbench_tcp::TcpOptions {
                progress: cli.common.progress,
                timeout: cli.common.timeout.0,
                bind: reach.ip(),
                ..Default::default()
            };
            let made = ovbench_tcp::TcpTransport::new(rank, size, opts);
            created(made, rank, "TCP transport", |t| Link::Plain(t))
        }
        #[cfg(feature = "verbs")]
        TransportKind::Verbs => {
            let opts = cli.common.fabric.verbs.options(cli.common.progress)?;
            let made = ovbench_verbs::VerbsTransport::new(rank, size, opts);
            created(made, rank, "verbs transport", |t| Link::Plain(t))
        }
        #[cfg(feature = "ucx")]
        TransportKind::Ucx => {
            let mut opts = cli.common.fabric.ucx.options(cli.common.progress);
            let user_chose = std::env::var_os("UCX_NET_DEVICES").is_some();
            if *reach != Reach::Loopback && opts.net_devices.is_none() && !user_chose {
                opts.net_devices = Some(reach.interface().to_string());
            }
            // Held as its tagged protocol, so --proto native reaches the
            // tagged calls directly (see Link).
            let made = ovbench_ucx::UcxTransport::new(rank, size, opts);
            created(made, rank, "UCX transport", |t| Link::Tagged(t))
        }
        #[cfg(feature = "ofi")]
        TransportKind::Ofi => {
            let mut opts = cli.common.fabric.ofi.options(cli.common.progress);
            if *reach != Reach::Loopback && opts.node.is_none() {
                opts.node = Some(reach.ip().to_string());
            }
            let what = format!("libfabric transport (provider {})", opts.provider);
            let made = ovbench_ofi::OfiTransport::new(rank, size, opts);
            created(made, rank, &what, |t| Link::Tagged(t))
        }
        other => {
            // Not compiled in (feature and package named), or mpi, which
            // no build has yet; sim never reaches here (it runs in-process).
            super::features::check(other)?;
            anyhow::bail!(
                "the {other} transport cannot start as a separate rank (rank {rank} of {size}, {})",
                cli.command.name()
            )
        }
    }
}

/// A created endpoint, held as `held` makes it (through the plain
/// contract or as its tagged protocol, see Link), or why creating `what`
/// failed on `rank`.
#[cfg(any(feature = "tcp", feature = "verbs", feature = "ucx", feature = "ofi"))]
fn created<T, E>(
    made: Result<T, E>,
    rank: u32,
    what: &str,
    held: impl FnOnce(Box<T>) -> Link,
) -> Result<Link>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let made = made.with_context(|| format!("rank {rank}: creating the {what}"))?;
    Ok(held(Box::new(made)))
}
