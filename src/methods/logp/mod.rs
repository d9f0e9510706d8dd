//! LogP parameters as logp_mpi measures them: Kielmann, Bal and
//! Verstoep, "Fast Measurement of LogP Parameters for Message Passing
//! Platforms" (IPDPS 2000 workshops), and their logp_mpi.c / logp_stats.c
//! (the logp_test program). docs/methods/logp.md describes the method,
//! its output and where ovbench departs from the original.
//!
//! Rank 0 measures, rank 1 mirrors (it executes the commands rank 0
//! sends it, one control round trip before each round, as the original);
//! other ranks wait.
//!
//! * g(0): a synchronous saturation test (`Measurer::saturation`).
//! * RTT(m): m bytes forward, 0 back; os(m) = the time of the send call.
//! * or(m): 0 forward, m back; rank 0 spins `max(1.2·RTT(m), floor)`
//!   (floor = 100 clock readings) so the reply has arrived, then times
//!   the receive.
//! * g(m) = RTT(m) − RTT(0) + g(0) (by saturation with `--flood`);
//!   L = RTT(0)/2 − g(0), unknown when not positive; G = the
//!   least-squares slope of g(m) over the largest sizes.
//! * Every os/or/RTT sample less the clock's call cost; rounds and
//!   intervals as in `measure.rs` and `rules.rs`.

mod measure;
mod peer;
mod rules;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use anyhow::bail;
use ovbench_core::{Communicator, OpCounts};
use serde::Serialize;

use super::common::{micros, Ctrl, Marks};
use crate::output::{us, Column, FixedRow, Table};
use crate::report::Sink;
use crate::sizes::ByteSize;
use crate::stats::hist;
pub use measure::SizeResult;
use measure::{next_k_max, probe_nonlinear, Measurer};
use peer::{Peer, OP_STOP};
pub use rules::Figure;

/// The send primitive rank 0 measures with (the mirror always answers
/// with plain blocking calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SendKind {
    /// Blocking standard send (logp_test: -Send).
    Send,
    /// Isend; os times the isend call only, its wait follows outside
    /// the clock (logp_test: -Isend).
    Isend,
    /// Synchronous send: the call includes the receiver's match
    /// acknowledgement (logp_test: -Ssend).
    Ssend,
}

/// The receive primitive of or(m)'s timed receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RecvKind {
    /// Blocking receive (logp_test: -Recv).
    Recv,
    /// Irecv posted before the spin; or times its wait only
    /// (logp_test: -Irecv).
    Irecv,
}

/// `--sizes MIN:MAX` of logp: its two ends.
#[deny(clippy::arithmetic_side_effects)]
fn parse_size_range(s: &str) -> Result<(ByteSize, ByteSize), String> {
    let (lo, hi) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: logp sweeps a range: give MIN:MAX, e.g. 0:256K"))?;
    let lo = lo.parse::<ByteSize>().map_err(|e| e.to_string())?;
    let hi = hi.parse::<ByteSize>().map_err(|e| e.to_string())?;
    if lo.bytes() > hi.bytes() {
        return Err(format!("`{s}`: MIN is above MAX"));
    }
    Ok((lo, hi))
}

impl Args {
    /// Take `--sizes MIN:MAX` as --min-size and --max-size (after parsing).
    pub fn apply_sizes(&mut self) {
        if let Some((lo, hi)) = self.sizes.take() {
            self.min_size = lo;
            self.max_size = hi;
        }
    }
}

