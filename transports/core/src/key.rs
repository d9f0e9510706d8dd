//! Remote keys: what a peer needs to read or write a registered region.
//!
//! A key is a base address, a length and an opaque, length-prefixed blob
//! (verbs: the 4-byte rkey; UCX: a packed rkey of tens to hundreds of
//! bytes; libfabric: the 8-byte MR key; TCP: a registration id and check
//! word). The blob is capped at [`MAX_KEY_BLOB`] and everything about it is
//! checked on arrival: nothing from the wire is trusted.

/// Largest opaque key blob accepted from the wire.
pub const MAX_KEY_BLOB: usize = 1024;

/// A remote key as it crosses the wire.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RemoteKey {
    /// Base address (or offset origin) of the registered range at the owner.
    pub addr: u64,
    /// Length in bytes of the registered range.
    pub len: u64,
    /// Opaque transport-specific bytes.
    pub blob: Vec<u8>,
}

/// Why a key from the wire was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The encoding ends before the fixed fields or the declared blob.
    #[error("remote key truncated: {have} bytes, need {need}")]
    Truncated {
        /// Bytes available.
        have: usize,
        /// Bytes the encoding needs.
        need: usize,
    },
    /// The declared blob length (the value, in bytes) is over
    /// [`MAX_KEY_BLOB`].
    #[error("remote key blob of {0} bytes exceeds the {MAX_KEY_BLOB}-byte cap")]
    TooLong(usize),
    /// `addr + len` does not fit in 64 bits.
    #[error("remote key range {addr:#x}+{len} overflows")]
    Overflow {
        /// The key's base address.
        addr: u64,
        /// The key's length in bytes.
        len: u64,
    },
}

impl RemoteKey {
    /// Encoded size: addr (8) + len (8) + blob length (2) + blob.
    pub fn encoded_len(&self) -> usize {
        18 + self.blob.len()
    }

    /// Append the little-endian encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(self.blob.len() <= MAX_KEY_BLOB, "local key blob over cap");
        out.extend_from_slice(&self.addr.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&(self.blob.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.blob);
    }

    /// Decode from the front of `buf`; returns the key and bytes consumed.
    pub fn decode(buf: &[u8]) -> Result<(RemoteKey, usize), KeyError> {
        if buf.len() < 18 {
            return Err(KeyError::Truncated {
                have: buf.len(),
                need: 18,
            });
        }
        let addr = u64::from_le_bytes(buf[0..8].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
        let blen = u16::from_le_bytes(buf[16..18].try_into().expect("2 bytes")) as usize;
        if blen > MAX_KEY_BLOB {
            return Err(KeyError::TooLong(blen));
        }
        if buf.len() < 18 + blen {
            return Err(KeyError::Truncated {
                have: buf.len(),
                need: 18 + blen,
            });
        }
        if addr.checked_add(len).is_none() {
            return Err(KeyError::Overflow { addr, len });
        }
        let key = RemoteKey {
            addr,
            len,
            blob: buf[18..18 + blen].to_vec(),
        };
        Ok((key, 18 + blen))
    }

    /// Check that `[offset, offset+n)` lies inside this key's range.
    pub fn check_range(&self, offset: u64, n: u64) -> Result<(), String> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(format!(
                "range {offset}+{n} is outside the registered {} bytes",
                self.len
            )),
        }
    }
}

pub use KeyError as RemoteKeyError;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let k = RemoteKey {
            addr: 0x1000,
            len: 4096,
            blob: vec![1, 2, 3],
        };
        let mut v = Vec::new();
        k.encode(&mut v);
        v.push(99);
        let (d, n) = RemoteKey::decode(&v).unwrap();
        assert_eq!(d, k);
        assert_eq!(n, k.encoded_len());
    }

    #[test]
    fn rejects_bad_keys() {
        assert!(matches!(
            RemoteKey::decode(&[0; 10]),
            Err(KeyError::Truncated { .. })
        ));
        let mut v = vec![0; 16];
        v.extend_from_slice(&(2000u16).to_le_bytes());
        assert_eq!(RemoteKey::decode(&v), Err(KeyError::TooLong(2000)));
        let mut v = vec![0; 16];
        v.extend_from_slice(&(5u16).to_le_bytes());
        v.extend_from_slice(&[1, 2]);
        assert!(matches!(
            RemoteKey::decode(&v),
            Err(KeyError::Truncated { .. })
        ));
        let mut v = u64::MAX.to_le_bytes().to_vec();
        v.extend_from_slice(&2u64.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        assert!(matches!(
            RemoteKey::decode(&v),
            Err(KeyError::Overflow { .. })
        ));
    }

    #[test]
    fn range_check() {
        let k = RemoteKey {
            addr: 0,
            len: 100,
            blob: vec![],
        };
        assert!(k.check_range(0, 100).is_ok());
        assert!(k.check_range(1, 100).is_err());
        assert!(k.check_range(u64::MAX, 2).is_err());
    }
}
