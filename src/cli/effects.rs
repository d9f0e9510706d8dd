//! Where each option has an effect: one entry per option (by clap id),
//! naming the commands, transports, launches and protocols it acts in.
//! An option given where it has none is a mistake to point out, not to
//! ignore, and the refusals are generated from this table alone; a test
//! walks clap's command tree and fails on an option without an entry.

#![deny(clippy::arithmetic_side_effects)]

use super::common::{ProtoArg, TransportKind};
use super::Cli;

/// How this run's ranks start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// `--np` ranks on this host.
    Local,
    /// One rank per host over ssh.
    Ssh,
    /// Ranks of mpirun or srun.
    Job,
}

impl Launch {
    fn name(self) -> &'static str {
        match self {
            Launch::Local => "the local launcher (--np ranks on this host)",
            Launch::Ssh => "ssh launch (--hosts/--hostfile)",
            Launch::Job => "mpirun/srun",
        }
    }
}

/// Where one option acts; `None` is everywhere.
pub struct Effect {
    /// The clap id.
    pub id: &'static str,
    /// What it does, for the refusal ("sets the fragments of …").
    pub does: &'static str,
    pub commands: Option<&'static [&'static str]>,
    pub transports: Option<&'static [TransportKind]>,
    pub launches: Option<&'static [Launch]>,
    pub protos: Option<&'static [ProtoArg]>,
    /// Options that take its effect away when given too, and why.
    pub void_with: &'static [(&'static str, &'static str)],
}

use Launch::{Job, Local, Ssh};
use ProtoArg::{Auto, Pipelined, Raw, RdmaRead, RdmaWrite};
use TransportKind::{Mpi, Ofi, Sim, Tcp, Ucx, Verbs};

/// The commands that measure (every option of a benchmark applies to them).
pub const BENCHMARKS: &[&str] = &[
    "latency", "bw", "bibw", "msgrate", "overhead", "logp", "bcast", "commtest", "overlap",
];
const LAUNCHED: &[TransportKind] = &[Tcp, Verbs, Ucx, Ofi, Mpi];
const RENDEZVOUS: &[ProtoArg] = &[RdmaWrite, RdmaRead, Pipelined, Auto];

const fn any(id: &'static str, does: &'static str) -> Effect {
    Effect {
        id,
        does,
        commands: Some(BENCHMARKS),
        transports: None,
        launches: None,
        protos: None,
        void_with: &[],
    }
}

const fn on(id: &'static str, does: &'static str, t: &'static [TransportKind]) -> Effect {
    Effect {
        transports: Some(t),
        ..any(id, does)
    }
}

const fn only(id: &'static str, does: &'static str, cmds: &'static [&'static str]) -> Effect {
    Effect {
        commands: Some(cmds),
        ..any(id, does)
    }
}

const fn launch(id: &'static str, does: &'static str, l: &'static [Launch]) -> Effect {
    Effect {
        transports: Some(LAUNCHED),
        launches: Some(l),
        ..any(id, does)
    }
}

const VERBS: &[TransportKind] = &[Verbs];
const UCX: &[TransportKind] = &[Ucx];
const OFI: &[TransportKind] = &[Ofi];
const SIM: &[TransportKind] = &[Sim];
const TOOLS_OUT: &[&str] = &["plot", "compare"];
const LAT_BW: &[&str] = &["latency", "bw", "bibw", "msgrate"];
const BW: &[&str] = &["bw", "bibw", "msgrate"];