/// `ovbench logp`: logp_test's parameters.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Allowed relative error: a half-width within 2·eps of the mean
    /// stops the repetitions (logp_test: -eps).
    #[arg(long, default_value_t = 0.03)]
    pub eps: f64,
    /// Confidence level of the intervals (logp_test: -conf-int).
    #[arg(long, default_value_t = 0.9)]
    pub conf_int: f64,
    /// Base repetition cap, ×4 up to 1 KiB, ×2 up to 64 KiB (logp_test: -max-its).
    #[arg(long, default_value_t = 18, value_parser = crate::cli::counts::max_its)]
    pub max_its: usize,
    /// Smallest size measured besides 0 (logp_test: -min-size).
    #[arg(long, default_value = "0")]
    pub min_size: ByteSize,
    /// The sweep as MIN:MAX, for --min-size MIN --max-size MAX (the
    /// spelling of the other commands' --sizes).
    #[arg(long, value_name = "MIN:MAX", value_parser = parse_size_range, conflicts_with_all = ["min_size", "max_size"])]
    pub sizes: Option<(ByteSize, ByteSize)>,
    /// Largest size of the initial sweep; k_max may go up to 8× beyond it
    /// (logp_test: -max-size).
    #[arg(long, default_value = "256K")]
    pub max_size: ByteSize,
    /// Measure g(m) by saturation at every size, not only 0 (logp_test: -flood).
    #[arg(long)]
    pub flood: bool,
    // deviation: max-diff-3pct — default 3 % (README), not logp_mpi.h's 20 %, see docs/methods/logp.md
    /// Extrapolation miss that triggers a probe between sizes (logp_test: -max-diff).
    #[arg(long, default_value_t = 0.03)]
    pub max_diff: f64,
    /// Send primitive (logp_test: -Send, -Isend, -Ssend).
    #[arg(long, value_enum, default_value = "send")]
    pub send_mode: SendKind,
    /// Receive primitive (logp_test: -Recv, -Irecv).
    #[arg(long, value_enum, default_value = "recv")]
    pub recv_mode: RecvKind,
    /// Print the saturation steps (logp_test: -verbose).
    #[arg(long)]
    pub verbose: bool,
}

/// The run's result (meaningful on rank 0).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub clock_overhead_ns: f64,
    pub g0_ns: f64,
    pub g0_messages: u64,
    pub rtt0_ns: f64,
    /// L = RTT(0)/2 − g(0); `None` (unknown) when not positive.
    #[serde(rename = "L_ns")]
    pub l_ns: Option<f64>,
    /// RTT(0)/2 − g(0) whatever its sign.
    pub l_raw_ns: f64,
    #[serde(rename = "G_ns_per_byte")]
    pub g_ns_per_byte: f64,
    /// G's interval at `--conf-int` (`None`: fewer than two sizes).
    pub g_interval: Option<(f64, f64)>,
    /// The largest size measured (beyond --max-size when g was still
    /// decreasing there).
    pub k_max: usize,
    pub sizes: Vec<SizeResult>,
}

/// One size's row: os, or, g and RTT with their intervals; L on size 0.
#[derive(Debug, Clone, Serialize)]
pub struct LogpRow {
    pub size: usize,
    pub os_ns: f64,
    pub os_lo_ns: f64,
    pub os_hi_ns: f64,
    pub os_min_ns: f64,
    pub os_samples: usize,
    pub or_ns: f64,
    pub or_lo_ns: f64,
    pub or_hi_ns: f64,
    pub or_min_ns: f64,
    pub or_samples: usize,
    pub g_ns: f64,
    pub g_lo_ns: f64,
    pub g_hi_ns: f64,
    pub rtt_ns: f64,
    pub rtt_lo_ns: f64,
    pub rtt_hi_ns: f64,
    pub rtt_min_ns: f64,
    pub samples: usize,
    pub probed: bool,
    pub extended: bool,
    pub remarks: Vec<String>,
    pub ops: OpCounts,
    /// The repetitions of os, or and g as HDR histograms (src/stats/hist.rs)
    /// for `ovbench compare`; g's `null` where it comes from a saturation
    /// test (size 0, `--flood`): one figure, no repetitions.
    pub os_histogram: Option<String>,
    pub or_histogram: Option<String>,
    pub g_histogram: Option<String>,
    /// Only size 0's row has L: `null` (with `L_reason`) when unknown.
    #[serde(rename = "L_ns", skip_serializing_if = "Option::is_none")]
    pub l_ns: Option<Option<f64>>,
    #[serde(rename = "L_reason", skip_serializing_if = "Option::is_none")]
    pub l_reason: Option<String>,
    /// Whether the repetitions met the confidence rule (false: they
    /// stopped at `--max-its`; the flag reads `max-its`).
    pub converged: bool,
    #[serde(flatten)]
    pub verdict: Marks,
}

