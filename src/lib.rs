//! ovbench: what communication really costs.
//!
//! The tool, cut by job (as hyperfine is):
//!
//! * [`cli`] and [`common`] — the command line; `main.rs` only parses,
//!   calls [`run::run`] and turns its result into the exit code.
//! * [`run`] — the run flow: launcher, rank or in-process simulation;
//!   building the transport and communicator; dispatching the command.
//! * [`bench`](mod@bench) — latency, bw, bibw, msgrate; [`methods`] — the five
//!   methods of the classic papers. Both see only the communicator and
//!   write results to a [`report::Sink`].
//! * [`stats`] — percentiles and confidence intervals, pure code.
//! * [`output`] (the `#` header and tables on stdout, the progress bar on stderr)
//!   and [`export`] (JSON and CSV files rewritten after every row);
//!   [`files`] — every input file read, every output file placed.
//! * [`env`](mod@env), [`header`], [`cpu`] — what every header records; [`control`]
//!   — the side channel that brings per-rank figures to rank 0;
//!   [`sizes`] — sizes and durations as users type them.
//! * [`tools`] — the subcommands that measure nothing: [`plot`] draws
//!   result files, [`compare`] tests them against each other, [`devices`]
//!   lists the fabrics, `completions` writes shell completions.

pub mod bench;
pub mod cli;
pub mod compare;
pub mod control;
pub mod cpu;
pub mod devices;
pub mod env;
pub mod export;
pub mod files;
pub mod header;
pub mod methods;
pub mod output;
pub mod plot;
pub mod report;
pub mod run;
pub mod sizes;
pub mod stats;
pub mod tools;
pub mod xfer_time;
