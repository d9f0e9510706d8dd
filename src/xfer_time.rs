//! xfer_time(size) for the overlap bounds (the overlap method, latency
//! `--instrument`): the time of the bare operation
//! that moves a message's data, measured before the run through the same
//! communicator on the same transport (the paper measures it a priori
//! with the network's own micro-benchmark), or read from `--xfer-table`.
//!
//! Per message size the engine's [`EngineShape::data_ops`] says which
//! operations carry the data — one send per bounce buffer for eager, one
//! write or read for the rendezvous protocols, the first packet and then
//! one write per fragment for pipelined — and each distinct (operation,
//! bytes) is timed with `--proto raw` semantics: posted on an idle NIC,
//! from the post to its completion at the side performing it, the median
//! of `--xfer-reps` repetitions. That is the interval the engine's own
//! XFER_BEGIN/XFER_END bracket for the same operation.

use std::path::Path;

use anyhow::bail;
use ovbench_core::engine_comm::{EngineShape, Protocol, RawOp};
use ovbench_core::{Buf, Communicator, Tag, XferTable};
use serde::Serialize;

use crate::methods::common::{ns, Ctrl};

/// First of the tags of the raw measurements (one per operation timed):
/// raw operations bind a buffer to a (peer, tag).
pub const TAG_RAW: Tag = 0x4f57_0000;

/// One timed operation: the median of its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct XferPoint {
    pub op: &'static str,
    pub size: u64,
    pub median_ns: f64,
    pub samples: u64,
}

/// Where xfer_time came from.
#[derive(Debug, Clone, Serialize)]
pub struct XferSource {
    /// `measured` (the bare operations, timed here) or `table` (a file).
    pub source: &'static str,
    /// The file of a `table` source.
    pub file: Option<String>,
    pub points: Vec<XferPoint>,
}

impl XferSource {
    /// The header line saying where xfer_time came from.
    pub fn describe(&self) -> String {
        match &self.file {
            None => "xfer_time measured before the run: the bare operation moving each message's data (--proto raw semantics), post to completion, median of the repetitions".into(),
            Some(f) => format!("xfer_time from --xfer-table {f}"),
        }
    }
}

fn op_name(op: RawOp) -> &'static str {
    match op {
        RawOp::Send => "send",
        RawOp::Write => "write",
        RawOp::Read => "read",
    }
}

/// The distinct (operation, bytes) that messages of `sizes` move data with.
pub fn needed(shape: &EngineShape, sizes: &[usize]) -> Vec<(RawOp, usize)> {
    let mut v: Vec<(RawOp, usize)> = Vec::new();
    for &m in sizes {
        for (op, bytes) in shape.transfers(m) {
            if !v.iter().any(|&(_, b)| b == bytes) {
                v.push((op, bytes));
            }
        }
    }
    v
}

/// `--xfer-table FILE`, read ([`crate::files::input`]) and parsed.
#[deny(clippy::arithmetic_side_effects)]
pub fn read_table(path: &Path) -> anyhow::Result<XferTable> {
    let text = crate::files::input::read_text("--xfer-table", path, crate::files::input::TEXT_CAP)?;
    XferTable::parse(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e} (write it with overlap --write-xfer-table)",
            crate::files::input::named("--xfer-table", path)
        )
    })
}

/// Time each of `ops` as the bare operation on rank 0 (rank 0 sends or
/// writes, or reads rank 1's buffer), then return the protocol to
/// the plan's protocol. Every rank calls it; ranks above 1 take part in the
/// barriers only.
pub(crate) fn measure(
    comm: &mut dyn Communicator,
    ctrl: &Ctrl,
    shape: &EngineShape,
    buf: Buf,
    ops: &[(RawOp, usize)],
    reps: u32,
    tag_base: Tag,
) -> anyhow::Result<(XferTable, XferSource)> {
    let mut pts = Vec::new();
    for (i, &(op, bytes)) in ops.iter().enumerate() {
        // deviation: xfer-time-bare-ops — xfer_time from the bare operation, median, see docs/methods/overlap.md
        comm.set_bare_op(Some(op))?;
        let x = raw_median(
            comm,
            buf,
            bytes,
            shape.plan.max_payload(),
            reps,
            op,
            tag_base + i as Tag,
        );
        comm.set_bare_op(None)?;
        pts.push((bytes as u64, x?));
    }
    // Rank 0's figures are everyone's — except under --proto raw, where
    // control messages would be raw operations too; only rank 0's matter
    // there: it writes the table and the run stops.
    let shared = if matches!(shape.plan.protocol(), Protocol::Raw(_)) && !shape.native {
        pts
    } else {
        share_points(comm, ctrl, &pts)?
    };
    let points = ops
        .iter()
        .zip(&shared)
        .map(|(&(op, _), &(size, t))| XferPoint {
            op: op_name(op),
            size,
            median_ns: t,
            samples: u64::from(reps),
        })
        .collect();
    let table = XferTable::new(shared).map_err(|e| {
        anyhow::anyhow!("xfer_time as measured in this run: {e}: under --transport sim, give the model smaller costs (--sim)")
    })?;
    Ok((
        table,
        XferSource {
            source: "measured",
            file: None,
            points,
        },
    ))
}

