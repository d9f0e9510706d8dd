//! The two ends of every logp measurement: rank 0's timed loops and the
//! mirror that answers them, and the command that starts each batch.
//!
//! As in logp_mpi.c, the measuring rank uses the chosen send primitive for
//! every data message it sends and the chosen receive primitive only for
//! the timed receive of or(m); the acknowledgements it waits for and
//! everything the mirror does are plain blocking receives and sends.

use anyhow::bail;
use ovbench_core::{Buf, Communicator, Rank, Req, Tag};

use super::super::common::{ns, Ctrl};
use super::{RecvKind, SendKind};

const TAG_DATA: Tag = 0x4f56_0201;
pub(crate) const OP_STOP: u64 = 0;
/// `count` round trips: m bytes to the mirror, 0 back.
const OP_RTT: u64 = 1;
/// `count` round trips: 0 bytes to the mirror, m back.
const OP_OR: u64 = 2;
/// `count` messages of m bytes in a row, one 0-byte acknowledgement back.
const OP_TRAIN: u64 = 3;

/// Rank 0's or the mirror's end.
pub(crate) struct Peer<'a> {
    pub comm: &'a mut dyn Communicator,
    pub ctrl: Ctrl,
    pub buf: Buf,
    pub peer: Rank,
    pub send: SendKind,
    pub recv: RecvKind,
    /// The cost of one clock reading, taken off every timed sample.
    pub clock_ns: f64,
}

