//! The receive path: frames are parsed out of a staging buffer, and bulk
//! data (messages, written data, read responses) is read with `readv`
//! straight into its destination, the staging buffer catching the next
//! header in the same system call.
//!
//! Every header is validated and every one-sided request is resolved
//! against a live registration before a byte of it lands in memory; a
//! refused write's data is read and discarded so the stream stays in step.

use std::io::{ErrorKind, IoSliceMut, Read};

use ovbench_core::{Completion, LocalSlice, OpKind, Rank};

use crate::engine::Engine;
use crate::memory::Memory;
use crate::tx::{TxData, TxItem};
use crate::wire::{Header, Kind, Refusal, HDR_LEN};

/// Socket reads per peer per progress call, so one busy peer cannot
/// starve the others.
const READS_PER_CALL: usize = 64;

/// Where the data of the frame being received goes.
pub enum Dest {
    /// A two-sided message being assembled.
    Msg { data: Vec<u8>, filled: usize },
    /// Data of a write request at the target; `status` != 0 discards.
    Target {
        id: u64,
        reg: u32,
        check: u64,
        offset: u64,
        status: u32,
    },
    /// A read response at the initiator; `slice` is what remains to fill.
    Initiator {
        id: u64,
        slice: LocalSlice,
        failed: bool,
    },
}

/// What one read system call brought.
enum Got {
    /// As much as was asked for: there may be more.
    Full,
    /// Less than asked: the socket is drained for now.
    Short,
    /// Nothing (EAGAIN).
    Nothing,
}

enum State {
    Header,
    Body { dest: Dest, left: usize },
}

/// Per-connection receive state.
pub struct Rx {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    state: State,
}

impl Rx {
    pub fn new(eager: usize) -> Rx {
        Rx {
            buf: vec![0u8; eager.clamp(4096, 64 * 1024) + HDR_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
            state: State::Header,
        }
    }
}

/// The next `n` bytes of `dest`'s destination, or `None` when they are to
/// be discarded (refused request, vanished buffer).
fn dest_slice<'a>(dest: &'a mut Dest, mem: &'a mut Memory, n: usize) -> Option<&'a mut [u8]> {
    match dest {
        Dest::Msg { data, filled } => Some(&mut data[*filled..*filled + n]),
        Dest::Target {
            reg,
            check,
            offset,
            status,
            ..
        } => {
            if *status != 0 {
                return None;
            }
            match mem.resolve(*reg, *check, *offset, n as u64) {
                Ok(s) => mem.slice_mut(s).ok(),
                Err(r) => {
                    // Deregistered while the data was streaming in.
                    *status = r as u32;
                    None
                }
            }
        }
        Dest::Initiator { slice, failed, .. } => {
            if *failed {
                return None;
            }
            let s = LocalSlice::new(slice.region, slice.offset, n);
            match mem.slice_mut(s) {
                Ok(b) => Some(b),
                Err(_) => {
                    *failed = true;
                    None
                }
            }
        }
    }
}

/// Account for `n` bytes placed (or discarded) in `dest`.
fn advance(dest: &mut Dest, n: usize) {
    match dest {
        Dest::Msg { filled, .. } => *filled += n,
        Dest::Target { offset, .. } => *offset = offset.saturating_add(n as u64),
        Dest::Initiator { slice, .. } => *slice = slice.sub(n, slice.len - n),
    }
}

impl Engine {
    /// Read and act on everything `peer` has sent, within a budget.
    pub fn receive(&mut self, peer: Rank) {
        for _ in 0..READS_PER_CALL {
            if let Err(why) = self.consume_staged(peer) {
                self.drop_peer(peer, format!("rank {peer} sent a bad frame: {why}"));
                return;
            }
            match self.read_some(peer) {
                Ok(Got::Full) => {}
                // The kernel had less than asked: it is drained, so act on
                // what came and skip the read that would only say EAGAIN.
                Ok(Got::Short) => break,
                Ok(Got::Nothing) => return,
                Err(why) => {
                    self.drop_peer(peer, why);
                    return;
                }
            }
        }
        if let Err(why) = self.consume_staged(peer) {
            self.drop_peer(peer, format!("rank {peer} sent a bad frame: {why}"));
        }
    }

