//! The methods' accuracy under the deterministic sim, against the closed
//! forms of DESIGN.md § The sim model (written out here, not computed by
//! running sim code). Defaults: L = 1 µs, o_s = o_r = 300 ns, g = 500 ns,
//! G = 0.1 ns/B, offload, progress=poll.
#![cfg(feature = "sim")]

mod common_methods;

use clap::Parser;
use common_methods::MemSink;
use ovbench::methods::{bcast, commtest, logp, overhead, overlap, MethodCommand};
use ovbench_core::engine_comm::{EngineComm, EngineConfig};
use ovbench_core::Communicator;
use ovbench_sim::SimParams;

const L: f64 = 1000.0;
const OS: f64 = 300.0;
const OR: f64 = 300.0;
const G: f64 = 500.0;
const G_BYTE: f64 = 0.1;

#[derive(Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    cmd: MethodCommand,
}

fn parse(args: &[&str]) -> MethodCommand {
    let mut v = vec!["ovbench"];
    v.extend_from_slice(args);
    Cli::try_parse_from(v).expect("arguments parse").cmd
}

/// Run `f` on `np` simulated ranks over the engine; rank 0's result and sink.
fn sim<R: Send>(
    np: u32,
    params: &str,
    cfg: EngineConfig,
    f: impl Fn(&mut dyn Communicator, &mut MemSink) -> anyhow::Result<R> + Sync,
) -> (R, MemSink) {
    let params = SimParams::parse(params).expect("sim parameters");
    let (mut out, _truth) = ovbench_sim::run_raw(np, &params, |kit| {
        let mut comm = EngineComm::new(
            Box::new(kit.transport),
            kit.clock,
            Box::new(kit.work),
            cfg.clone(),
        )
        .expect("engine communicator");
        let mut sink = MemSink::default();
        let r = f(&mut comm, &mut sink);
        (r, sink)
    })
    .expect("simulation");
    let (r, sink) = out.swap_remove(0);
    (r.expect("rank 0"), sink)
}

