//! The conformance suite (ovbench-conformance) over UCX: two ranks in one process over tcp,
//! posix and shm (CMA), three ranks over tcp, and tcp with a progress
//! thread. posix and shm skip `peer_dropped_reported` (one process cannot
//! drop a shared-memory rank safely; tests/processes.rs covers it).

use ovbench_conformance::Endpoints;
use ovbench_core::{Progress, Transport};
use ovbench_ucx::{UcxOptions, UcxTransport};

fn make(n: u32, tls: &str) -> Endpoints {
    make_with(n, tls, Progress::Poll)
}

fn make_with(n: u32, tls: &str, progress: Progress) -> Endpoints {
    (0..n)
        .map(|r| {
            let opts = UcxOptions {
                tls: Some(tls.into()),
                net_devices: None,
                progress,
            };
            Box::new(
                UcxTransport::new(r, n, opts).unwrap_or_else(|e| panic!("UCX over {tls}: {e}")),
            ) as Box<dyn Transport>
        })
        .collect()
}

fn tcp(n: u32) -> Endpoints {
    make(n, "tcp")
}

fn tcp_thread(n: u32) -> Endpoints {
    make_with(n, "tcp", Progress::Thread)
}

fn posix(n: u32) -> Endpoints {
    make(n, "posix")
}

fn shm(n: u32) -> Endpoints {
    make(n, "shm")
}

mod tcp_2 {
    ovbench_conformance::conformance_tests!(super::tcp, 2);
}
mod tcp_3 {
    ovbench_conformance::conformance_tests!(super::tcp, 3);
}
// posix and shm run every check but `peer_dropped_reported`. In one
// process the dropped rank's shared-memory segments are gone under the
// survivor, which still reaches for them: the survivor's first bcopy to the
// dropped rank (the wire-up request `ucp_ep_rkey_unpack` sends) attaches the
// receiver's descriptor segment lazily, by the dropped rank's id for it. For
// posix that is `/proc/<pid>/fd/<fd>`, and the pid is the survivor's own, so
// once a concurrent test reuses that fd number UCX maps someone else's file
// and writes into it (SIGBUS past its end, about 1 run in 5 with the default
// test threads); for shm it is a sysv id (`shmat`), reusable the same way,
// if more rarely. Alone, the check passes only because the attach happens to
// fail. Across processes (a real run) the dead rank's pid and its segments
// are gone: tests/processes.rs kills rank 1 over posix and shm and checks the
// survivor reports it (by the pid watch) within 5 s.
macro_rules! shm_lane_checks {
    ($make:expr) => {
        ovbench_conformance::conformance_tests!(@each $make, 2;
            identity_and_caps, regions, send_order_and_max_size, zero_length_messages,
            oversize_send_rejected, write_visible_on_completion, read_returns_target_bytes,
            out_of_range_rejected, deregistered_key_rejected, garbled_key_rejected,
            many_outstanding, key_through_the_wire, block_returns_when_ready,
            tagged_if_offered, send_done_contract, tsend_done_contract,
            trecv_wait_contract, trecv_wait_truncation, arrivals_contract, send_end_known_once);
    };
}
/// Every check but `peer_dropped_reported` (see above).
mod posix_2 {
    shm_lane_checks!(super::posix);
}
/// Every check but `peer_dropped_reported` (see above).
mod shm_2 {
    shm_lane_checks!(super::shm);
}
/// With a progress thread blocked on the worker's event fd.
mod tcp_thread_2 {
    ovbench_conformance::conformance_tests!(super::tcp_thread, 2);
}
