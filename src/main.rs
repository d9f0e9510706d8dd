//! `ovbench`: parse the command line, run, exit with the job's status.

use std::io::Write;
use std::process::ExitCode;

use ovbench::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse_args();
    // The user's fabric variables, before a transport sets any.
    ovbench::env::fabric_env();
    match ovbench::run::run(&cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => match ovbench_launcher::signals::requested() {
            // Asked to stop by a signal: the launcher (or the user) already
            // said why; exit as the signal would have, after the cleanup.
            Some(sig) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
            None => {
                // Not eprintln!, which panics (exit 101) when stderr is
                // gone, as a remote rank's is once its ssh connection is.
                // What it echoes of the user's input is cut and escaped.
                let m = ovbench_core::shown::message(&format!("{e:#}"));
                let _ = writeln!(std::io::stderr(), "ovbench: error: {m}");
                // 2 for a command line that cannot run (found before any
                // rank starts), 1 for a failure at run time.
                if e.is::<ovbench::run::UsageError>() {
                    ExitCode::from(2)
                } else {
                    ExitCode::from(1)
                }
            }
        },
    }
}
