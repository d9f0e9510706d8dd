//! `latency`: ping-pong between ranks 0 and 1, one-way latency = RTT/2
//! per iteration (docs/architecture.md § Conventions, Latency); under `--proto raw
//! --op read` the whole read operation, as ib_read_lat times it. Each
//! iteration's tick difference goes into a pre-allocated array; the
//! histogram is built afterwards. Other ranks only join the barriers.
//! `--verify` checks the last timed message, then every message of an
//! untimed pass of min(iters, 1000) iterations (`verify.rs`).

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;

use ovbench_core::{Buf, OpCounts};

use super::instrumented;
use super::pingpong::{pingpong, verify_pass, PingPong};
use super::rankreport::{collect, deposit, row_fields, CpuRow, CpuTotals, Meter};
use super::verify;
use super::{data_tag, BenchCtx, Counts, SweepArgs, HUGE, LARGE};
use crate::output::{Column, FixedRow, Rounded2, Table};
use crate::stats::{Estimate, Summary, DEFAULT_LEVEL};
use ovbench_core::engine_comm::RawOp;

/// `ovbench latency` options.
#[derive(Clone, Debug, Args)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Reply from the buffer the message arrived in: one buffer a rank,
    /// as NetPIPE's default (cache) mode. Default: a send buffer of its
    /// own, never written, as osu_latency. Not with --verify, which
    /// checks each rank's own pattern.
    #[arg(long, conflicts_with = "verify")]
    pub one_buffer: bool,
}

/// OSU-like defaults: 10000 iterations (1000 warm-up) below 64 KiB,
/// 1000 (100) below 1 MiB, 100 (10) above.
pub fn default_counts(size: usize) -> Counts {
    match size {
        s if s < LARGE => Counts {
            iters: 10_000,
            warmup: 1_000,
        },
        s if s < HUGE => Counts {
            iters: 1_000,
            warmup: 100,
        },
        _ => Counts {
            iters: 100,
            warmup: 10,
        },
    }
}

/// One size's row: the JSON object and, through [`Row::columns`], the
/// table's cells.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyRow {
    pub size: usize,
    pub iterations: u64,
    pub warmup: u64,
    pub samples: u64,
    pub min_ns: Rounded2,
    pub p50_ns: Rounded2,
    /// `null` where the size has fewer samples than the percentile needs
    /// (10, 100, 1000: see [`Summary::supports`]).
    pub p90_ns: Option<Rounded2>,
    pub p99_ns: Option<Rounded2>,
    pub p999_ns: Option<Rounded2>,
    pub max_ns: Rounded2,
    pub mean_ns: Rounded2,
    pub stddev_ns: Rounded2,
    #[serde(serialize_with = "Estimate::ser_ns")]
    pub mean_ci: Option<Estimate>,
    /// The one-way times' HDR histogram, for `ovbench compare`
    /// (src/stats/hist.rs: ps, V2 deflate, base64).
    pub histogram: Option<String>,
    pub ops: OpCounts,
    /// Per rank, under `--cpu-use`.
    pub cpu: Option<Vec<CpuRow>>,
    /// `--instrument`'s comparison.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instrumented: Option<instrumented::RowFields>,
}

impl LatencyRow {
    pub fn new(len: usize, counts: Counts, s: &Summary, ops: OpCounts) -> LatencyRow {
        LatencyRow {
            size: len,
            iterations: counts.iters,
            warmup: counts.warmup,
            samples: s.samples,
            min_ns: Rounded2(s.min),
            p50_ns: Rounded2(s.p50),
            p90_ns: s.supported(0.9, s.p90).map(Rounded2),
            p99_ns: s.supported(0.99, s.p99).map(Rounded2),
            p999_ns: s.supported(0.999, s.p999).map(Rounded2),
            max_ns: Rounded2(s.max),
            mean_ns: Rounded2(s.mean),
            stddev_ns: Rounded2(s.stddev),
            mean_ci: s.mean_ci,
            histogram: None,
            ops,
            cpu: None,
            instrumented: None,
        }
    }
}

