//! `--proto native`: the library's own tagged protocol
//! ([`crate::Tagged::tsend`]/[`crate::Tagged::trecv`]: UCX tag,
//! libfabric tagged, MPI point-to-point). Its transfers are
//! call-bounded: XFER_BEGIN at the entry of the posting call, XFER_END
//! at the exit of the completing call (case 3 of the paper for the
//! minimum overlap).
//!
//! The barrier uses tags from [`NATIVE_BARRIER_TAG`] up: the library's
//! matching has no separate space, so a user receive with `ANY_TAG`
//! must not be pending across a barrier on this path.

use std::time::Instant;

use ovbench_proto::IdMap;

use super::args::{RecvArgs, SendArgs};
use super::engine::range;
use super::shared::{Shared, CHECK_EVERY, SPIN_BEFORE_BLOCK};
use crate::{
    Completion, LocalSlice, OpKind, Posted, Rank, Req, Result, SendMode, Source, Span, Status, Tag,
    TagRecv, TagSel, TagSend, Tagged, TransportError, Waited,
};

/// First tag the native barrier uses (user tags must stay below it).
pub(crate) const NATIVE_BARRIER_TAG: Tag = 0xFFFF_0000;

#[derive(Debug)]
pub(super) struct NReq {
    pub(super) send: bool,
    pub(super) peer: Option<Rank>,
    pub(super) tag: Option<Tag>,
    pub(super) len: usize,
    pub(super) done: Option<Status>,
    /// The XFER id recorded at posting, when instrumenting.
    pub(super) xfer: Option<u64>,
}

/// `span` as the transport's slice, after checking it lies in its buffer.
#[inline(always)]
pub(super) fn local(span: Span, what: &str) -> Result<LocalSlice> {
    let s = range(span, what)?;
    Ok(LocalSlice::new(span.buf.region, s.offset, s.len))
}

/// The request of a send to `dst` of `len` bytes with `tag`; `done` when
/// the library finished it inside the posting call.
pub(super) fn send_req(dst: Rank, tag: Tag, len: usize, done: bool) -> NReq {
    NReq {
        send: true,
        peer: Some(dst),
        tag: Some(tag),
        len,
        done: done.then_some(Status {
            source: dst,
            tag,
            len,
        }),
        xfer: None,
    }
}

/// The transport's tagged protocol (checked present at construction).
#[inline]
pub(super) fn tagged(s: &mut Shared) -> Result<&mut dyn Tagged> {
    match s.t.tagged() {
        Some(t) => Ok(t),
        None => Err(TransportError::Invalid(
            "the transport's tagged protocol went away".into(),
        )),
    }
}

/// The native path's requests and counts.
///
/// Its per-message steps are `inline(always)`: each communicator call is
/// then one frame over the library's, as before this state was split from
/// the communicator; as separate frames they cost about 140 instructions
/// a message over libfabric shm (`ci/bench/instructions`).
#[derive(Default)]
pub(crate) struct NativeState {
    /// Messages run as the engine's bare operations for now
    /// ([`crate::Communicator::set_bare_op`]).
    pub(crate) bare: bool,
    /// The transport offers the library's own calls
    /// ([`crate::Tagged::library`]): each communicator call is the
    /// library call of its name (`super::library_path`).
    pub(super) lib: bool,
    pub(super) next: u64,
    /// Requests by id: ids only increase, so the engine's direct-slot
    /// table beats a hash map (SipHash was ~15% of a shared-memory
    /// round trip).
    pub(super) reqs: IdMap<NReq>,
    /// Tagged sends posted and the bytes they carried.
    pub(crate) sends: u64,
    pub(crate) bytes: u64,
}

impl NativeState {
    /// The native path over `s`'s transport; an error naming the valid
    /// protocols where the transport has no tagged path.
    pub(crate) fn new(s: &mut Shared) -> Result<NativeState> {
        let Some(t) = s.t.tagged() else {
            return Err(TransportError::Unsupported(super::native_unavailable(
                &s.info.name,
            )));
        };
        let lib = t.library().is_some();
        Ok(NativeState {
            lib,
            next: 1,
            ..NativeState::default()
        })
    }

    /// Requests posted and not yet retired.
    pub(crate) fn in_flight(&self) -> usize {
        self.reqs.len()
    }

    /// A blocking send while nothing is recorded: a send the library
    /// finishes inside the call is over, with no request to track and
    /// retire. That bookkeeping sat between a ping-pong's send and its
    /// next receive's posting, late enough on shared memory for the reply
    /// to arrive unexpected.
    #[inline(always)]
    pub(crate) fn send_now(&mut self, s: &mut Shared, a: SendArgs) -> Result<()> {
        let ls = local(a.span, "send")?;
        let (id, sent) = self.post_tsend(s, TagSend::new(a.peer, a.tag, ls, false))?;
        if sent {
            return Ok(());
        }
        // In flight: tracked and waited for as any send.
        let id = self.track(s, id, send_req(a.peer, a.tag, a.span.len, false), 0);
        self.wait_id(s, id).map(|_| ())
    }

