//! The engine's communicator on the simulated machine, against closed
//! forms from docs/architecture.md § The simulator (defaults: L 1 µs, o_s = o_r =
//! 300 ns, g 500 ns, G 0.1 ns/B).

use std::time::Instant;

use ovbench_core::{Communicator, EngineConfig, Msg};
use ovbench_sim::{run, SimParams};

const NS: u64 = 1000;

#[test]
fn pingpong_rtt_through_the_engine() {
    let (res, _) = run(2, &SimParams::default(), &EngineConfig::default(), |c| {
        let buf = c.alloc(64).unwrap();
        let mut rtts = vec![];
        for _ in 0..4 {
            if c.rank() == 0 {
                let t0 = c.now();
                c.send(buf.first(0), 1, 7).unwrap();
                c.recv(buf.first(0), Some(1), Some(7)).unwrap();
                rtts.push(c.now() - t0);
            } else {
                c.recv(buf.first(0), Some(0), Some(7)).unwrap();
                c.send(buf.first(0), 0, 7).unwrap();
            }
        }
        rtts
    })
    .unwrap();
    // RTT(0) = 2(o_s + L + o_r).
    assert_eq!(res[0], vec![2 * (300 + 1000 + 300) * NS; 4]);
}

/// Rank 0 isends `m` bytes, computes `work_ns`, waits; returns the window.
fn isend_work_wait(m: usize, work_ns: u64) -> (u64, ovbench_sim::SimReport) {
    let (res, rep) = run(2, &SimParams::default(), &EngineConfig::default(), |c| {
        let buf = c.alloc(m).unwrap();
        if c.rank() == 0 {
            let t0 = c.now();
            let r = c.isend(buf.first(m), 1, 1).unwrap();
            c.work(work_ns);
            c.wait(r).unwrap();
            // Keep rank 0 alive until the data operation has completed.
            c.recv(buf.first(0), Some(1), Some(2)).unwrap();
            t0
        } else {
            c.recv(buf.first(m), Some(0), Some(1)).unwrap();
            c.send(buf.first(0), 0, 2).unwrap();
            0
        }
    })
    .unwrap();
    (res[0], rep)
}

#[test]
fn true_overlap_of_an_eager_isend() {
    let m = 10 * 1024;
    // The eager send's data operation spans post .. o_s + L + m·G + L; the
    // computation starts after o_s, so it can hide at most 2L + m·G.
    let hideable = (2 * 1000 + 1024) * NS;
    for work in [1_000u64, 10_000] {
        let (t0, rep) = isend_work_wait(m, work);
        let truth = rep.true_overlap(0, t0, u64::MAX);
        assert_eq!(truth, (work * NS).min(hideable), "work {work} ns");
        let data: Vec<_> = rep.ranks[0].ops.iter().filter(|o| o.is_data()).collect();
        assert_eq!(data.len(), 1);
        assert_eq!((data[0].post_ps, data[0].bytes), (t0, m as u64));
    }
}

/// Receive time (after o_r) of rank `rel` in a binomial broadcast from
/// rank 0 of `p` (a power of two) with MPICH's child order: each hop costs
/// o_s + L + o_r, and a parent's j-th send leaves j·max(o_s, g) after its
/// first.
fn binomial_arrival(rel: u32, p: u32) -> u64 {
    let (o_s, l, o_r, g) = (300 * NS, 1000 * NS, 300 * NS, 500 * NS);
    if rel == 0 {
        return 0;
    }
    let b = rel & rel.wrapping_neg();
    let parent = rel - b;
    let first = if parent == 0 {
        p / 2
    } else {
        (parent & parent.wrapping_neg()) / 2
    };
    let j = u64::from(first.trailing_zeros() - b.trailing_zeros());
    binomial_arrival(parent, p) + o_s + j * o_s.max(g) + l + o_r
}

