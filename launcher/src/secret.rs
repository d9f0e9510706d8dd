//! The per-job secret every bootstrap connection must present.

use std::fs::File;
use std::io::Read;

use anyhow::{Context, Result};

/// 32 random bytes from the kernel, as 64 hex digits (safe in an
/// environment variable).
pub fn generate() -> Result<String> {
    let mut bytes = [0u8; 32];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("cannot read /dev/urandom to make the job secret")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_are_hex_and_differ() {
        let a = super::generate().unwrap();
        let b = super::generate().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