impl Peer<'_> {
    /// Post the measuring send: the whole call for send and ssend, only
    /// the posting call for isend (its request is returned, to be waited
    /// for outside the timed interval).
    fn post(&mut self, m: usize) -> anyhow::Result<Option<Req>> {
        let (c, b, p) = (&mut *self.comm, self.buf, self.peer);
        Ok(match self.send {
            SendKind::Send => {
                c.send(b.first(m), p, TAG_DATA)?;
                None
            }
            SendKind::Isend => Some(c.isend(b.first(m), p, TAG_DATA)?),
            SendKind::Ssend => {
                c.ssend(b.first(m), p, TAG_DATA)?;
                None
            }
        })
    }

    fn finish(&mut self, r: Option<Req>) -> anyhow::Result<()> {
        if let Some(r) = r {
            self.comm.wait(r)?;
        }
        Ok(())
    }

    fn plain_send(&mut self, m: usize) -> anyhow::Result<()> {
        self.comm.send(self.buf.first(m), self.peer, TAG_DATA)?;
        Ok(())
    }

    fn plain_recv(&mut self, m: usize) -> anyhow::Result<()> {
        self.comm
            .recv(self.buf.first(m), Some(self.peer), Some(TAG_DATA))?;
        Ok(())
    }

    /// A clock interval in ns, less the cost of reading the clock.
    fn since(&self, t0: u64, t1: u64) -> f64 {
        ns(self.comm, t1.saturating_sub(t0)) - self.clock_ns
    }

    /// Tell the mirror what comes next and wait until it is ready.
    pub(crate) fn command(&mut self, op: u64, size: usize, count: u64) -> anyhow::Result<()> {
        self.ctrl
            .send(self.comm, self.peer, &[op, size as u64, count])?;
        if op != OP_STOP {
            self.ctrl.recv(self.comm, self.peer)?;
        }
        Ok(())
    }

    /// The mirror's side: execute commands until told to stop.
    pub(crate) fn mirror(&mut self) -> anyhow::Result<()> {
        loop {
            let w = self.ctrl.recv(self.comm, self.peer)?;
            let [op, size, count] = w[..] else {
                bail!("logp: malformed command from rank {}", self.peer);
            };
            if op == OP_STOP {
                return Ok(());
            }
            self.ctrl.send(self.comm, self.peer, &[])?;
            let m = size as usize;
            match op {
                OP_RTT => {
                    for _ in 0..count {
                        self.plain_recv(m)?;
                        self.plain_send(0)?;
                    }
                }
                OP_OR => {
                    for _ in 0..count {
                        self.plain_recv(0)?;
                        self.plain_send(m)?;
                    }
                }
                OP_TRAIN => {
                    for _ in 0..count {
                        self.plain_recv(m)?;
                    }
                    self.plain_send(0)?;
                }
                _ => bail!("logp: unknown command {op} from rank {}", self.peer),
            }
        }
    }

    /// `count` round trips of m bytes forward, 0 back: os(m) samples (the
    /// send call) and RTT(m) samples (send, its wait, the reply).
    pub(crate) fn rtt(
        &mut self,
        m: usize,
        count: u64,
        os: &mut Vec<f64>,
        rtt: &mut Vec<f64>,
    ) -> anyhow::Result<()> {
        self.command(OP_RTT, m, count)?;
        for _ in 0..count {
            let t0 = self.comm.now();
            let r = self.post(m)?;
            let t1 = self.comm.now();
            self.finish(r)?;
            self.plain_recv(0)?;
            let t2 = self.comm.now();
            os.push(self.since(t0, t1));
            rtt.push(self.since(t0, t2));
        }
        Ok(())
    }

    /// `count` round trips of 0 bytes forward, m back, with a spin of
    /// `spin_ns` before the timed receive: or(m) samples. With irecv the
    /// receive is posted before the spin and only its wait is timed, so
    /// the message is expected when it arrives, as in logp_mpi.c.
    pub(crate) fn or(
        &mut self,
        m: usize,
        count: u64,
        spin_ns: f64,
        or: &mut Vec<f64>,
    ) -> anyhow::Result<()> {
        self.command(OP_OR, m, count)?;
        for _ in 0..count {
            let r = self.post(0)?;
            self.finish(r)?;
            let (t0, t1) = match self.recv {
                RecvKind::Recv => {
                    self.comm.delay(spin_ns);
                    let t0 = self.comm.now();
                    self.plain_recv(m)?;
                    (t0, self.comm.now())
                }
                RecvKind::Irecv => {
                    let q = self
                        .comm
                        .irecv(self.buf.first(m), Some(self.peer), Some(TAG_DATA))?;
                    self.comm.delay(spin_ns);
                    let t0 = self.comm.now();
                    self.comm.wait(q)?;
                    (t0, self.comm.now())
                }
            };
            or.push(self.since(t0, t1));
        }
        Ok(())
    }

    /// Mean time of `count` round trips of m bytes forward (measuring
    /// send) and 0 back, timed as one interval: the saturation test's
    /// round trip.
    // deviation: sat-rtt-send-mode — the train's RTT uses the measuring send mode, see docs/methods/logp.md
    pub(crate) fn quick_rtt(&mut self, m: usize, count: u64) -> anyhow::Result<f64> {
        Ok(self.timed_sends(OP_RTT, m, count, true)? / count.max(1) as f64)
    }

    /// Time `n` messages of m bytes in a row up to the acknowledgement.
    pub(crate) fn train(&mut self, m: usize, n: u64) -> anyhow::Result<f64> {
        self.timed_sends(OP_TRAIN, m, n, false)
    }

    /// Start the mirror's `op`, then time `n` measuring sends of m bytes
    /// as one interval, up to the mirror's 0-byte acknowledgement: one
    /// after each send (`ack_each`, a round trip each) or one after the
    /// last.
    fn timed_sends(&mut self, op: u64, m: usize, n: u64, ack_each: bool) -> anyhow::Result<f64> {
        self.command(op, m, n)?;
        let t0 = self.comm.now();
        for _ in 0..n {
            let r = self.post(m)?;
            self.finish(r)?;
            if ack_each {
                self.plain_recv(0)?;
            }
        }
        if !ack_each {
            self.plain_recv(0)?;
        }
        let t1 = self.comm.now();
        Ok(self.since(t0, t1))
    }
}
