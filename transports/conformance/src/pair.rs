//! Scenarios on two ranks of one fabric transport in one process, driven
//! by alternating polls: messages and their order, one-sided visibility
//! and key checks, the native tag path with wildcards, and who serves RMA
//! while the target computes. The UCX and libfabric crates' `pair` tests
//! run them over each of their transports or providers; a failure panics,
//! as a test does.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ovbench_core::{
    Completion, Ctx, LocalSlice, Msg, OpKind, Posted, Rank, RmaOp, Tag, TagRecv, TagSend, Tagged,
    Transport, TransportError,
};

/// How long any one step may take.
pub const DEADLINE: Duration = Duration::from_secs(20);

static SERIAL: Mutex<()> = Mutex::new(());

/// Held by each test while it runs, so that library contexts are opened
/// one test at a time (a test that failed holding it does not block the
/// others).
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A scenario of this module, for a crate's table of where each runs.
#[derive(Clone, Copy, Debug)]
pub enum Scenario {
    /// [`messages`], with the transport's eager buffer size.
    Messages(usize),
    /// [`rma`].
    Rma,
    /// [`tagged`].
    Tagged,
}

/// Run each scenario of `table` over each of its setups, on a fresh pair
/// from `open`, one at a time: one table per crate instead of a test
/// function per (scenario, setup). The failing case is named on stderr
/// before it runs.
pub fn run_table<S: Copy + std::fmt::Debug, T: Transport>(
    table: &[(Scenario, &[S])],
    open: impl Fn(S) -> [T; 2],
) {
    for &(scenario, setups) in table {
        for &setup in setups {
            let _g = one_at_a_time();
            eprintln!("{scenario:?} over {setup:?}");
            let t = open(setup);
            match scenario {
                Scenario::Messages(eager_buf_size) => messages(t, eager_buf_size),
                Scenario::Rma => rma(t),
                Scenario::Tagged => tagged(t),
            }
        }
    }
}

/// Connect two fresh ranks to each other. `connect` is collective: both
/// ranks at once, as in a real job.
pub fn connect<T: Transport>(mut t: [T; 2]) -> [T; 2] {
    let addrs = vec![t[0].address(), t[1].address()];
    let [a, b] = &mut t;
    std::thread::scope(|s| {
        let h = s.spawn(|| a.connect(&addrs));
        b.connect(&addrs).unwrap();
        h.join().unwrap().unwrap();
    });
    t
}

