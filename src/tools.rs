//! The subcommands that measure nothing: `plot` and `compare` read result
//! files, `devices` lists what this machine offers, `completions` prints
//! a shell's completion script. They run in this process, before (and
//! instead of) any launcher or rank.

use anyhow::Result;
use clap::{Subcommand, ValueEnum};

use crate::cli::Cli;

/// The tool subcommands, flattened into the CLI.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Draw the figure of result files (SVG or PNG), as the references draw it.
    Plot(crate::plot::PlotArgs),
    /// Compare result files: a column per run, ratios to the first, significance per size.
    Compare(crate::compare::CompareArgs),
    /// List the transports compiled in and what this machine offers each.
    Devices(crate::devices::DevicesArgs),
    /// Print a shell's completion script (bash, zsh or fish) on stdout.
    #[command(
        after_help = "Examples:\n  ovbench completions bash > /etc/bash_completion.d/ovbench\n  ovbench completions zsh > \"${fpath[1]}/_ovbench\"\n  ovbench completions fish > ~/.config/fish/completions/ovbench.fish"
    )]
    Completions(CompletionsArgs),
}

impl ToolCommand {
    pub fn name(&self) -> &'static str {
        match self {
            ToolCommand::Plot(_) => "plot",
            ToolCommand::Compare(_) => "compare",
            ToolCommand::Devices(_) => "devices",
            ToolCommand::Completions(_) => "completions",
        }
    }
}

/// `ovbench completions`'s argument.
#[derive(Clone, Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells completions are written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// A benchmark option given to a tool is pointed out, not ignored (the
/// table of where each option acts, `cli::effects`, says).
pub fn check_options(cli: &Cli) -> Result<()> {
    match crate::cli::effects::refusal(cli, None) {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => Ok(()),
    }
}

/// Run a tool subcommand; the exit code.
pub fn run(cmd: &ToolCommand) -> Result<i32> {
    match cmd {
        ToolCommand::Plot(a) => crate::plot::run(a).map(|()| 0),
        ToolCommand::Compare(a) => crate::compare::run(a),
        ToolCommand::Devices(a) => crate::devices::run(a),
        ToolCommand::Completions(a) => {
            let shell = match a.shell {
                Shell::Bash => clap_complete::Shell::Bash,
                Shell::Zsh => clap_complete::Shell::Zsh,
                Shell::Fish => clap_complete::Shell::Fish,
            };
            let mut cmd = Cli::command_checked();
            clap_complete::generate(shell, &mut cmd, "ovbench", &mut std::io::stdout());
            Ok(0)
        }
    }
}
