//! The overlap micro-benchmark of Shet, Sadayappan, Bernholdt, Nieplocha
//! and Tipparaju ("A Framework for Characterizing Overlap of Communication
//! and Computation in Parallel Applications", §3): a sender calling only
//! Send or Isend, a receiver calling only Recv or Irecv, a loop of
//! `--iters` transfers per step with computation growing step by step
//! between the non-blocking post and its wait. Per step: each side's wait
//! (mean, p50, p90) and its minimum and maximum overlap from the
//! communicator's event instrumentation (CALL/XFER events folded into the
//! paper's bounds); after each size, each process's totals, and the
//! eager/rendezvous split of the paper's §2.3.
//!
//! Computation grows over `--steps` steps (16) from 0 to `--max-comp` (2)
//! × xfer_time(size). xfer_time comes from `crate::xfer_time`: the bare
//! operations that move each size's data, timed before the run through
//! the same communicator, or `--xfer-table FILE`. Under `--proto raw`
//! with `--write-xfer-table FILE` the method writes that table and stops.
//! See docs/methods/overlap.md.
//!
//! Rank 0 sends, rank 1 receives; other ranks only take part in the
//! barriers.

use std::path::PathBuf;

use anyhow::{bail, Context};
use ovbench_core::{Buf, Communicator, OverlapReport, Rank, Tag};
use serde::Serialize;

use super::common::{ns, Ctrl};
use crate::output::Table;
use crate::report::Sink;
use crate::sizes::Sizes;
use crate::stats::hist;

use crate::xfer_time as xfer;
use rows::{PathRow, StepRow, TotalRow};

mod rows;
mod validity;

const TAG_DATA: Tag = 0x4f56_0501;
/// Rank 1's per-transfer wait times of a step, sent to rank 0 after it.
const TAG_WAITS: Tag = 0x4f56_0502;

/// Which calls the two sides use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pair {
    /// Sender Isend + compute + Wait; receiver Recv.
    IsendRecv,
    /// Sender Send; receiver Irecv + compute + Wait.
    SendIrecv,
    /// Both non-blocking, both compute.
    IsendIrecv,
}

impl Pair {
    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Pair::IsendRecv => "isend-recv",
            Pair::SendIrecv => "send-irecv",
            Pair::IsendIrecv => "isend-irecv",
        }
    }
    fn sender_nb(self) -> bool {
        self != Pair::SendIrecv
    }
    fn receiver_nb(self) -> bool {
        self != Pair::IsendRecv
    }
}

/// `ovbench overlap`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The call pair(s), comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "isend-irecv")]
    pub pair: Vec<Pair>,
    /// Transfers per step [default: the paper's 1000 for sizes up to
    /// 64 KiB, 500 above: with 1000 at 1 MiB a default run over tcp took
    /// 17 s on a 2-core host, with 500 it takes 7-10 s].
    #[arg(long, value_parser = crate::cli::counts::iters)]
    pub iters: Option<u64>,
    /// Message sizes (the paper: 10K eager, 1M rendezvous).
    #[arg(long, default_value = "10K,1M")]
    pub sizes: Sizes,
    /// Computation steps after the zero step.
    #[arg(long, default_value_t = 16, value_parser = crate::cli::counts::steps)]
    pub steps: u32,
    /// Largest computation, as a multiple of xfer_time(size).
    #[arg(long, default_value_t = 2.0, value_parser = max_comp)]
    pub max_comp: f64,
    /// xfer_time per size: lines `SIZE_BYTES NS` (e.g. from --proto raw runs).
    #[arg(long, value_name = "FILE")]
    pub xfer_table: Option<PathBuf>,
    /// Repetitions per size when measuring xfer_time without a table.
    #[arg(long, default_value_t = 21, value_parser = crate::cli::counts::reps_u32)]
    pub xfer_reps: u32,
    /// Measure xfer_time per size, write it to FILE (rank 0) and stop: run
    /// it with `--proto raw --op read|write|send` for the bare operation's
    /// times, then pass FILE to `--xfer-table`.
    #[arg(long, value_name = "FILE")]
    pub write_xfer_table: Option<PathBuf>,
    /// After each size's steps, send one patterned message with the same
    /// call pair, untimed, and check every byte at the receiver.
    #[arg(long)]
    pub verify: bool,
}

impl Args {
    /// Transfers per step for messages of `size` bytes (see `--iters`).
    // deviation: iters-500-above-64k — default 500 transfers per step above 64 KiB, see docs/methods/overlap.md
    pub fn iters_for(&self, size: usize) -> u64 {
        self.iters
            .unwrap_or(if size <= 64 * 1024 { 1000 } else { 500 })
    }
}

