//! One size's ping-pong (or raw read) loop, stamped with the
//! communicator's clock: the timed core of `latency` and of its
//! `--instrument` pass, and `--verify`'s untimed pass.

use anyhow::Result;
use ovbench_core::{Bound, Buf, Communicator, Rank};

use super::verify::{self, Which};

/// Which of a ping-pong's two calls.
#[derive(Clone, Copy, Debug)]
enum Turn {
    Send,
    Recv,
}

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
    /// One call of `--verify`'s pass, bound where the communicator binds
    /// its calls ([`Communicator::bind_pair`]): the pass then checks the
    /// bytes the timed loop's own calls move.
    fn verified(&self, comm: &mut dyn Communicator, peer: Rank, turn: Turn) -> Result<()> {
        let (data, room) = (self.sbuf.first(self.len), self.rbuf.first(self.len));
        if let Some(mut bound) = comm.bind_pair(data, room, peer, self.tag)? {
            match turn {
                Turn::Send => bound.send()?,
                Turn::Recv => bound.recv()?,
            }
            return Ok(());
        }
        match turn {
            Turn::Send => self.send(comm, peer),
            Turn::Recv => self.recv(comm, peer),
        }
    }
}

/// A ping-pong's two turns towards its one peer, and the clock.
trait Turns {
    fn send(&mut self) -> Result<()>;
    fn recv(&mut self) -> Result<()>;
    fn now(&self) -> u64;
}

/// The communicator's own calls, each finding its path and buffer.
struct Calls<'a> {
    comm: &'a mut dyn Communicator,
    pp: PingPong,
    peer: Rank,
}

impl Turns for Calls<'_> {
    fn send(&mut self) -> Result<()> {
        self.pp.send(self.comm, self.peer)
    }
    fn recv(&mut self) -> Result<()> {
        self.pp.recv(self.comm, self.peer)
    }
    fn now(&self) -> u64 {
        self.comm.now()
    }
}

/// The library's two calls, bound once ([`Communicator::bind_pair`]).
impl Turns for Bound<'_> {
    #[inline]
    fn send(&mut self) -> Result<()> {
        Ok(Bound::send(self)?)
    }
    #[inline]
    fn recv(&mut self) -> Result<()> {
        Ok(Bound::recv(self)?)
    }
    #[inline]
    fn now(&self) -> u64 {
        Bound::now(self)
    }
}

/// Run `n` iterations; rank 0 stamps the last `ticks.len()` (each round
/// trip, or each raw read). A ping-pong over a library that binds its
/// calls makes them bound ([`Communicator::bind_pair`]).
pub(crate) fn pingpong(
    comm: &mut dyn Communicator,
    pp: PingPong,
    n: usize,
    ticks: &mut [u64],
) -> Result<()> {
    let rank = comm.rank();
    if pp.read || rank > 1 {
        return raw_read(comm, pp, n, ticks);
    }
    let peer = 1 - rank;
    let (data, room) = (pp.sbuf.first(pp.len), pp.rbuf.first(pp.len));
    if let Some(mut bound) = comm.bind_pair(data, room, peer, pp.tag)? {
        return round_trips(&mut bound, rank, n, ticks);
    }
    round_trips(&mut Calls { comm, pp, peer }, rank, n, ticks)
}

/// The ping-pong of ranks 0 and 1 (the others take no part).
fn round_trips(t: &mut impl Turns, rank: Rank, n: usize, ticks: &mut [u64]) -> Result<()> {
    let warm = n - ticks.len();
    if rank == 0 {
        // One clock read per round trip, as ucx_perftest times its
        // iterations: an iteration's end is the next one's start
        // (nothing happens between them), and a second read would add
        // its cost (~9 ns of TSC under a VM) to every round trip.
        let mut prev = t.now();
        for i in 0..n {
            t.send()?;
            t.recv()?;
            let now = t.now();
            if i >= warm {
                ticks[i - warm] = now.wrapping_sub(prev);
            }
            prev = now;
        }
    } else {
        for _ in 0..n {
            t.recv()?;
            t.send()?;
        }
    }
    Ok(())
}

/// Raw read: rank 0 times each read of rank 1's buffer.
fn raw_read(comm: &mut dyn Communicator, pp: PingPong, n: usize, ticks: &mut [u64]) -> Result<()> {
    let warm = n - ticks.len();
    match comm.rank() {
        0 => {
            for i in 0..n {
                let t0 = comm.now();
                pp.recv(comm, 1)?;
                let t1 = comm.now();
                if i >= warm {
                    ticks[i - warm] = t1.wrapping_sub(t0);
                }
            }
        }
        1 => {
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
                pp.verified(comm, 1, Turn::Send)?;
                pp.verified(comm, 1, Turn::Recv)?;
                look(comm, i, 1)?;
            }
        }
        (1, false) => {
            for i in 0..v {
                pp.verified(comm, 0, Turn::Recv)?;
                look(comm, i, 0)?;
                pp.verified(comm, 0, Turn::Send)?;
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
