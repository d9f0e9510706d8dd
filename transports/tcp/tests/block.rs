//! `block` sleeps when there is nothing to do (no spinning, no stale
//! wake-ups) and wakes when a peer's message arrives, in both progress
//! modes.

use std::time::{Duration, Instant};

use ovbench_core::Idle;
use ovbench_core::{Completion, Msg, Progress, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

mod util;

fn until_recv(t: &mut dyn Transport) {
    let end = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while !out.iter().any(|c| matches!(c, Completion::Recv { .. })) {
        t.poll(&mut out, None).unwrap();
        assert!(Instant::now() < end, "no message");
    }
}

#[test]
fn block_sleeps_when_idle_and_wakes_on_arrival() {
    for progress in [Progress::Poll, Progress::Thread] {
        let mut ts = util::connected(2, progress);
        // Traffic first, so any stale wake-up would show below.
        ts[0].post_send(1, Msg::new(b"one", None), 1).unwrap();
        until_recv(ts[1].as_mut());
        let mut out = Vec::new();
        ts[0].poll(&mut out, None).unwrap();
        ts[1].poll(&mut out, None).unwrap();
        let nap = Duration::from_millis(300);
        for i in 0..3 {
            let t = Instant::now();
            ts[1].idle(Idle::Block(nap)).unwrap();
            let slept = t.elapsed();
            ts[1].poll(&mut out, None).unwrap();
            if i > 0 {
                assert!(
                    slept >= Duration::from_millis(250),
                    "{progress}: block {i} returned after {slept:?} with nothing to do"
                );
            }
        }

        let mut sender = ts.remove(0);
        let mut receiver = ts.remove(0);
        std::thread::scope(|s| {
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                sender.post_send(1, Msg::new(b"two", None), 2).unwrap();
                let mut out = Vec::new();
                let end = Instant::now() + Duration::from_secs(5);
                while !out.iter().any(|c| matches!(c, Completion::Send { ctx: 2 })) {
                    sender.poll(&mut out, None).unwrap();
                    assert!(Instant::now() < end);
                }
                // Stay alive until the receiver is done.
                std::thread::sleep(Duration::from_millis(500));
            });
            let t = Instant::now();
            receiver.idle(Idle::Block(Duration::from_secs(5))).unwrap();
            let slept = t.elapsed();
            assert!(
                slept < Duration::from_secs(2),
                "{progress}: block slept {slept:?} though a message came after 200 ms"
            );
            until_recv(receiver.as_mut());
        });
    }
}

/// `wait_fd` (inherent to the TCP transport, not part of the contract)
/// names an open descriptor in both progress modes, one per endpoint.
#[test]
fn wait_fd_is_an_open_descriptor() {
    for progress in [Progress::Poll, Progress::Thread] {
        let opts = TcpOptions {
            progress,
            ..TcpOptions::default()
        };
        let t = TcpTransport::new(0, 1, opts).unwrap();
        let fd = t.wait_fd().expect("the TCP transport always has a wait fd");
        assert!(fd >= 0, "{progress}: wait_fd {fd}");
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD)
            .unwrap_or_else(|e| panic!("{progress}: wait_fd {fd} is not open: {e}"));
    }
}
