//! Broadcast measured five ways (de Supinski and Karonis, "Accurately
//! Measuring MPI Broadcasts in a Computational Grid", HPDC 1999).
//!
//! * `send-latency`: the root's time per broadcast in a loop of M — really
//!   the root's gap g_0.
//! * `rounds`: M rounds of one broadcast per root, roots in forward and in
//!   backward order, per broadcast — a lower bound on OL.
//! * `barrier`: M broadcast + barrier pairs — an upper bound.
//! * `ack`: M broadcasts each acknowledged by every rank — an upper bound.
//! * `oli`: per destination i, RTL_i by a 0-byte ping-pong, E_i by M
//!   broadcasts each acknowledged by i only; OL_i = E_i − RTL_i/2, and
//!   max_i OL_i estimates OL. With it, the per-processor overhead o_i and
//!   gap g_i of the paper's §2, and its assumption checked on i's path:
//!   E_i > g_j for every rank j from the root to i.
//!
//! The broadcasts are ovbench's own, on point-to-point calls, so the
//! methods can be checked against known shapes: `binomial` (MPICH's
//! binomial tree, largest subtree first), `linear` (i receives from i−1),
//! `backward` (i receives from i+1) and `flat` (the root sends to every
//! rank — it breaks OL_i's assumption, as the paper notes, so its OL_i
//! rows are flagged where it does). Barriers for the `barrier` method:
//! `dissemination` and the linear `ring` (twice round the ring, ending
//! when the token reaches rank n−2 the second time).
//!
//! Every figure is repeated until the standard deviation of its
//! measurements is below 3% of their mean, between `--min-measurements`
//! (8) and `--max-measurements` (30) times — a deterministic system stops
//! early (see [`measure`]). A figure that misses the cutoff is measured
//! once more from scratch, then flagged. Impossible figures (a negative
//! time or OL_i) and broken assumptions are flagged with a
//! [`Verdict`]: a `flag` column, `"valid": false` and a `"reason"` in JSON.

mod algo;
mod checks;
mod measure;
mod report;

use anyhow::bail;
use ovbench_core::{Communicator, OpCounts, Rank};
use serde::Serialize;

use super::common::{Ctrl, Verdict};
use crate::report::Sink;
use crate::sizes::ByteSize;
pub use algo::binomial_tree;
pub use checks::Assumption;
use checks::{assumption, oli_verdict, Overstatement};
use measure::{Bc, Measured, What};
pub use report::sweep_summary;

/// Which measurement method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    SendLatency,
    Rounds,
    Barrier,
    Ack,
    Oli,
    All,
}

/// ovbench's own broadcast algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// MPICH's binomial tree, largest subtree first.
    Binomial,
    /// A chain: rank i receives from rank i−1.
    Linear,
    /// A chain the other way: rank i receives from rank i+1.
    Backward,
    /// The root sends to every other rank in turn.
    Flat,
    /// The MPI library's own `MPI_Bcast` (`--transport mpi`, where it is
    /// the default); its tree is the library's and unknown: what needs a
    /// rank's depth, children or path is not measured or not checked.
    Library,
}

/// Barriers for the `barrier` method, built on point-to-point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BarrierKind {
    /// ⌈log2 P⌉ rounds: send to r+2^k, receive from r−2^k.
    Dissemination,
    /// Twice round the ring from rank 0 (the reference's Figure 5).
    Ring,
}

/// `ovbench bcast`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Measurement method.
    #[arg(long, value_enum, default_value = "oli")]
    pub method: Method,
    /// Broadcast algorithm.
    #[arg(long, value_enum, default_value = "binomial")]
    pub algorithm: Algorithm,
    /// Barrier of the `barrier` method.
    // deviation: dissemination-barrier — default barrier is dissemination, see docs/methods/bcast.md
    #[arg(long, value_enum, default_value = "dissemination")]
    pub barrier: BarrierKind,
    /// Broadcasts per measurement (the reference's M).
    #[arg(long, default_value_t = 100, value_parser = crate::cli::counts::reps)]
    pub reps: u64,
    /// Broadcast message size (the reference uses 256 bytes and 64K).
    #[arg(
        long = "sizes",
        visible_alias = "msgsize",
        value_name = "SIZE",
        default_value = "256"
    )]
    pub msgsize: ByteSize,
    /// Fewest measurements per figure (the reference: 8).
    #[arg(long, default_value_t = 8, value_parser = crate::cli::counts::measurements)]
    pub min_measurements: usize,
    /// Most measurements per figure (the reference: 30).
    #[arg(long, default_value_t = 30, value_parser = crate::cli::counts::measurements)]
    pub max_measurements: usize,
    /// Stop once the standard deviation is below this fraction of the mean.
    #[arg(long, default_value_t = 0.03)]
    pub max_cv: f64,
}

