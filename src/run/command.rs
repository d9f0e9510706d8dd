//! Run the chosen subcommand on this rank, with its communicator, control
//! channel and sink.

use anyhow::Result;
use ovbench_core::Communicator;

use crate::bench::window::{self, Kind};
use crate::bench::{latency, with_cpu_use, BenchCtx};
use crate::cli::common::CommonArgs;
use crate::cli::Command;
use crate::control::Control;
use crate::methods::run_method;
use crate::report::Sink;

/// Run `cmd` on this rank; every rank calls it.
pub fn execute(
    cmd: &Command,
    common: &CommonArgs,
    comm: &mut dyn Communicator,
    ctl: &mut dyn Control,
    sink: &mut dyn Sink,
    progress_line: bool,
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
        progress: progress_line,
        instrument: common.instrument,
        cpu_use: real_time,
        raw_send_max,
    };
    match cmd {
        Command::Method(m) if real_time => {
            with_cpu_use(comm, ctl, sink, |comm, sink| run_method(m, comm, sink))
        }
        Command::Method(m) => run_method(m, comm, sink),
        Command::Latency(a) => latency::run(&mut cx(comm, ctl, sink), a),
        Command::Bw(a) => window::run(&mut cx(comm, ctl, sink), Kind::Bw, a),
        Command::Bibw(a) => window::run(&mut cx(comm, ctl, sink), Kind::Bibw, a),
        Command::Msgrate(a) => window::run(&mut cx(comm, ctl, sink), Kind::Msgrate, a),
    }
}
