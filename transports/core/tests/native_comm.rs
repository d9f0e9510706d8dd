//! The native Comm over the in-process transport's tagged path: data, modes,
//! barrier, timeouts and call-bounded instrumentation.

mod util;

use std::time::{Duration, Instant};

use ovbench_core::{Communicator, EngineConfig, TransportError, XferTable, ANY_SOURCE, ANY_TAG};

fn cfg() -> EngineConfig {
    EngineConfig {
        timeout: Duration::from_secs(20),
        ..Default::default()
    }
}

#[test]
fn native_ping_pong_moves_data_and_counts_tagged_sends() {
    ping_pong(util::native_comms(2, &cfg()));
}

/// The same over transports held as their tagged protocol, the way the
/// tool holds UCX and libfabric (no `tagged()` query per call).
#[test]
fn native_ping_pong_over_a_tagged_link() {
    ping_pong(util::native_comms_tagged(2, &cfg()));
}

fn ping_pong(comms: Vec<ovbench_core::Comm>) {
    let out = util::run(comms, |c| {
        let me = c.rank();
        let b = c.alloc(10_000).unwrap();
        c.fill(b, &mut |x| {
            x.iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v = (i as u32 ^ me) as u8)
        })
        .unwrap();
        let r = c.alloc(10_000).unwrap();
        for n in [0, 1, 10_000] {
            if me == 0 {
                c.send(b.first(n), 1, 4).unwrap();
                c.recv(r.first(n), Some(1), Some(4)).unwrap();
            } else {
                let st = c.recv(r.first(n), ANY_SOURCE, ANY_TAG).unwrap();
                assert_eq!((st.source, st.tag, st.len), (0, 4, n));
                c.send(b.first(n), 0, 4).unwrap();
            }
            let mut got = Vec::new();
            c.inspect(r, &mut |x| got = x[..n].to_vec()).unwrap();
            assert!(got
                .iter()
                .enumerate()
                .all(|(i, &v)| v == (i as u32 ^ (1 - me)) as u8));
        }
        c.barrier().unwrap();
        (c.op_counts(), c.info().protocol)
    });
    assert_eq!(out[0].1.to_string(), "native");
    // 3 data sends plus the barrier's one round.
    assert_eq!(out[0].0.tagged_sends, 4);
    assert_eq!(out[0].0.sends, 0);
}

#[test]
fn native_ssend_waits_and_timeouts_name_the_peer() {
    let mut c = cfg();
    c.timeout = Duration::from_millis(300);
    let out = util::run(util::native_comms(2, &c), |c| {
        let b = c.alloc(16).unwrap();
        if c.rank() == 0 {
            let t = Instant::now();
            c.ssend(b.first(16), 1, 1).unwrap();
            let waited = t.elapsed();
            let e = c.recv(b.first(16), Some(1), Some(9)).unwrap_err();
            Some((waited, e))
        } else {
            std::thread::sleep(Duration::from_millis(100));
            c.recv(b.first(16), Some(0), Some(1)).unwrap();
            None
        }
    });
    let (waited, e) = out[0].as_ref().unwrap();
    assert!(*waited >= Duration::from_millis(90), "{waited:?}");
    assert!(
        matches!(e, TransportError::Timeout { peer: Some(1), .. }),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("native receive of 16 bytes from rank 1"),
        "{e}"
    );
}

#[test]
fn native_transfers_are_call_bounded() {
    let out = util::run(util::native_comms(2, &cfg()), |c| {
        let b = c.alloc(1000).unwrap();
        c.enable_instrumentation(XferTable::new(vec![(0, 10_000.0)]).unwrap())
            .unwrap();
        for _ in 0..10 {
            if c.rank() == 0 {
                let r = c.isend(b.first(1000), 1, 0).unwrap();
                c.delay(20_000.0);
                c.wait(r).unwrap();
            } else {
                c.recv(b.first(1000), Some(0), Some(0)).unwrap();
            }
        }
        c.barrier().unwrap();
        c.overlap_report().unwrap()
    });
    // Sender: 20 µs of computation between post and wait: max = xfer,
    // min = 0 (call-bounded); receiver: inside one call, max = 0.
    assert_eq!(out[0].transfers, 10);
    assert_eq!(out[0].min_overlap_ns, 0.0);
    assert_eq!(out[0].max_overlap_ns, 100_000.0);
    assert_eq!(out[1].transfers, 10);
    assert_eq!(out[1].max_overlap_ns, 0.0, "{:?}", out[1]);
}

/// A ping-pong binds its calls only over a library's own calls (MPI's):
/// neither the engine's protocols nor a native path made of tagged
/// sends and receives has a pair to bind, and the loop keeps the
/// communicator's calls.
#[test]
fn only_library_calls_bind_a_ping_pong() {
    for comms in [util::comms(2, &cfg()), util::native_comms(2, &cfg())] {
        let bound = util::run(comms, |c| {
            let b = c.alloc(64).unwrap();
            let peer = 1 - c.rank();
            c.bind_pair(b.first(8), b.at(8, 8), peer, 4)
                .unwrap()
                .is_some()
        });
        assert_eq!(bound, [false, false]);
    }
}