/// Poll both ranks until `done` says so; panics at the deadline.
pub fn drive<T: Transport>(
    t: &mut [T; 2],
    got: &mut [Vec<Completion>; 2],
    mut done: impl FnMut(&[Vec<Completion>; 2]) -> bool,
) {
    let end = Instant::now() + DEADLINE;
    while !done(got) {
        assert!(Instant::now() < end, "timed out; so far {got:?}");
        for r in 0..2 {
            t[r].poll(&mut got[r], None).unwrap();
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

/// The sender and length of the `TaggedRecv` with `ctx` and `tag` among
/// `got`, if there is one.
fn tagged_recv(got: &[Completion], ctx: Ctx, tag: Tag) -> Option<(Rank, usize)> {
    got.iter().find_map(|c| match *c {
        Completion::TaggedRecv {
            ctx: c,
            peer,
            tag: t,
            len,
        } if c == ctx && t == tag => Some((peer, len)),
        _ => None,
    })
}

/// `t`'s tagged protocol (the pairs that run [`tagged`] have one).
fn tg<T: Transport>(t: &mut T) -> &mut dyn Tagged {
    t.tagged().expect("a transport with a tagged protocol")
}

/// `tsend` from `t`; a send that ended inside the call ([`Posted::Done`])
/// gets the `TaggedSend` its caller records, pushed onto `got`, so that
/// each send ends in exactly one `TaggedSend` there.
fn tsend<T: Transport>(
    t: &mut T,
    got: &mut Vec<Completion>,
    op: TagSend,
    ctx: Ctx,
) -> Result<Posted, TransportError> {
    let p = tg(t).tsend(op, ctx)?;
    if let Posted::Done(_) = p {
        got.push(Completion::TaggedSend { ctx });
    }
    Ok(p)
}

/// Messages in posting order, with and without payload, and the refusal
/// of one larger than an eager buffer of `eager_buf_size` bytes.
pub fn messages<T: Transport>(mut t: [T; 2], eager_buf_size: usize) {
    let r = t[0].alloc(4096).unwrap();
    let pay = LocalSlice::new(r, 100, 1000);
    t[0].region(pay, &mut |b| {
        b.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8)
    })
    .unwrap();
    let n = 50u64;
    let mut got = [Vec::new(), Vec::new()];
    for i in 0..n {
        let hdr = i.to_le_bytes();
        let p = (i % 2 == 0).then_some(pay);
        // A send that ended inside the call is recorded by its caller.
        if let Posted::Done(_) = t[0].post_send(1, Msg::new(&hdr, p), 1000 + i).unwrap() {
            got[0].push(Completion::Send { ctx: 1000 + i });
        }
    }
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
    let big = t[0].alloc(eager_buf_size).unwrap();
    let e = t[0].post_send(
        1,
        Msg::new(&[0; 8], Some(LocalSlice::new(big, 0, eager_buf_size))),
        0,
    );
    assert!(matches!(e, Err(TransportError::Invalid(_))), "{e:?}");
}

/// Writes visible at the target on completion, a read back, and the
/// refusal of out-of-range and forged keys and of a local slice outside
/// its registration.
pub fn rma<T: Transport>(mut t: [T; 2]) {
    let len = 256 * 1024;
    let src = t[0].alloc(len).unwrap();
    let dst = t[1].alloc(len).unwrap();
    let s = LocalSlice::new(src, 0, len);
    let d = LocalSlice::new(dst, 0, len);
    t[0].region(s, &mut |b| {
        b.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i * 7 % 251) as u8)
    })
    .unwrap();
    let ms = t[0].register(s).unwrap().mr;
    let reg = t[1].register(d).unwrap();
    let (md, key) = (reg.mr, reg.key);
    assert!(!key.blob.is_empty());
    for size in [8usize, 4096, len - 64] {
        t[1].region(d, &mut |b| b.fill(0)).unwrap();
        t[0].post_rma(
            1,
            RmaOp::write(s.sub(0, size), ms, &key, 64.min((len - size) as u64)),
            7,
        )
        .unwrap();
        let mut got = [Vec::new(), Vec::new()];
        drive(&mut t, &mut got, |g| {
            g[0].iter()
                .any(|c| matches!(c, Completion::Write { ctx: 7 }))
        });
        // Visible at the target the moment the write completes.
        let off = 64.min(len - size);
        t[1].region(d, &mut |b| {
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
    t[0].region(s, &mut |b| b.fill(0)).unwrap();
    t[0].post_rma(1, RmaOp::read(s.sub(0, 4096), ms, &key, 64), 9)
        .unwrap();
    let mut got = [Vec::new(), Vec::new()];
    drive(&mut t, &mut got, |g| {
        g[0].iter()
            .any(|c| matches!(c, Completion::Read { ctx: 9 }))
    });
    t[0].region(s.sub(0, 4096), &mut |b| {
        assert!(b.iter().enumerate().all(|(i, x)| *x == (i * 7 % 251) as u8))
    })
    .unwrap();
    // Out of range and forged keys are refused before anything moves.
    let e = t[0].post_rma(1, RmaOp::write(s.sub(0, 128), ms, &key, key.len - 64), 1);
    assert!(
        matches!(e, Err(TransportError::BadKey { peer: 1, .. })),
        "{e:?}"
    );
    let mut forged = key.clone();
    forged.blob = vec![0xff; 3000];
    let e = t[0].post_rma(1, RmaOp::read(s.sub(0, 8), ms, &forged, 0), 1);
    assert!(
        matches!(e, Err(TransportError::BadKey { peer: 1, .. })),
        "{e:?}"
    );
    // A local slice outside its registration is refused.
    let other = t[0].alloc(64).unwrap();
    let e = t[0].post_rma(
        1,
        RmaOp::write(LocalSlice::new(other, 0, 8), ms, &key, 0),
        1,
    );
    assert!(matches!(e, Err(TransportError::Invalid(_))), "{e:?}");
    t[1].deregister(md).unwrap();
    t[0].deregister(ms).unwrap();
    t[0].free(src).unwrap();
}

/// The native tag path: ping-pong with wildcards, tag selectors, a
/// synchronous send (or its refusal where the caps say it cannot be
/// expressed) and truncation reported as an error completion.
pub fn tagged<T: Transport>(mut t: [T; 2]) {
    let sync_ok = t[0].info().caps.native_sync_send;
    let a = t[0].alloc(4096).unwrap();
    let b = t[1].alloc(4096).unwrap();
    let sa = LocalSlice::new(a, 0, 8);
    let sb = LocalSlice::new(b, 0, 4096);
    // Ping-pong with wildcards on both sides.
    for i in 0..200u32 {
        t[0].region(sa, &mut |x| x.copy_from_slice(&u64::from(i).to_le_bytes()))
            .unwrap();
        tg(&mut t[1])
            .trecv(TagRecv::new(None, None, sb), 1)
            .unwrap();
        let mut got = [Vec::new(), Vec::new()];
        tsend(
            &mut t[0],
            &mut got[0],
            TagSend::new(1, 40 + i, sa, false),
            2,
        )
        .unwrap();
        drive(&mut t, &mut got, |g| {
            g[1].iter()
                .any(|c| matches!(c, Completion::TaggedRecv { .. }))
        });
        match got[1]
            .iter()
            .find(|c| matches!(c, Completion::TaggedRecv { .. }))
            .expect("waited for")
        {
            Completion::TaggedRecv {
                ctx: 1,
                peer: 0,
                tag,
                len: 8,
            } => assert_eq!(*tag, 40 + i),
            c => panic!("{c:?}"),
        }
        t[1].region(sb.sub(0, 8), &mut |x| {
            assert_eq!(x, &u64::from(i).to_le_bytes())
        })
        .unwrap();
        tg(&mut t[0])
            .trecv(TagRecv::new(Some(1), None, LocalSlice::new(a, 8, 64)), 3)
            .unwrap();
        tsend(
            &mut t[1],
            &mut got[1],
            TagSend::new(0, 7, sb.sub(0, 8), sync_ok && i % 2 == 0),
            4,
        )
        .unwrap();
        drive(&mut t, &mut got, |g| {
            tagged_recv(&g[0], 3, 7) == Some((1, 8))
                && g[0]
                    .iter()
                    .any(|c| matches!(c, Completion::TaggedSend { ctx: 2 }))
                && g[1]
                    .iter()
                    .any(|c| matches!(c, Completion::TaggedSend { ctx: 4 }))
        });
    }
    // A tag selector filters: the tag-5 message waits for its own receive.
    tg(&mut t[1])
        .trecv(TagRecv::new(Some(0), Some(6), sb.sub(0, 8)), 10)
        .unwrap();
    let mut got = [Vec::new(), Vec::new()];
    tsend(&mut t[0], &mut got[0], TagSend::new(1, 5, sa, false), 11).unwrap();
    tsend(&mut t[0], &mut got[0], TagSend::new(1, 6, sa, false), 12).unwrap();
    drive(&mut t, &mut got, |g| tagged_recv(&g[1], 10, 6).is_some());
    tg(&mut t[1])
        .trecv(TagRecv::new(None, Some(5), sb.sub(0, 8)), 13)
        .unwrap();
    drive(&mut t, &mut got, |g| tagged_recv(&g[1], 13, 5).is_some());
    // Synchronous send: no completion before the receive is posted; where
    // the provider cannot express it, a clear refusal.
    let mut got = [Vec::new(), Vec::new()];
    if !sync_ok {
        let e = tg(&mut t[0]).tsend(TagSend::new(1, 99, sa, true), 20);
        assert!(
            matches!(&e, Err(TransportError::Unsupported(m)) if m.contains("n/a")),
            "{e:?}"
        );
        tsend(&mut t[0], &mut got[0], TagSend::new(1, 99, sa, false), 20).unwrap();
    } else {
        let p = tg(&mut t[0])
            .tsend(TagSend::new(1, 99, sa, true), 20)
            .unwrap();
        assert_eq!(p, Posted::Queued, "ssend ended before a receive was posted");
    }
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        t[0].poll(&mut got[0], None).unwrap();
        t[1].poll(&mut got[1], None).unwrap();
    }
    if sync_ok {
        assert!(
            !got[0]
                .iter()
                .any(|c| matches!(c, Completion::TaggedSend { ctx: 20 })),
            "ssend completed before a receive was posted"
        );
    }
    tg(&mut t[1])
        .trecv(TagRecv::new(Some(0), Some(99), sb.sub(0, 8)), 21)
        .unwrap();
    drive(&mut t, &mut got, |g| {
        g[0].iter()
            .any(|c| matches!(c, Completion::TaggedSend { ctx: 20 }))
    });
    // Truncation is an error completion naming the receive.
    tg(&mut t[1])
        .trecv(TagRecv::new(Some(0), Some(50), sb.sub(0, 4)), 30)
        .unwrap();
    tg(&mut t[0])
        .tsend(TagSend::new(1, 50, sa, false), 31)
        .unwrap();
    let end = Instant::now() + DEADLINE;
    let mut got = [Vec::new(), Vec::new()];
    loop {
        assert!(Instant::now() < end, "no truncation error: {got:?}");
        t[0].poll(&mut got[0], None).unwrap();
        t[1].poll(&mut got[1], None).unwrap();
        if let Some(Completion::Error {
            ctx, op, status, ..
        }) = got[1]
            .iter()
            .find(|c| matches!(c, Completion::Error { .. }))
        {
            assert_eq!((*ctx, *op), (Some(30), OpKind::TaggedRecv));
            assert!(status.to_lowercase().contains("truncat"), "{status}");
            break;
        }
    }
}

/// One-sided operations of `size` bytes while the target computes (never
/// polls): whether a read and a write complete on the initiator's polls
/// alone must match `alone` (read, write); `what` names the case.
pub fn rma_while_target_computes<T: Transport>(
    t: &mut [T; 2],
    size: usize,
    (read_alone, write_alone): (bool, bool),
    what: &str,
) {
    let remote = t[1].alloc(size).unwrap();
    let rs = LocalSlice::new(remote, 0, size);
    t[1].region(rs, &mut |b| b.fill(0x5c)).unwrap();
    let key = t[1].register(rs).unwrap().key;
    let local = t[0].alloc(size).unwrap();
    let ls = LocalSlice::new(local, 0, size);
    let lmr = t[0].register(ls).unwrap().mr;
    for (ctx, alone) in [(42u64, read_alone), (43, write_alone)] {
        if ctx == 42 {
            t[0].post_rma(1, RmaOp::read(ls, lmr, &key, 0), ctx)
                .unwrap();
        } else {
            t[0].post_rma(1, RmaOp::write(ls, lmr, &key, 0), ctx)
                .unwrap();
        }
        let mine = |c: &Completion| matches!(c, Completion::Read { ctx: c } | Completion::Write { ctx: c } if *c == ctx);
        let mut got = Vec::new();
        let wait = Duration::from_millis(if alone { 10_000 } else { 300 });
        let end = Instant::now() + wait;
        while Instant::now() < end && !got.iter().any(mine) {
            t[0].poll(&mut got, None).unwrap();
        }
        let done = got.iter().any(mine);
        assert_eq!(
            done, alone,
            "{what} {size} B op {ctx}: done without target polls: {done}"
        );
        if !done {
            let mut both = [got, Vec::new()];
            drive(t, &mut both, |g| g[0].iter().any(mine));
        }
    }
    t[0].region(ls, &mut |b| assert!(b.iter().all(|&x| x == 0x5c)))
        .unwrap();
}
