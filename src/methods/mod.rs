//! The five methods of DESIGN.md (overhead, overlap, commtest, logp,
//! bcast), each a plain function of (communicator, options): `run(comm,
//! args, sink)` on every rank, rows to the sink as they complete, and a
//! result struct that derives `Serialize`.
//!
//! Methods see only [`ovbench_core::Communicator`]: point-to-point calls,
//! barrier, the clock, the work loop and `delay`. The same code therefore
//! runs over every transport and protocol, and under the sim's virtual
//! time.

pub mod bcast;
pub mod common;
pub mod commtest;
pub mod logp;
pub mod overhead;
pub mod overlap;

use ovbench_core::Communicator;

use crate::report::Sink;

/// The methods' subcommands, flattened into the CLI.
#[derive(Debug, clap::Subcommand)]
pub enum MethodCommand {
    /// Host send/receive overhead and availability by the post-work-wait
    /// loop (Sandia SMB mpi_overhead).
    Overhead(overhead::Args),
    /// LogP parameters os, or, g, L and G (Kielmann et al., logp_mpi).
    Logp(logp::Args),
    /// Broadcast measured five ways, OL_i per destination (de Supinski
    /// and Karonis).
    Bcast(bcast::Args),
    /// SWAP and SENDRECV of a fixed volume in 1, 2, 4 … packets under
    /// COMMTEST's unordered and ordered protocols (Worley).
    Commtest(commtest::Args),
    /// Computation-communication overlap bounds per step of growing
    /// computation (Shet et al., the overlap micro-benchmark).
    Overlap(overlap::Args),
}

/// Run `cmd` on this rank. Every rank must call it; only rank 0's `sink`
/// should print (others pass a [`crate::report::NullSink`]).
pub fn run_method(
    cmd: &MethodCommand,
    comm: &mut dyn Communicator,
    sink: &mut dyn Sink,
) -> anyhow::Result<()> {
    match cmd {
        MethodCommand::Overhead(a) => overhead::run(comm, a, sink).map(drop),
        MethodCommand::Logp(a) => logp::run(comm, a, sink).map(drop),
        MethodCommand::Bcast(a) => bcast::run(comm, a, sink).map(drop),
        MethodCommand::Commtest(a) => commtest::run(comm, a, sink).map(drop),
        MethodCommand::Overlap(a) => overlap::run(comm, a, sink).map(drop),
    }
}
