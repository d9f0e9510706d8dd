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

pub use self::csv::CsvExporter;
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

/// The files a run writes, each with its format.
#[derive(Default)]
pub struct FileExports {
    files: Vec<(PathBuf, Box<dyn Exporter>)>,
}

impl std::fmt::Debug for FileExports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.files.iter().map(|(p, _)| p))
            .finish()
    }
}

impl FileExports {
    pub fn new(json: Option<&Path>, csv: Option<&Path>) -> FileExports {
        let mut files: Vec<(PathBuf, Box<dyn Exporter>)> = Vec::new();
        if let Some(p) = json {
            files.push((p.to_path_buf(), Box::new(JsonExporter)));
        }
        if let Some(p) = csv {
            files.push((p.to_path_buf(), Box::new(CsvExporter)));
        }
        FileExports { files }
    }
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
    /// Rewrite every file from `doc`.
    pub fn write(&self, doc: &Document) -> anyhow::Result<()> {
        for (path, ex) in &self.files {
            write_atomic(path, &ex.render(doc))?;
        }
        Ok(())
    }
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
