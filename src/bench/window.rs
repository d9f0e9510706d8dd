//! `bw`, `bibw` and `msgrate`: windowed streaming as OSU's osu_bw,
//! osu_bibw and osu_mbw_mr. A window of `--window` non-blocking sends
//! (and as many pre-posted receives) is completed, then acknowledged by
//! a zero-byte message (one direction) or simply completed both ways
//! (bibw). With `--pairs N`, ranks i and i+N pair up for i < N; rank i
//! sends. Bandwidth is bytes over the slowest pair's elapsed time, MB/s
//! in 10^6 bytes per second; every window's time is kept for the spread.
//! A window's messages all land in one receive buffer, so `--verify`
//! checks the last timed message, then every message of an untimed pass
//! of min(iters × window, 1000) messages sent one at a time (`verify.rs`).

use anyhow::{bail, Result};
use clap::Args;
use ovbench_core::{Buf, Communicator, OpCounts, Rank, Req, Tag};
use serde::Serialize;

use super::rankreport::{collect, deposit, row_fields, CpuRow, CpuTotals, Meter, RankReport};
use super::verify;
use super::{data_tag, BenchCtx, Counts, SweepArgs, ACK_TAG, LARGE};
use crate::output::{fixed, mbps, us, Column, Rounded2, Row, Table};
use crate::stats::{Estimate, Sample, Summary, DEFAULT_LEVEL};
use ovbench_core::engine_comm::RawOp;

/// Which of the three windowed benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bw,
    Bibw,
    Msgrate,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bw => "bw",
            Kind::Bibw => "bibw",
            Kind::Msgrate => "msgrate",
        }
    }
}

/// `ovbench bw|bibw|msgrate` options.
#[derive(Clone, Debug, Args)]
pub struct WindowArgs {
    #[command(flatten)]
    pub sweep: SweepArgs,
    /// Messages in flight per window.
    #[arg(long, default_value_t = 64, value_parser = crate::cli::counts::window)]
    pub window: u32,
    /// Post each message of a window only once the one before it has
    /// completed (NetPIPE's streaming mode, `NPmpi -s`: one blocking send
    /// after another) instead of the whole window at once (OSU's osu_bw).
    /// The acknowledgement still closes each window. Over a transport that
    /// interleaves concurrent large messages (Open MPI's tcp BTL) the two
    /// postings differ by tens of percent.
    #[arg(long)]
    pub serial: bool,
    /// Pairs of ranks streaming at once (ranks i and i+N pair up; needs --np >= 2N).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub pairs: u32,
}

/// OSU-like defaults, counted in windows: 100 (10 warm-up) below 64 KiB,
/// 20 (2) above.
pub fn default_counts(size: usize) -> Counts {
    if size < LARGE {
        Counts {
            iters: 100,
            warmup: 10,
        }
    } else {
        Counts {
            iters: 20,
            warmup: 2,
        }
    }
}

/// This rank's role: (sends?, receives?, peer).
fn role(rank: Rank, pairs: u32, kind: Kind) -> Option<(bool, bool, Rank)> {
    if rank < pairs {
        Some((true, kind == Kind::Bibw, rank + pairs))
    } else if rank < 2 * pairs {
        Some((kind == Kind::Bibw, true, rank - pairs))
    } else {
        None
    }
}

/// Run the sweep.
pub fn run(cx: &mut BenchCtx<'_>, kind: Kind, args: &WindowArgs) -> Result<()> {
    let np = cx.comm.size();
    if np < 2 * args.pairs {
        bail!(
            "{} with --pairs {} needs {} ranks, but the job has {np}: use --np {}",
            kind.name(),
            args.pairs,
            2 * args.pairs,
            2 * args.pairs
        );
    }
    if matches!(cx.raw, Some(RawOp::Write | RawOp::Read)) {
        bail!(
            "{} keeps a window of messages in flight into one buffer, which a bare one-sided operation cannot complete one by one: use --proto raw --op send, a protocol ({}), or `ovbench latency` for raw write/read",
            kind.name(),
            ovbench_core::engine_comm::protocols_but(&["raw"])
        );
    }
    let max = args.sweep.sizes.max().max(1);
    let sbuf = cx.comm.alloc(max)?;
    let rbuf = cx.comm.alloc(max)?;
    let ack = cx.comm.alloc(1)?;
    let title = format!(
        "{}: window {}{}, {} pair{}, MB/s = 10^6 B/s",
        kind.name(),
        args.window,
        if args.serial {
            " posted one at a time"
        } else {
            ""
        },
        args.pairs,
        if args.pairs == 1 { "" } else { "s" }
    );
    let table = Table::<WindowRow>::start(cx.sink, &title, &kind);
    if cx.instrument {
        cx.sink.note(&format!(
            "--instrument: {} records no transfer events (use latency or the methods to measure the recorder)",
            kind.name()
        ));
    }
    let bufs = Bufs { sbuf, rbuf, ack };
    cx.sweep_sizes(
        kind.name(),
        &args.sweep,
        default_counts,
        |cx, cpu, idx, len, counts| {
            let at = Size { idx, len, counts };
            one_size(cx, &table, cpu, kind, args, at, bufs)
        },
    )
}