fn within(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

#[test]
fn overhead_is_o_s_and_with_recv_o_r() {
    for (recv, want) in [(false, OS), (true, OR)] {
        let mut a = vec!["overhead", "--msgsize", "8", "--iterations", "50"];
        if recv {
            a.push("--recv");
        }
        let MethodCommand::Overhead(args) = parse(&a) else {
            panic!()
        };
        let (out, _) = sim(2, "", EngineConfig::default(), |c, s| {
            overhead::run(c, &args, s)
        });
        let r = &out.sizes[0];
        assert!(
            within(r.overhead_ns, want, 0.02),
            "recv {recv}: overhead {} ns, truth {want} ns ({r:?})",
            r.overhead_ns
        );
        assert!(r.avail_pct > 0.0 && r.avail_pct < 100.0);
    }
}

#[test]
fn overhead_tracks_the_sim_parameters() {
    // o_s ≠ o_r, and g above both: each direction still finds its own.
    for (recv, want) in [(false, 1000.0), (true, 700.0)] {
        let mut a = vec!["overhead", "--iterations", "20"];
        if recv {
            a.push("--recv");
        }
        let MethodCommand::Overhead(args) = parse(&a) else {
            panic!()
        };
        let (out, _) = sim(
            2,
            "os=1us,or=700ns,g=2us",
            EngineConfig::default(),
            |c, s| overhead::run(c, &args, s),
        );
        let r = &out.sizes[0];
        assert!(within(r.overhead_ns, want, 0.02), "recv {recv}: {r:?}");
    }
}

fn logp_args(extra: &[&str]) -> logp::Args {
    let mut a = vec!["logp"];
    a.extend_from_slice(extra);
    let MethodCommand::Logp(args) = parse(&a) else {
        panic!()
    };
    args
}

#[test]
fn logp_small_message_parameters() {
    let args = logp_args(&["--max-size", "1K"]);
    let (out, sink) = sim(2, "", EngineConfig::default(), |c, s| {
        logp::run(c, &args, s)
    });
    let r0 = &out.sizes[0];
    assert_eq!(r0.size, 0);
    let g0 = OS.max(G).max(OR);
    assert!(within(r0.os.mean, OS, 0.02), "os(0) {:?}", r0.os);
    assert!(within(r0.or.mean, OR, 0.02), "or(0) {:?}", r0.or);
    assert!(within(out.g0_ns, g0, 0.02), "g(0) {}", out.g0_ns);
    let rtt0 = 2.0 * (OS + L + OR);
    assert!(within(out.rtt0_ns, rtt0, 0.02), "RTT(0) {}", out.rtt0_ns);
    let l_logp = rtt0 / 2.0 - g0;
    let l = out.l_ns.expect("L known");
    assert!(within(l, l_logp, 0.02), "L {l}");
    // The estimate rightly differs from the wire latency.
    assert!((l - L).abs() > 0.05 * L, "L_logp {l} vs wire {L}");
    // Without jitter the repetitions stop after the first round of
    // three (the warm-up round discarded).
    assert!(out
        .sizes
        .iter()
        .all(|r| r.os.samples == 3 && r.or.samples == 3));
    // Linear eager sizes: no probes, no remarks.
    assert!(
        out.sizes.iter().all(|r| !r.probed && r.remarks.is_empty()),
        "{:?}",
        out.sizes
    );
    // g(m) = g(0) + m·G.
    let r1k = out.sizes.iter().find(|r| r.size == 1024).unwrap();
    assert!(
        within(r1k.g.mean, g0 + 1024.0 * G_BYTE, 0.02),
        "{:?}",
        r1k.g
    );
    assert!(
        within(out.g_ns_per_byte, G_BYTE, 0.05),
        "G {}",
        out.g_ns_per_byte
    );
    assert_eq!(sink.summaries[0]["L_ns"].as_f64(), out.l_ns);
    assert_eq!(out.k_max, 1024);
}

#[test]
fn logp_os_above_g_at_rendezvous_and_probes_the_eager_limit() {
    let args = logp_args(&["--max-size", "16K"]);
    let cfg = EngineConfig {
        eager_limit: 4096,
        ..EngineConfig::default()
    };
    let (out, sink) = sim(2, "", cfg, |c, s| logp::run(c, &args, s));
    let rdv: Vec<_> = out.sizes.iter().filter(|r| r.size > 4096).collect();
    assert!(!rdv.is_empty());
    for r in &rdv {
        assert!(
            r.remarks.iter().any(|m| m == "os > g!"),
            "size {}: os {} g {} {:?}",
            r.size,
            r.os.mean,
            r.g.mean,
            r.remarks
        );
    }
    assert!(
        out.sizes
            .iter()
            .any(|r| r.probed && r.size > 4096 && r.size < 8192),
        "no probe between 4K and 8K: {:?}",
        out.sizes
            .iter()
            .map(|r| (r.size, r.probed))
            .collect::<Vec<_>>()
    );
    assert!(sink.notes.iter().any(|n| n.starts_with("+ ")));
}

#[test]
fn logp_with_jitter_repeats_more_within_the_caps() {
    let args = logp_args(&["--max-size", "64", "--eps", "0.01"]);
    let (out, _) = sim(2, "jitter=400ns,seed=7", EngineConfig::default(), |c, s| {
        logp::run(c, &args, s)
    });
    assert!(out
        .sizes
        .iter()
        .any(|r| r.os.samples > 3 || r.or.samples > 3));
    assert!(out
        .sizes
        .iter()
        .all(|r| r.os.samples <= 72 && r.or.samples <= 72));
}

fn bcast_args(extra: &[&str]) -> bcast::Args {
    let mut a = vec!["bcast"];
    a.extend_from_slice(extra);
    let MethodCommand::Bcast(args) = parse(&a) else {
        panic!()
    };
    args
}

/// When each rank's receive of a binomial broadcast completes (root at
/// 0): a parent that has the data at `t` posts its k-th send at
/// t + (k+1)·o_s, its NIC injects no sooner than max(g, m·G) after the
/// previous injection, the data lands L + m·G after injection starts and
/// costs the child o_r.
fn binomial_arrivals(np: u32, m: f64) -> Vec<f64> {
    let mut at = vec![f64::NAN; np as usize];
    at[0] = 0.0;
    let mut order = vec![0u32];
    let mut k = 0;
    while k < order.len() {
        let v = order[k];
        k += 1;
        let (_, kids) = bcast::binomial_tree(v, np);
        let t = at[v as usize];
        let mut nic = f64::NEG_INFINITY;
        for (j, c) in kids.into_iter().enumerate() {
            let post = t + (j as f64 + 1.0) * OS;
            let inject = post.max(nic + G.max(m * G_BYTE));
            nic = inject;
            at[c as usize] = inject + L + m * G_BYTE + OR;
            order.push(c);
        }
    }
    at
}

#[test]
fn bcast_max_oli_matches_linear_and_binomial_closed_forms() {
    let m = 8.0;
    for np in [4u32, 7, 16, 64] {
        let h = OS + L + m * G_BYTE + OR;
        let args = bcast_args(&["--algorithm", "linear", "--reps", "4", "--msgsize", "8"]);
        let (out, _) = sim(np, "", EngineConfig::default(), |c, s| {
            bcast::run(c, &args, s)
        });
        let want = (np - 1) as f64 * h;
        let got = out.max_ol_ns.unwrap();
        assert!(within(got, want, 0.02), "linear np {np}: {got} vs {want}");
        assert_eq!(out.max_ol_rank, Some(np - 1));
        assert!(out.oli.iter().all(|o| o.measurements <= 2), "{:?}", out.oli);

        let args = bcast_args(&["--reps", "4", "--msgsize", "8"]);
        let (out, _) = sim(np, "", EngineConfig::default(), |c, s| {
            bcast::run(c, &args, s)
        });
        let want = binomial_arrivals(np, m).into_iter().fold(0.0, f64::max);
        let got = out.max_ol_ns.unwrap();
        assert!(within(got, want, 0.02), "binomial np {np}: {got} vs {want}");
    }
}

#[test]
fn bcast_methods_bracket_oli() {
    for alg in ["binomial", "linear", "backward"] {
        let args = bcast_args(&["--method", "all", "--algorithm", alg, "--reps", "5"]);
        let (out, _) = sim(8, "", EngineConfig::default(), |c, s| {
            bcast::run(c, &args, s)
        });
        let fig = |name: &str| {
            out.figures
                .iter()
                .find(|f| f.method.starts_with(name))
                .unwrap()
                .time_ns
        };
        let ol = out.max_ol_ns.unwrap();
        let rounds = fig("rounds-forward").min(fig("rounds-backward"));
        assert!(rounds <= ol * 1.001, "{alg}: rounds {rounds} > OL {ol}");
        assert!(
            fig("barrier") >= ol,
            "{alg}: barrier {} < OL {ol}",
            fig("barrier")
        );
        assert!(fig("ack") >= ol, "{alg}: ack {} < OL {ol}", fig("ack"));
        assert!(
            out.figures.iter().all(|f| f.measurements <= 2),
            "{:?}",
            out.figures
        );
        // The root's sends per broadcast: its children in the tree.
        let sl = out
            .figures
            .iter()
            .find(|f| f.method == "send-latency")
            .unwrap();
        let root_children = if alg == "binomial" { 3 } else { 1 };
        assert_eq!(sl.ops.sends, 5 * root_children, "{alg}: {:?}", sl.ops);
        if alg == "linear" {
            // The reference's Figure 4: rounds in the opposite order of a
            // linear broadcast measure OL (up to the M rounds' end effect);
            // in the same order they pipeline.
            assert!(
                within(fig("rounds-backward"), ol, 0.05),
                "{:?}",
                out.figures
            );
            assert!(fig("rounds-forward") < ol / 2.0, "{:?}", out.figures);
        }
    }
}

#[test]
fn bcast_with_jitter_repeats_within_the_caps() {
    let args = bcast_args(&["--method", "ack", "--reps", "5"]);
    let (out, _) = sim(4, "jitter=300ns,seed=3", EngineConfig::default(), |c, s| {
        bcast::run(c, &args, s)
    });
    let f = &out.figures[0];
    assert!(f.measurements > 2 && f.measurements <= 30, "{f:?}");
}

#[test]
fn commtest_ssend_costs_one_acknowledgement_more() {
    let MethodCommand::Commtest(args) = parse(&[
        "commtest",
        "--total",
        "4K",
        "--min-packet",
        "1K",
        "--iterations",
        "2",
    ]) else {
        panic!()
    };
    let (out, _) = sim(2, "", EngineConfig::default(), |c, s| {
        commtest::run(c, &args, s)
    });
    let row = |p: &str, k: usize| {
        out.rows
            .iter()
            .find(|r| r.protocol == p && r.packets == k)
            .unwrap()
    };
    for (ssend, send) in [
        ("(0,8)", "(0,2)"),
        ("(0,9)", "(0,3)"),
        ("(1,10)", "(1,0)"),
        ("(1,8)", "(1,2)"),
    ] {
        for k in [1, 2, 4] {
            let (a, b) = (row(ssend, k), row(send, k));
            // Rank 0 acknowledges each synchronous packet it receives.
            assert_eq!(
                a.ops.sends,
                b.ops.sends + k as u64,
                "{ssend} vs {send}, {k} packets"
            );
            assert!(
                a.time_ns.unwrap() > b.time_ns.unwrap(),
                "{ssend} vs {send}, {k}"
            );
        }
    }
}

/// One overlap run with `table` (`SIZE NS` lines) as xfer_time.
fn overlap_once(
    proto: ovbench_core::engine_comm::Protocol,
    pair: &str,
    size: &str,
    table: &str,
) -> (overlap::Output, ovbench_sim::SimReport) {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "ovbench-xfer-{}-{n}-{pair}-{size}-{proto:?}",
        std::process::id()
    ));
    std::fs::write(&path, table).unwrap();
    let p = path.to_str().unwrap().to_string();
    let MethodCommand::Overlap(args) = parse(&[
        "overlap",
        "--pair",
        pair,
        "--sizes",
        size,
        "--iters",
        "4",
        "--xfer-table",
        &p,
    ]) else {
        panic!()
    };
    let cfg = EngineConfig {
        protocol: proto,
        ..EngineConfig::default()
    };
    let params = SimParams::parse("").unwrap();
    let (mut outs, truth) = ovbench_sim::run_raw(2, &params, |kit| {
        let mut comm = EngineComm::new(
            Box::new(kit.transport),
            kit.clock,
            Box::new(kit.work),
            cfg.clone(),
        )
        .expect("engine communicator");
        overlap::run(&mut comm, &args, &mut MemSink::default())
    })
    .expect("simulation");
    std::fs::remove_file(&path).ok();
    (outs.swap_remove(0).expect("rank 0"), truth)
}

