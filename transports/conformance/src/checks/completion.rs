//! When each send ended, as the overlap method reads it. Its XFER_END for
//! a send is the moment the transport says the send is done, so that must
//! be known exactly once: from `Posted::Done` at the posting call's return
//! or from one later queued completion, never both, never neither, never
//! twice, never for a context nobody posted. A time the transport gives
//! (`Posted::Done(Some(_))`, or
//! [`Transport::completion_time`](ovbench_core::Transport::completion_time)
//! for a queued completion) is folded as the end time, so it must not lie
//! after the call that returned it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::net::min_eager_buf;
use crate::{Endpoints, WAIT_DEADLINE};
use ovbench_core::{
    Completion, CompletionTime, Ctx, LocalSlice, Msg, Posted, Rank, Tag, TagRecv, TagSend,
    TransportError,
};

/// Sends posted one at a time, each waited for before the next.
const ROUNDS: usize = 16;
/// Sends posted back to back, then waited for together.
const BURST: usize = 64;
/// Tagged sends, where the transport offers the protocol.
const TAGGED: usize = 32;
/// Largest tagged message.
const TAGGED_MAX: usize = 4096;
/// How long everyone keeps polling once all is in, so a second completion
/// for a send (or one for a send that returned `Done`) is caught rather
/// than missed.
const LINGER: Duration = Duration::from_millis(200);
const SEND: Ctx = 0x4_C0DE_0000;
const RECV: Ctx = 0x5_C0DE_0000;
const TAG: Tag = 9000;
const HDR: usize = 16;

/// `post_send` and (where offered) `tsend` from rank 0 to every peer, one
/// at a time and in a burst: each send's end is known exactly once —
/// `Posted::Done` at the call's return, or one later poll's `Send`
/// (`TaggedSend` for the tagged path) after `Posted::Queued` — and no
/// completion comes for a context never posted. Where the transport
/// gives the time: a host time is not later than the return of the call
/// that gave it (the post for `Done`, the poll for a queued completion),
/// and a clock reading (a virtual NIC, whose clock the check cannot read)
/// is not earlier than any time a call had given before the send was
/// posted (the send was posted after that, so it finished after it).
pub fn send_end_known_once(ts: &mut Endpoints) -> Result<(), String> {
    let max = min_eager_buf(ts);
    if max < HDR {
        return Err(format!(
            "the eager buffer ({max} bytes) is smaller than a {HDR}-byte header"
        ));
    }
    let tagged = ts.iter_mut().all(|t| t.tagged().is_some());
    let mut s = Sends::new(ts);
    let buf = s.alloc(0, max.max(TAGGED_MAX))?;
    for i in 0..ROUNDS {
        let ctx = s.send(i, buf, max)?;
        s.until(&format!("send {i}, posted alone"), |s| s.seen(ctx))?;
    }
    for i in ROUNDS..ROUNDS + BURST {
        s.send(i, buf, max)?;
    }
    s.until("a burst of sends", Sends::all_seen)?;
    if tagged {
        s.tagged(buf)?;
    }
    // Drained at the peers too, so nothing is in flight when they drop.
    s.until("every message at its receiver", |s| {
        s.recvd == s.messages && s.tagged_recvd == s.tagged_posted
    })?;
    let end = Instant::now() + LINGER;
    while Instant::now() < end {
        s.poll_all()?;
        std::thread::yield_now();
    }
    if s.posted.is_empty() {
        return Err("no send was posted".into());
    }
    Ok(())
}

/// Rank 0's sends and what became of them.
struct Sends<'a> {
    ts: &'a mut Endpoints,
    /// Every context posted, with the latest clock reading a call had
    /// given when it was posted (its end's lower bound).
    posted: HashMap<Ctx, Option<u64>>,
    /// Contexts whose send finished inside the call (`Posted::Done`).
    inline: HashSet<Ctx>,
    /// Contexts reported by a poll.
    completed: HashSet<Ctx>,
    /// Latest clock reading rank 0's calls have given.
    latest_ticks: Option<u64>,
    /// Two-sided messages posted and received.
    messages: usize,
    recvd: usize,
    /// Tagged receives posted and completed.
    tagged_posted: usize,
    tagged_recvd: usize,
}

