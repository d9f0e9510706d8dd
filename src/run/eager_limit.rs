//! Auto's eager limit, chosen once at start on every rank alike: forced
//! by `--eager-limit N`, computed from the simulator's model, or from two
//! figures rank 0 measures (a small message's one-way time to rank 1 and
//! its memory copy rate) and sends to every rank. The cost model is
//! `ovbench_core::eager_limit`'s.

use anyhow::{Context, Result};
use ovbench_core::{Buf, Communicator, EagerInputs, EagerLimit, EagerSource, Tag};
#[cfg(feature = "sim")]
use ovbench_sim::SimParams;

use crate::cli::common::{CommonArgs, ProtoArg};
use crate::methods::common::{ns, Ctrl};

/// Tag of the start-up probe's ping-pong.
const TAG_PROBE: Tag = 0x4f56_0002;
/// Round trips before the timed ones (connections, caches, the fast path).
const PROBE_WARMUP: usize = 20;
/// Timed round trips; their median is the figure.
const PROBE_REPS: usize = 51;
/// The probe's message: what one control trip of a rendezvous carries is
/// about this small.
const PROBE_BYTES: usize = 8;
/// The copy timed for the copy rate: around the sizes where the
/// crossover falls, out of the first-level cache.
const COPY_BYTES: usize = 256 * 1024;
/// Timed copies; their median is the figure.
const COPY_REPS: usize = 15;

/// Choose the run's eager limit and set it on `comm`; `model_one_way_ns`
/// is a small message's one-way time under the simulator's model. Collective: every rank calls it right after building its
/// communicator (it measures only for `--proto auto --eager-limit auto`
/// on a real transport with a peer to measure against).
pub(crate) fn settle(
    common: &CommonArgs,
    comm: &mut dyn Communicator,
    model_one_way_ns: Option<f64>,
) -> Result<()> {
    let limit = if let Some(b) = common.eager_limit.forced() {
        EagerLimit::forced(b)
    } else if common.proto != ProtoArg::Auto {
        // The protocol does not switch by size: the engine's value stays.
        return Ok(());
    } else if let Some(one_way) = model_one_way_ns {
        let caps = comm.info().caps;
        EagerLimit::chosen(
            EagerSource::Model,
            EagerInputs::for_caps(&caps, one_way, 0.0),
        )
    } else if comm.size() < 2 {
        // No peer: no rendezvous trip to weigh.
        return Ok(());
    } else {
        ovbench_core::watch::set_phase("start-up, measuring auto's eager limit");
        measured(comm).with_context(|| {
            format!(
                "rank {}: measuring auto's eager limit (give --eager-limit BYTES to skip it)",
                comm.rank()
            )
        })?
    };
    comm.set_eager_limit(limit)?;
    Ok(())
}

/// A small message's one-way time under the model: both overheads and
/// the wire (the sim charges no copy, so this is all a trip costs).
#[cfg(feature = "sim")]
pub(crate) fn model_one_way_ns(p: &SimParams) -> f64 {
    (p.o_s as f64 + p.l as f64 + p.o_r as f64) / 1e3
}

/// The limit from rank 0's figures, shared with every rank.
fn measured(comm: &mut dyn Communicator) -> Result<EagerLimit> {
    let caps = comm.info().caps;
    let ctrl = Ctrl::new(comm)?;
    let buf = comm.alloc(PROBE_BYTES)?;
    let one_way = one_way_ns(comm, buf)?;
    let copy = if comm.rank() == 0 {
        copy_ns_per_byte(comm)
    } else {
        0.0
    };
    let got = ctrl.bcast(comm, &[one_way.to_bits(), copy.to_bits()])?;
    let (one_way, copy) = (f64::from_bits(got[0]), f64::from_bits(got[1]));
    Ok(EagerLimit::chosen(
        EagerSource::Measured,
        EagerInputs::for_caps(&caps, one_way, copy),
    ))
}

/// Half the median round trip of a small message between ranks 0 and 1
/// (0 on the other ranks, which take no part).
fn one_way_ns(comm: &mut dyn Communicator, buf: Buf) -> Result<f64> {
    let span = buf.first(PROBE_BYTES);
    let mut rtt = Vec::with_capacity(PROBE_REPS);
    match comm.rank() {
        0 => {
            for i in 0..PROBE_WARMUP + PROBE_REPS {
                let t0 = comm.now();
                comm.send(span, 1, TAG_PROBE)?;
                comm.recv(span, Some(1), Some(TAG_PROBE))?;
                let t1 = comm.now();
                if i >= PROBE_WARMUP {
                    rtt.push(ns(comm, t1.saturating_sub(t0)));
                }
            }
        }
        1 => {
            for _ in 0..PROBE_WARMUP + PROBE_REPS {
                comm.recv(span, Some(0), Some(TAG_PROBE))?;
                comm.send(span, 0, TAG_PROBE)?;
            }
        }
        _ => return Ok(0.0),
    }
    Ok(median(&mut rtt) / 2.0)
}

/// Nanoseconds per byte of one memory copy, out of the first-level cache.
fn copy_ns_per_byte(comm: &dyn Communicator) -> f64 {
    let src = vec![1u8; COPY_BYTES];
    let mut dst = vec![0u8; COPY_BYTES];
    let mut per_byte = Vec::with_capacity(COPY_REPS);
    for _ in 0..COPY_REPS {
        let t0 = comm.now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        let t1 = comm.now();
        per_byte.push(ns(comm, t1.saturating_sub(t0)) / COPY_BYTES as f64);
    }
    median(&mut per_byte)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sim")]
    #[test]
    fn the_model_trip_is_both_overheads_and_the_wire() {
        let p = SimParams::parse("L=5us,os=300ns,or=200ns").unwrap();
        assert_eq!(model_one_way_ns(&p), 5_500.0);
    }

    #[test]
    fn the_median_is_the_middle_figure() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert!(median(&mut []).is_nan());
    }
}
