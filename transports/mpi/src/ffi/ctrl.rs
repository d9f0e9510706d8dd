//! The own protocols' control messages on a communicator of their own:
//! one receive pre-posted per peer into a buffer this channel owns, and
//! sends from buffers it keeps until they finish, so every pointer MPI
//! holds belongs to the channel.

use std::os::raw::c_int;

use mpi::ffi;
use ovbench_core::{Ctx, SendMode};

use super::comm::Comm;
use super::requests::{testsome, Request};
use super::Envelope;

/// The tag of every control message (the communicator is theirs alone).
const CTRL_TAG: c_int = 1;

/// Control sends and receives in flight.
pub(crate) struct CtrlChannel {
    pub(crate) comm: Comm,
    buf_size: usize,
    /// One receive per peer, into `bufs[peer]`.
    recvs: Vec<Request>,
    bufs: Vec<Vec<u8>>,
    sends: Vec<Request>,
    send_bufs: Vec<(Ctx, Vec<u8>)>,
    idx: Vec<c_int>,
    sts: Vec<ffi::MPI_Status>,
    done: Vec<(usize, Envelope)>,
}

impl std::fmt::Debug for CtrlChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CtrlChannel")
            .field("sends", &self.sends.len())
            .finish()
    }
}

impl CtrlChannel {
    /// The channel on `comm`, a receive of up to `buf_size` bytes posted
    /// from every rank.
    pub(crate) fn new(comm: Comm, buf_size: usize) -> Result<CtrlChannel, String> {
        let n = comm.size as usize;
        let mut c = CtrlChannel {
            comm,
            buf_size,
            recvs: (0..n).map(|_| Request::null()).collect(),
            bufs: (0..n).map(|_| vec![0u8; buf_size]).collect(),
            sends: Vec::new(),
            send_bufs: Vec::new(),
            idx: Vec::new(),
            sts: Vec::new(),
            done: Vec::new(),
        };
        for peer in 0..n {
            c.post_recv(peer)?;
        }
        Ok(c)
    }

    fn post_recv(&mut self, peer: usize) -> Result<(), String> {
        let buf = &mut self.bufs[peer];
        // SAFETY: the buffer is this channel's and is never resized; it
        // lives until the receive finishes or is cancelled in `drop`.
        self.recvs[peer] = unsafe {
            self.comm.irecv_raw(
                Some(peer as u32),
                Some(CTRL_TAG),
                buf.as_mut_ptr(),
                self.buf_size,
            )
        }?;
        Ok(())
    }

    /// Send `msg` to `peer`: `Ok(Some(msg))` back when it left inside
    /// the call, `Ok(None)` when it is in flight (its completion comes
    /// from [`Self::poll_sends`] with `ctx`).
    pub(crate) fn send(
        &mut self,
        peer: u32,
        msg: Vec<u8>,
        ctx: Ctx,
    ) -> Result<Option<Vec<u8>>, String> {
        // SAFETY: the vector is kept (in `send_bufs`) until the request
        // finishes; moving a Vec does not move its heap buffer.
        let mut req = unsafe {
            self.comm
                .isend_raw(SendMode::Standard, peer, CTRL_TAG, msg.as_ptr(), msg.len())
        }?;
        if req.test()?.is_some() {
            return Ok(Some(msg));
        }
        self.sends.push(req);
        self.send_bufs.push((ctx, msg));
        Ok(None)
    }

    /// Finished sends: their contexts and buffers, appended to `out`.
    pub(crate) fn poll_sends(&mut self, out: &mut Vec<(Ctx, Vec<u8>)>) -> Result<(), String> {
        if self.sends.is_empty() {
            return Ok(());
        }
        self.done.clear();
        testsome(
            &mut self.sends,
            &mut self.idx,
            &mut self.sts,
            &mut self.done,
        )?;
        self.done.sort_unstable_by_key(|d| std::cmp::Reverse(d.0));
        for &(i, _) in &self.done {
            self.sends.swap_remove(i);
            out.push(self.send_bufs.swap_remove(i));
        }
        Ok(())
    }

    /// Arrived messages, each given to `take` with its sender, then that
    /// peer's receive posted again. One receive per peer keeps each
    /// peer's order.
    pub(crate) fn poll_recvs(
        &mut self,
        mut take: impl FnMut(u32, &[u8]) -> Result<(), ovbench_core::TransportError>,
    ) -> Result<usize, ovbench_core::TransportError> {
        self.done.clear();
        testsome(
            &mut self.recvs,
            &mut self.idx,
            &mut self.sts,
            &mut self.done,
        )
        .map_err(|detail| ovbench_core::TransportError::Local {
            op: ovbench_core::OpKind::Recv,
            detail,
        })?;
        let done = std::mem::take(&mut self.done);
        let n = done.len();
        let mut res = Ok(());
        for &(peer, env) in &done {
            if res.is_ok() {
                res = take(peer as u32, &self.bufs[peer][..env.len.min(self.buf_size)]);
            }
            self.post_recv(peer)
                .map_err(|detail| ovbench_core::TransportError::Peer {
                    peer: peer as u32,
                    op: ovbench_core::OpKind::Recv,
                    status: detail,
                })?;
        }
        self.done = done;
        res.map(|()| n)
    }
}

impl Drop for CtrlChannel {
    fn drop(&mut self) {
        for r in self.recvs.iter_mut().chain(self.sends.iter_mut()) {
            r.cancel();
        }
    }
}
