//! Broadcast measured five ways (de Supinski and Karonis, "Accurately
//! Measuring MPI Broadcasts in a Computational Grid",
//! reference/bcast-measurement.txt).
//!
//! * `send-latency`: the root's time per broadcast in a loop of M — really
//!   the root's gap g_0.
//! * `rounds`: M rounds of one broadcast per root, roots in forward and in
//!   backward order, per broadcast — a lower bound on OL.
//! * `barrier`: M broadcast + barrier pairs — an upper bound.
//! * `ack`: M broadcasts each acknowledged by every rank — an upper bound.
//! * `oli`: per destination i, RTL_i by a 0-byte ping-pong, E_i by M
//!   broadcasts each acknowledged by i only; OL_i = E_i − RTL_i/2, and
//!   max_i OL_i estimates OL.
//!
//! The broadcasts are ovbench's own, on point-to-point calls, so the
//! methods can be checked against known shapes: `binomial` (MPICH's
//! binomial tree, largest subtree first), `linear` (i receives from i−1),
//! `backward` (i receives from i+1) and `flat` (the root sends to every
//! rank — it breaks OL_i's assumption that E_i exceeds every gap on i's
//! path, as the reference notes, so its OL_i is reported but is no
//! accuracy claim). Barriers for the `barrier` method: `dissemination`
//! and the linear `ring` (twice round the ring, ending when the token
//! reaches rank n−2 the second time).
//!
//! Every figure is repeated until the standard deviation of its
//! measurements is below 3% of their mean, between `--min-measurements`
//! (8) and `--max-measurements` (30) times — except that a deterministic
//! system stops early: a measurement whose M repetitions after the first
//! all took exactly the same number of clock ticks, or two measurements
//! that agree to the tick, cannot be improved by repeating (under the sim
//! without jitter this means one or two measurements).

use anyhow::bail;
use ovbench_core::{Buf, Communicator, OpCounts, Rank, Tag};
use serde::Serialize;

use super::common::{mean, ns, stddev, us, Ctrl};
use crate::report::Sink;
use crate::sizes::ByteSize;

const TAG_BCAST: Tag = 0x4f56_0301;
const TAG_BARRIER: Tag = 0x4f56_0302;
const TAG_ACK: Tag = 0x4f56_0303;
const TAG_PING: Tag = 0x4f56_0304;

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
    #[arg(long, value_enum, default_value = "dissemination")]
    pub barrier: BarrierKind,
    /// Broadcasts per measurement (the reference's M).
    #[arg(long, default_value_t = 100)]
    pub reps: u64,
    /// Broadcast message size (the reference uses 256 bytes and 64K).
    #[arg(long, default_value = "256")]
    pub msgsize: ByteSize,
    /// Fewest measurements per figure (the reference: 8).
    #[arg(long, default_value_t = 8)]
    pub min_measurements: usize,
    /// Most measurements per figure (the reference: 30).
    #[arg(long, default_value_t = 30)]
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
    /// Operations the root posted in the last measurement (M broadcasts).
    pub ops: OpCounts,
}

/// One destination's OL_i.
#[derive(Debug, Clone, Serialize)]
pub struct Oli {
    pub rank: Rank,
    pub rtl_ns: f64,
    pub e_ns: f64,
    pub ol_ns: f64,
    pub measurements: usize,
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
    pub max_ol_ns: Option<f64>,
    pub max_ol_rank: Option<Rank>,
}

struct Bc<'a> {
    comm: &'a mut dyn Communicator,
    buf: Buf,
    size: usize,
    alg: Algorithm,
    ctrl: Ctrl,
}

