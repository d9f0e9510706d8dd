//! A rank killed with SIGKILL (no goodbye, the kernel closes its sockets):
//! the survivor reports it, naming the rank, within 5 s. The test binary
//! re-runs itself as the second rank, a real separate process.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ovbench_core::{Completion, LocalSlice, Msg, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

mod util;

const CHILD_ENV: &str = "OVBENCH_TCP_KILL_CHILD_PEER";

fn opts() -> TcpOptions {
    TcpOptions {
        timeout: Duration::from_secs(20),
        ..TcpOptions::default()
    }
}

/// Rank 1: connect to rank 0, answer one message, then poll until killed
/// (or give up after 30 s so it can never linger).
fn child(rank0: String) {
    let mut t = TcpTransport::new(1, 2, opts()).unwrap();
    println!("ADDR {}", String::from_utf8(t.address()).unwrap());
    t.connect(&[rank0.into_bytes(), t.address()]).unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let mut out = Vec::new();
    let mut answered = false;
    while Instant::now() < end {
        t.poll(&mut out, None).unwrap();
        if !answered && out.iter().any(|c| matches!(c, Completion::Recv { .. })) {
            t.post_send(0, Msg::new(b"pong", None), 1).unwrap();
            answered = true;
        }
        out.clear();
    }
}

#[test]
fn a_killed_rank_is_reported_within_five_seconds() {
    if let Ok(rank0) = std::env::var(CHILD_ENV) {
        return child(rank0);
    }
    let mut t0 = TcpTransport::new(0, 2, opts()).unwrap();
    let me = String::from_utf8(t0.address()).unwrap();
    let mut kid = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_rank_is_reported_within_five_seconds",
            "--nocapture",
        ])
        .env(CHILD_ENV, &me)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(kid.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the child exited before saying its address")
            .unwrap();
        if let Some(a) = line.strip_prefix("ADDR ") {
            break a.to_string();
        }
    };
    t0.connect(&[me.into_bytes(), addr.into_bytes()]).unwrap();
    // One round trip proves the connection is live.
    let r = t0.alloc(8).unwrap();
    t0.post_send(1, Msg::new(b"ping", Some(LocalSlice::new(r, 0, 0))), 1)
        .unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while !out.iter().any(|c| matches!(c, Completion::Recv { .. })) {
        t0.poll(&mut out, None).unwrap();
        assert!(Instant::now() < end, "no pong from the child");
    }
    out.clear();

    kid.kill().unwrap(); // SIGKILL
                         // A killed rank is reported within 5 s.
    let why = util::expect_peer_error(&mut t0, Duration::from_secs(5));
    kid.wait().unwrap();
    assert!(why.contains("rank 1"), "{why}");
    let e = t0
        .post_send(1, Msg::new(b"x", None), 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank 1"), "{e}");
}
