//! The communicator, [`Comm`]: layer 3, over layer 1's
//! [`crate::Transport`]. Its messages take one of two paths: ovbench's
//! own protocols, run by layer 2's protocol engine over the transport
//! ([`Comm::engine`]), or a library's native tagged protocol
//! ([`Comm::native`]).
//!
//! Either way it owns a connected [`Transport`], the communicator's
//! [`Clock`] and [`Work`] loop; every wait honours
//! [`EngineConfig::timeout`] and a timeout names the rank, the peer, the
//! operation and the size.

mod api;
mod args;
mod barrier;
mod config;
mod drive;
mod engine;
mod library_path;
mod native;
mod shared;

use std::sync::Arc;

pub use config::{
    native_unavailable, prefers_read, protocols_but, EngineConfig, EngineShape, Plan, Protocol,
    RawOp, Route, DEFAULT_EAGER_LIMIT, DEFAULT_FRAG_SIZE, PROTOCOLS,
};
pub use ovbench_proto::QUIET_CTX;

use crate::{Clock, Link, Result, Transport, Work};
use engine::EngineState;
use native::NativeState;
use shared::Shared;

/// The point-to-point API over a transport, by the engine's protocols or
/// the library's native one.
pub struct Comm {
    s: Shared,
    /// The protocol engine: the engine path's, and on the native path the
    /// runner of the bare operations that time xfer_time.
    e: EngineState,
    path: Path,
}

/// Which path a communicator's messages take.
enum Path {
    Engine,
    Native(NativeState),
}

/// The path the next operation takes, with the shared state borrowed
/// beside it.
enum On<'a> {
    Engine(&'a mut EngineState),
    Native(&'a mut NativeState),
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.s.rank)
            .field("size", &self.s.size)
            .field("transport", &self.s.info.name)
            .field("native", &matches!(self.path, Path::Native(_)))
            .field("cfg", &self.s.cfg)
            .finish()
    }
}

impl Comm {
    /// A communicator running ovbench's protocol engine over an already
    /// connected `transport`.
    pub fn engine(
        transport: Box<dyn Transport>,
        clock: Arc<dyn Clock>,
        work: Box<dyn Work>,
        cfg: EngineConfig,
    ) -> Result<Comm> {
        let s = Shared::new(Link::Plain(transport), clock, work, cfg);
        let e = EngineState::new(&s)?;
        Ok(Comm {
            s,
            e,
            path: Path::Engine,
        })
    }

    /// A communicator over a connected `transport`'s native tagged
    /// protocol; an error naming the valid protocols where the transport
    /// has none. Given as [`Link::Tagged`] (a `Box<dyn Tagged>`), its
    /// messages reach the tagged calls with no query per call.
    pub fn native(
        transport: impl Into<Link>,
        clock: Arc<dyn Clock>,
        work: Box<dyn Work>,
        cfg: EngineConfig,
    ) -> Result<Comm> {
        let mut s = Shared::new(transport.into(), clock, work, cfg);
        let n = NativeState::new(&mut s)?;
        let e = EngineState::new(&s)?;
        Ok(Comm {
            s,
            e,
            path: Path::Native(n),
        })
    }

    /// The transport underneath (for transport-specific reporting).
    pub fn transport(&self) -> &dyn Transport {
        &*self.s.t
    }

    /// Requests not yet retired (should be 0 between iterations).
    pub fn in_flight(&self) -> usize {
        let native = match &self.path {
            Path::Native(n) => n.in_flight(),
            Path::Engine => 0,
        };
        self.e.eng.in_flight() + native
    }

    /// Where the next operation goes: the native path unless it runs
    /// bare operations for now, else the engine.
    #[inline]
    fn on(&mut self) -> (&mut Shared, On<'_>) {
        let on = match &mut self.path {
            Path::Native(n) if !n.bare => On::Native(n),
            _ => On::Engine(&mut self.e),
        };
        (&mut self.s, on)
    }

    /// Run `f` as one communicator call (one CALL_ENTER/CALL_EXIT pair),
    /// given the tick of its entry (0 when not instrumenting).
    #[inline]
    fn call<T>(&mut self, f: impl FnOnce(&mut Self, u64) -> T) -> T {
        let at = self.s.call_enter();
        let r = f(self, at);
        self.s.call_exit();
        r
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // Give cached registrations back; errors at teardown change nothing.
        self.e.eng.flush_cache();
        let _ = self.e.exec_ops(&mut self.s);
    }
}
