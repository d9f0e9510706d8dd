//! The service driven by real clients on threads, over loopback TCP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use super::Service;
use crate::client::Bootstrap;
use crate::secret::proof;
use crate::wire::{
    read_frame, write_frame, Request, Response, MAX_REQUEST, MAX_RESPONSE, NONCE_LEN,
};

const SECRET: &[u8] = b"0123456789abcdef";

fn start(size: u32) -> (Service, String) {
    let s = Service::start(([127, 0, 0, 1], 0).into(), size, SECRET).unwrap();
    let addr = s.addr().to_string();
    (s, addr)
}

fn join(addr: &str, rank: u32, size: u32, timeout: Duration) -> Bootstrap {
    Bootstrap::connect_to(addr, rank, size, SECRET, timeout).unwrap()
}

fn send(raw: &mut TcpStream, req: &Request) {
    write_frame(raw, &req.encode()).unwrap();
}

fn recv(raw: &mut TcpStream) -> Response {
    raw.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = read_frame(raw, MAX_RESPONSE, Some(deadline), None)
        .unwrap_or_else(|e| panic!("no reply from the service: {e:?}"));
    Response::decode(&body).unwrap()
}

/// A raw connection that has said hello as `rank` of `size`, and the
/// challenge the service answered with.
fn hello(addr: &str, rank: u32, size: u32) -> (TcpStream, [u8; NONCE_LEN]) {
    let mut raw = TcpStream::connect(addr).unwrap();
    send(&mut raw, &Request::Hello { rank, size });
    match recv(&mut raw) {
        Response::Challenge(nonce) => (raw, nonce),
        other => panic!("expected a challenge, got {other:?}"),
    }
}

/// A raw connection that said hello as `rank` of `size` and answered the
/// challenge with `mac(nonce)`.
fn answered(
    addr: &str,
    rank: u32,
    size: u32,
    mac: impl FnOnce(&[u8; NONCE_LEN]) -> Vec<u8>,
) -> TcpStream {
    let (mut raw, nonce) = hello(addr, rank, size);
    send(&mut raw, &Request::Proof { mac: mac(&nonce) });
    raw
}

/// The refusal of [`answered`]'s connection.
fn refused(
    addr: &str,
    rank: u32,
    size: u32,
    mac: impl FnOnce(&[u8; NONCE_LEN]) -> Vec<u8>,
) -> String {
    refusal(&mut answered(addr, rank, size, mac))
}

/// The error a refused raw connection gets, after which it is closed.
fn refusal(raw: &mut TcpStream) -> String {
    let Response::Err(msg) = recv(raw) else {
        panic!("the service did not refuse")
    };
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    raw.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "more after the refusal: {rest:?}");
    msg
}

