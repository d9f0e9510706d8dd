//! The options every command shares (transport, ranks, protocol, outputs),
//! flattened into each subcommand with `#[command(flatten)]`. Methods in
//! `src/methods` reuse [`CommonArgs`] as it is: keep its fields stable.

#![deny(clippy::arithmetic_side_effects)]

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use ovbench_core::Progress;

use crate::output::ProgressBarMode;
use crate::sizes::{ByteSize, Seconds};

pub use super::fabric_args::FabricArgs;
pub use super::launch_args::LaunchArgs;

/// Which fabric carries the traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// TCP sockets, RMA emulated by the target's progress engine.
    Tcp,
    /// The deterministic LogGP model: all ranks in one process, virtual time.
    Sim,
    /// InfiniBand / RoCE verbs.
    Verbs,
    /// UCX.
    Ucx,
    /// libfabric.
    Ofi,
    /// An MPI library, under mpirun/mpiexec/srun (cargo feature `mpi`).
    Mpi,
}

impl TransportKind {
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Sim => "sim",
            TransportKind::Verbs => "verbs",
            TransportKind::Ucx => "ucx",
            TransportKind::Ofi => "ofi",
            TransportKind::Mpi => "mpi",
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which protocol moves a message (docs/architecture.md § Layers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProtoArg {
    /// Copy through pre-registered bounce buffers.
    Eager,
    /// Rendezvous: RTS, CTS with the receiver's key, write, FIN.
    RdmaWrite,
    /// Rendezvous: RTS with the sender's key, receiver reads, FIN.
    RdmaRead,
    /// First fragment eager, then per-fragment PUT/write/FIN.
    Pipelined,
    /// Eager up to --eager-limit, then rdma-read where RMA is offloaded, else rdma-write.
    Auto,
    /// The bare data-moving operation (--op), no protocol.
    Raw,
    /// The library's own tagged protocol (UCX, libfabric).
    Native,
}

impl ProtoArg {
    /// The name users type, from the one list of protocol names (its
    /// order is this enum's; a test holds clap's value names to it).
    pub fn name(self) -> &'static str {
        ovbench_core::engine_comm::PROTOCOLS[self as usize]
    }
}

/// `--proto`'s parser: one protocol or a comma-separated list of them,
/// each checked; the field holds the first (a single run's protocol), and
/// [`proto_list`] reads the whole list.
#[derive(Clone, Copy, Debug)]
pub struct ProtoListParser;

impl clap::builder::TypedValueParser for ProtoListParser {
    type Value = ProtoArg;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<ProtoArg, clap::Error> {
        let list = proto_list(value).map_err(|bad| {
            let mut e = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
            use clap::error::{ContextKind, ContextValue};
            e.insert(
                ContextKind::InvalidArg,
                ContextValue::String(arg.map_or("--proto".into(), |a| a.to_string())),
            );
            e.insert(ContextKind::InvalidValue, ContextValue::String(bad));
            e.insert(
                ContextKind::ValidValue,
                ContextValue::Strings(
                    ovbench_core::engine_comm::PROTOCOLS
                        .iter()
                        .map(|p| p.to_string())
                        .collect(),
                ),
            );
            e
        })?;
        Ok(list[0])
    }
    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            ProtoArg::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
}

/// The protocols of a `--proto` value, in order; the first token that
/// names none, if any.
pub fn proto_list(value: &std::ffi::OsStr) -> Result<Vec<ProtoArg>, String> {
    let text = value.to_string_lossy();
    let list: Vec<ProtoArg> = text
        .split(',')
        .map(|t| ProtoArg::from_str(t.trim(), true).map_err(|_| t.trim().to_string()))
        .collect::<Result<_, _>>()?;
    if list.is_empty() {
        return Err(text.into_owned());
    }
    Ok(list)
}

/// The operation `--proto raw` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawOp {
    Write,
    Read,
    Send,
}

/// `on` / `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnOff {
    On,
    Off,
}

impl OnOff {
    pub fn is_on(self) -> bool {
        self == OnOff::On
    }
}

/// `--eager-limit`: chosen per transport (`auto`), or forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EagerLimitArg {
    Auto,
    Bytes(ByteSize),
}

