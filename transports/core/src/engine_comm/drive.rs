//! The driver loop: performs the engine's operations on the transport,
//! feeds completions and arrivals back, and waits with a deadline.

use std::time::Instant;

use ovbench_proto::{Engine, EventKind, Key, MrId, OneSided, Op, ProtoError, ReqId, Slice};

use super::engine::EngineState;
use super::shared::Shared;
use crate::{
    Arrivals, Completion, CompletionTime, Idle, LocalSlice, MrHandle, Msg, OpKind, Placement,
    Posted, Rank, RegionId, Registered, RemoteKey, Result, Rma, RmaOp, Status, TransportError,
};

use super::shared::{CHECK_EVERY, SPIN_BEFORE_BLOCK};

pub(crate) fn ls(s: Slice) -> LocalSlice {
    LocalSlice::new(RegionId(s.region), s.offset, s.len)
}

fn rkey(k: Key) -> RemoteKey {
    RemoteKey {
        addr: k.addr,
        len: k.len,
        blob: k.blob,
    }
}

/// The engine as the transport's taker of arrived messages
/// (the `arrivals` of [`crate::Transport::poll`]), used only without
/// instrumentation: the engine's `now` then goes unused.
struct EngineTaker<'a> {
    eng: &'a mut Engine,
}

impl Arrivals for EngineTaker<'_> {
    fn arrived(&mut self, peer: Rank, data: &[u8]) -> Result<Option<Placement>> {
        let p = self.eng.on_message(0, peer, data).map_err(proto_err)?;
        Ok(p.map(|p| Placement {
            dst: ls(p.dst),
            src_start: p.src_start,
        }))
    }
}

/// An engine error as the transport error users see.
pub(crate) fn proto_err(e: ProtoError) -> TransportError {
    match e {
        ProtoError::BadKey { peer, detail } => TransportError::BadKey { peer, detail },
        ProtoError::Invalid(s) => TransportError::Invalid(s),
        other => TransportError::Peer {
            peer: other.peer().unwrap_or(0),
            op: OpKind::Recv,
            status: other.to_string(),
        },
    }
}

/// `post_rma` of the engine's one-sided operation `a`.
#[inline]
fn post_one_sided(s: &mut Shared, op: Rma, a: OneSided) -> Result<()> {
    let remote = rkey(a.key);
    let rma = RmaOp {
        op,
        local: ls(a.local),
        mr: MrHandle(a.mr.0),
        remote: &remote,
        remote_offset: a.remote_offset,
    };
    s.t.post_rma(a.peer, rma, a.ctx)
}

impl EngineState {
    /// Perform every operation the engine asks for, in order (most
    /// inputs leave none: checked here, inline).
    #[inline(always)]
    pub(crate) fn exec_ops(&mut self, s: &mut Shared) -> Result<()> {
        if !self.eng.has_output() {
            return Ok(());
        }
        self.exec_queued(s)
    }

    /// [`Self::exec_ops`] with something to do.
    #[inline(never)]
    fn exec_queued(&mut self, s: &mut Shared) -> Result<()> {
        while let Some(op) = self.eng.poll_op() {
            match op {
                Op::Send {
                    peer,
                    header,
                    payload,
                    ctx,
                } => {
                    let posted =
                        s.t.post_send(peer, Msg::new(&header, payload.map(ls)), ctx)?;
                    self.eng.recycle_header(header);
                    if let Posted::Done(at) = posted {
                        self.sent_inline(s, ctx, at)?;
                    }
                }
                Op::Write(w) => post_one_sided(s, Rma::Write, *w)?,
                Op::Read(r) => post_one_sided(s, Rma::Read, *r)?,
                Op::Register { slice, token } => {
                    let Registered { mr, key: k } = s.t.register(ls(slice)).map_err(|e| TransportError::Local {
                        op: OpKind::Register,
                        detail: format!(
                            "registering {} bytes failed ({e}); if the memlock limit is low, raise it (ulimit -l unlimited) or use --reg-cache on",
                            slice.len
                        ),
                    })?;
                    let key = Key {
                        addr: k.addr,
                        len: k.len,
                        blob: k.blob,
                    };
                    let now = s.stamp();
                    self.eng
                        .on_registered(now, token, MrId(mr.0), key)
                        .map_err(proto_err)?;
                }
                Op::Deregister { mr } => s.t.deregister(MrHandle(mr.0))?,
                Op::Deliver { dst, data } => {
                    s.t.region(ls(dst), &mut |b| b.copy_from_slice(&data))?
                }
                Op::StampByte { at, value } => s.t.region(ls(at), &mut |b| b[0] = value)?,
            }
        }
        self.drain_events(s);
        Ok(())
    }

