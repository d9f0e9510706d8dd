//! commtest's start skew under the deterministic sim: the skew it prints
//! against the instants the sim records (true time, whatever each rank's
//! clock reads), and which rows the 5% rule flags.
#![cfg(feature = "sim")]

mod common_methods;
mod sim_truth;

use common_methods::{method_args, MemSink};
use ovbench::methods::commtest;
use ovbench_core::engine_comm::EngineConfig;
use ovbench_sim::SimParams;

/// Rank 0's rows and notes of a commtest run on 2 simulated ranks, with
/// the sim's truth.
fn run(params: &str, args: &[&str]) -> (commtest::Output, MemSink, ovbench_sim::SimReport) {
    let args: commtest::Args = method_args(args);
    let p = SimParams::parse(params).expect("sim parameters");
    let (mut out, truth) = ovbench_sim::run(2, &p, &EngineConfig::default(), |comm| {
        let mut sink = MemSink::default();
        commtest::run(comm, &args, &mut sink).map(|o| (o, sink))
    })
    .expect("simulation");
    let (o, sink) = out.swap_remove(0).expect("rank 0");
    (o, sink, truth)
}

/// The truth behind commtest's skew: where an unordered protocol's first
/// call sends, or posts a receive (free in the sim) before it sends, the
/// rank's first data send of an iteration is posted the instant it starts
/// timing; the sim records that instant in true time, whatever the
/// rank's clock (`skew.1`, `drift.1`) reads.
#[test]
fn commtest_skew_is_the_sims_start_skew() {
    use ovbench_core::OpKind;
    use sim_truth::{Draw, LogGp};
    let seed = sim_truth::seed(0x5e);
    let mut d = Draw::new(seed);
    let mut sets = vec![("L=250us".to_string(), 250_000.0)];
    for _ in 0..3 {
        // Long wires (L 100–500 µs), the rest from the ranges.
        let p = LogGp {
            l_ps: d.between(100_000_000, 500_000_000),
            os_ps: d.between(50_000, 2_000_000),
            or_ps: d.between(50_000, 2_000_000),
            g_ps: d.between(100_000, 3_000_000),
            big_g_fs: d.between(10_000, 1_000_000),
        };
        sets.push((p.sim_arg(), p.l()));
    }
    for (set, l) in &sets {
        for start in ["barrier", "sync"] {
            let args = [
                "--total",
                "64",
                "--min-packet",
                "64",
                "--iterations",
                "1",
                "--protocol",
                "0,0",
                "--protocol",
                "0,1",
                "--protocol",
                "0,2",
                "--protocol",
                "0,3",
                "--start",
                start,
            ];
            // Rank 1's clock 37 µs ahead and 3 ppm fast: the sync must see through it.
            let params = format!("{set},skew.1=37us,drift.1=3ppm");
            let (out, _, truth) = run(&params, &args);
            let posts = |r: usize| -> Vec<f64> {
                truth.ranks[r]
                    .ops
                    .iter()
                    .filter(|o| o.kind == OpKind::Send && o.bytes == 64)
                    .map(|o| o.post_ps as f64 / 1000.0)
                    .collect()
            };
            let (a, b) = (posts(0), posts(1));
            assert_eq!((a.len(), b.len()), (4, 4), "{params}: one packet a row");
            for (i, r) in out.rows.iter().enumerate() {
                let true_skew = (b[i] - a[i]).abs();
                let (s, e) = (r.skew_ns.unwrap(), r.skew_error_ns.unwrap());
                let what = format!(
                    "seed {seed}, --sim {params} --start {start}: {r:?}, true skew {true_skew} ns"
                );
                eprintln!(
                    "--sim {params} --start {start} {}: skew {s:.4} ± {e:.4} ns, true {true_skew:.4} ns, time {:.3} ns, {}",
                    r.protocol,
                    r.time_ns.unwrap(),
                    r.flag
                );
                assert!((s - true_skew).abs() <= e, "{what}");
                // Small against the figures: the flag sees the skew, not the sync.
                assert!(e < 1e-4 * l, "{what}");
                if start == "barrier" {
                    assert!(true_skew > 0.5 * l, "{what}");
                    assert_eq!(r.flag, "skewed", "{what}");
                } else {
                    assert!(true_skew <= e + 1e-3, "{what}");
                    assert_eq!(r.flag, "ok", "{what}");
                }
            }
        }
    }
}

#[test]
fn commtest_rows_at_20ns_are_not_skewed() {
    // The barrier's exits still differ by about L, but 20 ns is a few
    // percent of the fastest row (o_s + L + p·G + o_r, over 600 ns), and
    // the sync's error, with a symmetric path, next to nothing.
    let args = ["--total", "4K", "--min-packet", "1K", "--iterations", "2"];
    let (out, sink, _) = run("L=20ns", &args);
    assert_eq!(out.rows.len(), 20 * 3);
    for r in &out.rows {
        let (s, e) = (r.skew_ns.unwrap(), r.skew_error_ns.unwrap());
        assert!(s > 0.0 && s <= 40.0 && e < 0.01, "{r:?}");
        assert_eq!(r.flag, "ok", "{r:?}");
    }
    assert!(
        !sink.notes.iter().any(|n| n.contains(": skewed:")),
        "{:?}",
        sink.notes
    );
}
