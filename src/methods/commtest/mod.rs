//! COMMTEST (P. H. Worley, "COMMTEST Performance Studies"): SWAP and SENDRECV of a fixed
//! volume sent as 1, 2, 4 … packets down to a minimum packet size, under
//! the unordered (ping-ping, (0,0)–(0,9)) and ordered (ping-pong,
//! (1,0)–(1,10)) protocols, optionally "reorganized" to prepost the next
//! receive and complete the previous send late.
//!
//! * SWAP: rank r exchanges with its partner at `--distance` d (r+d in
//!   blocks of 2d); SENDRECV: rank r sends to r+d and receives from r−d,
//!   so the ranks form cycles. Without `--all-pairs` only rank 0 and its
//!   partners take part.
//! * Ordered protocols: in a SWAP the lower rank is "processor 1"; in a
//!   SENDRECV cycle its lowest rank is, and the others receive first.
//! * Ready sends include the handshake the reference's listing leaves
//!   out, and it is timed: the receiver posts its receive, then sends a
//!   zero-byte ready message that the sender waits for before it sends.
//! * Each experiment runs `--iterations` times after a barrier; each rank
//!   times itself, and the row reports the maximum over ranks (the
//!   minimum and mean of it over iterations) and the bandwidth the
//!   minimum achieves: MB/s counts the bytes one rank sends, packets ×
//!   packet size (what moves in each direction; below `--total` when the
//!   packets do not divide it). Each experiment uses its own tags, so a row a path
//!   cannot run (the transport refuses a send mode) is printed as n/a and
//!   leaves nothing behind to match later.
//! * `--global-clock`: every rank maps its begin and end onto rank 0's
//!   clock ([`start`]'s round trips: offset re-measured before each
//!   experiment, drift from how it moved since the first), and the
//!   row adds first-begin to last-end over ranks, with a note where it
//!   departs by more than 10% from the slowest rank's own time, and beside
//!   it the synchronisation's error bound: half the round trip each offset
//!   came from, for the rank that began first plus the rank that ended last.
//! * `--start barrier` (COMMTEST's, the default) starts each rank's timing
//!   as it leaves the barrier, `--start sync` at an instant of the
//!   synchronised clock; either way the row shows how far apart the ranks
//!   started (the skew, with its error: [`start`]) and reads `skewed` where
//!   that exceeds [`row::SKEW_LIMIT`] of its time.
//! * (1,6) is left out: see [`protocols::WHY_NO_1_6`].

use anyhow::bail;
use ovbench_core::{Buf, Communicator, OpCounts, Rank, Req, Tag, TransportError};
use serde::Serialize;

use super::common::{mean, ns, Ctrl, Verdict};
use crate::output::{us, Table};

mod protocols;
mod row;
mod start;
use crate::report::Sink;
use crate::sizes::ByteSize;
use protocols::{parse_protocol, send_op};
pub use protocols::{Op, Protocol, PROTOCOLS, WHY_NO_1_6};
pub use row::Row;
pub use start::Start;
use Op::*;

/// SWAP or SENDRECV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Exchange {
    Swap,
    Sendrecv,
}

/// `ovbench commtest`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Total bytes exchanged per experiment.
    #[arg(long, default_value = "1M")]
    pub total: ByteSize,
    /// Smallest packet: packets are total/1, total/2, … down to this.
    #[arg(long, default_value = "1K")]
    pub min_packet: ByteSize,
    /// The exchange: swap (pairs) or sendrecv (cycles).
    #[arg(long, value_enum, default_value = "swap")]
    pub exchange: Exchange,
    /// Protocols as `U,N` (e.g. `0,3`, `1,10`); repeatable; default all.
    #[arg(long = "protocol", value_name = "U,N")]
    pub protocols: Vec<String>,
    /// The reorganized variant: prepost the next receive, complete the
    /// previous send late (unordered protocols).
    #[arg(long)]
    pub reorganized: bool,
    /// Distance between communicating ranks (1 or more: a rank's partner
    /// is rank r+d).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub distance: u32,
    /// Every rank takes part (default: rank 0 and its partners only).
    #[arg(long)]
    pub all_pairs: bool,
    /// Also report first-begin to last-end across ranks, on clocks
    /// synchronised to rank 0 (offset and drift).
    #[arg(long)]
    pub global_clock: bool,
    /// When each iteration's timing starts: as each rank leaves the
    /// barrier (COMMTEST's), or at an instant of the synchronised clock.
    #[arg(long, value_enum, default_value = "barrier")]
    pub start: Start,
    /// Timed repetitions of each experiment (the row shows the fastest).
    #[arg(
        long = "iters",
        visible_alias = "iterations",
        value_name = "N",
        default_value_t = 5,
        value_parser = crate::cli::counts::repetitions
    )]
    pub iterations: u32,
}