impl LogpRow {
    fn new(r: &SizeResult, l: Option<(f64, &str)>) -> LogpRow {
        let (l_ns, l_reason) = match l {
            Some((l, "")) => (Some(Some(l)), None),
            Some((_, why)) => (Some(None), Some(why.to_string())),
            None => (None, None),
        };
        LogpRow {
            size: r.size,
            os_ns: r.os.mean,
            os_lo_ns: r.os.lo,
            os_hi_ns: r.os.hi,
            os_min_ns: r.os.min,
            os_samples: r.os.samples,
            or_ns: r.or.mean,
            or_lo_ns: r.or.lo,
            or_hi_ns: r.or.hi,
            or_min_ns: r.or.min,
            or_samples: r.or.samples,
            g_ns: r.g.mean,
            g_lo_ns: r.g.lo,
            g_hi_ns: r.g.hi,
            rtt_ns: r.rtt.mean,
            rtt_lo_ns: r.rtt.lo,
            rtt_hi_ns: r.rtt.hi,
            rtt_min_ns: r.rtt.min,
            samples: r.os.samples + r.or.samples,
            probed: r.probed,
            extended: r.extended,
            remarks: r.remarks.clone(),
            ops: r.ops,
            os_histogram: hist::encode(&r.reps.os),
            or_histogram: hist::encode(&r.reps.or),
            g_histogram: hist::encode(&r.reps.g),
            l_ns,
            l_reason,
            converged: r.converged,
            verdict: r.verdict.marks(),
        }
    }

    /// The flag cell: `INVALID` for an impossible figure, else `max-its`
    /// where the confidence rule was not met, else `ok`.
    fn flag_cell(&self) -> String {
        if !self.verdict.valid || self.converged {
            self.verdict.cell()
        } else {
            "max-its".into()
        }
    }
    /// The remarks cell: the rules' remarks, and how the size came about.
    fn remarks_cell(&self) -> String {
        let mut remarks = self.remarks.join(" ");
        if self.probed {
            remarks = format!("probe {remarks}").trim().to_string();
        }
        if self.extended {
            remarks = format!("{remarks} k_max extended").trim().to_string();
        }
        remarks
    }
}

impl FixedRow for LogpRow {
    fn columns() -> Vec<Column<LogpRow>> {
        vec![
            Column::new("size", "size", |r: &LogpRow| r.size.to_string()),
            micros("os[us]", "os_ns", |r| r.os_ns),
            Column::new("os#", "os_samples", |r: &LogpRow| r.os_samples.to_string()),
            micros("or[us]", "or_ns", |r| r.or_ns),
            Column::new("or#", "or_samples", |r: &LogpRow| r.or_samples.to_string()),
            micros("g[us]", "g_ns", |r| r.g_ns),
            Column::new("L[us]", "L_ns", |r: &LogpRow| match r.l_ns {
                Some(Some(l)) => us(l, 3),
                Some(None) => "unknown".into(),
                None => String::new(),
            }),
            Column::new("flag", "valid", LogpRow::flag_cell),
            Column::new("remarks", "remarks", LogpRow::remarks_cell),
        ]
    }
}

fn emit(r: &SizeResult, l: Option<(f64, &str)>, shared: bool, sink: &mut dyn Sink) {
    Table::quiet(&()).add(sink, &LogpRow::new(r, l));
    r.verdict.note(sink, &format!("size {}", r.size));
    if !r.converged {
        let cap = if shared {
            format!(
                "{} rounds (the ranks share CPUs: the scheduler, not more repetitions, sets the spread)",
                measure::SHARED_ROUNDS
            )
        } else {
            "--max-its".to_string()
        };
        sink.note(&format!(
            "size {}: the repetitions stopped at {cap} with the interval still wider than 2 x eps: its figures stand, less sure than asked (flag max-its)",
            r.size
        ));
    }
}

/// The sizes of the initial sweep after 0: `--min-size` when it is no
/// power of two, the powers of two from it up to `--max-size`, and
/// `--max-size` itself (as logp_mpi.c adds it).
fn sweep(min_size: usize, max_size: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    if min_size > 0 && !min_size.is_power_of_two() {
        sizes.push(min_size);
    }
    // deviation: sweep-powers-of-two — powers of two between the bounds, default min 0, see docs/methods/logp.md
    let mut k = 1usize;
    while k <= max_size {
        if k >= min_size {
            sizes.push(k);
        }
        k *= 2;
    }
    if max_size > 0 && sizes.last() != Some(&max_size) {
        sizes.push(max_size);
    }
    sizes
}

