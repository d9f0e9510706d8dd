//! Matching: the receives posted and not matched yet, the messages that
//! arrived before their receive (and the bytes they hold against the
//! cap), and the eager trains still arriving. MPI's rules hold here: a
//! message goes to the oldest posted receive that matches it, and a
//! receive to the oldest unexpected message that matches it, so messages
//! from one sender never overtake each other.

use std::collections::VecDeque;

use crate::hash::HashMap;
use crate::state::{Proto, Req};
use crate::wire::{Fixed, FLAG_INTERNAL};
use crate::{Key, ProtoError, Rank, Slice, Space, Tag};

/// The matching space a message's header flags put it in.
pub(crate) fn space_of(flags: u8) -> Space {
    if flags & FLAG_INTERNAL != 0 {
        Space::Internal
    } else {
        Space::User
    }
}

/// A posted receive nothing has matched yet: all there is of it (its
/// request state is made when a message matches, and an eager message
/// that lands whole needs none). The selectors are plain words with
/// "any" bits rather than `Option`s: an `Option<u32>` spilled as two
/// 4-byte halves and read back as one 8-byte word stalled store
/// forwarding on every posted receive (`perf annotate` of `engine_cost`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Posted {
    pub id: u64,
    peer: Rank,
    tag: Tag,
    any: u8,
    space: Space,
    pub buf: Slice,
}

const ANY_PEER: u8 = 1;
const ANY_TAG: u8 = 2;

impl Posted {
    pub fn new(id: u64, peer: Option<Rank>, tag: Option<Tag>, space: Space, buf: Slice) -> Posted {
        let any =
            if peer.is_none() { ANY_PEER } else { 0 } | if tag.is_none() { ANY_TAG } else { 0 };
        Posted {
            id,
            peer: peer.unwrap_or(0),
            tag: tag.unwrap_or(0),
            any,
            space,
            buf,
        }
    }

    #[inline(always)]
    fn matches(&self, peer: Rank, tag: Tag, space: Space) -> bool {
        self.space == space
            && (self.any & ANY_PEER != 0 || self.peer == peer)
            && (self.any & ANY_TAG != 0 || self.tag == tag)
    }

    /// The source selector (`None`: any rank).
    pub fn peer(&self) -> Option<Rank> {
        (self.any & ANY_PEER == 0).then_some(self.peer)
    }

    /// The tag selector (`None`: any tag).
    pub fn tag(&self) -> Option<Tag> {
        (self.any & ANY_TAG == 0).then_some(self.tag)
    }

    /// Its request state, for a receive that needs one: not matched yet.
    pub fn request(&self) -> Req {
        Req::new(false, self.peer(), self.tag(), self.buf, Proto::Unmatched)
    }
}

/// A message that arrived before its receive: what its first packet
/// said, kept to be accepted as it would have been on arrival.
#[derive(Debug)]
pub(crate) struct Unexp {
    pub uid: u64,
    pub peer: Rank,
    /// The first packet's fixed header (its flags give the matching space).
    pub head: Fixed,
    pub key: Option<Key>,
    /// Eager bytes buffered so far (eager, raw send, pipelined first fragment).
    pub data: Vec<u8>,
}

/// Where a message in flight towards us is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum In {
    /// By a request (its id).
    Req(u64),
    /// By an unexpected message (its uid).
    Unexp(u64),
    /// By nobody: a train whose receive was too small; the rest of its
    /// packets are dropped.
    Dropped,
}

/// The receiving side's queues.
#[derive(Debug)]
pub(crate) struct Matching {
    /// The oldest posted receive, kept out of the queue: a ping-pong has
    /// one receive posted at a time, and a slot costs a third of the
    /// queue's index arithmetic.
    oldest: Option<Posted>,
    /// The posted receives after `oldest`, in posting order.
    posted: VecDeque<Posted>,
    unexpected: VecDeque<Unexp>,
    unexpected_bytes: usize,
    max_unexpected_bytes: usize,
    /// Messages whose later packets or FIN are still to come, by
    /// (sender, sequence number).
    incoming: HashMap<(Rank, u32), In>,
}

impl Matching {
    /// Empty queues, buffering at most `max_unexpected_bytes` of
    /// unexpected messages.
    pub fn new(max_unexpected_bytes: usize) -> Matching {
        Matching {
            oldest: None,
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            unexpected_bytes: 0,
            max_unexpected_bytes,
            incoming: HashMap::default(),
        }
    }

    /// The oldest unexpected message `p` matches, taken off the queue.
    #[inline]
    pub fn take_unexpected(&mut self, p: &Posted) -> Option<Unexp> {
        if self.unexpected.is_empty() {
            return None;
        }
        let i = self
            .unexpected
            .iter()
            .position(|u| p.matches(u.peer, u.head.tag, space_of(u.head.flags)))?;
        let u = self.unexpected.remove(i)?;
        self.unexpected_bytes -= u.data.len();
        Some(u)
    }

