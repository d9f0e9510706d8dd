//! What OL_i = E_i − RTL_i/2 rests on, checked per destination i: the
//! paper's assumption (E_i above every gap on i's path), and two things
//! that make OL_i larger than i's operation latency — an acknowledgement
//! that queues behind i's own forwards, and a ping-pong paced by the gap
//! instead of the round trip. A row overstated either way stays out of
//! max OL_i.

use ovbench_core::Rank;
use serde::Serialize;

use super::measure::Measured;
use super::{missed, Args, PerProcessor};
use crate::methods::common::Verdict;
use crate::output::us;

/// A forwarding rank's c_i·g_i above this share of its OL_i flags the row:
/// its acknowledgement may have waited that long behind its own forwards.
pub(super) const FORWARD_LIMIT: f64 = 0.05;

/// A 0-byte message gap between the root and i at or above this share of
/// RTL_i flags the row: the ping-pong may be paced by the gap.
pub(super) const GAP_BOUND: f64 = 0.95;

/// OL_i's assumption (E_i > g_j for every j on i's path) at one i.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assumption {
    Holds,
    /// E_i ≤ g_j of rank `rank` on i's path.
    Violated {
        rank: Rank,
        g_ns: f64,
    },
    /// The path is not known (a broadcast that is not ovbench's own) and
    /// some rank's gap is at least E_i, so whether it lies on i's path
    /// cannot be told.
    NotChecked,
}

/// Whether OL_i's assumption holds at `i`: E_i above every gap on its
/// path (the root's included, i's own too: its forwarding sends come
/// before its acknowledgement). Without a path, E_i above every rank's
/// gap still proves it.
// deviation: assumption-checked — E_i > g_j checked on i's path, see docs/methods/bcast.md
pub(super) fn assumption(e_ns: f64, path: Option<&[Rank]>, gaps: &[PerProcessor]) -> Assumption {
    let on_path = |p: &&PerProcessor| path.map_or(true, |path| path.contains(&p.rank));
    match gaps.iter().filter(on_path).find(|p| e_ns <= p.g_ns) {
        None => Assumption::Holds,
        Some(_) if path.is_none() => Assumption::NotChecked,
        Some(p) => Assumption::Violated {
            rank: p.rank,
            g_ns: p.g_ns,
        },
    }
}

/// What may make one OL_i larger than i's operation latency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Overstatement {
    /// i's children in the tree (`None`: not known).
    pub children: Option<usize>,
    /// i's gap g_i.
    pub g_ns: f64,
    /// The 0-byte message gap between the root and i, the larger of the
    /// two directions.
    pub gap0_ns: f64,
}

impl Overstatement {
    /// c_i·g_i: at most this long may i's acknowledgement wait behind its
    /// own forwards (`None`: i's children are not known).
    pub(super) fn forward_ns(&self) -> Option<f64> {
        self.children.map(|c| c as f64 * self.g_ns)
    }

    /// The reasons OL_i may be overstated (empty: it is not).
    pub(super) fn reasons(&self, ol_ns: f64, rtl_ns: f64) -> Vec<String> {
        let mut why = Vec::new();
        if let (Some(c), Some(f)) = (self.children, self.forward_ns()) {
            if c > 0 && f > FORWARD_LIMIT * ol_ns {
                why.push(format!(
                    "i forwards to {c} rank{} before it acknowledges: c_i·g_i = {} us is over {:.0}% of OL_i = {} us, so OL_i may be overstated by up to that",
                    if c == 1 { "" } else { "s" },
                    us(f, 3),
                    FORWARD_LIMIT * 100.0,
                    us(ol_ns, 3)
                ));
            }
        }
        if self.gap0_ns >= GAP_BOUND * rtl_ns {
            why.push(format!(
                "the 0-byte message gap between the root and i, {} us, is not below the round trip RTL_i = {} us: the ping-pong is paced by the gap, so RTL_i/2 is not the acknowledgement's latency",
                us(self.gap0_ns, 3),
                us(rtl_ns, 3)
            ));
        }
        why
    }
}

