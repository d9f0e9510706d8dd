//! ovbench's TCP transport (DESIGN.md § Layers 1).
//!
//! One nonblocking, `TCP_NODELAY` connection per peer pair. Two-sided
//! messages are framed and copied; one-sided write and read are emulated
//! by request frames that the target's progress engine serves after
//! checking the remote key — so this is the "no offload" machine of the
//! overlap paper. Progress comes from busy polling in [`Transport::poll`](ovbench_core::Transport::poll)
//! (`Progress::Poll`) or additionally from a thread that sleeps in epoll
//! (`Progress::Thread`), so that peers' reads and writes are served while
//! the application computes.

mod engine;
mod loopback;
mod memory;
mod mesh;
mod rx;
mod thread;
mod transport;
mod tx;
mod wire;

pub use transport::{TcpOptions, TcpTransport};
