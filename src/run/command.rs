//! Run the chosen subcommand on this rank, with its communicator, control
//! channel and sink.

use anyhow::{Context, Result};
use ovbench_core::Communicator;

use crate::bench::window::{self, Kind};
use crate::bench::{latency, with_cpu_use, BenchCtx};
use crate::cli::common::CommonArgs;
use crate::cli::{Cli, Command};
use crate::control::Control;
use crate::methods::run_method;
use crate::output::ReportSink;
use crate::report::{NullSink, Sink};

/// Run `cmd` on this rank; every rank calls it.
pub fn execute(
    cmd: &Command,
    common: &CommonArgs,
    comm: &mut dyn Communicator,
    ctl: &mut dyn Control,
    sink: &mut dyn Sink,
    real_time: bool,
) -> Result<()> {
    // Raw mode as the communicator runs it, not as the command line said.
    let raw = comm.info().protocol.raw_op();
    let raw_send_max = comm
        .info()
        .caps
        .eager_buf_size
        .saturating_sub(ovbench_proto::HEADER_LEN);
    let cx = |comm, ctl, sink| BenchCtx {
        comm,
        ctl,
        sink,
        raw,
        instrument: common.instrument,
        cpu_use: real_time,
        raw_send_max,
    };
    ovbench_core::watch::set_phase(cmd.name());
    match cmd {
        Command::Method(m) if real_time => {
            with_cpu_use(comm, ctl, sink, |comm, sink| run_method(m, comm, sink))
        }
        Command::Method(m) => run_method(m, comm, sink),
        Command::Latency(a) => latency::run(&mut cx(comm, ctl, sink), a),
        Command::Bw(a) => window::run(&mut cx(comm, ctl, sink), Kind::Bw, a),
        Command::Bibw(a) => window::run(&mut cx(comm, ctl, sink), Kind::Bibw, a),
        Command::Msgrate(a) => window::run(&mut cx(comm, ctl, sink), Kind::Msgrate, a),
        Command::Tool(t) => anyhow::bail!("`{}` measures nothing and runs on no rank", t.name()),
    }
}

/// Run the command line's command as rank `rank`: rank 0 with its report
/// `sink` (and its progress bar), finished after; the others with none.
pub(crate) fn execute_rank(
    cli: &Cli,
    comm: &mut dyn Communicator,
    ctl: &mut dyn Control,
    rank: u32,
    mut sink: Option<ReportSink>,
    real_time: bool,
) -> Result<()> {
    let mut null = NullSink;
    let out: &mut dyn Sink = match sink.as_mut() {
        Some(s) => s,
        None => &mut null,
    };
    execute(&cli.command, &cli.common, comm, ctl, out, real_time).with_context(|| {
        match ovbench_core::watch::phase() {
            p if p.is_empty() => format!("rank {rank}"),
            p => format!("rank {rank} ({p})"),
        }
    })?;
    sink.map_or(Ok(()), ReportSink::finish)
}
