//! The engine Comm end to end over an in-process transport: every protocol,
//! the barrier, timeouts, send modes and instrumentation.

mod util;

use std::time::{Duration, Instant};

use ovbench_core::engine_comm::{Plan, Protocol, RawOp};
use ovbench_core::{Communicator, EngineConfig, TransportError, XferTable, ANY_SOURCE, ANY_TAG};

fn cfg(p: Protocol) -> EngineConfig {
    EngineConfig {
        plan: Plan::new(p)
            .with_eager_limit(8192)
            .with_frag_size(16 * 1024),
        timeout: Duration::from_secs(20),
        ..Default::default()
    }
}

fn fill(i: usize, seed: usize) -> u8 {
    (i.wrapping_mul(131) ^ seed) as u8
}

/// Ping-pong `sizes` between two ranks, verifying every byte both ways.
fn pingpong(p: Protocol, sizes: &'static [usize]) -> Vec<ovbench_core::OpCounts> {
    util::run(util::comms(2, &cfg(p)), move |c| {
        let me = c.rank();
        let max = *sizes.iter().max().unwrap();
        let sb = c.alloc(max).unwrap();
        let rb = c.alloc(max).unwrap();
        for &n in sizes {
            // A raw read's target does not wait for it: nobody refills a
            // buffer the peer may still be reading.
            c.barrier().unwrap();
            c.fill(sb, &mut |b| {
                b.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = fill(i, n + me as usize))
            })
            .unwrap();
            // A raw read takes whatever the peer's buffer holds: fill first.
            c.barrier().unwrap();
            for _ in 0..3 {
                if me == 0 {
                    c.send(sb.first(n), 1, 5).unwrap();
                    let st = c.recv(rb.first(n), Some(1), Some(5)).unwrap();
                    assert_eq!((st.source, st.len), (1, n));
                } else {
                    let st = c.recv(rb.first(n), Some(0), Some(5)).unwrap();
                    assert_eq!((st.source, st.tag, st.len), (0, 5, n));
                    c.send(sb.first(n), 0, 5).unwrap();
                }
                let peer = 1 - me as usize;
                let mut got = Vec::new();
                c.inspect(rb, &mut |b| got = b[..n].to_vec()).unwrap();
                // A raw write carries its arrival marker in the last byte.
                let check = if p == Protocol::Raw(RawOp::Write) {
                    n - 1
                } else {
                    n
                };
                assert!(
                    got[..check]
                        .iter()
                        .enumerate()
                        .all(|(i, &x)| x == fill(i, n + peer)),
                    "{p:?} {n} bytes corrupted at rank {me}: {:?} vs {:?}",
                    &got[..check.min(8)],
                    (0..check.min(8))
                        .map(|i| fill(i, n + peer))
                        .collect::<Vec<_>>()
                );
            }
        }
        c.barrier().unwrap();
        c.op_counts()
    })
}

const SIZES: &[usize] = &[0, 1, 4000, 4096, 8192, 8193, 100_000];

#[test]
fn every_protocol_moves_every_size() {
    for p in Protocol::ENGINE {
        let counts = pingpong(p, SIZES);
        let c = counts[0];
        match p {
            Protocol::Eager => assert_eq!((c.writes, c.reads), (0, 0)),
            Protocol::RdmaWrite => assert!(c.writes > 0 && c.reads == 0),
            Protocol::RdmaRead => assert!(c.reads > 0 && c.writes == 0),
            Protocol::Pipelined => assert!(c.writes > 0),
            // Offloaded native RMA: auto reads above the limit.
            Protocol::Auto => assert!(c.reads > 0 && c.writes == 0),
            Protocol::Raw(_) => unreachable!(),
        }
    }
}

#[test]
fn raw_operations_ping_pong() {
    for op in [RawOp::Send, RawOp::Write, RawOp::Read] {
        let counts = pingpong(Protocol::Raw(op), &[1, 8, 3000]);
        let c = counts[0];
        match op {
            RawOp::Send => assert_eq!((c.writes, c.reads), (0, 0)),
            RawOp::Write => assert_eq!(c.writes, 9),
            RawOp::Read => assert_eq!(c.reads, 9),
        }
    }
}

#[test]
fn barrier_holds_everyone_and_ignores_wildcard_receives() {
    let t0 = Instant::now();
    // 5 ranks on this machine's cores: waits spin briefly, then block.
    let mut oversub = cfg(Protocol::Auto);
    oversub.oversubscribed = true;
    let out = util::run(util::comms(5, &oversub), move |c| {
        let me = c.rank();
        let b = c.alloc(16).unwrap();
        // A wildcard user receive pending across the barriers.
        let r = c.irecv(b.first(16), ANY_SOURCE, ANY_TAG).unwrap();
        let mut last = Duration::ZERO;
        for round in 0..30u32 {
            if me == round % 5 {
                std::thread::sleep(Duration::from_millis(2));
            }
            c.barrier().unwrap();
            last = t0.elapsed();
        }
        assert!(
            c.test(r).unwrap().is_none(),
            "barrier traffic matched a user receive"
        );
        c.barrier().unwrap();
        if me == 0 {
            let s = c.alloc(3).unwrap();
            for dst in 1..5 {
                c.send(s.first(3), dst, 77).unwrap();
            }
        } else {
            assert_eq!(c.wait(r).unwrap().tag, 77);
        }
        last
    });
    // Every rank slept 2 ms in turn, 30 rounds: nobody left early.
    assert!(
        out.iter().all(|d| *d >= Duration::from_millis(60)),
        "{out:?}"
    );
}

