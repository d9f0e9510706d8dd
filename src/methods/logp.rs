//! LogP parameters by the method of Kielmann, Bal and Verstoep, "Fast
//! Measurement of LogP Parameters for Message Passing Platforms"
//! (reference/logp-mpi.txt, logp_test); stopping rules and defaults as
//! DESIGN.md pins them.
//!
//! Rank 0 measures, rank 1 mirrors (it executes the commands rank 0
//! sends it, one control round trip before each batch so no batch starts
//! with a message still queued at a NIC); other ranks wait.
//!
//! * g(0): a synchronous saturation test — n zero-byte messages in a row,
//!   then one acknowledgement — starting at 10 messages and doubling
//!   until the per-message gap `(total − RTT(0))/(n − 1)` changes by less
//!   than 1% (n − 1 gaps separate n sends; the RTT covers the first
//!   message and the acknowledgement). A train of 10240 messages or one
//!   taking 100 ms ends the doubling with a note.
//! * RTT(m): m bytes forward, 0 back; os(m) = the time of the send call.
//! * or(m): 0 forward, m back; rank 0 spins `max(1.2·RTT(m), floor)` with
//!   `delay` (floor = 100 clock calls) so the reply has arrived, then
//!   or(m) = the time of the receive call.
//! * g(m) = RTT(m) − RTT(0) + g(0) (measured by saturation with `--flood`);
//!   L = RTT(0)/2 − g(0); G = the least-squares slope of g(m) over the
//!   largest sizes.
//! * Repetitions until the confidence interval is narrower than 2·eps of
//!   the mean or max-its (×4 up to 1 KiB, ×2 up to 64 KiB) is reached:
//!   two, then three more at a time.
//! * k_max extension (up to 8× --max-size) until g(m) is close to the
//!   extrapolation from the two sizes below, then non-linearity probing at
//!   (m2 + m)/2 wherever os, or or g misses its extrapolation by more than
//!   max-diff, until neighbouring sizes are within max(32, eps·m2) bytes.

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use ovbench_core::{Buf, Communicator, OpCounts, Rank, Tag};
use serde::Serialize;

use super::common::{ns, us, Ctrl, Estimate};
use crate::report::Sink;
use crate::sizes::ByteSize;

const TAG_DATA: Tag = 0x4f56_0201;
const OP_STOP: u64 = 0;
const OP_SAT: u64 = 1;
const OP_RTT: u64 = 2;
const OP_OR: u64 = 3;
/// The saturation test never sends more than this many messages at once…
const MAX_SAT: u64 = 10 << 10;
/// …nor doubles past a step that took this long (a receiver that falls
/// further behind the longer the train is never stabilises).
const SAT_BUDGET_NS: f64 = 100e6;
/// Repetitions added per batch once the first two leave the interval too
/// wide (one control round trip per batch, as logp_test adds three).
const BATCH: usize = 3;
/// Non-linearity probes per run, at most.
const MAX_PROBES: usize = 64;

/// How rank 0 and its mirror send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SendKind {
    /// Blocking standard send (logp_test: -Send).
    Send,
    /// Isend followed by Wait, timed together (logp_test: -Isend).
    Isend,
    /// Synchronous send (logp_test: -Ssend).
    Ssend,
}

/// How rank 0 and its mirror receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RecvKind {
    /// Blocking receive (logp_test: -Recv).
    Recv,
    /// Irecv followed by Wait, timed together (logp_test: -Irecv).
    Irecv,
}

/// `ovbench logp`: logp_test's parameters.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Allowed relative error: intervals narrower than 2·eps stop the
    /// repetitions (logp_test: -eps).
    #[arg(long, default_value_t = 0.03)]
    pub eps: f64,
    /// Confidence level of the intervals (logp_test: -conf-int).
    #[arg(long, default_value_t = 0.9)]
    pub conf_int: f64,
    /// Base repetition cap, ×4 up to 1 KiB, ×2 up to 64 KiB (logp_test: -max-its).
    #[arg(long, default_value_t = 18)]
    pub max_its: usize,
    /// Smallest size measured besides 0 (logp_test: -min-size).
    #[arg(long, default_value = "0")]
    pub min_size: ByteSize,
    /// Largest power-of-two size (logp_test: -max-size).
    #[arg(long, default_value = "256K")]
    pub max_size: ByteSize,
    /// Measure g(m) by saturation at every size, not only 0 (logp_test: -flood).
    #[arg(long)]
    pub flood: bool,
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

