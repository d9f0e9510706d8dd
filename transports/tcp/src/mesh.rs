//! Building the full mesh: every pair of ranks gets one TCP connection.
//!
//! The higher rank connects, the lower accepts, and both sides exchange a
//! hello carrying magic, rank and job size, so a stray or misdirected
//! connection is refused instead of being taken for a peer. Ranks connect
//! to lower ranks first and only then accept from higher ones, so the
//! dependency chain always ends at rank 0 and the mesh cannot deadlock.
//! Every step honours one deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ovbench_core::{OpKind, Rank, TransportError};

const HELLO_MAGIC: u32 = 0x4f56_4831; // "1HVO"
const HELLO_LEN: usize = 12;

fn hello(rank: Rank, size: u32) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[0..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&rank.to_le_bytes());
    b[8..12].copy_from_slice(&size.to_le_bytes());
    b
}

/// Parse a hello; returns the sender's rank if magic and size agree.
fn parse_hello(b: &[u8; HELLO_LEN], size: u32) -> Result<Rank, String> {
    let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    if w(0) != HELLO_MAGIC {
        return Err("the connection is not from an ovbench TCP transport (bad hello)".into());
    }
    if w(8) != size {
        return Err(format!(
            "the peer believes the job has {} ranks, this rank {size}: ranks of different jobs met",
            w(8)
        ));
    }
    Ok(w(4))
}

fn connect_err(peer: Rank, status: String) -> TransportError {
    TransportError::Peer {
        peer,
        op: OpKind::Connect,
        status,
    }
}

fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// Parse a peer's address bytes (`ip:port` as text).
pub fn parse_address(peer: Rank, bytes: &[u8]) -> Result<SocketAddr, TransportError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            connect_err(
                peer,
                format!(
                    "address {:?} is not ip:port: the bootstrap exchange mixed transports",
                    String::from_utf8_lossy(bytes)
                ),
            )
        })
}

fn dial(
    me: Rank,
    size: u32,
    peer: Rank,
    addr: SocketAddr,
    deadline: Instant,
) -> Result<TcpStream, TransportError> {
    let timeout = |what: &str| {
        connect_err(
            peer,
            format!(
                "timed out {what} {addr}: is rank {peer} alive and reachable? (raise --timeout)"
            ),
        )
    };
    // No retry on a refused connection: a peer listens before it
    // publishes its address, so nothing listening there means the peer is
    // gone or the address is wrong, and waiting out the deadline would
    // only hold the whole job.
    let left = remaining(deadline).ok_or_else(|| timeout("before connecting to"))?;
    let s = match TcpStream::connect_timeout(&addr, left) {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            return Err(connect_err(
                peer,
                format!("cannot connect to rank {peer} at {addr}: {e}: nothing listens there (rank {peer} is gone, or its address does not reach it from this host)"),
            ))
        }
        Err(e) => {
            return Err(connect_err(
                peer,
                format!("cannot connect to rank {peer} at {addr}: {e}"),
            ))
        }
    };
    let left = remaining(deadline).ok_or_else(|| timeout("greeting"))?;
    s.set_write_timeout(Some(left))
        .and_then(|_| s.set_read_timeout(Some(left)))
        .map_err(|e| connect_err(peer, format!("socket options for {addr}: {e}")))?;
    (&s).write_all(&hello(me, size))
        .map_err(|e| connect_err(peer, format!("sending hello to {addr}: {e}")))?;
    let mut b = [0u8; HELLO_LEN];
    (&s).read_exact(&mut b).map_err(|e| {
        connect_err(
            peer,
            format!("waiting for rank {peer}'s hello from {addr}: {e}"),
        )
    })?;
    let got = parse_hello(&b, size).map_err(|e| connect_err(peer, e))?;
    if got != peer {
        return Err(connect_err(
            peer,
            format!("{addr} answered as rank {got}: the address table is inconsistent"),
        ));
    }
    Ok(s)
}

/// Accept one candidate connection and greet it; `Ok(None)` for a stray.
fn greet(me: Rank, size: u32, s: TcpStream, deadline: Instant) -> Option<(Rank, TcpStream)> {
    let left = remaining(deadline)?.min(Duration::from_secs(5));
    s.set_nonblocking(false).ok()?;
    s.set_read_timeout(Some(left)).ok()?;
    s.set_write_timeout(Some(left)).ok()?;
    let mut b = [0u8; HELLO_LEN];
    (&s).read_exact(&mut b).ok()?;
    let peer = parse_hello(&b, size).ok()?;
    if peer <= me || peer >= size {
        return None;
    }
    (&s).write_all(&hello(me, size)).ok()?;
    Some((peer, s))
}

/// Connect to every peer; entry `r` of the result is the stream to rank `r`
/// (`None` for this rank itself).
pub fn build(
    me: Rank,
    size: u32,
    listener: &TcpListener,
    addresses: &[Vec<u8>],
    deadline: Instant,
) -> Result<Vec<Option<TcpStream>>, TransportError> {
    if addresses.len() != size as usize {
        return Err(TransportError::Invalid(format!(
            "connect got {} addresses for a job of {size} ranks",
            addresses.len()
        )));
    }
    let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
    for peer in 0..me {
        let addr = parse_address(peer, &addresses[peer as usize])?;
        streams[peer as usize] = Some(dial(me, size, peer, addr, deadline)?);
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| TransportError::io("listening socket", e))?;
    let mut missing = size - 1 - me;
    while missing > 0 {
        match listener.accept() {
            Ok((s, _)) => {
                if let Some((peer, s)) = greet(me, size, s, deadline) {
                    if streams[peer as usize].is_none() {
                        streams[peer as usize] = Some(s);
                        missing -= 1;
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                // A teardown's SIGTERM must not wait out the deadline here.
                ovbench_core::stop::check()?;
                if Instant::now() >= deadline {
                    let absent: Vec<String> = (me + 1..size)
                        .filter(|&r| streams[r as usize].is_none())
                        .map(|r| r.to_string())
                        .collect();
                    return Err(connect_err(
                        me + 1,
                        format!(
                            "rank {me} timed out waiting for ranks {} to connect: did they start? (raise --timeout)",
                            absent.join(", ")
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(TransportError::io("accepting peer connections", e)),
        }
    }
    for s in streams.iter().flatten() {
        s.set_nonblocking(true)
            .and_then(|_| s.set_nodelay(true))
            .and_then(|_| s.set_read_timeout(None))
            .map_err(|e| TransportError::io("configuring a peer socket", e))?;
    }
    Ok(streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_checks_magic_and_size() {
        assert_eq!(parse_hello(&hello(3, 4), 4), Ok(3));
        assert!(parse_hello(&hello(3, 4), 5).is_err());
        let mut b = hello(1, 2);
        b[0] ^= 0xff;
        assert!(parse_hello(&b, 2).is_err());
    }

    #[test]
    fn bad_address_names_peer() {
        let e = parse_address(4, b"nonsense").unwrap_err().to_string();
        assert!(e.contains("rank 4"), "{e}");
    }
}