impl FixedRow for LatencyRow {
    fn columns() -> Vec<Column<LatencyRow>> {
        vec![
            Column::new("size[B]", "size", |r: &LatencyRow| r.size.to_string()),
            Column::new("iters", "samples", |r: &LatencyRow| r.samples.to_string()),
            Column::micros("min[us]", "min_ns", 2, |r| r.min_ns.0),
            Column::micros("p50[us]", "p50_ns", 2, |r| r.p50_ns.0),
            percentile("p90[us]", "p90_ns", |r| r.p90_ns),
            percentile("p99[us]", "p99_ns", |r| r.p99_ns),
            percentile("p99.9[us]", "p999_ns", |r| r.p999_ns),
            Column::micros("max[us]", "max_ns", 2, |r| r.max_ns.0),
            Column::micros("mean[us]", "mean_ns", 2, |r| r.mean_ns.0),
            Column::micros("stddev[us]", "stddev_ns", 2, |r| r.stddev_ns.0),
        ]
    }
}

/// A percentile's cell: `n/a` where the sample is too small for it.
fn percentile(
    head: &'static str,
    field: &'static str,
    v: fn(&LatencyRow) -> Option<Rounded2>,
) -> Column<LatencyRow> {
    Column::new(head, field, move |r: &LatencyRow| {
        v(r).map_or_else(|| "n/a".into(), |x| crate::output::us(x.0, 2))
    })
}

/// Notes for `s`'s row of `len` bytes: percentiles left out, an interval
/// cut at 0.
fn summary_notes(len: usize, s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let missing: Vec<&str> = [(0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")]
        .into_iter()
        .filter(|&(p, _)| !s.supports(p))
        .map(|(_, name)| name)
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "size {len}: {} n/a (n={}): p90 needs 10 samples, p99 100, p99.9 1000; with fewer it is the maximum or next to it",
            missing.join(", "),
            s.samples
        ));
    }
    if s.ci_clamped {
        out.push(format!(
            "size {len}: the mean's t interval reached below 0 (a small or skewed sample) and is cut at 0"
        ));
    }
    out
}

/// Run the sweep. Returns once every size is done on this rank.
pub fn run(cx: &mut BenchCtx<'_>, args: &LatencyArgs) -> Result<()> {
    let size = cx.comm.size();
    if size < 2 {
        bail!("latency needs two ranks (it runs between ranks 0 and 1): use --np 2 or more");
    }
    let max = args.sweep.sizes.max().max(1);
    let sbuf = cx.comm.alloc(max)?;
    // A large message costs more to send back from where it arrived (the
    // bytes are dirty in the receiver's cache): 1 MiB over Open MPI's
    // shared memory took ~125 against ~90 µs one-way here.
    let rbuf = if args.one_buffer {
        sbuf
    } else {
        cx.comm.alloc(max)?
    };
    let title = match cx.raw {
        Some(RawOp::Read) => "latency: whole raw read operation (as ib_read_lat), ranks 0 <- 1",
        _ if args.one_buffer => {
            "latency: one-way = round trip / 2, ranks 0 <-> 1, each reply sent from the receive buffer"
        }
        _ => "latency: one-way = round trip / 2, ranks 0 <-> 1",
    };
    let table = Table::<LatencyRow>::start(cx.sink, title, &());
    cx.sweep_sizes(
        "latency",
        &args.sweep,
        default_counts,
        |cx, cpu, idx, len, counts| {
            one_size(
                cx,
                &table,
                cpu,
                idx,
                len,
                counts,
                args.sweep.verify,
                sbuf,
                rbuf,
            )
        },
    )
}

