//! Two real processes (the test binary re-runs itself as rank 1), so
//! shared memory, CMA and sockets cross a process boundary as in a run:
//! messages, the native tag path, a write and a read checked by the other
//! side, and a rank killed with SIGKILL reported by the survivor within
//! 5 s, naming it (over tcp by UCX's peer-failure mode or the pid watch,
//! over shared memory by the pid watch alone).

use ovbench_conformance::processes;
use ovbench_core::{Msg, Progress, Transport};
use ovbench_ucx::{UcxOptions, UcxTransport};

const CHILD_ENV: &str = "OVBENCH_UCX_PROCESS_CHILD";

fn transport(rank: u32, tls: &str) -> UcxTransport {
    UcxTransport::new(
        rank,
        2,
        UcxOptions {
            tls: Some(tls.into()),
            net_devices: None,
            progress: Progress::Poll,
            ..UcxOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("rank {rank}: UCX over {tls}: {e}"))
}

fn main() {
    if let Ok(tls) = std::env::var(CHILD_ENV) {
        return processes::child(transport(1, &tls));
    }
    for (tls, kill) in [("tcp", true), ("posix", true), ("shm", true)] {
        processes::parent(
            CHILD_ENV,
            tls,
            kill,
            |r| transport(r, tls),
            |t, _| {
                let _ = t.post_send(1, Msg::new(b"anyone?", None), 9);
            },
        );
        println!("two processes over UCX {tls}: ok");
    }
}
