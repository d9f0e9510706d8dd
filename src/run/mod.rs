//! The run flow: choose the role (launcher, rank, or the in-process
//! simulation), build the communicator, print the header on rank 0 and
//! run the command.
//!
//! * No job environment, a real transport: this process is the launcher;
//!   it spawns `--np` ranks of itself and exits with their status.
//! * A rank (spawned, or under srun/mpirun): [`rank::run`].
//! * `--transport sim`: no processes; every rank is a thread on virtual
//!   time ([`sim::run`]).

mod comm;
mod command;
pub mod features;
mod rank;
#[cfg(feature = "sim")]
mod sim;

use std::ffi::OsString;

use anyhow::Result;
use ovbench_core::{Communicator, Progress};
use ovbench_launcher::{LaunchOptions, Role};
use serde_json::Value;

pub use command::execute;

use crate::cli::Cli;
use crate::common::TransportKind;
use crate::env::{Environment, RankFacts};
use crate::export::FileExports;
use crate::header::{self, RunFacts};
use crate::output::ReportSink;

/// Run the parsed command line; the process's exit code on success.
pub fn run(cli: &Cli) -> Result<i32> {
    features::check(cli.common.transport)?;
    for path in [&cli.common.json, &cli.common.csv].into_iter().flatten() {
        crate::export::check_writable(path)?;
    }
    #[cfg(feature = "sim")]
    if cli.common.transport == TransportKind::Sim {
        return sim::run(cli).map(|()| 0);
    }
    match ovbench_launcher::detect(Some(cli.common.np))? {
        Role::Launcher { np } => launch(cli, np),
        Role::Rank(env) => rank::run(env, cli).map(|()| 0),
    }
}

/// Spawn the ranks on this host and wait for them.
fn launch(cli: &Cli, np: u32) -> Result<i32> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let opts = LaunchOptions {
        timeout: cli.common.timeout.0,
        progress_threads: u32::from(cli.common.progress == Progress::Thread),
        ..LaunchOptions::default()
    };
    ovbench_launcher::launch_local(np, &args, &opts)
}

/// Rank 0's sink: the environment and run header printed, the export
/// files created. `model` adds the simulator's parameters.
pub(crate) fn rank0_sink(
    cli: &Cli,
    facts: Vec<RankFacts>,
    comm: &dyn Communicator,
    np: u32,
    model: &[(String, String)],
) -> Result<ReportSink> {
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
    for w in &h.warnings {
        eprintln!("ovbench: warning: {w}");
    }
    if !model.is_empty() {
        let line = model
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        h.lines.push(format!("sim model: {line}"));
        let m: serde_json::Map<String, Value> = model
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        h.json["sim_model"] = Value::Object(m);
    }
    let files = FileExports::new(cli.common.json.as_deref(), cli.common.csv.as_deref());
    ReportSink::new(h.json, &h.lines, files, Box::new(std::io::stdout()))
}
