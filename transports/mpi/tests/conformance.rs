//! The conformance checks that apply to MPI, run by two ranks of a real
//! MPI job. Started by `cargo test`, the binary re-runs itself under
//! `mpirun -np 2` (`OVBENCH_MPIRUN` names another launcher, e.g. MPICH's
//! `mpiexec.hydra -n 2`), once per Open MPI one-sided component (osc rdma
//! and pt2pt), and each rank runs the checks on its own endpoint.
//!
//! Run here: the two-process exchange of the conformance crate (messages
//! both ways, the native tag path with wildcards, a key through the wire,
//! a write checked by its target, a read); message size limits and
//! zero-length messages; RMA refused out of range, through a garbled key,
//! another rank's key and a deregistered key; the waits (`MPI_Recv` as
//! `trecv_wait`, `MPI_Wait`, `MPI_Waitall`, `MPI_Test`) and every send
//! mode; a tag over `MPI_TAG_UB` (folded); errors: a bad rank, a truncated receive
//! returned as an error (MPI_ERRORS_RETURN), not an abort. Then the
//! communicator over the transport (`Comm::native`): its blocking send
//! and receive, each one library call, recorded as a CALL_ENTER/CALL_EXIT
//! pair around one call-bounded transfer while instrumenting, and their
//! errors named through it; and a ping-pong's calls bound once
//! (`Communicator::bind_pair`): bytes, counts and errors as unbound.
//!
//! Not run, and why (the suite's other checks drive every endpoint from
//! one thread of one process, which an MPI job cannot do: one process is
//! one rank): `identity_and_caps`, `regions` (covered by the unit checks
//! here: info, alloc and region access on each rank); `peer_dropped_reported`
//! (a killed rank ends an MPI job through mpirun; tests/mpi_e2e.rs checks
//! the watchdog's abort instead); `block_returns_when_ready` (the MPI
//! transport has no file descriptor to block on); `arrivals_contract`,
//! `send_done_contract`, `tsend_done_contract`, `send_end_known_once`,
//! `many_outstanding` (they interleave both endpoints' polls in one
//! thread; the methods' end-to-end runs exercise the same paths between
//! processes); `trecv_wait_contract`'s timeout and withdrawal (a blocking
//! `MPI_Recv` cannot time out: the watchdog ends it, tests/mpi_e2e.rs).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ovbench_conformance::processes;
use ovbench_core::clock::best_clock;
use ovbench_core::{
    Buf, Clock, Comm, Communicator, Completion, EngineConfig, LibraryCalls, LocalSlice, Msg, RmaOp,
    SendMode, TagRecv, TagSend, Tagged, Transport, TransportError, WorkLoop, XferTable,
};
use ovbench_mpi::{MpiJob, MpiOptions, MpiTransport, EAGER_BUF_SIZE};

const DEADLINE: Duration = Duration::from_secs(20);

fn main() {
    if std::env::var("OMPI_COMM_WORLD_SIZE").is_err() && std::env::var("PMI_SIZE").is_err() {
        return launch();
    }
    let job = MpiJob::init().expect("MPI starts");
    assert_eq!(job.size(), 2, "run with 2 ranks");
    let _dog = job.watchdog(DEADLINE).expect("watchdog");
    let me = job.rank();
    let mut t = job.transport(MpiOptions::default()).expect("transport");
    let osc = job.osc().map_or("-".into(), |o| o.component.clone());
    let kept = processes::in_job(&mut t);
    assert_eq!(kept.is_some(), me == 0);
    step(&mut t, "exchange");
    messages(&mut t);
    step(&mut t, "messages");
    rma_refusals(&mut t);
    step(&mut t, "rma");
    waits_and_modes(&mut t);
    step(&mut t, "waits");
    errors(&mut t);
    step(&mut t, "errors");
    communicator_calls(t);
    if me == 0 {
        println!("mpi conformance (osc {osc}): ok");
    }
}

