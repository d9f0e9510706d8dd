//! The files of one run, checked together before any rank starts
//! (docs/files.md): every output can be created, and no output is one of
//! the run's inputs or another of its outputs. Files are compared by
//! canonical path (symlinks followed, `.` and `..` resolved) and, where
//! they exist, by device and inode (hard links); `--csv`'s further
//! tables, `STEM.<table>.csv`, count as its outputs too.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::input::{is_stdin, named};
use super::output::{self, Target};
use crate::cli::Cli;
use crate::cli::Command;
use crate::methods::MethodCommand;

/// Bytes `--csv`'s name leaves for its further tables' `.<table>.csv`
/// (the table's part is cut to fit, [`crate::export::table_paths`]).
pub const CSV_TABLE_ROOM: usize = 32;

/// One file of the run.
struct RunFile {
    /// `--json out.json`, as messages name it.
    who: String,
    input: bool,
    /// Canonical path, symlinks followed.
    canon: PathBuf,
    /// Device and inode, where the file exists.
    inode: Option<(u64, u64)>,
    /// `--csv`: the stem of its further tables' names.
    csv_stem: Option<Vec<u8>>,
}

/// `p`'s canonical form: symlinks followed, the directory canonicalized
/// where the file does not exist yet.
fn canonical(p: &Path) -> PathBuf {
    let f = output::follow_links("", p).unwrap_or_else(|_| p.to_path_buf());
    if let Ok(c) = std::fs::canonicalize(&f) {
        return c;
    }
    let dir = match f.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), f.file_name()) {
        (Ok(d), Some(n)) => d.join(n),
        _ => f,
    }
}

impl RunFile {
    fn new(flag: &str, path: &Path, input: bool) -> RunFile {
        use std::os::unix::ffi::OsStrExt;
        let canon = canonical(path);
        let csv_stem = (flag == "--csv").then(|| {
            canon
                .with_extension("")
                .file_name()
                .map_or(Vec::new(), |n| n.as_bytes().to_vec())
        });
        RunFile {
            who: named(flag, path),
            input,
            inode: std::fs::metadata(&canon).ok().map(|m| (m.dev(), m.ino())),
            canon,
            csv_stem,
        }
    }

    /// Whether `other` is this file, or (for `--csv`) one of its tables.
    fn clashes(&self, other: &RunFile) -> bool {
        use std::os::unix::ffi::OsStrExt;
        if self.canon == other.canon || (self.inode.is_some() && self.inode == other.inode) {
            return true;
        }
        let Some(stem) = &self.csv_stem else {
            return false;
        };
        let name = other.canon.file_name().map_or(&[][..], |n| n.as_bytes());
        other.canon.parent() == self.canon.parent()
            && name.len() > stem.len()
            && name.starts_with(stem)
            && name[stem.len()..].starts_with(b".")
            && name.ends_with(b".csv")
    }
}

/// Files by the flag that names them.
type Flagged<'a> = Vec<(&'static str, &'a Path)>;

/// The run's inputs (`--xfer-table`, `--hostfile`) and outputs, by flag.
fn files_of(cli: &Cli) -> (Flagged<'_>, Flagged<'_>) {
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let overlap = match &cli.command {
        Command::Method(MethodCommand::Overlap(a)) => Some(a),
        _ => None,
    };
    if let Some(p) = overlap.and_then(|a| a.xfer_table.as_deref()) {
        inputs.push(("--xfer-table", p));
    }
    if let Some(p) = cli.common.launch.hostfile.as_deref() {
        inputs.push(("--hostfile", p));
    }
    if let Some(p) = cli.common.json.as_deref() {
        outputs.push(("--json", p));
    }
    if let Some(p) = cli.common.csv.as_deref() {
        outputs.push(("--csv", p));
    }
    if let Some(p) = overlap.and_then(|a| a.write_xfer_table.as_deref()) {
        outputs.push(("--write-xfer-table", p));
    }
    (inputs, outputs)
}

/// Every output of `cli` can be created, none is an input or another
/// output, and stdin is read at most once.
pub fn check(cli: &Cli) -> Result<()> {
    let (inputs, outputs) = files_of(cli);
    let stdin: Vec<&str> = inputs
        .iter()
        .filter(|(_, p)| is_stdin(p))
        .map(|(f, _)| *f)
        .collect();
    if stdin.len() > 1 {
        bail!(
            "{} - all read stdin, which can be read once: give files for all but one",
            stdin.join(" - and ")
        );
    }
    let xfer_stdin = inputs
        .iter()
        .any(|&(f, p)| f == "--xfer-table" && is_stdin(p));
    if xfer_stdin && cli.common.transport != crate::cli::common::TransportKind::Sim {
        bail!(
            "--xfer-table -: rank 0 reads the table, and under --transport {} it is a process of its own without this stdin: save the table to a file and name it",
            cli.common.transport
        );
    }
    let mut files: Vec<RunFile> = Vec::new();
    for &(flag, p) in &inputs {
        if !is_stdin(p) {
            files.push(RunFile::new(flag, p, true));
        }
    }
    for &(flag, p) in &outputs {
        if output::check(flag, p, flag == "--json")? == Target::Stdout {
            continue;
        }
        use std::os::unix::ffi::OsStrExt;
        let len = p.file_name().map_or(0, |n| n.as_bytes().len());
        if flag == "--csv" && len + CSV_TABLE_ROOM > output::NAME_MAX {
            bail!(
                "{}: its file name is {len} bytes; the further tables' files add up to {CSV_TABLE_ROOM} more to it, and a file system takes at most {}: give a shorter name",
                named(flag, p),
                output::NAME_MAX
            );
        }
        files.push(RunFile::new(flag, p, false));
    }
    for (i, a) in files.iter().enumerate() {
        for b in &files[i + 1..] {
            let (out, other) = if a.input { (b, a) } else { (a, b) };
            if !(out.clashes(other) || other.clashes(out)) {
                continue;
            }
            let why = if other.input {
                "writing the output would destroy the input"
            } else {
                "one output would overwrite the other"
            };
            bail!(
                "{} and {} name the same file ({}): {why}; give them different names",
                other.who,
                out.who,
                out.canon.display()
            );
        }
    }
    Ok(())
}
