//! The bootstrap service's wire format: length-prefixed binary frames.
//!
//! A frame is a little-endian `u32` body length followed by the body; the
//! body's first byte says what it is. Every field is bounds-checked on
//! arrival — a frame from the wire is never trusted, even after the secret
//! was proven — and a bad frame is an error, never a panic.
//!
//! A connection opens with a challenge–response that proves the rank holds
//! the job secret without sending it (version 2; version 1 sent the secret
//! itself):
//!
//! 1. rank → service: `Hello { magic "OVBS", version, rank, size }`;
//! 2. service → rank: `Challenge { nonce }`, 32 fresh random bytes;
//! 3. rank → service: `Proof { mac }`, HMAC-SHA256 keyed with the secret
//!    over the nonce, the rank and the size (see [`crate::secret::proof`]);
//! 4. service → rank: `Ok`, or `Err` saying what was wrong.
//!
//! The magic and version come first in the hello, where version 1 had
//! them too, so either side of a version mismatch gets an error frame
//! naming both versions instead of a hang.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// Identifies an ovbench bootstrap connection ("OVBS").
pub const MAGIC: [u8; 4] = *b"OVBS";
/// Bumped whenever the frame layout changes (2: challenge–response
/// instead of the secret in the hello; 3: stall reports).
pub const VERSION: u16 = 3;
/// Bytes of the service's challenge.
pub const NONCE_LEN: usize = 32;
/// Bytes of a rank's proof (an HMAC-SHA256 tag).
pub const PROOF_LEN: usize = 32;
/// Longest key a rank may store.
pub const MAX_KEY: usize = 256;
/// Largest value a rank may store or contribute to a collective.
/// Transport addresses are tens to hundreds of bytes; 64 KiB leaves room.
pub const MAX_VALUE: usize = 64 * 1024;
/// Longest stall report a rank may send.
pub const MAX_STALL_TEXT: usize = 4096;
/// Most ranks one job may have.
pub const MAX_RANKS: u32 = 1 << 20;
/// Largest frame a client may send: a value plus its key and header fields.
pub const MAX_REQUEST: usize = MAX_VALUE + MAX_KEY + 64;
/// Largest frame a server may send (an allgather of every rank's value).
pub const MAX_RESPONSE: usize = 64 * 1024 * 1024;
/// Longest wait a client may ask the server for (one day, in ms).
pub const MAX_WAIT_MS: u32 = 24 * 3600 * 1000;

/// What a collective synchronises: the two kinds must not be mixed at the
/// same step, which would mean the ranks disagree on the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollKind {
    Barrier = 1,
    Allgather = 2,
}

/// A frame from a rank to the service.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    Hello {
        rank: u32,
        size: u32,
    },
    /// The answer to the service's challenge. Empty means the rank has no
    /// secret to prove (refused as such); any other length but
    /// [`PROOF_LEN`] is a malformed frame.
    Proof {
        mac: Vec<u8>,
    },
    Put {
        key: String,
        value: Vec<u8>,
    },
    Get {
        wait_ms: u32,
        key: String,
    },
    Collective {
        kind: CollKind,
        wait_ms: u32,
        data: Vec<u8>,
    },
    Bye,
    /// The rank's wait has lasted a quarter of its timeout: what it waits
    /// for and on whom. Sent from the wait loop; the service answers
    /// nothing (the rank is busy waiting, not reading), it tells the user.
    Stall {
        waited_ms: u32,
        timeout_ms: u32,
        /// The rank waited on, if one is.
        peer: Option<u32>,
        /// "phase: operation", in words.
        text: String,
    },
}

/// A frame from the service to a rank.
#[derive(Debug, PartialEq, Eq)]
pub enum Response {
    Ok,
    /// The nonce a connecting rank must answer with a [`Request::Proof`].
    Challenge([u8; NONCE_LEN]),
    Value(Vec<u8>),
    Gathered(Vec<Vec<u8>>),
    Err(String),
}

const HELLO: u8 = 1;
const PUT: u8 = 2;
const GET: u8 = 3;
const COLLECTIVE: u8 = 4;
const BYE: u8 = 5;
const PROOF: u8 = 6;
const STALL: u8 = 7;
const OK: u8 = 0x80;
const VALUE: u8 = 0x81;
const GATHERED: u8 = 0x82;
const ERR: u8 = 0x83;
const CHALLENGE: u8 = 0x84;