/// Re-run this binary under the launcher, once per osc component.
fn launch() {
    let exe = std::env::current_exe().unwrap();
    let launcher =
        std::env::var("OVBENCH_MPIRUN").unwrap_or_else(|_| "mpirun --oversubscribe -np 2".into());
    let mut words = launcher.split_whitespace();
    let prog = words.next().unwrap();
    let open_mpi = !launcher.contains("hydra") && !launcher.contains("mpiexec");
    let oscs: &[&str] = if open_mpi { &["rdma", "pt2pt"] } else { &[""] };
    for osc in oscs {
        let mut c = Command::new(prog);
        c.args(words.clone()).arg(&exe);
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        if !osc.is_empty() {
            c.env("OMPI_MCA_osc", osc);
        }
        let st = c
            .status()
            .unwrap_or_else(|e| panic!("starting `{launcher}`: {e}"));
        assert!(
            st.success(),
            "the MPI conformance run (osc {osc}) failed: {st}"
        );
    }
}

/// Both ranks reach this point (over the native barrier), and say so.
fn step(t: &mut MpiTransport, name: &str) {
    lib(t)
        .barrier()
        .unwrap_or_else(|e| panic!("barrier after {name}: {e}"));
}

fn lib(t: &mut MpiTransport) -> &mut dyn LibraryCalls {
    t.library()
        .expect("the MPI transport offers the library's calls")
}

/// Poll until a completion satisfies `want`.
fn wait_for(t: &mut MpiTransport, want: &dyn Fn(&Completion) -> bool) -> Completion {
    let end = Instant::now() + DEADLINE;
    let mut out = Vec::new();
    loop {
        t.poll(&mut out, None).unwrap();
        if let Some(i) = out.iter().position(want) {
            return out.swap_remove(i);
        }
        if let Some(e) = out.iter().find(|c| matches!(c, Completion::Error { .. })) {
            panic!("{e:?}");
        }
        assert!(Instant::now() < end, "timed out waiting");
    }
}

fn recv(t: &mut MpiTransport) -> Vec<u8> {
    match wait_for(t, &|c| matches!(c, Completion::Recv { .. })) {
        Completion::Recv { data, .. } => data,
        _ => unreachable!(),
    }
}

/// The largest message goes through whole; one byte more is refused
/// before anything is sent; an empty message arrives empty.
fn messages(t: &mut MpiTransport) {
    let me = t.info().rank;
    let region = t.alloc(EAGER_BUF_SIZE).unwrap();
    let full = LocalSlice::new(region, 0, EAGER_BUF_SIZE - 4);
    t.region(full, &mut |b| {
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
    })
    .unwrap();
    if me == 0 {
        t.post_send(1, Msg::new(b"head", Some(full)), 1).unwrap();
        t.post_send(1, Msg::new(b"", None), 2).unwrap();
        let too_big = LocalSlice::new(region, 0, EAGER_BUF_SIZE);
        let e = t
            .post_send(1, Msg::new(b"x", Some(too_big)), 3)
            .unwrap_err();
        assert!(e.to_string().contains("rank 1"), "{e}");
    } else {
        let m = recv(t);
        assert_eq!(m.len(), EAGER_BUF_SIZE, "the largest message arrives whole");
        assert_eq!(&m[..4], b"head");
        assert!(m[4..]
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i % 251) as u8));
        assert!(recv(t).is_empty(), "an empty message arrives empty");
    }
    // Every message sent has left.
    let mut out = Vec::new();
    let end = Instant::now() + DEADLINE;
    while Instant::now() < end && !out.is_empty() {
        t.poll(&mut out, None).unwrap();
    }
    t.free(region).unwrap();
}

