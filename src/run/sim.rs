//! `--transport sim`: every rank is a thread of this process on the
//! simulator's virtual time (no child processes); the engine's
//! communicator runs over each rank's simulated transport, clock and
//! work loop, so the commands run unchanged.

use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use ovbench_core::{Clock, Progress};
use ovbench_sim::{run_raw, SimParams};

use super::{comm, execute, rank0_sink};
use crate::cli::Cli;
use crate::control::SharedControl;
use crate::env::RankFacts;
use crate::report::NullSink;

/// The simulation parameters: `--sim`, with `--progress thread` applied.
pub fn params(cli: &Cli) -> Result<SimParams> {
    let mut p = SimParams::parse(&cli.common.sim).map_err(|e| anyhow!(e))?;
    if cli.common.progress == Progress::Thread {
        p.progress = Progress::Thread;
    }
    Ok(p)
}

/// Run the whole job in this process.
pub fn run(cli: &Cli) -> Result<()> {
    let common = &cli.common;
    let np = common.np;
    let p = params(cli)?;
    let controls = SharedControl::group(np);
    let (results, _truth) = run_raw(np, &p, |kit| -> Result<()> {
        let rank = kit.rank;
        let mut ctl = controls[rank as usize].clone();
        let clock: Arc<dyn Clock> = kit.clock.clone();
        let mut comm = comm::build(
            common,
            Box::new(kit.transport),
            clock,
            Box::new(kit.work),
            false,
        )?;
        if rank == 0 {
            let model = p.describe();
            let mut sink = rank0_sink(cli, vec![RankFacts::here(0)], comm.as_ref(), np, &model)?;
            execute(
                &cli.command,
                common,
                comm.as_mut(),
                &mut ctl,
                &mut sink,
                true,
            )
            .with_context(|| format!("rank {rank}"))?;
            sink.finish()
        } else {
            execute(
                &cli.command,
                common,
                comm.as_mut(),
                &mut ctl,
                &mut NullSink,
                false,
            )
            .with_context(|| format!("rank {rank}"))
        }
    })
    .map_err(|e| anyhow!("simulation failed: {e}"))?;
    results.into_iter().collect()
}