#[derive(Clone, Copy)]
struct Bufs {
    sbuf: Buf,
    rbuf: Buf,
    ack: Buf,
}

/// The size being measured: its index in the sweep, bytes and counts.
#[derive(Clone, Copy)]
struct Size {
    idx: usize,
    len: usize,
    counts: Counts,
}

fn one_size(
    cx: &mut BenchCtx<'_>,
    table: &Table<WindowRow>,
    cpu: &mut CpuTotals,
    kind: Kind,
    args: &WindowArgs,
    Size { idx, len, counts }: Size,
    b: Bufs,
) -> Result<()> {
    let rank = cx.comm.rank();
    let role = role(rank, args.pairs, kind);
    let verify = args.sweep.verify;
    if verify {
        verify::clear(cx.comm, b.rbuf)?;
        verify::fill(cx.comm, b.sbuf, len, rank)?;
    }
    let w = args.window as usize;
    let n = (counts.warmup + counts.iters) as usize;
    let warm = counts.warmup as usize;
    let mut windows = super::tick_slots(counts.iters as usize);
    let mut reqs: Vec<Req> = Vec::with_capacity(2 * w);
    let tag = data_tag(idx);
    let meter = Meter::start(cx.comm);
    cx.comm.barrier()?;
    let comm = &mut *cx.comm;
    let mut start = comm.now();
    if let Some((sends, recvs, peer)) = role {
        for i in 0..n {
            let t0 = comm.now();
            if i == warm {
                start = t0;
            }
            let post = Posting {
                sends,
                recvs,
                serial: args.serial,
            };
            window(comm, &mut reqs, post, peer, tag, len, w, b)?;
            if kind != Kind::Bibw {
                if sends {
                    comm.recv(b.ack.first(0), Some(peer), Some(ACK_TAG))?;
                } else {
                    comm.send(b.ack.first(0), peer, ACK_TAG)?;
                }
            }
            if i >= warm {
                windows[i - warm] = comm.now().wrapping_sub(t0);
            }
        }
    }
    let end = comm.now();
    let ns_per_tick = comm.clock().ns_per_tick();
    let elapsed_ns = end.wrapping_sub(start) as f64 * ns_per_tick;
    let report = meter.finish(cx.comm, if role.is_some() { elapsed_ns } else { 0.0 });
    if verify {
        if let Some((_, true, peer)) = role {
            let last = verify::Which::LastTimed(counts.iters);
            verify::check(cx.comm, b.rbuf, len, peer, len, last)?;
            verify::clear_first(cx.comm, b.rbuf, len)?;
        }
        // Every receive buffer is clear before the first message of the pass.
        cx.comm.barrier()?;
        if let Some(role) = role {
            let v = verify::pass_len(counts.iters * args.window as u64);
            verify_pass(cx.comm, kind, role, tag, len, v, b)?;
        }
    }
    deposit(cx.ctl, &report)?;
    cx.comm.barrier()?;
    if let Some(all) = collect(cx.ctl)? {
        if cx.cpu_use {
            cpu.add(&all);
        }
        let directions = if kind == Kind::Bibw { 2 } else { 1 };
        let messages = counts.iters * args.window as u64 * u64::from(args.pairs) * directions;
        let slowest = all.iter().map(|r| r.elapsed_ns).fold(0.0, f64::max);
        let win: Vec<f64> = windows.iter().map(|&t| t as f64 * ns_per_tick).collect();
        let s = Summary::of(&win, DEFAULT_LEVEL)
            .ok_or_else(|| anyhow::anyhow!("size {len}: no timed windows"))?;
        let (ops, cpu) = row_fields(&all);
        let rates = Rates::new(messages, len, slowest);
        // Rank 0's pair, window by window: the spread of the rate.
        let per_window = args.window as f64 * len as f64 * directions as f64;
        let win_rates: Vec<f64> = win
            .iter()
            .filter(|&&ns| ns > 0.0)
            .map(|&ns| per_window / ns * 1e9)
            .collect();
        let rate_ci = Sample::new(&win_rates).map(|x| x.mean_estimate(DEFAULT_LEVEL));
        let mut row = WindowRow::new(len, counts, args, &rates, &s, rate_ci, ops);
        row.window_histogram = crate::stats::hist::encode(&win);
        row.cpu = cx.cpu_use.then_some(cpu);
        if args.pairs > 1 {
            let each = messages / u64::from(args.pairs);
            row.per_pair = Some(per_pair(&all, args.pairs, each, len));
        }
        table.add(cx.sink, &row);
        let (slowest_rank, rank0) = (
            all.iter()
                .max_by(|a, b| a.elapsed_ns.total_cmp(&b.elapsed_ns))
                .map_or(0, |r| r.rank),
            all.iter()
                .find(|r| r.rank == 0)
                .map_or(slowest, |r| r.elapsed_ns),
        );
        let measured = super::rate_note::Measured {
            bytes_per_sec: rates.bytes_per_sec,
            bytes_per_window: per_window * f64::from(args.pairs),
            rank0_elapsed_ns: rank0,
            slowest_elapsed_ns: slowest,
            slowest_rank,
        };
        if let Some(note) = super::rate_note::disagreement(len, &measured, &s) {
            cx.sink.note(&note);
        }
    }
    Ok(())
}