/// xfer_time measured beforehand on the same transport, as DESIGN.md
/// asks: a first run's data operations (post to completion at the
/// initiator, as the simulator saw them), the median per size, written as
/// the table of the measured run. The first run's own table is the model's
/// closed form o_s + 2L + m·G (request and data each one L away).
fn overlap_run(
    proto: ovbench_core::engine_comm::Protocol,
    pair: &str,
    size: &str,
) -> (overlap::Output, ovbench_sim::SimReport) {
    let m: f64 = match size {
        "10K" => 10240.0,
        "1M" => 1048576.0,
        _ => unreachable!(),
    };
    let first = format!("{} {}\n", m as u64, OS + 2.0 * L + m * G_BYTE);
    let (_, truth) = overlap_once(proto, pair, size, &first);
    let mut by_size: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for op in truth.ranks.iter().flat_map(|t| t.ops.iter()) {
        if let (true, Some(c)) = (op.is_data() && op.bytes >= 1024, op.complete_ps) {
            by_size.entry(op.bytes).or_default().push(c - op.post_ps);
        }
    }
    // The whole message's time sets the computation steps; pipelined
    // moves fragments only, so its size keeps the closed form.
    by_size
        .entry(m as u64)
        .or_insert_with(|| vec![((OS + 2.0 * L + m * G_BYTE) * 1000.0) as u64]);
    let table: String = by_size
        .into_iter()
        .map(|(b, mut d)| {
            d.sort_unstable();
            format!("{b} {}\n", d[d.len() / 2] as f64 / 1000.0)
        })
        .collect();
    overlap_once(proto, pair, size, &table)
}