/// The run's result (rank 0's rows).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub exchange: Exchange,
    pub total: usize,
    pub participants: Vec<Rank>,
    pub rows: Vec<Row>,
}

struct Ex<'a> {
    comm: &'a mut dyn Communicator,
    sbuf: Buf,
    rbuf: Buf,
    zbuf: Buf,
    dst: Rank,
    src: Rank,
    tag: Tag,
    ready_tag: Tag,
    pending: Vec<Req>,
}

impl Ex<'_> {
    fn op(&mut self, op: Op, off: usize, len: usize) -> Result<(), TransportError> {
        let (c, s, r, z) = (&mut *self.comm, self.sbuf, self.rbuf, self.zbuf);
        let (dst, src, tag) = (self.dst, self.src, self.tag);
        match op {
            Bsend => c.bsend(s.at(off, len), dst, tag)?,
            Send => c.send(s.at(off, len), dst, tag)?,
            Rsend => c.rsend(s.at(off, len), dst, tag)?,
            Ssend => c.ssend(s.at(off, len), dst, tag)?,
            Isend => self.pending.push(c.isend(s.at(off, len), dst, tag)?),
            Irsend => self.pending.push(c.irsend(s.at(off, len), dst, tag)?),
            Issend => self.pending.push(c.issend(s.at(off, len), dst, tag)?),
            Recv => {
                c.recv(r.at(off, len), Some(src), Some(tag))?;
            }
            Irecv => self
                .pending
                .push(c.irecv(r.at(off, len), Some(src), Some(tag))?),
            Sendrecv => {
                c.sendrecv(
                    s.at(off, len),
                    dst,
                    tag,
                    r.at(off, len),
                    Some(src),
                    Some(tag),
                )?;
            }
            // deviation: ready-handshake — the ready handshake is sent and timed, see docs/methods/commtest.md
            ReadyPost => c.send(z.first(0), src, self.ready_tag)?,
            ReadyWait => {
                c.recv(z.first(0), Some(dst), Some(self.ready_tag))?;
            }
            Wait => {
                for q in std::mem::take(&mut self.pending) {
                    c.wait(q)?;
                }
            }
        }
        Ok(())
    }

    /// The basic program: each packet's call sequence in turn.
    fn basic(&mut self, ops: &[Op], packets: usize, psize: usize) -> Result<(), TransportError> {
        for j in 0..packets {
            for &op in ops {
                self.op(op, j * psize, psize)?;
            }
        }
        self.op(Wait, 0, 0)
    }

    /// The reorganized program (the receive of packet 0 was preposted
    /// before the barrier by `prepost`).
    fn reorganized(
        &mut self,
        send: Op,
        ready: bool,
        packets: usize,
        psize: usize,
    ) -> Result<(), TransportError> {
        let c = &mut *self.comm;
        let mut recv = std::mem::take(&mut self.pending);
        let mut prev_send: Option<Req> = None;
        for j in 0..packets {
            if j + 1 < packets {
                let q = c.irecv(
                    self.rbuf.at((j + 1) * psize, psize),
                    Some(self.src),
                    Some(self.tag),
                )?;
                recv.push(q);
                if ready {
                    c.send(self.zbuf.first(0), self.src, self.ready_tag)?;
                }
            }
            if ready {
                c.recv(self.zbuf.first(0), Some(self.dst), Some(self.ready_tag))?;
            }
            let (s, off, dst, tag) = (self.sbuf, j * psize, self.dst, self.tag);
            let started = match send {
                Bsend => c.bsend(s.at(off, psize), dst, tag).map(|_| None)?,
                Send => c.send(s.at(off, psize), dst, tag).map(|_| None)?,
                Rsend => c.rsend(s.at(off, psize), dst, tag).map(|_| None)?,
                Ssend => c.ssend(s.at(off, psize), dst, tag).map(|_| None)?,
                Isend => Some(c.isend(s.at(off, psize), dst, tag)?),
                Irsend => Some(c.irsend(s.at(off, psize), dst, tag)?),
                _ => Some(c.issend(s.at(off, psize), dst, tag)?),
            };
            c.wait(recv.remove(0))?;
            if let Some(p) = prev_send.take() {
                c.wait(p)?;
            }
            prev_send = started;
        }
        if let Some(p) = prev_send {
            c.wait(p)?;
        }
        Ok(())
    }

    fn prepost(&mut self, ready: bool, psize: usize) -> Result<(), TransportError> {
        let q = self
            .comm
            .irecv(self.rbuf.first(psize), Some(self.src), Some(self.tag))?;
        self.pending.push(q);
        if ready {
            self.comm
                .send(self.zbuf.first(0), self.src, self.ready_tag)?;
        }
        Ok(())
    }
}

