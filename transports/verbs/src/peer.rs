//! One connection: its RC queue pair, the pre-posted receive ring, the
//! send slots, credits, and the queue of work waiting for resources.

use std::collections::VecDeque;
use std::io;

use ovbench_core::fabric::aligned::AlignedBuf;
use ovbench_core::{Ctx, Rank};

use crate::credits::Credits;
use crate::qp::{SendOp, Sge};
use crate::wire::{encode_hdr, MsgKind, MSG_HDR};
use crate::{MemoryRegion, QueuePair};

/// Tag bit of receive work-request ids: `RECV | peer << 32 | buffer`.
pub(crate) const RECV: u64 = 1 << 63;

/// What a send-queue work request was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpTag {
    Send,
    Credit,
    Write,
    Read,
}

/// An outstanding send-queue work request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpRec {
    pub peer: u32,
    pub tag: OpTag,
    pub ctx: Ctx,
    /// Send slot used (sends and credit messages).
    pub slot: Option<u32>,
}

/// Work accepted by `post_*` that waits for credits or queue space.
pub(crate) enum Pending {
    Send { bytes: Vec<u8>, ctx: Ctx },
    Rma { op: SendOp, local: Sge, ctx: Ctx },
}

/// Outstanding work requests, indexed by wr_id.
#[derive(Default)]
pub(crate) struct OpTable {
    ops: Vec<Option<OpRec>>,
    free: Vec<u32>,
}

impl OpTable {
    pub fn insert(&mut self, op: OpRec) -> u64 {
        match self.free.pop() {
            Some(i) => {
                self.ops[i as usize] = Some(op);
                i as u64
            }
            None => {
                self.ops.push(Some(op));
                (self.ops.len() - 1) as u64
            }
        }
    }
    /// Work requests posted and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.ops.len() - self.free.len()
    }
    pub fn remove(&mut self, id: u64) -> Option<OpRec> {
        let op = self.ops.get_mut(usize::try_from(id).ok()?)?.take()?;
        self.free.push(id as u32);
        Some(op)
    }
}

/// Fields are dropped in order: the QP before the rings' registrations,
/// the registrations before the memory they cover.
pub(crate) struct Peer {
    pub qp: QueuePair,
    rx_mr: MemoryRegion,
    tx_mr: MemoryRegion,
    rx: AlignedBuf,
    tx: AlignedBuf,
    pub rank: Rank,
    pub psn: u32,
    /// Size of one receive buffer / send slot (transport header included).
    pub buf_size: usize,
    /// Receive buffers posted (data window plus spares).
    pub rx_count: u32,
    pub rx_window: u32,
    free_slots: Vec<u32>,
    /// Free send-queue entries.
    pub sq_free: u32,
    pub credits: Option<Credits>,
    pub pending: VecDeque<Pending>,
    /// Why the connection is dead, once it is.
    pub broken: Option<String>,
    pub max_inline: u32,
}

