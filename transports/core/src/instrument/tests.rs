use super::*;

fn table() -> XferTable {
    // 1000 ns for any size up to 1 KiB, then 1 ns per byte.
    XferTable::new(vec![(0, 1000.0), (1024, 1000.0), (2048, 2048.0)]).unwrap()
}

/// enter/exit stamps in ticks = ns.
fn call(i: &mut Instrumentation, from: u64, to: u64) {
    i.call_enter(from);
    i.call_exit(to);
}

/// One call's stamps in ticks = ns: `[enter, BEGIN or END, exit]`.
type Stamps = [u64; 3];

/// Transfer `id` of `bytes` split over two calls, the way an isend and
/// its wait see it: the first call stamps BEGIN, the second END.
fn split(
    i: &mut Instrumentation,
    id: u64,
    bytes: u64,
    call_bounded: bool,
    post: Stamps,
    wait: Stamps,
) {
    i.call_enter(post[0]);
    i.xfer_begin(id, bytes, post[1], call_bounded);
    i.call_exit(post[2]);
    i.call_enter(wait[0]);
    i.xfer_end(id, bytes, wait[1]);
    i.call_exit(wait[2]);
}

/// The report of [`split`] alone on fresh instrumentation, taken when the
/// wait returns.
fn split_alone(bytes: u64, post: Stamps, wait: Stamps) -> OverlapReport {
    let mut i = Instrumentation::new(table(), 1.0);
    split(&mut i, 9, bytes, false, post, wait);
    i.report(wait[2])
}

#[test]
fn same_call_gives_no_overlap() {
    let mut i = Instrumentation::new(table(), 1.0);
    i.call_enter(0);
    i.xfer_begin(1, 8, 10, false);
    i.xfer_end(1, 8, 900);
    i.call_exit(1000);
    let r = i.report(1000);
    assert_eq!(
        (r.transfers, r.min_overlap_ns, r.max_overlap_ns),
        (1, 0.0, 0.0)
    );
    assert_eq!(r.data_transfer_ns, 1000.0);
    assert_eq!(r.call_ns, 1000.0);
}

#[test]
fn computation_between_bounds_the_overlap() {
    // isend at [0,100], compute 400, wait [500,800]: xfer 1000 ns.
    let r = split_alone(100, [0, 50, 100], [500, 700, 800]);
    // max = min(comp 400, 1000); min = max(0, 1000 − lib (50 + 200)) = 750
    // would exceed max: BEGIN→END is only 650 ns, shorter than xfer, so
    // min is clamped to max.
    assert_eq!(r.max_overlap_ns, 400.0);
    assert_eq!(r.min_overlap_ns, 400.0);
    assert_eq!(r.computation_ns, 400.0);
    assert_eq!(r.call_ns, 400.0);
    // Enough computation: max reaches xfer, min grows as library time shrinks.
    let r = split_alone(100, [0, 90, 100], [5000, 5010, 5020]);
    assert_eq!((r.min_overlap_ns, r.max_overlap_ns), (980.0, 1000.0));
}

#[test]
fn one_sided_and_call_bounded() {
    let mut i = Instrumentation::new(table(), 1.0);
    // Eager receive: END only.
    call(&mut i, 0, 10);
    i.call_enter(100);
    i.xfer_end(3, 64, 105);
    i.call_exit(110);
    // Native: call-bounded, 300 ns of computation between.
    split(&mut i, 4, 64, true, [200, 200, 210], [510, 600, 600]);
    // A BEGIN never ended.
    i.call_enter(700);
    i.xfer_begin(5, 2048, 700, false);
    i.call_exit(710);
    let r = i.report(710);
    assert_eq!(r.transfers, 3);
    assert_eq!(r.one_sided_transfers, 2);
    assert_eq!(r.min_overlap_ns, 0.0);
    assert_eq!(r.max_overlap_ns, 1000.0 + 300.0 + 2048.0);
    let sizes: Vec<u64> = r.buckets.iter().map(|b| b.size_max).collect();
    assert_eq!(sizes, [64, 2048]);
    assert_eq!(r.buckets[0].transfers, 2);
}

#[test]
fn folding_a_small_ring_changes_nothing() {
    let run = |cap| {
        let mut i = Instrumentation::with_capacity(table(), 0.5, cap);
        let mut t = 0;
        for k in 0..1000u64 {
            let wait = t + 50 + k % 17;
            split(
                &mut i,
                k,
                10 * k,
                false,
                [t, t + 3, t + 20],
                [wait, wait + 5, wait + 30],
            );
            t = wait + 40;
        }
        i.report(t)
    };
    assert_eq!(run(7), run(1 << 16));
}

#[test]
fn nested_calls_count_once() {
    let mut i = Instrumentation::new(table(), 1.0);
    i.call_enter(0);
    i.call_enter(10);
    i.call_exit(20);
    i.call_exit(30);
    let r = i.report(130);
    assert_eq!((r.call_ns, r.computation_ns, r.events), (30.0, 100.0, 2));
}

#[test]
fn min_never_exceeds_max_when_xfer_outlasts_the_window() {
    // isend [0,10] with BEGIN at 5, compute 20, wait [30,40] with END at
    // 35: BEGIN→END is 30 ns (20 computation, 10 library), but the table
    // says 1000 ns. Unclamped, min = 1000 − 10 = 990 > max = 20.
    let r = split_alone(8, [0, 5, 10], [30, 35, 40]);
    assert_eq!(r.max_overlap_ns, 20.0);
    assert!(
        r.min_overlap_ns <= r.max_overlap_ns,
        "min {} > max {}",
        r.min_overlap_ns,
        r.max_overlap_ns
    );
    // The transfer fills the whole window, so all its computation overlapped.
    assert_eq!(r.min_overlap_ns, 20.0);
    assert_eq!(r.buckets[0].min_overlap_ns, 20.0);
    assert_eq!(r.data_transfer_ns, 1000.0);
}

#[test]
fn an_end_stamped_before_the_call_that_takes_it_is_folded_at_its_time() {
    // isend [0,100] (BEGIN at 50), compute to 5000, wait [5000,5100]
    // takes a completion the NIC stamped at 1050: the transfer lay in
    // [50,1050], of which [100,1050] was computation. The computation
    // after 1050 must not count, nor the wait.
    let r = split_alone(100, [0, 50, 100], [5000, 1050, 5100]);
    // xfer 1000: max = min(950, 1000) = 950; min = 1000 − 50 = 950.
    assert_eq!((r.min_overlap_ns, r.max_overlap_ns), (950.0, 950.0));
    // Stamped inside an earlier call (the isend itself): case 1, 0/0,
    // even though it is taken in a later call.
    let r = split_alone(100, [0, 10, 100], [5000, 90, 5100]);
    assert_eq!((r.min_overlap_ns, r.max_overlap_ns), (0.0, 0.0));
}

#[test]
fn a_transfer_longer_than_xfer_time_is_counted_as_stretched() {
    // xfer 1000 ns; BEGIN→END 1050 ns is the transfer, 5000 ns is not.
    let mut i = Instrumentation::new(table(), 1.0);
    for (id, end) in [(1u64, 1050u64), (2, 5000)] {
        let t0 = id * 100_000;
        let (post, wait) = (t0, t0 + end);
        split(
            &mut i,
            id,
            100,
            false,
            [post, post, post + 10],
            [wait, wait, wait + 10],
        );
    }
    let r = i.report(300_000);
    assert_eq!((r.transfers, r.stretched_transfers), (2, 1));
}
