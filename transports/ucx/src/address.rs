//! What a rank publishes through the bootstrap exchange: ovbench's header
//! (a magic naming the connection path, the host/pid-namespace identity
//! of [`peer_watch::identity`]), then, on the client-server path, the
//! socket address its listener bound, then UCX's worker address (which
//! the worker path connects to, and either path uses for a rank's
//! endpoint to itself).
//!
//! ```text
//! OVUA identity worker-address                         (--ucx-connect worker)
//! OVUS identity len(ip) ip port(be16) worker-address   (--ucx-connect sockaddr)
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ovbench_core::fabric::peer_watch;

const WORKER_MAGIC: &[u8; 4] = b"OVUA";
const SOCKADDR_MAGIC: &[u8; 4] = b"OVUS";
const HDR: usize = 4 + peer_watch::IDENTITY_LEN;
/// Largest address accepted from the bootstrap exchange.
const MAX_ADDRESS: usize = 64 * 1024;

/// A peer's published address, parsed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PeerAddress<'a> {
    pub identity: &'a [u8],
    /// The listener of the client-server path; `None` on the worker path.
    pub listener: Option<SocketAddr>,
    pub worker: &'a [u8],
}

/// This rank's address.
pub(crate) fn encode(identity: &[u8], listener: Option<SocketAddr>, worker: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(HDR + 19 + worker.len());
    a.extend_from_slice(if listener.is_some() {
        SOCKADDR_MAGIC
    } else {
        WORKER_MAGIC
    });
    a.extend_from_slice(identity);
    if let Some(l) = listener {
        match l.ip() {
            IpAddr::V4(ip) => {
                a.push(4);
                a.extend_from_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                a.push(16);
                a.extend_from_slice(&ip.octets());
            }
        }
        a.extend_from_slice(&l.port().to_be_bytes());
    }
    a.extend_from_slice(worker);
    a
}

/// Parse a peer's address; `sockaddr` says which path this rank takes,
/// and a peer on the other one is refused (the ranks were started with
/// different `--ucx-connect`).
pub(crate) fn decode(a: &[u8], sockaddr: bool) -> Result<PeerAddress<'_>, String> {
    if a.len() <= HDR || a.len() > MAX_ADDRESS {
        return Err(format!(
            "its address is {} bytes (must be {}..={MAX_ADDRESS}); the ranks run different transports or the bootstrap exchange is corrupt",
            a.len(),
            HDR + 1
        ));
    }
    let theirs = match &a[..4] {
        m if m == WORKER_MAGIC => false,
        m if m == SOCKADDR_MAGIC => true,
        _ => {
            return Err(
                "its address lacks ovbench's UCX header (OVUA or OVUS); the ranks run different transports or the bootstrap exchange is corrupt".into(),
            )
        }
    };
    if theirs != sockaddr {
        let name = |s: bool| if s { "sockaddr" } else { "worker" };
        return Err(format!(
            "it connects by --ucx-connect {}, this rank by --ucx-connect {}: start every rank with the same --ucx-connect",
            name(theirs),
            name(sockaddr)
        ));
    }
    let identity = &a[4..HDR];
    let mut rest = &a[HDR..];
    let listener = if sockaddr {
        let truncated = || "its client-server address is truncated".to_string();
        let (&len, tail) = rest.split_first().ok_or_else(truncated)?;
        let len = usize::from(len);
        if !matches!(len, 4 | 16) || tail.len() < len + 2 {
            return Err(truncated());
        }
        let ip = if len == 4 {
            IpAddr::V4(Ipv4Addr::from(
                <[u8; 4]>::try_from(&tail[..4]).expect("4 bytes"),
            ))
        } else {
            IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(&tail[..16]).expect("16 bytes"),
            ))
        };
        let port = u16::from_be_bytes([tail[len], tail[len + 1]]);
        rest = &tail[len + 2..];
        Some(SocketAddr::new(ip, port))
    } else {
        None
    };
    if rest.is_empty() {
        return Err("its address carries no UCX worker address".into());
    }
    Ok(PeerAddress {
        identity,
        listener,
        worker: rest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_paths_round_trip() {
        let id = peer_watch::identity();
        let w = [7u8; 40];
        let a = encode(&id, None, &w);
        let p = decode(&a, false).unwrap();
        assert_eq!((p.identity, p.listener, p.worker), (&id[..], None, &w[..]));
        for l in ["10.0.2.15:40123", "[fe80::1]:7"] {
            let l: SocketAddr = l.parse().unwrap();
            let a = encode(&id, Some(l), &w);
            let p = decode(&a, true).unwrap();
            assert_eq!((p.listener, p.worker), (Some(l), &w[..]));
        }
    }

    #[test]
    fn mixed_paths_and_garbage_are_refused() {
        let id = peer_watch::identity();
        let w = [7u8; 40];
        let l: SocketAddr = "127.0.0.1:5".parse().unwrap();
        let e = decode(&encode(&id, None, &w), true).unwrap_err();
        assert!(e.contains("same --ucx-connect"), "{e}");
        let e = decode(&encode(&id, Some(l), &w), false).unwrap_err();
        assert!(e.contains("same --ucx-connect"), "{e}");
        let mut bad = encode(&id, None, &w);
        bad[0] = b'X';
        assert!(decode(&bad, false).unwrap_err().contains("OVUA"));
        assert!(decode(&bad[..HDR], false).is_err());
        let cut = encode(&id, Some(l), &[]);
        assert!(decode(&cut, true).is_err());
        let short = &encode(&id, Some(l), &w)[..HDR + 3];
        assert!(decode(short, true).unwrap_err().contains("truncated"));
    }
}