    /// A blocking receive while nothing is recorded: with nothing else in
    /// flight the transport may wait for the message itself
    /// (`trecv_wait`); `None` where it cannot, for the general path.
    #[inline]
    pub(crate) fn recv_now(&mut self, s: &mut Shared, a: RecvArgs) -> Option<Result<Status>> {
        if !self.reqs.is_empty() || s.cfg.oversubscribed {
            return None;
        }
        if let Err(e) = crate::stop::check() {
            return Some(Err(e));
        }
        let ls = match local(a.span, "receive") {
            Ok(ls) => ls,
            Err(e) => return Some(Err(e)),
        };
        let timeout = s.cfg.timeout;
        let waited = match tagged(s) {
            Ok(t) => t.trecv_wait(TagRecv::new(a.peer, a.tag, ls), timeout),
            Err(e) => Err(e),
        };
        match waited {
            Ok(Waited::Done { peer, tag, len }) => Some(Ok(Status {
                source: peer,
                tag,
                len,
            })),
            Ok(Waited::TimedOut) => Some(Err(recv_timeout(s, a.peer, a.tag, a.span.len))),
            Err(e) => Some(Err(e)),
        }
    }

    /// Start a send of `buf[off..off + len]`, its call entered at `at`.
    #[inline]
    pub(crate) fn isend(
        &mut self,
        s: &mut Shared,
        at: u64,
        a: SendArgs,
        mode: SendMode,
    ) -> Result<Req> {
        let ls = local(a.span, "send")?;
        if self.lib {
            return self.lib_isend(s, ls, a.peer, a.tag, mode, at).map(Req);
        }
        let sync = mode == SendMode::Synchronous;
        self.tsend(s, TagSend::new(a.peer, a.tag, ls, sync), at)
            .map(Req)
    }

    /// Start a receive into `buf[off..]`, its call entered at `at`.
    #[inline]
    pub(crate) fn irecv(&mut self, s: &mut Shared, at: u64, a: RecvArgs) -> Result<Req> {
        let ls = local(a.span, "receive")?;
        self.trecv(s, TagRecv::new(a.peer, a.tag, ls), at).map(Req)
    }

    #[inline]
    pub(crate) fn test(&mut self, s: &mut Shared, req: Req) -> Result<Option<Status>> {
        if let Some(st) = self.take(s, req.0) {
            return Ok(Some(st));
        }
        if self.lib {
            return self.lib_test(s, req.0);
        }
        self.poll_once(s)?;
        Ok(self.take(s, req.0))
    }

    /// Post a native send; its context and whether the library finished
    /// it inside the call.
    #[inline(always)]
    fn post_tsend(&mut self, s: &mut Shared, op: TagSend) -> Result<(u64, bool)> {
        if op.sync && !s.caps.native_sync_send {
            return Err(TransportError::Unsupported(format!(
                "the {} transport's native path has no synchronous send; use --proto eager (or another engine protocol) for ssend",
                s.info.name
            )));
        }
        let id = self.next;
        self.next += 1;
        // The native path stamps a send's XFER_END as its request retires
        // (see `take`), so the library's own time is not needed here.
        let sent = matches!(tagged(s)?.tsend(op, id)?, Posted::Done(_));
        self.sends += 1;
        self.bytes += op.src.len as u64;
        Ok((id, sent))
    }

    #[inline(always)]
    pub(crate) fn tsend(&mut self, s: &mut Shared, op: TagSend, at: u64) -> Result<u64> {
        let (id, sent) = self.post_tsend(s, op)?;
        // A send the library finished inside the call is done now: its
        // wait needs no poll (half the instructions of a blocking send).
        Ok(self.track(s, id, send_req(op.peer, op.tag, op.src.len, sent), at))
    }

    #[inline(always)]
    pub(crate) fn trecv(&mut self, s: &mut Shared, op: TagRecv, at: u64) -> Result<u64> {
        let id = self.next;
        self.next += 1;
        tagged(s)?.trecv(op, id)?;
        let r = NReq {
            send: false,
            peer: op.src,
            tag: op.tag,
            len: op.dst.len,
            done: None,
            xfer: None,
        };
        Ok(self.track(s, id, r, at))
    }

    /// Remember the just-posted operation `id`, stamping XFER_BEGIN at
    /// the posting call's entry `at` when instrumenting.
    #[inline(always)]
    pub(super) fn track(&mut self, s: &mut Shared, id: u64, mut r: NReq, at: u64) -> u64 {
        r.xfer = s.instr.as_mut().map(|i| {
            i.xfer_begin(id, r.len as u64, at, true);
            id
        });
        self.reqs.insert(id, r);
        id
    }