/// One size's parameters (ns), with intervals and repetition counts.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub size: usize,
    pub os: Estimate,
    pub or: Estimate,
    pub rtt: Estimate,
    pub g: Estimate,
    /// Found by non-linearity probing (or by extending k_max).
    pub probed: bool,
    pub remarks: Vec<String>,
    /// Operations rank 0 posted for this size (control messages included).
    pub ops: OpCounts,
}

/// The run's result (meaningful on rank 0).
#[derive(Debug, Clone, Serialize)]
pub struct Output {
    pub clock_overhead_ns: f64,
    pub g0_ns: f64,
    pub g0_messages: u64,
    pub rtt0_ns: f64,
    #[serde(rename = "L_ns")]
    pub l_ns: f64,
    #[serde(rename = "G_ns_per_byte")]
    pub g_ns_per_byte: f64,
    pub sizes: Vec<SizeResult>,
}

struct Peer<'a> {
    comm: &'a mut dyn Communicator,
    ctrl: Ctrl,
    buf: Buf,
    peer: Rank,
    send: SendKind,
    recv: RecvKind,
}

impl Peer<'_> {
    fn send(&mut self, m: usize) -> anyhow::Result<()> {
        let (c, b, p) = (&mut *self.comm, self.buf, self.peer);
        match self.send {
            SendKind::Send => c.send(b, 0, m, p, TAG_DATA)?,
            SendKind::Isend => {
                let r = c.isend(b, 0, m, p, TAG_DATA)?;
                c.wait(r)?;
            }
            SendKind::Ssend => c.ssend(b, 0, m, p, TAG_DATA)?,
        }
        Ok(())
    }

    fn recv(&mut self, m: usize) -> anyhow::Result<()> {
        let (c, b, p) = (&mut *self.comm, self.buf, self.peer);
        match self.recv {
            RecvKind::Recv => {
                c.recv(b, 0, m, Some(p), Some(TAG_DATA))?;
            }
            RecvKind::Irecv => {
                let r = c.irecv(b, 0, m, Some(p), Some(TAG_DATA))?;
                c.wait(r)?;
            }
        }
        Ok(())
    }

    /// Tell the mirror what comes next and wait until it is ready.
    fn command(&mut self, op: u64, size: usize, count: u64) -> anyhow::Result<()> {
        self.ctrl
            .send(self.comm, self.peer, &[op, size as u64, count])?;
        if op != OP_STOP {
            self.ctrl.recv(self.comm, self.peer)?;
        }
        Ok(())
    }

    /// The mirror's side: execute commands until told to stop.
    fn mirror(&mut self) -> anyhow::Result<()> {
        loop {
            let w = self.ctrl.recv(self.comm, self.peer)?;
            let [op, size, count] = w[..] else {
                bail!("logp: malformed command from rank {}", self.peer);
            };
            if op == OP_STOP {
                return Ok(());
            }
            self.ctrl.send(self.comm, self.peer, &[])?;
            let m = size as usize;
            match op {
                OP_SAT => {
                    for _ in 0..count {
                        self.recv(m)?;
                    }
                    self.send(0)?;
                }
                OP_RTT => {
                    for _ in 0..count {
                        self.recv(m)?;
                        self.send(0)?;
                    }
                }
                OP_OR => {
                    for _ in 0..count {
                        self.recv(0)?;
                        self.send(m)?;
                    }
                }
                _ => bail!("logp: unknown command {op} from rank {}", self.peer),
            }
        }
    }

    /// Time `n` messages of `m` bytes plus the acknowledgement (ns).
    fn saturate(&mut self, m: usize, n: u64) -> anyhow::Result<f64> {
        self.command(OP_SAT, m, n)?;
        let t0 = self.comm.now();
        for _ in 0..n {
            self.send(m)?;
        }
        self.recv(0)?;
        let t1 = self.comm.now();
        Ok(ns(self.comm, t1 - t0))
    }

    /// `count` round trips of m forward / 0 back: (os, rtt) samples.
    fn rtt(
        &mut self,
        m: usize,
        count: u64,
        os: &mut Vec<f64>,
        rtt: &mut Vec<f64>,
    ) -> anyhow::Result<()> {
        self.command(OP_RTT, m, count)?;
        for _ in 0..count {
            let t0 = self.comm.now();
            self.send(m)?;
            let t1 = self.comm.now();
            self.recv(0)?;
            let t2 = self.comm.now();
            os.push(ns(self.comm, t1 - t0));
            rtt.push(ns(self.comm, t2 - t0));
        }
        Ok(())
    }

    /// `count` round trips of 0 forward / m back with a spin of `spin_ns`
    /// before the timed receive: or samples.
    fn or(&mut self, m: usize, count: u64, spin_ns: f64, or: &mut Vec<f64>) -> anyhow::Result<()> {
        self.command(OP_OR, m, count)?;
        for _ in 0..count {
            self.send(0)?;
            self.comm.delay(spin_ns);
            let t0 = self.comm.now();
            self.recv(m)?;
            let t1 = self.comm.now();
            or.push(ns(self.comm, t1 - t0));
        }
        Ok(())
    }
}

