//! The overlap bounds against the simulator's truth (the overlap paper's
//! §2.2 bounds, by Shet, Sadayappan, Bernholdt, Nieplocha and Tipparaju:
//! "Characterization of Computation-Communication Overlap in
//! Message-Passing Systems"). The truth of a transfer is the length of
//! [its data operation's post, its completion] ∩ the rank's computation,
//! which only the simulator knows; the bounds come from the command's
//! entry point, run in-process on simulated ranks, read from its JSON
//! rows. Nothing else is taken from the methods.
//!
//! Over seeded LogGP draws, each protocol × offload × progress × call
//! pair: the bounds bracket the truth in every step; where the stamped
//! interval is the transfer itself (offload on or a progress thread, on
//! the side that performs the data operation) the width max − min is at
//! most 10 % of xfer_time (25 % pipelined) in every step whose
//! computation keeps the NIC from queueing transfers behind each other.
#![cfg(feature = "sim")]

mod common_methods;
mod sim_truth;

use clap::Parser;
use common_methods::MemSink;
use ovbench::methods::{run_method, MethodCommand};
use ovbench_core::engine_comm::{EngineComm, EngineConfig, Protocol};
use ovbench_sim::{SimParams, SimReport};
use sim_truth::{draw, seed, Draw, LogGp};

#[derive(Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    cmd: MethodCommand,
}

struct Run {
    rows: Vec<serde_json::Value>,
    truth: SimReport,
}

fn overlap(p: &LogGp, extra: &str, proto: Protocol, pair: &str, size: &str) -> Run {
    let cmd = Cli::try_parse_from([
        "ovbench",
        "overlap",
        "--pair",
        pair,
        "--sizes",
        size,
        "--iters",
        "4",
        "--steps",
        "6",
        "--xfer-reps",
        "5",
    ])
    .expect("arguments")
    .cmd;
    let params = SimParams::parse(&format!("{},{extra}", p.sim_arg())).expect("sim parameters");
    let cfg = EngineConfig {
        protocol: proto,
        ..EngineConfig::default()
    };
    let (mut outs, truth) = ovbench_sim::run_raw(2, &params, |kit| {
        let mut comm = EngineComm::new(
            Box::new(kit.transport),
            kit.clock,
            Box::new(kit.work),
            cfg.clone(),
        )
        .expect("engine communicator");
        let mut sink = MemSink::default();
        run_method(&cmd, &mut comm, &mut sink).map(|_| sink)
    })
    .expect("simulation");
    let sink = outs.swap_remove(0).expect("rank 0");
    let rows = sink
        .rows
        .into_iter()
        .map(|(_, j)| j)
        .filter(|j| j.get("step").is_some())
        .collect();
    Run { rows, truth }
}

/// Picoseconds of `rank`'s computation inside the data operations of
/// either rank posted in the side's step window (for rdma-read the
/// sender's transfer is the receiver's read), each from when its data
/// began to move to its completion.
fn truth_ps(truth: &SimReport, rank: usize, side: &serde_json::Value) -> f64 {
    let (from, to) = (
        side["start_ticks"].as_u64().unwrap(),
        side["end_ticks"].as_u64().unwrap(),
    );
    let me = &truth.ranks[rank];
    truth
        .ranks
        .iter()
        .flat_map(|t| t.ops_posted_in(from, to))
        .filter(|op| op.is_data())
        .map(|op| {
            op.complete_ps
                .map_or(0, |c| me.compute_within(op.start_ps, c)) as f64
        })
        .sum()
}

/// Which rank performs the data operation (its stamped interval is the
/// transfer itself): the sender, except for rdma-read.
fn performer(proto: Protocol) -> usize {
    usize::from(proto == Protocol::RdmaRead)
}

#[test]
fn bounds_bracket_the_truth_and_are_tight_where_the_interval_is_the_transfer() {
    let s = seed(13);
    let mut d = Draw::new(s);
    let mut failed = Vec::new();
    let mut runs = 0;
    for (proto, size) in [
        (Protocol::Eager, "10K"),
        (Protocol::RdmaWrite, "1M"),
        (Protocol::RdmaRead, "1M"),
        (Protocol::Pipelined, "1M"),
    ] {
        for (offload, progress) in [
            ("yes", "poll"),
            ("no", "poll"),
            ("yes", "thread"),
            ("no", "thread"),
        ] {
            for pair in ["isend-recv", "send-irecv", "isend-irecv"] {
                let p = draw(&mut d);
                let extra = format!("offload={offload},progress={progress}");
                let run = overlap(&p, &extra, proto, pair, size);
                runs += 1;
                let tight_here = offload == "yes" || progress == "thread";
                let limit = if proto == Protocol::Pipelined {
                    0.25
                } else {
                    0.10
                };
                // One message every (its computation + the post) at the
                // sender; below the NIC's gap the packets queue, and a
                // queued transfer outlasts xfer_time.
                let gap_ns = p.g().max(p.big_g() * 10240.0);
                for row in &run.rows {
                    let comp = row["comp_ns"].as_f64().unwrap();
                    for (rank, key) in [(0usize, "sender"), (1, "receiver")] {
                        let side = &row[key];
                        let (min, max) = (
                            side["min_overlap_ns"].as_f64().unwrap(),
                            side["max_overlap_ns"].as_f64().unwrap(),
                        );
                        let data = side["data_transfer_ns"].as_f64().unwrap();
                        let t = truth_ps(&run.truth, rank, side) / 1000.0;
                        let tol = 1.0 + 0.005 * data;
                        let what = format!(
                            "{proto:?} {pair} {extra} --sim {} step {} {key}",
                            p.sim_arg(),
                            row["step"]
                        );
                        if !(min <= t + tol && t <= max + tol) {
                            failed
                                .push(format!("{what}: truth {t:.1} not in [{min:.1}, {max:.1}]"));
                        }
                        let sender_comp = if pair == "send-irecv" { 0.0 } else { comp };
                        let queued = proto == Protocol::Eager && sender_comp + p.os() < gap_ns;
                        if tight_here && rank == performer(proto) && !queued && data > 0.0 {
                            let w = (max - min) / data;
                            if w > limit {
                                failed.push(format!(
                                    "{what}: width {:.1}% of xfer_time (limit {:.0}%)",
                                    100.0 * w,
                                    100.0 * limit
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} problems in {runs} runs (seed {s}; replay with OVB_SEED={s}):\n{}",
        failed.len(),
        failed.join("\n")
    );
}
