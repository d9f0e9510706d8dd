//! A rank hosting the bootstrap service (rank 0 under srun or mpirun)
//! that is asked to stop does not wait for ranks that never joined: in a
//! test binary of its own, as the stop request is process-wide.
//! tests/faults.rs found it: after srun's --kill-on-bad-exit killed a
//! step whose rank 1 died before joining, rank 0 waited out --timeout.

use std::time::{Duration, Instant};

use ovbench_core::stop;
use ovbench_launcher::{Bootstrap, Service};

#[test]
fn a_stopped_host_does_not_wait_for_ranks_that_never_joined() {
    let secret = b"test secret";
    let service = Service::start("127.0.0.1:0".parse().unwrap(), 2, secret).expect("service");
    let addr = service.addr().to_string();
    let rank0 = Bootstrap::connect_to(&addr, 0, 2, secret, Duration::from_secs(5)).expect("rank 0");
    rank0.finish().expect("rank 0's goodbye");

    // Not stopped: the host waits for rank 1 up to the deadline.
    let t = Instant::now();
    assert!(!service.wait_all_gone(Instant::now() + Duration::from_millis(300)));
    assert!(t.elapsed() >= Duration::from_millis(300));

    // Stopped (as its SIGTERM handler would): it waits no longer.
    stop::request(nix::libc::SIGTERM);
    let t = Instant::now();
    assert!(!service.wait_all_gone(Instant::now() + Duration::from_secs(10)));
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "a stopped host waited {:.2?} for a rank that never joined",
        t.elapsed()
    );
}
