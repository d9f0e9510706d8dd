//! The cost rules on the bare transport, against closed forms from
//! docs/architecture.md § The simulator (defaults: L 1 µs, o_s = o_r = 300 ns,
//! g 500 ns, G 0.1 ns/B).

mod common;

use common::{ns, recv, recv_key, registered, send_key, wait_for, with_peer_key};
use ovbench_core::RmaOp;
use ovbench_core::{Clock, Completion, LocalSlice, Msg, Transport, Work};
use ovbench_sim::{run_raw, SimError, SimParams};

/// Rank 0 and 1 bounce a 0-byte message `n` times; rank 0 returns each
/// round trip in picoseconds (read from its virtual clock).
fn pingpong(params: &SimParams, n: usize) -> Vec<u64> {
    let (res, _) = run_raw(2, params, |mut k| {
        let t = &mut k.transport;
        let mut rtts = Vec::new();
        for _ in 0..n {
            if k.rank == 0 {
                let t0 = k.clock.ticks();
                t.post_send(1, Msg::new(b"ping", None), 1).unwrap();
                recv(t).unwrap();
                rtts.push(k.clock.ticks() - t0);
            } else {
                recv(t).unwrap();
                t.post_send(0, Msg::new(b"pong", None), 2).unwrap();
            }
        }
        rtts
    })
    .unwrap();
    res.into_iter().next().unwrap()
}

#[test]
fn zero_byte_rtt_is_twice_os_l_or() {
    let rtts = pingpong(&SimParams::default(), 3);
    // 2(o_s + L + o_r) = 2(300 + 1000 + 300) ns.
    assert_eq!(rtts, vec![ns(3200); 3]);
    let p = SimParams::parse("L=2us,os=100ns,or=700ns,g=50ns").unwrap();
    assert_eq!(pingpong(&p, 2), vec![ns(2 * (100 + 2000 + 700)); 2]);
}

#[test]
fn progress_thread_costs_no_receive_overhead() {
    let p = SimParams::parse("progress=thread").unwrap();
    // 2(o_s + L): arrivals are consumed at no application cost.
    assert_eq!(pingpong(&p, 2), vec![ns(2 * (300 + 1000)); 2]);
}

#[test]
fn jitter_is_seeded_and_bounded() {
    let p = SimParams::parse("jitter=200ns,seed=11").unwrap();
    let a = pingpong(&p, 20);
    assert_eq!(a, pingpong(&p, 20), "same seed, same run bit for bit");
    let q = SimParams::parse("jitter=200ns,seed=12").unwrap();
    assert_ne!(a, pingpong(&q, 20), "another seed changes the run");
    for rtt in &a {
        // Each of the two hops gets an extra in [0, jitter].
        assert!((ns(3200)..=ns(3600)).contains(rtt), "{rtt}");
    }
    assert!(a.iter().any(|&r| r != ns(3200)), "jitter had no effect");
}

/// Rank 1 exposes 8 bytes, computes `work_ns`, then polls until told to
/// stop; rank 0 reads them once it has the key and returns the time its
/// read completed (ps) and the bytes.
fn read_after_work(params: &SimParams, work_ns: u64) -> (u64, Vec<u8>) {
    let (res, _) = run_raw(2, params, |mut k| {
        let t = &mut k.transport;
        let (s, mr, key) = registered(t, 8);
        if k.rank == 1 {
            t.region(s, &mut |b| b.copy_from_slice(b"ovbench!"))
                .unwrap();
            send_key(t, 0, &key);
            k.work.work(work_ns);
            recv(t).unwrap(); // "done"; the read is served inside this call
            (0, vec![])
        } else {
            let key = recv_key(t);
            t.post_rma(1, RmaOp::read(s, mr, &key, 0), 9).unwrap();
            wait_for(t, |c| {
                matches!(c, Completion::Read { ctx: 9 }).then_some(())
            })
            .unwrap();
            let at = k.clock.ticks();
            let mut got = vec![];
            t.region(s, &mut |b| got = b.to_vec()).unwrap();
            t.post_send(1, Msg::new(b"done", None), 0).unwrap();
            (at, got)
        }
    })
    .unwrap();
    res.into_iter().next().unwrap()
}

#[test]
fn offloaded_read_is_served_at_arrival() {
    let (at, data) = read_after_work(&SimParams::default(), 10_000);
    assert_eq!(data, b"ovbench!");
    // Key: o_s + L, consumed + o_r = 1600 ns; read: o_s + L (request),
    // served by rank 1's NIC at once, + L + 8 B × 0.1 ns.
    assert_eq!(at, ns(1600 + 300 + 1000 + 1000) + 800);
}

#[test]
fn unoffloaded_read_waits_for_the_targets_library_call() {
    let p = SimParams::parse("offload=no").unwrap();
    let (at, data) = read_after_work(&p, 10_000);
    assert_eq!(data, b"ovbench!");
    // Rank 1 computes from o_s = 300 ns to 10 300 ns, then serves the
    // request in its next call at o_r's cost; the data then needs L + m·G.
    assert_eq!(at, ns(10_300 + 300 + 1000) + 800);
}

#[test]
fn a_progress_thread_serves_unoffloaded_reads_at_arrival() {
    let p = SimParams::parse("offload=no,progress=thread").unwrap();
    let (at, data) = read_after_work(&p, 10_000);
    assert_eq!(data, b"ovbench!");
    // Key at o_s + L, consumed for free; read: o_s + L, served on arrival
    // by rank 1's progress thread, + L + m·G back.
    assert_eq!(at, ns(1300 + 300 + 1000 + 1000) + 800);
}

