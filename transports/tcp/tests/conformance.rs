//! The conformance suite (ovbench-conformance) over TCP: 2, 3 and 5 ranks in one process, with
//! progress by polling and by thread.

use std::time::Duration;

use ovbench_conformance::Endpoints;
use ovbench_core::{Progress, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

fn make(n: u32, progress: Progress) -> Endpoints {
    (0..n)
        .map(|r| {
            let opts = TcpOptions {
                progress,
                timeout: Duration::from_secs(20),
                ..TcpOptions::default()
            };
            Box::new(TcpTransport::new(r, n, opts).expect("listening on loopback"))
                as Box<dyn Transport>
        })
        .collect()
}

fn poll(n: u32) -> Endpoints {
    make(n, Progress::Poll)
}

fn thread(n: u32) -> Endpoints {
    make(n, Progress::Thread)
}

mod poll_2 {
    ovbench_conformance::conformance_tests!(super::poll, 2);
}
mod poll_3 {
    ovbench_conformance::conformance_tests!(super::poll, 3);
}
/// Five ranks: four live peers each, so progress goes through epoll.
mod poll_5 {
    ovbench_conformance::conformance_tests!(super::poll, 5);
}
mod thread_2 {
    ovbench_conformance::conformance_tests!(super::thread, 2);
}
mod thread_3 {
    ovbench_conformance::conformance_tests!(super::thread, 3);
}

mod thread_5 {
    ovbench_conformance::conformance_tests!(super::thread, 5);
}

/// `run_all` reports every check, so a new transport can print a table.
#[test]
fn run_all_reports_every_check() {
    let results = ovbench_conformance::run_all(&poll, 2);
    assert_eq!(results.len(), ovbench_conformance::CHECKS.len());
    for (name, r) in results {
        assert!(r.is_ok(), "{name}: {r:?}");
    }
}
