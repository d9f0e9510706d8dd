//! The basics every user expects from perftest and OSU: `latency`
//! (ping-pong, HDR percentiles), `bw` (windowed, one direction), `bibw`
//! and `msgrate`, written against the [`Communicator`] so they run over
//! every protocol and transport, and under sim.
//!
//! Each size runs outside-the-loop setup (verify patterns, a barrier),
//! the timed loop storing raw timestamps into a pre-allocated array, then
//! analysis, verification (with `--verify`, an untimed pass checking each
//! message: `verify.rs`) and the per-rank report gathered to rank 0.

mod instrumented;
pub mod latency;
mod pingpong;
mod rankreport;
mod rate_note;
pub(crate) mod verify;
pub mod window;

use clap::Args;
use ovbench_core::{Communicator, Tag};

use crate::control::Control;
use crate::report::Sink;
use crate::sizes::{format_bytes, Sizes};
use ovbench_core::engine_comm::RawOp;
use rankreport::CpuTotals;

pub use rankreport::{CpuRow, RankReport};

/// Below this size the small-message iteration counts apply (as OSU's
/// LARGE_MESSAGE_SIZE, but at 64 KiB).
pub const LARGE: usize = 64 * 1024;
/// From this size on the fewest iterations apply.
pub const HUGE: usize = 1024 * 1024;

/// Tag of the timed messages of the size with index `i`: each size has
/// its own tag, so a raw write's (peer, tag) always names one buffer.
pub fn data_tag(i: usize) -> Tag {
    1000 + i as Tag
}
/// Tag of bw's per-window acknowledgement.
pub const ACK_TAG: Tag = 999;

/// `n` tick slots for a timed loop, their pages already written. A
/// zeroed vector is fresh mmap'd memory for more than a few thousand
/// slots, and its pages would then be faulted in by the timed loop's own
/// stores: about 40 faults for 20,000 iterations, at 1.4-22 µs each on
/// this VM, a bias of up to ~20 ns a round trip that the tools compared
/// against (NetPIPE, which stores nothing per iteration) do not pay.
///
/// Only the first [`PREFAULTED_SLOTS`] are touched: a huge `--iters` (a
/// run meant to last until it is stopped) would otherwise commit gigabytes
/// per rank before its first message and not see a stop signal until
/// done; past them the loop faults its pages in as it goes.
pub(crate) fn tick_slots(n: usize) -> Vec<u64> {
    let mut v = vec![0u64; n];
    // One store a page, of a zero the compiler cannot see (it would drop
    // a store of a known zero into zeroed memory).
    let head = n.min(PREFAULTED_SLOTS);
    for x in v[..head]
        .iter_mut()
        .step_by(4096 / std::mem::size_of::<u64>())
    {
        *x = std::hint::black_box(0);
    }
    v
}

/// Slots [`tick_slots`] faults in ahead of the loop: 32 MiB, four million
/// iterations.
pub(crate) const PREFAULTED_SLOTS: usize = 1 << 22;

/// The sweep options of latency, bw, bibw and msgrate.
#[derive(Clone, Debug, Args)]
pub struct SweepArgs {
    /// Message sizes: MIN:MAX (MIN, then powers of two), or a list 8,1K,1M (K = 1024).
    #[arg(long, default_value = "0:4M")]
    pub sizes: Sizes,
    /// Timed iterations per size (default: by size, fewer for large messages).
    #[arg(long, value_parser = crate::cli::counts::iters)]
    pub iters: Option<u64>,
    /// Untimed iterations before the timed ones (default: by size).
    #[arg(long, value_parser = crate::cli::counts::warmup)]
    pub warmup: Option<u64>,
    /// Check received bytes outside the timed region: after each size's timed loop, the last timed message, then an untimed pass of min(iters, 1000) messages (bw, msgrate, bibw: min(iters × window, 1000)), each checked before the next arrives; a mismatch names the size, the iteration and the offset, and exits 1.
    #[arg(long)]
    pub verify: bool,
}