/// One-sided accesses that must be refused, naming the peer, and leave
/// the target untouched. A deregistered key is refused at the post once
/// its revocation has arrived (Open MPI's osc rdma would also refuse it
/// at the target; MPICH and osc pt2pt would perform it).
fn rma_refusals(t: &mut MpiTransport) {
    let me = t.info().rank;
    let region = t.alloc(8192).unwrap();
    let whole = LocalSlice::new(region, 0, 8192);
    let reg = t.register(whole).unwrap();
    // A second region, registered then dropped by rank 1.
    let gone_region = t.alloc(4096).unwrap();
    let gone = t.register(LocalSlice::new(gone_region, 0, 4096)).unwrap();
    if me == 1 {
        let mut msg = Vec::new();
        reg.key.encode(&mut msg);
        gone.key.encode(&mut msg);
        t.deregister(gone.mr).unwrap();
        t.post_send(0, Msg::new(&msg, None), 1).unwrap();
        assert_eq!(recv(t), b"tried");
        t.region(whole, &mut |b| {
            assert!(b.iter().all(|&x| x == 0), "a refused access wrote here")
        })
        .unwrap();
        t.region(LocalSlice::new(gone_region, 0, 4096), &mut |b| {
            assert!(
                b.iter().all(|&x| x == 0),
                "a write through a dropped key landed"
            )
        })
        .unwrap();
    } else {
        t.region(whole, &mut |b| b.fill(0xab)).unwrap();
        let m = recv(t);
        let (key, n) = ovbench_core::RemoteKey::decode(&m).unwrap();
        let (dropped, _) = ovbench_core::RemoteKey::decode(&m[n..]).unwrap();
        let src = LocalSlice::new(region, 0, 16);
        // Out of range: past the key's end.
        let e = t
            .post_rma(1, RmaOp::write(src, reg.mr, &key, 8190), 1)
            .unwrap_err();
        assert!(matches!(e, TransportError::BadKey { peer: 1, .. }), "{e}");
        // Garbled: one byte of the blob flipped.
        let mut bad = key.clone();
        let last = bad.blob.len() - 1;
        bad.blob[last] ^= 0x5a;
        let e = t
            .post_rma(1, RmaOp::write(src, reg.mr, &bad, 0), 2)
            .unwrap_err();
        assert!(e.to_string().contains("rank 1"), "{e}");
        // Another rank's key (its own) used towards rank 1.
        let e = t
            .post_rma(1, RmaOp::write(src, reg.mr, &reg.key, 0), 3)
            .unwrap_err();
        assert!(e.to_string().contains("another rank"), "{e}");
        // A deregistered key: the window no longer holds that memory.
        let refused = match t.post_rma(1, RmaOp::write(src, reg.mr, &dropped, 0), 4) {
            Err(e) => {
                assert!(e.to_string().contains("rank 1"), "{e}");
                true
            }
            Ok(()) => {
                let mut out = Vec::new();
                let end = Instant::now() + DEADLINE;
                loop {
                    match t.poll(&mut out, None) {
                        Err(e) => {
                            assert!(e.to_string().contains("rank 1"), "{e}");
                            break true;
                        }
                        Ok(_) if out.iter().any(|c| matches!(c, Completion::Error { .. })) => {
                            break true
                        }
                        Ok(_)
                            if out
                                .iter()
                                .any(|c| matches!(c, Completion::Write { ctx: 4 })) =>
                        {
                            break false
                        }
                        Ok(_) => assert!(Instant::now() < end, "no end to the write"),
                    }
                }
            }
        };
        assert!(refused, "a write through a deregistered key completed");
        t.post_send(1, Msg::new(b"tried", None), 5).unwrap();
    }
    t.deregister(reg.mr).unwrap();
    if me == 0 {
        t.deregister(gone.mr).unwrap();
    }
    t.free(region).unwrap();
    t.free(gone_region).unwrap();
}