/// The files of --xfer-table and --write-xfer-table, checked before any
/// rank starts: the table is read and parsed (whether it holds every size
/// the run moves is known only to the ranks), the output is no directory
/// and its directory exists.
#[deny(clippy::arithmetic_side_effects)]
pub fn check_args(args: &Args) -> anyhow::Result<()> {
    if let Some((p, n)) = args
        .pair
        .iter()
        .zip(1usize..)
        .find(|(p, n)| args.pair.iter().take(n.saturating_sub(1)).any(|q| q == *p))
    {
        bail!(
            "--pair {} is listed twice (item {n}): give each pair once, e.g. --pair isend-irecv,send-irecv",
            p.name()
        );
    }
    if args.max_comp == 0.0 {
        anyhow::bail!("--max-comp 0: every step would compute nothing, so no overlap can show: give a multiple of xfer_time above 0 (the default is 2)");
    }
    if let (Some(r), Some(w)) = (&args.xfer_table, &args.write_xfer_table) {
        anyhow::bail!(
            "--write-xfer-table {} measures the table and --xfer-table {} reads one: give one of them (measure with --proto raw --write-xfer-table, then run with --xfer-table)",
            w.display(),
            r.display()
        );
    }
    if let Some(path) = &args.xfer_table {
        crate::xfer_time::read_table(path)?;
    }
    // --write-xfer-table is checked with the run's other files
    // (crate::files::run_files).
    Ok(())
}

/// The largest `--max-comp`: a step computes up to this many times
/// xfer_time (itself at most 1000 s, `MAX_XFER_NS`).
pub const MAX_COMP: f64 = 1000.0;

/// `--max-comp`: a finite number from 0 to [`MAX_COMP`].
#[deny(clippy::arithmetic_side_effects)]
fn max_comp(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=MAX_COMP).contains(&v) => Ok(v),
        Ok(v) if v > MAX_COMP => Err(format!(
            "`{s}` is more than {MAX_COMP} (the largest computation, as a multiple of xfer_time): give 0 to {MAX_COMP}, e.g. the paper's 2"
        )),
        _ => Err(format!("`{s}` is not a number of 0 or more")),
    }
}

/// One side's figures in one step.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Side {
    /// Mean time per transfer in the wait (or the blocking call).
    pub wait_ns: f64,
    /// Median and 90th percentile of those times.
    pub wait_p50_ns: f64,
    pub wait_p90_ns: f64,
    pub transfers: u64,
    /// Transfers of which only BEGIN or only END was seen (case 3).
    pub one_sided: u64,
    /// Transfers whose stamped interval outlasted xfer_time by more than a
    /// tenth (queued, or waiting for the peer): bracketed, not tight.
    pub stretched: u64,
    pub data_transfer_ns: f64,
    pub min_overlap_ns: f64,
    pub max_overlap_ns: f64,
    pub computation_ns: f64,
    pub call_ns: f64,
    /// The step's window on this side's clock (for comparisons with a
    /// simulator's truth).
    pub start_ticks: u64,
    pub end_ticks: u64,
}

impl Side {
    fn pct(&self) -> (f64, f64) {
        if self.data_transfer_ns <= 0.0 {
            return (0.0, 0.0);
        }
        (
            100.0 * self.min_overlap_ns / self.data_transfer_ns,
            100.0 * self.max_overlap_ns / self.data_transfer_ns,
        )
    }

    fn words(&self) -> [u64; 13] {
        [
            self.stretched,
            self.wait_ns.to_bits(),
            self.wait_p50_ns.to_bits(),
            self.wait_p90_ns.to_bits(),
            self.transfers,
            self.one_sided,
            self.data_transfer_ns.to_bits(),
            self.min_overlap_ns.to_bits(),
            self.max_overlap_ns.to_bits(),
            self.computation_ns.to_bits(),
            self.call_ns.to_bits(),
            self.start_ticks,
            self.end_ticks,
        ]
    }

    fn from_words(w: &[u64]) -> anyhow::Result<Side> {
        let [stretched, wait, w50, w90, n, one, d, lo, hi, comp, call, s, e] = w[..] else {
            bail!("overlap: malformed figures from rank 1");
        };
        let f = f64::from_bits;
        Ok(Side {
            wait_ns: f(wait),
            wait_p50_ns: f(w50),
            wait_p90_ns: f(w90),
            transfers: n,
            one_sided: one,
            stretched,
            data_transfer_ns: f(d),
            min_overlap_ns: f(lo),
            max_overlap_ns: f(hi),
            computation_ns: f(comp),
            call_ns: f(call),
            start_ticks: s,
            end_ticks: e,
        })
    }