/// MPICH's binomial broadcast from rank 0; returns when this rank had the
/// message (the root: when it started).
fn binomial_bcast(c: &mut dyn Communicator, buf: ovbench_core::Buf, tag: u32) -> u64 {
    let (rank, p) = (c.rank(), c.size());
    let mut mask = 1;
    let mut got = c.now();
    while mask < p {
        if rank & mask != 0 {
            c.recv(buf.first(0), Some(rank - mask), Some(tag)).unwrap();
            got = c.now();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if rank + mask < p {
            c.send(buf.first(0), rank + mask, tag).unwrap();
        }
        mask >>= 1;
    }
    got
}

#[test]
fn linear_bcast_sends_are_spaced_by_the_gap() {
    let p = 64;
    let (res, _) = run(p, &SimParams::default(), &EngineConfig::default(), |c| {
        let buf = c.alloc(8).unwrap();
        if c.rank() == 0 {
            for d in 1..c.size() {
                c.send(buf.first(0), d, 3).unwrap();
            }
        } else {
            c.recv(buf.first(0), Some(0), Some(3)).unwrap();
        }
        c.now()
    })
    .unwrap();
    for k in 1..p as u64 {
        // o_s + (k−1)·max(o_s, g) + L + o_r.
        assert_eq!(res[k as usize], (300 + (k - 1) * 500 + 1000 + 300) * NS);
    }
}

#[test]
fn binomial_bcast_on_1024_ranks_matches_the_tree() {
    let p = 1024;
    let (res, _) = run(p, &SimParams::default(), &EngineConfig::default(), |c| {
        let buf = c.alloc(8).unwrap();
        binomial_bcast(c, buf, 0)
    })
    .unwrap();
    for (rel, &t) in res.iter().enumerate() {
        assert_eq!(t, binomial_arrival(rel as u32, p), "rank {rel}");
    }
}

/// The scale the bcast method needs: 1024 ranks, 10 broadcasts separated
/// by barriers. Later broadcasts overlap the stragglers' barrier traffic,
/// so only their completion is checked here; the wall time and the number
/// of thread handoffs are printed (`--nocapture`).
#[test]
fn ten_broadcasts_with_barriers_on_1024_ranks() {
    let (p, reps) = (1024, 10);
    let wall = Instant::now();
    let (res, rep) = run(p, &SimParams::default(), &EngineConfig::default(), |c| {
        let buf = c.alloc(8).unwrap();
        for i in 0..reps {
            binomial_bcast(c, buf, i);
            c.barrier().unwrap();
        }
        c.now()
    })
    .unwrap();
    let wall = wall.elapsed();
    assert_eq!(res.len(), p as usize);
    // Ten broadcasts take at least ten times the deepest path.
    assert!(rep.makespan_ps() >= 10 * binomial_arrival(p - 1, p));
    eprintln!(
        "{p} ranks, {reps} binomial broadcasts + barriers: {wall:?} wall, {} baton switches ({:?} each)",
        rep.switches,
        wall / rep.switches.max(1) as u32
    );
}

/// The bare cost of one baton handoff: a two-rank ping-pong on the
/// transport needs one handoff per message. Printed with `--nocapture`.
#[test]
fn handoff_cost() {
    let n = 20_000;
    let wall = Instant::now();
    let (_, rep) = ovbench_sim::run_raw(2, &SimParams::default(), |mut k| {
        use ovbench_core::{Completion, Transport};
        let t = &mut k.transport;
        let mut out = Vec::new();
        for _ in 0..n {
            if k.rank == 0 {
                t.post_send(1, Msg::new(b"p", None), 0).unwrap();
            }
            while !out.iter().any(|c| matches!(c, Completion::Recv { .. })) {
                t.poll(&mut out, None).unwrap();
            }
            out.clear();
            if k.rank == 1 {
                t.post_send(0, Msg::new(b"p", None), 0).unwrap();
            }
        }
    })
    .unwrap();
    let wall = wall.elapsed();
    assert!(rep.switches >= 2 * n as u64);
    eprintln!(
        "{} handoffs in {wall:?}: {:?} each",
        rep.switches,
        wall / rep.switches as u32
    );
}

/// Rank 0 isends 1 MiB by rdma-read and computes 1 ms before waiting;
/// rank 1 receives. Returns (rank 0's end of computation, rank 1's end of
/// receive), in ps.
fn rdma_read_under_computation(params: &str) -> (u64, u64) {
    let cfg = EngineConfig::with_protocol(ovbench_core::engine_comm::Protocol::RdmaRead);
    let m = 1 << 20;
    let p = SimParams::parse(params).unwrap();
    let (res, _) = run(2, &p, &cfg, |c| {
        let buf = c.alloc(m).unwrap();
        if c.rank() == 0 {
            let r = c.isend(buf.first(m), 1, 4).unwrap();
            c.work(1_000_000);
            let end = c.now();
            c.wait(r).unwrap();
            end
        } else {
            c.recv(buf.first(m), Some(0), Some(4)).unwrap();
            c.now()
        }
    })
    .unwrap();
    (res[0], res[1])
}

#[test]
fn offload_decides_whether_a_read_waits_for_the_target() {
    // 1 MiB at 0.1 ns/B is 104 857.6 ns on the wire.
    let wire = (1u64 << 20) * 100;
    let (work_end, recv_end) = rdma_read_under_computation("");
    assert!(
        recv_end < work_end,
        "offloaded: the read proceeds during the computation"
    );
    // RTS: o_s + L, consumed (o_r); read: o_s + L there, L + m·G back.
    assert!(
        recv_end >= (300 + 1000 + 300 + 300 + 1000 + 1000) * NS + wire,
        "{recv_end}"
    );
    let (work_end, recv_end) = rdma_read_under_computation("offload=no");
    // Served only once rank 0 calls wait: o_r, then L + m·G back.
    assert!(
        recv_end >= work_end + 300 * NS + 1000 * NS + wire,
        "{recv_end} vs {work_end}"
    );
}

#[test]
fn engine_runs_repeat_bit_for_bit_with_the_same_seed() {
    let go = |seed: u64| {
        let p = SimParams::parse(&format!("jitter=400ns,seed={seed}")).unwrap();
        let (res, rep) = run(8, &p, &EngineConfig::default(), |c| {
            let buf = c.alloc(4096).unwrap();
            let mut times = vec![];
            for i in 0..5 {
                binomial_bcast(c, buf, i);
                c.barrier().unwrap();
                times.push(c.now());
            }
            times
        })
        .unwrap();
        let ops: Vec<_> = rep.ranks.iter().map(|r| r.ops.clone()).collect();
        (res, ops)
    };
    let a = go(5);
    assert_eq!(a, go(5));
    assert_ne!(a.0, go(6).0);
}

#[test]
fn engine_deadlock_is_reported_not_hung() {
    let r = run(3, &SimParams::default(), &EngineConfig::default(), |c| {
        let buf = c.alloc(8).unwrap();
        if c.rank() == 2 {
            return true;
        }
        // Ranks 0 and 1 both receive first.
        c.recv(buf.first(8), Some(1 - c.rank()), Some(0)).is_err()
    });
    match r {
        Err(ovbench_sim::SimError::Deadlock { ranks, .. }) => assert_eq!(ranks, vec![0, 1]),
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn truth_recording_can_be_turned_off_without_changing_the_run() {
    let go = |params: &str| {
        let p = SimParams::parse(params).unwrap();
        run(2, &p, &EngineConfig::default(), |c| {
            let buf = c.alloc(64).unwrap();
            c.work(100);
            if c.rank() == 0 {
                c.send(buf.first(64), 1, 0).unwrap();
            } else {
                c.recv(buf.first(64), Some(0), Some(0)).unwrap();
            }
            c.now()
        })
        .unwrap()
    };
    let (with, full) = go("");
    let (without, none) = go("truth=no");
    assert_eq!(with, without);
    assert!(!full.ranks[0].ops.is_empty() && !full.ranks[0].compute.is_empty());
    assert!(none
        .ranks
        .iter()
        .all(|r| r.ops.is_empty() && r.compute.is_empty()));
}
