//! The difference progress makes (issue 2): a read from a rank that is
//! computing, not calling the library, completes only once that rank polls
//! again under `Progress::Poll`, and during its computation under
//! `Progress::Thread`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ovbench_core::RmaOp;
use ovbench_core::{Completion, LocalSlice, Progress};

mod util;

/// How long the target computes without calling the library under
/// `Progress::Poll`.
const COMPUTE: Duration = Duration::from_millis(600);
/// Under `Progress::Thread` the target computes until the initiator has
/// its read, at most this long (under the initiator's 10 s deadline): a
/// hang guard, not a timing claim.
const CAP: Duration = Duration::from_secs(8);

/// When the read completed at the initiator, and when the target's
/// computation started and ended.
struct Timeline {
    compute_start: Instant,
    compute_end: Instant,
    read_done: Instant,
}

/// Compute for `d`, or until `done` is set, whichever comes first.
fn spin(d: Duration, done: &AtomicBool) {
    let t0 = Instant::now();
    let mut x = 0u64;
    while t0.elapsed() < d && !done.load(Ordering::Acquire) {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// The target computes for `compute`, or, with `until_read`, until the
/// initiator's read has completed (at most `compute`).
fn read_during_compute(progress: Progress, compute: Duration, until_read: bool) -> Timeline {
    let mut ts = util::connected(2, progress);
    let len = 4096;
    let remote = ts[1].alloc(len).unwrap();
    let rs = LocalSlice::new(remote, 0, len);
    ts[1].region(rs, &mut |b| b.fill(0x3C)).unwrap();
    let rmr_reg = ts[1].register(rs).unwrap();
    let key = rmr_reg.key.clone();
    let local = ts[0].alloc(len).unwrap();
    let ls = LocalSlice::new(local, 0, len);
    let lmr_reg = ts[0].register(ls).unwrap();
    let lmr = lmr_reg.mr;

    let mut target = ts.pop().unwrap();
    let mut initiator = ts.pop().unwrap();
    let stop = AtomicBool::new(false);
    let read = AtomicBool::new(false);
    let never = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel();
    let timeline = std::thread::scope(|s| {
        let (stop, read) = (&stop, &read);
        let done = if until_read { read } else { &never };
        let t = s.spawn(move || {
            let start = Instant::now();
            tx.send(start).unwrap();
            spin(compute, done);
            let end = Instant::now();
            // Back in the library: serve until the initiator is done.
            let mut out = Vec::new();
            while !stop.load(Ordering::Acquire) && end.elapsed() < Duration::from_secs(10) {
                target.poll(&mut out, None).unwrap();
                assert!(
                    !out.iter().any(|c| matches!(c, Completion::Error { .. })),
                    "{out:?}"
                );
                out.clear();
            }
            (start, end, target)
        });
        let compute_start = rx.recv().unwrap();
        // Let the target be well inside its computation.
        std::thread::sleep(Duration::from_millis(50));
        initiator
            .post_rma(1, RmaOp::read(ls, lmr, &key, 0), 9)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut out = Vec::new();
        let read_done = loop {
            initiator.poll(&mut out, None).unwrap();
            if let Some(c) = out.iter().find(|c| !matches!(c, Completion::Send { .. })) {
                assert!(matches!(c, Completion::Read { ctx: 9 }), "{c:?}");
                let at = Instant::now();
                read.store(true, Ordering::Release);
                break at;
            }
            assert!(Instant::now() < deadline, "the read never completed");
        };
        stop.store(true, Ordering::Release);
        let (start, compute_end, _target) = t.join().unwrap();
        assert_eq!(start, compute_start);
        Timeline {
            compute_start,
            compute_end,
            read_done,
        }
    });
    let mut got = Vec::new();
    initiator
        .region(ls, &mut |b| got.extend_from_slice(b))
        .unwrap();
    assert!(
        got.iter().all(|&b| b == 0x3C),
        "the read brought wrong bytes"
    );
    timeline
}

#[test]
fn poll_progress_serves_reads_only_after_the_computation() {
    let t = read_during_compute(Progress::Poll, COMPUTE, false);
    assert!(
        t.read_done >= t.compute_end,
        "the read completed {:?} before the target stopped computing, with no one to serve it",
        t.compute_end - t.read_done
    );
}

/// The target computes, never calling the library, until the initiator
/// holds its read: only the progress thread can have served it, so the
/// read completes before the computation ends on any schedule. (This
/// asked for the read 250 ms before a 600 ms wall-clock computation
/// ended, which a loaded machine's scheduling of the progress thread and
/// the initiator could miss.) Without the thread the computation runs to
/// CAP and the read completes after it.
#[test]
fn thread_progress_serves_reads_during_the_computation() {
    let t = read_during_compute(Progress::Thread, CAP, true);
    assert!(
        t.read_done <= t.compute_end,
        "the read completed {:?} after the computation started, {:?} after the target stopped computing ({CAP:?}): the progress thread did not serve it",
        t.read_done - t.compute_start,
        t.read_done.saturating_duration_since(t.compute_end)
    );
}
