//! Every method runs to completion on a threaded in-memory communicator
//! (tests/common_methods): the ranks agree on the message sequence, rows
//! reach rank 0's sink with as many cells as columns, and the figures are
//! finite and ordered where the method says they must be. Accuracy
//! against closed forms is tests/methods_sim.rs.

mod common_methods;

use common_methods::{method_args, run_mock};
use ovbench::methods::{bcast, logp, overhead};

#[test]
fn overhead_send_and_recv_on_two_and_four_ranks() {
    for (np, recv) in [(2, false), (2, true), (4, false)] {
        let mut a = vec!["--sizes", "0,1K", "--iterations", "20"];
        if recv {
            a.push("--recv");
        }
        let args: overhead::Args = method_args(&a);
        let (out, sink) = run_mock(np, move |c, s| overhead::run(c, &args, s));
        assert_eq!(out.sizes.len(), 2);
        assert_eq!(sink.rows.len(), 2);
        for r in &out.sizes {
            assert!(r.iter_ns > 1.5 * r.base_ns, "{r:?}");
            assert!(r.work_ns > 0.0 && r.base_ns > 0.0);
            assert!(r.steps.len() >= 2);
            assert!(r.avail_pct.is_finite());
        }
        assert_eq!(sink.rows[1].1["size"], 1024);
    }
}

#[test]
fn overhead_rejects_odd_rank_counts() {
    let args: overhead::Args = method_args(&[]);
    let r = std::panic::catch_unwind(|| run_mock(3, move |c, s| overhead::run(c, &args, s)));
    assert!(r.is_err(), "3 ranks must be refused");
}

#[test]
fn logp_runs_and_reports_every_size() {
    let args: logp::Args = method_args(&[
        "--max-size",
        "4K",
        "--max-its",
        "3",
        "--eps",
        "0.5",
        "--max-diff",
        "10",
    ]);
    let (out, sink) = run_mock(2, move |c, s| logp::run(c, &args, s));
    let sizes: Vec<usize> = out.sizes.iter().map(|r| r.size).collect();
    assert_eq!(sizes[..3], [0, 1, 2]);
    assert!(sizes.contains(&4096));
    for r in &out.sizes {
        assert!(r.os.samples >= 2 && r.os.samples <= 12, "{r:?}");
        assert!(r.rtt.mean > 0.0 && r.os.mean > 0.0 && r.or.mean > 0.0);
        assert!(r.rtt.lo <= r.rtt.mean && r.rtt.mean <= r.rtt.hi);
    }
    assert!(out.g0_ns > 0.0 && out.g0_messages >= 20);
    assert!((out.l_raw_ns - (out.rtt0_ns / 2.0 - out.g0_ns)).abs() < 1e-6);
    assert_eq!(sink.summaries.len(), 1);
    let l = &sink.summaries[0]["L_ns"];
    assert!(l.is_number() || sink.summaries[0]["L_reason"].is_string());
    assert!(sink.summaries[0]["G_ns_per_byte"].is_number());
    assert_eq!(sink.rows.len(), out.sizes.len());
}

#[test]
fn logp_modes_run() {
    for (s, r) in [("isend", "irecv"), ("ssend", "recv")] {
        let args: logp::Args = method_args(&[
            "--max-size",
            "64",
            "--max-its",
            "2",
            "--eps",
            "0.5",
            "--max-diff",
            "10",
            "--send-mode",
            s,
            "--recv-mode",
            r,
        ]);
        let (out, _) = run_mock(3, move |c, s| logp::run(c, &args, s));
        // Every power of two up to --max-size (real-time noise may extend
        // k_max beyond it).
        for m in [0, 1, 2, 4, 8, 16, 32, 64] {
            assert!(out.sizes.iter().any(|r| r.size == m), "{m} missing");
        }
    }
}

#[test]
fn bcast_all_methods_every_algorithm() {
    for alg in ["binomial", "linear", "backward", "flat"] {
        for barrier in ["dissemination", "ring"] {
            let args: bcast::Args = method_args(&[
                "--method",
                "all",
                "--algorithm",
                alg,
                "--barrier",
                barrier,
                "--reps",
                "5",
                "--min-measurements",
                "2",
                "--max-measurements",
                "3",
            ]);
            let (out, sink) = run_mock(5, move |c, s| bcast::run(c, &args, s));
            assert_eq!(out.oli.len(), 4);
            let names: Vec<&str> = out.figures.iter().map(|f| f.method.as_str()).collect();
            assert_eq!(
                names,
                [
                    "send-latency",
                    "rounds-forward",
                    "rounds-backward",
                    &format!("barrier-{barrier}"),
                    "ack"
                ]
            );
            for f in &out.figures {
                assert!(
                    f.time_ns > 0.0 && (1..=3).contains(&f.measurements),
                    "{f:?}"
                );
            }
            // Threads on shared cores: whether a row may be overstated is
            // the schedule's doing, but max OL_i comes from a row that
            // counts, or is flagged where none does.
            let counted: Vec<_> = out.oli.iter().filter(|o| o.in_max).collect();
            let rank = out.max_ol_rank.expect("a max OL_i");
            let valid = out.max_ol_verdict.as_ref().is_some_and(|v| v.valid());
            assert!(counted.iter().any(|o| o.rank == rank) || (counted.is_empty() && !valid));
            // 5 per-processor rows, 4 OL_i rows, 5 method rows, the max row.
            assert_eq!(sink.rows.len(), 15);
            assert_eq!(out.per_processor.len(), 5);
            assert!(out.oli.iter().all(|o| o.path.is_some()));
        }
    }
}

#[test]
fn bcast_needs_three_ranks() {
    let args: bcast::Args = method_args(&[]);
    let r = std::panic::catch_unwind(|| run_mock(2, move |c, s| bcast::run(c, &args, s)));
    assert!(r.is_err());
}

#[test]
fn commtest_every_protocol_swap_and_sendrecv() {
    use ovbench::methods::commtest;
    // (ranks, exchange, reorganized, all pairs, ranks taking part)
    for (np, ex, reorg, all, taking_part) in [
        (2, "swap", false, false, 2),
        (2, "swap", true, false, 2),
        (4, "swap", false, true, 4),
        (4, "swap", false, false, 2),
        (3, "sendrecv", false, true, 3),
        // distance 1: one cycle through every rank.
        (4, "sendrecv", true, false, 4),
    ] {
        let mut a = vec![
            "--total",
            "16K",
            "--min-packet",
            "4K",
            "--iterations",
            "2",
            "--exchange",
            ex,
        ];
        if reorg {
            a.push("--reorganized");
        }
        if all {
            a.push("--all-pairs");
        }
        let args: commtest::Args = method_args(&a);
        let (out, sink) = run_mock(np, move |c, s| commtest::run(c, &args, s));
        // 20 protocols ((1,6) left out) × packet counts 1, 2, 4.
        assert_eq!(out.rows.len(), 20 * 3, "{ex} reorganized {reorg}");
        assert_eq!(sink.rows.len(), out.rows.len());
        for r in &out.rows {
            let undefined = reorg && (r.protocol.starts_with("(1,") || r.protocol == "(0,6)");
            assert_eq!(r.time_ns.is_none(), undefined, "{r:?}");
            if let Some(t) = r.time_ns {
                assert!(t > 0.0 && r.mean_ns.unwrap() >= t);
            }
        }
        assert_eq!(out.participants.len(), taking_part);
    }
}