/// Saturation: doubling from 10 messages until the gap is stable (1%).
/// Returns (gap ns, messages of the final step).
fn saturation(
    p: &mut Peer,
    m: usize,
    rtt: f64,
    verbose: bool,
    sink: &mut dyn Sink,
) -> anyhow::Result<(f64, u64)> {
    let mut n = 10u64;
    let mut prev: Option<f64> = None;
    loop {
        let tot = p.saturate(m, n)?;
        let gap = ((tot - rtt) / (n - 1) as f64).max(0.0);
        let diff = prev.map(|g| (gap - g) / g);
        if verbose {
            sink.note(&format!(
                "g({m})/pipeline: runs = {n}: tot_time {} RTT {} g_avg {} diff {}",
                us(tot),
                us(rtt),
                us(gap),
                diff.map_or("-".into(), |d| format!("{:.1}%", d * 100.0))
            ));
        }
        if matches!(diff, Some(d) if d.abs() < 0.01) {
            return Ok((gap, n));
        }
        if n >= MAX_SAT || tot >= SAT_BUDGET_NS {
            sink.note(&format!(
                "g({m}) did not settle within 1% by {n} messages (last change {}): using {} us",
                diff.map_or("-".into(), |d| format!("{:+.1}%", d * 100.0)),
                us(gap)
            ));
            return Ok((gap, n));
        }
        prev = Some(gap);
        n *= 2;
    }
}

struct Measurer<'a, 'b> {
    p: Peer<'a>,
    args: &'b Args,
    floor_ns: f64,
    rtt0: f64,
    g0: f64,
}

impl Measurer<'_, '_> {
    fn cap(&self, m: usize) -> usize {
        let f = if m <= 1024 {
            4
        } else if m <= 64 << 10 {
            2
        } else {
            1
        };
        (self.args.max_its * f).max(2)
    }

    fn measure(&mut self, m: usize, sink: &mut dyn Sink) -> anyhow::Result<SizeResult> {
        let (eps, lvl, cap) = (self.args.eps, self.args.conf_int, self.cap(m));
        let before = self.p.comm.op_counts();
        let (mut os, mut rtt) = (Vec::new(), Vec::new());
        self.p.rtt(m, 2, &mut os, &mut rtt)?;
        while os.len() < cap
            && !(Estimate::of(&os, lvl).narrow(eps) && Estimate::of(&rtt, lvl).narrow(eps))
        {
            let more = BATCH.min(cap - os.len()) as u64;
            self.p.rtt(m, more, &mut os, &mut rtt)?;
        }
        let rtt_e = Estimate::of(&rtt, lvl);
        let spin = (1.2 * rtt_e.mean).max(self.floor_ns);
        let mut or = Vec::new();
        self.p.or(m, 2, spin, &mut or)?;
        while or.len() < cap && !Estimate::of(&or, lvl).narrow(eps) {
            let more = BATCH.min(cap - or.len()) as u64;
            self.p.or(m, more, spin, &mut or)?;
        }
        let g = if m == 0 {
            Estimate {
                mean: self.g0,
                lo: self.g0,
                hi: self.g0,
                samples: 1,
            }
        } else if self.args.flood {
            let (gap, n) = saturation(&mut self.p, m, rtt_e.mean, self.args.verbose, sink)?;
            Estimate {
                mean: gap,
                lo: gap,
                hi: gap,
                samples: n as usize,
            }
        } else {
            rtt_e.shifted(self.g0 - self.rtt0)
        };
        let (os, or) = (Estimate::of(&os, lvl), Estimate::of(&or, lvl));
        let mut remarks = Vec::new();
        if os.mean > g.mean {
            remarks.push("os > g!".to_string());
        }
        if or.mean > g.mean {
            remarks.push("or > g!".to_string());
        }
        Ok(SizeResult {
            size: m,
            os,
            or,
            rtt: rtt_e,
            g,
            probed: false,
            remarks,
            ops: self.p.comm.op_counts().since(&before),
        })
    }
}

