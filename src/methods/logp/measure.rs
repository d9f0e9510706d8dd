//! Rank 0's measurements: g(m) by saturation, os/or/RTT per size with
//! logp_mpi.c's rounds (a discarded warm-up, then rounds of three until
//! the intervals are narrow or the cap is reached), k_max extension and
//! the non-linearity probes.

use std::collections::{BTreeMap, HashSet};

use ovbench_core::OpCounts;
use serde::Serialize;

use super::super::common::Verdict;
use super::peer::Peer;
use super::rules::{
    g_decrease, g_of, miss, sat_stop, train_gap, Figure, SatStep, MAX_RUNS, START_RUNS,
};
use super::Args;
use crate::output::us;
use crate::report::Sink;

/// Round trips of a warm-up round, discarded (logp_mpi.c, sizes ≤ 64 KiB).
const WARM_UP: u64 = 2;
/// Round trips per round (logp_mpi.c: its minimum iterations, 3).
const ROUND: usize = 3;
/// Where the ranks share CPUs the scheduler sets the spread, and more
/// repetitions do not narrow it: each figure stops after this many rounds.
pub(crate) const SHARED_ROUNDS: usize = 2;
/// Non-linearity probes per run, at most.
const MAX_PROBES: usize = 64;

/// Sizes logp_mpi.c counts as small (×4 repetitions) and as not big
/// (×2, and a warm-up round).
fn small(m: usize) -> bool {
    m <= 1024
}
fn big(m: usize) -> bool {
    m > 64 << 10
}

/// One size's parameters (ns), with intervals and repetition counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SizeResult {
    pub size: usize,
    pub os: Figure,
    pub or: Figure,
    pub rtt: Figure,
    pub g: Figure,
    /// Found by non-linearity probing.
    pub probed: bool,
    /// Measured beyond --max-size because g(m) was still decreasing.
    pub extended: bool,
    pub remarks: Vec<String>,
    /// Impossible figures (a negative os, or or g, L not positive).
    pub verdict: Verdict,
    /// The confidence rule was met; false where the repetitions stopped
    /// at `--max-its` with the interval still wider than 2·eps.
    pub converged: bool,
    /// Operations rank 0 posted for this size (control messages included).
    pub ops: OpCounts,
    /// The repetitions behind os, or and g (ns), kept for `ovbench
    /// compare`; g's are each RTT(m) repetition − RTT(0) + g(0), none
    /// where g comes from a saturation test (size 0, `--flood`).
    #[serde(skip)]
    pub reps: Repetitions,
}

/// One size's repetitions, per figure (ns).
#[derive(Debug, Clone, Default)]
pub struct Repetitions {
    pub os: Vec<f64>,
    pub or: Vec<f64>,
    pub g: Vec<f64>,
}

pub(crate) struct Measurer<'a, 'b> {
    pub p: Peer<'a>,
    pub args: &'b Args,
    /// The spin before a timed receive is never shorter than this.
    pub floor_ns: f64,
    /// RTT(0) and g(0), once measured.
    pub rtt0: Figure,
    pub g0: Figure,
    /// The ranks share CPUs ([`SHARED_ROUNDS`] caps the repetitions).
    pub shared: bool,
}

impl Measurer<'_, '_> {
    /// Most repetitions for size m: --max-its, ×4 up to 1 KiB, ×2 up to
    /// 64 KiB; no more than [`SHARED_ROUNDS`] rounds where ranks share CPUs.
    pub(crate) fn cap(&self, m: usize) -> usize {
        let cap = self.unshared_cap(m);
        if self.shared {
            cap.min(SHARED_ROUNDS * ROUND)
        } else {
            cap
        }
    }

    fn unshared_cap(&self, m: usize) -> usize {
        let f = if small(m) {
            4
        } else if !big(m) {
            2
        } else {
            1
        };
        (self.args.max_its * f).max(1)
    }

