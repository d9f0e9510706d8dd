//! The timed loops of the five methods and of the per-processor o_i and
//! g_i, and the stop rule: repeat until the standard deviation is below
//! `--max-cv` of the mean (8–30 measurements), a deterministic system
//! stopping early. A figure that never reaches the cutoff is measured a
//! second time, as the reference re-ran such tests, and flagged if the
//! second series misses it too.

use ovbench_core::{Buf, Communicator, OpCounts, Rank, Tag};

use super::algo;
use super::{Algorithm, Args, BarrierKind};
use crate::methods::common::{mean, ns, stddev, Ctrl};

const TAG_ACK: Tag = 0x4f56_0303;
const TAG_PING: Tag = 0x4f56_0304;
const TAG_STREAM: Tag = 0x4f56_0305;

/// What one measurement times.
#[derive(Debug, Clone, Copy)]
pub(super) enum What {
    SendLatency,
    Rounds { backward: bool },
    Barrier(BarrierKind),
    Ack,
    Ei(Rank),
    Rtl(Rank),
}

/// A figure's series of measurements, summarised.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Measured {
    pub mean: f64,
    pub measurements: usize,
    pub stddev_pct: f64,
    /// Whether the series met the cutoff (or the system is deterministic).
    pub converged: bool,
    /// Series measured: 1, or 2 when the first missed the cutoff.
    pub tries: usize,
}

#[cfg(test)]
impl Measured {
    /// A settled series of 8 measurements with mean `mean` (unit tests).
    pub(super) fn fine(mean: f64) -> Measured {
        Measured {
            mean,
            measurements: 8,
            stddev_pct: 1.0,
            converged: true,
            tries: 1,
        }
    }
}

pub(super) struct Bc<'a> {
    pub comm: &'a mut dyn Communicator,
    pub buf: Buf,
    pub size: usize,
    pub alg: Algorithm,
    pub ctrl: Ctrl,
    /// The root's per-repetition stamps of the measurement under way,
    /// allocated once for M repetitions.
    pub ticks: Vec<u64>,
    /// This rank shares its CPU (rank 0's view decides every stop).
    pub shared: bool,
}

