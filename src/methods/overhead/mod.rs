//! Host send/receive overhead and application availability by the
//! post-work-wait loop (Sandia SMB's mpi_overhead, "Host Processor
//! Overhead", D. Doerfler, Sandia National Laboratories).
//!
//! For each message size the measuring rank posts a transfer, does `work`
//! ns of computation, and waits; `work` doubles from 1. `iter_t`, the
//! loop time per iteration, stays at `base_t` while the work hides behind
//! the transfer and grows once it dominates. `base_t` is the running mean
//! of the `iter_t` samples below `bthresh·base_t` (the original's low-pass
//! rule); the loop stops once `iter_t > thresh·base_t`. The same work is
//! then timed without messaging (`work_t`), and overhead = `iter_t −
//! work_t`, availability = `1 − overhead/base_t`.
//!
//! base_t is what the original calls the transfer time, but it is the
//! timed loop itself at small work — barrier, post and wait — so about a
//! round trip (the barrier's message one way, the data the other), not a
//! one-way latency. Availability keeps the original's definition.
//!
//! Partners and loop shape follow mpi_overhead.c: rank r measures and
//! rank r+N/2 is its partner (N even), every iteration contains a barrier
//! and the whole loop, barrier included, is timed — the work-only loop
//! too, so the barrier cancels. For send overhead the partner pre-posts
//! its receive; with `--recv` the measuring rank posts its receive before
//! the barrier and the partner sends with a blocking send. Each timed loop
//! is preceded by one untimed iteration of itself, so it starts in the
//! steady state it ends in, and each measurement by one untimed loop at
//! work 1, so the sample that seeds base_t's filter is not a cold one.
//!
//! Beyond the original: the whole measurement is repeated (`--repeats`,
//! default 5) and reported as the median with the min–max of the repeats;
//! a repeat with an impossible figure (overhead < 0, availability outside
//! 0–100 %) is measured again up to [`RETRIES`] times (not at all where
//! ranks share CPUs), and a row that
//! still has one is flagged (a `flag` cell, `"valid": false` and a
//! reason in JSON), never printed as a plain result. The two loops are
//! timed apart, so noise that hits one of them (a rank losing its core)
//! moves the difference by far more than the overhead itself: that is
//! where negative overheads come from.
//!
//! With more than one pair the barrier is global, so the pairs are
//! coupled: a message the loop moves from the barrier (where it may sit in
//! another rank's slack) into the wait shows as overhead. The figures of
//! one pair (two ranks) are the method's own.

mod measure;
mod rules;

use anyhow::{bail, Context};
use ovbench_core::{Communicator, OpCounts};
use serde::Serialize;

use super::common::{micros, Ctrl, Marks, Verdict};
use crate::output::{fixed, Column, FixedRow, Table};
use crate::report::Sink;
use crate::sizes::{ByteSize, Sizes};
use measure::Loop;
pub use measure::{Run, WorkStep};
pub use rules::{coverage, load1, Spread};

/// Re-measurements of a repeat with an impossible figure before the row
/// is flagged.
pub const RETRIES: u32 = 3;

/// What base_t is, for the help's reader and the JSON's.
pub const BASE_T_IS: &str = "base_t: the timed post-work-wait loop with its barrier while the work is small, about a round trip (as in mpi_overhead), filtered by the original's low-pass rule";

