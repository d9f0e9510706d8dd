//! ovbench-sim: the deterministic LogGP model (DESIGN.md § The sim model).
//!
//! N ranks run in one process on virtual time (integer picoseconds). Each
//! rank is a thread, but a baton lets exactly one run at a time — the one
//! furthest behind in virtual time — so every run is exactly repeatable
//! and the only randomness is the seeded `jitter` on L. Each rank gets a
//! [`SimTransport`] (the cost rules), a [`SimClock`] and a [`SimWork`];
//! the runner builds the engine's communicator over them, so the methods
//! run unchanged and the simulator knows the truth ([`SimReport`]).

mod clock;
mod engine;
mod memory;
mod params;
mod runner;
mod sched;
mod transport;
mod truth;
mod world;

pub use clock::{SimClock, SimWork, WORK_UNIT_PS};
pub use engine::run;
pub use params::{parse_duration_ps, parse_per_byte_fs, parse_signed_ps, Ps, SimParams};
pub use runner::{endpoints, run_raw, RankKit, SimError};
pub use transport::{SimTransport, EAGER_BUF_SIZE, SPIN_LIMIT};
pub use truth::{OpTruth, RankTruth, SimReport};