    /// Act on the bytes already in the staging buffer.
    fn consume_staged(&mut self, peer: Rank) -> Result<(), String> {
        loop {
            let Engine { peers, mem, .. } = self;
            let Some(p) = peers[peer as usize].as_mut() else {
                return Ok(());
            };
            let rx = &mut p.rx;
            let avail = rx.end - rx.start;
            match &mut rx.state {
                State::Header => {
                    if avail < HDR_LEN {
                        if rx.start == rx.end {
                            rx.start = 0;
                            rx.end = 0;
                        } else if rx.start > 0 {
                            rx.buf.copy_within(rx.start..rx.end, 0);
                            rx.end -= rx.start;
                            rx.start = 0;
                        }
                        return Ok(());
                    }
                    let mut hb = [0u8; HDR_LEN];
                    hb.copy_from_slice(&rx.buf[rx.start..rx.start + HDR_LEN]);
                    rx.start += HDR_LEN;
                    let h = Header::decode(&hb, self.eager)?;
                    let next = self.on_header(peer, h)?;
                    if let Some(p) = self.peers[peer as usize].as_mut() {
                        p.rx.state = next;
                    }
                }
                State::Body { dest, left } => {
                    let n = (*left).min(avail);
                    if n > 0 {
                        let src = &rx.buf[rx.start..rx.start + n];
                        if let Some(d) = dest_slice(dest, mem, n) {
                            d.copy_from_slice(src);
                        }
                        advance(dest, n);
                        rx.start += n;
                        *left -= n;
                    }
                    if *left > 0 {
                        rx.start = 0;
                        rx.end = 0;
                        return Ok(());
                    }
                    if let State::Body { dest, .. } =
                        std::mem::replace(&mut rx.state, State::Header)
                    {
                        self.finish(peer, dest);
                    }
                }
            }
        }
    }

    /// One read system call.
    fn read_some(&mut self, peer: Rank) -> Result<Got, String> {
        let Engine { peers, mem, .. } = self;
        let Some(p) = peers[peer as usize].as_mut() else {
            return Ok(Got::Nothing);
        };
        let asked;
        let said_bye = p.said_bye;
        let Rx {
            buf,
            start,
            end,
            state,
        } = &mut p.rx;
        let res = match state {
            State::Body { dest, left } if *start == *end && *left > 0 => {
                let want = *left;
                match dest_slice(dest, mem, want) {
                    Some(d) => {
                        asked = d.len() + buf.len();
                        let mut iov = [IoSliceMut::new(d), IoSliceMut::new(&mut buf[..])];
                        let r = (&p.sock).read_vectored(&mut iov);
                        if let Ok(n) = r {
                            let direct = n.min(want);
                            advance(dest, direct);
                            *left -= direct;
                            *start = 0;
                            *end = n - direct;
                        }
                        r
                    }
                    None => {
                        // Discarding: read into the staging buffer only.
                        *start = 0;
                        *end = 0;
                        asked = buf.len();
                        let r = (&p.sock).read(&mut buf[..]);
                        if let Ok(n) = r {
                            *end = n;
                        }
                        r
                    }
                }
            }
            _ => {
                asked = buf.len() - *end;
                let r = (&p.sock).read(&mut buf[*end..]);
                if let Ok(n) = r {
                    *end += n;
                }
                r
            }
        };
        match res {
            Ok(0) if said_bye => Err(format!(
                "rank {peer} closed its connection after saying goodbye"
            )),
            Ok(0) => Err(format!(
                "rank {peer} closed the connection unexpectedly: did it exit or get killed?"
            )),
            Ok(n) if n < asked => Ok(Got::Short),
            Ok(_) => Ok(Got::Full),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(Got::Nothing),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(Got::Full),
            Err(e) => Err(format!("receiving from rank {peer} failed: {e}")),
        }
    }

