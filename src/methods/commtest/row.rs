//! commtest's one table: a row per experiment, its columns and JSON from
//! the same struct.

use ovbench_core::OpCounts;
use serde::Serialize;

use crate::methods::common::Marks;
use crate::output::{fixed, us, Column, Row as TableRow};

/// One row: an experiment's figures (ns), `None` when the path cannot run it.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub protocol: String,
    pub name: String,
    pub reorganized: bool,
    #[serde(rename = "size")]
    pub packet_size: usize,
    pub packets: usize,
    /// The message each rank exchanges, before splitting into packets.
    pub total_bytes: usize,
    /// Bytes one rank sent: packets × packet size (each direction moves this).
    pub bytes_moved: usize,
    pub calls: String,
    pub time_ns: Option<f64>,
    pub mean_ns: Option<f64>,
    /// mean / time: how far the iterations' mean is above the fastest.
    pub mean_ratio: Option<f64>,
    /// First begin to last end over ranks (`--global-clock`), minimum over iterations.
    pub global_ns: Option<f64>,
    /// The error bound of `global_ns` from the clock synchronisation.
    pub sync_error_ns: Option<f64>,
    /// The latest rank's start minus the earliest's, on rank 0's clock, in
    /// the iteration `time_ns` comes from.
    pub skew_ns: Option<f64>,
    /// The error of `skew_ns` (the clocks' synchronisation, assuming each
    /// fastest round trip took as long each way).
    pub skew_error_ns: Option<f64>,
    pub bytes_per_sec: Option<f64>,
    /// Iterations timed.
    pub samples: usize,
    /// Each iteration's time (max over ranks) as an HDR histogram
    /// (src/stats/hist.rs), for `ovbench compare`.
    pub histogram: Option<String>,
    pub error: Option<String>,
    /// Operations rank 0 posted in one iteration (the last).
    pub ops: OpCounts,
    /// `ok`, `skewed` (the skew and its error exceed [`SKEW_LIMIT`] of the
    /// time; still a result), `noisy` (the mean is more than [`MEAN_LIMIT`]
    /// times the time; still a result), `INVALID`, or `n/a` (not run).
    pub flag: &'static str,
    #[serde(flatten)]
    pub verdict: Marks,
}

/// The most the iterations' mean may exceed their minimum (`time`) by
/// before the row is `noisy`: beyond it the fastest iteration is no
/// typical one (one or more iterations lost the CPU or waited for a
/// late partner), and a reader of `time` alone should know.
pub const MEAN_LIMIT: f64 = 2.0;

/// The most the ranks' starts may lie apart, skew plus its error, as a
/// share of the row's time before the row is `skewed`: a rank that starts
/// early waits for its partner inside its timed region (or a late one
/// finds its partner's message there already), and the figure is that
/// much off a synchronised start's.
pub const SKEW_LIMIT: f64 = 0.05;

impl Row {
    /// Whether skew plus its error exceeds [`SKEW_LIMIT`] of the time.
    fn skewed(&self) -> bool {
        match (self.time_ns, self.skew_ns, self.skew_error_ns) {
            (Some(t), Some(s), Some(e)) => s.abs() + e > SKEW_LIMIT * t,
            _ => false,
        }
    }

    /// Why the row is `skewed`, for a note under the table.
    pub(crate) fn skew_note(&self) -> Option<String> {
        if !self.skewed() || !self.verdict.valid {
            return None;
        }
        let (t, s, e) = (
            self.time_ns.unwrap_or(f64::NAN),
            self.skew_ns.unwrap_or(f64::NAN),
            self.skew_error_ns.unwrap_or(f64::NAN),
        );
        Some(format!(
            "{} with {} packets: skewed: the ranks started {} us apart (± {} us), more than {:.0}% of time {} us (an early rank waits for its partner inside its timed region; compare --start sync)",
            self.protocol,
            self.packets,
            us(s, 3),
            us(e, 3),
            100.0 * SKEW_LIMIT,
            us(t, 3)
        ))
    }

    /// The `flag` cell for the row's figures and verdict.
    pub(crate) fn flag_of(&self) -> &'static str {
        match (self.time_ns, self.verdict.valid) {
            (None, _) => "n/a",
            (Some(_), false) => "INVALID",
            _ if self.skewed() => "skewed",
            _ if self.mean_ratio.is_some_and(|r| r > MEAN_LIMIT) => "noisy",
            _ => "ok",
        }
    }
}

/// A figure's cell, `n/a` where the experiment has none.
fn or_na(x: Option<f64>, cell: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "n/a".to_string(), cell)
}

/// A microsecond column showing `field`.
fn t(head: &'static str, field: &'static str, f: fn(&Row) -> Option<f64>) -> Column<Row> {
    Column::new(head, field, move |r: &Row| or_na(f(r), |x| us(x, 3)))
}

impl TableRow for Row {
    /// Whether `--global-clock` adds its two columns.
    type Layout = bool;
    fn columns(global_clock: &bool) -> Vec<Column<Row>> {
        let mut c = vec![
            Column::new("protocol", "protocol", |r: &Row| r.protocol.clone()),
            Column::new("packets", "packets", |r: &Row| r.packets.to_string()),
            Column::new("packet[B]", "size", |r: &Row| r.packet_size.to_string()),
            Column::new("calls", "calls", |r: &Row| r.calls.clone()),
            t("time[us]", "time_ns", |r| r.time_ns),
            t("mean[us]", "mean_ns", |r| r.mean_ns),
            Column::new("MB/s", "bytes_per_sec", |r: &Row| {
                or_na(r.bytes_per_sec, |b| fixed(b / 1e6, 1))
            }),
        ];
        if *global_clock {
            c.push(t("global[us]", "global_ns", |r| r.global_ns));
            c.push(t("sync±[us]", "sync_error_ns", |r| r.sync_error_ns));
        }
        c.push(t("skew[us]", "skew_ns", |r| r.skew_ns));
        c.push(t("skew±[us]", "skew_error_ns", |r| r.skew_error_ns));
        // An experiment that did not run has no verdict to show (n/a).
        c.push(Column::new("flag", "flag", |r: &Row| r.flag.to_string()));
        c
    }
}