#[allow(clippy::too_many_arguments)]
fn one_size(
    cx: &mut BenchCtx<'_>,
    table: &Table<LatencyRow>,
    cpu: &mut CpuTotals,
    idx: usize,
    len: usize,
    counts: Counts,
    verify: bool,
    sbuf: Buf,
    rbuf: Buf,
) -> Result<()> {
    let rank = cx.comm.rank();
    let read = cx.raw == Some(RawOp::Read);
    let pp = PingPong {
        len,
        tag: data_tag(idx),
        sbuf,
        rbuf,
        read,
    };
    if verify || cx.raw == Some(RawOp::Write) {
        // Raw write detects arrival by a marker in the last byte: start from zero.
        verify::clear(cx.comm, rbuf)?;
    }
    if verify {
        verify::fill(cx.comm, sbuf, len, rank)?;
    }
    let n = (counts.warmup + counts.iters) as usize;
    let mut ticks = super::tick_slots(counts.iters as usize);
    let meter = Meter::start(cx.comm);
    cx.comm.barrier()?;
    pingpong(cx.comm, pp, n, &mut ticks)?;
    let ns_per_tick = cx.comm.clock().ns_per_tick();
    // One-way for a ping-pong (RTT/2), the whole operation for a raw read.
    let scale = if read { ns_per_tick } else { ns_per_tick / 2.0 };
    let ns: Vec<f64> = ticks.iter().map(|&t| t as f64 * scale).collect();
    let mut report = meter.finish(cx.comm, 0.0);
    if verify {
        // Under raw read only rank 0 receives (rank 1's buffer is read).
        let receives = rank == 0 || (rank == 1 && !read);
        let checked = len - cx.marker_bytes().min(len);
        if receives {
            let last = verify::Which::LastTimed(counts.iters);
            verify::check(cx.comm, rbuf, len, 1 - rank, checked, last)?;
            verify::clear_first(cx.comm, rbuf, checked)?;
        }
        // Every receive buffer is clear before the first message of the pass.
        cx.comm.barrier()?;
        let v = verify::pass_len(counts.iters);
        verify_pass(cx.comm, pp, v, checked)?;
    }
    let summary = Summary::of(&ns, DEFAULT_LEVEL);
    if cx.instrument {
        report.instrument = Some(instrumented::pass(cx.comm, pp, n, scale, idx)?);
    }
    deposit(cx.ctl, &report)?;
    cx.comm.barrier()?;
    if let Some(all) = collect(cx.ctl)? {
        if cx.cpu_use {
            cpu.add(&all);
        }
        let s = summary.ok_or_else(|| anyhow::anyhow!("size {len}: no timed iterations"))?;
        let (ops, cpu) = row_fields(&all);
        let mut row = LatencyRow::new(len, counts, &s, ops);
        row.histogram = crate::stats::hist::encode(&ns);
        row.cpu = cx.cpu_use.then_some(cpu);
        let note = cx.instrument.then(|| {
            let (fields, line) = instrumented::row_fields(len, s.p50, &all);
            row.instrumented = Some(fields);
            line
        });
        table.add(cx.sink, &row);
        for line in summary_notes(len, &s) {
            cx.sink.note(&line);
        }
        if let Some(line) = note {
            cx.sink.note(&line);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_shrink_with_size() {
        assert_eq!(default_counts(0).iters, 10_000);
        assert_eq!(default_counts(LARGE - 1).warmup, 1_000);
        assert_eq!(default_counts(LARGE).iters, 1_000);
        assert_eq!(
            default_counts(4 << 20),
            Counts {
                iters: 100,
                warmup: 10
            }
        );
    }

    #[test]
    fn row_has_the_schema_keys_and_its_columns_show_them() {
        let s = Summary::of(&[1000.0, 2000.0, 3000.0], 0.95).unwrap();
        let counts = Counts {
            iters: 3,
            warmup: 1,
        };
        let row = LatencyRow::new(8, counts, &s, OpCounts::default());
        let v = crate::output::to_json(&row);
        for k in [
            "size", "samples", "p50_ns", "p99_ns", "mean_ns", "ops", "cpu",
        ] {
            assert!(v.get(k).is_some(), "{k} missing in {v}");
        }
        assert_eq!(v["samples"], 3);
        assert_eq!(v["mean_ns"], 2000.0);
        assert_eq!(v["mean_ci"]["level"], 0.95);
        crate::output::check_fields(&(), &row).unwrap();
        let c = Table::<LatencyRow>::quiet(&()).cells(&row);
        assert_eq!(c.len(), 10);
        assert_eq!(c[3], "2.00");
    }
}