    /// A packet the transport sent inside the posting call
    /// ([`Posted::Done`]): the engine hears of its completion now rather
    /// than from a later poll, at the transport's time if it gave one.
    pub(crate) fn sent_inline(
        &mut self,
        s: &mut Shared,
        ctx: u64,
        at: Option<CompletionTime>,
    ) -> Result<()> {
        let now = match at {
            None => s.stamp(),
            Some(t) => s.stamp_at(t),
        };
        self.eng.on_completion(now, ctx).map_err(proto_err)
    }

    #[inline]
    pub(crate) fn drain_events(&mut self, s: &mut Shared) {
        while let Some(e) = self.eng.poll_event() {
            if let Some(i) = s.instr.as_mut() {
                match e.kind {
                    EventKind::XferBegin => i.xfer_begin(e.xfer, e.bytes as u64, e.at, false),
                    EventKind::XferEnd => i.xfer_end(e.xfer, e.bytes as u64, e.at),
                }
            }
        }
    }

    /// Poll the transport once and feed everything back; true if anything
    /// arrived or completed.
    pub(crate) fn poll_once(&mut self, s: &mut Shared) -> Result<bool> {
        // Raw write: the watched last byte first, as perftest spins on it;
        // a receive it finishes needs no transport poll this time round.
        if self.eng.has_watches() {
            if self.watch_raw(s)? {
                return Ok(true);
            }
            // No completion will announce it: the transport must not sleep.
            s.t.idle(Idle::WatchingMemory)?;
        }
        // Polled straight into `s.comps`: the idle poll (most of a
        // wait) moves no Vec in and out of `self` (that move, a store
        // reloaded at once, was the costliest part of an idle poll).
        // Without instrumentation the engine takes messages as they
        // arrive; with it, each keeps its own completion stamp below.
        let r = if s.instr.is_none() {
            let mut taker = EngineTaker { eng: &mut self.eng };
            s.t.poll(&mut s.comps, Some(&mut taker))
        } else {
            s.t.poll(&mut s.comps, None)
        };
        let queued = s.comps.len();
        let total = match r {
            Ok(n) => n,
            Err(e) => {
                s.comps.clear();
                return Err(e);
            }
        };
        if total == 0 {
            return Ok(false);
        }
        if total > queued {
            // What the handed-over messages asked for, before anything
            // queued after them.
            self.exec_ops(s)?;
        }
        if queued > 0 {
            self.feed_all(s)?;
        }
        // What arrived may have started a watch (a peer's key).
        if self.eng.has_watches() {
            self.watch_raw(s)?;
        }
        Ok(true)
    }

    /// Feed the engine every completion the last poll queued.
    fn feed_all(&mut self, s: &mut Shared) -> Result<()> {
        let mut comps = std::mem::take(&mut s.comps);
        let now = s.stamp();
        let mut res = Ok(());
        for (i, c) in comps.drain(..).enumerate() {
            // XFER_END at the NIC's completion time where the device
            // stamps completions, else at the host's `now`.
            // deviation: nic-stamped-end — XFER_END at the device's completion stamp, see docs/methods/overlap.md
            let at = match s.t.completion_time(i) {
                Some(CompletionTime::Host(t)) => s.clock.ticks_at(t),
                Some(CompletionTime::Ticks(t)) => Some(t),
                None => None,
            }
            .unwrap_or(now);
            res = self.feed(s, at, c);
            if res.is_err() {
                break;
            }
        }
        comps.clear();
        s.comps = comps;
        res
    }

