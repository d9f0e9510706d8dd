//! Output to the reader: the `#` header and aligned tables on stdout,
//! the progress bar on stderr, and the file exports, all behind the
//! [`crate::report::Sink`] that measuring code writes to.

mod format;
mod progress;
mod row;
mod table;

use std::io::Write;

use serde_json::Value;

pub use format::{fixed, mbps, round2, us, Rounded2};
pub use progress::{stderr_reaches_terminal, ProgressBarMode, SweepProgress};
pub use row::{check_fields, to_json, Column, FixedRow, Row, Table};
pub use table::TableFormat;

use crate::export::{Document, FileExports};
use crate::report::Sink;

/// Rank 0's sink: prints to stdout and rewrites the export files after
/// every row. A failed file write is reported on stderr at once and
/// returned by [`ReportSink::finish`].
pub struct ReportSink {
    doc: Document,
    files: FileExports,
    table: TableFormat,
    out: Box<dyn Write>,
    error: Option<anyhow::Error>,
    progress: SweepProgress,
    /// Why the ranks share CPUs, when they do: every row is then marked.
    shared: Option<String>,
    /// Where the current table's `flag` cell is, and whether this sink
    /// added that column (a table of its own has none).
    flag: Option<(usize, bool)>,
    /// The `shared` note has been printed.
    shared_noted: bool,
    /// Under `--json -`, the document went to stdout (once, at the end).
    stdout_done: bool,
}

impl ReportSink {
    /// `header_lines` are printed as `# ` comments; `header` is the JSON
    /// environment object. The files are written once at once, so an
    /// unwritable path fails before anything is measured.
    pub fn new(
        header: Value,
        header_lines: &[String],
        files: FileExports,
        out: Box<dyn Write>,
    ) -> anyhow::Result<ReportSink> {
        let mut s = ReportSink {
            doc: Document::new(header),
            files,
            table: TableFormat::default(),
            out,
            error: None,
            progress: SweepProgress::off(),
            shared: None,
            flag: None,
            shared_noted: false,
            stdout_done: false,
        };
        for l in header_lines {
            s.print(&format!("# {l}"));
        }
        s.files.write(&s.doc)?;
        Ok(s)
    }
    /// Show `progress` on stderr while the rows come.
    pub fn with_progress(mut self, progress: SweepProgress) -> ReportSink {
        self.progress = progress;
        self
    }
    /// The ranks share CPUs (`why`): no row of this run reads `ok`. Its
    /// `flag` cell reads `shared` instead (a table without a flag column
    /// gets one), its JSON `"shared_cpus": true` (and a `flag` of `ok`
    /// becomes `shared`), and the first table says why once: the figures
    /// include the scheduler's delays, which no method subtracts.
    pub fn with_shared_cpus(mut self, why: &str) -> ReportSink {
        self.shared = Some(why.to_string());
        self
    }

    fn print(&mut self, line: &str) {
        // stdout closed (e.g. `| head`): keep measuring, files still written.
        // The bar is erased meanwhile, as stdout and stderr may share a terminal.
        let out = &mut self.out;
        self.progress.suspend(|| {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        });
    }
    fn save(&mut self) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.files.write(&self.doc) {
            eprintln!("ovbench: {e:#}");
            self.error = Some(e);
        }
    }
    /// Mark the document complete, write it a last time, and report the
    /// first file error if any.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.progress.finish();
        self.doc.complete = true;
        self.save();
        if let Err(e) = self.json_to_stdout() {
            self.error.get_or_insert(e);
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    /// Under `--json -`, write the document to stdout, once.
    fn json_to_stdout(&mut self) -> anyhow::Result<()> {
        if self.stdout_done {
            return Ok(());
        }
        self.stdout_done = true;
        match self.files.stdout_json(&self.doc) {
            Some(text) => crate::files::stdout::write_json(&mut std::io::stdout(), &text),
            None => Ok(()),
        }
    }
    /// The document so far.
    pub fn document(&self) -> &Document {
        &self.doc
    }
}

/// A run that stopped early (an error, a signal) still gives `--json -`
/// its document so far, `"complete": false`, as a file keeps it.
impl Drop for ReportSink {
    fn drop(&mut self) {
        let _ = self.json_to_stdout();
    }
}

