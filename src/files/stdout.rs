//! `--json -` (docs/files.md): the JSON document goes to stdout, once,
//! when the run ends (`"complete": false` when it stopped early), and
//! the `#` header and tables that stdout would carry go to stderr, so
//! that stdout holds the JSON alone and pipes into `jq` as it is.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

use anyhow::{Context, Result};

/// Whether `--json` names stdout.
pub fn is_stdout(json: Option<&Path>) -> bool {
    json.is_some_and(super::input::is_stdin)
}

/// Where the header and tables go: stdout, or stderr under `--json -`.
pub fn tables(json: Option<&Path>) -> Box<dyn Write> {
    if is_stdout(json) {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    }
}

/// For a run whose ranks print their tables on the stdout they inherit
/// (a list of protocols): stdout from here on is stderr, and the file
/// returned is the real stdout, for the JSON alone.
pub fn divert() -> Result<File> {
    std::io::stdout().flush().ok();
    let real = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("--json -: keeping stdout for the JSON")?;
    nix::unistd::dup2(2, 1).context("--json -: sending the tables to stderr")?;
    Ok(File::from(real))
}

/// Write the JSON `text` to `out`; a closed pipe (`| head`) is no error.
pub fn write_json(out: &mut dyn Write, text: &str) -> Result<()> {
    match out
        .write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("--json -: writing the JSON to stdout")
        }
        _ => Ok(()),
    }
}
