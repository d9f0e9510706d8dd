//! Two UCX ranks in one process, driven by alternating polls, over tcp,
//! posix and shm: messages, ordering, one-sided visibility, key checks and
//! the native tag path with wildcards.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use ovbench_core::{
    Completion, LocalSlice, OpKind, Progress, RmaProgress, Transport, TransportError,
};
use ovbench_ucx::{UcxOptions, UcxTransport};

/// UCX contexts are created one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());
const DEADLINE: Duration = Duration::from_secs(20);

fn pair(tls: &str, progress: Progress) -> [UcxTransport; 2] {
    let mk = |r| {
        UcxTransport::new(
            r,
            2,
            UcxOptions {
                tls: Some(tls.into()),
                net_devices: None,
                progress,
            },
        )
        .unwrap_or_else(|e| panic!("UCX over {tls}: {e}"))
    };
    let mut t = [mk(0), mk(1)];
    let addrs = vec![t[0].address(), t[1].address()];
    // connect is collective: both ranks at once, as in a real job.
    let [a, b] = &mut t;
    std::thread::scope(|s| {
        let h = s.spawn(|| a.connect(&addrs));
        b.connect(&addrs).unwrap();
        h.join().unwrap().unwrap();
    });
    t
}

/// Poll both ranks until `done` says so; panics at the deadline.
fn drive(
    t: &mut [UcxTransport; 2],
    got: &mut [Vec<Completion>; 2],
    mut done: impl FnMut(&[Vec<Completion>; 2]) -> bool,
) {
    let end = Instant::now() + DEADLINE;
    while !done(got) {
        assert!(Instant::now() < end, "timed out; so far {got:?}");
        for r in 0..2 {
            t[r].poll(&mut got[r]).unwrap();
        }
    }
    for g in got.iter() {
        for c in g {
            assert!(
                !matches!(c, Completion::Error { .. }),
                "unexpected error {c:?}"
            );
        }
    }
}

fn messages(tls: &str) {
    let mut t = pair(tls, Progress::Poll);
    let r = t[0].alloc(4096).unwrap();
    let pay = LocalSlice::new(r, 100, 1000);
    t[0].write_region(pay, &mut |b| {
        b.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8)
    })
    .unwrap();
    let n = 50u64;
    for i in 0..n {
        let hdr = i.to_le_bytes();
        let p = (i % 2 == 0).then_some(pay);
        t[0].post_send(1, &hdr, p, 1000 + i).unwrap();
    }
    let mut got = [Vec::new(), Vec::new()];
    drive(&mut t, &mut got, |g| {
        g[1].iter()
            .filter(|c| matches!(c, Completion::Recv { .. }))
            .count()
            == n as usize
            && g[0]
                .iter()
                .filter(|c| matches!(c, Completion::Send { .. }))
                .count()
                == n as usize
    });
    let mut sends: Vec<u64> = got[0]
        .iter()
        .map(|c| match c {
            Completion::Send { ctx } => *ctx,
            c => panic!("{c:?}"),
        })
        .collect();
    sends.sort();
    assert_eq!(sends, (1000..1000 + n).collect::<Vec<_>>());
    for (i, c) in got[1].drain(..).enumerate() {
        let Completion::Recv { peer, data } = c else {
            panic!("{c:?}")
        };
        assert_eq!(peer, 0);
        assert_eq!(
            &data[..8],
            &(i as u64).to_le_bytes(),
            "messages out of posting order"
        );
        if i % 2 == 0 {
            assert_eq!(data.len(), 1008);
            assert!(data[8..].iter().enumerate().all(|(j, x)| *x == j as u8));
        } else {
            assert_eq!(data.len(), 8);
        }
        t[1].recycle(data);
    }
    // Too large for one eager buffer: refused at posting.
    let big = t[0].alloc(ovbench_ucx::EAGER_BUF_SIZE).unwrap();
    let e = t[0].post_send(
        1,
        &[0; 8],
        Some(LocalSlice::new(big, 0, ovbench_ucx::EAGER_BUF_SIZE)),
        0,
    );
    assert!(matches!(e, Err(TransportError::Invalid(_))), "{e:?}");
}