impl Peer {
    /// Wrap a QP in INIT with its rings; posts every receive buffer.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rank: Rank,
        psn: u32,
        mut qp: QueuePair,
        rx: AlignedBuf,
        rx_mr: MemoryRegion,
        tx: AlignedBuf,
        tx_mr: MemoryRegion,
        buf_size: usize,
        rx_window: u32,
        tx_depth: u32,
        max_inline: u32,
    ) -> io::Result<Peer> {
        let rx_count = (rx.len() / buf_size) as u32;
        for i in 0..rx_count {
            let sge = Sge {
                addr: rx.as_ptr() as u64 + i as u64 * buf_size as u64,
                len: buf_size as u32,
                lkey: rx_mr.lkey(),
            };
            // SAFETY: the buffer lies in `rx`, registered by `rx_mr`; both are
            // owned by the Peer, which destroys the QP before either.
            unsafe { qp.post_recv(RECV | (rank as u64) << 32 | i as u64, sge)? };
        }
        Ok(Peer {
            qp,
            rx_mr,
            tx_mr,
            rx,
            tx,
            rank,
            psn,
            buf_size,
            rx_count,
            rx_window,
            free_slots: (0..tx_depth).rev().collect(),
            sq_free: tx_depth,
            credits: None,
            pending: VecDeque::new(),
            broken: None,
            max_inline,
        })
    }

    /// The received bytes of buffer `idx` (length checked by the caller).
    pub fn rx_bytes(&self, idx: u32, len: usize) -> &[u8] {
        let off = idx as usize * self.buf_size;
        &self.rx.as_slice()[off..off + len]
    }

    /// Give receive buffer `idx` back to the NIC.
    pub fn repost(&mut self, idx: u32) -> io::Result<()> {
        let sge = Sge {
            addr: self.rx.as_ptr() as u64 + idx as u64 * self.buf_size as u64,
            len: self.buf_size as u32,
            lkey: self.rx_mr.lkey(),
        };
        // SAFETY: as in `new`; the buffer's previous contents were copied out.
        unsafe {
            self.qp
                .post_recv(RECV | (self.rank as u64) << 32 | idx as u64, sge)
        }
    }

    /// Whether a data message could be posted now (slot, queue entry, credit).
    pub fn can_send_data(&self) -> bool {
        self.sq_free > 0
            && !self.free_slots.is_empty()
            && self.credits.as_ref().is_some_and(|c| c.available() > 0)
    }

    /// Post a message made of `parts` (after the transport header) from a
    /// send slot. The caller checked the size and, for data, took a credit.
    pub fn post_msg(
        &mut self,
        ops: &mut OpTable,
        kind: MsgKind,
        parts: &[&[u8]],
        ctx: Ctx,
    ) -> io::Result<()> {
        let slot = self.free_slots.pop().expect("caller checked a free slot");
        let credits = self.credits.as_mut().map_or(0, |c| c.take_return());
        let off = slot as usize * self.buf_size;
        let buf = &mut self.tx.as_mut_slice()[off..off + self.buf_size];
        buf[..MSG_HDR].copy_from_slice(&encode_hdr(kind, credits));
        let mut len = MSG_HDR;
        for p in parts {
            buf[len..len + p.len()].copy_from_slice(p);
            len += p.len();
        }
        let tag = if kind == MsgKind::Data {
            OpTag::Send
        } else {
            OpTag::Credit
        };
        let id = ops.insert(OpRec {
            peer: self.rank,
            tag,
            ctx,
            slot: Some(slot),
        });
        let sge = Sge {
            addr: self.tx.as_ptr() as u64 + off as u64,
            len: len as u32,
            lkey: self.tx_mr.lkey(),
        };
        let inline = len as u32 <= self.max_inline;
        // SAFETY: the slot lies in `tx`, registered by `tx_mr`, and is not
        // reused until this request's completion frees it.
        match unsafe { self.qp.post_send(id, SendOp::Send, sge, inline) } {
            Ok(()) => {
                self.sq_free -= 1;
                Ok(())
            }
            Err(e) => {
                ops.remove(id);
                self.free_slots.push(slot);
                if let Some(c) = self.credits.as_mut() {
                    c.undo(kind == MsgKind::Data, credits);
                }
                Err(e)
            }
        }
    }

    /// Post an RDMA write or read. The caller checked `sq_free > 0`.
    pub fn post_rma(
        &mut self,
        ops: &mut OpTable,
        op: SendOp,
        local: Sge,
        ctx: Ctx,
    ) -> io::Result<()> {
        let tag = match op {
            SendOp::Read { .. } => OpTag::Read,
            _ => OpTag::Write,
        };
        let id = ops.insert(OpRec {
            peer: self.rank,
            tag,
            ctx,
            slot: None,
        });
        // SAFETY: `local` was checked by the transport to lie inside a
        // registration of a transport-owned region; a region cannot be freed
        // while registered, and once deregistered the NIC can no longer
        // reach it (the request then completes with an error).
        match unsafe { self.qp.post_send(id, op, local, false) } {
            Ok(()) => {
                self.sq_free -= 1;
                Ok(())
            }
            Err(e) => {
                ops.remove(id);
                Err(e)
            }
        }
    }

    /// A send-queue request finished: its entry and slot are free again.
    pub fn retire(&mut self, op: &OpRec) {
        self.sq_free += 1;
        if let Some(s) = op.slot {
            self.free_slots.push(s);
        }
    }

    /// Post what can go now: a due credit message first, then queued work
    /// in order. Stops at the first item lacking resources.
    pub fn drain(&mut self, ops: &mut OpTable) -> io::Result<()> {
        if self.broken.is_some() {
            return Ok(());
        }
        if self.credits.as_ref().is_some_and(|c| c.credit_due())
            && self.sq_free > 0
            && !self.free_slots.is_empty()
        {
            if let Err(e) = self.post_msg(ops, MsgKind::Credit, &[], 0) {
                if !is_queue_full(&e) {
                    return Err(e);
                }
                return Ok(());
            }
        }
        while let Some(item) = self.pending.pop_front() {
            match item {
                Pending::Send { bytes, ctx } => {
                    if !self.can_send_data() {
                        self.pending.push_front(Pending::Send { bytes, ctx });
                        break;
                    }
                    if let Some(c) = self.credits.as_mut() {
                        c.take();
                    }
                    if let Err(e) = self.post_msg(ops, MsgKind::Data, &[&bytes], ctx) {
                        if is_queue_full(&e) {
                            self.pending.push_front(Pending::Send { bytes, ctx });
                            break;
                        }
                        return Err(e);
                    }
                }
                Pending::Rma { op, local, ctx } => {
                    if self.sq_free == 0 {
                        self.pending.push_front(Pending::Rma { op, local, ctx });
                        break;
                    }
                    if let Err(e) = self.post_rma(ops, op, local, ctx) {
                        if is_queue_full(&e) {
                            self.pending.push_front(Pending::Rma { op, local, ctx });
                            break;
                        }
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }
}

/// `ibv_post_send` says ENOMEM when the provider's send queue is full for a
/// moment (rxe frees an entry just after the completion is visible): the
/// work stays queued and is posted on a later poll.
pub(crate) fn is_queue_full(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOMEM)
}