impl Bc<'_> {
    pub fn me(&self) -> Rank {
        self.comm.rank()
    }
    fn np(&self) -> Rank {
        self.comm.size()
    }

    fn bcast(&mut self, root: Rank) -> anyhow::Result<()> {
        algo::bcast(self.comm, self.alg, self.buf, self.size, root)
    }

    /// The root's clock after a repetition. The other ranks read none:
    /// the reference times at the root alone, and their figures are
    /// discarded.
    fn stamp(&mut self) {
        if self.me() == 0 {
            self.ticks.push(self.comm.now());
        }
    }

    /// `round` once unmeasured, then `reps` times each stamped: the
    /// first round waits out what was still in flight, and the stamps
    /// start after it.
    fn after_one_unmeasured(
        &mut self,
        reps: u64,
        mut round: impl FnMut(&mut Self) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        round(self)?;
        self.ticks.clear();
        self.ticks.push(self.comm.now());
        for _ in 0..reps {
            round(self)?;
            self.stamp();
        }
        Ok(())
    }

    /// One measurement of a method at the root (ns per broadcast, or E_i
    /// for `Ei`), whether its repetitions after the first were all
    /// identical, and the operations this rank posted in it.
    pub fn once(&mut self, what: What, reps: u64) -> anyhow::Result<(f64, bool, OpCounts)> {
        let (me, n, b) = (self.me(), self.np(), self.buf);
        self.ticks.clear();
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
        self.ticks.push(t0);
        let per = match what {
            What::SendLatency => {
                for _ in 0..reps {
                    self.bcast(0)?;
                    self.stamp();
                }
                reps
            }
            What::Rounds { backward } => {
                for _ in 0..reps {
                    for k in 0..n {
                        self.bcast(if backward { n - 1 - k } else { k })?;
                    }
                    self.stamp();
                }
                reps * n as u64
            }
            What::Barrier(kind) => {
                for _ in 0..reps {
                    self.bcast(0)?;
                    algo::barrier(self.comm, kind, b)?;
                    self.stamp();
                }
                reps
            }
            What::Ack => {
                for _ in 0..reps {
                    self.bcast(0)?;
                    self.ack_all()?;
                    self.stamp();
                }
                reps
            }
            What::Ei(i) => {
                // A broadcast and i's acknowledgement.
                self.after_one_unmeasured(reps, |m| {
                    m.bcast(0)?;
                    if me == 0 {
                        m.comm.recv(b.first(0), Some(i), Some(TAG_ACK))?;
                    } else if me == i {
                        m.comm.send(b.first(0), 0, TAG_ACK)?;
                    }
                    Ok(())
                })?;
                reps
            }
            What::Rtl(i) => {
                // A round trip between the root and i (the unmeasured
                // one: i may still be forwarding an earlier broadcast, a
                // NIC still injecting).
                self.after_one_unmeasured(reps, |m| {
                    if me == 0 {
                        m.comm.send(b.first(0), i, TAG_PING)?;
                        m.comm.recv(b.first(0), Some(i), Some(TAG_PING))?;
                    } else if me == i {
                        m.comm.recv(b.first(0), Some(0), Some(TAG_PING))?;
                        m.comm.send(b.first(0), 0, TAG_PING)?;
                    }
                    Ok(())
                })?;
                reps
            }
        };
        let ticks = &self.ticks;
        let first = ticks[0];
        let last = *ticks.last().unwrap_or(&first);
        let steady = ticks.len() >= 3 && {
            let d1 = ticks[2] - ticks[1];
            ticks.windows(2).skip(1).all(|w| w[1] - w[0] == d1)
        };
        let ops = self.comm.op_counts().since(&before);
        Ok((ns(self.comm, last - first) / per as f64, steady, ops))
    }

    /// Every rank acknowledges to the root, which takes them in any order.
    fn ack_all(&mut self) -> anyhow::Result<()> {
        let b = self.buf;
        if self.me() == 0 {
            for _ in 1..self.np() {
                self.comm.recv(b.first(0), None, Some(TAG_ACK))?;
            }
        } else {
            self.comm.send(b.first(0), 0, TAG_ACK)?;
        }
        Ok(())
    }

    /// Repeat `what` until its spread is small enough, and once more from
    /// scratch if it never was; every rank calls this, rank 0 decides.
    /// Returns the figure, its measurements (ns each, for `ovbench
    /// compare`) and this rank's operations in the last measurement.
    pub fn repeat(
        &mut self,
        what: What,
        args: &Args,
    ) -> anyhow::Result<(Measured, Vec<f64>, OpCounts)> {
        self.until_settled(|me, tries| {
            let mut s = Series::default();
            let ops = loop {
                let (v, steady, ops) = me.once(what, args.reps)?;
                let stop = s.add(v, steady, args, me.cap(args));
                if me.rank0_says(stop)? {
                    break ops;
                }
            };
            let m = s.measured(args, tries);
            Ok((m.converged, (m, s.vals, ops)))
        })
    }

    /// Run `series` (handed its try number) until rank 0 calls its result
    /// final (see [`Self::settled`]), and return that result. `series`
    /// says whether all its figures converged.
    fn until_settled<T>(
        &mut self,
        mut series: impl FnMut(&mut Self, usize) -> anyhow::Result<(bool, T)>,
    ) -> anyhow::Result<T> {
        let mut tries = 0;
        loop {
            tries += 1;
            let (converged, result) = series(self, tries)?;
            if self.settled(converged, tries)? {
                return Ok(result);
            }
        }
    }

    /// Whether rank 0's series is final: it converged, or this was its
    /// second try, or its ranks share CPUs (a second series would chase
    /// the same unreachable cutoff). Every rank learns rank 0's answer.
    fn settled(&mut self, converged: bool, tries: usize) -> anyhow::Result<bool> {
        // deviation: second-series-then-flag — one more series, then flagged, see docs/methods/bcast.md
        self.rank0_says(converged || tries >= 2 || self.shared)
    }

    /// The most measurements a series takes: `--max-measurements`, or
    /// where the ranks share CPUs `--min-measurements`: the scheduler's
    /// delays, not the broadcast, then set the spread, and more
    /// measurements would not bring it under the cutoff.
    fn cap(&self, args: &Args) -> usize {
        if self.shared {
            args.min_measurements.max(2).min(args.max_measurements)
        } else {
            args.max_measurements
        }
    }

    /// Rank 0's `yes`, learnt by every rank (the others' is not used).
    fn rank0_says(&mut self, yes: bool) -> anyhow::Result<bool> {
        let w = self.ctrl.bcast(self.comm, &[u64::from(yes)])?;
        Ok(w.first().copied().unwrap_or(1) != 0)
    }

    /// RTL_i and E_i, each repeated until its own spread is small enough,
    /// with one verdict broadcast per round for both (a broadcast per
    /// figure would be a thirteenth of all OL_i messages). A round
    /// measures each figure that still needs it, RTL_i first; every
    /// measurement begins with its own unmeasured round, so interleaving
    /// them changes no figure. Both are measured again, once, when either
    /// missed the cutoff. Returns (RTL_i, E_i).
    pub fn oli(&mut self, i: Rank, args: &Args) -> anyhow::Result<(Measured, Measured)> {
        self.until_settled(|me, tries| {
            let (mut rtl, mut e) = (Series::default(), Series::default());
            let (mut more_rtl, mut more_e) = (true, true);
            while more_rtl || more_e {
                let mut stop = [1u64; 2];
                if more_rtl {
                    let (v, steady, _) = me.once(What::Rtl(i), args.reps)?;
                    stop[0] = u64::from(rtl.add(v, steady, args, me.cap(args)));
                }
                if more_e {
                    let (v, steady, _) = me.once(What::Ei(i), args.reps)?;
                    stop[1] = u64::from(e.add(v, steady, args, me.cap(args)));
                }
                let verdict = me.ctrl.bcast(me.comm, &stop)?;
                more_rtl = verdict.first().copied().unwrap_or(1) == 0;
                more_e = verdict.get(1).copied().unwrap_or(1) == 0;
            }
            let (r, e) = (rtl.measured(args, tries), e.measured(args, tries));
            Ok((r.converged && e.converged, (r, e)))
        })
    }

    /// The 0-byte message gap between the root and i: `reps` + 1 messages
    /// sent back to back each way, timed by the receiver from the first
    /// to the last; the larger period of the two directions reaches the
    /// root (0 elsewhere). A ping-pong first, so each receiver waits in
    /// its receive before the stream starts and times arrivals, not a
    /// queue of messages already there.
    pub fn stream_gap(&mut self, i: Rank, reps: u64) -> anyhow::Result<f64> {
        let (me, b) = (self.me(), self.buf.first(0));
        if me != 0 && me != i {
            return Ok(0.0);
        }
        let peer = if me == 0 { i } else { 0 };
        let receive = |this: &mut Self| -> anyhow::Result<f64> {
            this.comm.recv(b, Some(peer), Some(TAG_STREAM))?;
            let t0 = this.comm.now();
            for _ in 0..reps {
                this.comm.recv(b, Some(peer), Some(TAG_STREAM))?;
            }
            Ok(ns(this.comm, this.comm.now() - t0) / reps as f64)
        };
        let send = |this: &mut Self| -> anyhow::Result<()> {
            for _ in 0..=reps {
                this.comm.send(b, peer, TAG_STREAM)?;
            }
            Ok(())
        };
        if me == 0 {
            self.comm.send(b, i, TAG_PING)?;
            self.comm.recv(b, Some(i), Some(TAG_PING))?;
            send(self)?;
            let theirs = self.ctrl.recv(self.comm, i)?;
            let theirs = f64::from_bits(theirs.first().copied().unwrap_or(0));
            self.comm.send(b, i, TAG_PING)?;
            let mine = receive(self)?;
            Ok(mine.max(theirs))
        } else {
            self.comm.recv(b, Some(0), Some(TAG_PING))?;
            self.comm.send(b, 0, TAG_PING)?;
            let mine = receive(self)?;
            self.ctrl.send(self.comm, 0, &[mine.to_bits()])?;
            self.comm.recv(b, Some(0), Some(TAG_PING))?;
            send(self)?;
            Ok(0.0)
        }
    }

    /// The per-processor figures of the reference's §2, at every rank:
    /// o_i, the time i spends in one broadcast call once its data is there
    /// (a rank at depth k of the tree waits k·`delay_ns` after a barrier
    /// before the call, so only sending and receiving is timed), and g_i, the interval between
    /// successive broadcasts at i in a loop of M. Repeated by the stop
    /// rule (rank 0 decides on all ranks' series), re-measured once when
    /// a rank's series misses the cutoff. Rank 0 gets (o_i, g_i) of every
    /// rank; the others get empty lists.
    pub fn per_processor(
        &mut self,
        args: &Args,
        delay_ns: f64,
    ) -> anyhow::Result<(Vec<Option<Measured>>, Vec<Measured>)> {
        let (me, n) = (self.me(), self.np() as usize);
        // o_i needs i's depth: under the library's broadcast only the
        // root's is known (0), so only its o_0 is measured.
        let known = |alg: Algorithm, r: usize| alg != Algorithm::Library || r == 0;
        let alg = self.alg;
        let (om, gm) = self.until_settled(|this, tries| {
            let mut o = vec![Series::default(); n];
            let mut g = vec![Series::default(); n];
            loop {
                let (my_o, my_g) = this.per_processor_once(args.reps, delay_ns)?;
                let os = this.ctrl.gather(this.comm, my_o)?;
                let gs = this.ctrl.gather(this.comm, my_g)?;
                let mut stop = true;
                if let (Some(os), Some(gs)) = (os, gs) {
                    let cap = this.cap(args);
                    for r in 0..n {
                        // Timed at each rank by its own clock: no
                        // repetition-level stamps, so never "steady".
                        if known(alg, r) {
                            stop &= o[r].add(os[r], false, args, cap);
                        }
                        stop &= g[r].add(gs[r], false, args, cap);
                    }
                }
                if this.rank0_says(stop)? {
                    break;
                }
            }
            let om: Vec<Option<Measured>> = (0..n)
                .map(|r| known(alg, r).then(|| o[r].measured(args, tries)))
                .collect();
            let gm: Vec<Measured> = g.iter().map(|s| s.measured(args, tries)).collect();
            let all = om.iter().flatten().chain(&gm).all(|m| m.converged);
            Ok((all, (om, gm)))
        })?;
        if me != 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        Ok((om, gm))
    }

    /// One measurement of this rank's (o_i, g_i) in ns.
    fn per_processor_once(&mut self, reps: u64, delay_ns: f64) -> anyhow::Result<(f64, f64)> {
        // A rank at depth k enters k delays after the barrier: its
        // parent, at depth k−1, forwards only once inside its own call.
        // Every rank then waits out the deepest rank's call before the
        // next barrier, whose messages would otherwise reach a slow rank
        // inside its timed call and cost it a receive there.
        let (me, n) = (self.me(), self.np());
        let (depth, deepest) = if self.alg == Algorithm::Library {
            (0, 0)
        } else {
            (
                algo::path(self.alg, 0, me, n).len() - 1,
                algo::height(self.alg, n),
            )
        };
        let span = delay_ns * (deepest + 1) as f64;
        let mut inside = 0u64;
        for _ in 0..reps {
            self.comm.barrier()?;
            let start = self.comm.now();
            if depth > 0 {
                self.comm.delay(delay_ns * depth as f64);
            }
            let t = self.comm.now();
            self.bcast(0)?;
            let t1 = self.comm.now();
            inside += t1 - t;
            let left = span - ns(self.comm, t1 - start);
            if left > 0.0 {
                self.comm.delay(left);
            }
        }
        let o = ns(self.comm, inside) / reps as f64;
        self.comm.barrier()?;
        // One unmeasured broadcast: a rank's loop starts when its data
        // first arrives, not at the barrier.
        self.bcast(0)?;
        let t0 = self.comm.now();
        for _ in 0..reps {
            self.bcast(0)?;
        }
        let g = ns(self.comm, self.comm.now() - t0) / reps as f64;
        Ok((o, g))
    }

    /// How long a rank must wait after a barrier for a broadcast's data to
    /// have surely arrived: twice one broadcast acknowledged by all, timed
    /// at the root, plus 1 µs. Every rank gets the same figure.
    pub fn settle_delay(&mut self) -> anyhow::Result<f64> {
        self.comm.barrier()?;
        let t = self.comm.now();
        self.bcast(0)?;
        self.ack_all()?;
        // deviation: oi-settle-delay — o_i's settle delay, ovbench's own, see docs/methods/bcast.md
        let d = 2.0 * ns(self.comm, self.comm.now() - t) + 1000.0;
        let w = self.ctrl.bcast(self.comm, &[d.to_bits()])?;
        Ok(f64::from_bits(w.first().copied().unwrap_or(0)))
    }
}

