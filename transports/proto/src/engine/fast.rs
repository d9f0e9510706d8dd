//! The fast path: a user's one-packet eager message in standard or
//! buffered mode, while nothing is recorded. Its send takes a sequence
//! number and writes the short header, and is done as posted: no id
//! issued (its request and context are made of its peer and sequence
//! number), no request state, no context entry, nothing queued. Its
//! arrival, in order and for the oldest posted receive, is accepted by
//! one compare of the header and placed with no request state either.
//! Everything else, and every malformed packet, goes the general way,
//! which decodes the short header field by field.

use super::{Engine, Outgoing, QUIET_CTX};
use crate::requests::fast_id;
use crate::wire::short::{self, SHORT_LEN};
use crate::{Direct, Mode, Placement, Rank, ReqId, Slice, Space, Status, Tag};

impl Engine {
    /// A send of `src` (inside `whole`) to `peer` that leaves as one
    /// short packet and waits for nothing back: its header written into
    /// `header`, for the caller to post at once with `src` after it, and
    /// its request, done as posted. `None`, with nothing changed, for any
    /// other send (bad ones included): use [`Self::isend_in`]. The caller
    /// reports the packet's completion with the context it gets, as for
    /// any other.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn isend_direct(
        &mut self,
        src: Slice,
        whole: Slice,
        peer: Rank,
        tag: Tag,
        mode: Mode,
        space: Space,
        header: &mut [u8; SHORT_LEN],
    ) -> Option<Direct> {
        let d = self.fast_send(Outgoing::new(src, whole, peer, tag, mode, space))?;
        // The fast path's lengths are below 2^32.
        short::encode(header, d.ctx as u32, tag, src.len as u32);
        Some(d)
    }

    /// The fast send's bookkeeping, for [`Self::isend_direct`] and the
    /// queued [`Self::isend_in`]: its sequence number taken, its status
    /// kept, its counts; its request and context (which carries the peer
    /// and the sequence number) handed back.
    #[inline(always)]
    pub(super) fn fast_send(&mut self, o: Outgoing) -> Option<Direct> {
        let (src, peer, tag) = (o.src, o.peer, o.tag);
        // Synchronous and ready sends carry flags; internal traffic too.
        let plain = matches!(o.mode, Mode::Standard | Mode::Buffered) && o.space == Space::User;
        if src.len >= self.fast.send_below
            || !plain
            || peer >= self.cfg.size
            || !o.whole.contains(&src)
            || !self.out.is_empty()
        {
            return None;
        }
        let seq = self.peers.next_send(peer);
        let id = fast_id(peer, seq);
        self.reqs.done_at_post(
            id,
            Status {
                source: peer,
                tag,
                len: src.len,
            },
        );
        let c = self.out.counts_mut();
        c.fast_sends += 1;
        c.bytes += src.len as u64;
        Some(Direct {
            req: ReqId(id),
            ctx: QUIET_CTX | id,
        })
    }

    /// The fast arrival: `Some` with its placement when `bytes` from
    /// `peer` is the short packet that pair's order expects next and the
    /// oldest posted receive takes it; `None`, with nothing changed, for
    /// everything else.
    #[inline(always)]
    pub(super) fn arrive_short(&mut self, peer: Rank, bytes: &[u8]) -> Option<Option<Placement>> {
        if !self.fast.recv || peer >= self.cfg.size {
            return None;
        }
        let seqs = self.peers.of(peer);
        let (tag, len) = short::check(bytes, seqs.recv)?;
        let p = self.matching.take_front(peer, tag, len)?;
        seqs.recv = seqs.recv.wrapping_add(1);
        self.reqs.done_at_post(
            p.id,
            Status {
                source: peer,
                tag,
                len,
            },
        );
        self.out.counts_mut().fast_recvs += 1;
        Some((len > 0).then_some(Placement {
            dst: Slice::new(p.buf.region, p.buf.offset, len),
            src_start: SHORT_LEN,
        }))
    }
}