/// One method's figure (ns per broadcast, at the root).
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub method: String,
    pub time_ns: f64,
    pub measurements: usize,
    pub stddev_pct: f64,
    /// Series measured: 2 when the first missed the cutoff.
    pub tries: usize,
    /// Operations the root posted in the last measurement (M broadcasts).
    pub ops: OpCounts,
    pub verdict: Verdict,
    /// Each measurement (ns per broadcast), for `ovbench compare`.
    #[serde(skip)]
    pub values_ns: Vec<f64>,
}

/// One destination's OL_i.
#[derive(Debug, Clone, Serialize)]
pub struct Oli {
    pub rank: Rank,
    pub rtl_ns: f64,
    pub e_ns: f64,
    pub ol_ns: f64,
    /// The standard deviations of RTL_i's and E_i's measurements, % of
    /// their means, and OL_i's from them (the two series are measured
    /// apart: sqrt(sd(E_i)² + sd(RTL_i)²/4)).
    pub rtl_stddev_pct: f64,
    pub e_stddev_pct: f64,
    pub ol_stddev_ns: f64,
    pub measurements: usize,
    pub tries: usize,
    /// The ranks from the root to i, where known.
    pub path: Option<Vec<Rank>>,
    pub assumption: Assumption,
    /// c_i·g_i, the longest i's acknowledgement may queue behind its own
    /// forwards (`None`: i's children are not known).
    pub forward_ns: Option<f64>,
    /// The 0-byte message gap between the root and i (either direction's).
    pub gap0_ns: f64,
    /// Whether max OL_i considers this row: not where OL_i may be
    /// overstated (queued behind forwards, or a gap-paced ping-pong).
    pub in_max: bool,
    pub verdict: Verdict,
}

/// The paper's per-processor overhead o_i and gap g_i at one rank.
#[derive(Debug, Clone, Serialize)]
pub struct PerProcessor {
    pub rank: Rank,
    /// i's children in the tree (`None`: the library's tree, unknown).
    pub children: Option<usize>,
    /// o_i (`None`: not measured — it needs i's depth in the tree).
    pub o_ns: Option<f64>,
    pub g_ns: f64,
    /// The standard deviations of o_i's and g_i's measurements, % of their
    /// means.
    pub o_stddev_pct: Option<f64>,
    pub g_stddev_pct: f64,
    pub measurements: usize,
    pub verdict: Verdict,
}

/// The run's result (meaningful on rank 0).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub algorithm: Algorithm,
    pub size: usize,
    pub reps: u64,
    pub ranks: u32,
    pub figures: Vec<Figure>,
    pub oli: Vec<Oli>,
    pub per_processor: Vec<PerProcessor>,
    pub max_ol_ns: Option<f64>,
    pub max_ol_rank: Option<Rank>,
    /// The verdict of the max OL_i's row.
    pub max_ol_verdict: Option<Verdict>,
    /// The ranks left out of max OL_i: their OL_i may be overstated.
    pub max_ol_excluded: Vec<Rank>,
}

/// How often a figure missed the cutoff: twice, or in the one series
/// ranks that share CPUs get.
pub(super) fn missed(tries: usize) -> &'static str {
    if tries >= 2 {
        "twice"
    } else {
        "in its one series (ranks sharing CPUs are not measured again)"
    }
}

/// Why a figure is no result: a negative time, or a series that missed
/// the cutoff twice.
fn figure_verdict(m: &Measured, args: &Args) -> Verdict {
    let mut v = Verdict::default();
    v.check(m.mean >= 0.0, || "time < 0".into());
    v.check(m.converged, || {
        format!(
            "stddev {:.2}% of the mean after {} measurements, {} (cutoff {:.2}%)",
            m.stddev_pct,
            m.measurements,
            missed(m.tries),
            args.max_cv * 100.0
        )
    });
    v
}

/// OL_i = E_i − RTL_i/2 from two series measured apart: its spread (one
/// standard deviation) is sqrt(sd(E_i)² + sd(RTL_i)²/4).
fn ol_stddev(rtl: &Measured, e: &Measured) -> f64 {
    let sd = |m: &Measured| m.stddev_pct / 100.0 * m.mean;
    (sd(e).powi(2) + sd(rtl).powi(2) / 4.0).sqrt()
}

