//! The wire header. Little-endian, fixed [`HEADER_LEN`] bytes, then the
//! encoded key (`key_len` bytes), then the payload (`payload_len` bytes):
//!
//! | bytes | field |
//! |---|---|
//! | 0..2 | magic `0x4F56` |
//! | 2 | version |
//! | 3 | kind ([`Kind`]) |
//! | 4..8 | seq: the message's number from sender to receiver |
//! | 8..12 | tag |
//! | 12..20 | len: the whole message's length |
//! | 20..28 | offset of this packet's payload (or fragment) in the message |
//! | 28..32 | payload_len |
//! | 32..34 | key_len |
//! | 34 | flags ([`FLAG_SYNC`], [`FLAG_READY`], [`FLAG_INTERNAL`]) |
//! | 35 | reserved, zero |
//!
//! A one-packet eager message of the user's with no flags has a header
//! of its own, [`short`], of 16 bytes; its fourth byte is
//! [`Kind::Short`].
//!
//! [`decode`] checks every field against the packet's real length; the
//! engine then checks sequence, state and ranges against what it knows.

pub mod short;

use crate::Key;

/// First two bytes of every packet, little-endian; anything else is not an
/// ovbench peer.
pub const MAGIC: u16 = 0x4F56;
/// Wire format version; both sides must speak the same one (2: the
/// short header).
pub const VERSION: u8 = 2;
/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 36;
/// Largest opaque key blob accepted (as `ovbench_core::MAX_KEY_BLOB`).
pub const MAX_KEY_BLOB: usize = 1024;

/// The sender asks for an acknowledgement once the receive is matched.
pub const FLAG_SYNC: u8 = 1;
/// Ready mode: the receive must already be posted.
pub const FLAG_READY: u8 = 2;
/// Internal traffic (barrier); matches only internal receives.
pub const FLAG_INTERNAL: u8 = 4;
const KNOWN_FLAGS: u8 = FLAG_SYNC | FLAG_READY | FLAG_INTERNAL;

/// Message kinds. "→R" travels sender to receiver, "→S" back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// →R first packet of an eager message (payload inside).
    Eager = 1,
    /// →R a later packet of an eager train.
    EagerFrag = 2,
    /// →R rdma-write rendezvous request.
    RtsWrite = 3,
    /// →R rdma-read rendezvous request with the sender's key.
    RtsRead = 4,
    /// →S clear to send, with the receiver's key.
    Cts = 5,
    /// →R the sender's write (at `offset`, `len` bytes) is visible.
    FinWrite = 6,
    /// →S the receiver's read finished.
    FinRead = 7,
    /// →R pipelined request with the first fragment inside.
    PipeRts = 8,
    /// →S the pipelined request was matched.
    PipeAck = 9,
    /// →S write fragment at `offset` of `len` bytes into this key.
    Put = 10,
    /// →S a synchronous eager send was matched.
    SyncAck = 11,
    /// →R a raw send (one packet).
    RawSend = 12,
    /// either way: the key of the raw buffer for `tag`.
    RawKey = 13,
    /// →R a one-packet eager message in the short header ([`short`]);
    /// decoded, it is an [`Kind::Eager`] packet.
    Short = 14,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        use Kind::*;
        Some(match v {
            1 => Eager,
            2 => EagerFrag,
            3 => RtsWrite,
            4 => RtsRead,
            5 => Cts,
            6 => FinWrite,
            7 => FinRead,
            8 => PipeRts,
            9 => PipeAck,
            10 => Put,
            11 => SyncAck,
            12 => RawSend,
            13 => RawKey,
            14 => Short,
            _ => return None,
        })
    }
    /// Whether this kind must (true) or must not (false) carry a key.
    fn has_key(self) -> bool {
        matches!(self, Kind::RtsRead | Kind::Cts | Kind::Put | Kind::RawKey)
    }
    /// Whether this kind may carry payload bytes.
    fn has_payload(self) -> bool {
        matches!(
            self,
            Kind::Eager | Kind::EagerFrag | Kind::PipeRts | Kind::RawSend | Kind::Short
        )
    }
}