    #[inline(always)]
    pub(crate) fn poll_once(&mut self, s: &mut Shared) -> Result<bool> {
        // Polled straight into `s.comps`, taken out only when something
        // came (see the engine path's poll_once).
        let r = s.t.poll(&mut s.comps, None);
        if s.comps.is_empty() {
            return r.map(|_| false);
        }
        let mut comps = std::mem::take(&mut s.comps);
        let mut res = r.map(|_| ());
        for c in comps.drain(..) {
            if res.is_err() {
                break;
            }
            res = match c {
                Completion::TaggedSend { ctx } => self.complete(ctx, None),
                Completion::TaggedRecv { ctx, peer, tag, len } => self.complete(ctx, Some((peer, tag, len))),
                Completion::Error { peer, op, status, .. } => Err(TransportError::Peer { peer, op, status }),
                Completion::Recv { peer, data } => {
                    s.t.recycle(data);
                    Err(TransportError::Peer {
                        peer,
                        op: OpKind::Recv,
                        status: "an engine message arrived on the native path: every rank must use the same --proto".into(),
                    })
                }
                other => Err(TransportError::Invalid(format!(
                    "the native path posts only tagged operations, but the transport completed {other:?}"
                ))),
            };
        }
        comps.clear();
        s.comps = comps;
        res.map(|_| true)
    }

    #[inline(always)]
    pub(super) fn complete(&mut self, ctx: u64, env: Option<(Rank, Tag, usize)>) -> Result<()> {
        let Some(r) = self.reqs.get_mut(&ctx) else {
            return Err(TransportError::Invalid(format!(
                "the transport completed tagged operation {ctx}, which was never posted"
            )));
        };
        let st = match env {
            Some((peer, tag, len)) => Status {
                source: peer,
                tag,
                len,
            },
            None => Status {
                source: r.peer.unwrap_or(0),
                tag: r.tag.unwrap_or(0),
                len: r.len,
            },
        };
        r.done = Some(st);
        Ok(())
    }

    /// Retire `id` if done, stamping XFER_END (at the completing call's exit, as near as we can).
    #[inline(always)]
    pub(super) fn take(&mut self, s: &mut Shared, id: u64) -> Option<Status> {
        self.reqs.get(&id)?.done?;
        let r = self.reqs.remove(&id)?;
        let st = r.done?;
        if let (Some(i), Some(x)) = (s.instr.as_mut(), r.xfer) {
            i.xfer_end(x, r.len as u64, s.clock.ticks());
        }
        Some(st)
    }

    pub(crate) fn wait_id(&mut self, s: &mut Shared, id: u64) -> Result<Status> {
        // A stop, once per wait as well (see the engine path's wait_req).
        crate::stop::check()?;
        // The deadline's clock starts at the first check, CHECK_EVERY polls
        // in (as in the engine path's wait): most waits end before it, and
        // reading the clock costs more than a poll of a shared-memory link.
        let mut start: Option<Instant> = None;
        let mut spins = 0u32;
        let mut idle = 0u32;
        if let Some(st) = self.take(s, id) {
            return Ok(st);
        }
        if self.lib {
            return self.lib_wait(s, id);
        }
        loop {
            spins = spins.wrapping_add(1);
            let what = || match self.timeout_error(s, id) {
                TransportError::Timeout { peer, what, .. } => (peer, what),
                other => (None, other.to_string()),
            };
            if spins % CHECK_EVERY == 0
                && crate::watch::check_wait(&mut start, s.cfg.timeout, what)?
            {
                return Err(self.timeout_error(s, id));
            }
            // Only a poll that returned completions can have finished `id`.
            if self.poll_once(s)? {
                if let Some(st) = self.take(s, id) {
                    return Ok(st);
                }
                idle = 0;
            } else {
                // No `spin_loop()` (PAUSE) on a rank with a core of its own:
                // on this EPYC it was over half the cycles of a
                // shared-memory ping-pong and up to one PAUSE late on every
                // arrival; ucx_perftest and fi_pingpong poll without it.
                idle = idle.saturating_add(1);
                if s.cfg.oversubscribed {
                    if idle > SPIN_BEFORE_BLOCK {
                        s.block()?;
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
    }

    fn timeout_error(&self, s: &Shared, id: u64) -> TransportError {
        let Some(r) = self.reqs.get(&id) else {
            return TransportError::Invalid(format!("request {id} is not pending"));
        };
        let who = r
            .peer
            .map_or("any rank".to_string(), |p| format!("rank {p}"));
        let what = format!(
            "rank {}: native {} of {} bytes {} {who} (tag {})",
            s.rank,
            if r.send { "send" } else { "receive" },
            r.len,
            if r.send { "to" } else { "from" },
            r.tag.map_or("any".to_string(), |t| t.to_string())
        );
        s.timeout(r.peer, what)
    }
}

/// The timeout of a blocking receive the transport waited for.
#[cold]
fn recv_timeout(s: &Shared, src: Source, tag: TagSel, len: usize) -> TransportError {
    let who = src.map_or("any rank".to_string(), |p| format!("rank {p}"));
    let what = format!(
        "rank {}: native receive of {len} bytes from {who} (tag {})",
        s.rank,
        tag.map_or("any".to_string(), |t| t.to_string())
    );
    s.timeout(src, what)
}
