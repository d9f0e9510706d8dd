//! `--transport sim`: every rank is a thread of this process on the
//! simulator's virtual time (no child processes); the engine's
//! communicator runs over each rank's simulated transport, clock and
//! work loop, so the commands run unchanged.

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use ovbench_core::{Clock, Communicator, Link, Progress};
use ovbench_sim::{run_raw, RankKit, SimParams};
use serde_json::Value;

use super::{comm, execute_rank, rank0_header, rank0_sink};
use crate::cli::{Cli, Command};
use crate::control::SharedControl;
use crate::env::RankFacts;
use crate::methods::{bcast, MethodCommand};
use crate::report::{NullSink, Sink};

/// The simulation parameters: `--sim`, with `--progress thread` applied.
pub fn params(cli: &Cli) -> Result<SimParams> {
    let mut p = SimParams::parse(&cli.common.sim).map_err(|e| anyhow!(e))?;
    if cli.common.progress == Progress::Thread {
        p.progress = Progress::Thread;
    }
    Ok(p)
}

/// The virtual time a benchmark's messages take at most, where the model
/// and the arguments fix it (latency, bw, bibw, msgrate: fixed counts a
/// size), in picoseconds, saturating; `None` for the methods, whose
/// repetitions adapt to what they measure (their clock is checked as they
/// run).
#[deny(clippy::arithmetic_side_effects)]
fn virtual_span_ps(cli: &Cli, p: &SimParams) -> Option<u128> {
    use crate::bench::{latency, window};
    let (sweep, per_iter): (_, Box<dyn Fn(u128) -> u128>) = match &cli.command {
        // A round trip: two messages.
        Command::Latency(a) => (&a.sweep, Box::new(|m: u128| m.saturating_mul(2))),
        // A window of messages and its acknowledgement (bibw: both ways).
        Command::Bw(w) | Command::Bibw(w) | Command::Msgrate(w) => {
            let ways: u128 = if matches!(cli.command, Command::Bibw(_)) {
                2
            } else {
                1
            };
            let ack = u128::from(p.message_bound_ps(0));
            let window = u128::from(w.window);
            (
                &w.sweep,
                Box::new(move |m: u128| {
                    m.saturating_mul(window)
                        .saturating_add(ack)
                        .saturating_mul(ways)
                }),
            )
        }
        _ => return None,
    };
    let defaults = match &cli.command {
        Command::Latency(_) => latency::default_counts,
        _ => window::default_counts,
    };
    let mut total: u128 = 0;
    for &size in sweep.sizes.as_slice() {
        let c = sweep.counts(size, defaults);
        let msg = u128::from(p.message_bound_ps(size as u64));
        // --verify adds an untimed pass of at most 1000 iterations.
        let iters = u128::from(c.warmup)
            .saturating_add(u128::from(c.iters))
            .saturating_add(if sweep.verify { 1_001 } else { 0 });
        total = total.saturating_add(iters.saturating_mul(per_iter(msg)));
    }
    Some(total)
}

/// A benchmark whose messages would pass the virtual clock's bound is
/// refused before it starts, naming the bound (the methods' clocks are
/// checked as they run: the run stops with exit 1).
pub fn check_clock(cli: &Cli, p: &SimParams) -> Result<()> {
    let Some(span) = virtual_span_ps(cli, p) else {
        return Ok(());
    };
    if span < u128::from(u64::MAX) {
        return Ok(());
    }
    let days = span as f64 / 1e12 / 86_400.0;
    Err(anyhow!(
        "--sim: {} needs up to {days:.3e} days of virtual time with these --sizes, --iters and --warmup and this model, past {}: give fewer --iters or --warmup, smaller --sizes, or smaller costs in --sim",
        cli.command.name(),
        ovbench_sim::CLOCK_BOUND
    ))
}

/// Run the whole job in this process (a bcast sweep: once per `--np`).
pub fn run(cli: &Cli) -> Result<()> {
    let mut p = params(cli)?;
    // The commands never read the truth (it is discarded below), and at
    // scale recording it costs more than the run: 1024-rank OL_i would
    // keep about 1 GB of it.
    p.truth = false;
    let nps = cli.nps();
    match &cli.command {
        Command::Method(MethodCommand::Bcast(args)) if nps.len() > 1 => sweep(cli, &p, args, &nps),
        _ => run_one(cli, &p, cli.np(), |cli, p, controls, kit| {
            rank_main(cli, p, controls, kit)
        }),
    }
}

