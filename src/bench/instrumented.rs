//! `--instrument` for latency: after each size's reported (uninstrumented)
//! pass, a second pass of the same iterations with the communicator's
//! event recorder on (docs/architecture.md § Instrumentation), so the recorder's
//! cost is measured rather than assumed: the instrumented p50 against
//! the plain one, and the events each rank recorded per iteration.
//!
//! xfer_time(size) for the overlap bounds comes from the same source as
//! the overlap method's: the bare operations that move a message of the
//! size, timed through this communicator before the pass
//! ([`crate::xfer_time`]), on the native library paths too (their
//! transport's engine path runs the bare operations).

use anyhow::{anyhow, Result};
use ovbench_core::Communicator;
use serde::{Deserialize, Serialize};

use super::pingpong::{pingpong, PingPong};
use super::rankreport::RankReport;
use crate::methods::common::Ctrl;
use crate::output::{round2, us, Rounded2};
use crate::stats::{Summary, DEFAULT_LEVEL};
use crate::xfer_time;

/// What one rank's instrumented pass recorded (sent to rank 0 in its
/// [`RankReport`], listed in the row's `instrumented.ranks`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RankPass {
    pub rank: u32,
    #[serde(default)]
    pub xfer_time_ns: f64,
    #[serde(default)]
    pub xfer_time_source: String,
    /// Rank 0's instrumented p50 (the rank that times the ping-pong).
    pub p50_ns: Option<f64>,
    #[serde(default)]
    pub iterations: usize,
    pub events: u64,
    pub events_per_iter: f64,
    #[serde(default)]
    pub transfers: u64,
    #[serde(default)]
    pub data_transfer_ns: f64,
    #[serde(default)]
    pub min_overlap_ns: f64,
    #[serde(default)]
    pub max_overlap_ns: f64,
    #[serde(default)]
    pub call_ns: f64,
    #[serde(default)]
    pub computation_ns: f64,
}

/// The latency row's `instrumented` object.
#[derive(Clone, Debug, Serialize)]
pub struct RowFields {
    pub p50_ns: Rounded2,
    pub overhead_ns: Rounded2,
    pub ranks: Vec<RankPass>,
}

/// Run the instrumented pass of `n` iterations on this rank; its figures. `scale` converts ticks to the reported latency.
pub(super) fn pass(
    comm: &mut dyn Communicator,
    pp: PingPong,
    n: usize,
    scale: f64,
    idx: usize,
) -> Result<RankPass> {
    let shape = comm.engine_shape().ok_or_else(|| {
        anyhow!("--instrument times xfer_time through the protocol engine, which this communicator lacks")
    })?;
    let ctrl = Ctrl::new(comm)?;
    let need = xfer_time::needed(&shape, &[pp.len]);
    let tags = xfer_time::TAG_RAW + 16 * idx as ovbench_core::Tag;
    let (table, source) = xfer_time::measure(comm, &ctrl, &shape, pp.sbuf, &need, 21, tags)?;
    let source = source.source;
    let xfer_ns = table.xfer_ns(pp.len as u64);
    comm.enable_instrumentation(table)?;
    comm.barrier()?;
    let now = comm.now();
    if let Some(i) = comm.instrumentation() {
        i.reset(now);
    }
    let mut ticks = super::tick_slots(n);
    pingpong(comm, pp, n, &mut ticks)?;
    let report = comm.overlap_report();
    comm.disable_instrumentation();
    let rep = report.ok_or_else(|| {
        anyhow!("--instrument: the communicator recorded nothing (it has no event recorder)")
    })?;
    let ns: Vec<f64> = ticks.iter().map(|&t| t as f64 * scale).collect();
    let p50 = match (comm.rank(), Summary::of(&ns, DEFAULT_LEVEL)) {
        (0, Some(s)) => Some(round2(s.p50)),
        _ => None,
    };
    Ok(RankPass {
        rank: comm.rank(),
        xfer_time_ns: round2(xfer_ns),
        xfer_time_source: source.to_string(),
        p50_ns: p50,
        iterations: n,
        events: rep.events,
        events_per_iter: round2(rep.events as f64 / n.max(1) as f64),
        transfers: rep.transfers,
        data_transfer_ns: round2(rep.data_transfer_ns),
        min_overlap_ns: round2(rep.min_overlap_ns),
        max_overlap_ns: round2(rep.max_overlap_ns),
        call_ns: round2(rep.call_ns),
        computation_ns: round2(rep.computation_ns),
    })
}

/// The row's `instrumented` object and the note line under it.
pub(super) fn row_fields(len: usize, plain_p50: f64, all: &[RankReport]) -> (RowFields, String) {
    let ranks: Vec<RankPass> = all.iter().filter_map(|r| r.instrument.clone()).collect();
    let p50 = ranks.first().and_then(|v| v.p50_ns).unwrap_or(f64::NAN);
    let per_iter: Vec<String> = ranks
        .iter()
        .filter(|v| v.events > 0)
        .map(|v| format!("rank {} {:?}", v.rank, v.events_per_iter))
        .collect();
    let line = format!(
        "size {len} instrumented: p50 {} us ({:+.3} us against uninstrumented); events per iteration: {}",
        us(p50, 2),
        (p50 - plain_p50) / 1000.0,
        if per_iter.is_empty() { "none".to_string() } else { per_iter.join(", ") }
    );
    let fields = RowFields {
        p50_ns: Rounded2(p50),
        overhead_ns: Rounded2(p50 - plain_p50),
        ranks,
    };
    (fields, line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_and_json_from_rank_reports() {
        let r = |rank: u32, p50: Option<f64>, events: u64| RankReport {
            rank,
            instrument: Some(RankPass {
                rank,
                p50_ns: p50,
                events,
                events_per_iter: events as f64 / 10.0,
                ..RankPass::default()
            }),
            ..RankReport::default()
        };
        let (j, line) = row_fields(
            8,
            9000.0,
            &[r(0, Some(9120.0), 40), r(1, None, 40), r(2, None, 0)],
        );
        let j = crate::output::to_json(&j);
        assert_eq!(j["overhead_ns"], 120.0);
        assert_eq!(j["ranks"].as_array().unwrap().len(), 3);
        assert!(line.contains("p50 9.12 us (+0.120 us"), "{line}");
        assert!(
            line.contains("rank 0 4.0, rank 1 4.0") && !line.contains("rank 2"),
            "{line}"
        );
    }
}
