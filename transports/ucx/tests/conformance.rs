//! The core conformance suite over UCX: two ranks in one process over tcp,
//! posix and shm (CMA), three ranks over tcp, and tcp with a progress
//! thread.

use ovbench_core::conformance::Endpoints;
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
    ovbench_core::conformance_tests!(super::tcp, 2);
}
mod tcp_3 {
    ovbench_core::conformance_tests!(super::tcp, 3);
}
mod posix_2 {
    ovbench_core::conformance_tests!(super::posix, 2);
}
mod shm_2 {
    ovbench_core::conformance_tests!(super::shm, 2);
}
/// With a progress thread blocked on the worker's event fd.
mod tcp_thread_2 {
    ovbench_core::conformance_tests!(super::tcp_thread, 2);
}
