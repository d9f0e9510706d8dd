//! Host send/receive overhead and application availability by the
//! post-work-wait loop (reference/smb-host-overhead.txt, Sandia's
//! mpi_overhead).
//!
//! For each message size the measuring rank posts a transfer, does `work`
//! units of computation, and waits; `work` doubles from 1. `iter_t`, the
//! loop time per iteration, stays at the transfer time `base_t` while the
//! work hides behind the transfer and grows once it dominates. `base_t` is
//! the running mean of `iter_t` while `iter_t < bthresh·base_t`; the loop
//! stops once `iter_t > thresh·base_t`. The same work is then timed
//! without messaging (`work_t`), and overhead = `iter_t − work_t`,
//! availability = `1 − overhead/base_t`.
//!
//! Partners and loop shape follow the original source: rank r measures
//! and rank r+N/2 is its partner (N even), every iteration contains a
//! barrier and the whole loop, barrier included, is timed — the work-only
//! loop too, so the barrier cancels. For send overhead the partner
//! pre-posts its receive; with `--recv` the measuring rank posts its
//! receive before the barrier and the partner sends with a blocking send.
//! Each timed loop is preceded by one untimed iteration of itself, so it
//! starts in the steady state it ends in.
//!
//! With more than one pair the barrier is global, so the pairs are
//! coupled: a message the loop moves from the barrier (where it may sit in
//! another rank's slack) into the wait shows as overhead. The figures of
//! one pair (two ranks) are the method's own.

use anyhow::{bail, Context};
use ovbench_core::{Buf, Communicator, OpCounts, Rank, Tag};
use serde::Serialize;

use super::common::{ns, us, Ctrl};
use crate::report::Sink;
use crate::sizes::{ByteSize, Sizes};

const TAG_DATA: Tag = 0x4f56_0101;
/// Work never doubles past this (2^40 units); reaching it is an error.
const MAX_WORK: u64 = 1 << 40;

/// `ovbench overhead`: mpi_overhead's post-work-wait loop.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Measure receive overhead instead of send overhead (mpi_overhead: -r, --recv).
    #[arg(long)]
    pub recv: bool,
    /// Iterations per work value; default: 1000 below 64 KiB, 100 below
    /// 8 MiB, 10 above (mpi_overhead: -i, --iterations).
    #[arg(long)]
    pub iterations: Option<u64>,
    /// One message size in bytes (mpi_overhead: -m, --msgsize) [default: 8].
    #[arg(long, conflicts_with = "sizes")]
    pub msgsize: Option<ByteSize>,
    /// A size sweep: MIN:MAX (powers of two) or a list 8,1K,1M.
    #[arg(long)]
    pub sizes: Option<Sizes>,
    /// Stop once iter_t exceeds thresh·base_t (mpi_overhead: -t, --thresh).
    #[arg(long, default_value_t = 1.5)]
    pub thresh: f64,
    /// base_t averages iter_t while iter_t < bthresh·base_t (mpi_overhead: -b, --bthresh).
    #[arg(long, default_value_t = 1.02)]
    pub bthresh: f64,
    /// Print a row per work value (mpi_overhead: -v, --verbose).
    #[arg(long)]
    pub verbose: bool,
    /// Leave out the header lines (mpi_overhead: -n, --nohdr).
    #[arg(long)]
    pub nohdr: bool,
}

/// One work value of the doubling loop (the `--verbose` rows).
#[derive(Debug, Clone, Serialize)]
pub struct WorkStep {
    pub work: u64,
    pub iter_ns: f64,
    pub base_ns: f64,
}

/// The result for one message size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub size: usize,
    pub iterations: u64,
    pub work: u64,
    pub iter_ns: f64,
    pub work_ns: f64,
    pub overhead_ns: f64,
    pub base_ns: f64,
    pub avail_pct: f64,
    /// Operations this rank posted in the final messaging loop.
    pub ops: OpCounts,
    pub steps: Vec<WorkStep>,
}

/// What `run` returns (rank 0's pair; other ranks' own pair).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub direction: &'static str,
    pub pairs: u32,
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

struct Loop<'a> {
    comm: &'a mut dyn Communicator,
    buf: Buf,
    partner: Rank,
    measuring: bool,
    recv_mode: bool,
}

