//! The frame format on a TCP connection and its validation.
//!
//! Every frame starts with a fixed [`HDR_LEN`]-byte header; `len` data bytes
//! may follow. Nothing in a header is trusted: [`Header::decode`] checks the
//! magic, the kind, the reserved bytes and the length caps, and the
//! engine checks keys and ranges before touching memory.

use ovbench_core::fabric::check_word::{self, CheckWord};
use ovbench_core::MrHandle;

/// Bytes in a frame header.
pub const HDR_LEN: usize = 44;
/// First bytes of every frame ("OVTC").
pub const MAGIC: u32 = 0x4354_564f;
/// Largest one-sided transfer accepted from the wire (caps what a bad
/// frame can make the engine read and discard).
pub const MAX_RMA_LEN: u64 = 1 << 36;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A two-sided message: `len` bytes of user header and payload.
    Msg = 1,
    /// An emulated write: `len` data bytes follow for registration `reg`.
    WriteReq = 2,
    /// The target placed write `id` (status 0) or rejected it.
    WriteAck = 3,
    /// An emulated read of `len` bytes from registration `reg`.
    ReadReq = 4,
    /// The reply to read `id`: `len` data bytes follow (status 0) or none.
    ReadResp = 5,
    /// The sender is shutting down cleanly; nothing more will come.
    Bye = 6,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Msg,
            2 => Kind::WriteReq,
            3 => Kind::WriteAck,
            4 => Kind::ReadReq,
            5 => Kind::ReadResp,
            6 => Kind::Bye,
            _ => return None,
        })
    }
}

/// Why a target refused a one-sided request (the `status` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    UnknownRegistration = 1,
    BadCheckWord = 2,
    OutOfRange = 3,
}

impl Refusal {
    pub fn from_status(s: u32) -> Option<Refusal> {
        Some(match s {
            1 => Refusal::UnknownRegistration,
            2 => Refusal::BadCheckWord,
            3 => Refusal::OutOfRange,
            _ => return None,
        })
    }
    pub fn describe(self) -> &'static str {
        match self {
            Refusal::UnknownRegistration => {
                "the key names no live registration (deregistered or forged)"
            }
            Refusal::BadCheckWord => {
                "the key's check word does not match the registration (forged or garbled key)"
            }
            Refusal::OutOfRange => "the range lies outside the registration",
        }
    }
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    /// Refusal code for acks and read responses; 0 = success.
    pub status: u32,
    /// Request id chosen by the initiator.
    pub id: u64,
    /// Offset inside the registration.
    pub offset: u64,
    /// Data bytes following (Msg, WriteReq, ReadResp) or requested (ReadReq).
    pub len: u64,
    /// Registration id from the key blob.
    pub reg: u32,
    /// Check word from the key blob.
    pub check: u64,
}

impl Header {
    pub fn new(kind: Kind) -> Header {
        Header {
            kind,
            status: 0,
            id: 0,
            offset: 0,
            len: 0,
            reg: 0,
            check: 0,
        }
    }

    pub fn encode(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = self.kind as u8;
        b[5..8].copy_from_slice(&self.status.to_le_bytes()[..3]);
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..24].copy_from_slice(&self.offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.len.to_le_bytes());
        b[32..36].copy_from_slice(&self.reg.to_le_bytes());
        b[36..44].copy_from_slice(&self.check.to_le_bytes());
        b
    }

    /// Decode and validate; `max_msg` caps a two-sided message's length.
    pub fn decode(b: &[u8; HDR_LEN], max_msg: usize) -> Result<Header, String> {
        let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if magic != MAGIC {
            return Err(format!(
                "bad frame magic {magic:#010x} (expected {MAGIC:#010x}): not an ovbench TCP peer, or the stream is corrupt"
            ));
        }
        let kind = Kind::from_u8(b[4]).ok_or_else(|| format!("unknown frame kind {}", b[4]))?;
        let status = u32::from_le_bytes([b[5], b[6], b[7], 0]);
        let u64at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let h = Header {
            kind,
            status,
            id: u64at(8),
            offset: u64at(16),
            len: u64at(24),
            reg: u32::from_le_bytes([b[32], b[33], b[34], b[35]]),
            check: u64at(36),
        };
        match kind {
            Kind::Msg if h.len > max_msg as u64 => Err(format!(
                "message of {} bytes exceeds the {max_msg}-byte eager buffer",
                h.len
            )),
            Kind::WriteReq | Kind::ReadReq | Kind::ReadResp if h.len > MAX_RMA_LEN => Err(format!(
                "one-sided transfer of {} bytes exceeds the {MAX_RMA_LEN}-byte cap",
                h.len
            )),
            Kind::ReadResp if h.status != 0 && h.len != 0 => {
                Err("a refused read response carries data".to_string())
            }
            Kind::WriteAck | Kind::Bye if h.len != 0 => {
                Err(format!("a {kind:?} frame carries {} data bytes", h.len))
            }
            _ => Ok(h),
        }
    }
}

/// The TCP key blob: registration id and check word (the core kit's
/// check-word blob).
pub fn key_blob(reg: u32, check: u64) -> Vec<u8> {
    check_word::check_blob(MrHandle(reg), CheckWord(check))
}

/// Parse a key blob; `None` when its length is wrong.
pub fn parse_key_blob(blob: &[u8]) -> Option<(u32, u64)> {
    check_word::parse_check_blob(blob).map(|(h, c)| (h.0, c.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let mut h = Header::new(Kind::WriteReq);
        h.id = 7;
        h.offset = 99;
        h.len = 1 << 20;
        h.reg = 3;
        h.check = 0xdead_beef_0123_4567;
        assert_eq!(Header::decode(&h.encode(), 1024), Ok(h));
    }

    #[test]
    fn header_rejects_garbage() {
        let mut h = Header::new(Kind::Msg);
        h.len = 2000;
        assert!(Header::decode(&h.encode(), 1024).is_err());
        let mut b = Header::new(Kind::Bye).encode();
        b[0] ^= 1;
        assert!(Header::decode(&b, 1024).unwrap_err().contains("magic"));
        let mut b = Header::new(Kind::Bye).encode();
        b[4] = 77;
        assert!(Header::decode(&b, 1024).unwrap_err().contains("kind"));
        let mut h = Header::new(Kind::ReadReq);
        h.len = MAX_RMA_LEN + 1;
        assert!(Header::decode(&h.encode(), 1024).is_err());
        let mut h = Header::new(Kind::ReadResp);
        h.status = 1;
        h.len = 4;
        assert!(Header::decode(&h.encode(), 1024).is_err());
    }

    #[test]
    fn key_blob_roundtrip() {
        assert_eq!(parse_key_blob(&key_blob(5, 42)), Some((5, 42)));
        assert_eq!(parse_key_blob(&[0; 11]), None);
        assert_eq!(parse_key_blob(&[0; 13]), None);
    }
}