impl Sink for ReportSink {
    fn table(&mut self, title: &str, columns: &[&str]) {
        let mut columns = columns.to_vec();
        self.flag = None;
        if self.shared.is_some() {
            self.flag = match columns.iter().position(|c| *c == "flag") {
                Some(i) => Some((i, false)),
                None => {
                    columns.push("flag");
                    Some((columns.len() - 1, true))
                }
            };
        }
        let columns = &columns[..];
        self.table = TableFormat::new(columns);
        self.print("#");
        if !title.is_empty() {
            self.print(&format!("# {title}"));
        }
        let heading = self.table.heading(columns);
        self.print(&heading);
        self.doc.start_table(title, columns);
        self.save();
        if let (Some(why), false) = (self.shared.clone(), self.shared_noted) {
            self.shared_noted = true;
            self.note(&format!(
                "{why}: every row reads `shared` where it would read `ok` (JSON shared_cpus: true): its figures include scheduling delays, which no method subtracts; rerun with one rank per core"
            ));
        }
    }
    fn row(&mut self, cells: &[String], mut json: Value) {
        let mut cells = cells.to_vec();
        if let Some((i, added)) = self.flag {
            if added {
                cells.push("shared".into());
            } else if cells.get(i).is_some_and(|c| c == "ok") {
                cells[i] = "shared".into();
            }
            if let Some(o) = json.as_object_mut() {
                o.insert("shared_cpus".into(), Value::Bool(true));
                if o.get("flag").and_then(Value::as_str) == Some("ok") {
                    o.insert("flag".into(), "shared".into());
                }
            }
        }
        let line = self.table.row(&cells);
        self.print(&line);
        self.progress.row(&json);
        self.doc.push_row(json);
        self.save();
    }
    fn summary(&mut self, json: Value, lines: &[String]) {
        for l in lines {
            self.print(&format!("# {l}"));
        }
        self.doc.add_summary(json);
        self.save();
    }
    fn note(&mut self, text: &str) {
        self.print(&format!("# note: {text}"));
        self.doc.notes.push(text.to_string());
        self.save();
    }
    fn sweep(&mut self, label: &str, steps: usize) {
        self.progress.sweep(label, steps);
    }
    fn step(&mut self, what: &str) {
        self.progress.step(what);
    }
    fn sweep_end(&mut self) {
        self.progress.sweep_end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn rows_reach_stdout_and_the_json_file_after_each_row() {
        let dir = std::env::temp_dir().join(format!("ovbench-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        let out = Shared::default();
        let mut s = ReportSink::new(
            json!({"command": "latency"}),
            &["ovbench 0.1.0".to_string()],
            FileExports::new(Some(&path), None),
            Box::new(out.clone()),
        )
        .unwrap();
        s.table("latency", &["size[B]", "p50[us]"]);
        s.row(
            &["8".into(), "1.50".into()],
            json!({"size": 8, "p50_ns": 1500.0}),
        );
        // Written after the row, before finish: a crash now keeps it.
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["tables"][0]["rows"][0]["p50_ns"], 1500.0);
        assert_eq!(v["complete"], false);
        s.note("hello");
        s.finish().unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["complete"], true);
        assert_eq!(v["notes"][0], "hello");
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(text.starts_with("# ovbench 0.1.0\n"), "{text}");
        assert!(
            text.contains("1.50\n") && text.contains("# note: hello"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rows_of_ranks_sharing_cpus_never_read_ok() {
        let out = Shared::default();
        let mut s = ReportSink::new(
            json!({}),
            &[],
            FileExports::new(None, None),
            Box::new(out.clone()),
        )
        .unwrap()
        .with_shared_cpus("4 ranks on 2 cores");
        s.table("latency", &["size[B]", "p50[us]"]);
        s.row(&["8".into(), "1.50".into()], json!({"size": 8}));
        s.table("overhead", &["msgsize", "flag"]);
        s.row(&["8".into(), "ok".into()], json!({"size": 8, "flag": "ok"}));
        s.row(
            &["16".into(), "INVALID".into()],
            json!({"size": 16, "valid": false}),
        );
        let d = s.document();
        assert_eq!(d.tables[0].columns, ["size[B]", "p50[us]", "flag"]);
        assert_eq!(d.tables[0].rows[0]["shared_cpus"], true);
        assert_eq!(d.tables[1].rows[0]["flag"], "shared");
        assert_eq!(d.notes.len(), 1);
        assert!(d.notes[0].starts_with("4 ranks on 2 cores: every row reads `shared`"));
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(
            rows[0].ends_with("shared") && rows[1].ends_with("shared"),
            "{text}"
        );
        assert!(rows[2].ends_with("INVALID"), "{text}");
    }

    #[test]
    fn unwritable_file_fails_before_measuring() {
        let r = ReportSink::new(
            json!({}),
            &[],
            FileExports::new(Some(std::path::Path::new("/no/such/dir/r.json")), None),
            Box::new(std::io::sink()),
        );
        assert!(r.is_err());
    }
}
