//! Building the communicator a command runs on: the engine's own
//! protocols ([`Comm::engine`]) or the library's tagged path
//! ([`Comm::native`]), configured from the common options.

use std::sync::Arc;

use anyhow::{Context, Result};
use ovbench_core::engine_comm::{Plan, Protocol, RawOp as EngineRawOp};
use ovbench_core::{Clock, Comm, Communicator, EngineConfig, Link, Work};

use crate::cli::common::{CommonArgs, ProtoArg, RawOp};

/// The engine's protocol for `--proto` (`None` for native).
pub fn protocol(common: &CommonArgs) -> Option<Protocol> {
    Some(match common.proto {
        ProtoArg::Eager => Protocol::Eager,
        ProtoArg::RdmaWrite => Protocol::RdmaWrite,
        ProtoArg::RdmaRead => Protocol::RdmaRead,
        ProtoArg::Pipelined => Protocol::Pipelined,
        ProtoArg::Auto => Protocol::Auto,
        ProtoArg::Raw => Protocol::Raw(match common.op {
            RawOp::Send => EngineRawOp::Send,
            RawOp::Write => EngineRawOp::Write,
            RawOp::Read => EngineRawOp::Read,
        }),
        ProtoArg::Native => return None,
    })
}

/// How messages move, from `--proto`, `--eager-limit` and `--frag-size`
/// (native runs the engine's auto beside the library's path).
pub fn plan(common: &CommonArgs) -> Plan {
    let p = Plan::new(protocol(common).unwrap_or(Protocol::Auto));
    let p = match common.eager_limit.forced() {
        Some(b) => p.with_eager_limit(b),
        None => p,
    };
    match common.frag_size {
        Some(f) => p.with_frag_size(f.bytes()),
        None => p,
    }
}

/// The communicator settings from the command line.
pub fn engine_config(common: &CommonArgs, oversubscribed: bool) -> EngineConfig {
    EngineConfig {
        plan: plan(common),
        reg_cache: common.reg_cache.is_on(),
        timeout: common.timeout.0,
        oversubscribed,
    }
}

/// The communicator over a connected transport.
pub fn build(
    common: &CommonArgs,
    transport: Link,
    clock: Arc<dyn Clock>,
    work: Box<dyn Work>,
    oversubscribed: bool,
) -> Result<Box<dyn Communicator>> {
    let cfg = engine_config(common, oversubscribed);
    let rank = transport.info().rank;
    Ok(if common.proto == ProtoArg::Native {
        Box::new(
            Comm::native(transport, clock, work, cfg)
                .with_context(|| format!("rank {rank}: --proto native"))?,
        )
    } else {
        // deviation: proto-auto-over-mpi — the default runs ovbench's own protocol over MPI, see docs/methods/overhead.md
        Box::new(
            Comm::engine(transport.into_transport(), clock, work, cfg)
                .with_context(|| format!("rank {rank}: starting the protocol engine"))?,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn common(args: &[&str]) -> CommonArgs {
        let mut v = vec!["ovbench"];
        v.extend_from_slice(args);
        v.push("latency");
        Cli::try_parse_from(v).unwrap().common
    }

    #[test]
    fn options_reach_the_engine() {
        let c = common(&[
            "--proto",
            "raw",
            "--op",
            "read",
            "--eager-limit",
            "8K",
            "--reg-cache",
            "off",
            "--frag-size",
            "64K",
            "--timeout",
            "5",
        ]);
        let cfg = engine_config(&c, true);
        assert_eq!(cfg.plan.protocol(), Protocol::Raw(EngineRawOp::Read));
        assert_eq!(cfg.plan.eager_limit(), 8192);
        assert_eq!(cfg.plan.frag_size(), 65536);
        assert!(!cfg.reg_cache && cfg.oversubscribed);
        assert_eq!(cfg.timeout.as_secs(), 5);
        assert_eq!(protocol(&common(&["--proto", "native"])), None);
        assert_eq!(protocol(&common(&[])), Some(Protocol::Auto));
    }
}
