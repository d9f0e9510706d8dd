//! The progress engine: per-peer connections, outstanding one-sided
//! requests and queued completions, behind the transport's mutex.
//!
//! The receive path is in [`crate::rx`], the send path in [`crate::tx`].
//! Everything here runs either in the application's `poll` (progress by
//! polling) or in the progress thread (progress by thread), never both at
//! once: the caller holds the lock.

use std::collections::{HashMap, VecDeque};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;

use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};
use ovbench_core::{Completion, Ctx, LocalSlice, OpKind, Rank, TransportError};

use crate::memory::Memory;
use crate::rx::Rx;
use crate::thread::WAKE_TOKEN;
use crate::tx::{TxData, TxItem};
use crate::wire::{Header, Kind};

/// From this many live peers on, progress asks epoll which sockets are
/// ready instead of trying a read on each.
const EPOLL_FROM_PEERS: usize = 4;

/// A one-sided request waiting for the target's answer.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    pub peer: Rank,
    pub op: OpKind,
    pub ctx: Ctx,
    /// Read: where the data goes. Write: the source (for messages).
    pub local: LocalSlice,
    pub remote_offset: u64,
}

/// One connection and its queues.
pub struct Peer {
    pub sock: TcpStream,
    pub tx: VecDeque<TxItem>,
    pub rx: Rx,
    /// The peer said goodbye: its end of file is expected.
    pub said_bye: bool,
    /// Whether EPOLLOUT is in the interest set (send backlog waiting).
    pub out_armed: bool,
}

/// All mutable transport state.
pub struct Engine {
    pub me: Rank,
    /// Largest two-sided message (header + payload).
    pub eager: usize,
    pub mem: Memory,
    /// Indexed by rank; `None` for this rank, before connect, and once gone.
    pub peers: Vec<Option<Peer>>,
    /// Why a peer is gone (indexed by rank).
    pub gone: Vec<Option<String>>,
    pub done: VecDeque<Completion>,
    pub pending: HashMap<u64, Pending>,
    next_id: u64,
    /// Recycled receive buffers.
    pub pool: Vec<Vec<u8>>,
    pub epoll: Arc<Epoll>,
    /// The armed test hook (`OVBENCH_TCP_CORRUPT`), test builds only.
    #[cfg(feature = "fault-inject")]
    pub fault: Option<crate::fault::Fault>,
}

impl Engine {
    pub fn new(me: Rank, size: u32, eager: usize, epoll: Arc<Epoll>) -> Engine {
        Engine {
            me,
            eager,
            mem: Memory::default(),
            peers: (0..size).map(|_| None).collect(),
            gone: (0..size).map(|_| None).collect(),
            done: VecDeque::new(),
            pending: HashMap::new(),
            next_id: 1,
            pool: Vec::new(),
            epoll,
            #[cfg(feature = "fault-inject")]
            fault: None,
        }
    }

