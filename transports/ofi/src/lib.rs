//! The ovbench transport over libfabric, with the tagged interface as the
//! native path (`--proto native`).
//!
//! | contract item | libfabric calls | notes |
//! |---|---|---|
//! | open | `fi_getinfo` (`FI_EP_RDM`, `FI_MSG\|FI_RMA\|FI_TAGGED`, `FI_ORDER_SAS`), `fi_fabric`, `fi_domain`, `fi_endpoint`, `fi_av_open` (table), `fi_cq_open` (tagged format; fd wait object only with `--progress thread`, else poll-only as fi_pingpong's) | `--provider` picks the provider; bound to 127.0.0.1 unless `node` says otherwise (shm takes no IP address) |
//! | address / connect | `fi_getname` / `fi_av_insert`, then a hello to every peer (collective) | address lengths checked; the hello sets up shm/rxm peers before any timed operation and carries the pid for the liveness watch |
//! | register / key | `fi_mr_reg`, requested key per registration unless `FI_MR_PROV_KEY`; key = `fi_mr_key` sealed with range, serial and checksum | `FI_MR_VIRT_ADDR` decides address vs offset; keys checked before posting; `deregister` revokes the key at every peer |
//! | post_send | `fi_inject` up to `inject_size`, else `fi_send`; `fi_recv` buffers pre-posted and reposted | source rank and per-peer sequence lead each message (rxm completes rendezvous-sized messages after later small ones; the receiver restores order) |
//! | post_write | `fi_writemsg(FI_DELIVERY_COMPLETE)`, or `fi_writemsg` + a 1-byte `fi_read` fence (shm's default; providers without delivery completion) | completion = visible at the target |
//! | post_read | `fi_read` | |
//! | poll / wait_fd | `fi_cq_read` + `fi_cq_readerr`/`fi_cq_strerror` / `FI_GETWAIT` + `fi_trywait` | |
//! | tsend / trecv | `fi_tinject` up to `inject_size`, else `fi_tsend`; ssend: `fi_tsendmsg(FI_MATCH_COMPLETE)` where offered, `FI_DELIVERY_COMPLETE` on shm (which holds it until the match), else n/a: tcp;ofi_rxm and sockets complete it into their unexpected buffer, `fi_trecv` with an ignore mask | tag = source rank << 32 \| tag |
//!
//! **Posting never fails for `-FI_EAGAIN`**: the post waits, in order, in
//! a backlog that `poll` retries after reading the CQ (tcp and shm free
//! resources only when progressed), up to a deadline after which an error
//! completion names the peer.
//!
//! **Dead peers.** libfabric reports nothing when a peer process dies; a
//! closing transport says goodbye, and same-host peers' pids are watched
//! (see the `liveness` module), so a killed rank becomes an error
//! completion naming it.
//!
//! **Write visibility.** `tcp;ofi_rxm` reports a plain `fi_write` complete
//! once the data has left, before the target has placed it. ovbench
//! prefers `FI_DELIVERY_COMPLETE` (the provider answers only after the
//! target's progress placed the data). A provider that rejects it, and shm
//! (whose CMA write is placed by the initiator itself), get a
//! read-after-write fence: a 1-byte `fi_read` of the written range posted
//! after the write's local completion travels the same ordered path, and
//! the target serves it only after the write; its completion is the
//! write's. [`OfiTransport::write_visibility`] says which is in use.
//!
//! **RMA progress.** tcp;ofi_rxm serves RMA inside the target's progress
//! (manual data progress): `TargetProgress`. sockets runs its own progress
//! threads (`FI_PROGRESS_AUTO`): RMA is still target-CPU work
//! (`TargetProgress`) but needs no polls, and the caps say two-sided
//! progress is by a thread. shm reads and writes
//! by cross-memory attach from the initiator, so with the fence (its
//! default) a read or write completes while the target computes:
//! `Offloaded`; with `FI_DELIVERY_COMPLETE` the target must acknowledge:
//! `TargetProgress`. Hardware providers (verbs, efa, cxi, psm3) place data
//! from the NIC: `Offloaded`. `tests/pair.rs` checks each claim.
//!
//! **Universe size.** ofi_rxm sizes its core provider's completion queue
//! for `FI_UNIVERSE_SIZE` peers (default 256), beyond soft-RoCE's
//! `max_cqe` over verbs. No attribute bounds it, so when the variable is
//! unset ovbench sets it to the rank count (at least 16) before its first
//! libfabric call; the header's `universe_size` says which applies.
//!
//! **Teardown** closes the endpoint, its completion queue and the address
//! vector, then the registrations, the domain and the fabric, and frees
//! ovbench's buffers and regions only after all of them (see `Drop for
//! Endpoint`).
//!
//! **FFI.** Only the `fi` modules (one per libfabric resource, each
//! closing itself after its children) and `memory` call C; everything
//! else is safe Rust over them.
//!
//! **shm and CMA.** shm moves large messages with cross-memory attach;
//! Yama's ptrace scope may forbid it between sibling ranks. See [`cma`].

pub mod cma;
mod endpoint;
mod error;
mod fabric;
mod fi;
mod liveness;
mod memory;
mod ops;
mod progress;
mod seal;
mod shm_name;
mod transport;

pub use endpoint::EAGER_BUF_SIZE;
pub use fi::inventory::{library_version, providers, ProviderInfo};
pub use shm_name::segments_of as shm_segments_of;
pub use transport::OfiTransport;

use ovbench_core::Progress;

/// How to open libfabric.
#[derive(Clone, Debug)]
pub struct OfiOptions {
    /// `--provider`: `tcp;ofi_rxm` (default), `shm`, `sockets`,
    /// `verbs;ofi_rxm`, … (`fi_info -l` lists them).
    pub provider: String,
    /// Address to bind for providers that take one; `None` = 127.0.0.1
    /// (ignored for shm).
    pub node: Option<String>,
    /// Two-sided progress: by the caller's polls, or also by a thread
    /// sleeping on the completion queue's wait fd.
    pub progress: Progress,
    /// How a write is made visible before it completes: `Some(true)`
    /// `FI_DELIVERY_COMPLETE` (an error where the provider lacks it),
    /// `Some(false)` the read-after-write fence, `None` (default) the
    /// fence on shm with cross-memory attach — both operations are then
    /// done by the initiator alone, so RMA is offloaded from the target —
    /// and delivery completion elsewhere where offered.
    pub delivery_complete: Option<bool>,
}

impl Default for OfiOptions {
    fn default() -> Self {
        OfiOptions {
            provider: "tcp;ofi_rxm".into(),
            node: None,
            progress: Progress::Poll,
            delivery_complete: None,
        }
    }
}