/// The options' own limits, checked before any rank starts (and again on
/// every rank): each error names its option and a value that works.
#[deny(clippy::arithmetic_side_effects)]
pub fn check_args(args: &Args) -> anyhow::Result<()> {
    let positive = |flag: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "{flag} {v}: give a positive fraction, e.g. {flag} 0.03"
            ))
        }
    };
    positive("--eps", args.eps)?;
    positive("--max-diff", args.max_diff)?;
    if !(args.conf_int > 0.0 && args.conf_int < 1.0) {
        bail!(
            "--conf-int {}: a confidence level lies strictly between 0 and 1, e.g. --conf-int 0.9",
            args.conf_int
        );
    }
    if args.max_its == 0 {
        bail!("--max-its 0: give at least 1 repetition, e.g. --max-its 18");
    }
    let (min_size, max_size) = (args.min_size.bytes(), args.max_size.bytes());
    // 0 asks for the 0-byte parameters alone (G is then reported unknown);
    // 1 measures one size above 0, from which no slope can be fitted.
    if max_size == 1 {
        bail!("--max-size 1: logp fits the per-byte gap G over the message sizes above 0 up to it and needs at least 2 of them: give --max-size 2 or more (e.g. 64K), or 0 for the 0-byte parameters alone");
    }
    if min_size > max_size {
        bail!(
            "--min-size {min_size} is above --max-size {max_size}: give --min-size at most --max-size"
        );
    }
    if !max_size.checked_mul(8).is_some_and(|b| b <= 1 << 32) {
        bail!("--max-size {max_size} is too large: at most 512M (k_max may reach 8× it)");
    }
    Ok(())
}