/// Run `f` (one of the methods) on this rank, then report every rank's
/// CPU use over the whole run (qperf style: user and system time against
/// wall time) as a summary on rank 0. Every rank must call it.
pub fn with_cpu_use(
    comm: &mut dyn Communicator,
    ctl: &mut dyn Control,
    sink: &mut dyn Sink,
    f: impl FnOnce(&mut dyn Communicator, &mut dyn Sink) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let meter = rankreport::Meter::start(comm);
    f(comm, sink)?;
    let report = meter.finish(comm, 0.0);
    rankreport::deposit(ctl, &report)?;
    comm.barrier()?;
    if let Some(all) = rankreport::collect(ctl)? {
        let mut totals = rankreport::CpuTotals::default();
        totals.add(&all);
        if let Some((json, lines)) = totals.summary() {
            sink.summary(json, &lines);
        }
    }
    Ok(())
}

/// Iterations and warm-up of a size: (timed, warm-up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub iters: u64,
    pub warmup: u64,
}

impl SweepArgs {
    /// The user's counts, else `defaults(size)`.
    pub fn counts(&self, size: usize, defaults: fn(usize) -> Counts) -> Counts {
        let d = defaults(size);
        Counts {
            iters: self.iters.unwrap_or(d.iters),
            warmup: self.warmup.unwrap_or(d.warmup),
        }
    }
}

/// What a benchmark runs with: the communicator, the control channel to
/// rank 0, and the sink (real on rank 0, [`crate::report::NullSink`]
/// elsewhere).
pub struct BenchCtx<'a> {
    pub comm: &'a mut dyn Communicator,
    pub ctl: &'a mut dyn Control,
    pub sink: &'a mut dyn Sink,
    /// `Some` under `--proto raw`: the bare operation being timed.
    pub raw: Option<RawOp>,
    /// `--instrument`: record transfer events in an extra pass per size.
    pub instrument: bool,
    /// Report CPU use (false under sim: its ranks are threads on virtual
    /// time, so the process's CPU time says nothing about them).
    pub cpu_use: bool,
    /// Largest message of `--proto raw --op send` (one bounce buffer less
    /// the wire header).
    pub raw_send_max: usize,
}

impl std::fmt::Debug for BenchCtx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchCtx")
            .field("rank", &self.comm.rank())
            .field("raw", &self.raw)
            .finish()
    }
}

impl BenchCtx<'_> {
    /// Whether the protocol owns the last byte of a message (raw write's
    /// completion marker), so --verify leaves it out.
    fn marker_bytes(&self) -> usize {
        usize::from(self.raw == Some(RawOp::Write))
    }
    fn skip_reason(&self, size: usize) -> Option<String> {
        skip_reason(self.raw, self.raw_send_max, size)
    }

    /// Time every size of `sweep` with `one` (given the size's index,
    /// length and counts), noting those `--proto raw` cannot time, under a
    /// progress bar on rank 0; then the CPU-use summary.
    fn sweep_sizes(
        &mut self,
        name: &str,
        sweep: &SweepArgs,
        default_counts: fn(usize) -> Counts,
        mut one: impl FnMut(&mut Self, &mut CpuTotals, usize, usize, Counts) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let sizes = sweep.sizes.as_slice();
        self.sink.sweep(name, sizes.len());
        let mut cpu = CpuTotals::default();
        for (idx, &len) in sizes.iter().enumerate() {
            self.sink.step(&format!("size {}", format_bytes(len)));
            if let Some(why) = self.skip_reason(len) {
                self.sink.note(&why);
                continue;
            }
            ovbench_core::watch::set_phase(format!("{name}, size {}", format_bytes(len)));
            one(self, &mut cpu, idx, len, sweep.counts(len, default_counts))?;
        }
        self.sink.sweep_end();
        if let Some((json, lines)) = cpu.summary() {
            self.sink.summary(json, &lines);
        }
        Ok(())
    }
}