/// One pair's own rate under --pairs.
#[derive(Clone, Debug, Serialize)]
pub struct PairRate {
    pub pair: u32,
    pub ranks: [u32; 2],
    pub elapsed_ns: Rounded2,
    pub bytes_per_sec: Rounded2,
    pub msgs_per_sec: Rounded2,
}

/// Each pair's own rate (its sending rank's elapsed time), for --pairs.
fn per_pair(all: &[RankReport], pairs: u32, messages: u64, len: usize) -> Vec<PairRate> {
    all.iter()
        .filter(|r| r.rank < pairs)
        .map(|r| {
            let rate = Rates::new(messages, len, r.elapsed_ns);
            PairRate {
                pair: r.rank,
                ranks: [r.rank, r.rank + pairs],
                elapsed_ns: Rounded2(r.elapsed_ns),
                bytes_per_sec: Rounded2(rate.bytes_per_sec),
                msgs_per_sec: Rounded2(rate.msgs_per_sec),
            }
        })
        .collect()
}

/// What one rank posts in a window, and how.
#[derive(Clone, Copy)]
struct Posting {
    sends: bool,
    recvs: bool,
    /// One message at a time (`--serial`), else the whole window at once.
    serial: bool,
}

/// Post and complete one window: all its receives and sends at once, or
/// under `--serial` one message (its receive, then its send, where this
/// rank has both) completed before the next is posted.
#[allow(clippy::too_many_arguments)]
fn window(
    comm: &mut dyn Communicator,
    reqs: &mut Vec<Req>,
    post: Posting,
    peer: Rank,
    tag: Tag,
    len: usize,
    w: usize,
    b: Bufs,
) -> Result<()> {
    let (rounds, per_round) = if post.serial { (w, 1) } else { (1, w) };
    for _ in 0..rounds {
        if post.recvs {
            for _ in 0..per_round {
                reqs.push(comm.irecv(b.rbuf.first(len), Some(peer), Some(tag))?);
            }
        }
        if post.sends {
            for _ in 0..per_round {
                reqs.push(comm.isend(b.sbuf.first(len), peer, tag)?);
            }
        }
        for r in reqs.drain(..) {
            comm.wait(r)?;
        }
    }
    Ok(())
}

