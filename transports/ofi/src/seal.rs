//! ovbench's envelope around a libfabric MR key.
//!
//! A libfabric key is a bare 64-bit number. tcp;ofi_rxm checks it at the
//! target, but shm in 1.17 never answers an access through a wrong or
//! dropped key, so the initiator would wait forever. The envelope carries
//! the key, the base address and length of the registration, a
//! registration serial number and a checksum over everything; [`unseal`]
//! checks all of them before anything is posted. The checksum (FNV-1a)
//! catches corruption, truncation and mix-ups; it is not an authenticator.

use ovbench_core::{RemoteKey, MAX_KEY_BLOB};

/// Bytes in front of the packed rkey: magic, base, length, serial, packed
/// length and checksum.
pub(crate) const SEAL_LEN: usize = 4 + 8 + 8 + 8 + 2 + 8;
const MAGIC: [u8; 4] = *b"OVFK";
/// Where the checksum sits in the envelope.
const SUM_AT: usize = SEAL_LEN - 8;

fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Wrap the key bytes of registration number `serial` covering
/// `addr..addr+len`.
pub(crate) fn seal(addr: u64, len: u64, serial: u64, packed: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(SEAL_LEN + packed.len());
    v.extend_from_slice(&MAGIC);
    v.extend_from_slice(&addr.to_le_bytes());
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(&serial.to_le_bytes());
    v.extend_from_slice(&(packed.len() as u16).to_le_bytes());
    let sum = fnv1a(&[&v, packed]);
    v.extend_from_slice(&sum.to_le_bytes());
    v.extend_from_slice(packed);
    v
}

/// A checked key: its checksum (which names it) and the key bytes.
pub(crate) struct Sealed<'a> {
    pub sum: u64,
    pub packed: &'a [u8],
}

/// The checksum of a key this side sealed (for revocation).
pub(crate) fn sum_of(blob: &[u8]) -> u64 {
    u64::from_le_bytes(blob[SUM_AT..SEAL_LEN].try_into().expect("a sealed blob"))
}

/// Check a key from the wire: exact length, magic, checksum, and the same
/// base and length as the key says (a key claiming more than was
/// registered is refused).
pub(crate) fn unseal(key: &RemoteKey) -> Result<Sealed<'_>, String> {
    let b = &key.blob;
    if b.len() <= SEAL_LEN || b.len() > MAX_KEY_BLOB {
        return Err(format!(
            "libfabric key blob of {} bytes (must be {}..={MAX_KEY_BLOB})",
            b.len(),
            SEAL_LEN + 1
        ));
    }
    if b[..4] != MAGIC {
        return Err("the key blob is not an ovbench libfabric key".into());
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
    if fnv1a(&[&b[..SUM_AT], packed]) != sum {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_keys_reject_damage() {
        let key = RemoteKey {
            addr: 0x1000,
            len: 4096,
            blob: seal(0x1000, 4096, 7, &[1, 2, 3, 4, 5]),
        };
        let s = unseal(&key).unwrap();
        assert_eq!(s.packed, &[1, 2, 3, 4, 5]);
        assert_eq!(s.sum, sum_of(&key.blob));
        let mut k = key.clone();
        k.blob.pop();
        assert!(unseal(&k).is_err());
        let mut k = key.clone();
        k.blob.push(0);
        assert!(unseal(&k).is_err());
        let mut k = key.clone();
        *k.blob.last_mut().unwrap() ^= 1;
        assert!(unseal(&k).err().unwrap().contains("checksum"));
        let mut k = key.clone();
        k.len = 8192;
        assert!(unseal(&k).err().unwrap().contains("registered"));
        let mut k = key.clone();
        k.blob.iter_mut().for_each(|b| *b ^= 0xff);
        assert!(unseal(&k).is_err());
        // Same memory, next registration: a different key.
        assert_ne!(sum_of(&seal(0x1000, 4096, 8, &[1, 2, 3, 4, 5])), s.sum);
    }
}
