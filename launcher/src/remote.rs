//! The remote side of ssh launch: the rank reads the job secret from its
//! stdin (never from its command line, which other users can read), then
//! keeps reading: end of input means the launcher or its ssh connection
//! is gone, and the rank stops as on SIGTERM (then exits if still there).

use std::io::{BufRead, Read, Write};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use nix::sys::signal::{raise, Signal};

/// How long a stopping rank may take to unwind after its stdin closed.
const UNWIND: Duration = Duration::from_secs(3);

/// The secret on the first line of stdin; starts the watcher on the rest.
pub fn secret_from_stdin(rank: u32) -> Result<String> {
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    stdin
        .read_line(&mut line)
        .with_context(|| format!("rank {rank}: reading the job secret from stdin"))?;
    let secret = line.trim_end_matches(['\n', '\r']).to_string();
    if secret.is_empty() {
        bail!("rank {rank}: OVBENCH_SECRET_STDIN=1 but stdin gave no secret (ovbench's ssh launcher writes it)");
    }
    drop(stdin);
    std::thread::Builder::new()
        .name("ovbench-stdin".into())
        .spawn(move || watch_stdin(rank))
        .context("starting the stdin watcher")?;
    Ok(secret)
}

fn watch_stdin(rank: u32) {
    let mut buf = [0u8; 256];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    // Not eprintln!: the same lost connection usually broke stderr too,
    // and a failed eprintln! panics this thread before the stop below.
    let _ = writeln!(
        std::io::stderr(),
        "ovbench: rank {rank}: the launcher's connection closed; stopping"
    );
    let _ = raise(Signal::SIGTERM);
    std::thread::sleep(UNWIND);
    std::process::exit(1);
}
