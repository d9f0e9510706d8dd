//! The engine's communicator on the simulated machine, against closed
//! forms from DESIGN.md § The sim model (defaults: L 1 µs, o_s = o_r =
//! 300 ns, g 500 ns, G 0.1 ns/B).

use std::time::Instant;

use ovbench_core::{Communicator, EngineConfig};
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
                c.send(buf, 0, 0, 1, 7).unwrap();
                c.recv(buf, 0, 0, Some(1), Some(7)).unwrap();
                rtts.push(c.now() - t0);
            } else {
                c.recv(buf, 0, 0, Some(0), Some(7)).unwrap();
                c.send(buf, 0, 0, 0, 7).unwrap();
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
            let r = c.isend(buf, 0, m, 1, 1).unwrap();
            c.work(work_ns);
            c.wait(r).unwrap();
            // Keep rank 0 alive until the data operation has completed.
            c.recv(buf, 0, 0, Some(1), Some(2)).unwrap();
            t0
        } else {
            c.recv(buf, 0, m, Some(0), Some(1)).unwrap();
            c.send(buf, 0, 0, 0, 2).unwrap();
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
            c.recv(buf, 0, 0, Some(rank - mask), Some(tag)).unwrap();
            got = c.now();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if rank + mask < p {
            c.send(buf, 0, 0, rank + mask, tag).unwrap();
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
                c.send(buf, 0, 0, d, 3).unwrap();
            }
        } else {
            c.recv(buf, 0, 0, Some(0), Some(3)).unwrap();
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
