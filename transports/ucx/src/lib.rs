//! The ovbench transport over UCX (`ucp`), with UCX's own tag protocol as
//! the native path (`--proto native`).
//!
//! | contract item | UCP calls | notes |
//! |---|---|---|
//! | context, worker | `ucp_init` (AM, RMA, TAG, WAKEUP), one `ucp_worker_create` | `UCX_TLS` from `--ucx-tls` plus `self`; `UCX_NET_DEVICES=lo` for tcp unless set — applied with `ucp_config_modify`, the process environment is left alone; a list that leaves only `self` is refused |
//! | address / connect | `ucp_worker_get_address` (behind ovbench's pid header) / `ucp_ep_create` per peer, then `ucp_ep_flush_nbx` to finish wire-up | error mode `PEER` where a network transport is listed; same-host peers' pids are watched too, so a dead peer becomes an error completion also over shared memory |
//! | connect, client-server (`--ucx-connect sockaddr`) | `ucp_listener_create` in `new` (its socket address in the published address), then per pair: the higher rank `ucp_ep_create` to the socket address with its rank as client id, the lower one `ucp_conn_request_query` and `ucp_ep_create` from the request | the endpoint to itself from the worker address; error mode `PEER`; the listener is destroyed once every higher rank is accepted |
//! | soft-RoCE | `UD_ETH_DGID_CHECK=n` with `ucp_config_modify` when a selected device is a software RDMA device (sysfs `parent`) and UD may open, unless `UCX_UD_VERBS_ETH_DGID_CHECK` is set | see `dgid_check` |
//! | register / key | `ucp_mem_map` of transport memory, `ucp_rkey_pack` blob sealed with range, serial and checksum | peer keys checked before `ucp_ep_rkey_unpack` (first use), cached; `deregister` revokes the key at every peer by active message |
//! | post_send | `ucp_am_send_nbx` (eager), handler copies into transport buffers; up to 256 bytes first from a stack buffer with `FORCE_IMM_CMPL` (done inside the call, no request) | never the tag API: own protocols are ovbench's own; per-peer sequence numbers keep posting order |
//! | post_write | `ucp_put_nbx` then `ucp_ep_flush_nbx` | completion only after the flush: the data is visible at the target |
//! | post_read | `ucp_get_nbx` | |
//! | poll / wait_fd | `ucp_worker_progress` + callback queue / `ucp_worker_get_efd` + `ucp_worker_arm` | |
//! | tsend / trecv | `ucp_tag_send_nbx` (first with `FORCE_IMM_CMPL`), `ucp_tag_send_sync_nbx`, `ucp_tag_recv_nbx` | tag = source rank << 32 \| tag, so wildcards and the source work |
//! | trecv_wait | `ucp_tag_recv_nbx` whose callback fills a slot on the waiting frame, `ucp_worker_progress` until it ran (`ucp_request_cancel` at the deadline or a dead peer) | a blocking native receive as ucx_perftest waits for one; not with `--progress thread` |
//!
//! **RMA progress.** Over `tcp`, UCX 1.13 has no put/get lane and emulates
//! RMA with active messages that the target's UCX serves when it
//! progresses: the caps say
//! [`RmaProgress::TargetProgress`](ovbench_core::RmaProgress). `posix`
//! alone likewise. `shm` shows a cma `rma_bw` lane, yet a get or put never
//! completes while the target does not poll (the tests check it), so it is
//! target progress too. Only RDMA lanes (rc, dc) count as
//! [`Offloaded`](ovbench_core::RmaProgress). The lane table is read after
//! `connect` ([`UcxTransport::rma_path`]).
//!
//! **Layers.** Every call into UCX is in the private `ffi` module, one
//! file per resource (context, worker, endpoint, rkey, memory, request),
//! each owning its handle and releasing it on drop, as the verbs crate
//! does; the transport files above it call safe functions only
//! (`tests/unsafe_confined.rs` keeps it so).
//!
//! **Limits.** UCX offers no target-side check of a key or range: an
//! out-of-range offset is rejected at the initiator against the sealed
//! range, and a dropped registration is refused once its revocation has
//! arrived (an access racing the revocation is performed). Each RMA post
//! progresses the worker once so that arrived revocations are seen.

mod address;
mod devices;
mod dgid_check;
mod ffi;
mod handover;
mod lanes;
mod liveness;
mod ops;
mod progress;
mod seal;
mod settings;
mod status;
mod transport;

pub use ffi::resources::{transports as resources, TransportResource};
pub use lanes::RmaPath;

/// The UCX library's version (`ucp_get_version_string`), e.g. `1.13.1`.
pub fn library_version() -> String {
    ffi::context::version()
}
pub use transport::{UcxTransport, EAGER_BUF_SIZE};

use ovbench_core::Progress;

/// How to set UCX up.
#[derive(Clone, Debug, Default)]
pub struct UcxOptions {
    /// `--ucx-tls`: UCX transports (`tcp`, `posix`, `shm`, `sysv`, `cma`,
    /// …, comma-separated); `self` is added. `None` keeps `UCX_TLS` or
    /// UCX's default.
    pub tls: Option<String>,
    /// `--ucx-net-devices`; `None` means `UCX_NET_DEVICES` if set, else
    /// `lo` when tcp is among the transports (single-host default).
    pub net_devices: Option<String>,
    /// Two-sided progress: by polling, or a thread blocked on the
    /// worker's event fd.
    pub progress: Progress,
    /// `--ucx-connect`: how endpoints are made.
    pub connect: UcxConnect,
}

/// How ranks connect (`--ucx-connect`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UcxConnect {
    /// `ucp_ep_create` with each peer's worker address from the bootstrap
    /// exchange; UCX wires lanes up with its own messages (rc needs an
    /// auxiliary transport such as ud for that).
    #[default]
    Worker,
    /// UCX's client-server path: of each pair the lower rank listens
    /// (`ucp_listener_create` on the IP address of the selected device's
    /// interface, its port published through the bootstrap exchange), the
    /// higher one connects to that socket address; the connection manager
    /// (rdmacm on an RDMA device, else tcp) carries the wire-up, so rc
    /// needs no UD.
    Sockaddr,
}