/// Every option, and where it acts.
pub const EFFECTS: &[Effect] = &[
    // Transport and launch.
    any("transport", "chooses the fabric"),
    Effect {
        transports: Some(&[Tcp, Verbs, Ucx, Ofi, Sim]),
        launches: Some(&[Local]),
        ..any("np", "sets the rank count")
    },
    any("timeout", "bounds every wait"),
    launch("launcher", "chooses how ranks start", &[Local, Ssh, Job]),
    launch("hosts", "starts ranks over ssh", &[Ssh]),
    launch("hostfile", "starts ranks over ssh", &[Ssh]),
    launch(
        "bootstrap",
        "names rank 0's service to ranks of mpirun/srun",
        &[Job],
    ),
    launch(
        "oversubscribe",
        "allows more than 64 local ranks per core",
        &[Local],
    ),
    // Protocol.
    any("proto", "chooses the protocol"),
    Effect {
        protos: Some(&[Raw]),
        ..any("op", "chooses the operation of --proto raw")
    },
    any("eager_limit", "sets the largest eager message"),
    Effect {
        protos: Some(&[Pipelined]),
        ..any("frag_size", "sets the fragments of --proto pipelined")
    },
    Effect {
        protos: Some(RENDEZVOUS),
        ..any("reg_cache", "caches the rendezvous buffers' registrations")
    },
    any("progress", "chooses how two-sided messages progress"),
    // Output.
    any("json", "writes the results as JSON"),
    any("csv", "writes the results as CSV"),
    any("instrument", "records transfer events"),
    any("progress_bar", "draws a progress bar"),
    any("quiet", "keeps stderr to errors"),
    // Fabrics.
    on("sim", "sets the simulator's model", SIM),
    on("device", "chooses the verbs device", VERBS),
    on("port", "chooses the verbs port", VERBS),
    on("gid_index", "chooses the RoCE GID", VERBS),
    on("cm", "connects through rdma_cm", VERBS),
    on("tx_depth", "sizes the send queue", VERBS),
    on("rx_depth", "sizes the receive queue", VERBS),
    on("inline_size", "sets the inline limit", VERBS),
    on("mtu", "sets the path MTU", VERBS),
    on("sl", "sets the service level", VERBS),
    on("tclass", "sets the traffic class", VERBS),
    on("eager_buf", "sizes the eager buffers", VERBS),
    on("ucx_tls", "chooses UCX's transports", UCX),
    on("ucx_net_devices", "chooses UCX's devices", UCX),
    on("ucx_connect", "chooses how UCX connects", UCX),
    on("provider", "chooses the libfabric provider", OFI),
    on("ofi_node", "chooses libfabric's node", OFI),
    // The benchmarks' own.
    only(
        "sizes",
        "sets the message sizes",
        &[
            "latency", "bw", "bibw", "msgrate", "overhead", "logp", "bcast", "overlap",
        ],
    ),
    only(
        "iters",
        "sets the iterations",
        &["latency", "bw", "bibw", "msgrate", "overlap"],
    ),
    only(
        "iterations",
        "sets the iterations",
        &["overhead", "commtest"],
    ),
    only("warmup", "sets the warm-up iterations", LAT_BW),
    only(
        "verify",
        "checks every byte",
        &["latency", "bw", "bibw", "msgrate", "overlap"],
    ),
    only("one_buffer", "reuses one buffer", &["latency"]),
    only("window", "sets the messages in flight", BW),
    only("pairs", "sets the rank pairs", BW),
    only("serial", "runs the pairs one at a time", BW),
    // overhead
    only("msgsize", "sets the message size", &["overhead", "bcast"]),
    only("recv", "measures the receive side", &["overhead"]),
    only("repeats", "sets the repeats", &["overhead"]),
    only("thresh", "sets the repeats' agreement", &["overhead"]),
    only("bthresh", "sets base_t's agreement", &["overhead"]),
    only("nohdr", "drops the header line", &["overhead"]),
    only("verbose", "prints each step", &["overhead", "logp"]),
    // logp
    only("conf_int", "sets the confidence", &["logp"]),
    only("eps", "sets the precision", &["logp"]),
    only("flood", "sets the flood length", &["logp"]),
    only("max_diff", "sets the largest difference", &["logp"]),
    only("max_its", "caps the iterations", &["logp"]),
    only("min_size", "sets the smallest size", &["logp"]),
    only("max_size", "sets the largest size", &["logp"]),
    only("send_mode", "chooses the send call", &["logp"]),
    only("recv_mode", "chooses the receive call", &["logp"]),
    // bcast
    only("algorithm", "chooses the tree", &["bcast"]),
    only("barrier", "chooses the barrier", &["bcast"]),
    only("method", "chooses the method", &["bcast"]),
    only("max_cv", "sets the spread target", &["bcast"]),
    only(
        "min_measurements",
        "sets the fewest measurements",
        &["bcast"],
    ),
    only("max_measurements", "sets the most measurements", &["bcast"]),
    only("reps", "sets the repetitions", &["bcast"]),
    // commtest
    only("total", "sets the volume", &["commtest"]),
    only("min_packet", "sets the smallest packet", &["commtest"]),
    only("exchange", "chooses the exchange", &["commtest"]),
    only("protocols", "chooses the protocols", &["commtest"]),
    only("reorganized", "runs the reorganized variant", &["commtest"]),
    only("distance", "sets the partner distance", &["commtest"]),
    only("all_pairs", "runs every pair", &["commtest"]),
    only("global_clock", "adds the global span", &["commtest"]),
    only("start", "chooses how iterations start", &["commtest"]),
    // overlap
    only("max_comp", "caps the computation", &["overlap"]),
    only("steps", "sets the steps", &["overlap"]),
    only("pair", "chooses the pair", &["overlap"]),
    only("xfer_table", "reads the transfer times", &["overlap"]),
    Effect {
        void_with: &[(
            "xfer_table",
            "the transfer times come from the table, none are measured",
        )],
        ..only(
            "xfer_reps",
            "sets the bare transfers measured per size",
            &["overlap"],
        )
    },
    only(
        "write_xfer_table",
        "writes the transfer times",
        &["overlap"],
    ),
    // The tools' own.
    only("files", "names the result files", TOOLS_OUT),
    only("output", "names the figure or report", TOOLS_OUT),
    only("fail_if_slower", "sets the failing slowdown", &["compare"]),
    only("shell", "chooses the shell", &["completions"]),
];

