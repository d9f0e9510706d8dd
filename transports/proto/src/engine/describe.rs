//! What a request waits for, in words: the engine's part of a timeout
//! message.

use super::Engine;
use crate::plan::Route;
use crate::state::{Proto, RawStage, ReadStage, Req, WriteStage};
use crate::{RawOp, ReqId};

impl Engine {
    /// A sentence saying what `req` waits for, for timeout messages.
    pub fn describe(&self, req: ReqId) -> String {
        // A posted receive nothing matched has no state: described from
        // what it would be given.
        let unmatched = self.matching.posted(req.0).map(|p| p.request());
        let Some(r) = unmatched.as_ref().or_else(|| self.reqs.get(req.0)) else {
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
        let what = if r.pending() {
            waits_for(r)
        } else {
            "finished".into()
        };
        // A receive's protocol is known only once a message matched it.
        let proto = match r.proto {
            Proto::Unmatched => String::new(),
            _ => format!(", {}", route_name(r.route())),
        };
        format!(
            "{} of {} bytes {} {who} ({tag}{proto}): {what}",
            if r.send { "send" } else { "receive" },
            if r.send { r.len } else { r.buf.len },
            if r.send { "to" } else { "from" },
        )
    }
}

/// What pending request `r` waits for, in words.
fn waits_for(r: &Req) -> String {
    let registering = || "registering the buffer".to_string();
    match &r.proto {
        Proto::Unmatched => "no matching message has arrived".into(),
        Proto::Eager(_) | Proto::RawSend if r.send => {
            "waiting for the synchronous-send acknowledgement".into()
        }
        Proto::Eager(e) => format!("{} of {} bytes arrived", e.arrived, r.len),
        // A raw send's receive is whole as it matches.
        Proto::RawSend => format!("{} of {} bytes arrived", r.len, r.len),
        Proto::RdmaWrite(s) => match s.stage() {
            WriteStage::WaitCts => "RTS sent, waiting for CTS".into(),
            WriteStage::Registering => registering(),
            WriteStage::WaitFin => "waiting for FIN".into(),
            WriteStage::Writing => "RDMA write posted, waiting for its completion".into(),
        },
        Proto::RdmaRead(s) => match s.stage() {
            ReadStage::Registering => registering(),
            ReadStage::WaitFin => "waiting for FIN".into(),
            ReadStage::Reading => "RDMA read posted, waiting for its completion".into(),
        },
        Proto::Pipelined(p) => format!(
            "pipelined: {} of {} bytes done (first fragment {})",
            p.done_bytes + p.first,
            r.len,
            p.first
        ),
        Proto::Raw(raw) => match raw.stage() {
            RawStage::Queued if r.send => "waiting for the receiver's raw-buffer key".into(),
            RawStage::Queued => "no matching message has arrived".into(),
            RawStage::Registering => registering(),
            RawStage::Writing => "RDMA write posted, waiting for its completion".into(),
            RawStage::Reading => "RDMA read posted, waiting for its completion".into(),
            RawStage::RawWait => format!(
                "raw write: waiting for marker {} in the last byte (both sides must use the same size)",
                raw.marker
            ),
        },
    }
}

/// The `--proto` spelling of a message's protocol, for messages.
fn route_name(r: Route) -> &'static str {
    match r {
        Route::Eager => "eager",
        Route::RdmaWrite => "rdma-write",
        Route::RdmaRead => "rdma-read",
        Route::Pipelined => "pipelined",
        Route::Raw(RawOp::Send) => "raw send",
        Route::Raw(RawOp::Write) => "raw write",
        Route::Raw(RawOp::Read) => "raw read",
    }
}
