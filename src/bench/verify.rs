//! `--verify`: fill send buffers with a pattern that depends on the size
//! and the sending rank, clear receive buffers, and check what arrived —
//! all outside the timed region.

use anyhow::{bail, Result};
use ovbench_core::{Buf, Communicator, Rank};

/// The byte at offset `i` of a `size`-byte message from `sender`.
pub fn pattern(size: usize, sender: Rank, i: usize) -> u8 {
    ((i as u64)
        .wrapping_mul(131)
        .wrapping_add(size as u64 * 7)
        .wrapping_add(u64::from(sender) * 29)
        % 251
        + 1) as u8
}

/// Write the pattern of (`size`, `sender`) into `buf[..size]`.
pub fn fill(comm: &mut dyn Communicator, buf: Buf, size: usize, sender: Rank) -> Result<()> {
    comm.fill(buf, &mut |b: &mut [u8]| {
        for (i, x) in b.iter_mut().take(size).enumerate() {
            *x = pattern(size, sender, i);
        }
    })?;
    Ok(())
}

/// Zero `buf`.
pub fn clear(comm: &mut dyn Communicator, buf: Buf) -> Result<()> {
    comm.fill(buf, &mut |b: &mut [u8]| b.fill(0))?;
    Ok(())
}

/// The first offset in `data[..len]` that differs from the pattern.
pub fn first_mismatch(
    data: &[u8],
    size: usize,
    sender: Rank,
    len: usize,
) -> Option<(usize, u8, u8)> {
    data.iter().take(len).enumerate().find_map(|(i, &got)| {
        let want = pattern(size, sender, i);
        (got != want).then_some((i, want, got))
    })
}

/// Check that `buf` holds the pattern of (`size`, `sender`) in its first
/// `checked` bytes (`size`, or `size − 1` where the protocol owns the
/// last byte, as raw write's completion marker).
pub fn check(
    comm: &dyn Communicator,
    buf: Buf,
    size: usize,
    sender: Rank,
    checked: usize,
) -> Result<()> {
    let mut bad = None;
    comm.inspect(buf, &mut |b: &[u8]| {
        bad = first_mismatch(b, size, sender, checked);
    })?;
    if let Some((i, want, got)) = bad {
        bail!(
            "--verify failed at size {size}: rank {} received from rank {sender} a wrong byte at offset {i} (expected {want:#04x}, got {got:#04x})",
            comm.rank()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_never_zero_and_depends_on_size_and_sender() {
        assert!((0..10_000).all(|i| pattern(64, 0, i) != 0));
        let a: Vec<u8> = (0..64).map(|i| pattern(64, 0, i)).collect();
        let b: Vec<u8> = (0..64).map(|i| pattern(64, 1, i)).collect();
        let c: Vec<u8> = (0..64).map(|i| pattern(128, 0, i)).collect();
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn mismatch_names_the_first_bad_byte() {
        let mut d: Vec<u8> = (0..100).map(|i| pattern(100, 1, i)).collect();
        assert_eq!(first_mismatch(&d, 100, 1, 100), None);
        d[37] ^= 0xff;
        d[80] = 0;
        let (i, want, got) = first_mismatch(&d, 100, 1, 100).unwrap();
        assert_eq!(
            (i, want, got),
            (37, pattern(100, 1, 37), pattern(100, 1, 37) ^ 0xff)
        );
        // Bytes past `len` are not checked.
        assert_eq!(first_mismatch(&d, 100, 1, 30), None);
    }
}
