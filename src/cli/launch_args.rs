//! How the ranks start and find each other: `--launcher`, `--hosts`,
//! `--hostfile` and `--bootstrap` (docs/launching.md).

#![deny(clippy::arithmetic_side_effects)]

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// `--launcher`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LauncherArg {
    /// A rank of mpirun/srun when they say so; else ssh with --hosts, else local.
    Auto,
    /// Start --np ranks on this host whatever the environment says.
    Local,
    /// Be a rank of mpirun/srun; an error outside one.
    Env,
    /// Start one rank per --hosts entry over ssh.
    Ssh,
}

/// The launch options every command shares, all under one help heading.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Launch")]
pub struct LaunchArgs {
    /// How ranks start (auto: mpirun/srun's rank when inside their job,
    /// ssh with --hosts, else --np ranks on this host).
    #[arg(long, global = true, value_enum, default_value_t = LauncherArg::Auto)]
    pub launcher: LauncherArg,
    /// Start one rank per host over ssh, in order (repeat a host for more ranks there).
    #[arg(
        long,
        global = true,
        value_name = "HOST,HOST,...",
        conflicts_with = "hostfile"
    )]
    pub hosts: Option<String>,
    /// Hosts for ssh launch, one per line: HOST [slots=N].
    #[arg(long, global = true, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Under mpirun/srun: rank 0's bootstrap service at HOST:PORT when the
    /// job has no PMIx or PMI-2 (the job secret comes from OVBENCH_SECRET);
    /// `off` never uses it (PMIx or PMI-2 must then work alone).
    #[arg(long, global = true, value_name = "HOST:PORT|off")]
    pub bootstrap: Option<String>,
    /// Allow more than 64 ranks per core on this host (a few per core
    /// need no flag).
    #[arg(long, global = true)]
    pub oversubscribe: bool,
}