fn rma(tls: &str) {
    let mut t = pair(tls, Progress::Poll);
    let len = 256 * 1024;
    let src = t[0].alloc(len).unwrap();
    let dst = t[1].alloc(len).unwrap();
    let s = LocalSlice::new(src, 0, len);
    let d = LocalSlice::new(dst, 0, len);
    t[0].write_region(s, &mut |b| {
        b.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i * 7 % 251) as u8)
    })
    .unwrap();
    let ms = t[0].register(s).unwrap();
    let md = t[1].register(d).unwrap();
    let key = t[1].remote_key(md);
    assert!(!key.blob.is_empty());
    for size in [8usize, 4096, len - 64] {
        t[1].write_region(d, &mut |b| b.fill(0)).unwrap();
        t[0].post_write(1, s.sub(0, size), ms, &key, 64.min((len - size) as u64), 7)
            .unwrap();
        let mut got = [Vec::new(), Vec::new()];
        drive(&mut t, &mut got, |g| {
            g[0].iter()
                .any(|c| matches!(c, Completion::Write { ctx: 7 }))
        });
        // Visible at the target the moment the write completes.
        let off = 64.min(len - size);
        t[1].read_region(d, &mut |b| {
            assert!(
                b[off..off + size]
                    .iter()
                    .enumerate()
                    .all(|(i, x)| *x == (i * 7 % 251) as u8),
                "write of {size} not visible at completion"
            );
            assert!(b[..off].iter().all(|x| *x == 0));
        })
        .unwrap();
    }
    // Read it back into a cleared source.
    t[0].write_region(s, &mut |b| b.fill(0)).unwrap();
    t[0].post_read(1, s.sub(0, 4096), ms, &key, 64, 9).unwrap();
    let mut got = [Vec::new(), Vec::new()];
    drive(&mut t, &mut got, |g| {
        g[0].iter()
            .any(|c| matches!(c, Completion::Read { ctx: 9 }))
    });
    t[0].read_region(s.sub(0, 4096), &mut |b| {
        assert!(b.iter().enumerate().all(|(i, x)| *x == (i * 7 % 251) as u8))
    })
    .unwrap();
    // Out of range and forged keys are refused before anything moves.
    let e = t[0].post_write(1, s.sub(0, 128), ms, &key, key.len - 64, 1);
    assert!(
        matches!(e, Err(TransportError::BadKey { peer: 1, .. })),
        "{e:?}"
    );
    let mut forged = key.clone();
    forged.blob = vec![0xff; 3000];
    let e = t[0].post_read(1, s.sub(0, 8), ms, &forged, 0, 1);
    assert!(
        matches!(e, Err(TransportError::BadKey { peer: 1, .. })),
        "{e:?}"
    );
    // A local slice outside its registration is refused.
    let other = t[0].alloc(64).unwrap();
    let e = t[0].post_write(1, LocalSlice::new(other, 0, 8), ms, &key, 0, 1);
    assert!(matches!(e, Err(TransportError::Invalid(_))), "{e:?}");
    t[1].deregister(md).unwrap();
    t[0].deregister(ms).unwrap();
    t[0].free(src).unwrap();
}