/// The median over `reps` of one bare operation, post to completion, on
/// rank 0. Back to back after one barrier: each completes before the next
/// is posted, so each starts on an idle NIC. A send larger than one
/// packet (`packet` bytes) is a train, posted back to back and timed to
/// the completion of its last packet. (No control message follows: under
/// raw read a receive reads whatever the sender's buffer holds.)
pub(crate) fn raw_median(
    comm: &mut dyn Communicator,
    buf: Buf,
    size: usize,
    packet: usize,
    reps: u32,
    op: RawOp,
    tag: Tag,
) -> anyhow::Result<f64> {
    let me = comm.rank();
    let read = op == RawOp::Read;
    let chunks: Vec<(usize, usize)> = if op == RawOp::Send && size > packet && packet > 0 {
        (0..size)
            .step_by(packet)
            .map(|off| (off, packet.min(size - off)))
            .collect()
    } else {
        vec![(0, size)]
    };
    let mut reqs = Vec::with_capacity(chunks.len());
    let mut v = Vec::with_capacity(reps as usize);
    comm.barrier()?;
    for _ in 0..reps {
        let t0 = comm.now();
        reqs.clear();
        match (me, read) {
            (0, false) | (1, true) => {
                for &(off, n) in &chunks {
                    reqs.push(comm.isend(buf.at(off, n), 1 - me, tag)?);
                }
            }
            (0, true) | (1, false) => {
                for &(off, n) in &chunks {
                    reqs.push(comm.irecv(buf.at(off, n), Some(1 - me), Some(tag))?);
                }
            }
            _ => {}
        }
        comm.waitall(&reqs)?;
        let t1 = comm.now();
        v.push(ns(comm, t1 - t0));
    }
    comm.barrier()?;
    v.sort_by(f64::total_cmp);
    Ok(v.get(v.len() / 2).copied().unwrap_or(0.0))
}

/// Rank 0's points reach every rank (eight per control message).
pub(crate) fn share_points(
    comm: &mut dyn Communicator,
    ctrl: &Ctrl,
    pts: &[(u64, f64)],
) -> anyhow::Result<Vec<(u64, f64)>> {
    let n = ctrl.bcast(comm, &[pts.len() as u64])?[0] as usize;
    let mut out = Vec::with_capacity(n);
    for k in (0..n).step_by(8) {
        let words: Vec<u64> = pts
            .iter()
            .skip(k)
            .take(8)
            .flat_map(|p| [p.0, p.1.to_bits()])
            .collect();
        let got = ctrl.bcast(comm, &words)?;
        out.extend(got.chunks(2).map(|c| (c[0], f64::from_bits(c[1]))));
    }
    Ok(out)
}

/// `--xfer-table`, read on rank 0 only (other hosts need not have the
/// file) and shared; a failure there stops every rank. Every size in
/// `need` must be in it: a table is measured for the sizes a run moves,
/// and spreading one size's time over others would be a guess.
pub(crate) fn from_file(
    comm: &mut dyn Communicator,
    ctrl: &Ctrl,
    path: &Path,
    need: &[(RawOp, usize)],
) -> anyhow::Result<(XferTable, XferSource)> {
    let mine = if comm.rank() == 0 {
        read_table(path).and_then(|t| {
                let pts = t.points().to_vec();
                for &(op, bytes) in need {
                    if !pts.iter().any(|&(b, _)| b == bytes as u64) {
                        bail!(
                            "--xfer-table {} has no line for {bytes} bytes, which this run moves as a bare {}: add it (measure it with --proto raw --op {} --sizes {bytes} --write-xfer-table FILE)",
                            path.display(),
                            op_name(op),
                            op_name(op)
                        );
                    }
                }
                Ok(pts)
            })
    } else {
        Ok(Vec::new())
    };
    let ok = ctrl.bcast(comm, &[u64::from(mine.is_ok())])?[0] != 0;
    let pts = match (ok, mine) {
        (true, Ok(p)) => share_points(comm, ctrl, &p)?,
        (true, Err(_)) => share_points(comm, ctrl, &[])?,
        (false, Err(e)) => return Err(e),
        (false, Ok(_)) => bail!("rank 0 could not read --xfer-table {}", path.display()),
    };
    let points = pts
        .iter()
        .map(|&(size, t)| XferPoint {
            op: "table",
            size,
            median_ns: t,
            samples: 0,
        })
        .collect();
    Ok((
        XferTable::new(pts).map_err(anyhow::Error::msg)?,
        XferSource {
            source: "table",
            file: Some(path.display().to_string()),
            points,
        },
    ))
}