/// Why an OL_i is no result: negative (the acknowledgement took longer
/// than RTL_i/2: an assumption of the method fails), E_i ≤ g_j on i's
/// path, overstated (`overstated`), or RTL_i or E_i missing the cutoff.
pub(super) fn oli_verdict(
    ol: f64,
    assumption: &Assumption,
    overstated: &[String],
    (rtl, e): (&Measured, &Measured),
    args: &Args,
) -> Verdict {
    let mut v = Verdict::default();
    v.check(ol >= 0.0, || {
        "OL_i < 0: a violated assumption (the acknowledgement took more than RTL_i/2)".into()
    });
    if let Assumption::Violated { rank, g_ns } = assumption {
        v.check(false, || {
            format!(
                "E_i = {} us ≤ g_{rank} = {} us on i's path: OL_i's assumption fails",
                us(e.mean, 3),
                us(*g_ns, 3)
            )
        });
    }
    for why in overstated {
        v.check(false, || why.clone());
    }
    v.check(rtl.converged && e.converged, || {
        format!(
            "stddev {:.2}% (RTL_i), {:.2}% (E_i) of the mean, {} (cutoff {:.2}%)",
            rtl.stddev_pct,
            e.stddev_pct,
            missed(rtl.tries.max(e.tries)),
            args.max_cv * 100.0
        )
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn impossible_and_unsupported_figures_are_flagged() {
        let args = Args::defaults();
        let v = |ol, a: &Assumption, over: &[String], rtl, e| {
            oli_verdict(
                ol,
                a,
                over,
                (&Measured::fine(rtl), &Measured::fine(e)),
                &args,
            )
        };
        assert!(v(10.0, &Assumption::Holds, &[], 4.0, 12.0).valid());
        let neg = v(-1.0, &Assumption::Holds, &[], 30.0, 14.0);
        assert!(!neg.valid() && neg.reason().contains("OL_i < 0"), "{neg:?}");
        let gap = Assumption::Violated {
            rank: 0,
            g_ns: 20.0,
        };
        let g = v(10.0, &gap, &[], 4.0, 12.0);
        assert!(!g.valid() && g.reason().contains("g_0"), "{g:?}");
        let over = v(10.0, &Assumption::Holds, &["queued".into()], 4.0, 12.0);
        assert!(
            !over.valid() && over.reason().contains("queued"),
            "{over:?}"
        );
        let unsure = Measured {
            converged: false,
            ..Measured::fine(12.0)
        };
        let u = oli_verdict(
            10.0,
            &Assumption::Holds,
            &[],
            (&Measured::fine(4.0), &unsure),
            &args,
        );
        assert!(!u.valid());
    }

    fn gaps(g: &[f64]) -> Vec<PerProcessor> {
        g.iter()
            .enumerate()
            .map(|(r, &g)| PerProcessor {
                rank: r as Rank,
                children: Some(0),
                o_ns: Some(0.0),
                g_ns: g,
                o_stddev_pct: Some(0.0),
                g_stddev_pct: 0.0,
                measurements: 1,
                verdict: Verdict::default(),
            })
            .collect()
    }

    #[test]
    fn assumption_is_checked_on_the_path_or_against_every_gap() {
        let gaps = gaps(&[5.0, 1.0, 9.0]);
        assert_eq!(assumption(6.0, Some(&[0, 1]), &gaps), Assumption::Holds);
        assert_eq!(
            assumption(6.0, Some(&[0, 2]), &gaps),
            Assumption::Violated { rank: 2, g_ns: 9.0 }
        );
        // No path: above every gap proves it; otherwise it is unknown.
        assert_eq!(assumption(10.0, None, &gaps), Assumption::Holds);
        assert_eq!(assumption(6.0, None, &gaps), Assumption::NotChecked);
    }

    #[test]
    fn forwards_and_a_gap_bound_ping_pong_overstate() {
        let at = |children| Overstatement {
            children,
            g_ns: 3.0,
            gap0_ns: 1.0,
        };
        // c_i·g_i = 6 against 5 % of OL_i: over at 100, not at 200.
        assert_eq!(at(Some(2)).reasons(100.0, 50.0).len(), 1);
        assert!(at(Some(2)).reasons(200.0, 50.0).is_empty());
        // A leaf, or unknown children, cannot be said to queue.
        assert!(at(Some(0)).reasons(100.0, 50.0).is_empty());
        assert!(at(None).reasons(100.0, 50.0).is_empty());
        let paced = Overstatement {
            gap0_ns: 30.0,
            ..at(None)
        };
        let why = paced.reasons(100.0, 30.0);
        assert!(
            why.len() == 1 && why[0].contains("paced by the gap"),
            "{why:?}"
        );
        assert!(paced.reasons(100.0, 40.0).is_empty());
    }
}