/// A decoded header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the packet is.
    pub kind: Kind,
    /// The message's number from sender to receiver (one counter per
    /// ordered pair of ranks); control packets carry the number of the
    /// message they are about (a raw key carries 0).
    pub seq: u32,
    /// The message's tag.
    pub tag: u32,
    /// The whole message's length in bytes (not this packet's).
    pub len: u64,
    /// Byte offset in the message of this packet's payload, or of the
    /// fragment a PUT or FIN is about.
    pub offset: u64,
    /// Payload bytes in this packet, after the header and key.
    pub payload_len: u32,
    /// [`FLAG_SYNC`], [`FLAG_READY`], [`FLAG_INTERNAL`], or'ed.
    pub flags: u8,
    /// The key carried: present exactly for kinds that need one (RTS-read,
    /// CTS, PUT, raw key).
    pub key: Option<Key>,
}

impl Header {
    /// A header with no key or payload.
    #[inline]
    pub fn ctrl(kind: Kind, seq: u32, tag: u32, len: u64) -> Header {
        Header {
            kind,
            seq,
            tag,
            len,
            offset: 0,
            payload_len: 0,
            flags: 0,
            key: None,
        }
    }

    /// Header bytes (fixed part plus key); the payload follows separately.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// [`Self::encode`] into `out` (cleared first), reusing its allocation.
    #[inline]
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let key_len = self.key.as_ref().map_or(0, |k| 18 + k.blob.len());
        out.clear();
        out.reserve(HEADER_LEN + key_len);
        out.extend_from_slice(&self.fixed(key_len as u16));
        if let Some(k) = &self.key {
            out.extend_from_slice(&k.addr.to_le_bytes());
            out.extend_from_slice(&k.len.to_le_bytes());
            out.extend_from_slice(&(k.blob.len() as u16).to_le_bytes());
            out.extend_from_slice(&k.blob);
        }
    }

    /// The fixed part (see [`fixed_bytes`]), the key `key_len` bytes.
    #[inline]
    fn fixed(&self, key_len: u16) -> [u8; HEADER_LEN] {
        fixed_bytes(
            self.kind,
            self.seq,
            self.tag,
            self.len,
            self.offset,
            self.payload_len,
            key_len,
            self.flags,
        )
    }
}

