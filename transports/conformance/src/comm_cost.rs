//! ovbench's own software cost of a small message, shared by the fabric
//! crates' `comm_cost` benches: both ranks of a pair on one thread, so a
//! round trip is the two communicators' and the library's work with no
//! core-to-core traffic. Own eager minus native is then what ovbench's
//! protocol adds per message, steadier than a two-core ping-pong on a
//! noisy host: one binary file gives the same figure to a few
//! nanoseconds run after run. Copies of the very same binary did not
//! (this VM: one copy's eager round trip stayed ~35 ns above another's,
//! run after run, for a reason not pinned down; where the copy's pages
//! lie in memory is the likely one), so to compare two builds, run
//! several copies of each.
//!
//! It is a cost, not a latency: work done after a send has left (retiring
//! its request) counts here, and off a ping-pong's critical path it would
//! not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pair;
use ovbench_core::clock::best_clock;
use ovbench_core::engine_comm::Protocol;
use ovbench_core::{
    Buf, Clock, Comm, Communicator, EngineConfig, Rank, Tagged, Transport, WorkLoop,
};

const ITERS: u32 = 200_000;
const LEN: usize = 8;
const TAG: u32 = 7;

/// Communicators over a freshly connected pair: the library's tagged path
/// (`native`) or the engine's eager protocol.
fn comms<T: Tagged + 'static>(
    t: [T; 2],
    native: bool,
    clock: &Arc<dyn Clock>,
) -> [Box<dyn Communicator>; 2] {
    pair::connect(t).map(|t| {
        let work = Box::new(WorkLoop::calibrate(clock.clone(), Duration::from_millis(5)));
        let cfg = EngineConfig::with_protocol(Protocol::Eager);
        // As the tool holds them: the native path over the transport as
        // its tagged protocol, the engine over the plain contract.
        if native {
            let t: Box<dyn Tagged> = Box::new(t);
            Box::new(Comm::native(t, clock.clone(), work, cfg).expect("native communicator"))
                as Box<dyn Communicator>
        } else {
            let t: Box<dyn Transport> = Box::new(t);
            Box::new(Comm::engine(t, clock.clone(), work, cfg).expect("engine communicator"))
        }
    })
}

/// One message from `c[from]` to the other rank: the receive posted
/// first, the send blocking (as a ping-pong's), the receive then driven
/// by `test` (its rank cannot block: it shares this thread).
fn one_way(c: &mut [Box<dyn Communicator>; 2], bufs: [Buf; 2], from: usize) {
    let to = 1 - from;
    let r = c[to]
        .irecv(bufs[to].first(LEN), Some(from as Rank), Some(TAG))
        .expect("irecv");
    c[from]
        .send(bufs[from].first(LEN), to as Rank, TAG)
        .expect("send");
    while c[to].test(r).expect("test").is_none() {}
}

/// Round trips per timed chunk: short enough (well under a scheduler
/// time slice) that on a busy host most chunks run unpreempted.
const CHUNK: u32 = 1_000;

/// Nanoseconds per round trip over `t`: the mean over all `ITERS`, and
/// the fastest chunk of `CHUNK`, which a loaded host's preemptions and
/// cache pollution leave untouched as long as one chunk ran undisturbed.
fn round_trip_ns<T: Tagged + 'static>(
    t: [T; 2],
    native: bool,
    clock: &Arc<dyn Clock>,
) -> (f64, f64) {
    let mut c = comms(t, native, clock);
    let bufs = [0, 1].map(|i| c[i].alloc(LEN).expect("alloc"));
    let mut run = |n: u32| {
        let t0 = Instant::now();
        for _ in 0..n {
            one_way(&mut c, bufs, 0);
            one_way(&mut c, bufs, 1);
        }
        t0.elapsed()
    };
    run(ITERS / 10);
    let (mut total, mut fastest) = (Duration::ZERO, Duration::MAX);
    for _ in 0..ITERS / CHUNK {
        let d = run(CHUNK);
        total += d;
        fastest = fastest.min(d);
    }
    let per = |d: Duration, n: u32| d.as_nanos() as f64 / f64::from(n);
    (per(total, ITERS), per(fastest, CHUNK))
}

/// Print `rounds` alternating native / own eager measurements over pairs
/// of `open(setup, rank)`, named `library setup`. The setup (a provider, a
/// UCX transport list) is the bench's first argument that is not a flag
/// (`cargo bench ... -- setup`), else `default_setup`.
pub fn main<T: Tagged + 'static>(
    library: &str,
    default_setup: &str,
    rounds: usize,
    open: impl Fn(&str, Rank) -> T,
) {
    let setup = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| default_setup.into());
    let what = format!("{library} {setup}");
    let open = || [0, 1].map(|r| open(&setup, r));
    let clock: Arc<dyn Clock> = Arc::from(best_clock());
    for _ in 0..rounds {
        let (n, nf) = round_trip_ns(open(), true, &clock);
        let (e, ef) = round_trip_ns(open(), false, &clock);
        println!(
            "{what}, {LEN} B, both ranks on one thread: round trip native {n:.0} ns, own eager {e:.0} ns; own eager adds {:.0} ns per message; fastest chunk of {CHUNK}: native {nf:.0} ns, own eager {ef:.0} ns",
            (e - n) / 2.0
        );
    }
}