/// One figure's measurements and the stop rule: the spread below
/// `--max-cv` between the fewest and most measurements, or a
/// deterministic system (one measurement whose repetitions after the
/// first all took the same ticks, or two that agree to the tick).
#[derive(Default, Clone)]
pub(super) struct Series {
    vals: Vec<f64>,
    deterministic: bool,
}

impl Series {
    /// Add a measurement; true when no more are needed (at most `cap`).
    pub fn add(&mut self, v: f64, steady: bool, args: &Args, cap: usize) -> bool {
        self.vals.push(v);
        let n = self.vals.len();
        // deviation: deterministic-stop — a repeatable system stops early, see docs/methods/bcast.md
        self.deterministic |= (n == 1 && steady) || (n == 2 && self.vals[0] == self.vals[1]);
        self.met(args) || n >= cap
    }

    /// Whether the series met the cutoff.
    fn met(&self, args: &Args) -> bool {
        self.deterministic
            || (self.vals.len() >= args.min_measurements.max(2) && self.cv() < args.max_cv)
    }

    fn measured(&self, args: &Args, tries: usize) -> Measured {
        Measured {
            mean: mean(&self.vals),
            measurements: self.vals.len(),
            stddev_pct: self.cv() * 100.0,
            converged: self.met(args),
            tries,
        }
    }

    /// Coefficient of variation (0 for a zero mean).
    fn cv(&self) -> f64 {
        let m = mean(&self.vals);
        if m > 0.0 {
            stddev(&self.vals) / m
        } else {
            0.0
        }
    }
}
