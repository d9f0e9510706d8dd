//! The two sends, the engine's message and the library's tagged send,
//! each saying whether it finished inside the call: an injected message
//! is copied at once and needs no completion from the queue
//! (`Posted::Done` from `Transport::post_send` and `Tagged::tsend`).

use ovbench_core::{Ctx, Msg, OpKind, Rank, TagSend, TransportError};
use ovbench_ofi_sys as sys;

use super::{Call, Endpoint, Post, Req, EAGAIN};
use crate::ops::{Kind, SRC_HDR};
use ovbench_core::fabric::wire_tag;

/// The largest message [`Endpoint::inject_staged`] assembles on the stack
/// (source header, protocol header and a small payload).
const STAGE: usize = 256;

impl Endpoint {
    /// The engine's message: source rank and per-peer sequence, then
    /// `header` and `payload`, injected when it fits (`fi_inject` copies at
    /// once: true, nothing queued), else sent from a staging buffer.
    pub(crate) fn send_msg(
        &mut self,
        peer: Rank,
        msg: Msg<'_>,
        ctx: Ctx,
    ) -> Result<bool, TransportError> {
        let dest = self.addr(peer, OpKind::Send)?;
        let total = SRC_HDR + msg.within(peer, self.eager_size() - SRC_HDR)?;
        if total <= STAGE && total <= self.fabric.attrs.inject_size && self.backlog.is_empty() {
            if let Some(done) = self.inject_staged(peer, dest, msg, total)? {
                return Ok(done);
            }
        }
        let Msg { header, payload } = msg;
        let mut buf = self.send_pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&self.rank.to_le_bytes());
        buf.extend_from_slice(&self.send_seq[peer as usize].to_le_bytes());
        buf.extend_from_slice(header);
        if let Some(p) = payload {
            match self.mem.slice(p) {
                Ok(b) => buf.extend_from_slice(b),
                Err(e) => {
                    self.recycle_send(buf);
                    return Err(e);
                }
            }
        }
        self.send_seq[peer as usize] = self.send_seq[peer as usize].wrapping_add(1);
        if total <= self.fabric.attrs.inject_size {
            // Fast path: inject copies the bytes at once; only a refused
            // inject keeps them (in the deferred post). After the staged
            // inject's EAGAIN this is a second try, and it is worth it:
            // shm often takes the message at once, while the deferred post
            // waits a poll (sending it straight to the backlog slowed the
            // own-eager round trip from ~565 to ~775 ns, comm_cost).
            if self.backlog.is_empty() {
                let rc = self.fabric.ep.inject(&buf, dest);
                if rc == 0 {
                    self.recycle_send(buf);
                    return Ok(true);
                }
                if rc != EAGAIN {
                    self.recycle_send(buf);
                    return Err(crate::error::peer(
                        peer,
                        OpKind::Send,
                        "fi_inject",
                        rc as i64,
                    ));
                }
            }
            let call = Call::Inject {
                buf,
                dest,
                ctx: Some(ctx),
            };
            return self
                .submit(Post::new(peer, OpKind::Send, "fi_inject", call))
                .map(|()| false);
        }
        let op = self.op(Kind::Send, ctx, peer, buf);
        self.submit(Post::new(
            peer,
            OpKind::Send,
            "fi_send",
            Req::Send { dest }.with(op),
        ))
        .map(|()| false)
    }

    /// A small message assembled on the stack and injected: no pooled
    /// buffer taken and given back, the common eager case. `Some(true)`
    /// once injected; `None` where the provider said EAGAIN, for the
    /// caller to queue it (the sequence number not yet spent).
    #[inline]
    fn inject_staged(
        &mut self,
        peer: Rank,
        dest: sys::fi_addr_t,
        msg: Msg<'_>,
        total: usize,
    ) -> Result<Option<bool>, TransportError> {
        let mut stage = [0u8; STAGE];
        let seq = self.send_seq[peer as usize];
        stage[..4].copy_from_slice(&self.rank.to_le_bytes());
        stage[4..SRC_HDR].copy_from_slice(&seq.to_le_bytes());
        let at = SRC_HDR + msg.header.len();
        stage[SRC_HDR..at].copy_from_slice(msg.header);
        if let Some(p) = msg.payload {
            stage[at..total].copy_from_slice(self.mem.slice(p)?);
        }
        let rc = self.fabric.ep.inject(&stage[..total], dest);
        if rc == EAGAIN {
            return Ok(None);
        }
        self.send_seq[peer as usize] = seq.wrapping_add(1);
        if rc != 0 {
            return Err(crate::error::peer(
                peer,
                OpKind::Send,
                "fi_inject",
                rc as i64,
            ));
        }
        Ok(Some(true))
    }

    /// The library's tagged send (`sync`: completion once matched, where
    /// the provider can say so), the source rank in the tag's upper half.
    /// A small standard send goes by `fi_tinject`: done at once (true,
    /// nothing queued), as fi_pingpong sends its small messages.
    pub(crate) fn tag_send(&mut self, op: TagSend, ctx: Ctx) -> Result<bool, TransportError> {
        let (peer, sync) = (op.peer, op.sync);
        let dest = self.addr(peer, OpKind::TaggedSend)?;
        // (Asked only for a synchronous send: it scans the provider name.)
        let sync_flag = match sync.then(|| self.sync_send_flag()) {
            None => 0,
            Some(Some(f)) => f,
            Some(None) => {
                return Err(TransportError::Unsupported(format!(
                    "provider {} offers no FI_MATCH_COMPLETE and its FI_DELIVERY_COMPLETE completes once the message sits in the target's unexpected buffer, so a synchronous native send (complete once matched) cannot be expressed; ssend rows are n/a on --transport ofi --proto native with this provider",
                    self.fabric.attrs.provider
                )));
            }
        };
        let utag = wire_tag::send_tag(self.rank, op.tag);
        if !sync && op.src.len <= self.fabric.attrs.inject_size && self.backlog.is_empty() {
            let rc = self.fabric.ep.tinject(self.mem.slice(op.src)?, dest, utag);
            if rc == 0 {
                return Ok(true);
            }
            if rc != EAGAIN {
                return Err(crate::error::peer(
                    peer,
                    OpKind::TaggedSend,
                    "fi_tinject",
                    rc as i64,
                ));
            }
            // EAGAIN: the ordinary send below waits in the backlog.
        }
        let src = self.mem.buf(op.src)?;
        let op = self.op(Kind::TaggedSend, ctx, peer, Vec::new());
        let (name, flags) = if sync {
            (
                "fi_tsendmsg (synchronous)",
                Some(u64::from(sys::FI_COMPLETION) | sync_flag),
            )
        } else {
            ("fi_tsend", None)
        };
        let req = Req::TSend {
            src,
            dest,
            tag: utag,
            flags,
        };
        let call = req.with(op);
        self.submit(Post::new(peer, OpKind::TaggedSend, name, call))
            .map(|()| false)
    }
}
