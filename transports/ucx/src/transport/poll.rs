//! One poll of the worker, over the transport's fields it needs: `poll`
//! with and without arrivals share it, and the former lends the caller's taker
//! the memory table meanwhile, which this borrow leaves untouched.

use ovbench_core::fabric::peer_watch::PeerWatch;
use ovbench_core::{Completion, TransportError};

use super::UcxTransport;
use crate::ffi::memory::Memory;
use crate::ffi::worker::Worker;
use crate::ops::Shared;

/// Most `ucp_worker_progress` calls in one poll.
const MAX_PROGRESS: usize = 64;

pub(super) struct PollParts<'a> {
    pub worker: &'a Worker,
    pub shared: &'a Shared,
    pub done: &'a mut Vec<Completion>,
    pub watch: &'a mut PeerWatch,
    pub gone: &'a mut Vec<bool>,
    pub recycled: &'a mut Vec<Vec<u8>>,
}

impl UcxTransport {
    /// The poll's fields, and beside them the memory table a lent taker
    /// places into.
    pub(super) fn poll_parts(&mut self) -> (PollParts<'_>, &Memory) {
        let p = PollParts {
            worker: &self.worker,
            shared: self.worker.shared(),
            done: &mut self.done,
            watch: &mut self.watch,
            gone: &mut self.gone,
            recycled: &mut self.recycled,
        };
        (p, &self.mem)
    }
}

impl PollParts<'_> {
    #[inline]
    pub fn poll(self, out: &mut Vec<Completion>) -> Result<usize, TransportError> {
        // Progress until idle, or until something is ready for the caller:
        // once a callback has queued a completion (or handed a message
        // over), a further call only finds the worker idle, and costs the
        // caller that much latency.
        if self.done.is_empty() {
            for _ in 0..MAX_PROGRESS {
                if !self.worker.progress() || self.shared.has_queued() {
                    break;
                }
            }
        }
        let shared = self.shared;
        self.watch.check(self.gone, |c| shared.push(c));
        let mut n = shared.drain(out, self.recycled);
        if !self.done.is_empty() {
            n += self.done.len();
            out.append(self.done);
        }
        Ok(n)
    }
}