/// The fixed part, built from whole words: built byte by byte, it was
/// read back in one wide copy that waited for every narrow store to
/// retire (a store-forwarding stall per message).
#[allow(clippy::too_many_arguments)]
#[inline]
fn fixed_bytes(
    kind: Kind,
    seq: u32,
    tag: u32,
    len: u64,
    offset: u64,
    payload_len: u32,
    key_len: u16,
    flags: u8,
) -> [u8; HEADER_LEN] {
    let w0 = u64::from(MAGIC)
        | u64::from(VERSION) << 16
        | u64::from(kind as u8) << 24
        | u64::from(seq) << 32;
    let w1 = u64::from(tag) | (len & 0xffff_ffff) << 32;
    let w2 = len >> 32 | (offset & 0xffff_ffff) << 32;
    let w3 = offset >> 32 | u64::from(payload_len) << 32;
    let w4 = u32::from(key_len) | u32::from(flags) << 16;
    let lo = u128::from(w0) | u128::from(w1) << 64;
    let hi = u128::from(w2) | u128::from(w3) << 64;
    let mut h = [0u8; HEADER_LEN];
    h[..16].copy_from_slice(&lo.to_le_bytes());
    h[16..32].copy_from_slice(&hi.to_le_bytes());
    h[32..].copy_from_slice(&w4.to_le_bytes());
    h
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Decode a key: addr, len, u16 blob length, blob — exactly `b.len()` bytes.
pub fn decode_key(b: &[u8]) -> Result<Key, String> {
    if b.len() < 18 {
        return Err(format!("key of {} bytes is shorter than 18", b.len()));
    }
    let addr = u64_at(b, 0);
    let len = u64_at(b, 8);
    let blen = u16_at(b, 16) as usize;
    if blen > MAX_KEY_BLOB {
        return Err(format!(
            "key blob of {blen} bytes exceeds the {MAX_KEY_BLOB}-byte cap"
        ));
    }
    if b.len() != 18 + blen {
        return Err(format!(
            "key blob says {blen} bytes but {} follow",
            b.len() - 18
        ));
    }
    if addr.checked_add(len).is_none() {
        return Err(format!("key range {addr:#x}+{len} overflows"));
    }
    Ok(Key {
        addr,
        len,
        blob: b[18..].to_vec(),
    })
}

/// The fixed part of a checked packet: everything but the key, whose
/// `key_len` bytes follow the fixed header. A plain `Copy` value, so the
/// hot path (an eager message) handles no `Option<Key>`: moving the full
/// [`Header`] through the arrival path was a visible part of its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixed {
    /// As [`Header::kind`].
    pub kind: Kind,
    /// As [`Header::seq`].
    pub seq: u32,
    /// As [`Header::tag`].
    pub tag: u32,
    /// As [`Header::len`].
    pub len: u64,
    /// As [`Header::offset`].
    pub offset: u64,
    /// As [`Header::payload_len`].
    pub payload_len: u32,
    /// As [`Header::flags`].
    pub flags: u8,
    /// Bytes of the encoded key after the fixed header; 0 for a kind
    /// without one.
    pub key_len: usize,
    /// Bytes of the fixed header: [`HEADER_LEN`], or [`short::SHORT_LEN`].
    pub header_len: usize,
}

impl Fixed {
    /// Where the payload starts.
    #[inline]
    pub fn payload_start(&self) -> usize {
        self.header_len + self.key_len
    }

    /// The key that follows the fixed header in `b`, checked (`None` for a
    /// kind without one).
    pub fn key(&self, b: &[u8]) -> Result<Option<Key>, String> {
        if self.key_len == 0 {
            return Ok(None);
        }
        decode_key(&b[HEADER_LEN..HEADER_LEN + self.key_len]).map(Some)
    }

    /// The full header, with `key`.
    pub fn with_key(self, key: Option<Key>) -> Header {
        Header {
            kind: self.kind,
            seq: self.seq,
            tag: self.tag,
            len: self.len,
            offset: self.offset,
            payload_len: self.payload_len,
            flags: self.flags,
            key,
        }
    }
}

/// Check a packet's fixed header and lengths (every check of [`decode`]
/// except the key's own fields).
#[inline(always)]
pub fn decode_fixed(b: &[u8]) -> Result<Fixed, String> {
    if b.len() < 4 {
        return Err(format!(
            "message of {} bytes is shorter than any header",
            b.len()
        ));
    }
    let magic = u16_at(b, 0);
    if magic != MAGIC {
        return Err(format!(
            "bad magic {magic:#06x} (expected {MAGIC:#06x}): not an ovbench peer or corrupted stream"
        ));
    }
    if b[2] != VERSION {
        return Err(format!(
            "protocol version {} but this build speaks {VERSION}: run the same ovbench on every rank",
            b[2]
        ));
    }
    let kind = Kind::from_u8(b[3]).ok_or_else(|| format!("unknown message kind {}", b[3]))?;
    if kind == Kind::Short {
        return short::decode(b);
    }
    if b.len() < HEADER_LEN {
        return Err(format!(
            "{kind:?} message of {} bytes is shorter than the {HEADER_LEN}-byte header",
            b.len()
        ));
    }
    let payload_len = u32_at(b, 28);
    let key_len = u16_at(b, 32) as usize;
    let flags = b[34];
    if flags & !KNOWN_FLAGS != 0 {
        return Err(format!("unknown flags {flags:#04x} in {kind:?}"));
    }
    if b[35] != 0 {
        return Err(format!("reserved header byte is {:#04x}, not zero", b[35]));
    }
    if kind.has_key() != (key_len > 0) {
        return Err(format!(
            "{kind:?} with a key of {key_len} bytes: this kind {} a key",
            if kind.has_key() {
                "needs"
            } else {
                "carries no"
            }
        ));
    }
    if !kind.has_payload() && payload_len != 0 {
        return Err(format!("{kind:?} carries {payload_len} payload bytes"));
    }
    let want = HEADER_LEN + key_len + payload_len as usize;
    if b.len() != want {
        return Err(format!(
            "{kind:?} of {} bytes, but the header accounts for {want} (key {key_len}, payload {payload_len})",
            b.len()
        ));
    }
    let f = Fixed {
        kind,
        seq: u32_at(b, 4),
        tag: u32_at(b, 8),
        len: u64_at(b, 12),
        offset: u64_at(b, 20),
        payload_len,
        flags,
        key_len,
        header_len: HEADER_LEN,
    };
    if f.offset
        .checked_add(payload_len as u64)
        .map_or(true, |end| end > f.len)
    {
        return Err(format!(
            "{kind:?} payload {}+{payload_len} lies outside the {}-byte message",
            f.offset, f.len
        ));
    }
    Ok(f)
}

