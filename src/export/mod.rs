//! File exports (hyperfine's `export/`): one file per format behind the
//! small [`Exporter`] trait, each rendering the whole [`Document`] so far.
//! Files are rewritten atomically (temporary file + rename, through
//! symlinks: [`crate::files::output`]) after every completed row, so a
//! crash or a killed rank loses nothing already measured; `--json -`
//! goes to stdout once, at the end ([`crate::files::stdout`]).

mod csv;
mod document;
mod json;

use std::path::{Path, PathBuf};

use crate::files::output::write_atomic;
use crate::files::stdout::is_stdout;

pub use self::csv::{table_paths, CsvExporter};
pub use document::{Document, Table, SCHEMA};
pub use json::JsonExporter;

/// Renders a document in one file format.
pub trait Exporter {
    fn render(&self, doc: &Document) -> String;
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
        let csv_paths = self.csv_paths(doc);
        for (t, path) in doc.tables.iter().zip(&csv_paths) {
            write_atomic("--csv", path, &CsvExporter.render_table(t))?;
        }
        if let Some(path) = self.json.as_deref().filter(|p| !is_stdout(Some(p))) {
            write_atomic("--json", path, &self.json_text(doc, &csv_paths))?;
        }
        Ok(())
    }
    /// Under `--json -`, the JSON document for stdout (written once, by
    /// the sink, when the run ends).
    pub fn stdout_json(&self, doc: &Document) -> Option<String> {
        if !is_stdout(self.json.as_deref()) {
            return None;
        }
        let csv_paths = self.csv_paths(doc);
        Some(self.json_text(doc, &csv_paths))
    }
    /// The CSV file of each of `doc`'s tables (none without `--csv`).
    fn csv_paths(&self, doc: &Document) -> Vec<PathBuf> {
        let titles: Vec<&str> = doc.tables.iter().map(|t| t.title.as_str()).collect();
        self.csv
            .as_ref()
            .map(|base| table_paths(base, &titles))
            .unwrap_or_default()
    }
    /// The JSON document, its header listing the CSV files.
    fn json_text(&self, doc: &Document, csv_paths: &[PathBuf]) -> String {
        let mut doc = doc.clone();
        if let serde_json::Value::Object(h) = &mut doc.header {
            let files: Vec<serde_json::Value> = doc
                .tables
                .iter()
                .zip(csv_paths)
                .map(
                    |(t, p)| serde_json::json!({"table": t.title, "file": p.display().to_string()}),
                )
                .collect();
            h.insert("csv_files".into(), files.into());
        }
        JsonExporter.render(&doc)
    }
}