fn tagged(tls: &str, progress: Progress) {
    let mut t = pair(tls, progress);
    let a = t[0].alloc(4096).unwrap();
    let b = t[1].alloc(4096).unwrap();
    let sa = LocalSlice::new(a, 0, 8);
    let sb = LocalSlice::new(b, 0, 4096);
    // Ping-pong with wildcards on both sides.
    for i in 0..200u32 {
        t[0].write_region(sa, &mut |x| x.copy_from_slice(&u64::from(i).to_le_bytes()))
            .unwrap();
        t[1].trecv(None, None, sb, 1).unwrap();
        t[0].tsend(1, 40 + i, sa, false, 2).unwrap();
        let mut got = [Vec::new(), Vec::new()];
        drive(&mut t, &mut got, |g| {
            g[1].iter()
                .any(|c| matches!(c, Completion::TaggedRecv { .. }))
        });
        match &got[1][0] {
            Completion::TaggedRecv {
                ctx: 1,
                peer: 0,
                tag,
                len: 8,
            } => assert_eq!(*tag, 40 + i),
            c => panic!("{c:?}"),
        }
        t[1].read_region(sb.sub(0, 8), &mut |x| {
            assert_eq!(x, &u64::from(i).to_le_bytes())
        })
        .unwrap();
        t[0].trecv(Some(1), None, LocalSlice::new(a, 8, 64), 3)
            .unwrap();
        t[1].tsend(0, 7, sb.sub(0, 8), i % 2 == 0, 4).unwrap();
        drive(&mut t, &mut got, |g| {
            g[0].iter().any(|c| {
                matches!(
                    c,
                    Completion::TaggedRecv {
                        ctx: 3,
                        peer: 1,
                        tag: 7,
                        len: 8
                    }
                )
            }) && g[0]
                .iter()
                .any(|c| matches!(c, Completion::TaggedSend { ctx: 2 }))
                && g[1]
                    .iter()
                    .any(|c| matches!(c, Completion::TaggedSend { ctx: 4 }))
        });
    }
    // A tag selector filters: the tag-5 message waits for its own receive.
    t[1].trecv(Some(0), Some(6), sb.sub(0, 8), 10).unwrap();
    t[0].tsend(1, 5, sa, false, 11).unwrap();
    t[0].tsend(1, 6, sa, false, 12).unwrap();
    let mut got = [Vec::new(), Vec::new()];
    drive(&mut t, &mut got, |g| {
        g[1].iter().any(|c| {
            matches!(
                c,
                Completion::TaggedRecv {
                    ctx: 10,
                    tag: 6,
                    ..
                }
            )
        })
    });
    t[1].trecv(None, Some(5), sb.sub(0, 8), 13).unwrap();
    drive(&mut t, &mut got, |g| {
        g[1].iter().any(|c| {
            matches!(
                c,
                Completion::TaggedRecv {
                    ctx: 13,
                    tag: 5,
                    ..
                }
            )
        })
    });
    // Synchronous send: no completion before the receive is posted.
    t[0].tsend(1, 99, sa, true, 20).unwrap();
    let mut got = [Vec::new(), Vec::new()];
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        t[0].poll(&mut got[0]).unwrap();
        t[1].poll(&mut got[1]).unwrap();
    }
    assert!(
        !got[0]
            .iter()
            .any(|c| matches!(c, Completion::TaggedSend { ctx: 20 })),
        "ssend completed before a receive was posted"
    );
    t[1].trecv(Some(0), Some(99), sb.sub(0, 8), 21).unwrap();
    drive(&mut t, &mut got, |g| {
        g[0].iter()
            .any(|c| matches!(c, Completion::TaggedSend { ctx: 20 }))
    });
    // Truncation is an error completion naming the receive.
    t[1].trecv(Some(0), Some(50), sb.sub(0, 4), 30).unwrap();
    t[0].tsend(1, 50, sa, false, 31).unwrap();
    let end = Instant::now() + DEADLINE;
    let mut got = [Vec::new(), Vec::new()];
    loop {
        assert!(Instant::now() < end, "no truncation error: {got:?}");
        t[0].poll(&mut got[0]).unwrap();
        t[1].poll(&mut got[1]).unwrap();
        if let Some(Completion::Error {
            ctx, op, status, ..
        }) = got[1]
            .iter()
            .find(|c| matches!(c, Completion::Error { .. }))
        {
            assert_eq!((*ctx, *op), (Some(30), OpKind::TaggedRecv));
            assert!(status.contains("truncated"), "{status}");
            break;
        }
    }
}

#[test]
fn tcp_messages() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    messages("tcp");
}

#[test]
fn posix_messages() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    messages("posix");
}