impl Request {
    /// The frame body (without the length prefix).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Request::Hello { rank, size } => {
                b.push(HELLO);
                b.extend_from_slice(&MAGIC);
                b.extend_from_slice(&VERSION.to_le_bytes());
                b.extend_from_slice(&rank.to_le_bytes());
                b.extend_from_slice(&size.to_le_bytes());
            }
            Request::Proof { mac } => {
                b.push(PROOF);
                put_bytes16(&mut b, mac);
            }
            Request::Put { key, value } => {
                b.push(PUT);
                put_bytes16(&mut b, key.as_bytes());
                put_bytes32(&mut b, value);
            }
            Request::Get { wait_ms, key } => {
                b.push(GET);
                b.extend_from_slice(&wait_ms.to_le_bytes());
                put_bytes16(&mut b, key.as_bytes());
            }
            Request::Collective {
                kind,
                wait_ms,
                data,
            } => {
                b.push(COLLECTIVE);
                b.push(*kind as u8);
                b.extend_from_slice(&wait_ms.to_le_bytes());
                put_bytes32(&mut b, data);
            }
            Request::Bye => b.push(BYE),
            Request::Stall {
                waited_ms,
                timeout_ms,
                peer,
                text,
            } => {
                b.push(STALL);
                b.extend_from_slice(&waited_ms.to_le_bytes());
                b.extend_from_slice(&timeout_ms.to_le_bytes());
                b.extend_from_slice(&peer.unwrap_or(u32::MAX).to_le_bytes());
                let text = &text.as_bytes()[..text.len().min(MAX_STALL_TEXT)];
                put_bytes16(&mut b, text);
            }
        }
        b
    }

    /// Parses and validates a frame body from a rank.
    pub fn decode(body: &[u8]) -> Result<Request> {
        let mut c = Cursor { buf: body, pos: 0 };
        let req = match c.u8()? {
            HELLO => {
                if c.take(4)? != MAGIC {
                    bail!("not an ovbench bootstrap client (bad magic)");
                }
                let version = c.u16()?;
                if version != VERSION {
                    bail!("bootstrap protocol version {version}, this service speaks {VERSION}: run the same ovbench binary on every rank");
                }
                let rank = c.u32()?;
                let size = c.u32()?;
                Request::Hello { rank, size }
            }
            PROOF => {
                let mac = c.bytes16(PROOF_LEN)?.to_vec();
                if !mac.is_empty() && mac.len() != PROOF_LEN {
                    bail!(
                        "a proof of the job secret is {PROOF_LEN} bytes, not {}",
                        mac.len()
                    );
                }
                Request::Proof { mac }
            }
            PUT => {
                let key = c.key()?;
                let value = c.bytes32(MAX_VALUE)?.to_vec();
                Request::Put { key, value }
            }
            GET => {
                let wait_ms = c.u32()?.min(MAX_WAIT_MS);
                let key = c.key()?;
                Request::Get { wait_ms, key }
            }
            COLLECTIVE => {
                let kind = match c.u8()? {
                    1 => CollKind::Barrier,
                    2 => CollKind::Allgather,
                    k => bail!("unknown collective kind {k}"),
                };
                let wait_ms = c.u32()?.min(MAX_WAIT_MS);
                let data = c.bytes32(MAX_VALUE)?.to_vec();
                Request::Collective {
                    kind,
                    wait_ms,
                    data,
                }
            }
            BYE => Request::Bye,
            STALL => {
                let waited_ms = c.u32()?;
                let timeout_ms = c.u32()?;
                let peer = Some(c.u32()?).filter(|&p| p != u32::MAX);
                let text = String::from_utf8_lossy(c.bytes16(MAX_STALL_TEXT)?).into_owned();
                Request::Stall {
                    waited_ms,
                    timeout_ms,
                    peer,
                    text,
                }
            }
            t => bail!("unknown request type {t:#x}"),
        };
        c.finish()?;
        Ok(req)
    }
}