/// The options' own limits, checked before any rank starts (and again on
/// every rank): each error names its option and a value that works.
#[deny(clippy::arithmetic_side_effects)]
pub fn check_args(args: &Args) -> anyhow::Result<()> {
    if args.reps == 0 {
        bail!("--reps 0: give at least 1 broadcast per measurement, e.g. --reps 100");
    }
    if args.min_measurements == 0 {
        bail!("--min-measurements 0: give at least 1, e.g. --min-measurements 8");
    }
    if args.max_measurements < args.min_measurements {
        bail!(
            "--max-measurements {} is below --min-measurements {}: give --max-measurements {} or more",
            args.max_measurements,
            args.min_measurements,
            args.min_measurements
        );
    }
    if !(args.max_cv.is_finite() && args.max_cv > 0.0) {
        bail!(
            "--max-cv {}: give a positive fraction of the mean, e.g. --max-cv 0.03",
            args.max_cv
        );
    }
    Ok(())
}

/// Run the method on every rank; rank 0's sink prints.
pub fn run(
    comm: &mut dyn Communicator,
    args: &Args,
    sink: &mut dyn Sink,
) -> anyhow::Result<Output> {
    let n = comm.size();
    if n < 3 {
        bail!("bcast needs at least 3 ranks (--np 3 or more), not {n}");
    }
    check_args(args)?;
    let size = args.msgsize.bytes();
    let buf = comm.alloc(size.max(1))?;
    let ctrl = Ctrl::new(comm)?;
    let mut bc = Bc {
        shared: comm.shares_cpu(),
        comm,
        buf,
        size,
        alg: args.algorithm,
        ctrl,
        ticks: Vec::with_capacity(args.reps as usize + 2),
    };
    let mut out = Output {
        algorithm: args.algorithm,
        size,
        reps: args.reps,
        ranks: n,
        figures: Vec::new(),
        oli: Vec::new(),
        per_processor: Vec::new(),
        max_ol_ns: None,
        max_ol_rank: None,
        max_ol_verdict: None,
        max_ol_excluded: Vec::new(),
    };
    let title = format!(
        "{} broadcast of {size} B over {n} ranks, M = {}",
        format!("{:?}", args.algorithm).to_lowercase(),
        args.reps
    );
    let all = args.method == Method::All;
    // Only rank 0's sink prints: at 1024 ranks, formatting the discarded
    // rows elsewhere cost a twentieth of the run.
    let printer = bc.me() == 0;

    if all || args.method == Method::Oli {
        // The gaps first: OL_i's assumption is checked against them.
        let delay = bc.settle_delay()?;
        let (o, g) = bc.per_processor(args, delay)?;
        let tree_known = args.algorithm != Algorithm::Library;
        for (r, (o, g)) in o.iter().zip(&g).enumerate() {
            let r = r as Rank;
            let mut v = Verdict::default();
            let o_fine = o.map_or(true, |o| o.mean >= 0.0);
            v.check(o_fine && g.mean >= 0.0, || "time < 0".into());
            let o_sd = o.map_or(0.0, |o| o.stddev_pct);
            v.check(o.map_or(true, |o| o.converged) && g.converged, || {
                format!(
                    "stddev {:.2}% (o_i), {:.2}% (g_i) of the mean, {} (cutoff {:.2}%)",
                    o_sd,
                    g.stddev_pct,
                    missed(o.map_or(1, |o| o.tries).max(g.tries)),
                    args.max_cv * 100.0
                )
            });
            out.per_processor.push(PerProcessor {
                rank: r,
                children: tree_known.then(|| algo::children(args.algorithm, r, 0, n).len()),
                o_ns: o.map(|o| o.mean),
                g_ns: g.mean,
                o_stddev_pct: o.map(|o| o.stddev_pct),
                g_stddev_pct: g.stddev_pct,
                measurements: o.map_or(0, |o| o.measurements).max(g.measurements),
                verdict: v,
            });
        }
        if printer {
            report::per_processor(sink, &title, &out.per_processor, delay);
        }
        if printer {
            report::oli_table(sink, &title);
        }
        for i in 1..n {
            let (rtl, e) = bc.oli(i, args)?;
            let gap0_ns = bc.stream_gap(i, args.reps)?;
            let ol = e.mean - rtl.mean / 2.0;
            let path = tree_known.then(|| algo::path(args.algorithm, 0, i, n));
            let assumption = assumption(e.mean, path.as_deref(), &out.per_processor);
            let at_i = out.per_processor.get(i as usize);
            let over = Overstatement {
                children: at_i.and_then(|p| p.children),
                g_ns: at_i.map_or(0.0, |p| p.g_ns),
                gap0_ns,
            };
            let overstated = over.reasons(ol, rtl.mean);
            let v = oli_verdict(ol, &assumption, &overstated, (&rtl, &e), args);
            let row = Oli {
                rank: i,
                rtl_ns: rtl.mean,
                e_ns: e.mean,
                ol_ns: ol,
                rtl_stddev_pct: rtl.stddev_pct,
                e_stddev_pct: e.stddev_pct,
                ol_stddev_ns: ol_stddev(&rtl, &e),
                measurements: rtl.measurements.max(e.measurements),
                tries: rtl.tries.max(e.tries),
                path,
                assumption,
                forward_ns: over.forward_ns(),
                gap0_ns,
                in_max: overstated.is_empty(),
                verdict: v,
            };
            if printer {
                report::oli_row(sink, &row, size, args.reps);
            }
            out.oli.push(row);
        }
        if printer {
            for o in &out.oli {
                o.verdict.note(sink, &format!("OL_{}", o.rank));
            }
        }
        // deviation: max-oli-leaves-out-overstated — see docs/methods/bcast.md
        out.max_ol_excluded = out
            .oli
            .iter()
            .filter(|o| !o.in_max)
            .map(|o| o.rank)
            .collect();
        // Where every row may be overstated, the largest of them all
        // stands, flagged as what it is: an upper bound.
        let none_counts = out.max_ol_excluded.len() == out.oli.len();
        let counted = out.oli.iter().filter(|o| o.in_max || none_counts);
        if let Some(m) = counted.max_by(|a, b| a.ol_ns.total_cmp(&b.ol_ns)) {
            out.max_ol_ns = Some(m.ol_ns);
            out.max_ol_rank = Some(m.rank);
            let mut v = m.verdict.clone();
            v.check(!none_counts, || {
                "every OL_i may be overstated: this is the largest of them, an upper bound of OL"
                    .into()
            });
            out.max_ol_verdict = Some(v);
        }
    }

    let mut plan: Vec<(String, What)> = Vec::new();
    if all || args.method == Method::SendLatency {
        plan.push(("send-latency".into(), What::SendLatency));
    }
    if all || args.method == Method::Rounds {
        plan.push(("rounds-forward".into(), What::Rounds { backward: false }));
        plan.push(("rounds-backward".into(), What::Rounds { backward: true }));
    }
    if all || args.method == Method::Barrier {
        let name = format!("barrier-{:?}", args.barrier).to_lowercase();
        plan.push((name, What::Barrier(args.barrier)));
    }
    if all || args.method == Method::Ack {
        plan.push(("ack".into(), What::Ack));
    }
    if !plan.is_empty() || out.max_ol_ns.is_some() {
        report::figure_table(sink, &title);
    }
    for (name, what) in plan {
        let (m, values_ns, ops) = bc.repeat(what, args)?;
        let fig = Figure {
            method: name,
            time_ns: m.mean,
            measurements: m.measurements,
            stddev_pct: m.stddev_pct,
            tries: m.tries,
            ops,
            verdict: figure_verdict(&m, args),
            values_ns,
        };
        if printer {
            report::figure_row(sink, &fig, size, args.reps);
        }
        out.figures.push(fig);
    }
    if printer {
        report::max_oli_row(sink, &out);
        for f in &out.figures {
            f.verdict.note(sink, &f.method);
        }
    }
    bc.comm.barrier()?;
    Ok(out)
}

#[cfg(test)]
impl Args {
    /// The options as a bare `ovbench bcast` gives them (unit tests).
    pub(super) fn defaults() -> Args {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: Args,
        }
        T::parse_from(["bcast"]).a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn impossible_and_unsettled_figures_are_flagged() {
        let args = Args::defaults();
        let unsure = Measured {
            converged: false,
            ..Measured::fine(12.0)
        };
        assert!(!figure_verdict(&Measured::fine(-3.0), &args).valid());
        assert!(!figure_verdict(&unsure, &args).valid());
        assert!(figure_verdict(&Measured::fine(3.0), &args).valid());
    }
}
