//! The user's requests: the id counter, the state of requests in
//! progress, and the statuses of those that finished as they were posted
//! (a one-packet eager send, a receive its message landed in whole)
//! until the user takes them.

use crate::idmap::IdMap;
use crate::state::Req;
use crate::Status;

/// Ids at or above this come from the fast path (`fast_id`), never from
/// the counter.
pub(crate) const FAST_ID: u64 = 1 << 62;

/// The id of the fast-path send numbered `seq` to `peer`: unique while
/// it is outstanding (a pair's numbers wrap only after 2^32 messages),
/// and made from values the send has anyway, so the fast path issues no
/// id of its own.
#[inline(always)]
pub(crate) fn fast_id(peer: u32, seq: u32) -> u64 {
    FAST_ID | u64::from(peer) << 32 | u64::from(seq)
}

/// Every request not yet taken by the user.
#[derive(Debug)]
pub(crate) struct Requests {
    next_id: u64,
    live: IdMap<Req>,
    /// Finished as posted and not taken, but for the latest, which waits
    /// in `last_id`/`last` (a blocking call takes it at once; the table's
    /// insert and remove of a just-built status stalled on store
    /// forwarding).
    finished: IdMap<Status>,
    /// The latest request finished as posted (0: none).
    last_id: u64,
    last: Status,
}

impl Default for Requests {
    fn default() -> Requests {
        Requests {
            next_id: 1,
            live: IdMap::default(),
            finished: IdMap::default(),
            last_id: 0,
            last: Status::default(),
        }
    }
}

impl Requests {
    /// A fresh id, for a request, an operation context or a registration
    /// token.
    #[inline]
    pub fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Keep `r`'s state under `id`.
    pub fn insert(&mut self, id: u64, r: Req) {
        self.live.insert(id, r);
    }

    /// The state of request `id`, if it has one.
    #[inline]
    pub fn get(&self, id: u64) -> Option<&Req> {
        self.live.get(&id)
    }

    /// The state of request `id` to change, if it has one.
    #[inline]
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Req> {
        self.live.get_mut(&id)
    }

    /// Forget request `id`'s state.
    pub fn remove(&mut self, id: u64) -> Option<Req> {
        self.live.remove(&id)
    }

    /// Request `id` finished as it was posted, with no request state:
    /// `st` waits for [`Self::take`].
    #[inline(always)]
    pub fn done_at_post(&mut self, id: u64, st: Status) {
        if self.last_id != 0 {
            self.finished.insert(self.last_id, self.last);
        }
        self.last_id = id;
        self.last = st;
    }

    /// Mark request `id` finished successfully (a no-op once it is).
    pub fn finish(&mut self, id: u64) {
        if let Some(r) = self.live.get_mut(&id) {
            r.finish();
        }
    }

    /// Forget `id` if the user retired it while its RDMA was in flight:
    /// that completion was its last use, and nobody will take it.
    pub fn drop_if_retired(&mut self, id: u64) {
        if self.live.get(&id).is_some_and(|r| r.retired()) {
            self.live.remove(&id);
        }
    }

    /// Retire `id` if it finished: its status. `None` while it is in
    /// progress (or unknown).
    #[inline(always)]
    pub fn take(&mut self, id: u64) -> Option<Status> {
        if id == self.last_id {
            self.last_id = 0;
            // Field by field, as `done_at_post` stored them: a copy of
            // the whole status loaded it in one 16-byte read across three
            // recent stores, a store-forwarding stall on every message.
            let l = &self.last;
            return Some(Status {
                source: l.source,
                tag: l.tag,
                len: l.len,
            });
        }
        // Nothing else kept (a ping-pong on the fast path keeps nothing):
        // a receive still posted is not done, said without a call.
        if self.live.is_empty() && self.finished.is_empty() {
            return None;
        }
        self.take_kept(id)
    }

    /// [`Self::take`] for any request but the latest finished-as-posted
    /// one: out of line, so the common case above stays small.
    #[inline(never)]
    fn take_kept(&mut self, id: u64) -> Option<Status> {
        if !self.finished.is_empty() {
            if let Some(st) = self.finished.remove(&id) {
                return Some(st);
            }
        }
        let r = self.live.get_mut(&id)?;
        let st = r.finished_status()?;
        if r.proto.inflight() > 0 {
            // Kept for the operations still in flight.
            r.retire();
        } else {
            // Dropped in its slot: moving the state out only to drop it
            // was a good part of retiring a receive.
            self.live.discard(&id);
        }
        Some(st)
    }

    /// Whether `id` is known and finished: `Some(true)` for one finished
    /// or done at post and not yet taken, `Some(false)` for one in
    /// progress, `None` for an id with neither (taken, or a posted
    /// receive nothing matched yet).
    pub fn done(&self, id: u64) -> Option<bool> {
        if let Some(r) = self.live.get(&id) {
            return Some(!r.pending());
        }
        (id == self.last_id || self.finished.get(&id).is_some()).then_some(true)
    }

    /// Requests not yet taken (for leak checks and shutdown).
    pub fn len(&self) -> usize {
        self.live.len() + self.finished.len() + usize::from(self.last_id != 0)
    }
}