/// Every send mode and the waits: blocking (Send, Ssend, Rsend after the
/// receive is known posted, Bsend), nonblocking ones finished by Wait,
/// Waitall and Test, Sendrecv, and MPI_Recv as trecv_wait with wildcards.
fn waits_and_modes(t: &mut MpiTransport) {
    let me = t.info().rank;
    let peer = 1 - me;
    let region = t.alloc(1 << 20).unwrap();
    let a = LocalSlice::new(region, 0, 4096);
    let b = LocalSlice::new(region, 4096, 4096);
    let big = LocalSlice::new(region, 8192, 512 * 1024);
    t.region(a, &mut |x| x.fill(me as u8 + 1)).unwrap();
    let modes = [
        SendMode::Standard,
        SendMode::Synchronous,
        SendMode::Buffered,
        SendMode::Ready,
    ];
    for (k, mode) in modes.into_iter().enumerate() {
        let tag = 10 + k as u32;
        if me == 0 {
            if mode == SendMode::Ready {
                // The receive must be posted first: rank 1 says so.
                let st = lib(t).recv(Some(1), Some(99), b).unwrap();
                assert_eq!(st.len, 0);
            }
            lib(t).send(1, tag, a, mode).unwrap();
        } else {
            t.trecv(TagRecv::new(Some(0), Some(tag), b), 500 + k as u64)
                .unwrap();
            if mode == SendMode::Ready {
                lib(t)
                    .send(0, 99, LocalSlice::new(region, 0, 0), SendMode::Standard)
                    .unwrap();
            }
            let st = lib(t)
                .wait(500 + k as u64)
                .unwrap()
                .expect("a receive's status");
            assert_eq!((st.source, st.tag, st.len), (0, tag, 4096), "{mode:?}");
            t.region(b, &mut |x| assert!(x.iter().all(|&v| v == 1), "{mode:?}"))
                .unwrap();
        }
    }
    // Nonblocking sends of each mode, finished by one Waitall.
    if me == 0 {
        for (k, mode) in modes.into_iter().enumerate() {
            if mode == SendMode::Ready {
                lib(t).recv(Some(1), Some(98), b).unwrap();
            }
            lib(t)
                .isend(1, 20 + k as u32, a, mode, 600 + k as u64)
                .unwrap();
        }
        let mut out = Vec::new();
        lib(t).waitall(&[600, 601, 602, 603], &mut out).unwrap();
        assert_eq!(out.len(), 4);
        assert!(
            out.iter().all(Option::is_none),
            "sends carry no receive status"
        );
    } else {
        for k in 0..4u64 {
            let s = LocalSlice::new(region, 8192 + 8192 * k as usize, 4096);
            t.trecv(TagRecv::new(Some(0), Some(20 + k as u32), s), 700 + k)
                .unwrap();
            if k == 3 {
                lib(t)
                    .send(0, 98, LocalSlice::new(region, 0, 0), SendMode::Standard)
                    .unwrap();
            }
        }
        // MPI_Test until done, for the first; Wait for the rest.
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(st) = lib(t).test(700).unwrap() {
                assert_eq!(st.unwrap().tag, 20);
                break;
            }
            assert!(Instant::now() < end, "MPI_Test never finished");
        }
        for k in 1..4 {
            let st = lib(t).wait(700 + k).unwrap().unwrap();
            assert_eq!((st.source, st.len), (0, 4096));
        }
    }
    // Sendrecv both ways at once, and a large message (rendezvous).
    let st = lib(t)
        .sendrecv(
            TagSend::new(peer, 30, a, false),
            TagRecv::new(Some(peer), Some(30), b),
        )
        .unwrap();
    assert_eq!((st.source, st.len), (peer, 4096));
    t.region(b, &mut |x| assert!(x.iter().all(|&v| v == peer as u8 + 1)))
        .unwrap();
    if me == 0 {
        t.tsend(TagSend::new(1, 31, big, true), 800).unwrap();
        wait_for(t, &|c| matches!(c, Completion::TaggedSend { ctx: 800 }));
    } else {
        // MPI_Recv, wildcards: the source and tag come back.
        match t
            .trecv_wait(TagRecv::new(None, None, big), DEADLINE)
            .unwrap()
        {
            ovbench_core::Waited::Done { peer, tag, len } => {
                assert_eq!((peer, tag, len), (0, 31, 512 * 1024))
            }
            w => panic!("{w:?}"),
        }
    }
    // The library's broadcast.
    if me == 0 {
        t.region(a, &mut |x| x.fill(0x42)).unwrap();
    }
    lib(t).bcast(0, a).unwrap();
    t.region(a, &mut |x| assert!(x.iter().all(|&v| v == 0x42)))
        .unwrap();
    t.free(region).unwrap();
}