    /// g(m) by a synchronous saturation test: trains of 10, 20, 40 …
    /// messages, each followed by one acknowledgement, until
    /// [`sat_stop`] holds. The gap is (total − RTT)/(n − 1), RTT being
    /// the round trip of one message and the acknowledgement in the same
    /// mode; its half-width is the last doubling's change.
    pub(crate) fn saturation(&mut self, m: usize, sink: &mut dyn Sink) -> anyhow::Result<Figure> {
        let rtt = self.p.quick_rtt(m, if small(m) { 100 } else { 10 })?;
        let mut runs = START_RUNS;
        let mut prev: Option<SatStep> = None;
        loop {
            let total = self.p.train(m, runs)?;
            let now = SatStep {
                runs,
                total,
                gap: train_gap(total, rtt, runs),
            };
            if self.args.verbose {
                sink.note(&format!(
                    "g({m})/pipeline: runs = {runs}: tot_time {} RTT {} g_avg {} diff {}",
                    us(total, 3),
                    us(rtt, 3),
                    us(now.gap, 3),
                    prev.map_or("-".into(), |p| format!(
                        "{:+.1}%",
                        100.0 * (now.gap - p.gap) / p.gap
                    ))
                ));
            }
            if let Some(p) = prev {
                if sat_stop(p, now, rtt, self.args.eps, big(m)) {
                    if runs >= MAX_RUNS {
                        sink.note(&format!(
                            "g({m}): the saturation test stopped at its maximum of {MAX_RUNS} messages (last change {:+.1}%)",
                            100.0 * (now.gap - p.gap) / p.gap
                        ));
                    }
                    // deviation: g0-half-width — g(0)'s half-width is its last doubling's change, see docs/methods/logp.md
                    return Ok(Figure::around(
                        now.gap,
                        (now.gap - p.gap).abs(),
                        runs as usize,
                    ));
                }
            }
            prev = Some(now);
            runs *= 2;
        }
    }