/// The true overlap seen by `rank` in a step: every data operation of
/// either side posted in the step's window, intersected with `rank`'s
/// computation (for rdma-read the sender's transfer is the receiver's
/// read). Picoseconds; the window's ticks are picoseconds without skew.
fn transfer_overlap(truth: &ovbench_sim::SimReport, rank: u32, side: &overlap::Side) -> f64 {
    let me = &truth.ranks[rank as usize];
    truth
        .ranks
        .iter()
        .flat_map(|t| t.ops_posted_in(side.start_ticks, side.end_ticks))
        .filter(|op| op.is_data())
        .map(|op| {
            op.complete_ps
                .map_or(0, |c| me.compute_within(op.post_ps, c)) as f64
        })
        .sum()
}

#[test]
fn overlap_bounds_bracket_the_true_overlap_in_every_step() {
    use ovbench_core::engine_comm::Protocol;
    for proto in [
        Protocol::Eager,
        Protocol::RdmaRead,
        Protocol::RdmaWrite,
        Protocol::Pipelined,
    ] {
        for pair in ["isend-recv", "send-irecv", "isend-irecv"] {
            let size = if proto == Protocol::Eager {
                "10K"
            } else {
                "1M"
            };
            let (out, truth) = overlap_run(proto, pair, size);
            assert_eq!(out.steps.len(), 17);
            for st in &out.steps {
                for (rank, side) in [(0, &st.sender), (1, &st.receiver)] {
                    let t = transfer_overlap(&truth, rank, side) / 1000.0;
                    let tol = 1.0 + 0.005 * side.data_transfer_ns;
                    assert!(
                        side.min_overlap_ns <= t + tol && t <= side.max_overlap_ns + tol,
                        "{proto:?} {pair} step {} rank {rank}: truth {t} not in [{}, {}]",
                        st.step,
                        side.min_overlap_ns,
                        side.max_overlap_ns
                    );
                }
            }
        }
    }
}