#[test]
fn write_completes_one_l_after_placement_and_fin_follows_data() {
    let dt = with_peer_key(
        1000,
        |k, s| {
            let t = &mut k.transport;
            let (_, fin) = recv(t).unwrap();
            assert_eq!(fin, b"FIN");
            let mut got = vec![];
            t.region(s, &mut |b| got = b.to_vec()).unwrap();
            assert!(got.iter().all(|&b| b == 0xab), "data visible before FIN");
        },
        |k, s, mr, key| {
            let t = &mut k.transport;
            t.region(s, &mut |b| b.fill(0xab)).unwrap();
            let t0 = k.clock.ticks();
            t.post_rma(1, RmaOp::write(s, mr, &key, 0), 5).unwrap();
            wait_for(t, |c| {
                matches!(c, Completion::Write { ctx: 5 }).then_some(())
            })
            .unwrap();
            let dt = k.clock.ticks() - t0;
            t.post_send(1, Msg::new(b"FIN", None), 0).unwrap();
            dt
        },
    );
    // o_s + L + 1000 B × 0.1 ns (placed) + L (completion).
    assert_eq!(dt, ns(300 + 1000 + 100 + 1000));
}

#[test]
fn bad_keys_and_ranges_are_rejected_naming_the_initiator() {
    let errors = with_peer_key(
        64,
        |k, _| {
            recv(&mut k.transport).unwrap();
        },
        |k, s, mr, key| {
            let t = &mut k.transport;
            let mut forged = key.clone();
            forged.blob[12] ^= 0xff;
            let mut errors = vec![];
            for (k, off, ctx) in [(&key, 1, 1), (&forged, 0, 2)] {
                t.post_rma(1, RmaOp::write(s, mr, k, off), ctx).unwrap();
                errors.push(wait_for(t, |c| match c {
                    Completion::Error {
                        ctx: Some(c),
                        status,
                        ..
                    } => Some((c, status)),
                    Completion::Write { .. } => panic!("bad write performed"),
                    _ => None,
                }));
            }
            // A local slice outside its registration is refused at once.
            let bad = LocalSlice::new(s.region, 60, 8);
            assert!(t.post_rma(1, RmaOp::read(bad, mr, &key, 0), 3).is_err());
            assert!(t.post_send(7, Msg::new(b"x", None), 0).is_err());
            t.post_send(1, Msg::new(b"done", None), 0).unwrap();
            errors
        },
    );
    let errs: Vec<_> = errors.iter().map(|e| e.clone().unwrap()).collect();
    assert_eq!(errs[0].0, 1);
    assert!(
        errs[0].1.contains("from rank 0") && errs[0].1.contains("outside"),
        "{}",
        errs[0].1
    );
    assert_eq!(errs[1].0, 2);
    assert!(errs[1].1.contains("not live"), "{}", errs[1].1);
}

#[test]
fn deadlock_names_the_blocked_ranks() {
    let r = run_raw(4, &SimParams::default(), |mut k| {
        if k.rank == 1 || k.rank == 3 {
            // Waits for a message nobody sends.
            recv(&mut k.transport).err()
        } else {
            None
        }
    });
    match r {
        Err(SimError::Deadlock { ranks, .. }) => assert_eq!(ranks, vec![1, 3]),
        other => panic!("expected a deadlock, got {other:?}"),
    }
    let msg = run_raw(2, &SimParams::default(), |mut k| {
        recv(&mut k.transport).err()
    })
    .unwrap_err()
    .to_string();
    assert!(
        msg.contains("deadlock") && msg.contains("ranks 0, 1"),
        "{msg}"
    );
}

#[test]
fn a_panicking_rank_stops_the_run() {
    let r = run_raw(3, &SimParams::default(), |mut k| {
        if k.rank == 2 {
            panic!("boom");
        }
        recv(&mut k.transport).is_err()
    });
    match r {
        Err(SimError::Panicked { rank, message }) => {
            assert_eq!((rank, message.as_str()), (2, "boom"))
        }
        other => panic!("expected the panic, got {other:?}"),
    }
}

#[test]
fn clocks_show_skew_and_drift_and_work_is_exact() {
    let p = SimParams::parse("skew.1=5us,drift.2=1e-3").unwrap();
    let (res, rep) = run_raw(3, &p, |mut k| {
        let before = k.clock.ticks();
        k.work.work(1000); // 1000 × 1 ns
        k.work.delay(250.0);
        (before, k.clock.ticks())
    })
    .unwrap();
    assert_eq!(res[0], (0, ns(1250)));
    assert_eq!(res[1], (ns(5000), ns(6250)));
    assert_eq!(res[2], (0, ns(1250) + 1250));
    // work is computation, delay is not.
    assert_eq!(rep.ranks[0].compute, vec![(0, ns(1000))]);
    assert_eq!(rep.ranks[0].end_ps, ns(1250));
    assert!(
        run_raw(2, &p, |_| ()).is_err(),
        "skew.1 and drift.2 need 3 ranks"
    );
}

#[test]
fn a_rank_ahead_in_time_does_not_deliver_early() {
    // Rank 0 sends, then computes far ahead before polling; rank 1 (behind
    // it) must still get the message at o_s + L, consumed by o_r.
    let (res, _) = run_raw(2, &SimParams::default(), |mut k| {
        let t = &mut k.transport;
        if k.rank == 0 {
            t.post_send(1, Msg::new(b"m", None), 0).unwrap();
            k.work.work(1_000_000);
            recv(t).unwrap();
        } else {
            recv(t).unwrap();
            let at = k.clock.ticks();
            t.post_send(0, Msg::new(b"r", None), 0).unwrap();
            return at;
        }
        0
    })
    .unwrap();
    assert_eq!(res[1], ns(300 + 1000 + 300));
}