/// Errors name what went wrong and the run goes on: MPI_ERRORS_RETURN.
fn errors(t: &mut MpiTransport) {
    let me = t.info().rank;
    let region = t.alloc(64).unwrap();
    let s = LocalSlice::new(region, 0, 8);
    let e = lib(t).send(7, 1, s, SendMode::Standard).unwrap_err();
    assert!(
        e.to_string().contains("rank 7") && e.to_string().contains("2 ranks"),
        "{e}"
    );
    // ovbench's own method tags lie above MPICH's MPI_TAG_UB (2^28 - 1):
    // folded into its range, they still match.
    const METHOD_TAG: u32 = 0x4f56_0303;
    if me == 0 {
        lib(t).send(1, METHOD_TAG, s, SendMode::Standard).unwrap();
    } else {
        let st = lib(t).recv(Some(0), Some(METHOD_TAG), s).unwrap();
        assert_eq!(st.len, 8);
    }
    if me == 0 {
        lib(t).send(1, 40, s, SendMode::Standard).unwrap();
    } else {
        let e = lib(t)
            .recv(Some(0), Some(40), LocalSlice::new(region, 0, 4))
            .unwrap_err();
        let text = e.to_string();
        // Open MPI says MPI_ERR_TRUNCATE, MPICH "Message truncated".
        let lower = text.to_lowercase();
        assert!(
            text.contains("MPI_Recv") && lower.contains("truncate"),
            "{text}"
        );
        assert!(text.contains("rank 0"), "{text}");
    }
    t.free(region).unwrap();
}

/// Messages of the communicator's blocking calls below.
const PINGS: u64 = 5;

