//! What the TCP tests share: loopback endpoints in one process, and
//! waiting for rank 0 to report its peer gone.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use ovbench_conformance::{connect_all, endpoints, Endpoints};
use ovbench_core::{Completion, Progress, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

/// Options of the tests' endpoints: `progress`, and a timeout long
/// enough for a loaded CI machine.
pub fn opts(progress: Progress) -> TcpOptions {
    TcpOptions {
        progress,
        timeout: Duration::from_secs(20),
        ..TcpOptions::default()
    }
}

/// `n` endpoints listening on loopback, not yet connected.
pub fn unconnected(n: u32, progress: Progress) -> Endpoints {
    endpoints(n, |r| {
        TcpTransport::new(r, n, opts(progress)).expect("listening on loopback")
    })
}

/// `n` endpoints, connected to each other.
pub fn connected(n: u32, progress: Progress) -> Endpoints {
    let mut ts = unconnected(n, progress);
    connect_all(&mut ts).unwrap();
    ts
}

/// Poll `t0` until it reports an error about rank 1, within `within`;
/// return the error's text.
pub fn expect_peer_error(t0: &mut dyn Transport, within: Duration) -> String {
    let end = Instant::now() + within;
    let mut out = Vec::new();
    loop {
        t0.poll(&mut out, None).unwrap();
        if let Some(Completion::Error { peer, status, .. }) =
            out.iter().find(|c| matches!(c, Completion::Error { .. }))
        {
            assert_eq!(*peer, 1);
            return status.clone();
        }
        assert!(
            Instant::now() < end,
            "no error about rank 1 within {within:?}: {out:?}"
        );
    }
}
