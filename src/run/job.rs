//! Who starts the ranks: this process (locally, or over ssh with
//! `--hosts`/`--hostfile`), or mpirun/srun, whose rank this process is.
//! Everything wrong with that choice is found here, before any rank
//! starts, and reported as a usage error (exit 2).

#![deny(clippy::arithmetic_side_effects)]

use anyhow::{bail, Result};
use ovbench_launcher::{BootstrapUse, JobSource, LauncherChoice, RankEnv, Role};

use crate::cli::launch_args::LauncherArg;
use crate::cli::Cli;

/// How this run proceeds.
#[derive(Debug)]
pub enum Start {
    /// Start `np` ranks on this host.
    Local(u32),
    /// Start one rank per entry over ssh.
    Ssh(Vec<String>),
    /// Be one rank of a job.
    Rank(RankEnv),
}

/// The hosts of `--hosts` or `--hostfile`, if given.
fn hosts(cli: &Cli) -> Result<Option<Vec<String>>> {
    let l = &cli.common.launch;
    if let Some(list) = &l.hosts {
        return ovbench_launcher::ssh::parse_hosts(list).map(Some);
    }
    if let Some(path) = &l.hostfile {
        let text =
            crate::files::input::read_text("--hostfile", path, crate::files::input::TEXT_CAP)?;
        return ovbench_launcher::ssh::parse_hostfile(&text, path).map(Some);
    }
    Ok(None)
}

/// `--bootstrap`: whether rank 0's service may be used.
pub fn bootstrap_use(cli: &Cli) -> BootstrapUse {
    match cli.common.launch.bootstrap.as_deref() {
        Some("off") => BootstrapUse::Off,
        _ => BootstrapUse::Allowed,
    }
}

/// Decides how this run starts; errors are the user's to fix.
pub fn decide(cli: &Cli) -> Result<Start> {
    let l = &cli.common.launch;
    // A rank this launcher started never reads the host list: its stdin
    // (`--hostfile -`) is the launcher's channel, its host may lack the file.
    let hosts = if std::env::var_os("OVBENCH_RANK").is_some() {
        None
    } else {
        hosts(cli)?
    };
    let choice = match l.launcher {
        LauncherArg::Auto => LauncherChoice::Auto,
        LauncherArg::Local => LauncherChoice::Local,
        LauncherArg::Env => LauncherChoice::Env,
        LauncherArg::Ssh => LauncherChoice::Ssh,
    };
    let gave_hosts = l.hosts.is_some() || l.hostfile.is_some();
    if gave_hosts && matches!(choice, LauncherChoice::Local | LauncherChoice::Env) {
        bail!(
            "--hosts/--hostfile start ranks over ssh: drop them, or use --launcher ssh (or auto)"
        );
    }
    if choice == LauncherChoice::Ssh && !gave_hosts {
        bail!("--launcher ssh needs the hosts: add --hosts HOST,HOST,… or --hostfile FILE");
    }
    if let Some(b) = l.bootstrap.as_deref().filter(|b| *b != "off") {
        if !b
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
        {
            bail!("--bootstrap {b:?}: give HOST:PORT (rank 0's host and a free port), or off");
        }
        // For a rank of mpirun/srun only: ovbench's own ranks are told
        // their service by the launcher that started them.
        if std::env::var_os("OVBENCH_RANK").is_none() {
            std::env::set_var("OVBENCH_BOOTSTRAP", b);
        }
    }
    let role = ovbench_launcher::detect_with(choice, Some(cli.np()))?;
    match role {
        Role::Launcher { np } => match hosts {
            Some(h) if cli.gave("np") => bail!(
                "--np {np} with --hosts/--hostfile: the host list sets the rank count ({} ranks); drop --np, or list a host once per rank",
                h.len()
            ),
            Some(h) => Ok(Start::Ssh(h)),
            None => Ok(Start::Local(np)),
        },
        Role::Rank(env) if env.source == JobSource::Launcher => Ok(Start::Rank(env)),
        Role::Rank(env) => {
            if cli.gave("np") {
                let n = cli.np();
                let how = match env.source {
                    JobSource::Slurm => format!("srun -n {n} ovbench …"),
                    _ => format!("mpirun -np {n} ovbench … (or srun -n {n})"),
                };
                bail!(
                    "--np {n}: this process is rank {} of {} started by {}, which sets the rank count: run `{how}` and drop --np",
                    env.rank,
                    env.size,
                    env.launcher_name()
                );
            }
            if gave_hosts {
                bail!(
                    "--hosts/--hostfile: this process is already rank {} of {} started by {}; start ovbench outside the job to launch over ssh, or drop them",
                    env.rank,
                    env.size,
                    env.launcher_name()
                );
            }
            Ok(Start::Rank(env))
        }
    }
}