/// The communicator over the library's calls (`--proto native`): every
/// blocking send and receive is one `MPI_Send`/`MPI_Recv`, and the
/// communicator's own bookkeeping around it (shortened to the least a
/// call needs) must still record it and name its errors.
fn communicator_calls(t: MpiTransport) {
    let me = t.info().rank;
    let peer = 1 - me;
    let clock: Arc<dyn Clock> = best_clock().into();
    let work = Box::new(WorkLoop::calibrate(clock.clone(), Duration::from_millis(5)));
    let mut c = Comm::native(Box::new(t), clock, work, EngineConfig::default())
        .expect("a communicator over the library's calls");
    let buf = c.alloc(64).unwrap();
    let sent = c.op_counts().tagged_sends;
    c.enable_instrumentation(XferTable::new(vec![(8, 100.0)]).unwrap())
        .unwrap();
    let now = c.now();
    c.instrumentation().unwrap().reset(now);
    for _ in 0..PINGS {
        if me == 0 {
            c.send(buf.first(8), 1, 50).unwrap();
            let st = c.recv(buf.first(64), Some(1), Some(51)).unwrap();
            assert_eq!((st.source, st.tag, st.len), (1, 51, 8));
        } else {
            let st = c.recv(buf.first(64), Some(0), Some(50)).unwrap();
            assert_eq!((st.source, st.tag, st.len), (0, 50, 8));
            c.send(buf.first(8), 0, 51).unwrap();
        }
    }
    let r = c.overlap_report().expect("recording");
    // Per call: CALL_ENTER, XFER_BEGIN at the entry, XFER_END, CALL_EXIT.
    assert_eq!(r.transfers, 2 * PINGS, "{r:?}");
    assert_eq!(r.events, 8 * PINGS, "{r:?}");
    assert_eq!(r.one_sided_transfers, 0, "{r:?}");
    assert!(r.call_ns > 0.0, "{r:?}");
    assert_eq!(c.op_counts().tagged_sends - sent, PINGS);
    // A call that fails is closed all the same.
    let e = c.send(buf.first(8), 7, 1).unwrap_err().to_string();
    assert!(e.contains("rank 7") && e.contains("2 ranks"), "{e}");
    assert!(!c.instrumentation().unwrap().in_call(), "{e}");
    let r = c.overlap_report().unwrap();
    assert_eq!(r.events, 8 * PINGS + 4, "{r:?}");
    // Recording: a ping-pong keeps the communicator's calls (their events).
    assert!(c
        .bind_pair(buf.first(8), buf.at(8, 8), peer, 1)
        .unwrap()
        .is_none());
    // Not recording: the same calls, errors named the same way.
    c.disable_instrumentation();
    let e = c.send(buf.first(8), 7, 1).unwrap_err().to_string();
    assert!(e.contains("rank 7") && e.contains("2 ranks"), "{e}");
    let e = c.send(buf.at(60, 8), peer, 1).unwrap_err().to_string();
    assert!(e.contains("outside its 64-byte buffer"), "{e}");
    // A buffer claiming more than its region: the transport's check.
    let wide = Buf {
        region: buf.region,
        len: 1 << 20,
    };
    let e = c
        .recv(wide.at(4096, 8), Some(peer), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside region"), "{e}");
    if me == 0 {
        c.send(buf.first(8), 1, 52).unwrap();
    } else {
        let e = c
            .recv(buf.first(4), Some(0), Some(52))
            .unwrap_err()
            .to_string();
        let lower = e.to_lowercase();
        assert!(
            e.contains("MPI_Recv") && lower.contains("truncate") && e.contains("rank 0"),
            "{e}"
        );
    }
    c.barrier().expect("barrier after the communicator's calls");
    bound_calls(&mut c, me, peer);
}

/// A ping-pong's calls bound once (`Communicator::bind_pair` over
/// `LibraryCalls::bind`): the bytes arrive, the sends are counted as the
/// unbound calls count them, and binding checks what each call checked,
/// naming it; a receive too short for the message fails as `MPI_Recv`.
fn bound_calls(c: &mut Comm, me: u32, peer: u32) {
    let (sb, rb) = (c.alloc(64).unwrap(), c.alloc(64).unwrap());
    c.fill(sb, &mut |x| {
        x.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i as u32 * 3 + me) as u8)
    })
    .unwrap();
    let sent = c.op_counts().tagged_sends;
    {
        let mut b = c
            .bind_pair(sb.first(40), rb.first(40), peer, 53)
            .unwrap()
            .expect("the library's calls bind");
        for _ in 0..PINGS {
            if me == 0 {
                b.send().unwrap();
                b.recv().unwrap();
            } else {
                b.recv().unwrap();
                b.send().unwrap();
            }
        }
    }
    assert_eq!(c.op_counts().tagged_sends - sent, PINGS);
    let mut got = Vec::new();
    c.inspect(rb, &mut |x| got = x[..40].to_vec()).unwrap();
    let want: Vec<u8> = (0..40u32).map(|i| (i * 3 + peer) as u8).collect();
    assert_eq!(got, want, "the bound receive's bytes");
    let e = c
        .bind_pair(sb.first(8), rb.first(8), 7, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 7") && e.contains("2 ranks"), "{e}");
    let wide = Buf {
        region: rb.region,
        len: 1 << 20,
    };
    let e = c
        .bind_pair(sb.first(8), wide.at(4096, 8), peer, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside region"), "{e}");
    let mut b = c
        .bind_pair(sb.first(8), rb.first(4), peer, 54)
        .unwrap()
        .expect("the library's calls bind");
    if me == 0 {
        b.send().unwrap();
    } else {
        let e = b.recv().unwrap_err().to_string();
        let lower = e.to_lowercase();
        assert!(
            e.contains("MPI_Recv") && lower.contains("truncate") && e.contains("rank 0"),
            "{e}"
        );
    }
    drop(b);
    c.barrier().expect("barrier after the bound calls");
}