/// `ovbench overhead`: mpi_overhead's post-work-wait loop.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Measure receive overhead instead of send overhead (mpi_overhead: -r, --recv).
    #[arg(long)]
    pub recv: bool,
    /// Iterations per work value; default: 1000 below 64 KiB, 100 below
    /// 8 MiB, 10 above (mpi_overhead: -i, --iterations).
    #[arg(long = "iters", visible_alias = "iterations", value_name = "N", value_parser = crate::cli::counts::iters)]
    pub iterations: Option<u64>,
    /// One message size in bytes (mpi_overhead: -m, --msgsize) [default: 8].
    #[arg(long, conflicts_with = "sizes")]
    pub msgsize: Option<ByteSize>,
    /// A size sweep: MIN:MAX (powers of two) or a list 8,1K,1M.
    #[arg(long)]
    pub sizes: Option<Sizes>,
    /// Stop once iter_t exceeds thresh·base_t (mpi_overhead: -t, --thresh).
    #[arg(long, default_value_t = 1.5, value_parser = above_one)]
    pub thresh: f64,
    /// base_t, the timed loop with its barrier at small work (about a
    /// round trip), is the mean of the iter_t samples below
    /// bthresh·base_t (mpi_overhead: -b, --bthresh).
    #[arg(long, default_value_t = 1.02, value_parser = above_one)]
    pub bthresh: f64,
    /// Whole measurements per size; the table shows their median and
    /// min–max (1 − 2·0.5^N of covering the median: 93.75% for 5).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: u32,
    /// Print a row per work value (mpi_overhead: -v, --verbose).
    #[arg(long)]
    pub verbose: bool,
    /// Leave out the header lines (mpi_overhead: -n, --nohdr).
    #[arg(long)]
    pub nohdr: bool,
}

/// A threshold factor: a finite number above 1.
fn above_one(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if v.is_finite() && v > 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "`{s}`: a threshold factor must be a finite number above 1 (e.g. 1.5)"
        ))
    }
}

/// The result for one message size: the median repeat's figures and the
/// min–max over the repeats.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub size: usize,
    pub iterations: u64,
    /// Which of `runs` the figures are (the repeat of median overhead).
    pub median_repeat: usize,
    /// The median repeat's figures (the ones printed).
    pub iter_ns: f64,
    pub work_ns: f64,
    pub overhead_ns: f64,
    pub base_ns: f64,
    pub avail_pct: f64,
    pub overhead: Spread,
    pub avail: Spread,
    pub base: Spread,
    /// The repeats kept, and the impossible ones measured again.
    pub runs: Vec<Run>,
    pub rejected: Vec<Run>,
    pub verdict: Verdict,
    /// The repeats' overhead max/min (none where the min is not above 0).
    pub spread_ratio: Option<f64>,
    /// The repeats' overheads disagree by more than `--thresh`.
    pub noisy: bool,
    /// Operations this rank posted in the median repeat's final loop.
    pub ops: OpCounts,
    /// The median repeat's work values.
    pub steps: Vec<WorkStep>,
}

impl SizeResult {
    /// The `flag` cell: `INVALID` (an impossible repeat), `noisy` (the
    /// repeats disagree beyond `--thresh`; still a result) or `ok`.
    pub fn flag(&self) -> &'static str {
        if !self.verdict.valid() {
            "INVALID"
        } else if self.noisy {
            "noisy"
        } else {
            "ok"
        }
    }
}

/// What `run` returns (rank 0's pair; other ranks' own pair).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub direction: &'static str,
    pub pairs: u32,
    pub repeats: u32,
    pub sizes: Vec<SizeResult>,
}

/// The automatic iteration count of the original.
pub fn auto_iterations(size: usize) -> u64 {
    if size < 64 << 10 {
        1000
    } else if size < 8 << 20 {
        100
    } else {
        10
    }
}