/// Decode and check a packet; returns the header and where the payload starts.
pub fn decode(b: &[u8]) -> Result<(Header, usize), String> {
    let f = decode_fixed(b)?;
    let key = f.key(b)?;
    Ok((f.with_key(key), f.payload_start()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            kind: Kind::Cts,
            seq: 7,
            tag: 3,
            len: 4096,
            offset: 0,
            payload_len: 0,
            flags: FLAG_SYNC,
            key: Some(Key {
                addr: 0x1000,
                len: 4096,
                blob: vec![9, 8, 7],
            }),
        }
    }

    #[test]
    fn roundtrip() {
        let h = sample();
        let b = h.encode();
        let (d, start) = decode(&b).unwrap();
        assert_eq!(d, h);
        assert_eq!(start, b.len());
    }

    #[test]
    fn every_field_is_checked() {
        let good = sample().encode();
        let bad = |f: &dyn Fn(&mut Vec<u8>), what: &str| {
            let mut b = good.clone();
            f(&mut b);
            let e = decode(&b).unwrap_err();
            assert!(e.contains(what), "{e:?} lacks {what:?}");
        };
        bad(&|b| b[0] ^= 1, "magic");
        bad(&|b| b[2] = 9, "version");
        bad(&|b| b[3] = 99, "unknown message kind");
        bad(&|b| b[34] = 0x80, "unknown flags");
        bad(&|b| b[35] = 1, "reserved");
        bad(&|b| b[28] = 1, "payload bytes");
        bad(&|b| b.truncate(20), "shorter");
        bad(&|b| b.push(0), "accounts for");
        bad(&|b| b[32] = 0, "needs a key");
        // Key blob length larger than what follows.
        bad(&|b| b[HEADER_LEN + 16] = 200, "key blob says");
        // Blob over the cap.
        bad(
            &|b| b[HEADER_LEN + 16..HEADER_LEN + 18].copy_from_slice(&2000u16.to_le_bytes()),
            "cap",
        );
        // Key range overflow.
        bad(
            &|b| b[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&u64::MAX.to_le_bytes()),
            "overflows",
        );
    }

    #[test]
    fn payload_outside_message_rejected() {
        let mut h = Header::ctrl(Kind::EagerFrag, 1, 0, 10);
        h.offset = 8;
        h.payload_len = 4;
        let mut b = h.encode();
        b.extend_from_slice(&[0; 4]);
        assert!(decode(&b).unwrap_err().contains("outside"));
        let mut h = Header::ctrl(Kind::Eager, 1, 0, u64::MAX);
        h.offset = u64::MAX;
        h.payload_len = 1;
        let mut b = h.encode();
        b.push(0);
        assert!(decode(&b).unwrap_err().contains("outside"));
    }
}