    fn add(&mut self, o: &Side) {
        self.transfers += o.transfers;
        self.one_sided += o.one_sided;
        self.stretched += o.stretched;
        self.data_transfer_ns += o.data_transfer_ns;
        self.min_overlap_ns += o.min_overlap_ns;
        self.max_overlap_ns += o.max_overlap_ns;
        self.computation_ns += o.computation_ns;
        self.call_ns += o.call_ns;
    }
}

/// One step: a computation length and both sides' figures.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub pair: Pair,
    pub size: usize,
    pub step: u32,
    pub comp_ns: f64,
    pub xfer_ns: f64,
    pub sender: Side,
    pub receiver: Side,
}

/// The run's result (rank 0 holds both sides).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub protocol: String,
    pub xfer_table: Vec<(u64, f64)>,
    pub xfer_measured: bool,
    pub xfer_source: xfer::XferSource,
    pub steps: Vec<Step>,
}

fn side_of(report: Option<OverlapReport>, wait_ns: f64, start: u64, end: u64) -> Side {
    let r = report.unwrap_or_default();
    Side {
        wait_ns,
        wait_p50_ns: 0.0,
        wait_p90_ns: 0.0,
        transfers: r.transfers,
        one_sided: r.one_sided_transfers,
        stretched: r.stretched_transfers,
        data_transfer_ns: r.data_transfer_ns,
        min_overlap_ns: r.min_overlap_ns,
        max_overlap_ns: r.max_overlap_ns,
        computation_ns: r.computation_ns,
        call_ns: r.call_ns,
        start_ticks: start,
        end_ticks: end,
    }
}

/// One transfer of the pair on rank `me` (0 sends to 1, which receives),
/// a nonblocking call with `units` of work between post and wait: the
/// ticks spent in the wait, or in the blocking call.
fn transfer(
    comm: &mut dyn Communicator,
    pair: Pair,
    me: Rank,
    buf: Buf,
    size: usize,
    units: u64,
) -> anyhow::Result<u64> {
    let sends = me == 0;
    let nb = if sends {
        pair.sender_nb()
    } else {
        pair.receiver_nb()
    };
    let t = if nb {
        let r = if sends {
            comm.isend(buf.first(size), 1, TAG_DATA)?
        } else {
            comm.irecv(buf.first(size), Some(0), Some(TAG_DATA))?
        };
        comm.work(units);
        let t = comm.now();
        comm.wait(r)?;
        t
    } else {
        let t = comm.now();
        if sends {
            comm.send(buf.first(size), 1, TAG_DATA)?;
        } else {
            comm.recv(buf.first(size), Some(0), Some(TAG_DATA))?;
        }
        t
    };
    Ok(comm.now() - t)
}

/// `--verify`: one untimed transfer of a patterned message with the
/// pair's calls, every byte checked at the receiver.
fn verify_transfer(
    comm: &mut dyn Communicator,
    pair: Pair,
    me: Rank,
    buf: Buf,
    size: usize,
) -> anyhow::Result<()> {
    use crate::bench::verify;
    match me {
        0 => verify::fill(comm, buf, size, 0)?,
        1 => verify::clear(comm, buf)?,
        _ => {}
    }
    comm.barrier()?;
    if me < 2 {
        transfer(comm, pair, me, buf, size, 0)?;
    }
    comm.drain_transfers()?;
    if me == 1 {
        let which = verify::Which::Pass { i: 1, of: 1 };
        verify::check(comm, buf, size, 0, size, which)
            .with_context(|| format!("overlap --verify, {} {size} B", pair.name()))?;
    }
    comm.barrier()?;
    Ok(())
}