    fn feed(&mut self, s: &mut Shared, now: u64, c: Completion) -> Result<()> {
        match c {
            Completion::Send { ctx } | Completion::Write { ctx } | Completion::Read { ctx } => {
                self.eng.on_completion(now, ctx).map_err(proto_err)?
            }
            Completion::Recv { peer, data } => {
                let p = self.eng.on_message(now, peer, &data).map_err(proto_err);
                let placed = match p {
                    Ok(Some(p)) => {
                        let src = &data[p.src_start..p.src_start + p.dst.len];
                        s.t
                            .region(ls(p.dst), &mut |b| b.copy_from_slice(src))
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                };
                s.t.recycle(data);
                placed?;
            }
            Completion::TaggedSend { .. } | Completion::TaggedRecv { .. } => {
                return Err(TransportError::Invalid(
                    "the transport returned a native tagged completion to the protocol engine, which posts none".into(),
                ))
            }
            Completion::Error {
                peer, op, status, ..
            } => return Err(TransportError::Peer { peer, op, status }),
        }
        self.exec_ops(s)
    }

    /// Look at the last byte of raw-write receives; the clock is read only
    /// when one shows its marker. True if one finished.
    fn watch_raw(&mut self, s: &mut Shared) -> Result<bool> {
        let mut any = false;
        let mut k = 0;
        while k < self.eng.watch_count() {
            let Some(w) = self.eng.watch_at(k) else {
                k += 1;
                continue;
            };
            let mut b = 0u8;
            s.t.region(ls(w.at), &mut |s| b = s[0])?;
            if self.eng.raw_byte_arrived(w.req, b) {
                let now = s.stamp();
                // Finishing it removes it from the list: `k` is the next one.
                self.eng.on_raw_byte(now, w.req, b);
                any = true;
            } else {
                k += 1;
            }
        }
        if any {
            self.drain_events(s);
        }
        Ok(any)
    }

    /// Drive progress until `req` finishes or the deadline passes.
    pub(crate) fn wait_req(&mut self, s: &mut Shared, req: ReqId) -> Result<Status> {
        // A stop is looked for once per wait as well as every CHECK_EVERY
        // polls: waits that end within a few polls (a ping-pong's) would
        // never see one.
        crate::stop::check()?;
        // The deadline's clock starts at the first check, CHECK_EVERY polls
        // in: most waits end before it, and reading the clock costs more
        // than a poll of a simulated transport.
        let mut start: Option<Instant> = None;
        let mut spins = 0u32;
        let mut idle = 0u32;
        // Only a poll that fed the engine something can finish `req`.
        let mut progressed = true;
        loop {
            if progressed {
                if let Some(st) = self.eng.take(req) {
                    if s.instr.is_some() {
                        // Recording: completions the transport already
                        // holds (an eager send's, whose request finished
                        // as posted) are taken inside this call, so their
                        // END is recorded in the call that completes the
                        // request rather than in a later one.
                        self.poll_once(s)?;
                    }
                    return Ok(Status {
                        source: st.source,
                        tag: st.tag,
                        len: st.len,
                    });
                }
            }
            spins = spins.wrapping_add(1);
            if spins % CHECK_EVERY == 0
                && crate::watch::check_wait(&mut start, s.cfg.timeout, || self.wait_what(s, req))?
            {
                return Err(self.timeout_error(s, req));
            }
            progressed = self.poll_once(s)?;
            if progressed {
                idle = 0;
                continue;
            }
            idle = idle.saturating_add(1);
            if s.cfg.oversubscribed && idle > SPIN_BEFORE_BLOCK {
                s.block()?;
            } else {
                // Nothing came and this wait polls on until something
                // does (a simulated rank then sleeps at its next poll).
                s.t.idle(Idle::EmptyPoll)?;
                // A PAUSE only where ranks share cores: on a rank's own
                // core it is up to one PAUSE late on every arrival (as in
                // the native path's wait).
                if s.cfg.oversubscribed {
                    std::hint::spin_loop();
                }
            }
        }
    }

    /// Poll until no data operation is open (see
    /// [`Engine::data_ops_open`]), with the wait's deadline.
    pub(crate) fn drain_data_ops(&mut self, s: &mut Shared) -> Result<()> {
        crate::stop::check()?;
        let start = Instant::now();
        let mut spins = 0u32;
        while self.eng.data_ops_open() {
            spins = spins.wrapping_add(1);
            if spins % CHECK_EVERY == 0 {
                crate::stop::check()?;
                let waited = start.elapsed();
                let what = || {
                    format!(
                        "rank {}: waiting for its data transfers to complete",
                        s.rank
                    )
                };
                if waited > s.cfg.timeout {
                    return Err(s.timeout(None, what()));
                }
                crate::watch::waiting(start, waited, s.cfg.timeout, || (None, what()))?;
            }
            if !self.poll_once(s)? {
                if s.cfg.oversubscribed {
                    s.block()?;
                } else {
                    s.t.idle(Idle::EmptyPoll)?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn timeout_error(&self, s: &Shared, req: ReqId) -> TransportError {
        let (peer, what) = self.wait_what(s, req);
        s.timeout(peer, what)
    }

    /// The peer `req` waits on and the wait in words, for a timeout or a
    /// stall report.
    fn wait_what(&self, s: &Shared, req: ReqId) -> (Option<crate::Rank>, String) {
        let peer = self.eng.request_info(req).and_then(|i| i.1);
        (peer, format!("rank {}: {}", s.rank, self.eng.describe(req)))
    }
}
