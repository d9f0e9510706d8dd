//! What one recorded instrumentation event costs (docs/architecture.md budget:
//! < 20 ns per event), and what an 8-byte eager ping-pong iteration
//! records. Run with `cargo bench -p ovbench-core --bench event_cost`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use ovbench_core::clock::best_clock;
use ovbench_core::{Clock, Instrumentation, XferTable};

fn main() {
    let clock: Arc<dyn Clock> = Arc::from(best_clock());
    let table = XferTable::new(vec![(0, 1000.0), (1 << 20, 100_000.0)]).expect("table");
    let mut ins = Instrumentation::new(table, clock.ns_per_tick());
    let n: u64 = 4_000_000;
    // Each iteration records one transfer inside two calls: the events of
    // an isend + wait pair (CALL_ENTER, XFER_BEGIN, CALL_EXIT, CALL_ENTER,
    // XFER_END, CALL_EXIT), stamped by the communicator's clock, with
    // ring folds included as they happen.
    let per_iter = 6.0;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = Instant::now();
        for k in 0..n {
            ins.call_enter(clock.ticks());
            ins.xfer_begin(black_box(k), 8, clock.ticks(), false);
            ins.call_exit(clock.ticks());
            ins.call_enter(clock.ticks());
            ins.xfer_end(black_box(k), 8, clock.ticks());
            ins.call_exit(clock.ticks());
        }
        let ns = t0.elapsed().as_nanos() as f64 / (n as f64 * per_iter);
        best = best.min(ns);
    }
    let r = ins.report(clock.ticks());
    black_box(&r);
    let clock_ns = clock.info().call_cost_ns;
    println!(
        "clock source {} ({clock_ns:.1} ns per read)",
        clock.info().source
    );
    println!("event cost: {best:.1} ns per event including its clock read (budget 20 ns)");
    // An 8-byte eager ping-pong iteration per rank: send = CALL pair + BEGIN
    // + END at completion; recv = CALL pair + END at arrival → 7 events.
    println!(
        "8 B eager ping-pong: 7 events per rank per iteration ≈ {:.0} ns per iteration",
        7.0 * best
    );
    println!("folded {} events into {} transfers", r.events, r.transfers);
}
