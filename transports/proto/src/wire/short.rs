//! The short header: a one-packet eager message of the user's, sent in
//! standard or buffered mode (no flags), in [`SHORT_LEN`] bytes instead
//! of the general [`super::HEADER_LEN`]. Little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..2 | magic `0x4F56` |
//! | 2 | version |
//! | 3 | kind ([`super::Kind::Short`]) |
//! | 4..8 | seq |
//! | 8..12 | tag |
//! | 12..16 | len: the payload's length, which is the whole message |
//!
//! The payload follows at once. On arrival [`check`] accepts it with one
//! masked compare: the first word against magic, version, kind and the
//! sequence number the receiver expects, the length against the bytes
//! that really arrived. Anything else goes to [`decode`], which checks
//! the fields one by one and says what is wrong.

use super::{Fixed, Kind, MAGIC, VERSION};

/// Bytes of the short header.
pub const SHORT_LEN: usize = 16;

/// The first word of a short header with sequence number 0.
const FIRST: u64 = MAGIC as u64 | (VERSION as u64) << 16 | (Kind::Short as u64) << 24;

/// The header of a one-packet message of `len` bytes, number `seq` of its
/// (sender, receiver) pair, with `tag`.
#[inline(always)]
pub fn encode(out: &mut [u8; SHORT_LEN], seq: u32, tag: u32, len: u32) {
    let lo = FIRST | u64::from(seq) << 32;
    let hi = u64::from(tag) | u64::from(len) << 32;
    out[..8].copy_from_slice(&lo.to_le_bytes());
    out[8..].copy_from_slice(&hi.to_le_bytes());
}

/// The fast check of an arrived packet `b`: its tag and payload length
/// when it is a short header numbered `want` whose payload is exactly
/// the rest of `b`; `None` for anything else (which may still be a valid
/// packet of another kind, or a short one out of order: [`decode`] and
/// the engine's general path tell).
#[inline(always)]
pub fn check(b: &[u8], want: u32) -> Option<(u32, usize)> {
    let head: &[u8; SHORT_LEN] = b.get(..SHORT_LEN)?.try_into().ok()?;
    let lo = u64::from_le_bytes(head[..8].try_into().ok()?);
    let hi = u64::from_le_bytes(head[8..].try_into().ok()?);
    // One compare: every bit of the first word, and the length against
    // the bytes that came (a body of 2^32 bytes or more never matches a
    // 32-bit length, so the subtraction's width loses nothing).
    let body = (b.len() - SHORT_LEN) as u64;
    let bad = (lo ^ (FIRST | u64::from(want) << 32)) | (body ^ (hi >> 32));
    (bad == 0).then_some((hi as u32, body as usize))
}

/// Check a short header field by field (magic, version and kind already
/// read by the caller): its fixed part as a one-packet eager message.
pub fn decode(b: &[u8]) -> Result<Fixed, String> {
    if b.len() < SHORT_LEN {
        return Err(format!(
            "short message of {} bytes is shorter than its {SHORT_LEN}-byte header",
            b.len()
        ));
    }
    let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let (seq, tag, len) = (word(4), word(8), word(12));
    let body = b.len() - SHORT_LEN;
    if body as u64 != u64::from(len) {
        return Err(format!(
            "short message says {len} payload bytes, but {body} follow its header"
        ));
    }
    Ok(Fixed {
        kind: Kind::Eager,
        seq,
        tag,
        len: u64::from(len),
        offset: 0,
        payload_len: len,
        flags: 0,
        key_len: 0,
        header_len: SHORT_LEN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u32, tag: u32, body: &[u8]) -> Vec<u8> {
        let mut h = [0u8; SHORT_LEN];
        encode(&mut h, seq, tag, body.len() as u32);
        [&h[..], body].concat()
    }

    #[test]
    fn the_check_takes_exactly_the_expected_packet() {
        let p = packet(7, 0xa0b0_c0d0, &[1, 2, 3]);
        assert_eq!(check(&p, 7), Some((0xa0b0_c0d0, 3)));
        assert_eq!(check(&p, 8), None, "another sequence number");
        assert_eq!(check(&p[..p.len() - 1], 7), None, "a byte short");
        assert_eq!(check(&[&p[..], &[0]].concat(), 7), None, "a byte over");
        assert_eq!(check(&p[..SHORT_LEN - 1], 7), None, "a cut header");
        assert_eq!(check(&packet(0, 0, &[]), 0), Some((0, 0)));
    }

    #[test]
    fn every_bit_of_the_first_word_and_the_length_is_checked() {
        let p = packet(0x0102_0304, 9, &[5; 4]);
        for bit in (0..64).chain(96..128) {
            let mut q = p.clone();
            q[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(check(&q, 0x0102_0304), None, "bit {bit} flipped");
        }
    }

    #[test]
    fn decode_reads_it_as_one_eager_packet() {
        let p = packet(3, 4, &[9; 5]);
        let f = decode(&p).unwrap();
        assert_eq!(
            (f.kind, f.seq, f.tag, f.len, f.payload_len),
            (Kind::Eager, 3, 4, 5, 5)
        );
        assert_eq!(f.payload_start(), SHORT_LEN);
        assert!(decode(&p[..p.len() - 1]).unwrap_err().contains("4 follow"));
        assert!(decode(&p[..10]).unwrap_err().contains("shorter"));
    }
}