impl<'a> Sends<'a> {
    fn new(ts: &'a mut Endpoints) -> Sends<'a> {
        Sends {
            ts,
            posted: HashMap::new(),
            inline: HashSet::new(),
            completed: HashSet::new(),
            latest_ticks: None,
            messages: 0,
            recvd: 0,
            tagged_posted: 0,
            tagged_recvd: 0,
        }
    }

    fn alloc(&mut self, rank: usize, len: usize) -> Result<LocalSlice, String> {
        let region = self.ts[rank]
            .alloc(len)
            .map_err(|e| format!("rank {rank}: alloc {len}: {e}"))?;
        Ok(LocalSlice::new(region, 0, len))
    }

    /// The peer message `i` goes to: every peer in turn.
    fn peer(&self, i: usize) -> Rank {
        (1 + i % (self.ts.len() - 1)) as Rank
    }

    /// Post two-sided message `i`, header-only or with a payload from
    /// `buf`.
    fn send(&mut self, i: usize, buf: LocalSlice, max: usize) -> Result<Ctx, String> {
        let ctx = SEND + i as Ctx;
        let peer = self.peer(i);
        let mut hdr = [0u8; HDR];
        hdr[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let payload = (i % 3 != 0 && max > HDR).then(|| buf.sub(0, 1 + (i * 131) % (max - HDR)));
        self.posted.insert(ctx, self.latest_ticks);
        self.messages += 1;
        let posted = self.ts[0]
            .post_send(peer, Msg::new(&hdr, payload), ctx)
            .map_err(|e| format!("rank 0: send {i} to rank {peer}: {e}"))?;
        let returned = Instant::now();
        self.ended_in_call(ctx, posted, returned, "post_send")?;
        Ok(ctx)
    }

    /// What the call that posted `ctx` (returned at `returned`) said of
    /// its end.
    fn ended_in_call(
        &mut self,
        ctx: Ctx,
        posted: Posted,
        returned: Instant,
        call: &str,
    ) -> Result<(), String> {
        let Posted::Done(at) = posted else {
            return Ok(());
        };
        self.inline.insert(ctx);
        self.check_time(
            ctx,
            at,
            returned,
            &format!("{call} of context {ctx:#x}: Done"),
        )
    }

    /// A time the transport gave for `ctx`'s end (`what` names where it
    /// came from) against the return of the call that gave it and the
    /// times given before `ctx` was posted.
    fn check_time(
        &mut self,
        ctx: Ctx,
        at: Option<CompletionTime>,
        returned: Instant,
        what: &str,
    ) -> Result<(), String> {
        let floor = self.posted.get(&ctx).copied().flatten();
        match at {
            Some(CompletionTime::Host(t)) if t > returned => Err(format!(
                "rank 0: {what} stamped {:?} after the call that returned it",
                t - returned
            )),
            Some(CompletionTime::Ticks(k)) => {
                if let Some(f) = floor.filter(|&f| k < f) {
                    return Err(format!(
                        "rank 0: {what} stamped {k} ticks, before {f}: a time a call had given before this send was posted"
                    ));
                }
                self.latest_ticks = self.latest_ticks.max(Some(k));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Tagged sends to every peer, each receive posted first, then
    /// waited for.
    fn tagged(&mut self, src: LocalSlice) -> Result<(), String> {
        let len = |i: usize| 1 + (i * 97) % TAGGED_MAX;
        let mut slots = Vec::with_capacity(TAGGED);
        for i in 0..TAGGED {
            let peer = self.peer(i) as usize;
            let dst = self.alloc(peer, len(i))?;
            self.ts[peer]
                .tagged()
                .ok_or_else(|| format!("rank {peer}: no tagged protocol"))?
                .trecv(
                    TagRecv::new(Some(0), Some(TAG + i as Tag), dst),
                    RECV + i as Ctx,
                )
                .map_err(|e| format!("rank {peer}: trecv {i} of {TAGGED}: {e}"))?;
            self.tagged_posted += 1;
            slots.push((peer, dst));
        }
        for i in 0..TAGGED {
            let ctx = SEND + (ROUNDS + BURST + i) as Ctx;
            let peer = self.peer(i);
            let s = src.sub(0, len(i));
            self.posted.insert(ctx, self.latest_ticks);
            let what =
                |e: TransportError| format!("rank 0: tsend {i} of {TAGGED} to rank {peer}: {e}");
            let posted = self.ts[0]
                .tagged()
                .ok_or_else(|| "rank 0: no tagged protocol".to_string())?
                .tsend(TagSend::new(peer, TAG + i as Tag, s, false), ctx)
                .map_err(what)?;
            let returned = Instant::now();
            self.ended_in_call(ctx, posted, returned, "tsend")?;
        }
        self.until("the tagged sends", Sends::all_seen)?;
        self.until("the tagged receives", |s| s.tagged_recvd == s.tagged_posted)?;
        for (peer, dst) in slots {
            self.ts[peer]
                .free(dst.region)
                .map_err(|e| format!("rank {peer}: free: {e}"))?;
        }
        Ok(())
    }

    fn seen(&self, ctx: Ctx) -> bool {
        self.inline.contains(&ctx) || self.completed.contains(&ctx)
    }

    /// Every context posted is reported, inline or by a poll.
    fn all_seen(&self) -> bool {
        self.posted.keys().all(|&c| self.seen(c))
    }

    /// Poll everyone until `done`, at most [`WAIT_DEADLINE`].
    fn until(&mut self, what: &str, done: impl Fn(&Self) -> bool) -> Result<(), String> {
        let end = Instant::now() + WAIT_DEADLINE;
        while !done(self) {
            if Instant::now() > end {
                let missing: Vec<_> = self
                    .posted
                    .keys()
                    .filter(|&&c| !self.seen(c))
                    .take(4)
                    .collect();
                return Err(format!(
                    "timed out after {WAIT_DEADLINE:?} waiting for {what}; sends never reported include {missing:x?}; {} of {} messages and {} of {} tagged receives in",
                    self.recvd, self.messages, self.tagged_recvd, self.tagged_posted
                ));
            }
            self.poll_all()?;
        }
        Ok(())
    }

    /// Poll the peers (they take the messages), then rank 0, checking
    /// each of its completions with its stamp.
    fn poll_all(&mut self) -> Result<(), String> {
        let mut v = Vec::new();
        for r in 1..self.ts.len() {
            self.ts[r]
                .poll(&mut v, None)
                .map_err(|e| format!("rank {r}: poll failed: {e}"))?;
            for c in v.drain(..) {
                match c {
                    Completion::Recv { peer: 0, data } => {
                        self.recvd += 1;
                        self.ts[r].recycle(data);
                    }
                    Completion::TaggedRecv { ctx, peer: 0, .. } if ctx >= RECV => {
                        self.tagged_recvd += 1;
                    }
                    c => return Err(format!("rank {r}: unexpected {c:?}")),
                }
            }
        }
        self.ts[0]
            .poll(&mut v, None)
            .map_err(|e| format!("rank 0: poll failed: {e}"))?;
        let returned = Instant::now();
        for (i, c) in v.iter().enumerate() {
            let stamp = self.ts[0].completion_time(i);
            match c {
                Completion::Send { ctx } | Completion::TaggedSend { ctx } => {
                    self.took(*ctx, c, stamp, returned)?
                }
                c => return Err(format!("rank 0: unexpected {c:?}")),
            }
        }
        Ok(())
    }

    /// One completion of rank 0's, stamped `stamp`, from a poll that
    /// returned at `returned`.
    fn took(
        &mut self,
        ctx: Ctx,
        c: &Completion,
        stamp: Option<CompletionTime>,
        returned: Instant,
    ) -> Result<(), String> {
        if !self.posted.contains_key(&ctx) {
            return Err(format!("rank 0: {c:?} for a context never posted"));
        }
        let tagged = ctx >= SEND + (ROUNDS + BURST) as Ctx;
        if tagged != matches!(c, Completion::TaggedSend { .. }) {
            return Err(format!("rank 0: {c:?} is the wrong kind for its send"));
        }
        if self.inline.contains(&ctx) {
            return Err(format!(
                "rank 0: {c:?}, yet its send returned Done (finished inside the call)"
            ));
        }
        if !self.completed.insert(ctx) {
            return Err(format!("rank 0: {c:?} reported a second time"));
        }
        self.check_time(ctx, stamp, returned, &format!("{c:?}"))
    }
}
