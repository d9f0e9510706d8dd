//! The five methods of docs/architecture.md (overhead, overlap, commtest, logp,
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
    /// and Karonis). Needs 3 or more ranks (--np defaults to 4 here);
    /// under --transport sim, --np 4,8,16 sweeps the rank count.
    Bcast(bcast::Args),
    /// SWAP and SENDRECV of a fixed volume in 1, 2, 4 … packets under
    /// COMMTEST's unordered and ordered protocols (Worley).
    Commtest(commtest::Args),
    /// Computation-communication overlap bounds per step of growing
    /// computation (Shet et al., the overlap micro-benchmark).
    Overlap(overlap::Args),
}

impl MethodCommand {
    /// The subcommand's name, as clap derives it from the variant (a test
    /// checks the two agree).
    pub fn name(&self) -> &'static str {
        match self {
            MethodCommand::Overhead(_) => "overhead",
            MethodCommand::Logp(_) => "logp",
            MethodCommand::Bcast(_) => "bcast",
            MethodCommand::Commtest(_) => "commtest",
            MethodCommand::Overlap(_) => "overlap",
        }
    }
}

/// Run `cmd` on this rank. Every rank must call it; only rank 0's `sink`
/// should print (others pass a [`crate::report::NullSink`]).
pub fn run_method(
    cmd: &MethodCommand,
    comm: &mut dyn Communicator,
    sink: &mut dyn Sink,
) -> anyhow::Result<()> {
    check_protocol(cmd, comm)?;
    match cmd {
        MethodCommand::Overhead(a) => overhead::run(comm, a, sink).map(drop),
        MethodCommand::Logp(a) => logp::run(comm, a, sink).map(drop),
        MethodCommand::Bcast(a) => bcast::run(comm, a, sink).map(drop),
        MethodCommand::Commtest(a) => commtest::run(comm, a, sink).map(drop),
        MethodCommand::Overlap(a) => overlap::run(comm, a, sink).map(drop),
    }
}

/// Why the methods refuse `--proto raw` (the one sentence for it).
pub fn raw_refused() -> String {
    format!(
        "--proto raw: the methods run over a protocol ({}), not a bare operation: raw is for latency, bw and `overlap --write-xfer-table`",
        ovbench_core::engine_comm::protocols_but(&["raw"])
    )
}

/// The methods' control messages need a message protocol: a raw read
/// lands whatever the sender's buffer holds by then, a raw write needs
/// equal sizes on both sides.
pub fn check_protocol(cmd: &MethodCommand, comm: &dyn Communicator) -> anyhow::Result<()> {
    if comm.info().protocol.raw_op().is_some() && !matches!(cmd, MethodCommand::Overlap(_)) {
        anyhow::bail!(raw_refused());
    }
    Ok(())
}

/// What `cmd` needs of the job, checked once before any rank starts (the
/// methods check again on every rank): the number of ranks.
#[deny(clippy::arithmetic_side_effects)]
pub fn preflight(cmd: &MethodCommand, np: u32) -> anyhow::Result<()> {
    preflight_given(cmd, np, &format!("--np {np}"))
}

/// [`preflight`], naming the rank count as `given` (`--np 3`, or the
/// hosts it came from).
pub fn preflight_given(cmd: &MethodCommand, np: u32, given: &str) -> anyhow::Result<()> {
    let need = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(anyhow::anyhow!("{what}, not {given}"))
        }
    };
    match cmd {
        MethodCommand::Overhead(_) => need(
            np >= 2 && np % 2 == 0,
            "overhead pairs rank r with rank r+N/2: it needs an even number of ranks",
        ),
        MethodCommand::Logp(a) => {
            logp::check_args(a)?;
            need(np >= 2, "logp needs at least 2 ranks")
        }
        MethodCommand::Bcast(a) => {
            bcast::check_args(a)?;
            need(np >= 3, "bcast needs at least 3 ranks")
        }
        MethodCommand::Commtest(a) => {
            commtest::check_args(a)?;
            need(np >= 2, "commtest needs at least 2 ranks")?;
            if a.distance >= np {
                anyhow::bail!(
                    "commtest --distance {d}: rank 0's partner is rank {d}, which --np {np} does not have: use --np {} or more, or --distance {} or less",
                    u64::from(a.distance) + 1,
                    np.saturating_sub(1),
                    d = a.distance
                );
            }
            Ok(())
        }
        MethodCommand::Overlap(a) => {
            overlap::check_args(a)?;
            need(np >= 2, "overlap needs 2 ranks")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        cmd: MethodCommand,
    }

    fn cmd(args: &[&str]) -> MethodCommand {
        T::try_parse_from(std::iter::once("ovbench").chain(args.iter().copied()))
            .unwrap()
            .cmd
    }

    #[test]
    fn names_are_clap_subcommand_names() {
        use clap::CommandFactory;
        let names: Vec<String> = T::command()
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for n in &names {
            assert_eq!(cmd(&[n.as_str()]).name(), n);
        }
        assert_eq!(names.len(), 5);
    }

    #[test]
    fn preflight_names_the_rank_count() {
        assert!(preflight(&cmd(&["overhead"]), 2).is_ok());
        let e = preflight(&cmd(&["overhead"]), 3).unwrap_err().to_string();
        assert!(e.contains("even") && e.contains("--np 3"), "{e}");
        assert!(preflight(&cmd(&["bcast"]), 2).is_err());
        assert!(preflight(&cmd(&["bcast"]), 3).is_ok());
        assert!(preflight(&cmd(&["commtest", "--distance", "2"]), 2).is_err());
        assert!(preflight(&cmd(&["commtest", "--distance", "2"]), 4).is_ok());
        let e = preflight(&cmd(&["commtest", "--protocol", "1,6"]), 2).unwrap_err();
        assert!(e.to_string().contains("same calls as (1,0)"), "{e}");
        assert!(preflight(&cmd(&["logp"]), 1).is_err());
        assert!(preflight(&cmd(&["overlap"]), 2).is_ok());
    }

    #[test]
    fn original_defaults() {
        let MethodCommand::Overhead(o) = cmd(&["overhead"]) else {
            panic!()
        };
        assert_eq!((o.thresh, o.bthresh, o.iterations), (1.5, 1.02, None));
        let MethodCommand::Logp(l) = cmd(&["logp"]) else {
            panic!()
        };
        assert_eq!((l.eps, l.conf_int, l.max_its), (0.03, 0.9, 18));
        assert_eq!((l.min_size.bytes(), l.max_diff), (0, 0.03));
        let MethodCommand::Bcast(b) = cmd(&["bcast"]) else {
            panic!()
        };
        assert_eq!((b.reps, b.algorithm), (100, bcast::Algorithm::Binomial));
        assert_eq!((b.min_measurements, b.max_measurements), (8, 30));
    }
}