/// Who this rank sends to and receives from, whether it takes part, and
/// whether it is processor 1 of the ordered protocols.
fn partners(args: &Args, me: Rank, n: u32) -> anyhow::Result<(Rank, Rank, bool, bool)> {
    let d = args.distance;
    if d == 0 || d >= n {
        bail!("--distance must be between 1 and {} with {n} ranks", n - 1);
    }
    match args.exchange {
        Exchange::Swap => {
            let p = if (me / d) % 2 == 0 { me + d } else { me - d };
            let active = p < n && (args.all_pairs || me == 0 || p == 0);
            Ok((p, p, active, me < p))
        }
        Exchange::Sendrecv => {
            let g = gcd(n, d);
            let active = args.all_pairs || me % g == 0;
            Ok(((me + d) % n, (me + n - d) % n, active, me < g))
        }
    }
}

/// Why a row's figures are no result: a negative time, or a first-begin to
/// last-end span shorter than the slowest rank's own time by more than the
/// synchronisation's error (each rank's span lies within the global one).
// deviation: flagged-rows — impossible rows are flagged, see docs/methods/commtest.md
fn row_verdict(row: &Row) -> Verdict {
    let mut v = Verdict::default();
    if let Some(t) = row.time_ns {
        v.check(t >= 0.0, || "time < 0".into());
        if let (Some(g), Some(e)) = (row.global_ns, row.sync_error_ns) {
            // 0.1% for the clocks' drift over the span.
            v.check(g >= t - e - 1e-3 * t, || {
                format!(
                    "first-begin to last-end {} us is shorter than the slowest rank's {} us beyond the synchronisation's ±{} us",
                    us(g, 3),
                    us(t, 3),
                    us(e, 3)
                )
            });
        }
    }
    v
}

/// First begin to last end over the ranks that timed (finite stamps),
/// and its error bound: the synchronisation error of the rank that began
/// first plus that of the rank that ended last.
fn global_span(begins: &[f64], ends: &[f64], errs: &[f64]) -> Option<(f64, f64)> {
    let first = begins
        .iter()
        .enumerate()
        .filter(|(_, x)| x.is_finite())
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    let last = ends
        .iter()
        .enumerate()
        .filter(|(_, x)| x.is_finite())
        .max_by(|a, b| a.1.total_cmp(b.1))?;
    let err = errs.get(first.0).copied().unwrap_or(0.0) + errs.get(last.0).copied().unwrap_or(0.0);
    (last.1 > first.1).then_some((last.1 - first.1, err))
}

/// The largest round trip and offset error of the ranks' synchronisations
/// (collective; `Some` on rank 0).
fn worst_sync(
    comm: &mut dyn Communicator,
    ctrl: &Ctrl,
    sync: &start::Synced,
) -> anyhow::Result<Option<(f64, f64)>> {
    let all = ctrl.gather_each(comm, &[sync.map.rtt_ns, sync.err_ns])?;
    let max = |v: &[Vec<f64>], i: usize| v.iter().map(|x| x[i]).fold(0.0, f64::max);
    Ok(all.map(|v| (max(&v, 0), max(&v, 1))))
}

/// Why a row is `noisy`: its iterations' mean against its time.
fn noisy_note(row: &Row, times: &[f64]) -> String {
    let slowest = times.iter().copied().fold(0.0, f64::max);
    format!(
        "{} with {} packets: noisy: mean {} us is {:.1}x time {} us (over {} iterations, the slowest {} us): time is the fastest iteration, and the others were not like it; rerun on an idle machine, one rank per core, or with more --iterations",
        row.protocol,
        row.packets,
        us(row.mean_ns.unwrap_or(f64::NAN), 3),
        row.mean_ratio.unwrap_or(f64::NAN),
        us(row.time_ns.unwrap_or(f64::NAN), 3),
        times.len(),
        us(slowest, 3)
    )
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The protocols asked for (all by default), each checked.
fn chosen(args: &Args) -> anyhow::Result<Vec<&'static Protocol>> {
    if args.protocols.is_empty() {
        return Ok(PROTOCOLS.iter().collect());
    }
    args.protocols.iter().map(|s| parse_protocol(s)).collect()
}