impl Bc<'_> {
    fn me(&self) -> Rank {
        self.comm.rank()
    }
    fn np(&self) -> Rank {
        self.comm.size()
    }

    /// One broadcast of `size` bytes from `root`.
    fn bcast(&mut self, root: Rank) -> anyhow::Result<()> {
        let (me, n, b, m) = (self.me(), self.np(), self.buf, self.size);
        let c = &mut *self.comm;
        let recv = |c: &mut dyn Communicator, src: Rank| {
            c.recv(b, 0, m, Some(src), Some(TAG_BCAST)).map(drop)
        };
        match self.alg {
            Algorithm::Binomial => {
                let vr = (me + n - root) % n;
                let (parent, top) = binomial_parent(vr, n);
                if let Some(p) = parent {
                    recv(c, (p + root) % n)?;
                }
                // The children of `binomial_tree`, without building the list
                // (this runs once per rank per broadcast).
                let mut mask = top;
                while mask > 0 {
                    if vr + mask < n {
                        c.send(b, 0, m, (vr + mask + root) % n, TAG_BCAST)?;
                    }
                    mask >>= 1;
                }
            }
            Algorithm::Linear | Algorithm::Backward => {
                let (prev, next) = if self.alg == Algorithm::Linear {
                    ((me + n - 1) % n, (me + 1) % n)
                } else {
                    ((me + 1) % n, (me + n - 1) % n)
                };
                if me != root {
                    recv(c, prev)?;
                }
                if next != root {
                    c.send(b, 0, m, next, TAG_BCAST)?;
                }
            }
            Algorithm::Flat => {
                if me == root {
                    for k in 1..n {
                        c.send(b, 0, m, (root + k) % n, TAG_BCAST)?;
                    }
                } else {
                    recv(c, root)?;
                }
            }
        }
        Ok(())
    }

    /// A barrier on point-to-point messages (not the communicator's own).
    fn barrier(&mut self, kind: BarrierKind) -> anyhow::Result<()> {
        let (me, n, b) = (self.me(), self.np(), self.buf);
        let c = &mut *self.comm;
        let tag = Some(TAG_BARRIER);
        match kind {
            BarrierKind::Dissemination => {
                let mut k = 1;
                while k < n {
                    let r = c.irecv(b, 0, 0, Some((me + n - k) % n), tag)?;
                    c.send(b, 0, 0, (me + k) % n, TAG_BARRIER)?;
                    c.wait(r)?;
                    k <<= 1;
                }
            }
            BarrierKind::Ring => {
                let (prev, next) = ((me + n - 1) % n, (me + 1) % n);
                if me == 0 {
                    c.send(b, 0, 0, next, TAG_BARRIER)?;
                    c.recv(b, 0, 0, Some(prev), tag)?;
                    if n > 2 {
                        c.send(b, 0, 0, next, TAG_BARRIER)?;
                    }
                } else if me == n - 1 {
                    c.recv(b, 0, 0, Some(prev), tag)?;
                    c.send(b, 0, 0, next, TAG_BARRIER)?;
                } else {
                    c.recv(b, 0, 0, Some(prev), tag)?;
                    c.send(b, 0, 0, next, TAG_BARRIER)?;
                    c.recv(b, 0, 0, Some(prev), tag)?;
                    if me != n - 2 {
                        c.send(b, 0, 0, next, TAG_BARRIER)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The root's clock after a repetition. The other ranks read none:
    /// the reference times at the root alone, and their figures are
    /// discarded.
    fn stamp(&mut self, ticks: &mut Vec<u64>) {
        if self.me() == 0 {
            ticks.push(self.comm.now());
        }
    }

    /// One measurement of a method at the root (ns per broadcast, or E_i
    /// for `Oli`), and whether its repetitions after the first were all
    /// identical, and the operations this rank posted in it. `ticks` is the
    /// pre-allocated per-repetition stamp array.
    fn once(
        &mut self,
        what: What,
        reps: u64,
        ticks: &mut Vec<u64>,
    ) -> anyhow::Result<(f64, bool, OpCounts)> {
        let (me, n, b) = (self.me(), self.np(), self.buf);
        ticks.clear();
        // A clean start for the methods whose root runs ahead of the
        // others. OL_i's loops need none: each begins with an unmeasured
        // round (ping-pong, or broadcast and acknowledgement) that waits
        // out whatever i or the root still had to do, and only the path
        // from the root to i is timed — saving log P rounds per i.
        if !matches!(what, What::Ei(_) | What::Rtl(_)) {
            self.comm.barrier()?;
        }
        let before = self.comm.op_counts();
        let t0 = self.comm.now();
        ticks.push(t0);
        let per = match what {
            What::SendLatency => {
                for _ in 0..reps {
                    self.bcast(0)?;
                    self.stamp(ticks);
                }
                reps
            }
            What::Rounds { backward } => {
                for _ in 0..reps {
                    for k in 0..n {
                        self.bcast(if backward { n - 1 - k } else { k })?;
                    }
                    self.stamp(ticks);
                }
                reps * n as u64
            }
            What::Barrier(kind) => {
                for _ in 0..reps {
                    self.bcast(0)?;
                    self.barrier(kind)?;
                    self.stamp(ticks);
                }
                reps
            }
            What::Ack => {
                for _ in 0..reps {
                    self.bcast(0)?;
                    if me == 0 {
                        for _ in 1..n {
                            self.comm.recv(b, 0, 0, None, Some(TAG_ACK))?;
                        }
                    } else {
                        self.comm.send(b, 0, 0, 0, TAG_ACK)?;
                    }
                    self.stamp(ticks);
                }
                reps
            }
            What::Ei(i) => {
                // One unmeasured broadcast and acknowledgement first.
                for k in 0..=reps {
                    if k == 1 {
                        ticks.clear();
                        ticks.push(self.comm.now());
                    }
                    self.bcast(0)?;
                    if me == 0 {
                        self.comm.recv(b, 0, 0, Some(i), Some(TAG_ACK))?;
                    } else if me == i {
                        self.comm.send(b, 0, 0, 0, TAG_ACK)?;
                    }
                    if k > 0 {
                        self.stamp(ticks);
                    }
                }
                reps
            }
            What::Rtl(i) => {
                // One unmeasured round trip first: i may still be
                // forwarding an earlier broadcast, a NIC still injecting.
                for k in 0..=reps {
                    if k == 1 {
                        ticks.clear();
                        ticks.push(self.comm.now());
                    }
                    if me == 0 {
                        self.comm.send(b, 0, 0, i, TAG_PING)?;
                        self.comm.recv(b, 0, 0, Some(i), Some(TAG_PING))?;
                    } else if me == i {
                        self.comm.recv(b, 0, 0, Some(0), Some(TAG_PING))?;
                        self.comm.send(b, 0, 0, 0, TAG_PING)?;
                    }
                    if k > 0 {
                        self.stamp(ticks);
                    }
                }
                reps
            }
        };
        let first = ticks[0];
        let last = *ticks.last().unwrap_or(&first);
        let steady = ticks.len() >= 3 && {
            let d1 = ticks[2] - ticks[1];
            ticks.windows(2).skip(1).all(|w| w[1] - w[0] == d1)
        };
        let ops = self.comm.op_counts().since(&before);
        Ok((ns(self.comm, last - first) / per as f64, steady, ops))
    }

    /// Repeat `what` until its spread is small enough; every rank calls
    /// this, rank 0 decides. Returns (mean ns, measurements, stddev %,
    /// this rank's operations in the last measurement).
    fn repeat(
        &mut self,
        what: What,
        args: &Args,
        ticks: &mut Vec<u64>,
    ) -> anyhow::Result<(f64, usize, f64, OpCounts)> {
        let mut s = Series::default();
        loop {
            let (v, steady, ops) = self.once(what, args.reps, ticks)?;
            let stop = s.add(v, steady, args);
            let verdict = self.ctrl.bcast(self.comm, &[u64::from(stop)])?;
            if verdict.first().copied().unwrap_or(1) != 0 {
                return Ok((s.mean(), s.vals.len(), s.cv() * 100.0, ops));
            }
        }
    }

    /// RTL_i and E_i, each repeated until its own spread is small enough,
    /// with one verdict broadcast per round for both (a broadcast per
    /// figure would be a thirteenth of all OL_i messages). A round
    /// measures each figure that still needs it, RTL_i first; every
    /// measurement begins with its own unmeasured round, so interleaving
    /// them changes no figure. Returns (RTL_i, E_i) means and measurements.
    fn oli(
        &mut self,
        i: Rank,
        args: &Args,
        ticks: &mut Vec<u64>,
    ) -> anyhow::Result<(f64, usize, f64, usize)> {
        let (mut rtl, mut e) = (Series::default(), Series::default());
        let (mut more_rtl, mut more_e) = (true, true);
        while more_rtl || more_e {
            let mut stop = [1u64; 2];
            if more_rtl {
                let (v, steady, _) = self.once(What::Rtl(i), args.reps, ticks)?;
                stop[0] = u64::from(rtl.add(v, steady, args));
            }
            if more_e {
                let (v, steady, _) = self.once(What::Ei(i), args.reps, ticks)?;
                stop[1] = u64::from(e.add(v, steady, args));
            }
            let verdict = self.ctrl.bcast(self.comm, &stop)?;
            more_rtl = verdict.first().copied().unwrap_or(1) == 0;
            more_e = verdict.get(1).copied().unwrap_or(1) == 0;
        }
        Ok((rtl.mean(), rtl.vals.len(), e.mean(), e.vals.len()))
    }
}

/// One figure's measurements and the stop rule: the spread below
/// `--max-cv` between the fewest and most measurements, or a
/// deterministic system (see the module docs).
#[derive(Default)]
struct Series {
    vals: Vec<f64>,
}

impl Series {
    /// Add a measurement; true when no more are needed.
    fn add(&mut self, v: f64, steady: bool, args: &Args) -> bool {
        self.vals.push(v);
        let n = self.vals.len();
        (n == 1 && steady)
            || (n == 2 && self.vals[0] == self.vals[1])
            || (n >= args.min_measurements.max(2) && self.cv() < args.max_cv)
            || n >= args.max_measurements
    }

    fn mean(&self) -> f64 {
        mean(&self.vals)
    }

    /// Coefficient of variation (0 for a zero mean).
    fn cv(&self) -> f64 {
        let m = self.mean();
        if m > 0.0 {
            stddev(&self.vals) / m
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum What {
    SendLatency,
    Rounds { backward: bool },
    Barrier(BarrierKind),
    Ack,
    Ei(Rank),
    Rtl(Rank),
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
    if args.reps == 0 || args.max_measurements == 0 || args.min_measurements > args.max_measurements
    {
        bail!("--reps must be positive and --min-measurements at most --max-measurements");
    }
    let size = args.msgsize.bytes();
    let buf = comm.alloc(size.max(1))?;
    let ctrl = Ctrl::new(comm)?;
    let mut bc = Bc {
        comm,
        buf,
        size,
        alg: args.algorithm,
        ctrl,
    };
    let mut out = Output {
        algorithm: args.algorithm,
        size,
        reps: args.reps,
        ranks: n,
        figures: Vec::new(),
        oli: Vec::new(),
        max_ol_ns: None,
        max_ol_rank: None,
    };
    let mut ticks = Vec::with_capacity(args.reps as usize + 2);
    let title = format!(
        "{} broadcast of {size} B over {n} ranks, M = {}",
        format!("{:?}", args.algorithm).to_lowercase(),
        args.reps
    );
    let all = args.method == Method::All;
    let printer = bc.me() == 0;
    if args.algorithm == Algorithm::Flat && matches!(args.method, Method::Oli | Method::All) {
        sink.note("flat broadcast: the root's gap exceeds E_i for early ranks, breaking OL_i's assumption (reference §4); OL_i is shown but is no accuracy claim");
    }

    if all || args.method == Method::Oli {
        sink.table(
            &format!("OL_i, {title}"),
            &["i", "RTL_i[us]", "E_i[us]", "OL_i[us]", "measurements"],
        );
        for i in 1..n {
            let (rtl, n_rtl, e, n_e) = bc.oli(i, args, &mut ticks)?;
            let ol = e - rtl / 2.0;
            let measurements = n_rtl.max(n_e);
            // Only rank 0's sink prints: at 1024 ranks, formatting the
            // discarded rows elsewhere cost a twentieth of the run.
            if printer {
                sink.row(
                    &[
                        i.to_string(),
                        us(rtl),
                        us(e),
                        us(ol),
                        measurements.to_string(),
                    ],
                    serde_json::json!({
                        "rank": i, "size": size, "rtl_ns": rtl, "e_ns": e, "ol_ns": ol,
                        "measurements": measurements, "samples": measurements as u64 * args.reps,
                    }),
                );
            }
            out.oli.push(Oli {
                rank: i,
                rtl_ns: rtl,
                e_ns: e,
                ol_ns: ol,
                measurements,
            });
        }
        let max = out
            .oli
            .iter()
            .max_by(|a, b| a.ol_ns.total_cmp(&b.ol_ns))
            .map(|o| (o.ol_ns, o.rank));
        out.max_ol_ns = max.map(|m| m.0);
        out.max_ol_rank = max.map(|m| m.1);
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
        sink.table(&title, &["method", "time[us]", "measurements", "stddev(%)"]);
    }
    for (name, what) in plan {
        let (t, m, sd, ops) = bc.repeat(what, args, &mut ticks)?;
        sink.row(
            &[name.clone(), us(t), m.to_string(), format!("{sd:.2}")],
            serde_json::json!({
                "method": name, "size": size, "time_ns": t, "measurements": m,
                "stddev_pct": sd, "samples": m as u64 * args.reps, "ops": ops,
            }),
        );
        out.figures.push(Figure {
            method: name,
            time_ns: t,
            measurements: m,
            stddev_pct: sd,
            ops,
        });
    }
    if let (Some(ol), Some(rank)) = (out.max_ol_ns, out.max_ol_rank) {
        sink.row(
            &[
                "max OL_i".into(),
                us(ol),
                format!("i = {rank}"),
                String::new(),
            ],
            serde_json::json!({"method": "max-oli", "size": size, "time_ns": ol, "rank": rank}),
        );
        sink.summary(
            serde_json::json!({"max_OL_ns": ol, "max_OL_rank": rank}),
            &[format!("max OL_i = {} us (i = {rank})", us(ol))],
        );
    }
    bc.comm.barrier()?;
    Ok(out)
}

/// MPICH's binomial tree in relative ranks (the root is 0): the parent
/// of `vr` and its children, largest subtree first.
pub fn binomial_tree(vr: u32, n: u32) -> (Option<u32>, Vec<u32>) {
    let (parent, mut mask) = binomial_parent(vr, n);
    let mut children = Vec::new();
    while mask > 0 {
        if vr + mask < n {
            children.push(vr + mask);
        }
        mask >>= 1;
    }
    (parent, children)
}

/// The parent of `vr` in [`binomial_tree`] and the mask of its largest
/// possible child (children are `vr + mask` for it and each smaller power
/// of two, those below `n`).
fn binomial_parent(vr: u32, n: u32) -> (Option<u32>, u32) {
    let mut mask = 1u32;
    while mask < n {
        if vr & mask != 0 {
            return (Some(vr - mask), mask >> 1);
        }
        mask <<= 1;
    }
    (None, mask >> 1)
}

#[cfg(test)]
mod tests {
    use super::binomial_tree;

    #[test]
    fn binomial_is_mpich_order() {
        assert_eq!(binomial_tree(0, 8), (None, vec![4, 2, 1]));
        assert_eq!(binomial_tree(4, 8), (Some(0), vec![6, 5]));
        assert_eq!(binomial_tree(6, 8), (Some(4), vec![7]));
        assert_eq!(binomial_tree(7, 8), (Some(6), vec![]));
        assert_eq!(binomial_tree(0, 5), (None, vec![4, 2, 1]));
        assert_eq!(binomial_tree(2, 5), (Some(0), vec![3]));
        // Every non-root rank has exactly one parent that lists it.
        for n in 1..40u32 {
            for v in 1..n {
                let (p, _) = binomial_tree(v, n);
                let p = p.unwrap();
                assert!(binomial_tree(p, n).1.contains(&v), "n {n} v {v}");
            }
        }
    }
}