/// Runs `f` as every rank of a `size`-rank job, each on its own thread.
fn run_job<T: Send + 'static>(
    size: u32,
    f: impl Fn(Bootstrap) -> T + Send + Sync + Clone + 'static,
) -> Vec<T> {
    let (_service, addr) = start(size);
    let handles: Vec<_> = (0..size)
        .map(|r| {
            let (f, addr) = (f.clone(), addr.clone());
            thread::spawn(move || f(join(&addr, r, size, Duration::from_secs(10))))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn allgather_is_in_rank_order_and_repeatable() {
    let out = run_job(4, |mut b| {
        let mut rounds = Vec::new();
        for round in 0..3u8 {
            let mine = vec![b.rank() as u8, round];
            rounds.push(b.allgather(&mine).unwrap());
            b.barrier().unwrap();
        }
        rounds
    });
    for rounds in out {
        for (round, all) in rounds.iter().enumerate() {
            let want: Vec<Vec<u8>> = (0..4u8).map(|r| vec![r, round as u8]).collect();
            assert_eq!(all, &want);
        }
    }
}

#[test]
fn get_waits_for_a_later_put() {
    let out = run_job(3, |mut b| {
        let r = b.rank();
        // Rank r waits for r+1's key, which r+1 stores only after a delay.
        thread::sleep(Duration::from_millis(50 * u64::from(r)));
        b.put(&format!("addr/{r}"), format!("rank{r}").as_bytes())
            .unwrap();
        let next = (r + 1) % b.size();
        let v = b.get(&format!("addr/{next}")).unwrap();
        let root = b.broadcast(2, b"from-two").unwrap();
        let gathered = b.gather_to_root(&[r as u8], 0).unwrap();
        (r, next, v, root, gathered)
    });
    for (r, next, v, root, gathered) in out {
        assert_eq!(v, format!("rank{next}").into_bytes());
        assert_eq!(root, b"from-two");
        assert_eq!(gathered.is_some(), r == 0);
    }
}

#[test]
fn wrong_secret_is_refused() {
    let (_s, addr) = start(2);
    let e =
        Bootstrap::connect_to(&addr, 0, 2, b"not-the-secret", Duration::from_secs(2)).unwrap_err();
    assert!(format!("{e:#}").contains("wrong job secret"), "{e:#}");
    // The refused attempt did not take rank 0's place.
    join(&addr, 0, 2, Duration::from_secs(2));
    // A second rank 0 and a wrong job size are refused as well.
    let e = Bootstrap::connect_to(&addr, 0, 2, SECRET, Duration::from_secs(2)).unwrap_err();
    assert!(format!("{e:#}").contains("already connected"), "{e:#}");
    let e = Bootstrap::connect_to(&addr, 1, 3, SECRET, Duration::from_secs(2)).unwrap_err();
    assert!(format!("{e:#}").contains("3"), "{e:#}");
}

#[test]
fn the_secret_is_proven_never_sent() {
    // What a rank sends on the wire: the hello and the proof, neither of
    // which holds the secret (a packet capture learns nothing to reuse).
    let (_s, addr) = start(1);
    let (mut raw, nonce) = hello(&addr, 0, 1);
    let hello_frame = Request::Hello { rank: 0, size: 1 }.encode();
    let mac = proof(SECRET, &nonce, 0, 1).to_vec();
    let proof_frame = Request::Proof { mac: mac.clone() }.encode();
    for frame in [&hello_frame, &proof_frame] {
        assert!(!frame.windows(SECRET.len()).any(|w| w == SECRET));
    }
    send(&mut raw, &Request::Proof { mac });
    assert_eq!(recv(&mut raw), Response::Ok);
    // Each connection gets its own challenge.
    let (_raw2, nonce2) = hello(&addr, 0, 1);
    assert_ne!(nonce, nonce2);
}

#[test]
fn a_wrong_secret_is_refused_and_takes_no_place() {
    let (_s, addr) = start(2);
    let e = refused(&addr, 1, 2, |n| {
        proof(b"another job's secret", n, 1, 2).to_vec()
    });
    assert!(e.contains("rank 1: wrong job secret"), "{e}");
    // The real rank 1 still joins.
    join(&addr, 1, 2, Duration::from_secs(2));
}

#[test]
fn a_missing_secret_is_refused() {
    let (_s, addr) = start(2);
    // An empty proof: the rank has no secret.
    let e = refused(&addr, 0, 2, |_| Vec::new());
    assert!(e.contains("rank 0: missing job secret"), "{e}");
    // Skipping the answer to go straight to work.
    let (mut raw, _) = hello(&addr, 0, 2);
    send(
        &mut raw,
        &Request::Put {
            key: "k".into(),
            value: vec![1],
        },
    );
    let e = refusal(&mut raw);
    assert!(e.contains("rank 0: missing proof of the job secret"), "{e}");
    // The client itself will not try without one.
    let e = Bootstrap::connect_to(&addr, 0, 2, b"", Duration::from_secs(2)).unwrap_err();
    assert!(format!("{e:#}").contains("no job secret"), "{e:#}");
    // None of these took rank 0's place.
    join(&addr, 0, 2, Duration::from_secs(2));
}

#[test]
fn a_replayed_answer_is_refused() {
    let (_s, addr) = start(2);
    // A valid answer recorded on one connection (whose rank never joins)…
    let (first, nonce) = hello(&addr, 0, 2);
    let recorded = proof(SECRET, &nonce, 0, 2).to_vec();
    drop(first);
    // …does not admit another connection: its challenge differs.
    let e = refused(&addr, 0, 2, |nonce2| {
        assert_ne!(&nonce, nonce2);
        recorded.clone()
    });
    assert!(e.contains("rank 0: wrong job secret"), "{e}");
    assert!(e.contains("replayed"), "{e}");
    // Nor does rank 1's answer on its own connection admit rank 0: the
    // rank is hashed, so an answer cannot be moved to another rank.
    let e = refused(&addr, 0, 2, |n| proof(SECRET, n, 1, 2).to_vec());
    assert!(e.contains("wrong job secret"), "{e}");
    // Rank 0 proper still joins.
    join(&addr, 0, 2, Duration::from_secs(2));
}

#[test]
fn an_older_rank_is_told_the_versions_not_left_hanging() {
    let (_s, addr) = start(2);
    // Version 1's hello carried the secret itself after rank and size.
    let mut v1 = vec![1u8];
    v1.extend_from_slice(b"OVBS");
    v1.extend_from_slice(&1u16.to_le_bytes());
    v1.extend_from_slice(&0u32.to_le_bytes());
    v1.extend_from_slice(&2u32.to_le_bytes());
    v1.extend_from_slice(&(SECRET.len() as u16).to_le_bytes());
    v1.extend_from_slice(SECRET);
    let mut raw = TcpStream::connect(&addr).unwrap();
    write_frame(&mut raw, &v1).unwrap();
    let t = Instant::now();
    let e = refusal(&mut raw);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(
        e.contains(&format!(
            "protocol version 1, this service speaks {}",
            crate::wire::VERSION
        )) && e.contains("same ovbench binary"),
        "{e}"
    );
}

#[test]
fn a_silent_connection_is_dropped_at_the_handshake_deadline() {
    let (_s, addr) = start(1);
    // Says hello, never answers the challenge.
    let (mut raw, _) = hello(&addr, 0, 1);
    let t = Instant::now();
    let e = refusal(&mut raw);
    assert!(e.contains("no answer to the challenge within"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
}

#[test]
fn garbage_before_the_secret_is_dropped() {
    let (_s, addr) = start(1);
    let mut raw = TcpStream::connect(&addr).unwrap();
    raw.write_all(&[4, 0, 0, 0, 1, 2, 3, 4]).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    // The service answers with an error frame, then closes: EOF, not a hang.
    raw.read_to_end(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf).contains("bad hello"));
}

#[test]
fn oversized_frame_is_refused_and_the_rank_reported() {
    let (service, addr) = start(2);
    let mut raw = answered(&addr, 1, 2, |n| proof(SECRET, n, 1, 2).to_vec());
    assert_eq!(recv(&mut raw), Response::Ok);
    raw.write_all(&((MAX_REQUEST as u32) + 1).to_le_bytes())
        .unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    raw.read_to_end(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf).contains("exceeds the limit"));
    assert_eq!(service.died(), vec![1]);
    // Rank 0 waiting on the broken rank hears about it instead of hanging.
    let mut b = join(&addr, 0, 2, Duration::from_secs(30));
    let t = Instant::now();
    let e = b.barrier().unwrap_err();
    assert!(format!("{e:#}").contains("rank 1"), "{e:#}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn deadlines_are_honoured() {
    let (_s, addr) = start(2);
    let mut b = join(&addr, 0, 2, Duration::from_millis(300));
    let t = Instant::now();
    let e = b.get("never").unwrap_err();
    assert!(format!("{e:#}").contains("did not appear"), "{e:#}");
    let e = b.barrier().unwrap_err();
    assert!(format!("{e:#}").contains("rank(s) 1"), "{e:#}");
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // Nobody listening: connecting gives up at its deadline.
    drop(_s);
    let t = Instant::now();
    assert!(Bootstrap::connect_to(&addr, 1, 2, SECRET, Duration::from_millis(300)).is_err());
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_vanished_rank_is_named_to_the_waiters() {
    let (service, addr) = start(3);
    let a2 = addr.clone();
    let waiter = thread::spawn(move || {
        let mut b = join(&a2, 0, 3, Duration::from_secs(30));
        let t = Instant::now();
        (b.allgather(b"x").unwrap_err(), t.elapsed())
    });
    let b1 = join(&addr, 1, 3, Duration::from_secs(30));
    let b2 = join(&addr, 2, 3, Duration::from_secs(30));
    thread::sleep(Duration::from_millis(100));
    // Rank 2 "crashes": its socket closes without a goodbye.
    b2.vanish();
    let (e, took) = waiter.join().unwrap();
    assert!(format!("{e:#}").contains("rank 2 disconnected"), "{e:#}");
    assert!(took < Duration::from_secs(5));
    assert_eq!(service.died(), vec![2]);
    drop(b1);
}

#[test]
fn the_hosting_rank_waits_for_goodbyes() {
    let (service, addr) = start(2);
    let b0 = join(&addr, 0, 2, Duration::from_secs(5));
    let b1 = join(&addr, 1, 2, Duration::from_secs(5));
    assert!(!service.wait_all_gone(Instant::now() + Duration::from_millis(50)));
    b0.finish().unwrap();
    drop(b1);
    assert!(service.wait_all_gone(Instant::now() + Duration::from_secs(2)));
    assert!(service.died().is_empty());
}

/// The watchdog's two jobs on a real connection: a stall report is taken
/// without a reply (the next request's reply is its own), and a closed
/// service is seen by `alive` without reading anything.
#[test]
fn a_stall_report_needs_no_reply_and_a_closed_service_is_seen() {
    use ovbench_core::watch::{Observer, Stall};
    let (service, addr) = start(1);
    let mut b = join(&addr, 0, 1, Duration::from_secs(5));
    let w = b.watch().unwrap();
    w.alive().unwrap();
    w.stalled(&Stall {
        waited: Duration::from_secs(1),
        timeout: Duration::from_secs(4),
        peer: Some(0),
        what: "receive of 8 bytes from rank 0",
        phase: "latency, size 8",
    });
    // The service answered the report with nothing: this reply is the put's.
    b.put("k", b"v").unwrap();
    assert_eq!(b.get("k").unwrap(), b"v");
    w.alive().unwrap();
    b.vanish();
    drop(service);
    let deadline = Instant::now() + Duration::from_secs(5);
    let e = loop {
        match w.alive() {
            Err(e) => break e,
            Ok(()) => assert!(Instant::now() < deadline, "a closed service went unseen"),
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert!(e.contains("closed this rank's connection"), "{e}");
}