#[test]
fn tcp_rma() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    rma("tcp");
}

#[test]
fn posix_rma() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    rma("posix");
}

#[test]
fn shm_rma() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    rma("shm");
}

#[test]
fn tcp_tagged() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    tagged("tcp", Progress::Poll);
}

#[test]
fn posix_tagged() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    tagged("posix", Progress::Poll);
}

#[test]
fn tcp_tagged_progress_thread() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    tagged("tcp", Progress::Thread);
}

#[test]
fn rma_progress_follows_the_lanes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for (tls, want) in [
        ("tcp", RmaProgress::TargetProgress),
        ("posix", RmaProgress::TargetProgress),
        ("shm", RmaProgress::TargetProgress),
    ] {
        let t = pair(tls, Progress::Poll);
        let p = t[0].rma_path();
        eprintln!("{tls}: {p:?}");
        assert_eq!(t[0].caps().rma_progress, want, "{tls}: {p:?}");
        let info = t[0].info();
        assert!(info.library.starts_with("UCX "), "{info:?}");
        assert!(info
            .extra
            .iter()
            .any(|(k, v)| k == "UCX_TLS" && v.contains("self")));
    }
}

/// The caps' RMA-progress axis, observed: a read or write whose target
/// never polls does not complete — over tcp (software RMA) nor over shm
/// (UCX 1.13 serves it through the target even with a CMA lane), at any
/// size — unless the target has a progress thread.
#[test]
fn who_serves_rma_while_the_target_computes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for (tls, progress, served_alone) in [
        ("tcp", Progress::Poll, false),
        ("tcp", Progress::Thread, true),
        ("shm", Progress::Poll, false),
        ("shm", Progress::Thread, true),
    ] {
        for size in [4096usize, 1 << 20] {
            let mut t = pair(tls, progress);
            assert_eq!(t[0].caps().rma_progress, RmaProgress::TargetProgress);
            let remote = t[1].alloc(size).unwrap();
            let rs = LocalSlice::new(remote, 0, size);
            t[1].write_region(rs, &mut |b| b.fill(0x5c)).unwrap();
            let rmr = t[1].register(rs).unwrap();
            let key = t[1].remote_key(rmr);
            let local = t[0].alloc(size).unwrap();
            let ls = LocalSlice::new(local, 0, size);
            let lmr = t[0].register(ls).unwrap();
            for ctx in [42u64, 43] {
                if ctx == 42 {
                    t[0].post_read(1, ls, lmr, &key, 0, ctx).unwrap();
                } else {
                    t[0].post_write(1, ls, lmr, &key, 0, ctx).unwrap();
                }
                let mine = |c: &Completion| matches!(c, Completion::Read { ctx: c } | Completion::Write { ctx: c } if *c == ctx);
                let mut got = Vec::new();
                let wait = Duration::from_millis(if served_alone { 10_000 } else { 300 });
                let end = Instant::now() + wait;
                while Instant::now() < end && !got.iter().any(mine) {
                    t[0].poll(&mut got).unwrap();
                }
                let done = got.iter().any(mine);
                assert_eq!(
                    done, served_alone,
                    "{tls} {progress} {size} B op {ctx}: done without target polls: {done}"
                );
                if !done {
                    let mut both = [got, Vec::new()];
                    drive(&mut t, &mut both, |g| g[0].iter().any(mine));
                }
            }
            t[0].read_region(ls, &mut |b| assert!(b.iter().all(|&x| x == 0x5c)))
                .unwrap();
        }
    }
}

/// A transport name UCX does not know is refused with what to do.
#[test]
fn unknown_transport_is_explained() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let e = UcxTransport::new(
        0,
        2,
        UcxOptions {
            tls: Some("no_such_tl".into()),
            net_devices: None,
            progress: Progress::Poll,
        },
    );
    let msg = e
        .err()
        .expect("an unknown UCX transport must be refused")
        .to_string();
    assert!(msg.contains("ucx_info -d"), "{msg}");
    assert!(msg.contains("no_such_tl"), "{msg}");
}