/// The paper's Figures 10 and 11 in one command: bcast at each rank count
/// of `--np`, one table set per count, then the method × P summary. A
/// run's rank 0 records its sink calls (the printing sink stays on this
/// thread) and they are replayed here after it.
fn sweep(cli: &Cli, p: &SimParams, args: &bcast::Args, nps: &[u32]) -> Result<()> {
    let header: Mutex<Option<(serde_json::Value, Vec<String>)>> = Mutex::new(None);
    let mut sink = None;
    let mut outs = Vec::new();
    for &np in nps {
        let recorded: Mutex<Option<(Recorder, bcast::Output)>> = Mutex::new(None);
        run_one(cli, p, np, |cli, p, _controls, kit| {
            let rank = kit.rank;
            let clock: Arc<dyn Clock> = kit.clock.clone();
            let mut comm = comm::build(
                &cli.common,
                Link::Plain(Box::new(kit.transport)),
                clock,
                Box::new(kit.work),
                false,
            )?;
            let one_way = super::eager_limit::model_one_way_ns(p);
            super::eager_limit::settle(&cli.common, comm.as_mut(), Some(one_way))?;
            let cmd = &cli.command;
            if let Command::Method(m) = cmd {
                crate::methods::check_protocol(m, comm.as_ref())?;
            }
            if rank != 0 {
                return bcast::run(comm.as_mut(), args, &mut NullSink)
                    .map(drop)
                    .with_context(|| format!("rank {rank}"));
            }
            let mut h = header.lock().unwrap_or_else(|e| e.into_inner());
            if h.is_none() {
                *h = Some(sim_header(cli, comm.as_ref(), np, p));
            }
            drop(h);
            let mut rec = Recorder::default();
            let out = bcast::run(comm.as_mut(), args, &mut rec).with_context(|| "rank 0")?;
            *recorded.lock().unwrap_or_else(|e| e.into_inner()) = Some((rec, out));
            Ok(())
        })?;
        if sink.is_none() {
            let header = header
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .context("the sweep's first run left no header")?;
            let mut s = rank0_sink(cli, header)?;
            crate::report::Sink::note(
                &mut s,
                &format!(
                    "sweep over --np {}: one run per rank count",
                    nps.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                ),
            );
            sink = Some(s);
        }
        let (rec, out) = recorded
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .context("rank 0 left no result")?;
        if let Some(s) = sink.as_mut() {
            rec.replay(s);
        }
        outs.push(out);
    }
    let mut sink = sink.context("no rank count to sweep")?;
    bcast::sweep_summary(&mut sink, &outs);
    sink.finish()
}

/// A sink that keeps what it is given, to be replayed into another.
#[derive(Default)]
struct Recorder(Vec<Call>);

enum Call {
    Table(String, Vec<String>),
    Row(Vec<String>, serde_json::Value),
    Summary(serde_json::Value, Vec<String>),
    Note(String),
}

impl Recorder {
    fn replay(self, to: &mut dyn Sink) {
        for c in self.0 {
            match c {
                Call::Table(t, cols) => {
                    let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
                    to.table(&t, &cols);
                }
                Call::Row(cells, j) => to.row(&cells, j),
                Call::Summary(j, lines) => to.summary(j, &lines),
                Call::Note(n) => to.note(&n),
            }
        }
    }
}

impl Sink for Recorder {
    fn table(&mut self, title: &str, columns: &[&str]) {
        self.0.push(Call::Table(
            title.into(),
            columns.iter().map(|c| c.to_string()).collect(),
        ));
    }
    fn row(&mut self, cells: &[String], json: serde_json::Value) {
        self.0.push(Call::Row(cells.to_vec(), json));
    }
    fn summary(&mut self, json: serde_json::Value, lines: &[String]) {
        self.0.push(Call::Summary(json, lines.to_vec()));
    }
    fn note(&mut self, text: &str) {
        self.0.push(Call::Note(text.into()));
    }
}

/// One simulated job of `np` ranks, each running `main`.
fn run_one(
    cli: &Cli,
    p: &SimParams,
    np: u32,
    main: impl Fn(&Cli, &SimParams, &[SharedControl], RankKit) -> Result<()> + Sync,
) -> Result<()> {
    let controls = SharedControl::group(np);
    // A rank's error leaves its peers waiting, which the simulator reports
    // as a deadlock: keep the first error to report it instead.
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let outcome = run_raw(np, p, |kit| {
        let r = main(cli, p, &controls, kit);
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
    let np = controls.len() as u32;
    let rank = kit.rank;
    let mut ctl = controls[rank as usize].clone();
    let clock: Arc<dyn Clock> = kit.clock.clone();
    let mut comm = comm::build(
        common,
        Link::Plain(Box::new(kit.transport)),
        clock,
        Box::new(kit.work),
        false,
    )?;
    let one_way = super::eager_limit::model_one_way_ns(p);
    super::eager_limit::settle(common, comm.as_mut(), Some(one_way))?;
    let sink = (rank == 0)
        .then(|| rank0_sink(cli, sim_header(cli, comm.as_ref(), np, p)))
        .transpose()?;
    execute_rank(cli, comm.as_mut(), &mut ctl, rank, sink, false)
}

/// Rank 0's header under sim: one process, the model's parameters.
fn sim_header(cli: &Cli, comm: &dyn Communicator, np: u32, p: &SimParams) -> (Value, Vec<String>) {
    rank0_header(cli, vec![RankFacts::here(0)], comm, np, &p.describe(), true)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn check(args: &[&str]) -> Result<()> {
        let cli =
            Cli::try_parse_from(std::iter::once("ovbench").chain(args.iter().copied())).unwrap();
        check_clock(&cli, &params(&cli).unwrap())
    }

    #[test]
    fn a_benchmark_past_the_clock_is_refused_naming_the_bound() {
        assert!(check(&["latency", "--transport", "sim"]).is_ok());
        assert!(check(&["bw", "--transport", "sim", "--window", "65536"]).is_ok());
        for args in [
            &[
                "latency",
                "--sizes",
                "8",
                "--iters",
                "100000000",
                "--warmup",
                "1000000000",
                "--sim",
                "L=3600s",
            ][..],
            &[
                "bibw", "--sizes", "1G", "--iters", "1000", "--window", "65536", "--sim", "G=1s",
            ][..],
        ] {
            let e = check(args).unwrap_err().to_string();
            assert!(
                e.starts_with("--sim:") && e.contains("2^64 - 1 ps"),
                "{args:?}: {e}"
            );
        }
        // The methods adapt their repetitions: their clock is checked as they run.
        assert!(check(&["overhead", "--sim", "L=3600s,os=3600s"]).is_ok());
    }
}