/// `--verify`'s pass (see `verify.rs`): `v` untimed messages, one at a
/// time, each checked and its bytes zeroed before the next can arrive —
/// bw and msgrate acknowledge each message with a zero-byte one; under
/// bibw each side has its peer's message before posting its next receive.
fn verify_pass(
    comm: &mut dyn Communicator,
    kind: Kind,
    (sends, recvs, peer): (bool, bool, Rank),
    tag: Tag,
    len: usize,
    v: usize,
    b: Bufs,
) -> Result<()> {
    for i in 0..v {
        let r = if recvs {
            Some(comm.irecv(b.rbuf.first(len), Some(peer), Some(tag))?)
        } else {
            None
        };
        let s = if sends {
            Some(comm.isend(b.sbuf.first(len), peer, tag)?)
        } else {
            None
        };
        if let Some(r) = r {
            comm.wait(r)?;
            let which = verify::Which::Pass { i: i + 1, of: v };
            verify::check(comm, b.rbuf, len, peer, len, which)?;
            verify::clear_first(comm, b.rbuf, len)?;
        }
        if let Some(s) = s {
            comm.wait(s)?;
        }
        if kind != Kind::Bibw {
            if sends {
                comm.recv(b.ack.first(0), Some(peer), Some(ACK_TAG))?;
            } else {
                comm.send(b.ack.first(0), peer, ACK_TAG)?;
            }
        }
    }
    Ok(())
}

/// Aggregate rates of a size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub messages: u64,
    pub elapsed_ns: f64,
    pub bytes_per_sec: f64,
    pub msgs_per_sec: f64,
}

impl Rates {
    pub fn new(messages: u64, len: usize, elapsed_ns: f64) -> Rates {
        let secs = elapsed_ns / 1e9;
        let (bps, mps) = if secs > 0.0 {
            (messages as f64 * len as f64 / secs, messages as f64 / secs)
        } else {
            (0.0, 0.0)
        };
        Rates {
            messages,
            elapsed_ns,
            bytes_per_sec: bps,
            msgs_per_sec: mps,
        }
    }
}

/// One size's row of bw, bibw or msgrate.
#[derive(Clone, Debug, Serialize)]
pub struct WindowRow {
    pub size: usize,
    pub iterations: u64,
    pub warmup: u64,
    pub window: u32,
    /// "window": the window posted at once; "serial": one message at a
    /// time (`--serial`).
    pub posting: &'static str,
    pub pairs: u32,
    pub samples: u64,
    pub messages: u64,
    pub elapsed_ns: Rounded2,
    pub bytes_per_sec: Rounded2,
    pub msgs_per_sec: Rounded2,
    pub window_p50_ns: Rounded2,
    pub window_p99_ns: Rounded2,
    pub window_mean_ns: Rounded2,
    pub window_stddev_ns: Rounded2,
    /// The mean rate of rank 0's windows, with its interval.
    #[serde(serialize_with = "Estimate::ser_mean")]
    pub window_bytes_per_sec: Option<Estimate>,
    /// The window times' HDR histogram, for `ovbench compare`
    /// (src/stats/hist.rs: ps, V2 deflate, base64).
    pub window_histogram: Option<String>,
    pub ops: OpCounts,
    /// Per rank, under `--cpu-use`.
    pub cpu: Option<Vec<CpuRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_pair: Option<Vec<PairRate>>,
}

impl WindowRow {
    fn new(
        len: usize,
        counts: Counts,
        args: &WindowArgs,
        r: &Rates,
        s: &Summary,
        rate_ci: Option<Estimate>,
        ops: OpCounts,
    ) -> WindowRow {
        WindowRow {
            size: len,
            iterations: counts.iters,
            warmup: counts.warmup,
            window: args.window,
            posting: if args.serial { "serial" } else { "window" },
            pairs: args.pairs,
            samples: s.samples,
            messages: r.messages,
            elapsed_ns: Rounded2(r.elapsed_ns),
            bytes_per_sec: Rounded2(r.bytes_per_sec),
            msgs_per_sec: Rounded2(r.msgs_per_sec),
            window_p50_ns: Rounded2(s.p50),
            window_p99_ns: Rounded2(s.p99),
            window_mean_ns: Rounded2(s.mean),
            window_stddev_ns: Rounded2(s.stddev),
            window_bytes_per_sec: rate_ci,
            window_histogram: None,
            ops,
            cpu: None,
            per_pair: None,
        }
    }
}