#[test]
fn overlap_shapes_of_the_paper() {
    use ovbench_core::engine_comm::Protocol;
    // Max overlap % over the transfers whose BEGIN and END were both
    // seen: a one-sided transfer (case 3) carries max = xfer, data = xfer
    // and says nothing about the shape.
    let pct = |s: &overlap::Side| {
        let xfer = s.data_transfer_ns / s.transfers.max(1) as f64;
        let data = s.data_transfer_ns - s.one_sided as f64 * xfer;
        let max = s.max_overlap_ns - s.one_sided as f64 * xfer;
        if data > 0.0 {
            100.0 * max / data
        } else {
            0.0
        }
    };
    // Isend-Recv: pipelined sender flat (first fragment only), rdma-read
    // with offload reaches full overlap.
    let (pipe, _) = overlap_run(Protocol::Pipelined, "isend-recv", "1M");
    let last = pct(&pipe.steps[16].sender);
    let mid = pct(&pipe.steps[8].sender);
    assert!(
        last < 50.0 && (last - mid).abs() < 5.0,
        "pipelined sender {mid} → {last}"
    );
    let (read, _) = overlap_run(Protocol::RdmaRead, "isend-recv", "1M");
    assert!(
        pct(&read.steps[16].sender) > 95.0,
        "{:?}",
        read.steps[16].sender
    );
    assert!(
        pct(&read.steps[0].sender) < 5.0,
        "{:?}",
        read.steps[0].sender
    );
    // Send-Irecv with polling progress: no receiver overlap for rdma-read
    // and rdma-write; pipelined overlaps its first fragment.
    for proto in [Protocol::RdmaRead, Protocol::RdmaWrite] {
        let (o, _) = overlap_run(proto, "send-irecv", "1M");
        for st in &o.steps {
            assert!(
                pct(&st.receiver) < 1.0,
                "{proto:?} step {}: {:?}",
                st.step,
                st.receiver
            );
        }
    }
    let (pipe, _) = overlap_run(Protocol::Pipelined, "send-irecv", "1M");
    // Its first fragment is eager: the receiver sees only its arrival
    // (case 3, max = xfer of the fragment) — that is the overlap it has.
    let rs = &pipe.steps[16].receiver;
    let r = 100.0 * rs.max_overlap_ns / rs.data_transfer_ns;
    assert!(r > 0.0 && r < 50.0, "pipelined receiver {r}");
    // Eager: within [0, xfer].
    let (eager, _) = overlap_run(Protocol::Eager, "isend-irecv", "10K");
    for st in &eager.steps {
        for s in [&st.sender, &st.receiver] {
            assert!(s.min_overlap_ns >= 0.0 && s.max_overlap_ns <= s.data_transfer_ns + 1e-6);
        }
    }
    // The wait time falls as computation hides the rdma-read transfer.
    assert!(read.steps[16].sender.wait_ns < read.steps[0].sender.wait_ns);
}

