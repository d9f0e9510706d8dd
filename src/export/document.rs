//! The results of one run as the exporters see them: the header
//! (environment), the tables with their rows' JSON objects, run-level
//! summaries and notes.

use serde_json::{Map, Value};

/// The JSON schema identifier; bump on an incompatible change. The format
/// is described by docs/schema/ovbench.schema.json.
///
/// - `ovbench/2`: each row appears once, under its table (`tables[].rows`);
///   the flat `results` list of `ovbench/1`, which repeated every row with
///   its table's index, is gone.
/// - `ovbench/3`: every row is the `Serialize` form of its command's typed
///   row (src/output/row.rs), the same definition that gives the printed
///   table its columns and cells; numeric figures are rounded by one rule.
/// - `ovbench/4`: latency's and the window benchmarks' rows keep their
///   size's samples as an HDR histogram (`histogram`, `window_histogram`;
///   src/stats/hist.rs), so `ovbench compare` can test runs against each
///   other; older files are refused by `plot` and `compare`.
/// - `ovbench/5`: the other methods keep their samples too, as the same
///   histograms: logp the repetitions of os, or and g (`os_histogram`,
///   `or_histogram`, `g_histogram`), bcast each method's measurements
///   (`histogram`), overlap each side's waits in a step
///   (`sender_wait_histogram`, `receiver_wait_histogram`), commtest its
///   iterations (`histogram`).
pub const SCHEMA: &str = "ovbench/5";

/// One table: a title, the printed column headings and the JSON rows.
#[derive(Clone, Debug)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Value>,
}

/// Everything measured so far.
#[derive(Clone, Debug)]
pub struct Document {
    pub schema: &'static str,
    /// The environment of docs/architecture.md § Conventions (command line, version,
    /// hosts, CPU, clock, transport, ...).
    pub header: Value,
    pub tables: Vec<Table>,
    /// Run-level figures (e.g. logp's `L_ns`), merged in order.
    pub summary: Map<String, Value>,
    pub notes: Vec<String>,
    /// Whether the run finished (false while rows are still coming).
    pub complete: bool,
}

impl Document {
    pub fn new(header: Value) -> Document {
        Document {
            schema: SCHEMA,
            header,
            tables: Vec::new(),
            summary: Map::new(),
            notes: Vec::new(),
            complete: false,
        }
    }
    pub fn start_table(&mut self, title: &str, columns: &[&str]) {
        self.tables.push(Table {
            title: title.to_string(),
            columns: columns.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        });
    }
    /// Append a row to the current table (starting an untitled one if none).
    pub fn push_row(&mut self, row: Value) {
        if self.tables.is_empty() {
            self.start_table("", &[]);
        }
        if let Some(t) = self.tables.last_mut() {
            t.rows.push(row);
        }
    }
    /// Merge a summary object's keys (a non-object is kept under `value`).
    pub fn add_summary(&mut self, v: Value) {
        match v {
            Value::Object(m) => self.summary.extend(m),
            other => {
                self.summary.insert("value".into(), other);
            }
        }
    }
}