impl Loop<'_> {
    /// `iters` post-work-wait iterations with `work` units, timed whole.
    fn messaging(&mut self, size: usize, iters: u64, work: u64) -> anyhow::Result<(f64, OpCounts)> {
        let c = &mut *self.comm;
        let (buf, p) = (self.buf, self.partner);
        let mut before = c.op_counts();
        let mut t0 = c.now();
        // One untimed iteration first, so the timed loop starts in the
        // steady state it ends in (the partner's messages of the previous
        // iteration already in flight).
        for i in 0..=iters {
            if i == 1 {
                before = c.op_counts();
                t0 = c.now();
            }
            match (self.measuring, self.recv_mode) {
                (true, false) => {
                    c.barrier()?;
                    let r = c.isend(buf, 0, size, p, TAG_DATA)?;
                    c.work(work);
                    c.wait(r)?;
                }
                (false, false) => {
                    let r = c.irecv(buf, 0, size, Some(p), Some(TAG_DATA))?;
                    c.barrier()?;
                    c.wait(r)?;
                }
                (true, true) => {
                    let r = c.irecv(buf, 0, size, Some(p), Some(TAG_DATA))?;
                    c.barrier()?;
                    c.work(work);
                    c.wait(r)?;
                }
                (false, true) => {
                    c.barrier()?;
                    c.send(buf, 0, size, p, TAG_DATA)?;
                }
            }
        }
        let t1 = c.now();
        Ok((ns(c, t1 - t0) / iters as f64, c.op_counts().since(&before)))
    }

    /// The same loop without messaging: barrier and work only.
    fn work_only(&mut self, iters: u64, work: u64) -> anyhow::Result<f64> {
        let c = &mut *self.comm;
        let mut t0 = c.now();
        for i in 0..=iters {
            if i == 1 {
                t0 = c.now();
            }
            c.barrier()?;
            if self.measuring {
                c.work(work);
            }
        }
        let t1 = c.now();
        Ok(ns(c, t1 - t0) / iters as f64)
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
    if args.thresh <= 1.0 || args.bthresh <= 1.0 {
        bail!(
            "--thresh ({}) and --bthresh ({}) must be above 1",
            args.thresh,
            args.bthresh
        );
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

    if !args.nohdr {
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
            half
        ));
    }
    let columns = [
        "msgsize",
        "iterations",
        "iter_t[us]",
        "work_t[us]",
        "overhead[us]",
        "base_t[us]",
        "avail(%)",
    ];
    if !args.verbose {
        sink.table(&format!("{direction} overhead"), &columns);
    }

    let mut out = Output {
        direction,
        pairs: half,
        sizes: Vec::new(),
    };
    let mut lp = Loop {
        comm,
        buf,
        partner,
        measuring,
        recv_mode: args.recv,
    };
    for &size in &sizes {
        let iters = args.iterations.unwrap_or_else(|| auto_iterations(size));
        if iters == 0 {
            bail!("--iterations must be at least 1");
        }
        if args.verbose {
            sink.table(
                &format!("msgsize {size}: {iters} iterations per work value"),
                &["work", "iter_t[us]", "base_t[us]"],
            );
        }
        let mut work = 1u64;
        let mut base = 0.0f64;
        let mut base_n = 0u32;
        let mut accumulating = true;
        // This rank's final (iter_t, work) once it crossed thresh·base_t.
        let mut done: Option<(f64, u64, OpCounts)> = None;
        let mut steps = Vec::new();
        loop {
            let (iter_t, ops) = lp.messaging(size, iters, work)?;
            if done.is_none() && measuring {
                if base_n == 0 {
                    base = iter_t;
                    base_n = 1;
                } else if accumulating && iter_t < args.bthresh * base {
                    base = (base * base_n as f64 + iter_t) / (base_n + 1) as f64;
                    base_n += 1;
                } else {
                    accumulating = false;
                }
                steps.push(WorkStep {
                    work,
                    iter_ns: iter_t,
                    base_ns: base,
                });
                if args.verbose {
                    sink.row(
                        &[work.to_string(), us(iter_t), us(base)],
                        serde_json::json!({
                            "size": size, "work": work, "iter_ns": iter_t, "base_ns": base,
                        }),
                    );
                }
                if iter_t > args.thresh * base {
                    done = Some((iter_t, work, ops));
                }
            }
            // Every pair runs the same number of barriers: continue until
            // all measuring ranks are done (rank 0 decides, outside timing).
            let mine = u64::from(!measuring || done.is_some());
            let all = all_true(lp.comm, &ctrl, mine)?;
            if all {
                break;
            }
            if work >= MAX_WORK {
                bail!(
                    "msgsize {size}: iter_t never exceeded {}·base_t up to {MAX_WORK} work units; raise --iterations or lower --thresh",
                    args.thresh
                );
            }
            work *= 2;
        }
        let (iter_t, my_work, ops) = done.unwrap_or_default();
        let work_t = lp.work_only(iters, my_work)?;
        let overhead = iter_t - work_t;
        let avail = if base > 0.0 {
            100.0 * (1.0 - overhead / base)
        } else {
            0.0
        };
        let res = SizeResult {
            size,
            iterations: iters,
            work: my_work,
            iter_ns: iter_t,
            work_ns: work_t,
            overhead_ns: overhead,
            base_ns: base,
            avail_pct: avail,
            ops,
            steps,
        };
        if args.verbose {
            sink.table(&format!("{direction} overhead"), &columns);
        }
        sink.row(
            &[
                size.to_string(),
                iters.to_string(),
                us(iter_t),
                us(work_t),
                us(overhead),
                us(base),
                format!("{avail:.1}"),
            ],
            serde_json::json!({
                "size": size,
                "iterations": iters,
                "samples": iters,
                "work": my_work,
                "iter_ns": iter_t,
                "work_ns": work_t,
                "overhead_ns": overhead,
                "base_ns": base,
                "avail_pct": avail,
                "direction": direction,
                "ops": ops,
            }),
        );
        out.sizes.push(res);
    }
    lp.comm.barrier().context("final barrier")?;
    Ok(out)
}

/// Whether `flag` is nonzero on every rank (gathered at rank 0, which
/// sends the verdict back).
fn all_true(comm: &mut dyn Communicator, ctrl: &Ctrl, flag: u64) -> anyhow::Result<bool> {
    let gathered = ctrl.gather(comm, flag as f64)?;
    let verdict = gathered.map(|v| u64::from(v.iter().all(|&f| f != 0.0)));
    let w = ctrl.bcast(comm, &[verdict.unwrap_or(0)])?;
    Ok(w.first().copied().unwrap_or(0) != 0)
}