    /// Whether no message waits for a receive.
    #[inline(always)]
    pub fn nothing_unexpected(&self) -> bool {
        self.unexpected.is_empty()
    }

    /// Queue `p` behind the receives already posted.
    #[inline(always)]
    pub fn post(&mut self, p: Posted) {
        if self.oldest.is_none() {
            // Nothing is posted: the queue behind the slot is empty too.
            self.oldest = Some(p);
        } else {
            self.posted.push_back(p);
        }
    }

    /// The oldest posted receive, if it takes a user message from `peer`
    /// with `tag` of `len` bytes, taken off the queue: the fast path's
    /// match (anything else goes to [`Self::take_posted`]).
    #[inline(always)]
    pub fn take_front(&mut self, peer: Rank, tag: Tag, len: usize) -> Option<Posted> {
        let p = self.oldest.as_ref()?;
        if !(p.matches(peer, tag, Space::User) && len <= p.buf.len) {
            return None;
        }
        let next = if self.posted.is_empty() {
            None
        } else {
            self.posted.pop_front()
        };
        std::mem::replace(&mut self.oldest, next)
    }

    /// The oldest posted receive matching a message from `peer` with
    /// `tag` in `space`, taken off the queue.
    pub fn take_posted(&mut self, peer: Rank, tag: Tag, space: Space) -> Option<Posted> {
        let oldest = self.oldest.as_ref()?;
        if oldest.matches(peer, tag, space) {
            let next = self.posted.pop_front();
            return std::mem::replace(&mut self.oldest, next);
        }
        let i = self
            .posted
            .iter()
            .position(|p| p.matches(peer, tag, space))?;
        self.posted.remove(i)
    }

    /// Posted receive `id`, if nothing has matched it yet.
    pub fn posted(&self, id: u64) -> Option<&Posted> {
        self.oldest
            .iter()
            .chain(self.posted.iter())
            .find(|p| p.id == id)
    }

    /// Posted receives nothing matched yet.
    pub fn posted_len(&self) -> usize {
        usize::from(self.oldest.is_some()) + self.posted.len()
    }

    /// Refused when `n` more bytes would take the unexpected messages
    /// from `peer` and the others over the cap.
    pub fn room_for(&self, peer: Rank, n: usize) -> Result<(), ProtoError> {
        if self.unexpected_bytes + n > self.max_unexpected_bytes {
            return Err(ProtoError::bad(
                peer,
                format!(
                    "{} bytes of unexpected messages are buffered and {n} more arrived, over the {}-byte cap: the program sends far ahead of its receives",
                    self.unexpected_bytes, self.max_unexpected_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Keep message `u` until a receive matches it (its bytes checked
    /// against the cap with [`Self::room_for`] first).
    pub fn keep_unexpected(&mut self, u: Unexp) {
        self.unexpected_bytes += u.data.len();
        self.unexpected.push_back(u);
    }

    /// Append `bytes` of a later packet to unexpected message `uid`
    /// (`offset`: where the packet says they go, `len`: the message's
    /// length it says); true once the message is whole.
    pub fn grow_unexpected(
        &mut self,
        peer: Rank,
        uid: u64,
        seq: u32,
        (offset, len): (u64, u64),
        bytes: &[u8],
    ) -> Result<bool, ProtoError> {
        self.room_for(peer, bytes.len())?;
        let Some(u) = self.unexpected.iter_mut().find(|u| u.uid == uid) else {
            return Err(ProtoError::Invalid(format!(
                "internal: unexpected message {uid} vanished while its packets were arriving"
            )));
        };
        if len != u.head.len || offset != u.data.len() as u64 {
            return Err(ProtoError::bad(
                peer,
                format!(
                    "eager packet (offset {offset}, len {len}) does not continue message {seq} ({} of {} bytes so far)",
                    u.data.len(),
                    u.head.len
                ),
            ));
        }
        u.data.extend_from_slice(bytes);
        self.unexpected_bytes += bytes.len();
        Ok(u.data.len() as u64 == u.head.len)
    }

    /// Message `seq` from `peer` has more to come, handled by `at`.
    pub fn expect_more(&mut self, peer: Rank, seq: u32, at: In) {
        self.incoming.insert((peer, seq), at);
    }

    /// Who handles the rest of message `seq` from `peer`.
    pub fn more_of(&self, peer: Rank, seq: u32) -> Option<In> {
        self.incoming.get(&(peer, seq)).copied()
    }

    /// Message `seq` from `peer` has nothing more to come.
    #[inline]
    pub fn no_more(&mut self, peer: Rank, seq: u32) {
        // (A hash lookup per message only while trains are in flight.)
        if !self.incoming.is_empty() {
            self.incoming.remove(&(peer, seq));
        }
    }
}