impl std::str::FromStr for EagerLimitArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "auto" {
            return Ok(EagerLimitArg::Auto);
        }
        s.parse::<ByteSize>()
            .map(EagerLimitArg::Bytes)
            .map_err(|e| format!("{e}; or auto, the default, to have it chosen per transport"))
    }
}

impl EagerLimitArg {
    /// The forced limit (`None` for auto).
    pub fn forced(self) -> Option<usize> {
        match self {
            EagerLimitArg::Auto => None,
            EagerLimitArg::Bytes(b) => Some(b.bytes()),
        }
    }
}

impl serde::Serialize for EagerLimitArg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            EagerLimitArg::Auto => s.serialize_str("auto"),
            EagerLimitArg::Bytes(b) => s.serialize_u64(b.bytes() as u64),
        }
    }
}

/// Options shared by every command.
#[derive(Clone, Debug, Args)]
pub struct CommonArgs {
    /// Fabric to use (verbs, ucx and ofi need their cargo feature).
    #[arg(long, global = true, value_enum, default_value_t = TransportKind::Tcp, help_heading = "Transport")]
    pub transport: TransportKind,
    /// Number of ranks to start on this host (an error under mpirun/srun, which set it);
    /// default 2, 4 for bcast. Under --transport sim, bcast takes a list
    /// (4,8,16) and runs once per count.
    #[arg(long, global = true, value_name = "N", value_parser = parse_np, help_heading = "Transport")]
    pub np: Option<NpList>,
    /// Message protocol; a list (native,eager,rdma-read,raw) measures each
    /// in turn and adds a side-by-side table (the list is in `Cli::protos`).
    #[arg(long, global = true, value_parser = ProtoListParser, default_value = "auto", value_name = "PROTO[,PROTO…]", help_heading = "Protocol")]
    pub proto: ProtoArg,
    /// Operation timed by --proto raw.
    #[arg(long, global = true, value_enum, default_value_t = RawOp::Send, help_heading = "Protocol")]
    pub op: RawOp,
    /// Largest message sent eagerly by --proto auto (K = 1024); auto (the
    /// default) chooses it per transport from a cost model, with figures
    /// measured at start (docs/architecture.md, "Auto's eager limit").
    #[arg(
        long,
        global = true,
        default_value = "auto",
        value_name = "auto|BYTES",
        help_heading = "Protocol"
    )]
    pub eager_limit: EagerLimitArg,
    /// Fragment size of --proto pipelined (default: the engine's).
    #[arg(long, global = true, help_heading = "Protocol")]
    pub frag_size: Option<ByteSize>,
    /// Registration cache (leave-pinned) for rendezvous buffers.
    #[arg(long, global = true, value_enum, default_value_t = OnOff::On, help_heading = "Protocol")]
    pub reg_cache: OnOff,
    /// Two-sided progress: by polling inside calls, or an asynchronous thread.
    #[arg(long, global = true, default_value = "poll", value_parser = progress_parser(), help_heading = "Protocol")]
    pub progress: Progress,
    /// Deadline of every wait (seconds, or with a unit: 500ms, 2m).
    #[arg(long, global = true, default_value = "60", help_heading = "Transport")]
    pub timeout: Seconds,
    /// Write results as JSON (rewritten after every completed size).
    #[arg(long, global = true, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    /// Write results as CSV (rewritten after every completed size).
    #[arg(long, global = true, value_name = "FILE", help_heading = "Output")]
    pub csv: Option<PathBuf>,
    /// Sim model parameters, KEY=VAL,... (L, os, or, g, G, offload, jitter, seed, ...).
    #[arg(
        long,
        global = true,
        value_name = "KEY=VAL,...",
        default_value = "",
        help_heading = "Transport"
    )]
    pub sim: String,
    /// Record transfer events and report overlap bounds (off by default).
    #[arg(long, global = true, help_heading = "Output")]
    pub instrument: bool,
    /// Progress bar on stderr: auto (when stderr is a terminal), always
    /// (also into a pipe, e.g. under mpirun, srun or ssh), never.
    #[arg(long, global = true, value_enum, default_value_t = ProgressBarMode::Auto, help_heading = "Output")]
    pub progress_bar: ProgressBarMode,
    /// Nothing on stderr but errors: no progress bar, no warnings (the
    /// warnings stay in the header and the JSON).
    #[arg(long, short = 'q', global = true, help_heading = "Output")]
    pub quiet: bool,
    /// The verbs, UCX and libfabric options (src/cli/fabric_args.rs).
    #[command(flatten)]
    pub fabric: FabricArgs,
    /// --launcher, --hosts, --hostfile, --bootstrap (src/cli/launch_args.rs).
    #[command(flatten)]
    pub launch: LaunchArgs,
}

