//! What is in flight between the engine and its caller or its peers: the
//! contexts of posted operations and what each stands for, the
//! registrations asked for, the registration cache, the pipelined
//! fragments announced, and our messages that wait for an answer.

use crate::hash::HashMap;
use crate::idmap::IdMap;
use crate::{Key, MrId, Rank, Slice};

/// What a finished operation's context stands for.
#[derive(Clone, Debug)]
pub(crate) enum CtxUse {
    /// An eager or first-fragment packet; `req` completes with it (raw send).
    Packet {
        xfer: u64,
        bytes: usize,
        req: Option<u64>,
    },
    /// A control message; `req` completes with it (raw key announcement).
    Ctrl {
        req: Option<u64>,
    },
    Write {
        req: u64,
        xfer: u64,
        offset: usize,
        bytes: usize,
        mr: MrId,
        cached: bool,
    },
    Read {
        req: u64,
        xfer: u64,
    },
}

/// What a registration was asked for.
#[derive(Clone, Debug)]
pub(crate) enum Token {
    /// The whole buffer of `req` (rendezvous, raw).
    Whole { req: u64 },
    /// Pipelined sender fragment, to write into `key`.
    SendFrag { req: u64, offset: usize, key: Key },
    /// Pipelined receiver fragment, to announce with PUT.
    RecvFrag { req: u64, offset: usize },
}

/// A pipelined receiver fragment announced with PUT: its transfer, its
/// registration, its length.
pub(crate) type Frag = (u64, MrId, usize);

/// Everything in flight.
#[derive(Debug, Default)]
pub(crate) struct Flight {
    ctxs: IdMap<CtxUse>,
    tokens: HashMap<u64, (Token, Slice, bool)>,
    cache: Vec<(Slice, MrId, Key)>,
    frags: HashMap<(u64, usize), Frag>,
    outgoing: HashMap<(Rank, u32), u64>,
}

impl Flight {
    /// Operation context `ctx` stands for `u`.
    pub fn track(&mut self, ctx: u64, u: CtxUse) {
        self.ctxs.insert(ctx, u);
    }

    /// What operation context `ctx` stood for, now that it finished.
    #[inline]
    pub fn finished(&mut self, ctx: u64) -> Option<CtxUse> {
        self.ctxs.remove(&ctx)
    }

    /// Whether a data operation (eager packet, write, read) is posted and
    /// not complete.
    pub fn data_ops_open(&self) -> bool {
        self.ctxs.values().any(|u| {
            matches!(
                u,
                CtxUse::Packet { .. } | CtxUse::Write { .. } | CtxUse::Read { .. }
            )
        })
    }

    /// Registration `token` of `slice` was asked for `t`.
    pub fn asked(&mut self, token: u64, t: Token, slice: Slice, cacheable: bool) {
        self.tokens.insert(token, (t, slice, cacheable));
    }

    /// What registration `token` was asked for, now that it is done.
    pub fn answered(&mut self, token: u64) -> Option<(Token, Slice, bool)> {
        self.tokens.remove(&token)
    }

    /// A cached registration of exactly `slice`.
    pub fn cached(&self, slice: Slice) -> Option<(MrId, Key)> {
        self.cache
            .iter()
            .find(|(c, _, _)| *c == slice)
            .map(|(_, mr, key)| (*mr, key.clone()))
    }

    /// Keep registration `mr` of `slice` for later messages.
    pub fn cache(&mut self, slice: Slice, mr: MrId, key: Key) {
        self.cache.push((slice, mr, key));
    }

    /// Every cached registration, emptied.
    pub fn drain_cache(&mut self) -> Vec<MrId> {
        std::mem::take(&mut self.cache)
            .into_iter()
            .map(|(_, mr, _)| mr)
            .collect()
    }

    /// Pipelined fragment at `offset` of request `req` announced.
    pub fn frag_put(&mut self, req: u64, offset: usize, f: Frag) {
        self.frags.insert((req, offset), f);
    }

    /// The fragment at `offset` of request `req`, once its FIN came.
    pub fn frag_done(&mut self, req: u64, offset: usize) -> Option<Frag> {
        self.frags.remove(&(req, offset))
    }

    /// Our message `seq` to `peer` (request `req`) waits for an answer.
    pub fn awaiting(&mut self, peer: Rank, seq: u32, req: u64) {
        self.outgoing.insert((peer, seq), req);
    }

    /// The request of our message `seq` to `peer`, if it waits.
    pub fn awaited(&self, peer: Rank, seq: u32) -> Option<u64> {
        self.outgoing.get(&(peer, seq)).copied()
    }

    /// Our message `seq` to `peer` waits for nothing more.
    pub fn answered_all(&mut self, peer: Rank, seq: u32) {
        self.outgoing.remove(&(peer, seq));
    }
}
