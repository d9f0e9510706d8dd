//! The run header: the environment plus what this run is (command,
//! options, transport and its two capability axes, protocol, clock), as
//! `#` lines for stdout and as the JSON `header` object.

use ovbench_core::{Caps, ClockInfo, CommInfo, CompletionStamps, RmaKind, RmaProgress};
use serde_json::{json, Value};

use crate::cli::common::CommonArgs;
use crate::env::Environment;
use crate::sizes::format_bytes;

/// What the run is, beyond the environment.
#[derive(Debug)]
pub struct RunFacts<'a> {
    pub command: &'a str,
    pub common: &'a CommonArgs,
    pub comm: &'a CommInfo,
    pub clock: &'a ClockInfo,
    pub work_unit_ns: f64,
    pub np: u32,
}

/// The header's JSON object, its lines (without `# `), and the warnings.
#[derive(Debug)]
pub struct Header {
    pub json: Value,
    pub lines: Vec<String>,
    pub warnings: Vec<String>,
}

fn axes(c: &Caps) -> String {
    let rma = match (c.rma, c.rma_progress) {
        (RmaKind::Native, RmaProgress::Offloaded) => "native, offloaded to the NIC",
        (RmaKind::Native, RmaProgress::TargetProgress) => "native, served by the target's progress",
        (RmaKind::Emulated, _) => "emulated by messages, served by the target's progress",
    };
    format!("RMA {rma}; two-sided progress: {}", c.progress)
}

/// Which clock stamps XFER_END: `nic` where the transport reports NIC
/// completion timestamps (verbs on a device that has them, sim), else
/// `host`.
fn xfer_end_source(c: &Caps) -> &'static str {
    match c.completion_stamps {
        CompletionStamps::Nic => "nic",
        CompletionStamps::Host => "host",
    }
}

fn xfer_end_text(source: &str) -> &'static str {
    if source == "nic" {
        "nic (completion timestamps converted to the clock below)"
    } else {
        "host (the clock below, when the completion is taken)"
    }
}

/// Build the header of a run.
pub fn build(env: &Environment, f: &RunFacts<'_>) -> Header {
    let progress_threads = usize::from(f.comm.caps.progress == ovbench_core::Progress::Thread);
    let warnings = env.warnings(progress_threads);
    let c = f.common;
    let t = &f.comm.transport;
    let mut lines = env.lines();
    let device = if t.device.is_empty() { "-" } else { &t.device };
    let library = if t.library.is_empty() {
        String::new()
    } else {
        format!(", {}", t.library)
    };
    lines.push(format!(
        "transport: {} (device {device}{library}), {} ranks",
        t.name, f.np
    ));
    for (k, v) in &t.extra {
        lines.push(format!("transport {k}: {v}"));
    }
    if f.comm.caps.completion_stamps == CompletionStamps::Nic {
        // The line the transports printed before this became a capability.
        lines.push("transport completion_timestamps: nic".into());
    }
    let eager = &f.comm.eager_limit;
    lines.push(format!(
        "protocol: {} (eager limit {} {}, registration cache {})",
        f.comm.protocol,
        format_bytes(eager.bytes),
        eager.source,
        if c.reg_cache.is_on() { "on" } else { "off" },
    ));
    if let Some(i) = &eager.inputs {
        lines.push(format!("eager limit {}: {i}", eager.source));
    }
    lines.push(axes(&f.comm.caps));
    lines.push(format!(
        "clock: {} at {:.3} GHz, resolution {:.1} ns, call cost {:.1} ns; work unit {:.2} ns",
        f.clock.source,
        f.clock.hz / 1e9,
        f.clock.resolution_ns,
        f.clock.call_cost_ns,
        f.work_unit_ns
    ));
    lines.push(format!(
        "XFER_END stamped by: {}",
        xfer_end_text(xfer_end_source(&f.comm.caps))
    ));
    lines.push(
        "units: sizes in bytes (K = 1024); tables in µs and MB/s (10^6 B/s); JSON in ns and bytes_per_sec"
            .into(),
    );
    for w in &warnings {
        lines.push(format!("WARNING: {w}"));
    }
    let json = json!({
        "command": f.command,
        "environment": env,
        "options": {
            "transport": c.transport,
            "np": f.np,
            "proto": c.proto,
            "op": c.op,
            "eager_limit": c.eager_limit,
            "frag_size": c.frag_size.map(|b| b.bytes()),
            "reg_cache": c.reg_cache,
            "progress": c.progress,
            "timeout_s": c.timeout.0.as_secs_f64(),
            "sim": c.sim,
            "instrument": c.instrument,
        },
        "communicator": f.comm,
        "clock": f.clock,
        "xfer_end_source": xfer_end_source(&f.comm.caps),
        "work_unit_ns": f.work_unit_ns,
        "units": {"time": "ns", "rate": "bytes_per_sec", "size": "bytes"},
        "warnings": warnings,
    });
    Header {
        json,
        lines,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use crate::env::RankFacts;
    use clap::Parser;
    use ovbench_core::{CompletionStamps, Progress, TransportInfo};

    #[test]
    fn header_names_transport_axes_clock_and_units() {
        let cli = Cli::try_parse_from(["ovbench", "latency", "--progress", "thread"]).unwrap();
        let caps = Caps {
            rma: RmaKind::Emulated,
            rma_progress: RmaProgress::TargetProgress,
            progress: Progress::Thread,
            eager_buf_size: 65536,
            native_sync_send: false,
            completion_stamps: CompletionStamps::Host,
            eager_copies: 0,
        };
        let comm = CommInfo {
            transport: TransportInfo {
                name: "tcp".into(),
                device: "lo".into(),
                library: String::new(),
                extra: vec![],
                caps: caps.clone(),
                rank: 0,
                size: 2,
            },
            caps,
            protocol: ovbench_core::CommPath::Engine(ovbench_core::engine_comm::Protocol::Auto),
            plan: ovbench_core::engine_comm::Plan::default(),
            eager_limit: ovbench_core::EagerLimit::forced(16384),
        };
        let clock = ClockInfo {
            source: "tsc".into(),
            hz: 2.5e9,
            resolution_ns: 0.4,
            call_cost_ns: 7.0,
        };
        let env = Environment::capture(vec![RankFacts::here(0), RankFacts::here(1)]);
        let h = build(
            &env,
            &RunFacts {
                command: "latency",
                common: &cli.common,
                comm: &comm,
                clock: &clock,
                work_unit_ns: 1.25,
                np: 2,
            },
        );
        let text = h.lines.join("\n");
        assert!(
            text.contains("transport: tcp (device lo), 2 ranks"),
            "{text}"
        );
        assert!(text.contains("emulated by messages") && text.contains("progress: thread"));
        assert!(text.contains("clock: tsc at 2.500 GHz, resolution 0.4 ns, call cost 7.0 ns"));
        assert!(text.contains("MB/s (10^6 B/s)"));
        assert_eq!(h.json["options"]["progress"], "thread");
        assert_eq!(h.json["communicator"]["caps"]["rma"], "emulated");
        assert_eq!(h.json["clock"]["source"], "tsc");
        assert!(text.contains("XFER_END stamped by: host"), "{text}");
        assert_eq!(h.json["xfer_end_source"], "host");
        assert_eq!(h.json["environment"]["ranks"][1]["rank"], 1);
    }
}