#[test]
fn a_silent_peer_times_out_naming_it() {
    let mut c = cfg(Protocol::Auto);
    c.timeout = Duration::from_millis(300);
    let out = util::run(util::comms(2, &c), move |c| {
        if c.rank() == 0 {
            let b = c.alloc(64).unwrap();
            let t = Instant::now();
            let e = c.recv(b.first(64), Some(1), Some(3)).unwrap_err();
            assert!(t.elapsed() >= Duration::from_millis(300));
            assert!(t.elapsed() < Duration::from_secs(5));
            Some(e)
        } else {
            None
        }
    });
    let e = out[0].as_ref().unwrap();
    assert!(
        matches!(e, TransportError::Timeout { peer: Some(1), .. }),
        "{e:?}"
    );
    let s = e.to_string();
    assert!(
        s.contains("rank 1") && s.contains("receive of 64 bytes") && s.contains("--timeout"),
        "{s}"
    );
}

#[test]
fn ssend_waits_for_the_receive_and_rsend_needs_one() {
    let out = util::run(util::comms(2, &cfg(Protocol::Eager)), move |c| {
        let b = c.alloc(32).unwrap();
        if c.rank() == 0 {
            let t = Instant::now();
            c.ssend(b.first(32), 1, 1).unwrap();
            let waited = t.elapsed();
            c.rsend(b.first(8), 1, 2).unwrap();
            Ok(waited)
        } else {
            std::thread::sleep(Duration::from_millis(100));
            c.recv(b.first(32), Some(0), Some(1)).unwrap();
            // No receive posted for the ready send: an error naming rank 0,
            // from whichever call is progressing when it arrives.
            std::thread::sleep(Duration::from_millis(50));
            let e = c.recv(b.first(8), Some(0), Some(99)).unwrap_err();
            Err(e.to_string())
        }
    });
    assert!(
        *out[0].as_ref().unwrap() >= Duration::from_millis(90),
        "{:?}",
        out[0]
    );
    let e = out[1].as_ref().unwrap_err();
    assert!(e.contains("rank 0") && e.contains("ready"), "{e}");
}

#[test]
fn instrumentation_sees_overlap_of_an_rdma_read() {
    let out = util::run(util::comms(2, &cfg(Protocol::RdmaRead)), move |c| {
        let b = c.alloc(64 * 1024).unwrap();
        let table = XferTable::new(vec![(0, 1000.0), (64 * 1024, 20_000.0)]).unwrap();
        c.enable_instrumentation(table).unwrap();
        for _ in 0..20 {
            if c.rank() == 0 {
                let r = c.isend(b.first(64 * 1024), 1, 0).unwrap();
                c.delay(50_000.0);
                c.wait(r).unwrap();
            } else {
                c.recv(b.first(64 * 1024), Some(0), Some(0)).unwrap();
            }
        }
        c.barrier().unwrap();
        c.overlap_report().unwrap()
    });
    // The sender's transfer is RTS post → FIN, with 50 µs of computation
    // between: the maximum overlap reaches xfer_time for every transfer.
    let s = &out[0];
    assert_eq!(s.transfers, 20);
    assert!((s.max_overlap_ns - 20.0 * 20_000.0).abs() < 1.0, "{s:?}");
    assert!(s.computation_ns >= 20.0 * 50_000.0);
    // The receiver reads inside its blocking receive: no overlap.
    let r = &out[1];
    assert_eq!(r.transfers, 20);
    assert_eq!(r.max_overlap_ns, 0.0, "{r:?}");
}

#[test]
fn clocks_synchronise_to_rank_0() {
    // Rank r's clock starts about r·30 ms after rank 0's, so rank 0's time
    // is ahead of rank r's by the difference of their origins.
    let (comms, win) = util::comms_staggered(3, &cfg(Protocol::Eager), Duration::from_millis(30));
    let out = util::run(comms, |c| c.sync_clock(20).unwrap());
    assert_eq!(out[0], ovbench_core::ClockSync::identity());
    for (r, s) in out.iter().enumerate().skip(1) {
        // The true offset lies in [earliest_r − latest_0, latest_r − earliest_0];
        // the estimate is within half its round trip of it.
        let lo = (win[r].0 - win[0].1).as_nanos() as f64;
        let hi = (win[r].1 - win[0].0).as_nanos() as f64;
        let slack = s.rtt_ns / 2.0 + 1000.0;
        assert!(
            s.offset_ns > lo - slack && s.offset_ns < hi + slack,
            "rank {r}: {s:?}, true offset in [{lo}, {hi}] ns"
        );
        assert!(lo > 25e6, "the clocks were not staggered");
        assert!((s.to_global(s.at_ns) - (s.at_ns + s.offset_ns)).abs() < 1e-6);
    }
}
