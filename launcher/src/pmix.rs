//! PMIx: the address exchange through the launcher's own PMIx server
//! (Open MPI's mpirun, `srun --mpi=pmix`), with the bootstrap service out
//! of the picture. Compiled with the `pmix` feature (libpmix-dev); the
//! calls themselves are in [`client`].
//!
//! An allgather is one put of the rank's bytes under a fresh key, a
//! commit, a fence that collects the data, and one get per rank.

use std::time::Duration;

use anyhow::Result;

use crate::exchange::Exchange;
use crate::role::RankEnv;

#[cfg(feature = "pmix")]
mod client;

/// Whether this build can speak PMIx.
pub const COMPILED: bool = cfg!(feature = "pmix");

/// Whether the job offers a PMIx server this build can use: the
/// variables a PMIx launcher gives its clients.
pub fn offered(var: &dyn Fn(&str) -> Option<String>) -> bool {
    COMPILED && var("PMIX_NAMESPACE").is_some() && var("PMIX_RANK").is_some()
}

/// Joins the job's PMIx server as `env`'s rank.
#[cfg(feature = "pmix")]
pub fn init(env: &RankEnv, timeout: Duration) -> Result<Box<dyn Exchange>> {
    Ok(Box::new(client::Pmix::init(env, timeout)?))
}

/// Without the `pmix` feature there is no PMIx client to join with.
#[cfg(not(feature = "pmix"))]
pub fn init(env: &RankEnv, _timeout: Duration) -> Result<Box<dyn Exchange>> {
    anyhow::bail!(
        "rank {}: this ovbench was built without PMIx: rebuild with --features pmix (needs libpmix-dev)",
        env.rank
    )
}