    /// Rounds of `sample` (each one command to the mirror): a discarded
    /// warm-up round for sizes up to 64 KiB, then rounds of three until
    /// `done` or the cap; the samples, and whether `done` held (not only
    /// the cap).
    fn rounds(
        &mut self,
        m: usize,
        mut sample: impl FnMut(&mut Peer, u64, &mut Vec<f64>, &mut Vec<f64>) -> anyhow::Result<()>,
        done: impl Fn(&[f64], &[f64]) -> bool,
    ) -> anyhow::Result<(Vec<f64>, Vec<f64>, bool)> {
        let cap = self.cap(m);
        if !big(m) {
            sample(&mut self.p, WARM_UP, &mut Vec::new(), &mut Vec::new())?;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        loop {
            // deviation: rounds-capped — the last round is cut to the cap, not overshooting it, see docs/methods/logp.md
            let more = ROUND.min(cap - a.len()) as u64;
            sample(&mut self.p, more, &mut a, &mut b)?;
            let converged = done(&a, &b);
            if a.len() >= cap || converged {
                return Ok((a, b, converged));
            }
        }
    }

    /// os(m), or(m), RTT(m) and g(m) (g(0) is the saturation test's).
    pub(crate) fn measure(&mut self, m: usize, sink: &mut dyn Sink) -> anyhow::Result<SizeResult> {
        let (eps, lvl) = (self.args.eps, self.args.conf_int);
        let before = self.p.comm.op_counts();
        let (os, rtt, rtt_converged) = self.rounds(
            m,
            |p, n, os, rtt| p.rtt(m, n, os, rtt),
            |os, rtt| Figure::of(os, lvl).narrow(eps) && Figure::of(rtt, lvl).narrow(eps),
        )?;
        let rtt_reps = rtt;
        let rtt = Figure::of(&rtt_reps, lvl);
        let spin = (1.2 * rtt.mean).max(self.floor_ns);
        let (or, _, or_converged) = self.rounds(
            m,
            |p, n, or, _| p.or(m, n, spin, or),
            |or, _| Figure::of(or, lvl).narrow(eps),
        )?;
        let (os_reps, or_reps) = (os, or);
        let (os, or) = (Figure::of(&os_reps, lvl), Figure::of(&or_reps, lvl));
        let (g, g_reps) = if m == 0 {
            (self.g0, Vec::new())
        } else if self.args.flood {
            (self.saturation(m, sink)?, Vec::new())
        } else {
            // g(m) = RTT(m) − RTT(0) + g(0), taken per repetition of
            // RTT(m) with g_of's own shift.
            let g = g_of(&rtt, &self.rtt0, &self.g0);
            let shift = g.mean - rtt.mean;
            (g, rtt_reps.iter().map(|r| r + shift).collect())
        };
        // Only a clear excess is remarked, as logp_mpi.c does.
        let mut remarks = Vec::new();
        if os.mean > (1.0 + eps) * g.mean {
            remarks.push("os > g!".to_string());
        }
        if or.mean > (1.0 + eps) * g.mean {
            remarks.push("or > g!".to_string());
        }
        // deviation: no-clamp — impossible figures are flagged, not raised to 10 ns, see docs/methods/logp.md
        let mut verdict = Verdict::of(os.mean >= 0.0, || {
            format!("os({m}) = {} us < 0", us(os.mean, 3))
        });
        verdict
            .check(or.mean >= 0.0, || {
                format!("or({m}) = {} us < 0", us(or.mean, 3))
            })
            .check(g.mean > 0.0, || {
                format!("g({m}) = {} us is not positive", us(g.mean, 3))
            });
        Ok(SizeResult {
            size: m,
            os,
            or,
            rtt,
            g,
            probed: false,
            extended: false,
            remarks,
            verdict,
            converged: rtt_converged && or_converged,
            ops: self.p.comm.op_counts().since(&before),
            reps: Repetitions {
                os: os_reps,
                or: or_reps,
                g: g_reps,
            },
        })
    }
}

/// The next size beyond the largest measured, while g there is still
/// more than eps below the extrapolation from the two sizes before it
/// (logp_mpi.c's "g decreasing"), up to `limit`. Judged afresh from the
/// last three sizes every time: nothing carries over between steps.
pub(crate) fn next_k_max(
    results: &BTreeMap<usize, SizeResult>,
    eps: f64,
    limit: usize,
) -> Option<(usize, f64)> {
    let mut top3 = results.values().rev().take(3);
    let (c, b, a) = (top3.next()?, top3.next()?, top3.next()?);
    if c.size >= limit {
        return None;
    }
    let d = g_decrease((a.size, a.g.mean), (b.size, b.g.mean), (c.size, c.g.mean));
    (d > eps).then_some(((2 * c.size).clamp(1, limit), d))
}

/// Probe at (m2 + m)/2 wherever size m misses the extrapolation from the
/// two sizes below it by more than max-diff, until the sizes are close.
pub(crate) fn probe_nonlinear(
    ms: &mut Measurer,
    results: &mut BTreeMap<usize, SizeResult>,
    sink: &mut dyn Sink,
    mut emit: impl FnMut(&SizeResult, &mut dyn Sink),
) -> anyhow::Result<()> {
    let (eps, max_diff) = (ms.args.eps, ms.args.max_diff);
    let mut reported = HashSet::new();
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
                    off.push(format!("{name} {} ({:+.1}%)", us(v, 3), d * 100.0));
                }
            }
            if off.is_empty() {
                continue;
            }
            if reported.insert(c.size) {
                sink.note(&format!("+ {:>7}: {}", c.size, off.join(" ")));
            }
            let close = (c.size - b.size) as f64 <= (32.0f64).max(eps * b.size as f64);
            // deviation: probe-midpoint — probe at (m2 + m)/2, not rounded to a multiple of 4, see docs/methods/logp.md
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
        emit(&r, sink);
        results.insert(mid, r);
    }
    sink.note(&format!("stopped probing after {MAX_PROBES} probes"));
    Ok(())
}
