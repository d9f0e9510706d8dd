//! The conformance suite (ovbench-conformance) over TCP: 2, 3 and 5 ranks in one process, with
//! progress by polling and by thread.

use ovbench_conformance::Endpoints;
use ovbench_core::Progress;

mod util;

fn poll(n: u32) -> Endpoints {
    util::unconnected(n, Progress::Poll)
}

fn thread(n: u32) -> Endpoints {
    util::unconnected(n, Progress::Thread)
}

/// Two, three and five ranks: at five, four live peers each, so progress
/// goes through epoll.
mod poll {
    ovbench_conformance::conformance_tests!(super::poll, [2, 3, 5]);
}
mod thread {
    ovbench_conformance::conformance_tests!(super::thread, [2, 3, 5]);
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