impl Row for WindowRow {
    /// msgrate leads with the message rate, bw and bibw with MB/s.
    type Layout = Kind;
    fn columns(kind: &Kind) -> Vec<Column<WindowRow>> {
        let bw = Column::new("MB/s", "bytes_per_sec", |r: &WindowRow| {
            mbps(r.bytes_per_sec.0)
        });
        let mr = Column::new("msg/s", "msgs_per_sec", |r: &WindowRow| {
            fixed(r.msgs_per_sec.0, 0)
        });
        let rates = match kind {
            Kind::Msgrate => [mr, bw],
            _ => [bw, mr],
        };
        let mut c = vec![
            Column::new("size[B]", "size", |r: &WindowRow| r.size.to_string()),
            Column::new("iters", "iterations", |r: &WindowRow| {
                r.iterations.to_string()
            }),
        ];
        c.extend(rates);
        c.push(Column::new(
            "p50win[us]",
            "window_p50_ns",
            |r: &WindowRow| us(r.window_p50_ns.0, 2),
        ));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn pairs_split_senders_and_receivers() {
        assert_eq!(role(0, 2, Kind::Bw), Some((true, false, 2)));
        assert_eq!(role(1, 2, Kind::Bw), Some((true, false, 3)));
        assert_eq!(role(3, 2, Kind::Bw), Some((false, true, 1)));
        assert_eq!(role(4, 2, Kind::Bw), None);
        assert_eq!(role(2, 2, Kind::Bibw), Some((true, true, 0)));
    }

    #[test]
    fn rates_from_known_figures() {
        // 6400 messages of 1 MB in 2 s: 3.2 GB/s, 3200 msg/s.
        let r = Rates::new(6400, 1_000_000, 2e9);
        assert!((r.bytes_per_sec - 3.2e9).abs() < 1.0);
        assert!((r.msgs_per_sec - 3200.0).abs() < 1e-9);
        assert_eq!(Rates::new(10, 8, 0.0).bytes_per_sec, 0.0);
    }

    #[test]
    fn row_carries_the_rate_interval() {
        let s = Summary::of(&[1000.0, 1100.0, 900.0], 0.95).unwrap();
        let rates = [8e9, 7e9, 9e9];
        let e = Sample::new(&rates).map(|x| x.mean_estimate(0.95));
        let a = WindowArgs {
            sweep: crate::sizes::Sizes::from_str("8")
                .map(|sizes| SweepArgs {
                    sizes,
                    iters: None,
                    warmup: None,
                    verify: false,
                })
                .unwrap(),
            window: 64,
            serial: false,
            pairs: 1,
        };
        let counts = Counts {
            iters: 3,
            warmup: 0,
        };
        let rates = Rates::new(192, 8, 3000.0);
        let row = WindowRow::new(8, counts, &a, &rates, &s, e, OpCounts::default());
        let v = crate::output::to_json(&row);
        assert_eq!(v["window_bytes_per_sec"]["mean"], 8e9);
        assert_eq!(v["window_bytes_per_sec"]["level"], 0.95);
        assert!(v["window_bytes_per_sec"]["lower"].as_f64().unwrap() < 8e9);
        assert_eq!(v["samples"], 3);
        // Whatever the kind's column order, each column shows a row field.
        for kind in [Kind::Bw, Kind::Bibw, Kind::Msgrate] {
            crate::output::check_fields(&kind, &row).unwrap();
        }
        let cells = Table::<WindowRow>::quiet(&Kind::Msgrate).cells(&row);
        assert_eq!(cells[2], "64000000");
    }

    #[test]
    fn per_pair_rates_come_from_each_sender() {
        let r = |rank, elapsed_ns| RankReport {
            rank,
            elapsed_ns,
            ..RankReport::default()
        };
        // Ranks 0 and 1 send (2 pairs of 4 ranks); 1000 messages of 1000 B each.
        let v = per_pair(&[r(0, 1e9), r(1, 2e9), r(2, 1e9), r(3, 2e9)], 2, 1000, 1000);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].bytes_per_sec.0, 1e6);
        assert_eq!(v[1].bytes_per_sec.0, 5e5);
        assert_eq!(v[1].ranks, [1, 3]);
    }

    #[test]
    fn defaults() {
        assert_eq!(default_counts(8).iters, 100);
        assert_eq!(default_counts(1 << 20).warmup, 2);
    }
}
