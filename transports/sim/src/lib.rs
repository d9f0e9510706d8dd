//! ovbench-sim: the deterministic LogGP model (docs/architecture.md § The simulator).
//!
//! N ranks run in one process on virtual time (integer picoseconds). Each
//! rank is a stackful coroutine on the caller's thread, and a baton lets
//! exactly one run at a time — the one furthest behind in virtual time,
//! ties to the lower rank, or one within L of it that nothing behind it
//! can reach — so every run is exactly repeatable and the only randomness
//! is the seeded `jitter` on L. Each rank gets a [`SimTransport`] (the
//! cost rules), a [`SimClock`] and a [`SimWork`]; [`run`] builds the
//! engine's communicator over them, so the methods run unchanged and the
//! simulator knows the truth ([`SimReport`]).
//!
//! * [`SimParams::parse`] reads `--sim KEY=VAL,…`.
//! * [`run`] runs a closure on every rank's engine `Comm`; [`run_raw`]
//!   hands each rank its bare [`RankKit`] instead.
//! * [`endpoints`] gives free-running endpoints for a single thread that
//!   drives them all (the conformance suite, the engine's pair tests).
//! * A rank left waiting with nothing in flight ends the run with
//!   [`SimError::Deadlock`] naming the blocked ranks, never a hang.
//!
//! Speed (release build, 2-core machine): a baton handoff between
//! coroutines costs well under a microsecond (a two-rank ping-pong runs
//! about 600 ns per message, model and all); 1024 ranks doing 10 binomial
//! broadcasts and 10 dissemination barriers (about 113 000 messages,
//! 190 000 handoffs) take under a second. Each rank's stack is 1 MiB of
//! address space, touched only as used. What keeps a message cheap: a
//! rank waiting in the engine is not woken by the completion of a send
//! nothing waits on (`QUIET_CTX`), so a message costs about one handoff;
//! repeated empty polls at one virtual time are counted without the lock;
//! message buffers are recycled; the event queues move small keys, not
//! events; the scheduler's lock is bound to the runner's thread, so
//! taking it is no atomic read-modify-write. 1024-rank OL_i (`bcast
//! --method oli --reps 10`, about 12.6 million messages) then runs at
//! about 0.8 µs per message, much of it cache misses on 1024 ranks'
//! state (ci/bench/methods).

pub mod capacity;
mod clock;
mod engine;
mod memory;
mod owned;
mod params;
mod prefetch;
mod runner;
mod sched;
mod transport;
mod truth;
mod world;

pub use clock::{SimClock, SimWork, WORK_UNIT_PS};
pub use engine::run;
pub use params::{
    parse_duration_ps, parse_per_byte_fs, parse_signed_ps, Ps, SimParams, CLOCK_BOUND, MAX_G_FS,
    MAX_PARAM_PS,
};
pub use runner::{endpoints, run_raw, RankKit, SimError};
pub use transport::{SimTransport, EAGER_BUF_SIZE, SPIN_LIMIT};
pub use truth::{OpTruth, RankTruth, SimReport};
