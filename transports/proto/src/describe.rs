//! What a request waits for, in words: the engine's part of a timeout
//! message.

use crate::engine::{Engine, Stage, Wire};
use crate::ReqId;

impl Engine {
    /// A sentence saying what `req` waits for, for timeout messages.
    pub fn describe(&self, req: ReqId) -> String {
        // A posted receive nothing matched has no state: described from
        // what it would be given.
        let unmatched = self.posted_receive(req).map(|p| p.request(Wire::Eager));
        let Some(r) = unmatched.as_ref().or_else(|| self.reqs.get(&req.0)) else {
            return format!("request {} (already retired)", req.0);
        };
        let who = match r.peer {
            Some(p) => format!("rank {p}"),
            None => "any rank".to_string(),
        };
        let tag = match r.tag {
            Some(t) => format!("tag {t}"),
            None => "any tag".to_string(),
        };
        let what = match (r.send, r.stage) {
            (false, Stage::Queued) => "no matching message has arrived".to_string(),
            (_, Stage::Eager) if r.send => "waiting for the synchronous-send acknowledgement".into(),
            (_, Stage::Eager) => format!("{} of {} bytes arrived", r.done_bytes, r.len),
            (true, Stage::Queued) => "waiting for the receiver's raw-buffer key".into(),
            (_, Stage::Registering) => "registering the buffer".into(),
            (_, Stage::WaitCts) => "RTS sent, waiting for CTS".into(),
            (_, Stage::WaitFin) => "waiting for FIN".into(),
            (_, Stage::Writing) => "RDMA write posted, waiting for its completion".into(),
            (_, Stage::Reading) => "RDMA read posted, waiting for its completion".into(),
            (_, Stage::Pipe) => format!(
                "pipelined: {} of {} bytes done (first fragment {})",
                r.done_bytes + r.first,
                r.len,
                r.first
            ),
            (_, Stage::RawWait) => format!(
                "raw write: waiting for marker {} in the last byte (both sides must use the same size)",
                r.marker
            ),
            (_, Stage::Done) => "finished".into(),
        };
        // A receive's protocol is known only once a message matched it.
        let proto = match (r.send, r.stage, r.wire) {
            (false, Stage::Queued, Wire::Eager) => String::new(),
            (_, _, w) => format!(", {}", wire_name(w)),
        };
        format!(
            "{} of {} bytes {} {who} ({tag}{proto}): {what}",
            if r.send { "send" } else { "receive" },
            if r.send { r.len } else { r.buf.len },
            if r.send { "to" } else { "from" },
        )
    }
}

/// The `--proto` spelling of a message's protocol, for messages.
fn wire_name(w: Wire) -> &'static str {
    match w {
        Wire::Eager => "eager",
        Wire::RdmaWrite => "rdma-write",
        Wire::RdmaRead => "rdma-read",
        Wire::Pipelined => "pipelined",
        Wire::RawSend => "raw send",
        Wire::RawWrite => "raw write",
        Wire::RawRead => "raw read",
    }
}
