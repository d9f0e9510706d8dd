//! The command line (clap derive): the common options of
//! [`crate::cli::common::CommonArgs`], global so they may stand
//! before or after the subcommand, and one subcommand per benchmark and
//! method.

#![deny(clippy::arithmetic_side_effects)]

pub mod common;
pub mod counts;
pub mod effects;
pub mod examples;
pub mod fabric_args;
pub mod launch_args;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::bench::latency::LatencyArgs;
use crate::bench::window::WindowArgs;
use crate::cli::common::CommonArgs;
use crate::methods::MethodCommand;

/// Measures what communication really costs: latency, bandwidth, host
/// overhead, overlap, LogP and broadcast over verbs, UCX, libfabric and
/// TCP (and a LogGP model), with ovbench's own eager/rendezvous protocols
/// or the library's.
#[derive(Debug, Parser)]
#[command(
    name = "ovbench",
    version,
    about,
    after_help = "Sizes: bytes with K/M/G/T suffixes (K = 1024); MIN:MAX is MIN then powers of two up to MAX; lists like 8,1K,1M.\nTables show µs and MB/s (10^6 B/s); JSON uses ns and bytes_per_sec.\nExamples:\n  ovbench latency --sizes 0:64K --verify\n  ovbench bw --proto rdma-read --json bw.json\n  ovbench overhead --transport sim --sim L=1us,os=300ns\n  mpirun -np 2 ovbench latency --transport ucx     # ranks of mpirun, addresses through PMIx\n  srun -n 4 ovbench bcast                          # ranks of a Slurm step\n  ovbench latency --hosts node1,node2 --verify     # one rank per host over ssh\n  ovbench bcast --hostfile hosts.txt               # HOST [slots=N] per line\nExit status: 0 done; 2 a command line that cannot run (before any rank starts); 1 a failure at run time; 124 a rank outran --timeout after another finished; 128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP) or a rank killed by it (docs/exit-codes.md)."
)]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Command,
    /// The options the user gave (their clap ids), for the checks of
    /// options that do not apply to the run; empty when not parsed by
    /// [`Cli::parse_args`].
    #[arg(skip)]
    pub given: Vec<String>,
    /// Every protocol of `--proto` (a list runs each in turn); empty when
    /// not parsed by [`Cli::parse_args`] (then `common.proto` alone).
    #[arg(skip)]
    pub protos: Vec<common::ProtoArg>,
}

/// What to measure.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ping-pong latency (RTT/2) per size: min, p50, p90, p99, p99.9, max, mean, stddev.
    Latency(LatencyArgs),
    /// Windowed one-direction bandwidth (osu_bw).
    Bw(WindowArgs),
    /// Windowed bidirectional bandwidth (osu_bibw).
    Bibw(WindowArgs),
    /// Message rate with a window of messages in flight (osu_mbw_mr).
    Msgrate(WindowArgs),
    #[command(flatten)]
    Method(MethodCommand),
    #[command(flatten)]
    Tool(crate::tools::ToolCommand),
}

impl Cli {
    /// Parse the process's arguments (exiting as clap does on an error),
    /// noting which options were given on the command line.
    pub fn parse_args() -> Cli {
        let m = Cli::command_checked()
            .try_get_matches()
            .unwrap_or_else(|e| exit_on(e));
        Cli::from_matches(&m).unwrap_or_else(|e| exit_on(e))
    }

    /// The command line from clap's matches, with what the derive cannot
    /// fill: the options given, the `--proto` list, logp's `--sizes`.
    pub fn from_matches(m: &ArgMatches) -> Result<Cli, clap::Error> {
        let mut cli = Cli::from_arg_matches(m)?;
        cli.given = given_ids(m);
        cli.protos = given_protos(m);
        if let Command::Method(MethodCommand::Logp(a)) = &mut cli.command {
            a.apply_sizes();
        }
        Ok(cli)
    }

    /// The command, with negative numbers taken as values everywhere, so
    /// that `--warmup -1` or `--sizes -1` is refused by the option's own
    /// parser, naming the option, rather than read as an unknown flag.
    pub fn command_checked() -> clap::Command {
        // --version names the transports compiled in (once per process).
        static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let version = VERSION.get_or_init(|| {
            format!(
                "{} (transports: {})",
                env!("CARGO_PKG_VERSION"),
                crate::devices::compiled_transports()
            )
        });
        let mut cmd = Cli::command()
            .allow_negative_numbers(true)
            .version(version.as_str());
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for n in names {
            let help = examples::after_help(&n);
            cmd = cmd.mut_subcommand(n, |s| {
                let s = s.allow_negative_numbers(true);
                match help {
                    Some(h) => s.after_help(h),
                    None => s,
                }
            });
        }
        cmd
    }

