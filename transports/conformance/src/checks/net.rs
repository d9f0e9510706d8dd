//! The driver the checks share: polls every endpoint from one thread,
//! sorts completions per rank, and waits with deadlines.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::{Endpoints, WAIT_DEADLINE};
use ovbench_core::{
    Completion, Ctx, LocalSlice, MrHandle, Msg, OpKind, Posted, Rank, RemoteKey, Rma, RmaOp,
    TagSend, Tagged, TransportError,
};

/// Drives all endpoints from one thread and sorts their completions.
pub(super) struct Net<'a> {
    pub(super) ts: &'a mut Endpoints,
    pub(super) inbox: Vec<VecDeque<Completion>>,
    /// A dropped peer whose error completions are expected anywhere.
    pub(super) ignore_peer: Option<Rank>,
}

impl<'a> Net<'a> {
    pub(super) fn new(ts: &'a mut Endpoints) -> Net<'a> {
        let n = ts.len();
        Net {
            ts,
            inbox: (0..n).map(|_| VecDeque::new()).collect(),
            ignore_peer: None,
        }
    }

    /// A net over `ts` for a check of the tagged protocol; `None` where
    /// an endpoint has none (such a check passes at once).
    pub(super) fn tagged_only(ts: &'a mut Endpoints) -> Option<Net<'a>> {
        if ts.iter_mut().any(|t| t.tagged().is_none()) {
            return None;
        }
        Some(Net::new(ts))
    }

    pub(super) fn last(&self) -> usize {
        self.ts.len() - 1
    }

    /// Poll every endpoint once.
    pub(super) fn pump(&mut self) -> Result<(), String> {
        self.pump_for(0)
    }

    /// Poll everyone for `d`, keeping what arrives (to catch completions
    /// that should never come).
    pub(super) fn linger(&mut self, d: Duration) -> Result<(), String> {
        let end = Instant::now() + d;
        while Instant::now() < end {
            self.pump()?;
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Poll every endpoint once, `rank` last, so that what `rank` then
    /// sees is checked before any other endpoint makes progress again
    /// (a write that completed early is caught before the target polls).
    pub(super) fn pump_for(&mut self, rank: usize) -> Result<(), String> {
        let n = self.ts.len();
        let mut v = Vec::new();
        for r in (rank + 1..n).chain(0..=rank) {
            self.ts[r]
                .poll(&mut v, None)
                .map_err(|e| format!("rank {r}: poll failed: {e}"))?;
            self.inbox[r].extend(v.drain(..));
        }
        Ok(())
    }

    /// `post_send` from `rank`. A send that finished inside the call
    /// ([`Posted::Done`]) gets the `Send` completion its caller records,
    /// put in `rank`'s inbox at once: every send then ends in exactly one
    /// `Send` there, and a transport that also queued one for it shows up
    /// as a second.
    pub(super) fn send(
        &mut self,
        rank: usize,
        peer: Rank,
        header: &[u8],
        payload: Option<LocalSlice>,
        ctx: Ctx,
    ) -> Result<(), TransportError> {
        let p = self.ts[rank].post_send(peer, Msg::new(header, payload), ctx)?;
        self.record(rank, p, Completion::Send { ctx });
        Ok(())
    }

    /// What a send that `rank` posted said ([`Posted`]): one that finished
    /// inside the call gets its completion `done`, which its caller
    /// records, in `rank`'s inbox at once.
    fn record(&mut self, rank: usize, posted: Posted, done: Completion) {
        if let Posted::Done(_) = posted {
            self.inbox[rank].push_back(done);
        }
    }

    /// Rank 0's one-sided operation `op` on the last rank's memory; an
    /// error names the operation, its size and the target.
    pub(super) fn rma(&mut self, op: RmaOp<'_>, ctx: Ctx) -> Result<(), String> {
        let (n, d) = (op.local.len, self.last());
        let what = match op.op {
            Rma::Write => format!("write of {n} bytes to"),
            Rma::Read => format!("read of {n} bytes from"),
        };
        self.ts[0]
            .post_rma(d as Rank, op, ctx)
            .map_err(|e| format!("rank 0: {what} rank {d}: {e}"))
    }

    /// `rank`'s tagged protocol, or an error saying it has none.
    pub(super) fn tagged(&mut self, rank: usize) -> Result<&mut dyn Tagged, String> {
        self.ts[rank]
            .tagged()
            .ok_or_else(|| format!("rank {rank}: no tagged protocol"))
    }

    /// `tsend` from `rank`, recorded as [`Self::send`] records a send: a
    /// [`Posted::Done`] puts its `TaggedSend` in `rank`'s inbox.
    pub(super) fn tsend(&mut self, rank: usize, op: TagSend, ctx: Ctx) -> Result<(), String> {
        let TagSend { peer, tag, src, .. } = op;
        let p = self.tagged(rank)?.tsend(op, ctx).map_err(|e| {
            format!(
                "rank {rank}: tsend of {} bytes, tag {tag}, to rank {peer}: {e}",
                src.len
            )
        })?;
        self.record(rank, p, Completion::TaggedSend { ctx });
        Ok(())
    }

    /// Poll everyone until `rank` has `count` completions matching `pred`;
    /// remove and return them in arrival order. Any other error completion
    /// on `rank` fails the wait.
    pub(super) fn wait_n(
        &mut self,
        rank: usize,
        count: usize,
        what: &str,
        deadline: Duration,
        pred: &dyn Fn(&Completion) -> bool,
    ) -> Result<Vec<Completion>, String> {
        let end = Instant::now() + deadline;
        let mut got = Vec::with_capacity(count);
        loop {
            let mut i = 0;
            while i < self.inbox[rank].len() && got.len() < count {
                if pred(&self.inbox[rank][i]) {
                    got.push(self.inbox[rank].remove(i).expect("index checked"));
                } else if matches!(self.inbox[rank][i], Completion::Error { peer, .. } if Some(peer) != self.ignore_peer)
                {
                    return Err(format!(
                        "rank {rank} waiting for {what}: unexpected {:?}",
                        self.inbox[rank][i]
                    ));
                } else {
                    i += 1;
                }
            }
            if got.len() == count {
                return Ok(got);
            }
            if Instant::now() > end {
                return Err(format!(
                    "rank {rank}: timed out after {deadline:?} waiting for {what} ({} of {count} seen; other completions: {:?})",
                    got.len(),
                    self.inbox[rank].iter().take(4).collect::<Vec<_>>()
                ));
            }
            self.pump_for(rank)?;
        }
    }

    pub(super) fn wait(
        &mut self,
        rank: usize,
        what: &str,
        pred: &dyn Fn(&Completion) -> bool,
    ) -> Result<Completion, String> {
        Ok(self.wait_n(rank, 1, what, WAIT_DEADLINE, pred)?.remove(0))
    }

    /// The next message from `from` at `rank`.
    pub(super) fn recv(&mut self, rank: usize, from: Rank) -> Result<Vec<u8>, String> {
        match self.wait(
            rank,
            &format!("a message from rank {from}"),
            &|c| matches!(c, Completion::Recv { peer, .. } if *peer == from),
        )? {
            Completion::Recv { data, .. } => Ok(data),
            _ => unreachable!("matched a Recv"),
        }
    }

    pub(super) fn wait_ctx(&mut self, rank: usize, what: &str, ctx: Ctx) -> Result<(), String> {
        self.wait(rank, what, &|c| {
            ctx_of(c) == Some(ctx) && !matches!(c, Completion::Error { .. })
        })
        .map(|_| ())
    }

    pub(super) fn alloc(
        &mut self,
        rank: usize,
        len: usize,
        fill: u8,
    ) -> Result<LocalSlice, String> {
        let t = &mut self.ts[rank];
        let region = t
            .alloc(len)
            .map_err(|e| format!("rank {rank}: alloc {len}: {e}"))?;
        let s = LocalSlice::new(region, 0, len);
        t.region(s, &mut |b| b.fill(fill))
            .map_err(|e| format!("rank {rank}: region: {e}"))?;
        Ok(s)
    }

    pub(super) fn register(
        &mut self,
        rank: usize,
        s: LocalSlice,
    ) -> Result<(MrHandle, RemoteKey), String> {
        let t = &mut self.ts[rank];
        let r = t
            .register(s)
            .map_err(|e| format!("rank {rank}: register {} bytes: {e}", s.len))?;
        Ok((r.mr, r.key))
    }

    pub(super) fn bytes(&mut self, rank: usize, s: LocalSlice) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        self.ts[rank]
            .region(s, &mut |b| out.extend_from_slice(b))
            .map_err(|e| format!("rank {rank}: region: {e}"))?;
        Ok(out)
    }

    pub(super) fn fill_pattern(
        &mut self,
        rank: usize,
        s: LocalSlice,
        seed: u32,
    ) -> Result<(), String> {
        self.ts[rank]
            .region(s, &mut |b| pattern(b, seed))
            .map_err(|e| format!("rank {rank}: region: {e}"))
    }
}

/// The largest message every endpoint takes (header and payload).
pub(super) fn min_eager_buf(ts: &Endpoints) -> usize {
    ts.iter()
        .map(|t| t.info().caps.eager_buf_size)
        .min()
        .unwrap_or(0)
}

pub(super) fn ctx_of(c: &Completion) -> Option<Ctx> {
    match c {
        Completion::Send { ctx }
        | Completion::Write { ctx }
        | Completion::Read { ctx }
        | Completion::TaggedSend { ctx }
        | Completion::TaggedRecv { ctx, .. } => Some(*ctx),
        Completion::Error { ctx, .. } => *ctx,
        Completion::Recv { .. } => None,
    }
}

/// Deterministic bytes that differ by position and seed.
pub(super) fn pattern(b: &mut [u8], seed: u32) {
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u32)
            .wrapping_mul(2_654_435_761)
            .wrapping_add(seed)
            .rotate_left(7) as u8;
    }
}

pub(super) fn patterned(len: usize, seed: u32) -> Vec<u8> {
    let mut v = vec![0; len];
    pattern(&mut v, seed);
    v
}

pub(super) fn first_diff(a: &[u8], b: &[u8]) -> String {
    if a.len() != b.len() {
        return format!("lengths differ: {} vs {}", a.len(), b.len());
    }
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at byte {i}: {:#04x} vs {:#04x}",
            a[i], b[i]
        ),
        None => "equal".into(),
    }
}

