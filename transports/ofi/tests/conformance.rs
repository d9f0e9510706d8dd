//! The conformance suite (ovbench-conformance) over libfabric: two ranks in one process over
//! tcp;ofi_rxm and shm, three ranks over tcp;ofi_rxm, and tcp;ofi_rxm with
//! a progress thread.

use ovbench_conformance::Endpoints;
use ovbench_core::{Progress, Transport};
use ovbench_ofi::{OfiOptions, OfiTransport};

fn make(n: u32, provider: &str) -> Endpoints {
    make_with(n, provider, Progress::Poll)
}

fn make_with(n: u32, provider: &str, progress: Progress) -> Endpoints {
    (0..n)
        .map(|r| {
            let opts = OfiOptions {
                provider: provider.into(),
                progress,
                ..OfiOptions::default()
            };
            Box::new(
                OfiTransport::new(r, n, opts)
                    .unwrap_or_else(|e| panic!("libfabric {provider}: {e}")),
            ) as Box<dyn Transport>
        })
        .collect()
}

fn tcp(n: u32) -> Endpoints {
    make(n, "tcp;ofi_rxm")
}

fn sockets(n: u32) -> Endpoints {
    make(n, "sockets")
}

fn tcp_thread(n: u32) -> Endpoints {
    make_with(n, "tcp;ofi_rxm", Progress::Thread)
}

fn shm(n: u32) -> Endpoints {
    make(n, "shm")
}

/// tcp;ofi_rxm polled by the rank alone: every check but
/// `trecv_wait_truncation`. Once a tagged receive has truncated a message,
/// the next message from that peer never arrives there (Debian's
/// libfabric 1.17, rxm over tcp, polled; the same check passes with a
/// progress thread, on shm and on sockets). ovbench itself never posts a
/// receive shorter than its message.
macro_rules! tcp_polled {
    ($lane:ident, $size:expr) => {
        mod $lane {
            ovbench_conformance::conformance_tests!(@each super::tcp, $size;
                identity_and_caps, regions, send_order_and_max_size, zero_length_messages,
                oversize_send_rejected, write_visible_on_completion, read_returns_target_bytes,
                out_of_range_rejected, deregistered_key_rejected, garbled_key_rejected,
                many_outstanding, key_through_the_wire, block_returns_when_ready,
                tagged_if_offered, send_done_contract, tsend_done_contract,
                send_end_known_once, trecv_wait_contract, arrivals_contract,
                peer_dropped_reported);
        }
    };
}
tcp_polled!(tcp_2, 2);
tcp_polled!(tcp_3, 3);
/// Every check but `peer_dropped_reported`: in one process, shm maps each
/// peer's region into the same address space, and a dropped rank unmaps
/// it under the survivor, which then faults inside libfabric. Across
/// processes (a real run) each rank keeps its own mapping; shm has no
/// peer-failure detection, so the caller's deadline reports a dead peer.
mod shm_2 {
    ovbench_conformance::conformance_tests!(@each super::shm, 2;
        identity_and_caps, regions, send_order_and_max_size, zero_length_messages,
        oversize_send_rejected, write_visible_on_completion, read_returns_target_bytes,
        out_of_range_rejected, deregistered_key_rejected, garbled_key_rejected,
        many_outstanding, key_through_the_wire, block_returns_when_ready,
        tagged_if_offered, send_done_contract, tsend_done_contract,
        trecv_wait_contract, trecv_wait_truncation, arrivals_contract, send_end_known_once);
}
/// With a progress thread sleeping on the completion queue's fd.
mod tcp_thread_2 {
    ovbench_conformance::conformance_tests!(super::tcp_thread, 2);
}
/// The sockets provider (threads of its own, automatic progress).
mod sockets_2 {
    ovbench_conformance::conformance_tests!(super::sockets, 2);
}