/// `--np`: one rank count, or a comma-separated list of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpList(pub Vec<u32>);

fn parse_np(s: &str) -> Result<NpList, String> {
    let mut v: Vec<u32> = Vec::new();
    for t in s.split(',') {
        let n = match t.trim().parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(format!(
                    "`{}` is no rank count: write --np N, or a list such as 4,8,16",
                    ovbench_core::shown::value(t)
                ))
            }
        };
        // Each count is one run: a count twice would run it twice.
        if v.contains(&n) {
            return Err(format!(
                "{n} is listed twice: give each rank count once, e.g. 4,8,16"
            ));
        }
        v.push(n);
    }
    Ok(NpList(v))
}

/// `--progress poll|thread`, its values listed in the help.
fn progress_parser() -> impl clap::builder::TypedValueParser<Value = Progress> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["poll", "thread"]).map(|s| {
        if s == "thread" {
            Progress::Thread
        } else {
            Progress::Poll
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn protocol_names_are_the_ones_clap_accepts() {
        let clap: Vec<String> = ProtoArg::value_variants()
            .iter()
            .map(|v| {
                v.to_possible_value()
                    .expect("no skipped variant")
                    .get_name()
                    .to_string()
            })
            .collect();
        let ours: Vec<&str> = ProtoArg::value_variants()
            .iter()
            .map(|v| v.name())
            .collect();
        assert_eq!(clap, ours);
        assert_eq!(ours, ovbench_core::engine_comm::PROTOCOLS);
    }

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        c: CommonArgs,
    }

    #[test]
    fn proto_takes_a_list_and_names_a_bad_token() {
        let t = T::try_parse_from(["x", "--proto", "native,eager,raw"]).unwrap();
        assert_eq!(t.c.proto, ProtoArg::Native);
        let l = proto_list(std::ffi::OsStr::new("native,eager,raw")).unwrap();
        assert_eq!(l, vec![ProtoArg::Native, ProtoArg::Eager, ProtoArg::Raw]);
        let e = T::try_parse_from(["x", "--proto", "eager,fast"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("'fast'") && e.contains("rdma-read"), "{e}");
    }

    #[test]
    fn defaults_match_the_design() {
        let t = T::try_parse_from(["x"]).unwrap();
        assert_eq!(t.c.transport, TransportKind::Tcp);
        assert_eq!(t.c.np, None);
        assert_eq!(t.c.proto, ProtoArg::Auto);
        assert_eq!(t.c.op, RawOp::Send);
        assert_eq!(t.c.eager_limit, EagerLimitArg::Auto);
        assert_eq!(t.c.progress, Progress::Poll);
        assert_eq!(t.c.timeout.0.as_secs(), 60);
        assert!(!t.c.instrument);
    }

    #[test]
    fn spellings() {
        let t = T::try_parse_from([
            "x",
            "--proto",
            "rdma-read",
            "--progress",
            "thread",
            "--eager-limit",
            "8K",
            "--timeout",
            "5s",
            "--reg-cache",
            "off",
        ])
        .unwrap();
        assert_eq!(t.c.proto, ProtoArg::RdmaRead);
        assert_eq!(t.c.progress, Progress::Thread);
        assert_eq!(t.c.eager_limit.forced(), Some(8192));
        assert!(!t.c.reg_cache.is_on());
        let e = T::try_parse_from(["x", "--progress", "spin"]).unwrap_err();
        assert!(e.to_string().contains("poll"), "{e}");
        assert!(T::try_parse_from(["x", "--np", "0"]).is_err());
        assert!(T::try_parse_from(["x", "--np", "4,x"]).is_err());
        let t = T::try_parse_from(["x", "--np", "4,8,16"]).unwrap();
        assert_eq!(t.c.np, Some(NpList(vec![4, 8, 16])));
    }
}