impl Response {
    /// The frame body (without the length prefix).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Response::Ok => b.push(OK),
            Response::Challenge(nonce) => {
                b.push(CHALLENGE);
                b.extend_from_slice(nonce);
            }
            Response::Value(v) => {
                b.push(VALUE);
                put_bytes32(&mut b, v);
            }
            Response::Gathered(all) => {
                b.push(GATHERED);
                b.extend_from_slice(&(all.len() as u32).to_le_bytes());
                for v in all {
                    put_bytes32(&mut b, v);
                }
            }
            Response::Err(msg) => {
                b.push(ERR);
                put_bytes32(&mut b, msg.as_bytes());
            }
        }
        b
    }

    /// Parses and validates a frame body from the service.
    pub fn decode(body: &[u8]) -> Result<Response> {
        let mut c = Cursor { buf: body, pos: 0 };
        let resp = match c.u8()? {
            OK => Response::Ok,
            CHALLENGE => {
                let mut nonce = [0u8; NONCE_LEN];
                nonce.copy_from_slice(c.take(NONCE_LEN)?);
                Response::Challenge(nonce)
            }
            VALUE => Response::Value(c.bytes32(MAX_VALUE)?.to_vec()),
            GATHERED => {
                let n = c.u32()?;
                if n > MAX_RANKS {
                    bail!("allgather reply claims {n} ranks (limit {MAX_RANKS})");
                }
                let mut all = Vec::with_capacity((n as usize).min(4096));
                for _ in 0..n {
                    all.push(c.bytes32(MAX_VALUE)?.to_vec());
                }
                Response::Gathered(all)
            }
            ERR => Response::Err(String::from_utf8_lossy(c.bytes32(MAX_RESPONSE)?).into_owned()),
            t => bail!("unknown response type {t:#x}"),
        };
        c.finish()?;
        Ok(resp)
    }
}

fn put_bytes16(b: &mut Vec<u8>, v: &[u8]) {
    b.extend_from_slice(&(v.len() as u16).to_le_bytes());
    b.extend_from_slice(v);
}

fn put_bytes32(b: &mut Vec<u8>, v: &[u8]) {
    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
    b.extend_from_slice(v);
}

/// Bounds-checked reader over a frame body.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            bail!(
                "truncated frame: needs {n} more bytes at offset {}",
                self.pos
            );
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn bytes16(&mut self, max: usize) -> Result<&'a [u8]> {
        let n = usize::from(self.u16()?);
        if n > max {
            bail!("field of {n} bytes exceeds the limit of {max}");
        }
        self.take(n)
    }
    fn bytes32(&mut self, max: usize) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        if n > max {
            bail!("field of {n} bytes exceeds the limit of {max}");
        }
        self.take(n)
    }
    fn key(&mut self) -> Result<String> {
        let k = self.bytes16(MAX_KEY)?;
        if k.is_empty() {
            bail!("empty key");
        }
        String::from_utf8(k.to_vec()).context("key is not UTF-8")
    }
    fn finish(&self) -> Result<()> {
        if self.pos != self.buf.len() {
            bail!(
                "{} trailing bytes after the frame",
                self.buf.len() - self.pos
            );
        }
        Ok(())
    }
}

/// Writes one frame (length prefix and body) in a single write call.
pub fn write_frame(stream: &mut TcpStream, body: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(body);
    stream.write_all(&frame)
}

/// Why [`read_frame`] returned without a frame.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection between frames.
    Closed,
    /// The deadline passed.
    TimedOut,
    /// `stop` was raised (the service is shutting down).
    Stopped,
    /// Anything else: a socket error, a frame over `max`, a close mid-frame.
    Other(anyhow::Error),
}

/// Reads one frame of at most `max` body bytes.
///
/// The socket must have a short read timeout set: each expiry re-checks
/// `deadline` and `stop`, so a silent peer can never hold the reader past
/// either. A partial frame survives those re-checks (no data is lost).
pub fn read_frame(
    stream: &mut TcpStream,
    max: usize,
    deadline: Option<Instant>,
    stop: Option<&AtomicBool>,
) -> Result<Vec<u8>, ReadError> {
    let mut len = [0u8; 4];
    fill(stream, &mut len, true, deadline, stop)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > max {
        return Err(ReadError::Other(anyhow::anyhow!(
            "frame of {n} bytes exceeds the limit of {max}"
        )));
    }
    if n == 0 {
        return Err(ReadError::Other(anyhow::anyhow!("empty frame")));
    }
    let mut body = vec![0u8; n];
    fill(stream, &mut body, false, deadline, stop)?;
    Ok(body)
}