/// The entry of clap id `id`.
pub fn effect(id: &str) -> Option<&'static Effect> {
    EFFECTS.iter().find(|e| e.id == id)
}

fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// `a, b or c`.
fn names<T: Copy>(l: &[T], name: impl Fn(T) -> String) -> String {
    let all: Vec<String> = l.iter().map(|&x| name(x)).collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => all.join(""),
    }
}

/// Why an option the user gave has no effect in this run (`launch`:
/// how it starts, where known), or `None` where every one has.
pub fn refusal(cli: &Cli, launch: Option<Launch>) -> Option<String> {
    let c = &cli.common;
    let cmd = cli.command.name();
    let protos: Vec<ProtoArg> = if cli.protos.is_empty() {
        vec![c.proto]
    } else {
        cli.protos.clone()
    };
    for id in &cli.given {
        // clap also reports the groups of derived structs, named after
        // their type (`CompareArgs`): those are no option.
        let Some(e) = effect(id) else { continue };
        let f = flag(id);
        if let Some(cmds) = e.commands.filter(|l| !l.contains(&cmd.as_str())) {
            if std::ptr::eq(cmds, BENCHMARKS) {
                return Some(format!(
                    "{f} is an option of the benchmarks and has no effect on `ovbench {cmd}`: drop it"
                ));
            }
            return Some(format!(
                "{f} {} and has no effect on `ovbench {cmd}` (only on {}): drop it",
                e.does,
                cmds.join(", ")
            ));
        }
        if let Some(t) = e.transports.filter(|l| !l.contains(&c.transport)) {
            let fix = match t {
                [one] => format!("add --transport {one} or drop {f}"),
                _ => format!("drop {f}"),
            };
            return Some(format!(
                "{f} {} under --transport {}, but this run uses --transport {}: {fix}",
                e.does,
                names(t, |k| k.to_string()),
                c.transport,
            ));
        }
        if let (Some(l), Some(now)) = (e.launches, launch) {
            if !l.contains(&now) {
                return Some(format!(
                    "{f} {}, and has no effect under {} (only under {}): drop it",
                    e.does,
                    now.name(),
                    names(l, |k| k.name().to_string())
                ));
            }
        }
        if let Some(p) = e.protos.filter(|l| !protos.iter().any(|x| l.contains(x))) {
            return Some(format!(
                "{f} {}, but this run uses --proto {}: add --proto {} or drop {f}",
                e.does,
                names(&protos, |x| x.name().to_string()),
                names(p, |x| x.name().to_string())
            ));
        }
        if let Some((other, why)) = e.void_with.iter().find(|(o, _)| cli.gave(o)) {
            return Some(format!(
                "{f} {}, which has no effect with {}: {why}; drop one of them",
                e.does,
                flag(other)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests;