/// Run the method on every rank; rank 0's sink prints.
pub fn run(
    comm: &mut dyn Communicator,
    args: &Args,
    sink: &mut dyn Sink,
) -> anyhow::Result<Output> {
    let n = comm.size();
    if n < 2 || n % 2 != 0 {
        bail!("overhead pairs rank r with rank r+N/2: it needs an even number of ranks, not {n}");
    }
    // Checked again here for callers that build Args without the parser.
    for (name, v) in [("--thresh", args.thresh), ("--bthresh", args.bthresh)] {
        above_one(&v.to_string()).map_err(|e| anyhow::anyhow!("{name} {e}"))?;
    }
    if args.repeats == 0 || args.iterations == Some(0) {
        bail!("--repeats and --iterations must be at least 1");
    }
    let sizes = match (&args.sizes, &args.msgsize) {
        (Some(s), _) => s.as_slice().to_vec(),
        (None, Some(m)) => vec![m.bytes()],
        (None, None) => vec![8],
    };
    let me = comm.rank();
    let half = n / 2;
    let measuring = me < half;
    let partner = if measuring { me + half } else { me - half };
    let max = sizes.iter().copied().max().unwrap_or(0);
    let buf = comm.alloc(max.max(1))?;
    let ctrl = Ctrl::new(comm)?;
    let direction = if args.recv { "receive" } else { "send" };
    let cpus = crate::env::core_map().len();
    let load_start = load1();
    let level = coverage(args.repeats as usize);
    let virtual_clock = comm.clock().info().source == "virtual";
    let cause = rules::likely_cause(virtual_clock, load_start, cpus, n);
    // Where ranks share CPUs an impossible figure is the scheduler's, and
    // measuring it again only chases it: such a row is flagged at once.
    let retries = if comm.shares_cpu() { 0 } else { RETRIES };

    if !args.nohdr {
        header(comm, args, sink, direction, half, load_start, cpus, level);
    }
    sink.summary(
        serde_json::json!({
            "base_t": BASE_T_IS,
            "repeats": args.repeats,
            "retries": retries,
            "interval": "min-max of the repeats",
            "interval_level": level,
            "load1_start": load_start,
            "cpus": cpus,
        }),
        &[],
    );
    let title = format!("{direction} overhead");
    let table = Table::<OverheadRow>::quiet(&());
    if !args.verbose {
        table.heading(sink, &title);
    }

    let mut out = Output {
        direction,
        pairs: half,
        repeats: args.repeats,
        sizes: Vec::new(),
    };
    let mut lp = Loop {
        comm,
        ctrl,
        buf,
        partner,
        measuring,
        recv_mode: args.recv,
        thresh: args.thresh,
        bthresh: args.bthresh,
    };
    for &size in &sizes {
        let iters = args.iterations.unwrap_or_else(|| auto_iterations(size));
        let mut runs = Vec::new();
        let mut rejected = Vec::new();
        // deviation: repeats-median — the measurement repeated; median and min–max reported, see docs/methods/overhead.md
        for rep in 0..args.repeats {
            if args.verbose {
                let title = format!(
                    "msgsize {size}, repeat {}/{}: {iters} iterations per work value",
                    rep + 1,
                    args.repeats
                );
                Table::<measure::StepRow>::start(sink, &title, &());
            }
            let mut r = lp.measure(size, iters, args.verbose, sink)?;
            // An impossible figure is measured again (every pair, so the
            // barriers stay matched); a pair keeps its first possible one.
            // deviation: retry-impossible — an impossible repeat is measured again, then flagged, see docs/methods/overhead.md
            for _ in 0..retries {
                let possible = !measuring || r.problems().is_empty();
                if lp.all(possible)? {
                    break;
                }
                let again = lp.measure(size, iters, args.verbose, sink)?;
                if !possible {
                    rejected.push(std::mem::replace(&mut r, again));
                }
            }
            runs.push(r);
        }
        let res = summarize(size, iters, (runs, rejected), retries, &cause, args.thresh);
        if args.verbose {
            table.heading(sink, &title);
        }
        table.add(
            sink,
            &OverheadRow::new(&res, direction, args.repeats, level),
        );
        res.verdict.note(sink, &format!("msgsize {}", res.size));
        if res.verdict.valid() && res.noisy {
            sink.note(&noise_note(&res, args.thresh));
        }
        out.sizes.push(res);
    }
    lp.comm.barrier().context("final barrier")?;
    let end = load1();
    let line = match (end, args.nohdr) {
        (Some(l), false) => vec![format!("load average (1 min) at end: {l:.2}")],
        _ => vec![],
    };
    sink.summary(serde_json::json!({ "load1_end": end }), &line);
    Ok(out)
}