#[test]
fn commtest_global_clock_sees_through_skew_and_drift() {
    let MethodCommand::Commtest(args) = parse(&[
        "commtest",
        "--total",
        "8K",
        "--min-packet",
        "4K",
        "--iterations",
        "2",
        "--protocol",
        "1,0",
        "--protocol",
        "0,3",
        "--global-clock",
    ]) else {
        panic!()
    };
    // Rank 1's clock reads 50 µs ahead of rank 0's and gains 1 ms per second.
    let (out, sink) = sim(
        2,
        "skew.1=50us,drift.1=0.001",
        EngineConfig::default(),
        |c, s| commtest::run(c, &args, s),
    );
    assert_eq!(out.rows.len(), 4);
    for r in &out.rows {
        let (g, t) = (r.global_ns.unwrap(), r.time_ns.unwrap());
        // Both ranks start together after the barrier: first begin to last
        // end is the slowest rank's time (as its own clock, 0.1% fast,
        // reads it), give or take the barrier's skew of one message
        // (o_s + L + o_r) — not the 50 µs between the clocks.
        assert!(g >= t * (1.0 - 0.002) - 1.0, "{r:?}");
        assert!(g <= t + OS + L + OR + 1.0, "{r:?}");
    }
    assert_eq!(sink.tables[0].1.last().unwrap(), "global[us]");
}

#[test]
fn logp_flood_measures_g_m_by_saturation() {
    // Flooded, the per-message gap at every size is the NIC's injection
    // spacing max(g, m·G) (o_s and o_r are below g): 500 ns up to 4K,
    // m·G beyond — not the round-trip formula g(0) + m·G.
    let args = logp_args(&["--max-size", "8K", "--flood", "--max-diff", "10"]);
    let (out, _) = sim(2, "", EngineConfig::default(), |c, s| {
        logp::run(c, &args, s)
    });
    for r in out.sizes.iter().filter(|r| r.size > 0) {
        let want = G.max(r.size as f64 * G_BYTE).max(OS).max(OR);
        assert!(
            within(r.g.mean, want, 0.02),
            "size {}: g {} vs {want}",
            r.size,
            r.g.mean
        );
    }
}

#[test]
fn overlap_measures_raw_xfer_time_and_writes_the_table() {
    use ovbench_core::engine_comm::{Protocol, RawOp};
    for op in [RawOp::Read, RawOp::Write, RawOp::Send] {
        static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("ovbench-rawxfer-{}-{n}-{op:?}", std::process::id()));
        let p = path.to_str().unwrap().to_string();
        // A raw send moves at most one bounce buffer: 10K for it.
        let sizes = if op == RawOp::Send { "10K" } else { "10K,1M" };
        let MethodCommand::Overlap(args) = parse(&[
            "overlap",
            "--sizes",
            sizes,
            "--xfer-reps",
            "5",
            "--write-xfer-table",
            &p,
        ]) else {
            panic!()
        };
        let cfg = EngineConfig {
            protocol: Protocol::Raw(op),
            ..EngineConfig::default()
        };
        let (out, _) = sim(2, "", cfg, |c, s| overlap::run(c, &args, s));
        assert!(out.steps.is_empty());
        let text = std::fs::read_to_string(&path).expect("table written");
        std::fs::remove_file(&path).ok();
        let table = ovbench_core::XferTable::parse(&text).expect("a table --xfer-table reads");
        assert_eq!(table.points(), &out.xfer_table[..]);
        for &(m, t) in table.points() {
            // Post to completion at the performing side: o_s + 2L + m·G.
            let want = OS + 2.0 * L + m as f64 * G_BYTE;
            assert!(within(t, want, 0.02), "{op:?} {m} B: {t} vs {want}");
        }
    }
}

#[test]
fn logp_with_a_large_min_size_still_reports_size_zero() {
    let args = logp_args(&["--min-size", "64K", "--max-size", "128K"]);
    let (out, _) = sim(2, "", EngineConfig::default(), |c, s| {
        logp::run(c, &args, s)
    });
    let sizes: Vec<usize> = out
        .sizes
        .iter()
        .filter(|r| !r.probed)
        .map(|r| r.size)
        .collect();
    // g(128K) lies below the line from g(0) through g(64K) (the
    // rendezvous step at 16K lifts g(64K) above g(0) + m·G), so k_max
    // goes on to 256K, where g is on the line through 64K and 128K.
    assert_eq!(sizes, [0, 65536, 131072, 262144]);
    assert_eq!(out.k_max, 262144);
    assert!(out.sizes.last().unwrap().extended);
    assert!(within(
        out.l_ns.expect("L known"),
        2.0 * (OS + L + OR) / 2.0 - G,
        0.02
    ));
}