    /// Whether the user gave option `id` (its clap id, e.g. `ucx_tls`).
    pub fn gave(&self, id: &str) -> bool {
        self.given.iter().any(|g| g == id)
    }

    /// The rank counts of `--np`, or the command's default: 4 for bcast
    /// (the reference's smallest figure; it needs 3), else 2.
    pub fn nps(&self) -> Vec<u32> {
        match &self.common.np {
            Some(l) => l.0.clone(),
            None if matches!(self.command, Command::Method(MethodCommand::Bcast(_))) => vec![4],
            None => vec![2],
        }
    }

    /// The rank count of a single run (the first of a list).
    pub fn np(&self) -> u32 {
        self.nps().first().copied().unwrap_or(2)
    }
}

/// Exit as clap does on `e`, but with what it echoes of a huge or binary
/// argument cut and escaped ([`ovbench_core::shown::message`]); clap's own rendering,
/// colours and all, where nothing needed that.
fn exit_on(e: clap::Error) -> ! {
    use clap::error::{ContextKind, ContextValue};
    use std::io::Write;
    let plain = e.render().to_string();
    // clap quotes the value it refused as given: escaped and cut here.
    let quoted = match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(v)) => plain.replace(
            &format!("'{v}'"),
            &format!("'{}'", ovbench_core::shown::value(v)),
        ),
        _ => plain.clone(),
    };
    let safe = ovbench_core::shown::message(&quoted);
    if safe == plain || !e.use_stderr() {
        e.exit()
    }
    let _ = write!(std::io::stderr(), "{safe}");
    std::process::exit(2)
}

/// The ids of the options given on the command line, at the top level and
/// in the subcommand (global options are seen in both).
fn given_ids(m: &ArgMatches) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |m: &ArgMatches| {
        for id in m.ids() {
            let id = id.as_str();
            if m.value_source(id) == Some(ValueSource::CommandLine) && !out.iter().any(|o| o == id)
            {
                out.push(id.to_string());
            }
        }
    };
    add(m);
    if let Some((_, sub)) = m.subcommand() {
        add(sub);
    }
    out
}

/// The protocols of `--proto` as given (top level or subcommand).
fn given_protos(m: &ArgMatches) -> Vec<common::ProtoArg> {
    fn raw_of(m: &ArgMatches) -> Option<clap::parser::RawValues<'_>> {
        m.try_get_raw("proto").ok().flatten()
    }
    let raw = m
        .subcommand()
        .and_then(|(_, sub)| raw_of(sub))
        .or_else(|| raw_of(m))
        .and_then(|mut v| v.next_back());
    raw.and_then(|v| common::proto_list(v).ok())
        .unwrap_or_default()
}

impl Command {
    /// The subcommand's name, for the header.
    pub fn name(&self) -> String {
        match self {
            Command::Latency(_) => "latency".into(),
            Command::Bw(_) => "bw".into(),
            Command::Bibw(_) => "bibw".into(),
            Command::Msgrate(_) => "msgrate".into(),
            Command::Method(m) => m.name().into(),
            Command::Tool(t) => t.name().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn common_options_before_or_after_the_subcommand() {
        let a = Cli::try_parse_from(["ovbench", "--np", "4", "latency", "--sizes", "8"]).unwrap();
        let b = Cli::try_parse_from(["ovbench", "latency", "--np", "4", "--sizes", "8"]).unwrap();
        assert_eq!(a.np(), 4);
        assert_eq!(b.np(), 4);
        let c = Cli::try_parse_from(["ovbench", "bcast"]).unwrap();
        assert_eq!(c.nps(), vec![4]);
        let d = Cli::try_parse_from(["ovbench", "latency"]).unwrap();
        assert_eq!(d.nps(), vec![2]);
        assert_eq!(a.command.name(), "latency");
        let c = Cli::try_parse_from(["ovbench", "bw", "--window", "16", "--pairs", "2"]).unwrap();
        match c.command {
            Command::Bw(w) => assert_eq!((w.window, w.pairs), (16, 2)),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn methods_are_subcommands() {
        let c = Cli::try_parse_from(["ovbench", "overhead", "--transport", "sim"]).unwrap();
        assert_eq!(c.command.name(), "overhead");
    }

    #[test]
    fn bad_size_names_the_token() {
        let e = Cli::try_parse_from(["ovbench", "latency", "--sizes", "8,12Q,1M"]).unwrap_err();
        assert!(e.to_string().contains("`12Q`"), "{e}");
    }
}
