//! ovbench's envelope around a library's remote key.
//!
//! A library key from the wire must be checked before the library sees it
//! (UCX's `ucp_ep_rkey_unpack` takes no length and trusts its input;
//! libfabric's shm never answers an access through a wrong key). The
//! envelope carries the base address and length of the registration, a
//! registration serial number, the key's length and a checksum over
//! everything; [`KeySeal::unseal`] checks all of them. The checksum
//! (FNV-1a) catches corruption, truncation and mix-ups; it is not an
//! authenticator.

use super::fnv1a;
use crate::{RemoteKey, MAX_KEY_BLOB};

/// Bytes in front of the library key: magic, base, length, serial, key
/// length and checksum.
pub const SEAL_LEN: usize = 4 + 8 + 8 + 8 + 2 + 8;
/// Where the checksum sits in the envelope.
const SUM_AT: usize = SEAL_LEN - 8;

/// One library's envelope: its magic and the name used in messages.
#[derive(Clone, Copy, Debug)]
pub struct KeySeal {
    /// First four bytes of every key this library seals.
    pub magic: [u8; 4],
    /// The library as messages name it ("UCX", "libfabric").
    pub library: &'static str,
}

/// A checked key: its checksum (which names it) and the library's bytes.
#[derive(Debug)]
pub struct Sealed<'a> {
    /// The envelope's checksum: names this key (e.g. to find it again when
    /// the registration is revoked, see [`sum_of`]).
    pub sum: u64,
    /// The library's own packed key, checked, ready to unpack.
    pub packed: &'a [u8],
}

/// The checksum of a key this side sealed (for revocation).
pub fn sum_of(blob: &[u8]) -> u64 {
    u64::from_le_bytes(blob[SUM_AT..SEAL_LEN].try_into().expect("a sealed blob"))
}

impl KeySeal {
    /// Wrap the library key `packed` of registration number `serial`
    /// covering `addr..addr+len`.
    fn seal(&self, addr: u64, len: u64, serial: u64, packed: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(SEAL_LEN + packed.len());
        v.extend_from_slice(&self.magic);
        v.extend_from_slice(&addr.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(&serial.to_le_bytes());
        v.extend_from_slice(&(packed.len() as u16).to_le_bytes());
        let sum = fnv1a([v.as_slice(), packed]);
        v.extend_from_slice(&sum.to_le_bytes());
        v.extend_from_slice(packed);
        v
    }

    /// The remote key of registration number `serial` covering
    /// `addr..addr+len`, its blob the library key `packed` sealed.
    pub fn key(&self, addr: u64, len: u64, serial: u64, packed: &[u8]) -> RemoteKey {
        RemoteKey {
            addr,
            len,
            blob: self.seal(addr, len, serial, packed),
        }
    }

    /// Check a key from the wire: exact length, magic, checksum, and the
    /// same base and length as the key says (a key claiming more than was
    /// registered is refused).
    pub fn unseal<'k>(&self, key: &'k RemoteKey) -> Result<Sealed<'k>, String> {
        let b = &key.blob;
        if b.len() <= SEAL_LEN || b.len() > MAX_KEY_BLOB {
            return Err(format!(
                "{} key blob of {} bytes (must be {}..={MAX_KEY_BLOB})",
                self.library,
                b.len(),
                SEAL_LEN + 1
            ));
        }
        if b[..4] != self.magic {
            return Err(format!(
                "the key blob is not an ovbench {} key",
                self.library
            ));
        }
        let addr = u64::from_le_bytes(b[4..12].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(b[12..20].try_into().expect("8 bytes"));
        let plen = u16::from_le_bytes(b[28..30].try_into().expect("2 bytes")) as usize;
        let sum = sum_of(b);
        let packed = &b[SEAL_LEN..];
        if packed.len() != plen {
            return Err(format!(
                "the key blob carries {} packed bytes but says {plen}",
                packed.len()
            ));
        }
        if fnv1a([&b[..SUM_AT], packed]) != sum {
            return Err("the key blob's checksum does not match: it was damaged on the way".into());
        }
        if addr != key.addr || len != key.len {
            return Err(format!(
                "the key says {:#x}+{} but was registered as {addr:#x}+{len}",
                key.addr, key.len
            ));
        }
        Ok(Sealed { sum, packed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: KeySeal = KeySeal {
        magic: *b"OVTK",
        library: "test",
    };

    #[test]
    fn sealed_keys_reject_damage() {
        let key = TEST.key(0x1000, 4096, 7, &[1, 2, 3, 4, 5]);
        assert_eq!((key.addr, key.len), (0x1000, 4096));
        let s = TEST.unseal(&key).unwrap();
        assert_eq!(s.packed, &[1, 2, 3, 4, 5]);
        assert_eq!(s.sum, sum_of(&key.blob));
        let mut k = key.clone();
        k.blob.pop();
        assert!(TEST.unseal(&k).is_err());
        let mut k = key.clone();
        k.blob.push(0);
        assert!(TEST.unseal(&k).is_err());
        let mut k = key.clone();
        *k.blob.last_mut().unwrap() ^= 1;
        assert!(TEST.unseal(&k).err().unwrap().contains("checksum"));
        let mut k = key.clone();
        k.len = 8192;
        assert!(TEST.unseal(&k).err().unwrap().contains("registered"));
        let mut k = key.clone();
        k.blob.iter_mut().for_each(|b| *b ^= 0xff);
        assert!(TEST.unseal(&k).is_err());
        // Same memory, next registration: a different key.
        assert_ne!(
            sum_of(&TEST.key(0x1000, 4096, 8, &[1, 2, 3, 4, 5]).blob),
            s.sum
        );
        // Another library's envelope is refused by name.
        let other = KeySeal {
            magic: *b"OVXK",
            library: "other",
        };
        assert!(other
            .unseal(&key)
            .err()
            .unwrap()
            .contains("ovbench other key"));
    }
}
