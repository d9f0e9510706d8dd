//! Two real processes (the test binary re-runs itself as rank 1), so
//! shared memory, CMA and sockets cross a process boundary as in a run:
//! messages, the native tagged path, a write and a read checked by the
//! other side, and a rank killed with SIGKILL reported by the survivor
//! within 5 s, naming it (libfabric itself says nothing; the transport
//! watches the peer's pid).

use ovbench_conformance::processes;
use ovbench_core::RmaOp;
use ovbench_core::Transport;
use ovbench_ofi::{OfiOptions, OfiTransport};

const CHILD_ENV: &str = "OVBENCH_OFI_PROCESS_CHILD";

fn transport(rank: u32, tls: &str) -> OfiTransport {
    OfiTransport::new(
        rank,
        2,
        OfiOptions {
            provider: tls.into(),
            ..OfiOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("rank {rank}: libfabric {tls}: {e}"))
}

fn main() {
    if let Ok(tls) = std::env::var(CHILD_ENV) {
        return processes::child(transport(1, &tls));
    }
    for (tls, kill) in [("tcp;ofi_rxm", true), ("shm", true)] {
        let killed = processes::parent(
            CHILD_ENV,
            tls,
            kill,
            |r| transport(r, tls),
            // A read needs the peer to answer.
            |t, k| {
                let _ = t.post_rma(1, RmaOp::read(k.buf.sub(0, 64), k.mr, &k.key, 0), 9);
            },
        );
        // The killed rank never closed its shm segment: removed here,
        // not left in /dev/shm.
        if tls == "shm" {
            for s in ovbench_ofi::shm_segments_of(killed) {
                let _ = std::fs::remove_file(s);
            }
        }
        println!("two processes over libfabric {tls}: ok");
    }
}