/// The header lines (the original's, plus what this tool adds).
#[allow(clippy::too_many_arguments)]
fn header(
    comm: &dyn Communicator,
    args: &Args,
    sink: &mut dyn Sink,
    direction: &str,
    pairs: u32,
    load: Option<f64>,
    cpus: usize,
    level: f64,
) {
    let ci = comm.clock().info();
    sink.note(&format!("Calculating {direction} overhead"));
    match args.iterations {
        Some(i) => sink.note(&format!("Using {i} iterations per work value")),
        None => sink.note("Iterations are being calculated automatically"),
    }
    sink.note(&format!(
        "Overhead comparison threshold is {:.6} ({:.1}%)",
        args.thresh,
        (args.thresh - 1.0) * 100.0
    ));
    sink.note(&format!(
        "Base time comparison threshold is {:.6} ({:.1}%)",
        args.bthresh,
        (args.bthresh - 1.0) * 100.0
    ));
    sink.note(&format!(
        "Timing resolution is {:.3} us ({} clock); work unit {:.3} ns; {} pair(s)",
        ci.resolution_ns / 1000.0,
        ci.source,
        comm.work_unit_ns(),
        pairs
    ));
    sink.note(BASE_T_IS);
    sink.note(&format!(
        "figures are medians of {} repeats; min/max columns are the repeats' range, a distribution-free interval that covers the median with probability {:.2}%",
        args.repeats,
        100.0 * level
    ));
    let load = load.map_or("unknown".into(), |l| format!("{l:.2}"));
    sink.note(&format!(
        "load average (1 min) at start: {load} on {cpus} CPUs"
    ));
}

/// The median repeat's figures, the ranges and the verdicts of one size's
/// repeats.
fn summarize(
    size: usize,
    iters: u64,
    (runs, rejected): (Vec<Run>, Vec<Run>),
    retries: u32,
    cause: &str,
    thresh: f64,
) -> SizeResult {
    let of = |f: fn(&Run) -> f64| Spread::of(&runs.iter().map(f).collect::<Vec<_>>());
    let (overhead, avail, base) = (
        of(|r| r.overhead_ns),
        of(|r| r.avail_pct),
        of(|r| r.base_ns),
    );
    let per: Vec<Vec<String>> = runs.iter().map(Run::problems).collect();
    let verdict = rules::verdict(&per, retries, cause);
    // deviation: median-repeat — the row is the repeat of median overhead, see docs/methods/overhead.md
    let pick = rules::median_repeat(&runs.iter().map(|r| r.overhead_ns).collect::<Vec<_>>());
    let shown = runs.get(pick).cloned().unwrap_or_default();
    SizeResult {
        size,
        iterations: iters,
        median_repeat: pick,
        iter_ns: shown.iter_ns,
        work_ns: shown.work_ns,
        overhead_ns: shown.overhead_ns,
        base_ns: shown.base_ns,
        avail_pct: shown.avail_pct,
        spread_ratio: rules::spread_ratio(&overhead),
        noisy: rules::noisy(&overhead, thresh),
        overhead,
        avail,
        base,
        ops: shown.ops,
        steps: shown.steps,
        runs,
        rejected,
        verdict,
    }
}

/// Why a row is marked `noisy`, and what it shows.
fn noise_note(r: &SizeResult, thresh: f64) -> String {
    let ratio = r
        .spread_ratio
        .map_or("no ratio (min not above 0)".into(), |x| {
            format!("max/min {x:.2}")
        });
    format!(
        "msgsize {}: noisy: the {} repeats' overheads span {:.3}-{:.3} us, {ratio} > --thresh {thresh}; the row is repeat {} (median overhead), its columns one measurement's; rerun on an idle machine, one rank per core, or with more --iterations",
        r.size,
        r.runs.len(),
        r.overhead.lo / 1000.0,
        r.overhead.hi / 1000.0,
        r.median_repeat + 1
    )
}

