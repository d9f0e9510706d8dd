//! File exports (hyperfine's `export/`): one file per format behind the
//! small [`Exporter`] trait, each rendering the whole [`Document`] so far.
//! Files are rewritten atomically (temporary file + rename) after every
//! completed row, so a crash or a killed rank loses nothing already
//! measured.

mod csv;
mod document;
mod json;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

pub use self::csv::{table_paths, CsvExporter};
pub use document::{Document, Table, SCHEMA};
pub use json::JsonExporter;

/// Renders a document in one file format.
pub trait Exporter {
    fn render(&self, doc: &Document) -> String;
}

/// Write `contents` to `path` atomically: a temporary file beside it,
/// flushed, then renamed over the target.
pub fn write_atomic(path: &Path, contents: &str) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("output path `{}` names no file", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_data()?;
        std::fs::rename(&tmp, path)
    };
    write().with_context(|| {
        let _ = std::fs::remove_file(&tmp);
        format!(
            "cannot write `{}`: check that its directory exists and is writable",
            path.display()
        )
    })
}

/// Fail early, before any rank starts, when `path` cannot be written:
/// a scratch file is created beside it and removed.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    let probe = path.with_file_name(format!(".ovbench-probe.{}", std::process::id()));
    std::fs::File::create(&probe).with_context(|| {
        format!(
            "cannot write `{}`: check that its directory exists and is writable",
            path.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The files a run writes: the JSON document, and a CSV file per table.
#[derive(Debug, Default)]
pub struct FileExports {
    json: Option<PathBuf>,
    csv: Option<PathBuf>,
}

impl FileExports {
    pub fn new(json: Option<&Path>, csv: Option<&Path>) -> FileExports {
        FileExports {
            json: json.map(Path::to_path_buf),
            csv: csv.map(Path::to_path_buf),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.json.is_none() && self.csv.is_none()
    }
    /// Rewrite every file from `doc`; the JSON header lists the CSV files.
    pub fn write(&self, doc: &Document) -> anyhow::Result<()> {
        let titles: Vec<&str> = doc.tables.iter().map(|t| t.title.as_str()).collect();
        let csv_paths = self
            .csv
            .as_ref()
            .map(|base| table_paths(base, &titles))
            .unwrap_or_default();
        for (t, path) in doc.tables.iter().zip(&csv_paths) {
            write_atomic(path, &CsvExporter.render_table(t))?;
        }
        if let Some(path) = &self.json {
            let mut doc = doc.clone();
            if let serde_json::Value::Object(h) = &mut doc.header {
                let files: Vec<serde_json::Value> = titles
                    .iter()
                    .zip(&csv_paths)
                    .map(|(t, p)| serde_json::json!({"table": t, "file": p.display().to_string()}))
                    .collect();
                h.insert("csv_files".into(), files.into());
            }
            write_atomic(path, &JsonExporter.render(&doc))?;
        }
        Ok(())
    }
}

/// `--json` and `--csv` (with the CSV's table files) must name different
/// files: checked before any rank starts.
pub fn check_distinct(json: Option<&Path>, csv: Option<&Path>) -> anyhow::Result<()> {
    if let (Some(j), Some(c)) = (json, csv) {
        let stem = c.with_extension("");
        let table_file = j
            .to_str()
            .zip(stem.to_str())
            .is_some_and(|(j, s)| j.starts_with(&format!("{s}.")) && j.ends_with(".csv"));
        if j == c || table_file {
            anyhow::bail!(
                "--json {} and --csv {} would write the same file (the CSV's further tables go to {}.<table>.csv): give them different names",
                j.display(),
                c.display(),
                stem.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("ovbench-export-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.json");
        write_atomic(&p, "first").unwrap();
        write_atomic(&p, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "second");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writability_probe_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("ovbench-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        check_writable(&dir.join("x.json")).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
        let e = check_writable(Path::new("/nonexistent-dir/x.json")).unwrap_err();
        assert!(format!("{e:#}").contains("directory exists"));
    }

    #[test]
    fn unwritable_path_says_what_to_check() {
        let e = write_atomic(Path::new("/nonexistent-dir/x/out.json"), "x").unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("/nonexistent-dir/x/out.json") && msg.contains("directory"),
            "{msg}"
        );
    }
}