/// Why `size` cannot be timed under `--proto raw`, if it cannot:
/// a bare one-sided operation moves at least one byte, a bare send at
/// most one bounce buffer (`raw_send_max` bytes).
pub fn skip_reason(raw: Option<RawOp>, raw_send_max: usize, size: usize) -> Option<String> {
    match raw {
        Some(op @ (RawOp::Write | RawOp::Read)) if size == 0 => Some(format!(
            "size 0 skipped: a raw {} moves at least one byte",
            if op == RawOp::Read { "read" } else { "write" }
        )),
        Some(RawOp::Send) if size > raw_send_max => Some(format!(
            "size {size} skipped: a raw send moves at most one bounce buffer ({raw_send_max} bytes); over verbs --eager-buf 64K (or the size) raises it, and --proto eager sends larger messages as a packet train"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        s: SweepArgs,
    }

    /// This thread's minor page faults so far.
    fn minor_faults() -> i64 {
        use nix::sys::resource::{getrusage, UsageWho};
        getrusage(UsageWho::RUSAGE_THREAD)
            .unwrap()
            .minor_page_faults()
    }

    #[test]
    fn tick_slots_are_zero_and_their_pages_already_faulted_in() {
        // 8 MiB: 2048 pages, far past malloc's mmap threshold.
        let n = 1 << 20;
        let mut v = tick_slots(n);
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&x| x == 0));
        let before = minor_faults();
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as u64;
        }
        std::hint::black_box(&v);
        let faults = minor_faults() - before;
        assert!(
            faults < 64,
            "writing the slots took {faults} page faults: the timed loop would pay them"
        );
    }

    #[test]
    fn tick_slots_fault_in_no_more_than_their_cap() {
        // 64 Mi slots (512 MiB): only the first 32 MiB are touched.
        let before = minor_faults();
        let v = tick_slots(PREFAULTED_SLOTS * 16);
        let faults = minor_faults() - before;
        std::hint::black_box(&v);
        let cap_pages = (PREFAULTED_SLOTS * 8 / 4096) as i64;
        assert!(
            faults < cap_pages + 256,
            "{faults} page faults for {cap_pages} prefaulted pages: a huge --iters commits its whole array"
        );
    }

    #[test]
    fn defaults_and_overrides() {
        let t = T::try_parse_from(["x"]).unwrap();
        assert_eq!(t.s.sizes.as_slice().len(), 24);
        let d = |size: usize| Counts {
            iters: if size < LARGE { 10 } else { 1 },
            warmup: 2,
        };
        assert_eq!(
            t.s.counts(8, d),
            Counts {
                iters: 10,
                warmup: 2
            }
        );
        let t = T::try_parse_from(["x", "--iters", "7", "--sizes", "1K"]).unwrap();
        assert_eq!(
            t.s.counts(1 << 20, d),
            Counts {
                iters: 7,
                warmup: 2
            }
        );
        let e = T::try_parse_from(["x", "--sizes", "8,1Q"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("`1Q`"), "{e}");
        assert!(T::try_parse_from(["x", "--iters", "0"]).is_err());
    }

    #[test]
    fn raw_skips_what_the_bare_operation_cannot_move() {
        assert_eq!(skip_reason(None, 100, 0), None);
        assert_eq!(skip_reason(None, 100, 1 << 20), None);
        let w = skip_reason(Some(RawOp::Write), 100, 0).unwrap();
        assert!(w.contains("raw write moves at least one byte"), "{w}");
        assert!(skip_reason(Some(RawOp::Read), 100, 0)
            .unwrap()
            .contains("raw read"));
        assert_eq!(skip_reason(Some(RawOp::Read), 100, 1 << 20), None);
        assert_eq!(skip_reason(Some(RawOp::Send), 100, 0), None);
        assert_eq!(skip_reason(Some(RawOp::Send), 100, 100), None);
        let s = skip_reason(Some(RawOp::Send), 100, 101).unwrap();
        assert!(
            s.contains("size 101 skipped") && s.contains("(100 bytes)"),
            "{s}"
        );
    }

    #[test]
    fn each_size_has_its_own_tag() {
        assert_ne!(data_tag(0), data_tag(1));
        assert_ne!(data_tag(0), ACK_TAG);
    }
}
