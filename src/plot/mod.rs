//! `ovbench plot RESULT.json… -o FIG.svg|FIG.png`: the figure the
//! references draw for the command, rendered in-process (plotters); each
//! file a series (or a set of series) labelled by its run.

mod chart;
pub mod figure;
pub mod kinds;
pub mod load;
pub mod render;
mod row_check;
pub mod scale;

use std::path::PathBuf;

use anyhow::Result;

pub use figure::Figure;
pub use render::{Layout, PanelLayout, Rect};

/// `ovbench plot`'s options.
#[derive(Clone, Debug, clap::Args)]
#[command(
    after_help = "Figures by command:\n  latency   p50 with a p99..p99.9 band, and min, vs size (log axes)\n  bw, bibw  MB/s vs size, and the mean window rate with its interval; msgrate: messages/s\n  overhead  overhead and availability vs size (a --recv run's file gives the receive series)\n  overlap   min..max overlap band and wait time vs computation, per pair, size and side\n  logp      os, or, g vs size with their intervals, probed sizes circled, L and G noted\n  bcast     each method vs the number of ranks (log axis); OL_i per destination\n  commtest  time and MB/s vs packet count per protocol, at most 8 series a panel\n\nExamples:\n  ovbench latency --json tcp.json && ovbench latency --transport sim --json sim.json\n  ovbench plot tcp.json sim.json -o latency.svg\n  ovbench plot overhead-send.json overhead-recv.json -o overhead.png"
)]
pub struct PlotArgs {
    /// Result files of one command (written by --json); each adds its series.
    #[arg(required = true, value_name = "RESULT.json")]
    pub files: Vec<PathBuf>,
    /// The figure to write; .svg or .png.
    #[arg(short = 'o', long = "output", value_name = "FIG.svg|FIG.png")]
    pub output: PathBuf,
}

/// Draw the figure of `args.files` into `args.output`.
pub fn run(args: &PlotArgs) -> Result<()> {
    render::Format::of(&args.output).map_err(crate::run::usage)?;
    // A figure that cannot be written is found before any input is read.
    crate::files::output::check("-o", &args.output, false).map_err(crate::run::usage)?;
    let runs = load::read_all(&args.files).map_err(crate::run::usage)?;
    let fig = kinds::figure(&runs).map_err(crate::run::usage)?;
    render::render(&fig, &args.output)?;
    Ok(())
}

/// The figure of `files` and where its panels and texts were drawn (for
/// tests and tools that check a figure against its data).
pub fn plot_files(files: &[PathBuf], out: &std::path::Path) -> Result<(Figure, Layout)> {
    let runs = load::read_all(files)?;
    let fig = kinds::figure(&runs)?;
    let layout = render::render(&fig, out)?;
    Ok((fig, layout))
}
