//! The per-job secret, and how a bootstrap connection proves it holds it
//! without sending it.
//!
//! The service sends a fresh random nonce per connection; the rank answers
//! with HMAC-SHA256, keyed with the secret, over a label, the nonce, its
//! rank and the job size. An answer recorded on one connection is useless
//! on another (the nonce differs), and one computed for rank 1 does not
//! admit rank 0 (the rank is hashed).

use std::fs::File;
use std::io::Read;

use anyhow::{Context, Result};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::wire::{NONCE_LEN, PROOF_LEN};

/// The job secret as a rank holds it. Its `Debug` withholds it, so no
/// error or log line that prints it, or a struct holding it (a
/// [`crate::RankEnv`]), can leak it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct JobSecret(String);

impl JobSecret {
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl From<String> for JobSecret {
    fn from(s: String) -> JobSecret {
        JobSecret(s)
    }
}

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt("(withheld)", f)
    }
}

/// Separates these tags from any other use of the same key.
const LABEL: &[u8] = b"ovbench bootstrap proof v2\0";

/// `N` random bytes from the kernel.
fn random<const N: usize>(what: &str) -> Result<[u8; N]> {
    let mut bytes = [0u8; N];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .with_context(|| format!("cannot read /dev/urandom to make {what}"))?;
    Ok(bytes)
}

/// 32 random bytes from the kernel, as 64 hex digits (safe in an
/// environment variable).
pub fn generate() -> Result<String> {
    let bytes: [u8; 32] = random("the job secret")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A fresh challenge for one connection.
pub fn nonce() -> Result<[u8; NONCE_LEN]> {
    random("a bootstrap challenge")
}

fn keyed(secret: &[u8], nonce: &[u8; NONCE_LEN], rank: u32, size: u32) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC accepts any key");
    mac.update(LABEL);
    mac.update(nonce);
    mac.update(&rank.to_le_bytes());
    mac.update(&size.to_le_bytes());
    mac
}

/// A rank's answer to `nonce`: HMAC-SHA256(secret, label ‖ nonce ‖ rank ‖
/// size), the integers little-endian `u32`.
pub fn proof(secret: &[u8], nonce: &[u8; NONCE_LEN], rank: u32, size: u32) -> [u8; PROOF_LEN] {
    keyed(secret, nonce, rank, size)
        .finalize()
        .into_bytes()
        .into()
}

/// Whether `answer` is [`proof`] of `secret` for this nonce, rank and
/// size, compared in constant time.
pub fn verify(secret: &[u8], nonce: &[u8; NONCE_LEN], rank: u32, size: u32, answer: &[u8]) -> bool {
    keyed(secret, nonce, rank, size)
        .verify_slice(answer)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hex_and_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }

    #[test]
    fn a_proof_binds_secret_nonce_rank_and_size() {
        let n = [1u8; NONCE_LEN];
        let p = proof(b"key", &n, 1, 4);
        assert!(verify(b"key", &n, 1, 4, &p));
        assert!(!verify(b"kez", &n, 1, 4, &p));
        assert!(!verify(b"key", &[2; NONCE_LEN], 1, 4, &p));
        assert!(!verify(b"key", &n, 0, 4, &p));
        assert!(!verify(b"key", &n, 1, 5, &p));
        assert!(!verify(b"key", &n, 1, 4, &p[..31]));
        assert!(!verify(b"key", &n, 1, 4, &[]));
        // RFC 4231 test case 2 checks that this is plain HMAC-SHA256.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let tag: [u8; 32] = m.finalize().into_bytes().into();
        assert_eq!(
            tag[..4],
            [0x5b, 0xdc, 0xc1, 0x46],
            "HMAC-SHA256 of RFC 4231 case 2"
        );
    }
}
