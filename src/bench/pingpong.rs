//! One size's ping-pong (or raw read) loop, stamped with the
//! communicator's clock: the timed core of `latency` and of its
//! `--instrument` pass, and `--verify`'s untimed pass.

use anyhow::Result;
use ovbench_core::{Buf, Communicator, Rank};

use super::verify::{self, Which};

/// The buffers and tag of one size's ping-pong.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PingPong {
    pub len: usize,
    pub tag: ovbench_core::Tag,
    pub sbuf: Buf,
    pub rbuf: Buf,
    /// Raw read: rank 0 reads rank 1's buffer; no reply.
    pub read: bool,
}

impl PingPong {
    /// Send the message to `peer`.
    fn send(&self, comm: &mut dyn Communicator, peer: Rank) -> Result<()> {
        comm.send(self.sbuf.first(self.len), peer, self.tag)?;
        Ok(())
    }
    /// Receive the message from `peer`.
    fn recv(&self, comm: &mut dyn Communicator, peer: Rank) -> Result<()> {
        comm.recv(self.rbuf.first(self.len), Some(peer), Some(self.tag))?;
        Ok(())
    }
}

/// Run `n` iterations; rank 0 stamps the last `ticks.len()` (each round
/// trip, or each raw read).
pub(crate) fn pingpong(
    comm: &mut dyn Communicator,
    pp: PingPong,
    n: usize,
    ticks: &mut [u64],
) -> Result<()> {
    let warm = n - ticks.len();
    match (comm.rank(), pp.read) {
        (0, false) => {
            // One clock read per round trip, as ucx_perftest times its
            // iterations: an iteration's end is the next one's start
            // (nothing happens between them), and a second read would add
            // its cost (~9 ns of TSC under a VM) to every round trip.
            let mut prev = comm.now();
            for i in 0..n {
                pp.send(comm, 1)?;
                pp.recv(comm, 1)?;
                let t = comm.now();
                if i >= warm {
                    ticks[i - warm] = t.wrapping_sub(prev);
                }
                prev = t;
            }
        }
        (1, false) => {
            for _ in 0..n {
                pp.recv(comm, 0)?;
                pp.send(comm, 0)?;
            }
        }
        (0, true) => {
            for i in 0..n {
                let t0 = comm.now();
                pp.recv(comm, 1)?;
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
                pp.send(comm, 0)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `--verify`'s pass (see [`super::verify`]): `v` untimed iterations of
/// the same exchange in which every received message's first `checked`
/// bytes are checked, then zeroed, before the peer may send the next one
/// (it waits for this rank's reply, or for nothing under raw read, where
/// only rank 0 receives and each read is its own request). The receive
/// buffer must be cleared, and every rank past a barrier, before it starts.
pub(crate) fn verify_pass(
    comm: &mut dyn Communicator,
    pp: PingPong,
    v: usize,
    checked: usize,
) -> Result<()> {
    let look = |comm: &mut dyn Communicator, i: usize, sender| -> Result<()> {
        let which = Which::Pass { i: i + 1, of: v };
        verify::check(comm, pp.rbuf, pp.len, sender, checked, which)?;
        verify::clear_first(comm, pp.rbuf, checked)
    };
    match (comm.rank(), pp.read) {
        (0, false) => {
            for i in 0..v {
                pp.send(comm, 1)?;
                pp.recv(comm, 1)?;
                look(comm, i, 1)?;
            }
        }
        (1, false) => {
            for i in 0..v {
                pp.recv(comm, 0)?;
                look(comm, i, 0)?;
                pp.send(comm, 0)?;
            }
        }
        (0, true) => {
            for i in 0..v {
                pp.recv(comm, 1)?;
                look(comm, i, 1)?;
            }
        }
        (1, true) => {
            for _ in 0..v {
                pp.send(comm, 0)?;
            }
        }
        _ => {}
    }
    Ok(())
}