/// Run the method on every rank; rank 0's sink prints.
pub fn run(
    comm: &mut dyn Communicator,
    args: &Args,
    sink: &mut dyn Sink,
) -> anyhow::Result<Output> {
    if comm.size() < 2 {
        bail!("overlap needs 2 ranks (rank 0 sends, rank 1 receives)");
    }
    if args.iters == Some(0) || args.steps == 0 || args.max_comp.is_nan() || args.max_comp < 0.0 {
        bail!("--iters and --steps must be positive and --max-comp non-negative");
    }
    let me = comm.rank();
    let sizes = args.sizes.as_slice().to_vec();
    // Read once: each info() copies the transport's description.
    let info = comm.info();
    let protocol = info.protocol;
    if protocol.raw_op().is_some() && args.write_xfer_table.is_none() {
        bail!(
            "under --proto raw, overlap measures xfer_time only: add --write-xfer-table FILE, then run the protocols with --xfer-table FILE"
        );
    }
    let buf = comm.alloc(args.sizes.max().max(1))?;
    let ctrl = Ctrl::new(comm)?;
    let most_iters = sizes.iter().map(|&m| args.iters_for(m)).max().unwrap_or(1);
    let wait_buf = comm.alloc(most_iters as usize * 8)?;

    let shape = comm.engine_shape();
    let need = shape
        .as_ref()
        .map(|sh| xfer::needed(sh, &sizes))
        .unwrap_or_default();
    let (table, source) = match (&args.xfer_table, &shape) {
        (Some(path), _) => xfer::from_file(comm, &ctrl, path, &need)?,
        (None, Some(sh)) => {
            let reps = args.xfer_reps.max(1);
            xfer::measure(comm, &ctrl, sh, buf, &need, reps, xfer::TAG_RAW)?
        }
        (None, None) => bail!(
            "overlap measures xfer_time through the protocol engine, which this communicator lacks: pass --xfer-table FILE"
        ),
    };
    let measured = source.source != "table";
    // A table's entries checked against bare operations timed here: one
    // far from them is not this transfer's, and no bound made with it is
    // a result.
    let checked = match (&args.xfer_table, &shape) {
        (Some(_), Some(sh)) => {
            let reps = validity::TABLE_CHECK_REPS;
            Some(xfer::measure(comm, &ctrl, sh, buf, &need, reps, xfer::TAG_RAW + 0x100)?.0)
        }
        _ => None,
    };
    if let Some(path) = &args.write_xfer_table {
        if me == 0 {
            let mut text = format!(
                "# xfer_time(size) measured by ovbench overlap over {} ({protocol}): SIZE_BYTES NS\n",
                info.transport.name
            );
            for (b, t) in table.points() {
                text.push_str(&format!("{b} {t}\n"));
            }
            crate::files::output::write_atomic("--write-xfer-table", path, &text)?;
            sink.note(&format!("xfer_time table written to {}", path.display()));
        }
        comm.barrier()?;
        return Ok(Output {
            protocol: protocol.to_string(),
            xfer_table: table.points().to_vec(),
            xfer_measured: true,
            xfer_source: source,
            steps: Vec::new(),
        });
    }
    let ends = end_sources(shape.as_ref(), &info.caps, &sizes);
    let mut lines = vec![source.describe()];
    lines.extend(source.points.iter().map(|p| {
        format!(
            "xfer_time({} B) = {:.1} ns ({}, {} samples)",
            p.size, p.median_ns, p.op, p.samples
        )
    }));
    lines.extend(ends.iter().map(|(side, text)| format!("{side}: {text}")));
    sink.summary(
        serde_json::json!({
            "xfer_time": source,
            "xfer_events": ends
                .iter()
                .map(|(side, text)| serde_json::json!({"side": side, "source": text}))
                .collect::<Vec<_>>(),
        }),
        &lines,
    );
    // Recording is switched on for each step's loop only, so the control
    // messages between steps never count as transfers.
    comm.enable_instrumentation(table.clone())
        .context("overlap needs a communicator that records transfer events")?;
    comm.disable_instrumentation();
    let mut out = Output {
        protocol: protocol.to_string(),
        xfer_table: table.points().to_vec(),
        xfer_measured: measured,
        xfer_source: source.clone(),
        steps: Vec::new(),
    };
    let steps = Table::<StepRow>::start(sink, &format!("overlap, protocol {protocol}"), &());
    let mut totals: Vec<(Pair, usize, Side, Side)> = Vec::new();
    let mut waits: Vec<u64> = Vec::new();
    for &pair in &args.pair {
        for &size in &sizes {
            let xfer = table.xfer_ns(size as u64);
            let mut tot = (Side::default(), Side::default());
            for k in 0..=args.steps {
                let comp = xfer * args.max_comp * f64::from(k) / f64::from(args.steps);
                let units = (comp / comm.work_unit_ns()).round() as u64;
                // Recording starts before the barrier that starts the
                // step: the sender leaves the barrier first and streams its
                // eager messages, and the receiver's last barrier poll may
                // take all of them; taken unrecorded, a whole step showed
                // no receiver transfers. The barrier's own time is taken
                // out of the step's call and computation time below.
                // deviation: step-starts-recording — recording on before the step's barrier, see docs/methods/overlap.md
                comm.enable_instrumentation(table.clone())?;
                let now = comm.now();
                if let Some(i) = comm.instrumentation() {
                    i.reset(now);
                }
                comm.barrier()?;
                let before = comm.overlap_report().unwrap_or_default();
                let start = comm.now();
                waits.clear();
                let iters = args.iters_for(size);
                if me < 2 {
                    for _ in 0..iters {
                        waits.push(transfer(comm, pair, me, buf, size, units)?);
                    }
                }
                let end = comm.now();
                // Untimed: every transfer of the step ends inside it (an
                // eager send's request finishes before its packet does).
                // deviation: step-drain — untimed drain ends every transfer in its step, see docs/methods/overlap.md
                comm.drain_transfers()?;
                waits.sort_unstable();
                let pct = |q: f64| {
                    let k = ((waits.len() as f64 * q).ceil() as usize).clamp(1, waits.len());
                    ns(comm, waits[k - 1])
                };
                let wait_ns = ns(comm, waits.iter().sum::<u64>()) / iters as f64;
                let (w50, w90) = (pct(0.5), pct(0.9));
                let mut mine = side_of(comm.overlap_report(), wait_ns, start, end);
                mine.call_ns -= before.call_ns;
                mine.computation_ns -= before.computation_ns;
                (mine.wait_p50_ns, mine.wait_p90_ns) = (w50, w90);
                comm.disable_instrumentation();
                // Nobody records any more when the figures travel.
                comm.barrier()?;
                let waits_ns: Vec<f64> = waits.iter().map(|&w| ns(comm, w)).collect();
                match me {
                    1 => {
                        ctrl.send(comm, 0, &mine.words())?;
                        send_waits(comm, wait_buf, &waits_ns)?;
                    }
                    0 => {
                        let peer = Side::from_words(&ctrl.recv(comm, 1)?)?;
                        let peer_waits = recv_waits(comm, wait_buf, most_iters as usize)?;
                        let hists = [hist::encode(&waits_ns), hist::encode(&peer_waits)];
                        let (s, r) = (mine, peer);
                        let here = checked.as_ref().map(|t| t.xfer_ns(size as u64));
                        let check = validity::step_check(
                            iters,
                            (s.transfers, r.transfers),
                            s.stretched + r.stretched,
                            (xfer, here),
                        );
                        check.note(sink, &format!("{} {size} B step {k}", pair.name()));
                        let step = Step {
                            pair,
                            size,
                            step: k,
                            comp_ns: comp,
                            xfer_ns: xfer,
                            sender: s,
                            receiver: r,
                        };
                        steps.add(sink, &StepRow::new(&step, iters, hists, check));
                        for (name, side) in [("sender", &s), ("receiver", &r)] {
                            if side.stretched > 0 {
                                sink.note(&format!(
                                    "{} {size} B step {k}: {} of the {name}'s {} transfers lasted over 1.1 x xfer_time (queued behind others, or waiting for the peer): there the bounds bracket the overlap but cannot be tight",
                                    pair.name(),
                                    side.stretched,
                                    side.transfers
                                ));
                            }
                        }
                        tot.0.add(&s);
                        tot.1.add(&r);
                        out.steps.push(step);
                    }
                    _ => {}
                }
            }
            totals.push((pair, size, tot.0, tot.1));
            if args.verify {
                verify_transfer(comm, pair, me, buf, size)?;
            }
        }
    }
    let by_size = Table::<TotalRow>::start(sink, "per-process totals by size", &());
    // Eager or rendezvous, as the communicator's plan has it (a mock
    // communicator with no engine: by the plan it reports).
    let plan = ovbench_core::engine_comm::EngineShape {
        native: matches!(info.protocol, ovbench_core::CommPath::Native),
        plan: info.plan,
    };
    let shape_or_plan = shape.unwrap_or(plan);
    let path = |size: usize| {
        if shape_or_plan.is_eager(size) {
            "eager"
        } else {
            "rendezvous"
        }
    };
    let mut split: Vec<(&'static str, u32, Side)> = Vec::new();
    for (pair, size, s, r) in &totals {
        for (rank, side) in [(0u32, s), (1, r)] {
            match split
                .iter_mut()
                .find(|(p, k, _)| *p == path(*size) && *k == rank)
            {
                Some((_, _, t)) => t.add(side),
                None => split.push((path(*size), rank, *side)),
            }
            by_size.add(sink, &TotalRow::new(*pair, *size, path(*size), rank, side));
        }
    }
    // The paper's §2.3 reading: data transfer time not overlapped (at
    // least data − max), split between the eager and rendezvous paths.
    let by_path = Table::<PathRow>::start(sink, "per-process totals, eager / rendezvous", &());
    split.sort_by_key(|(p, k, _)| (*p, *k));
    for (p, rank, side) in &split {
        by_path.add(sink, &PathRow::new(p, *rank, side));
    }
    comm.barrier()?;
    Ok(out)
}

/// Rank 1's wait times of a step (ns) to rank 0, outside the timed loop.
fn send_waits(comm: &mut dyn Communicator, buf: Buf, waits_ns: &[f64]) -> anyhow::Result<()> {
    comm.fill(buf, &mut |b| {
        for (i, w) in waits_ns.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_bits().to_le_bytes());
        }
    })?;
    comm.send(buf.first(waits_ns.len() * 8), 0, TAG_WAITS)
        .context("overlap: sending the receiver's wait times to rank 0")?;
    Ok(())
}