    /// Decide what a validated header means; returns the next state.
    fn on_header(&mut self, peer: Rank, h: Header) -> Result<State, String> {
        let body = |dest: Dest| State::Body {
            dest,
            left: h.len as usize,
        };
        match h.kind {
            Kind::Msg => {
                let mut data = self.pool.pop().unwrap_or_default();
                data.clear();
                data.resize(h.len as usize, 0);
                Ok(body(Dest::Msg { data, filled: 0 }))
            }
            Kind::WriteReq => {
                let status = match self.mem.resolve(h.reg, h.check, h.offset, h.len) {
                    Ok(_) => 0,
                    Err(r) => r as u32,
                };
                Ok(body(Dest::Target {
                    id: h.id,
                    reg: h.reg,
                    check: h.check,
                    offset: h.offset,
                    status,
                }))
            }
            Kind::ReadReq => {
                let mut resp = Header::new(Kind::ReadResp);
                resp.id = h.id;
                let data = match self.mem.resolve(h.reg, h.check, h.offset, h.len) {
                    Ok(s) => {
                        resp.len = h.len;
                        TxData::Region(s)
                    }
                    Err(r) => {
                        resp.status = r as u32;
                        TxData::None
                    }
                };
                #[cfg(feature = "fault-inject")]
                let data = crate::fault::apply(&mut self.fault, &self.mem, data, 0);
                self.enqueue(peer, TxItem::new(resp, data, None));
                Ok(State::Header)
            }
            Kind::WriteAck => {
                let q = self.take_pending(peer, h.id, OpKind::Write)?;
                let c = match h.status {
                    0 => Completion::Write { ctx: q.ctx },
                    s => refused(peer, &q, s),
                };
                self.done.push_back(c);
                Ok(State::Header)
            }
            Kind::ReadResp => {
                if h.status != 0 {
                    let q = self.take_pending(peer, h.id, OpKind::Read)?;
                    let c = refused(peer, &q, h.status);
                    self.done.push_back(c);
                    return Ok(State::Header);
                }
                let q = match self.pending.get(&h.id) {
                    Some(q) if q.peer == peer && q.op == OpKind::Read => *q,
                    _ => {
                        return Err(format!(
                            "response to read {} that was never requested",
                            h.id
                        ))
                    }
                };
                if h.len != q.local.len as u64 {
                    return Err(format!(
                        "read {} answered with {} bytes, {} requested",
                        h.id, h.len, q.local.len
                    ));
                }
                Ok(body(Dest::Initiator {
                    id: h.id,
                    slice: q.local,
                    failed: false,
                }))
            }
            Kind::Bye => {
                if let Some(p) = self.peers[peer as usize].as_mut() {
                    p.said_bye = true;
                }
                Ok(State::Header)
            }
        }
    }

    fn take_pending(
        &mut self,
        peer: Rank,
        id: u64,
        op: OpKind,
    ) -> Result<crate::engine::Pending, String> {
        match self.pending.get(&id) {
            Some(q) if q.peer == peer && q.op == op => {
                Ok(self.pending.remove(&id).expect("present"))
            }
            _ => Err(format!("answer to {op} {id} that was never requested")),
        }
    }

    /// The frame's data is all in: deliver it.
    fn finish(&mut self, peer: Rank, dest: Dest) {
        match dest {
            Dest::Msg { data, .. } => self.done.push_back(Completion::Recv { peer, data }),
            Dest::Target { id, status, .. } => {
                let mut ack = Header::new(Kind::WriteAck);
                ack.id = id;
                ack.status = status;
                self.enqueue_ctl(peer, ack);
            }
            Dest::Initiator { id, failed, .. } => {
                if let Some(q) = self.pending.remove(&id) {
                    self.done.push_back(if failed {
                        Completion::Error {
                            ctx: Some(q.ctx),
                            peer,
                            op: OpKind::Read,
                            status: format!(
                                "read of {} bytes from rank {peer}: the local buffer was freed before the data arrived",
                                q.local.len
                            ),
                        }
                    } else {
                        Completion::Read { ctx: q.ctx }
                    });
                }
            }
        }
    }
}

/// The error completion for a request the target refused.
pub(crate) fn refused(peer: Rank, q: &crate::engine::Pending, status: u32) -> Completion {
    let why = Refusal::from_status(status)
        .map(Refusal::describe)
        .unwrap_or("the target gave an unknown refusal code");
    Completion::Error {
        ctx: Some(q.ctx),
        peer,
        op: q.op,
        status: format!(
            "rank {peer} refused the {} of {} bytes at offset {}: {why}",
            q.op, q.local.len, q.remote_offset
        ),
    }
}