    /// Take over the connected sockets and watch them.
    pub fn attach(&mut self, streams: Vec<Option<TcpStream>>) -> Result<(), TransportError> {
        for (r, s) in streams.into_iter().enumerate() {
            let Some(sock) = s else { continue };
            self.epoll
                .add(sock.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, r as u64))
                .map_err(|e| {
                    TransportError::io(format!("watching the socket of rank {r}"), e.into())
                })?;
            self.peers[r] = Some(Peer {
                sock,
                tx: VecDeque::new(),
                rx: Rx::new(self.eager),
                said_bye: false,
                out_armed: false,
            });
        }
        Ok(())
    }

    /// The live connection to `peer`, or an error saying why there is none.
    pub fn peer_for(&self, peer: Rank, op: OpKind, size: usize) -> Result<(), TransportError> {
        let idx = peer as usize;
        if peer == self.me {
            return Ok(());
        }
        if idx >= self.peers.len() {
            return Err(TransportError::Invalid(format!(
                "{op} of {size} bytes to rank {peer}: no such peer (job of {} ranks, this is rank {})",
                self.peers.len(),
                self.me
            )));
        }
        if self.peers[idx].is_some() {
            return Ok(());
        }
        let status = match &self.gone[idx] {
            Some(why) => format!("{op} of {size} bytes impossible: rank {peer} is gone ({why})"),
            None => format!("{op} of {size} bytes before connect(): call connect first"),
        };
        Err(TransportError::Peer { peer, op, status })
    }

    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Queue a frame for `peer` and try to send at once.
    pub fn enqueue(&mut self, peer: Rank, item: TxItem) {
        if let Some(p) = self.peers[peer as usize].as_mut() {
            p.tx.push_back(item);
            self.flush(peer);
        } else if let Some(c) = item.done {
            let why = self.gone[peer as usize].clone().unwrap_or_default();
            self.done.push_back(failed(c, peer, &why));
        }
    }

    /// Queue a frame with no data and no completion.
    pub fn enqueue_ctl(&mut self, peer: Rank, h: Header) {
        self.enqueue(peer, TxItem::new(h, TxData::None, None));
    }

    /// Send and receive on every connection as far as the sockets allow.
    /// With few peers, trying each socket is cheapest; with more, one
    /// `epoll_wait(0)` says which ones have anything.
    pub fn progress_all(&mut self) {
        let live = self.peers.iter().flatten().count();
        if live < EPOLL_FROM_PEERS {
            for r in 0..self.peers.len() as Rank {
                if self.peers[r as usize].is_some() {
                    self.flush(r);
                    self.receive(r);
                    self.flush(r);
                }
            }
            return;
        }
        for r in 0..self.peers.len() as Rank {
            if self.peers[r as usize]
                .as_ref()
                .is_some_and(|p| !p.tx.is_empty())
            {
                self.flush(r);
            }
        }
        let mut events = [EpollEvent::empty(); 64];
        let n = self.epoll.wait(&mut events, 0u16).unwrap_or(0);
        for e in &events[..n] {
            let r = e.data();
            if r == WAKE_TOKEN || r >= self.peers.len() as u64 {
                continue;
            }
            self.receive(r as Rank);
            self.flush(r as Rank);
        }
    }

    /// Keep EPOLLOUT armed exactly while `peer` has a send backlog.
    pub fn update_interest(&mut self, peer: Rank) {
        let Some(p) = self.peers[peer as usize].as_mut() else {
            return;
        };
        let want = !p.tx.is_empty();
        if want == p.out_armed {
            return;
        }
        let mut flags = EpollFlags::EPOLLIN;
        if want {
            flags |= EpollFlags::EPOLLOUT;
        }
        let mut ev = EpollEvent::new(flags, u64::from(peer));
        if self.epoll.modify(p.sock.as_fd(), &mut ev).is_ok() {
            p.out_armed = want;
        }
    }

    /// The connection to `peer` is finished: fail everything that needed
    /// it. A clean goodbye with nothing outstanding is no error.
    pub fn drop_peer(&mut self, peer: Rank, why: String) {
        let Some(p) = self.peers[peer as usize].take() else {
            return;
        };
        let _ = self.epoll.delete(p.sock.as_fd());
        let mut outstanding = 0;
        for item in p.tx {
            if let Some(c) = item.done {
                self.done.push_back(failed(c, peer, &why));
                outstanding += 1;
            }
        }
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, q)| q.peer == peer)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let q = self.pending.remove(&id).expect("listed above");
            self.done.push_back(Completion::Error {
                ctx: Some(q.ctx),
                peer,
                op: q.op,
                status: format!(
                    "{} of {} bytes at offset {} lost: {why}",
                    q.op, q.local.len, q.remote_offset
                ),
            });
            outstanding += 1;
        }
        if !p.said_bye || outstanding > 0 {
            self.done.push_back(Completion::Error {
                ctx: None,
                peer,
                op: OpKind::Recv,
                status: why.clone(),
            });
        }
        self.gone[peer as usize] = Some(why);
    }

    /// Say goodbye to every peer and push out what is queued, for at most
    /// `budget`.
    pub fn shutdown(&mut self, budget: std::time::Duration) {
        let end = std::time::Instant::now() + budget;
        for r in 0..self.peers.len() as Rank {
            if self.peers[r as usize].is_some() {
                self.enqueue_ctl(r, Header::new(Kind::Bye));
            }
        }
        while self.peers.iter().flatten().any(|p| !p.tx.is_empty())
            && std::time::Instant::now() < end
        {
            for r in 0..self.peers.len() as Rank {
                self.flush(r);
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        for p in self.peers.iter_mut() {
            if let Some(p) = p.take() {
                let _ = self.epoll.delete(p.sock.as_fd());
            }
        }
    }
}

/// Turn the completion an operation would have had into its failure.
fn failed(c: Completion, peer: Rank, why: &str) -> Completion {
    let (ctx, op) = match c {
        Completion::Send { ctx } => (Some(ctx), OpKind::Send),
        Completion::Write { ctx } => (Some(ctx), OpKind::Write),
        Completion::Read { ctx } => (Some(ctx), OpKind::Read),
        _ => (None, OpKind::Send),
    };
    Completion::Error {
        ctx,
        peer,
        op,
        status: format!("{op} not delivered: {why}"),
    }
}
