//! The engine's communicator on the simulated machine: one
//! engine [`Comm`] per rank over its [`crate::SimTransport`],
//! [`crate::SimClock`] and [`crate::SimWork`], so the sim's costs attach to
//! exactly the operations the engine posts and the methods run unchanged.

use std::sync::Arc;

use ovbench_core::{Clock, Comm, Communicator, EngineConfig};

use crate::{run_raw, SimError, SimParams, SimReport};

/// Run `f` on `np` simulated ranks, each with an engine [`Comm`] built
/// from `cfg`. Returns each rank's result in rank order and the truth.
pub fn run<R: Send>(
    np: u32,
    params: &SimParams,
    cfg: &EngineConfig,
    f: impl Fn(&mut dyn Communicator) -> R + Sync,
) -> Result<(Vec<R>, SimReport), SimError> {
    let (results, report) = run_raw(np, params, |kit| {
        let clock: Arc<dyn Clock> = kit.clock;
        Comm::engine(
            Box::new(kit.transport),
            clock,
            Box::new(kit.work),
            cfg.clone(),
        )
        .map(|mut comm| f(&mut comm))
        .map_err(|e| (kit.rank, e.to_string()))
    })?;
    let results = results
        .into_iter()
        .map(|r| r.map_err(|(rank, message)| SimError::Comm { rank, message }))
        .collect::<Result<Vec<R>, SimError>>()?;
    Ok((results, report))
}