fn emit(r: &SizeResult, l_ns: Option<f64>, sink: &mut dyn Sink) {
    let mut remarks = r.remarks.join(" ");
    if r.probed {
        remarks = format!("probe {remarks}").trim().to_string();
    }
    let mut json = serde_json::json!({
        "size": r.size,
        "os_ns": r.os.mean, "os_lo_ns": r.os.lo, "os_hi_ns": r.os.hi, "os_samples": r.os.samples,
        "or_ns": r.or.mean, "or_lo_ns": r.or.lo, "or_hi_ns": r.or.hi, "or_samples": r.or.samples,
        "g_ns": r.g.mean, "g_lo_ns": r.g.lo, "g_hi_ns": r.g.hi,
        "rtt_ns": r.rtt.mean, "rtt_lo_ns": r.rtt.lo, "rtt_hi_ns": r.rtt.hi,
        "samples": r.os.samples + r.or.samples,
        "probed": r.probed,
        "remarks": r.remarks,
        "ops": r.ops,
    });
    if let Some(l) = l_ns {
        json["L_ns"] = l.into();
    }
    sink.row(
        &[
            r.size.to_string(),
            us(r.os.mean),
            r.os.samples.to_string(),
            us(r.or.mean),
            r.or.samples.to_string(),
            us(r.g.mean),
            l_ns.map_or(String::new(), us),
            remarks,
        ],
        json,
    );
}

/// Relative miss of `v` against the line through (m1, v1), (m2, v2) at m.
fn miss(m1: usize, v1: f64, m2: usize, v2: f64, m: usize, v: f64) -> f64 {
    let ext = v2 + (v2 - v1) * (m - m2) as f64 / (m2 - m1) as f64;
    let scale = ext.abs().max(v.abs() * 1e-3).max(1e-9);
    (v - ext) / scale
}

/// Least-squares slope of (x, y).
fn slope(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return 0.0;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
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
    if !(args.eps > 0.0 && args.conf_int > 0.0 && args.conf_int < 1.0 && args.max_diff > 0.0) {
        bail!("--eps and --max-diff must be positive and --conf-int inside (0, 1)");
    }
    let min_size = args.min_size.bytes();
    let max_size = args.max_size.bytes();
    if min_size > max_size {
        bail!("--min-size {min_size} is above --max-size {max_size}");
    }
    let me = comm.rank();
    let mut out = Output {
        clock_overhead_ns: comm.clock().info().call_cost_ns,
        g0_ns: 0.0,
        g0_messages: 0,
        rtt0_ns: 0.0,
        l_ns: 0.0,
        g_ns_per_byte: 0.0,
        sizes: Vec::new(),
    };
    let buf = comm.alloc((8 * max_size).max(1))?;
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
    };
    if me == 1 {
        p.mirror()?;
        p.comm.barrier()?;
        return Ok(out);
    }
    sink.note("rank 0 measures with peer 1; rank 1 mirrors");
    sink.note(&format!(
        "Clock overhead is {:.3} us",
        out.clock_overhead_ns / 1000.0
    ));

    // A first RTT(0) for the saturation test's correction.
    let (mut os, mut rtt) = (Vec::new(), Vec::new());
    p.rtt(0, 8, &mut os, &mut rtt)?;
    let rtt_first = Estimate::of(&rtt, args.conf_int).mean;
    let (g0, n0) = saturation(&mut p, 0, rtt_first, args.verbose, sink)?;
    out.g0_ns = g0;
    out.g0_messages = n0;
    sink.note(&format!("g(0) = {} us from {n0} messages in a row", us(g0)));

    let floor_ns = 100.0 * out.clock_overhead_ns;
    let mut ms = Measurer {
        p,
        args,
        floor_ns,
        rtt0: rtt_first,
        g0,
    };
    sink.table(
        &format!(
            "LogP parameters ({:?}/{:?}), {:.0}% confidence",
            args.send_mode,
            args.recv_mode,
            args.conf_int * 100.0
        ),
        &[
            "size", "os[us]", "os#", "or[us]", "or#", "g[us]", "L[us]", "remarks",
        ],
    );
    let mut results: BTreeMap<usize, SizeResult> = BTreeMap::new();
    let r0 = ms.measure(0, sink)?;
    ms.rtt0 = r0.rtt.mean;
    out.rtt0_ns = r0.rtt.mean;
    out.l_ns = r0.rtt.mean / 2.0 - g0;
    emit(&r0, Some(out.l_ns), sink);
    results.insert(0, r0);

    let mut sizes = Vec::new();
    if min_size > 0 && !min_size.is_power_of_two() {
        sizes.push(min_size);
    }
    let mut k = 1usize;
    while k <= max_size {
        if k >= min_size {
            sizes.push(k);
        }
        k *= 2;
    }
    for &m in &sizes {
        let r = ms.measure(m, sink)?;
        emit(&r, None, sink);
        results.insert(m, r);
    }

    // k_max extension: until g(top) is close to the line through the two
    // power-of-two sizes below it.
    let mut top = *results.keys().next_back().context("no sizes")?;
    while top >= 4 && top.is_power_of_two() && top * 2 <= 8 * max_size {
        // The two power-of-two sizes below (absent above a large --min-size).
        let (Some(a), Some(b), Some(t)) = (
            results.get(&(top / 4)),
            results.get(&(top / 2)),
            results.get(&top),
        ) else {
            break;
        };
        let d = miss(a.size, a.g.mean, b.size, b.g.mean, top, t.g.mean);
        if d.abs() <= args.max_diff {
            break;
        }
        sink.note(&format!(
            "g({top}) misses the extrapolation by {:.1}%: extending to {}",
            d * 100.0,
            top * 2
        ));
        top *= 2;
        let mut r = ms.measure(top, sink)?;
        r.remarks.push("k_max extended".into());
        emit(&r, None, sink);
        results.insert(top, r);
    }

    probe_nonlinear(&mut ms, &mut results, sink)?;

    // G: the least-squares slope of g(m) over the largest power-of-two sizes.
    let big: Vec<(f64, f64)> = results
        .values()
        .filter(|r| r.size > 0 && r.size.is_power_of_two() && !r.probed)
        .rev()
        .take(4)
        .map(|r| (r.size as f64, r.g.mean))
        .collect();
    out.g_ns_per_byte = slope(&big);
    out.sizes = results.into_values().collect();
    ms.p.command(OP_STOP, 0, 0)?;
    ms.p.comm.barrier()?;
    let lines = vec![
        format!("L = RTT(0)/2 - g(0) = {} us", us(out.l_ns)),
        format!(
            "G = {:.6} ns/byte ({} largest sizes)",
            out.g_ns_per_byte,
            big.len()
        ),
        format!(
            "g(0) = {} us, RTT(0) = {} us",
            us(out.g0_ns),
            us(out.rtt0_ns)
        ),
    ];
    sink.summary(
        serde_json::json!({
            "L_ns": out.l_ns,
            "G_ns_per_byte": out.g_ns_per_byte,
            "g0_ns": out.g0_ns,
            "g0_messages": out.g0_messages,
            "rtt0_ns": out.rtt0_ns,
            "clock_overhead_ns": out.clock_overhead_ns,
        }),
        &lines,
    );
    Ok(out)
}

