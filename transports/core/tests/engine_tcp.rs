//! The engine Comm over the real TCP transport (loopback sockets, one thread
//! per rank): every protocol with progress by polling and by thread, and
//! a dead peer reported by name.

use std::time::{Duration, Instant};

use ovbench_core::engine_comm::{Protocol, RawOp};
use ovbench_core::{Comm, Communicator, EngineConfig, Progress, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

mod util;
use util::run;

fn comms(n: u32, progress: Progress, cfg: &EngineConfig) -> Vec<Comm> {
    let mut ts: Vec<TcpTransport> = (0..n)
        .map(|r| {
            let opts = TcpOptions {
                progress,
                timeout: Duration::from_secs(20),
                ..TcpOptions::default()
            };
            TcpTransport::new(r, n, opts).expect("listening on loopback")
        })
        .collect();
    let addrs: Vec<Vec<u8>> = ts.iter().map(|t| t.address()).collect();
    let hs: Vec<_> = ts
        .drain(..)
        .map(|mut t| {
            let a = addrs.clone();
            std::thread::spawn(move || {
                t.connect(&a).expect("connect");
                t
            })
        })
        .collect();
    hs.into_iter()
        .map(|h| util::comm_over(h.join().expect("connect thread"), cfg, Comm::engine))
        .collect()
}

fn pattern(i: usize, n: usize, r: u32) -> u8 {
    (i.wrapping_mul(7) ^ n ^ r as usize) as u8
}

fn pingpong(p: Protocol, progress: Progress) {
    let cfg = EngineConfig {
        plan: ovbench_core::engine_comm::Plan::new(p).with_frag_size(64 * 1024),
        timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let sizes: &[usize] = if matches!(p, Protocol::Raw(RawOp::Send)) {
        &[0, 8, 1000]
    } else if matches!(p, Protocol::Raw(_)) {
        &[1, 8, 65_536, 1 << 20]
    } else {
        &[0, 8, 65_536, 1 << 20]
    };
    let counts = run(comms(2, progress, &cfg), move |c| {
        let me = c.rank();
        let sb = c.alloc(1 << 20).unwrap();
        let rb = c.alloc(1 << 20).unwrap();
        for &n in sizes {
            c.barrier().unwrap();
            c.fill(sb, &mut |b| {
                b.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = pattern(i, n, me))
            })
            .unwrap();
            c.barrier().unwrap();
            for _ in 0..3 {
                if me == 0 {
                    c.send(sb.first(n), 1, 1).unwrap();
                    c.recv(rb.first(n), Some(1), Some(1)).unwrap();
                } else {
                    c.recv(rb.first(n), Some(0), Some(1)).unwrap();
                    c.send(sb.first(n), 0, 1).unwrap();
                }
            }
            let mut got = Vec::new();
            c.inspect(rb, &mut |b| got = b[..n].to_vec()).unwrap();
            let check = if p == Protocol::Raw(RawOp::Write) {
                n - 1
            } else {
                n
            };
            let bad = (0..check).find(|&i| got[i] != pattern(i, n, 1 - me));
            assert_eq!(bad, None, "{p:?} {progress}: {n} bytes corrupted");
        }
        c.barrier().unwrap();
        c.op_counts()
    });
    let c = counts[0];
    match p {
        Protocol::Eager | Protocol::Raw(RawOp::Send) => assert_eq!((c.writes, c.reads), (0, 0)),
        Protocol::RdmaRead | Protocol::Raw(RawOp::Read) => assert!(c.reads > 0),
        // TCP's RMA is emulated: auto falls back to rdma-write.
        Protocol::RdmaWrite
        | Protocol::Pipelined
        | Protocol::Auto
        | Protocol::Raw(RawOp::Write) => {
            assert!(c.writes > 0)
        }
    }
}

#[test]
fn every_protocol_over_tcp_with_polling() {
    let raw = [RawOp::Send, RawOp::Write, RawOp::Read].map(Protocol::Raw);
    for p in Protocol::ENGINE.into_iter().chain(raw) {
        pingpong(p, Progress::Poll);
    }
}

#[test]
fn rendezvous_over_tcp_with_a_progress_thread() {
    for p in [Protocol::RdmaWrite, Protocol::RdmaRead, Protocol::Pipelined] {
        pingpong(p, Progress::Thread);
    }
}

#[test]
fn a_peer_that_left_is_named_not_a_hang() {
    // Rank 1 leaves cleanly (its transport says goodbye): rank 0's receive
    // ends at its deadline with an error naming rank 1.
    let cfg = EngineConfig {
        timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let out = run(comms(2, Progress::Poll, &cfg), move |c| {
        if c.rank() == 1 {
            c.barrier().unwrap();
            return None;
        }
        c.barrier().unwrap();
        let b = c.alloc(64).unwrap();
        let t = Instant::now();
        let e = c.recv(b.first(64), Some(1), Some(0)).unwrap_err();
        Some((e.to_string(), t.elapsed()))
    });
    let (e, took) = out[0].clone().unwrap();
    assert!(e.contains("rank 1") && e.contains("64 bytes"), "{e}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "{took:?}"
    );
}
