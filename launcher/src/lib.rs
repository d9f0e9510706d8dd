//! ovbench-launcher: how the ranks of an ovbench job find each other.
//!
//! - [`detect`] decides whether this process is the launcher (no job
//!   environment), a rank the launcher spawned, or a rank of srun/mpirun.
//! - [`launch_local`] spawns `--np` ranks of this executable on this host,
//!   pinned per [`plan_pinning`], with a [`Service`] on loopback, and tears
//!   every rank down when one fails.
//! - [`Bootstrap`] is a rank's client of that service: put/get, barrier and
//!   allgather, used to exchange transport addresses.
//! - [`signals`] turns a rank's SIGTERM, SIGINT and SIGHUP into a stop
//!   request its wait loops honour, and says which signal came.
//!
//! The environment variables involved are listed in [`role`].
//!
//! How the `ovbench` binary uses it (`--transport sim` spawns no ranks, so
//! it skips all of this):
//!
//! ```no_run
//! use std::time::Duration;
//! use ovbench_launcher::{detect, launch_local, pin_self, Bootstrap, LaunchOptions, Role};
//!
//! fn main() -> anyhow::Result<()> {
//!     let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
//!     let timeout = Duration::from_secs(60);
//!     match detect(Some(2))? {
//!         Role::Launcher { np } => {
//!             let opts = LaunchOptions { timeout, ..LaunchOptions::default() };
//!             std::process::exit(launch_local(np, &args, &opts)?);
//!         }
//!         Role::Rank(env) => {
//!             if let Some(cpu) = env.cpu {
//!                 eprintln!("rank {} on {}", env.rank, pin_self(cpu)?);
//!             }
//!             let spin = !env.oversubscribed(0);
//!             let mut boot = Bootstrap::connect(&env, timeout)?;
//!             let my_address = vec![env.rank as u8]; // transport.address()
//!             let addresses = boot.allgather(&my_address)?; // → transport.connect(&addresses)
//!             assert_eq!(addresses.len(), env.size as usize);
//!             boot.barrier()?;
//!             let _ = spin;
//!             boot.finish()
//!         }
//!     }
//! }
//! ```

pub mod capacity;
mod client;
pub mod exchange;
mod output;
mod pinning;
mod pmi2;
mod pmix;
mod remote;
pub mod role;
pub mod route;
mod secret;
mod service;
pub mod signals;
mod spawn;
pub mod ssh;
pub mod watchdog;
pub mod wire;

pub use client::Bootstrap;
pub use exchange::{join, BootstrapUse, Exchange, ExchangeKind, Seat};
pub use pinning::{
    current_cpus, parse_cpu_list, pin_self, plan_pinning, smt_siblings, Affinity, PinPlan,
};
pub use role::{
    detect, detect_choice, detect_from, detect_with, JobSource, LauncherChoice, RankEnv, Role,
};
pub use secret::{generate as generate_secret, JobSecret};
pub use service::Service;
pub use spawn::{describe, launch_local, LaunchOptions, EXIT_TIMEOUT};
pub use wire::{MAX_KEY, MAX_RANKS, MAX_VALUE};