/// Probe at (m2 + m)/2 wherever size m misses the extrapolation from the
/// two sizes below it by more than max-diff, until the sizes are close.
fn probe_nonlinear(
    ms: &mut Measurer,
    results: &mut BTreeMap<usize, SizeResult>,
    sink: &mut dyn Sink,
) -> anyhow::Result<()> {
    let (eps, max_diff) = (ms.args.eps, ms.args.max_diff);
    let mut reported = std::collections::HashSet::new();
    for _ in 0..MAX_PROBES {
        let keys: Vec<usize> = results.keys().copied().collect();
        let mut next = None;
        for w in keys.windows(3) {
            let (a, b, c) = (&results[&w[0]], &results[&w[1]], &results[&w[2]]);
            let checks = [
                ("os", a.os.mean, b.os.mean, c.os.mean),
                ("or", a.or.mean, b.or.mean, c.or.mean),
                ("g", a.g.mean, b.g.mean, c.g.mean),
            ];
            let mut off = Vec::new();
            for (name, v1, v2, v) in checks {
                let d = miss(a.size, v1, b.size, v2, c.size, v);
                if d.abs() > max_diff {
                    off.push(format!("{name} {} ({:+.1}%)", us(v), d * 100.0));
                }
            }
            if off.is_empty() {
                continue;
            }
            if reported.insert(c.size) {
                sink.note(&format!("+ {:>7}: {}", c.size, off.join(" ")));
            }
            let close = (c.size - b.size) as f64 <= (32.0f64).max(eps * b.size as f64);
            let mid = (b.size + c.size) / 2;
            if !close && !results.contains_key(&mid) {
                next = Some(mid);
                break;
            }
        }
        let Some(mid) = next else {
            return Ok(());
        };
        let mut r = ms.measure(mid, sink)?;
        r.probed = true;
        emit(&r, None, sink);
        results.insert(mid, r);
    }
    sink.note(&format!("stopped probing after {MAX_PROBES} probes"));
    Ok(())
}