fn fill(
    stream: &mut TcpStream,
    buf: &mut [u8],
    at_boundary: bool,
    deadline: Option<Instant>,
    stop: Option<&AtomicBool>,
) -> Result<(), ReadError> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) if got == 0 && at_boundary => return Err(ReadError::Closed),
            Ok(0) => {
                return Err(ReadError::Other(anyhow::anyhow!(
                    "connection closed in the middle of a frame"
                )))
            }
            Ok(k) => got += k,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset && got == 0 && at_boundary => {
                return Err(ReadError::Closed)
            }
            Err(e) => return Err(ReadError::Other(e.into())),
        }
        // The service's own stop, or this process's stop signal (a rank
        // torn down while it waits on the service must not wait on).
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) || ovbench_core::stop::check().is_err() {
            return Err(ReadError::Stopped);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) && got < buf.len() {
            return Err(ReadError::TimedOut);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let reqs = [
            Request::Hello { rank: 3, size: 8 },
            Request::Proof {
                mac: vec![5; PROOF_LEN],
            },
            Request::Proof { mac: vec![] },
            Request::Put {
                key: "addr/3".into(),
                value: vec![1, 2, 3],
            },
            Request::Get {
                wait_ms: 500,
                key: "k".into(),
            },
            Request::Collective {
                kind: CollKind::Allgather,
                wait_ms: 9,
                data: vec![7; 100],
            },
            Request::Bye,
            Request::Stall {
                waited_ms: 2500,
                timeout_ms: 10_000,
                peer: Some(1),
                text: "latency, 8 B, measuring: receive of 8 bytes from rank 1".into(),
            },
            Request::Stall {
                waited_ms: 1,
                timeout_ms: 4,
                peer: None,
                text: String::new(),
            },
        ];
        for r in reqs {
            assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn responses_round_trip() {
        let resps = [
            Response::Ok,
            Response::Challenge([7; NONCE_LEN]),
            Response::Value(vec![9; 10]),
            Response::Gathered(vec![vec![], vec![1], vec![2, 2]]),
            Response::Err("rank 2 died".into()),
        ];
        for r in resps {
            assert_eq!(Response::decode(&r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn malformed_frames_are_errors() {
        // Truncated, trailing bytes, oversized value, bad magic, unknown type.
        let put = Request::Put {
            key: "k".into(),
            value: vec![0; 4],
        }
        .encode();
        assert!(Request::decode(&put[..put.len() - 1]).is_err());
        let mut longer = put.clone();
        longer.push(0);
        assert!(Request::decode(&longer).is_err());
        let mut huge = vec![PUT, 1, 0, b'k'];
        huge.extend_from_slice(&((MAX_VALUE as u32) + 1).to_le_bytes());
        assert!(Request::decode(&huge).is_err());
        let mut hello = Request::Hello { rank: 0, size: 1 }.encode();
        hello[1] = b'X';
        assert!(Request::decode(&hello).is_err());
        assert!(Request::decode(&[0x42]).is_err());
        assert!(Request::decode(&[]).is_err());
        assert!(Response::decode(&[GATHERED, 0xff, 0xff, 0xff, 0xff]).is_err());
        // A proof of the wrong length, a short challenge.
        let short = Request::Proof { mac: vec![1; 31] }.encode();
        assert!(Request::decode(&short).is_err());
        assert!(Response::decode(&[CHALLENGE, 1, 2, 3]).is_err());
    }

    #[test]
    fn an_older_hello_names_both_versions() {
        // Version 1's hello: magic, version, rank, size, then the secret.
        let mut v1 = vec![HELLO];
        v1.extend_from_slice(&MAGIC);
        v1.extend_from_slice(&1u16.to_le_bytes());
        v1.extend_from_slice(&[0; 8]);
        v1.extend_from_slice(&[2, 0, b'a', b'b']);
        let e = format!("{:#}", Request::decode(&v1).unwrap_err());
        let speaks = format!("speaks {VERSION}");
        assert!(e.contains("version 1") && e.contains(&speaks), "{e}");
    }
}
