//! ovbench's TCP transport (docs/architecture.md § Layers).
//!
//! One nonblocking, `TCP_NODELAY` connection per peer pair. Two-sided
//! messages are framed and copied; one-sided write and read are emulated
//! by request frames that the target's progress engine serves after
//! checking the remote key — so this is the "no offload" machine of the
//! overlap paper. Progress comes from busy polling in [`Transport::poll`](ovbench_core::Transport::poll)
//! (`Progress::Poll`) or additionally from a thread that sleeps in epoll
//! (`Progress::Thread`), so that peers' reads and writes are served while
//! the application computes.
//!
//! ```
//! use ovbench_conformance::connect_all; // a test helper (dev-dependency)
//! use ovbench_core::{Completion, Msg, Transport};
//! use ovbench_tcp::{TcpOptions, TcpTransport};
//!
//! // Two ranks in one process; across processes, exchange `address()`
//! // through the bootstrap service and call `connect` on each rank.
//! let mut ts: Vec<Box<dyn Transport>> = (0..2)
//!     .map(|r| Box::new(TcpTransport::new(r, 2, TcpOptions::default()).unwrap()) as _)
//!     .collect();
//! connect_all(&mut ts).unwrap();
//! ts[0].post_send(1, Msg::new(b"hello", None), 7).unwrap();
//! let mut out = Vec::new();
//! let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
//! while !out.iter().any(|c| matches!(c, Completion::Recv { .. })) {
//!     ts[0].poll(&mut out, None).unwrap(); // the send leaves
//!     ts[1].poll(&mut out, None).unwrap(); // the message arrives
//!     assert!(std::time::Instant::now() < end, "no message within 10 s");
//! }
//! ```

mod engine;
#[cfg(feature = "fault-inject")]
mod fault;
mod loopback;
mod memory;
mod mesh;
mod rx;
#[cfg(feature = "fault-inject")]
mod stall;
mod thread;
mod transport;
mod tx;
mod wire;

pub use transport::{TcpOptions, TcpTransport};