/// One size's row: the median repeat, the repeats' min-max ranges, and
/// every repeat.
#[derive(Serialize)]
pub struct OverheadRow {
    pub size: usize,
    pub iterations: u64,
    pub samples: u64,
    pub repeats: u32,
    pub direction: &'static str,
    /// Which of `runs` the figures are (0-based).
    pub median_repeat: usize,
    pub iter_ns: f64,
    pub work_ns: f64,
    pub overhead_ns: f64,
    pub overhead_lo_ns: f64,
    pub overhead_hi_ns: f64,
    pub base_ns: f64,
    pub base_lo_ns: f64,
    pub base_hi_ns: f64,
    pub avail_pct: f64,
    pub avail_lo_pct: f64,
    pub avail_hi_pct: f64,
    pub interval: &'static str,
    pub interval_level: f64,
    pub runs: Vec<measure::Run>,
    pub rejected: Vec<measure::Run>,
    pub ops: OpCounts,
    /// The repeats' overhead max/min (null where the min is not above 0).
    pub spread_ratio: Option<f64>,
    /// `ok`, `noisy` (repeats apart by more than `--thresh`, still valid)
    /// or `INVALID`.
    pub flag: &'static str,
    #[serde(flatten)]
    pub verdict: Marks,
}

impl OverheadRow {
    fn new(r: &SizeResult, direction: &'static str, repeats: u32, level: f64) -> OverheadRow {
        OverheadRow {
            size: r.size,
            iterations: r.iterations,
            samples: r.iterations,
            repeats,
            direction,
            median_repeat: r.median_repeat,
            iter_ns: r.iter_ns,
            work_ns: r.work_ns,
            overhead_ns: r.overhead_ns,
            overhead_lo_ns: r.overhead.lo,
            overhead_hi_ns: r.overhead.hi,
            base_ns: r.base_ns,
            base_lo_ns: r.base.lo,
            base_hi_ns: r.base.hi,
            avail_pct: r.avail_pct,
            avail_lo_pct: r.avail.lo,
            avail_hi_pct: r.avail.hi,
            interval: "min-max of the repeats",
            interval_level: level,
            runs: r.runs.clone(),
            rejected: r.rejected.clone(),
            ops: r.ops,
            spread_ratio: r.spread_ratio,
            flag: r.flag(),
            verdict: r.verdict.marks(),
        }
    }
}

impl FixedRow for OverheadRow {
    fn columns() -> Vec<Column<Self>> {
        let pct = |head: &'static str, field: &'static str, f: fn(&OverheadRow) -> f64| {
            Column::new(head, field, move |r: &OverheadRow| fixed(f(r), 1))
        };
        vec![
            Column::new("msgsize", "size", |r: &OverheadRow| r.size.to_string()),
            Column::new("iterations", "iterations", |r: &OverheadRow| {
                r.iterations.to_string()
            }),
            micros("iter_t[us]", "iter_ns", |r| r.iter_ns),
            micros("work_t[us]", "work_ns", |r| r.work_ns),
            micros("overhead[us]", "overhead_ns", |r| r.overhead_ns),
            micros("ovh_min[us]", "overhead_lo_ns", |r| r.overhead_lo_ns),
            micros("ovh_max[us]", "overhead_hi_ns", |r| r.overhead_hi_ns),
            micros("base_t[us]", "base_ns", |r| r.base_ns),
            pct("avail(%)", "avail_pct", |r| r.avail_pct),
            pct("avail_min", "avail_lo_pct", |r| r.avail_lo_pct),
            pct("avail_max", "avail_hi_pct", |r| r.avail_hi_pct),
            Column::new("flag", "flag", |r: &OverheadRow| r.flag.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_show_json_keys() {
        let r = summarize(
            8,
            10,
            (vec![measure::Run::default()], Vec::new()),
            RETRIES,
            "",
            1.5,
        );
        let row = OverheadRow::new(&r, "send", 1, 1.0);
        crate::output::check_fields(&(), &row).unwrap();
    }
}