/// What [`send_waits`] sent, at rank 0.
fn recv_waits(comm: &mut dyn Communicator, buf: Buf, most: usize) -> anyhow::Result<Vec<f64>> {
    let st = comm
        .recv(buf.first(most * 8), Some(1), Some(TAG_WAITS))
        .context("overlap: receiving the receiver's wait times from rank 1")?;
    let mut out = Vec::with_capacity(st.len / 8);
    comm.inspect(buf, &mut |b| {
        for c in b[..st.len].chunks_exact(8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            out.push(f64::from_bits(u64::from_le_bytes(w)));
        }
    })?;
    Ok(out)
}

/// Per side, where its XFER_BEGIN and XFER_END come from for the sizes of
/// the run, and how wide the bounds are expected to be: near 0 where the
/// stamped interval is the transfer itself (the side performing the data
/// operation, its completion taken where the transport stamps it or a
/// progress thread takes it at once), else bracketing only.
fn end_sources(
    shape: Option<&ovbench_core::engine_comm::EngineShape>,
    caps: &ovbench_core::Caps,
    sizes: &[usize],
) -> Vec<(&'static str, String)> {
    use ovbench_core::engine_comm::RawOp;
    let Some(sh) = shape.filter(|s| !s.native) else {
        return vec![(
            "XFER events",
            "call-bounded (native library path): BEGIN at the posting call's entry, END at the completing call's exit; min 0, max min(computation between, xfer_time) — expected width up to xfer_time".into(),
        )];
    };
    let prompt = caps.rma_progress == ovbench_core::RmaProgress::Offloaded
        || caps.progress == ovbench_core::Progress::Thread;
    let mut out = Vec::new();
    for &m in sizes {
        let ops = sh.data_ops(m);
        let (s, r) = if ops.iter().all(|o| o.0 == RawOp::Send) {
            (
                "BEGIN at the packet's post, END at its send completion (tight: expected width ~0)",
                "END only, at the packet's arrival (case 3: min 0, max xfer_time — expected width xfer_time)",
            )
        } else if ops.iter().any(|o| o.0 == RawOp::Read) {
            (
                "BEGIN at the RTS post, END at FIN discovery (the receiver reads; bracketing only)",
                if prompt {
                    "BEGIN at the read's post, END at its completion (tight: expected width ~0)"
                } else {
                    "BEGIN at the read's post, END at its completion, served by the sender's next library call (bracketing only)"
                },
            )
        } else if ops.first().is_some_and(|o| o.0 == RawOp::Send) {
            (
                "first packet: post to send completion; each fragment: write post to completion (expected width up to a quarter of xfer_time)",
                "first packet: END only at arrival (case 3); fragments: PUT post to FIN discovery (bracketing only)",
            )
        } else {
            (
                if prompt {
                    "BEGIN at the write's post, END at its completion (tight: expected width ~0)"
                } else {
                    "BEGIN at the write's post, END at its completion, served by the receiver's next library call (bracketing only)"
                },
                "BEGIN at the CTS post, END at FIN discovery (the sender writes; bracketing only)",
            )
        };
        out.push(("sender", format!("{m} B: {s}")));
        out.push(("receiver", format!("{m} B: {r}")));
    }
    out
}