/// Run the method on every rank; rank 0's sink prints.
pub fn run(
    comm: &mut dyn Communicator,
    args: &Args,
    sink: &mut dyn Sink,
) -> anyhow::Result<Output> {
    if comm.size() < 2 {
        bail!("logp needs at least 2 ranks (rank 0 measures, rank 1 mirrors)");
    }
    check_args(args)?;
    let shared = comm.shares_cpu();
    let min_size = args.min_size.bytes();
    let max_size = args.max_size.bytes();
    // k_max may grow to 8× --max-size (logp_mpi.c's LOGP_MAX_BUF_EXT).
    let limit = max_size.saturating_mul(8);
    let me = comm.rank();
    let clock_ns = comm.clock().info().call_cost_ns;
    let mut out = Output {
        clock_overhead_ns: clock_ns,
        g0_ns: 0.0,
        g0_messages: 0,
        rtt0_ns: 0.0,
        l_ns: None,
        l_raw_ns: 0.0,
        g_ns_per_byte: 0.0,
        g_interval: None,
        k_max: 0,
        sizes: Vec::new(),
    };
    let buf = comm.alloc(limit.max(1))?;
    let ctrl = Ctrl::new(comm)?;
    comm.barrier()?;
    if me > 1 {
        comm.barrier()?;
        return Ok(out);
    }
    let mut p = Peer {
        comm,
        ctrl,
        buf,
        peer: 1 - me,
        send: args.send_mode,
        recv: args.recv_mode,
        clock_ns,
    };
    if me == 1 {
        p.mirror()?;
        p.comm.barrier()?;
        return Ok(out);
    }
    sink.note("rank 0 measures with peer 1; rank 1 mirrors");
    sink.note(&format!("Clock overhead is {:.3} us", clock_ns / 1000.0));

    let mut ms = Measurer {
        p,
        args,
        floor_ns: 100.0 * clock_ns,
        rtt0: Figure::default(),
        g0: Figure::default(),
        shared,
    };
    let g0 = ms.saturation(0, sink)?;
    ms.g0 = g0;
    out.g0_ns = g0.mean;
    out.g0_messages = g0.samples as u64;
    sink.note(&format!(
        "g(0) = {} us from {} messages in a row",
        us(g0.mean, 3),
        g0.samples
    ));
    Table::<LogpRow>::start(
        sink,
        &format!(
            "LogP parameters ({:?}/{:?}), {:.0}% confidence",
            args.send_mode,
            args.recv_mode,
            args.conf_int * 100.0
        ),
        &(),
    );
    let mut results: BTreeMap<usize, SizeResult> = BTreeMap::new();
    let mut r0 = ms.measure(0, sink)?;
    ms.rtt0 = r0.rtt;
    out.rtt0_ns = r0.rtt.mean;
    out.l_raw_ns = r0.rtt.mean / 2.0 - g0.mean;
    // logp_mpi.c: L not positive is unknown.
    let l_why = if out.l_raw_ns > 0.0 {
        out.l_ns = Some(out.l_raw_ns);
        String::new()
    } else {
        format!(
            "RTT(0)/2 = {} us is not above g(0) = {} us: L unknown",
            us(r0.rtt.mean / 2.0, 3),
            us(g0.mean, 3)
        )
    };
    // deviation: no-clamp — an L not positive flags size 0's row, see docs/methods/logp.md
    r0.verdict.check(l_why.is_empty(), || l_why.clone());
    emit(&r0, Some((out.l_raw_ns, &l_why)), shared, sink);
    results.insert(0, r0);

    for m in sweep(min_size, max_size) {
        let r = ms.measure(m, sink)?;
        emit(&r, None, shared, sink);
        results.insert(m, r);
    }

    // k_max: on while g at the largest size is still falling below the
    // line through the two before it.
    while let Some((next, d)) = next_k_max(&results, args.eps, limit) {
        let top = results.keys().next_back().copied().unwrap_or(0);
        sink.note(&format!(
            "g({top}) is {:.1}% below the extrapolation: k_max extended to {next} (past --max-size {max_size})",
            d * 100.0
        ));
        let mut r = ms.measure(next, sink)?;
        r.extended = true;
        emit(&r, None, shared, sink);
        results.insert(next, r);
    }
    out.k_max = results.keys().next_back().copied().unwrap_or(0);

    probe_nonlinear(&mut ms, &mut results, sink, |r, s| emit(r, None, shared, s))?;

    // G: the least-squares slope of g(m) over the largest swept sizes.
    let big: Vec<(f64, f64)> = results
        .values()
        .filter(|r| r.size > 0 && !r.probed)
        .rev()
        .take(4)
        .map(|r| (r.size as f64, r.g.mean))
        .collect();
    let (g_big, g_verdict) = rules::per_byte_gap(&big, args.conf_int);
    out.g_ns_per_byte = g_big.map_or(0.0, |e| e.point);
    out.g_interval = g_big.map(|e| (e.ci.lower, e.ci.upper));
    out.sizes = results.into_values().collect();
    ms.p.command(OP_STOP, 0, 0)?;
    ms.p.comm.barrier()?;
    let mut lines = vec![
        match out.l_ns {
            Some(l) => format!("L = RTT(0)/2 - g(0) = {} us", us(l, 3)),
            None => format!("L unknown: {l_why}"),
        },
        match out.g_interval {
            Some((lo, hi)) => format!(
                "G = {:.6} ns/byte [{lo:.6}, {hi:.6}] ({} largest sizes){}",
                out.g_ns_per_byte,
                big.len(),
                if g_verdict.valid() { "" } else { " INVALID" }
            ),
            None => format!("G unknown ({} sizes above 0)", big.len()),
        },
        format!(
            "g(0) = {} us, RTT(0) = {} us",
            us(out.g0_ns, 3),
            us(out.rtt0_ns, 3)
        ),
    ];
    if out.k_max > max_size {
        lines.push(format!(
            "k_max = {} bytes: extended past --max-size {max_size} while g(m) was still decreasing",
            out.k_max
        ));
    }
    let mut summary = serde_json::json!({
        "L_ns": out.l_ns,
        "L_raw_ns": out.l_raw_ns,
        "G_ns_per_byte": out.g_ns_per_byte,
        "G_lo_ns_per_byte": out.g_interval.map(|i| i.0),
        "G_hi_ns_per_byte": out.g_interval.map(|i| i.1),
        "G_valid": g_verdict.valid(),
        "g0_ns": out.g0_ns,
        "g0_lo_ns": g0.lo,
        "g0_hi_ns": g0.hi,
        "g0_messages": out.g0_messages,
        "rtt0_ns": out.rtt0_ns,
        "clock_overhead_ns": out.clock_overhead_ns,
        "k_max": out.k_max,
        "k_max_extended": out.k_max > max_size,
    });
    if out.l_ns.is_none() {
        summary["L_reason"] = l_why.into();
    }
    if !g_verdict.valid() {
        summary["G_reason"] = g_verdict.reason().into();
    }
    sink.summary(summary, &lines);
    g_verdict.note(sink, "G");
    Ok(out)
}
