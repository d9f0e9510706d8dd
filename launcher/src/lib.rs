//! ovbench-launcher: how the ranks of an ovbench job find each other.
//!
//! - [`detect`] decides whether this process is the launcher (no job
//!   environment), a rank the launcher spawned, or a rank of srun/mpirun.
//! - [`launch_local`] spawns `--np` ranks of this executable on this host,
//!   pinned per [`plan_pinning`], with a [`Service`] on loopback, and tears
//!   every rank down when one fails.
//! - [`Bootstrap`] is a rank's client of that service: put/get, barrier and
//!   allgather, used to exchange transport addresses.
//!
//! The environment variables involved are listed in [`role`].

mod client;
mod output;
mod pinning;
pub mod role;
mod secret;
mod service;
mod spawn;
mod wire;

pub use client::Bootstrap;
pub use pinning::{
    current_cpus, parse_cpu_list, pin_self, plan_pinning, smt_siblings, Affinity, PinPlan,
};
pub use role::{detect, detect_from, JobSource, RankEnv, Role};
pub use secret::generate as generate_secret;
pub use service::Service;
pub use spawn::{describe, launch_local, LaunchOptions, EXIT_TIMEOUT};
pub use wire::{MAX_KEY, MAX_RANKS, MAX_VALUE};
