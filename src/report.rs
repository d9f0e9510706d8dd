//! Where a benchmark's results go: the interface between the measuring
//! code (latency, bw, the methods) and the output layer (table on stdout,
//! JSON and CSV files rewritten after every completed row).
//!
//! Only rank 0's sink prints or writes; other ranks get a sink that drops
//! everything, so measuring code calls it unconditionally.

/// Receives a command's results as they are produced.
pub trait Sink {
    /// Start a table: a title line and its column headings (with units,
    /// e.g. `p50[us]`). JSON rows that follow belong to this table.
    fn table(&mut self, title: &str, columns: &[&str]);
    /// One finished row: the cells as printed (same count as the columns)
    /// and the row's JSON object (flat keys with units, e.g. `p50_ns`,
    /// `size` in bytes). Outputs are rewritten atomically after each row.
    fn row(&mut self, cells: &[String], json: serde_json::Value);
    /// Run-level figures (e.g. logp's `L_ns`, `G_ns_per_byte`) and the
    /// lines that print them.
    fn summary(&mut self, json: serde_json::Value, lines: &[String]);
    /// A remark for the reader (printed under the table, kept in JSON).
    fn note(&mut self, text: &str);
    /// A sweep of `steps` steps begins (rank 0 shows a progress bar;
    /// a sweep that announces nothing counts its rows instead).
    fn sweep(&mut self, _label: &str, _steps: usize) {}
    /// Step `what` of the sweep begins (the size or step it measures).
    fn step(&mut self, _what: &str) {}
    /// The sweep's last step is done.
    fn sweep_end(&mut self) {}
}

/// The sink of ranks other than 0.
#[derive(Debug, Default)]
pub struct NullSink;

impl Sink for NullSink {
    fn table(&mut self, _: &str, _: &[&str]) {}
    fn row(&mut self, _: &[String], _: serde_json::Value) {}
    fn summary(&mut self, _: serde_json::Value, _: &[String]) {}
    fn note(&mut self, _: &str) {}
}