/// What is wrong with a received message that is not `want`: the
/// sequence number its first 4 bytes carry, and where it first differs.
pub(super) fn wrong_message(data: &[u8], want: &[u8]) -> String {
    let got_seq = data
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4")));
    format!(
        "its sequence field says {got_seq:?}; {}",
        first_diff(data, want)
    )
}

/// An operation was refused: either its post returned an error naming the
/// peer, or it must end in an error completion with its context.
pub(super) fn expect_refused(
    net: &mut Net<'_>,
    rank: usize,
    peer: Rank,
    op: OpKind,
    what: &str,
    posted: Result<(), TransportError>,
    ctx: Ctx,
) -> Result<(), String> {
    match posted {
        Err(e) => {
            let msg = e.to_string();
            if msg.contains(&format!("rank {peer}")) {
                Ok(())
            } else {
                Err(format!(
                    "{what}: refused at post, but the error does not name rank {peer}: {msg}"
                ))
            }
        }
        Ok(()) => {
            let c = net.wait(rank, &format!("the refusal of {what}"), &|c| {
                ctx_of(c) == Some(ctx)
            })?;
            match c {
                Completion::Error { peer: p, op: o, .. } if p == peer && o == op => Ok(()),
                Completion::Error { .. } => Err(format!(
                    "{what}: error completion names the wrong peer or operation: {c:?}"
                )),
                _ => Err(format!("{what}: was performed instead of refused ({c:?})")),
            }
        }
    }
}
