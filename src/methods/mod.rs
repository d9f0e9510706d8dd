//! The five methods of DESIGN.md (overhead, overlap, commtest, logp,
//! bcast), each a plain function of (communicator, options).
//! Filled in by issue 3.

/// The methods' subcommands, flattened into the CLI.
#[derive(Debug, clap::Subcommand)]
pub enum MethodCommand {}
