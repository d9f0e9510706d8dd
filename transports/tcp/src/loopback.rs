//! Operations addressed to this rank itself: no socket, the same checks.
//!
//! MPI programs send to themselves (a partner distance of 0, a root in a
//! broadcast loop); a loopback message completes at once, and a loopback
//! write or read resolves its key exactly as a peer's request would, so a
//! stale or forged key is refused here too.

use ovbench_core::{Completion, Ctx, LocalSlice, OpKind};

use crate::engine::{Engine, Pending};
use crate::rx::refused;

impl Engine {
    /// A message to this rank: sent and received at once.
    pub fn loop_send(&mut self, data: Vec<u8>, ctx: Ctx) {
        self.done.push_back(Completion::Send { ctx });
        self.done.push_back(Completion::Recv {
            peer: self.me,
            data,
        });
    }

    /// A write (local → registration) or read (registration → local) on
    /// this rank's own memory.
    pub fn loop_rma(&mut self, q: Pending, reg: u32, check: u64) {
        let target = match self
            .mem
            .resolve(reg, check, q.remote_offset, q.local.len as u64)
        {
            Ok(s) => s,
            Err(r) => {
                self.done.push_back(refused(self.me, &q, r as u32));
                return;
            }
        };
        let (from, to): (LocalSlice, LocalSlice) = if q.op == OpKind::Write {
            (q.local, target)
        } else {
            (target, q.local)
        };
        // The two ranges may overlap in one region: copy through a buffer.
        let bytes = match self.mem.slice(from) {
            Ok(b) => b.to_vec(),
            Err(e) => return self.loop_failed(q, e.to_string()),
        };
        match self.mem.slice_mut(to) {
            Ok(b) => b.copy_from_slice(&bytes),
            Err(e) => return self.loop_failed(q, e.to_string()),
        }
        self.done.push_back(if q.op == OpKind::Write {
            Completion::Write { ctx: q.ctx }
        } else {
            Completion::Read { ctx: q.ctx }
        });
    }

    fn loop_failed(&mut self, q: Pending, why: String) {
        self.done.push_back(Completion::Error {
            ctx: Some(q.ctx),
            peer: self.me,
            op: q.op,
            status: format!(
                "{} of {} bytes on rank {} itself: {why}",
                q.op, q.local.len, self.me
            ),
        });
    }
}
