//! One size's ping-pong (or raw read) loop, stamped with the
//! communicator's clock: the timed core of `latency` and of its
//! `--instrument` pass.

use anyhow::Result;
use ovbench_core::{Buf, Communicator};

/// The buffers and tag of one size's ping-pong.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PingPong {
    pub len: usize,
    pub tag: ovbench_core::Tag,
    pub sbuf: Buf,
    pub rbuf: Buf,
    /// Raw read: rank 0 reads rank 1's buffer; no reply.
    pub read: bool,
    /// Rank 1 also stamps its iterations (for --instrument's xfer time).
    pub stamp_partner: bool,
}

/// Run `n` iterations; the last `ticks.len()` are stamped (rank 0: each
/// round trip, or each raw read; rank 1 with `stamp_partner`: the time
/// between its iterations' starts, one round trip).
pub(crate) fn pingpong(
    comm: &mut dyn Communicator,
    pp: PingPong,
    n: usize,
    ticks: &mut [u64],
) -> Result<()> {
    let warm = n - ticks.len();
    let PingPong {
        len,
        tag,
        sbuf,
        rbuf,
        ..
    } = pp;
    match (comm.rank(), pp.read) {
        (0, false) => {
            // One clock read per round trip, as ucx_perftest times its
            // iterations: an iteration's end is the next one's start
            // (nothing happens between them), and a second read would add
            // its cost (~9 ns of TSC under a VM) to every round trip.
            let mut prev = comm.now();
            for i in 0..n {
                comm.send(sbuf, 0, len, 1, tag)?;
                comm.recv(rbuf, 0, len, Some(1), Some(tag))?;
                let t = comm.now();
                if i >= warm {
                    ticks[i - warm] = t.wrapping_sub(prev);
                }
                prev = t;
            }
        }
        (1, false) if pp.stamp_partner => {
            let mut prev = comm.now();
            for i in 0..n {
                comm.recv(rbuf, 0, len, Some(0), Some(tag))?;
                comm.send(sbuf, 0, len, 0, tag)?;
                let t = comm.now();
                if i >= warm {
                    ticks[i - warm] = t.wrapping_sub(prev);
                }
                prev = t;
            }
        }
        (1, false) => {
            for _ in 0..n {
                comm.recv(rbuf, 0, len, Some(0), Some(tag))?;
                comm.send(sbuf, 0, len, 0, tag)?;
            }
        }
        (0, true) => {
            for i in 0..n {
                let t0 = comm.now();
                comm.recv(rbuf, 0, len, Some(1), Some(tag))?;
                let t1 = comm.now();
                if i >= warm {
                    ticks[i - warm] = t1.wrapping_sub(t0);
                }
            }
        }
        (1, true) => {
            // The read's target: announce the buffer, then serve reads
            // (progress) until rank 0 is done, in the caller's barrier.
            for _ in 0..n {
                comm.send(sbuf, 0, len, 0, tag)?;
            }
        }
        _ => {}
    }
    Ok(())
}