/// What can be checked before any rank starts.
#[deny(clippy::arithmetic_side_effects)]
pub fn check_args(args: &Args) -> anyhow::Result<()> {
    let (total, min_packet) = (args.total.bytes(), args.min_packet.bytes());
    if total == 0 {
        bail!("--total 0: give the bytes exchanged per experiment, e.g. --total 1M");
    }
    if min_packet == 0 {
        bail!("--min-packet 0: give at least 1 byte, e.g. --min-packet 1K");
    }
    if min_packet > total {
        bail!(
            "--min-packet {min_packet} is above --total {total}: give --min-packet at most --total"
        );
    }
    if args.iterations == 0 {
        bail!("--iterations 0: give at least 1 timed repetition, e.g. --iterations 5");
    }
    chosen(args).map(drop)
}

/// Run the method on every rank; rank 0's sink prints.
pub fn run(
    comm: &mut dyn Communicator,
    args: &Args,
    sink: &mut dyn Sink,
) -> anyhow::Result<Output> {
    let (me, n) = (comm.rank(), comm.size());
    if n < 2 {
        bail!("commtest needs at least 2 ranks");
    }
    check_args(args)?;
    let total = args.total.bytes();
    let min_packet = args.min_packet.bytes();
    let protocols = chosen(args)?;
    let (dst, src, active, first) = partners(args, me, n)?;
    let ctrl = Ctrl::new(comm)?;
    let flags = ctrl.gather(comm, f64::from(u8::from(active)))?;
    let participants: Vec<Rank> = flags
        .map(|f| (0..n).filter(|&r| f[r as usize] != 0.0).collect())
        .unwrap_or_default();
    let mut ex = Ex {
        sbuf: comm.alloc(total)?,
        rbuf: comm.alloc(total)?,
        zbuf: comm.alloc(1)?,
        comm,
        dst,
        src,
        tag: 0,
        ready_tag: 0,
        pending: Vec::new(),
    };
    ex.comm.fill(ex.sbuf, &mut |b| {
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8;
        }
    })?;
    let variant = if args.reorganized {
        "reorganized"
    } else {
        "basic"
    };
    sink.note(&format!(
        "{:?} of {total} B, distance {}, ranks {participants:?}; time = max over ranks, min over {} iterations; MB/s = bytes one rank sends (packets × packet size: one direction's volume, each direction moves as much) / time",
        args.exchange, args.distance, args.iterations
    ));
    if args.protocols.is_empty() {
        sink.note(WHY_NO_1_6);
    }
    // Rank 0's clock (offset and drift), for the skew of the starts, the
    // sync start and the global span: a first synchronisation now,
    // another before every experiment.
    let first_sync = start::first(ex.comm)?;
    let worst = worst_sync(ex.comm, &ctrl, &first_sync)?;
    if let Some((rtt, err)) = worst {
        sink.note(&start::about(args.start, err, rtt / 2.0));
    }
    let table = Table::<Row>::start(
        sink,
        &format!("commtest {variant} {:?}", args.exchange).to_lowercase(),
        &args.global_clock,
    );
    let mut out = Output {
        exchange: args.exchange,
        total,
        participants,
        rows: Vec::new(),
    };
    let mut experiment = 0u32;
    for p in protocols {
        let mut packets = 1usize;
        while total / packets >= min_packet {
            let psize = total / packets;
            experiment += 1;
            let moved = packets * psize;
            let runnable = !args.reorganized || send_op(p).is_some_and(|_| p.number != 6);
            let mut times = Vec::new();
            let mut globals = Vec::new();
            let sync = start::again(ex.comm, &first_sync)?;
            let lead = worst_sync(ex.comm, &ctrl, &sync)?
                .map_or(0.0, |(rtt, err)| start::lead_ns(n, rtt, err));
            let mut skews = Vec::new();
            let mut ops = OpCounts::default();
            let mut error = None;
            for it in 0..args.iterations {
                // Fresh tags per experiment and iteration: nothing left
                // over from an aborted row can match later.
                let k = experiment.wrapping_mul(64).wrapping_add(it) & 0xff_ffff;
                ex.tag = 0x4000_0000 | k;
                ex.ready_tag = 0x5000_0000 | k;
                let mut t = 0.0;
                let mut span = (f64::NAN, f64::NAN);
                let mut began = (f64::NAN, f64::NAN);
                let mut failed = None;
                if active && runnable && error.is_none() {
                    let ready = matches!(send_op(p), Some(Rsend | Irsend));
                    if args.reorganized {
                        if let Err(e) = ex.prepost(ready, psize) {
                            failed = Some(e);
                        }
                    }
                    start::start(ex.comm, &ctrl, args.start, &sync, lead)?;
                    if failed.is_none() {
                        let before = ex.comm.op_counts();
                        let t0 = ex.comm.now();
                        let at = ns(ex.comm, t0);
                        began = (sync.to_global(at), sync.err_at(at));
                        let r = if args.reorganized {
                            ex.reorganized(send_op(p).unwrap_or(Send), ready, packets, psize)
                        } else {
                            let ops = if p.ordered && !first { p.p2 } else { p.p1 };
                            ex.basic(ops, packets, psize)
                        };
                        let t1 = ex.comm.now();
                        ex.pending.clear();
                        match r {
                            Ok(()) => {
                                t = ns(ex.comm, t1 - t0);
                                span = (
                                    sync.to_global(ns(ex.comm, t0)),
                                    sync.to_global(ns(ex.comm, t1)),
                                );
                                ops = ex.comm.op_counts().since(&before);
                            }
                            Err(e) => failed = Some(e),
                        }
                    }
                } else {
                    start::start(ex.comm, &ctrl, args.start, &sync, lead)?;
                }
                let mine = if failed.is_some() { -1.0 } else { t };
                if let Some(e) = failed {
                    if !matches!(e, TransportError::Unsupported(_)) {
                        return Err(anyhow::Error::new(e).context(format!(
                            "commtest {} with {packets} packets of {psize} B",
                            p.label()
                        )));
                    }
                    error = Some(e.to_string());
                }
                let col = |v: &[Vec<f64>], i: usize| v.iter().map(|x| x[i]).collect::<Vec<_>>();
                if args.global_clock {
                    let err = sync.map.rtt_ns / 2.0;
                    let each = ctrl.gather_each(ex.comm, &[span.0, span.1, err])?;
                    if let Some(v) = each {
                        if let Some(g) = global_span(&col(&v, 0), &col(&v, 1), &col(&v, 2)) {
                            globals.push(g);
                        }
                    }
                }
                // One message a rank: its start, the start's error and its time.
                let each = ctrl.gather_each(ex.comm, &[began.0, began.1, mine])?;
                let skewed = each
                    .as_ref()
                    .and_then(|v| start::skew(&col(v, 0), &col(v, 1)));
                let verdict = each.map(|v| {
                    let v = col(&v, 2);
                    if v.iter().any(|&x| x < 0.0) {
                        -1.0
                    } else {
                        v.iter().copied().fold(0.0, f64::max)
                    }
                });
                let w = ctrl.bcast(ex.comm, &[verdict.unwrap_or(0.0).to_bits()])?;
                let max = f64::from_bits(w[0]);
                if max < 0.0 {
                    error.get_or_insert_with(|| "a rank's transport refused this send mode".into());
                } else if runnable {
                    times.push(max);
                    skews.push(skewed);
                }
            }
            let measured = runnable && error.is_none() && !times.is_empty();
            let mut row = Row {
                protocol: p.label(),
                name: p.name.into(),
                reorganized: args.reorganized,
                packet_size: psize,
                packets,
                total_bytes: total,
                bytes_moved: moved,
                calls: p.calls(args.reorganized),
                time_ns: None,
                mean_ns: None,
                mean_ratio: None,
                global_ns: None,
                sync_error_ns: None,
                skew_ns: None,
                skew_error_ns: None,
                bytes_per_sec: None,
                samples: times.len(),
                histogram: None,
                error: (!measured)
                    .then(|| error.unwrap_or_else(|| "not defined for this protocol".into())),
                ops,
                flag: "n/a",
                verdict: Verdict::default().marks(),
            };
            if measured {
                let best = times.iter().copied().fold(f64::INFINITY, f64::min);
                // The skew of the iteration the time comes from: the one
                // that biased the figure shown.
                let fastest = times.iter().position(|&t| t == best);
                let skew = fastest.and_then(|i| skews.get(i).copied().flatten());
                row.skew_ns = skew.map(|s| s.0);
                row.skew_error_ns = skew.map(|s| s.1);
                let global = globals.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0));
                row.time_ns = Some(best);
                row.histogram = crate::stats::hist::encode(&times);
                row.mean_ns = Some(mean(&times));
                row.mean_ratio = (best > 0.0).then(|| mean(&times) / best);
                row.global_ns = global.map(|g| g.0);
                row.sync_error_ns = global.map(|g| g.1);
                row.bytes_per_sec = (best > 0.0).then(|| moved as f64 / (best * 1e-9));
            }
            let verdict = row_verdict(&row);
            row.verdict = verdict.marks();
            row.flag = row.flag_of();
            if let (Some(g), Some(t)) = (row.global_ns, row.time_ns) {
                if args.global_clock && (g - t).abs() > 0.1 * t {
                    sink.note(&format!(
                        "{} with {packets} packets: first-begin to last-end {} us differs from the slowest rank's {} us",
                        row.protocol,
                        us(g, 3),
                        us(t, 3)
                    ));
                }
            }
            table.add(sink, &row);
            verdict.note(sink, &format!("{} with {packets} packets", row.protocol));
            if let Some(why) = row.skew_note() {
                sink.note(&why);
            }
            if row.mean_ratio.is_some_and(|r| r > row::MEAN_LIMIT) && row.verdict.valid {
                sink.note(&noisy_note(&row, &times));
            }
            out.rows.push(row);
            packets *= 2;
        }
    }
    ex.comm.barrier()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(time: f64, global: Option<(f64, f64)>) -> Row {
        Row {
            protocol: "(1,0)".into(),
            name: "simple".into(),
            reorganized: false,
            packets: 1,
            packet_size: 8,
            calls: String::new(),
            time_ns: Some(time),
            mean_ns: Some(time),
            mean_ratio: Some(1.0),
            global_ns: global.map(|g| g.0),
            sync_error_ns: global.map(|g| g.1),
            skew_ns: None,
            skew_error_ns: None,
            total_bytes: 8,
            bytes_moved: 8,
            bytes_per_sec: None,
            samples: 1,
            histogram: None,
            error: None,
            ops: OpCounts::default(),
            flag: "ok",
            verdict: Verdict::default().marks(),
        }
    }

    #[test]
    fn a_mean_far_above_the_time_is_noisy() {
        let mut r = row(100.0, None);
        assert_eq!(r.flag_of(), "ok");
        r.mean_ratio = Some(2.0);
        assert_eq!(r.flag_of(), "ok");
        r.mean_ratio = Some(2.01);
        assert_eq!(r.flag_of(), "noisy");
        r.verdict.valid = false;
        assert_eq!(r.flag_of(), "INVALID");
        r.time_ns = None;
        assert_eq!(r.flag_of(), "n/a");
    }

    #[test]
    fn a_skew_beyond_five_percent_is_flagged() {
        let mut r = row(100.0, None);
        (r.skew_ns, r.skew_error_ns) = (Some(4.0), Some(1.0));
        assert_eq!((r.flag_of(), r.skew_note()), ("ok", None));
        r.skew_error_ns = Some(1.01);
        assert_eq!(r.flag_of(), "skewed");
        let why = r.skew_note().unwrap();
        assert!(
            why.contains("0.004 us apart (± 0.001 us), more than 5%"),
            "{why}"
        );
        // Skewed before noisy; not over an invalid row's.
        r.mean_ratio = Some(3.0);
        assert_eq!(r.flag_of(), "skewed");
        r.verdict.valid = false;
        assert_eq!((r.flag_of(), r.skew_note()), ("INVALID", None));
    }

    #[test]
    fn columns_show_json_keys() {
        for global_clock in [false, true] {
            let r = row(100.0, Some((99.0, 2.0)));
            crate::output::check_fields(&global_clock, &r).unwrap();
        }
    }

    #[test]
    fn impossible_rows_are_flagged() {
        assert!(row_verdict(&row(100.0, Some((99.0, 2.0)))).valid());
        assert!(!row_verdict(&row(-1.0, None)).valid());
        let v = row_verdict(&row(100.0, Some((90.0, 2.0))));
        assert!(!v.valid() && v.reason().contains("shorter"), "{v:?}");
    }

    #[test]
    fn global_span_adds_the_two_ends_errors() {
        let b = [10.0, 12.0, f64::NAN];
        let e = [30.0, 25.0, f64::NAN];
        assert_eq!(global_span(&b, &e, &[0.0, 1.5, 9.0]), Some((20.0, 0.0)));
        assert_eq!(
            global_span(&[12.0, 10.0], &[30.0, 31.0], &[2.0, 1.0]),
            Some((21.0, 2.0))
        );
    }
}
