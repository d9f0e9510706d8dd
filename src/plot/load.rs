//! Reading result files (docs/json.md) for `plot` and `compare`: the
//! command, a label for the run, the header and the tables, checked for
//! the schema this build reads.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The schema this build writes and reads (docs/json.md).
pub const SCHEMA: &str = crate::export::SCHEMA;

/// One result file.
#[derive(Clone, Debug)]
pub struct RunFile {
    pub path: PathBuf,
    pub command: String,
    /// Transport and protocol (and host, file name where needed to tell
    /// runs apart): the series label.
    pub label: String,
    pub header: Value,
    pub tables: Vec<TableData>,
    pub summary: Value,
    /// Rows the method's own checks flagged (`"valid": false`), left out
    /// of `tables`: they are no result to draw or compare.
    pub invalid: usize,
}

/// One table of a file.
#[derive(Clone, Debug)]
pub struct TableData {
    pub title: String,
    pub rows: Vec<Value>,
}

impl RunFile {
    /// Read `path`: one run, or under `protocols` (a `--proto` list's
    /// file) one run per protocol. An unreadable file, one that is no
    /// ovbench JSON or one of another schema version is refused with a
    /// sentence saying so.
    pub fn read_all_in(path: &Path) -> Result<Vec<RunFile>> {
        let doc = crate::files::input::read_json("", path)?;
        let top = RunFile::from_doc(path, &doc)?;
        match doc.get("protocols").and_then(Value::as_array) {
            Some(each) => each.iter().map(|d| RunFile::from_doc(path, d)).collect(),
            None => Ok(vec![top]),
        }
    }

    /// One run's document.
    fn from_doc(path: &Path, doc: &Value) -> Result<RunFile> {
        match doc.get("schema").and_then(Value::as_str) {
            Some(s) if s == SCHEMA => {}
            Some(s) => bail!(
                "{}: schema {s}, and this ovbench reads {SCHEMA}: rerun the benchmark with this version (docs/json.md lists the changes)",
                path.display()
            ),
            None => bail!(
                "{}: no \"schema\" field: not a result file of ovbench --json",
                path.display()
            ),
        }
        let header = doc.get("header").cloned().unwrap_or(Value::Null);
        let command = header
            .get("command")
            .and_then(Value::as_str)
            .with_context(|| format!("{}: the header names no command", path.display()))?
            .to_string();
        check_rows(path, doc)?;
        let mut invalid = 0;
        let tables = doc
            .get("tables")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .map(|t| TableData {
                        title: t.get("title").and_then(Value::as_str).unwrap_or("").into(),
                        rows: t
                            .get("rows")
                            .and_then(Value::as_array)
                            .map(|rows| {
                                let ok: Vec<Value> = rows
                                    .iter()
                                    .filter(|r| r.get("valid") != Some(&Value::Bool(false)))
                                    .cloned()
                                    .collect();
                                invalid += rows.len() - ok.len();
                                ok
                            })
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let label = base_label(&header);
        Ok(RunFile {
            path: path.to_path_buf(),
            command,
            label,
            summary: doc.get("summary").cloned().unwrap_or(Value::Null),
            header,
            tables,
            invalid,
        })
    }

    /// Every row of every table whose title starts with `prefix`.
    pub fn rows_of(&self, prefix: &str) -> impl Iterator<Item = &Value> {
        let prefix = prefix.to_string();
        self.tables
            .iter()
            .filter(move |t| t.title.starts_with(&prefix))
            .flat_map(|t| t.rows.iter())
    }

    /// The first table's rows (the command's main table).
    pub fn main_rows(&self) -> &[Value] {
        self.tables.first().map_or(&[], |t| t.rows.as_slice())
    }

    /// The host the run was on.
    pub fn host(&self) -> &str {
        self.header
            .pointer("/environment/hostname")
            .and_then(Value::as_str)
            .unwrap_or("?")
    }
}

/// Every row of `doc`, against the schema's rules for a row
/// ([`super::row_check`]): the first that breaks one is refused, named
/// `file:tables[t].rows[r]:field`.
fn check_rows(path: &Path, doc: &Value) -> Result<()> {
    let tables = doc.get("tables").and_then(Value::as_array);
    for (t, table) in tables.into_iter().flatten().enumerate() {
        let rows = table.get("rows").and_then(Value::as_array);
        for (r, row) in rows.into_iter().flatten().enumerate() {
            if let Some((field, what)) = super::row_check::problem(row) {
                let title = table.get("title").and_then(Value::as_str).unwrap_or("");
                bail!(
                    "{}:tables[{t}].rows[{r}]:{field}: {what} (table \"{title}\"); the file is not as ovbench --json writes it (docs/json.md): rerun the benchmark, or restore the file",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// "tcp eager": the transport and the protocol the communicator ran.
fn base_label(header: &Value) -> String {
    let s = |p: &str| header.pointer(p).and_then(Value::as_str);
    let transport = s("/communicator/transport/name")
        .or(s("/options/transport"))
        .unwrap_or("?");
    let proto = s("/communicator/protocol")
        .or(s("/options/proto"))
        .unwrap_or("?");
    format!("{transport} {proto}")
}

/// Read every file; all must hold the same command. Labels are made
/// distinct: the host is added where hosts differ, then the file name.
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<RunFile>> {
    let mut runs: Vec<RunFile> = Vec::new();
    if paths
        .iter()
        .filter(|p| crate::files::input::is_stdin(p))
        .count()
        > 1
    {
        bail!("- (stdin) is given more than once, and stdin can be read once: give it once");
    }
    for p in paths {
        runs.extend(RunFile::read_all_in(p)?);
    }
    if let Some(first) = runs.first() {
        let cmd = first.command.clone();
        if let Some(other) = runs.iter().find(|r| r.command != cmd) {
            bail!(
                "{} holds `{}` results and {} `{}`: give files of one command",
                first.path.display(),
                cmd,
                other.path.display(),
                other.command
            );
        }
    }
    let hosts_differ = runs.windows(2).any(|w| w[0].host() != w[1].host());
    if hosts_differ {
        for r in &mut runs {
            r.label = format!("{} @{}", r.label, r.host());
        }
    }
    let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
    for (i, r) in runs.iter_mut().enumerate() {
        if labels.iter().filter(|l| **l == labels[i]).count() > 1 {
            let stem = r
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            r.label = format!("{} ({stem})", r.label);
        }
    }
    Ok(runs)
}

/// A row's number at `key` (JSON numbers; `null` and absent give `None`).
pub fn num(row: &Value, key: &str) -> Option<f64> {
    row.get(key).and_then(Value::as_f64)
}

/// A row's number at a JSON pointer (`/sender/wait_ns`).
pub fn num_at(row: &Value, pointer: &str) -> Option<f64> {
    row.pointer(pointer).and_then(Value::as_f64)
}

/// A row's string at `key`.
pub fn text<'a>(row: &'a Value, key: &str) -> Option<&'a str> {
    row.get(key).and_then(Value::as_str)
}
