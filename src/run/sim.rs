//! `--transport sim`: every rank is a thread of this process on the
//! simulator's virtual time (no child processes); the engine's
//! communicator runs over each rank's simulated transport, clock and
//! work loop, so the commands run unchanged.

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use ovbench_core::{Clock, Progress};
use ovbench_sim::{run_raw, RankKit, SimParams};

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
    let np = cli.common.np;
    let mut p = params(cli)?;
    // The commands never read the truth (it is discarded below), and at
    // scale recording it costs more than the run: 1024-rank OL_i would
    // keep about 1 GB of it.
    p.truth = false;
    let controls = SharedControl::group(np);
    // A rank's error leaves its peers waiting, which the simulator reports
    // as a deadlock: keep the first error to report it instead.
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let outcome = run_raw(np, &p, |kit| {
        let r = rank_main(cli, &p, &controls, kit);
        if let Err(e) = &r {
            let mut slot = first_error.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert_with(|| format!("{e:#}"));
        }
        r
    });
    match outcome {
        Ok((results, _truth)) => results.into_iter().collect(),
        Err(e) => match first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(rank_error) => Err(anyhow!("{rank_error}")),
            None => Err(anyhow!("simulation failed: {e}")),
        },
    }
}

fn rank_main(cli: &Cli, p: &SimParams, controls: &[SharedControl], kit: RankKit) -> Result<()> {
    let common = &cli.common;
    let np = common.np;
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
        let mut sink = rank0_sink(
            cli,
            vec![RankFacts::here(0)],
            comm.as_ref(),
            np,
            &model,
            true,
        )?;
        execute(
            &cli.command,
            common,
            comm.as_mut(),
            &mut ctl,
            &mut sink,
            true,
            false,
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
            false,
        )
        .with_context(|| format!("rank {rank}"))
    }
}
