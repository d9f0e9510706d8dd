//! `--verify`: fill send buffers with a pattern that depends on the size
//! and the sending rank, clear receive buffers, and check what arrived —
//! all outside the timed region.
//!
//! Two checks per size. After the timed loop, the receive buffer holds the
//! last timed message: it is checked ([`Which::LastTimed`]). The timed
//! messages before it landed in the same buffer and were overwritten, so
//! a message corrupted in one of them would go unseen; hence, still
//! outside the timed region (after the size's CPU and operation counts
//! are taken), a **verification pass** ([`Which::Pass`]) repeats the
//! size's exchange for [`pass_len`] iterations — min(timed messages,
//! [`PASS_MAX`]) — one message at a time: each received message is
//! checked, then its bytes zeroed, before the peer may send the next one
//! (latency: the ping-pong's reply, or the next read; bw and msgrate: a
//! zero-byte acknowledgement per message; bibw: each side waits for the
//! other's message before posting its next receive). A mismatch is an
//! error naming the receiving rank, the sender, the size, the iteration,
//! the offset and the expected and received bytes; the job exits with
//! status 1.
//!
//! Where the protocol owns the last byte of a message (raw write's
//! completion marker), that byte is neither checked nor cleared.

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

/// Zero the first `n` bytes of `buf` (the checked ones: a protocol-owned
/// marker after them keeps its value).
pub fn clear_first(comm: &mut dyn Communicator, buf: Buf, n: usize) -> Result<()> {
    comm.fill(buf, &mut |b: &mut [u8]| {
        let n = n.min(b.len());
        b[..n].fill(0)
    })?;
    Ok(())
}

/// Most iterations of a size's verification pass.
pub const PASS_MAX: u64 = 1000;

/// Iterations of the verification pass after `timed` timed messages.
pub fn pass_len(timed: u64) -> usize {
    timed.min(PASS_MAX) as usize
}

/// Which message a check looks at (named in the error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The last of the timed loop's `n` iterations.
    LastTimed(u64),
    /// Iteration `i` (from 1) of the `of` iterations of the verification pass.
    Pass { i: usize, of: usize },
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Which::LastTimed(n) => write!(f, "iteration {n} (the last timed one)"),
            Which::Pass { i, of } => {
                write!(f, "iteration {i} of {of} of the verification pass")
            }
        }
    }
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
/// last byte, as raw write's completion marker); `which` says which
/// message it is, for the error.
pub fn check(
    comm: &mut dyn Communicator,
    buf: Buf,
    size: usize,
    sender: Rank,
    checked: usize,
    which: Which,
) -> Result<()> {
    let mut bad = None;
    comm.inspect(buf, &mut |b: &[u8]| {
        bad = first_mismatch(b, size, sender, checked);
    })?;
    if let Some((i, want, got)) = bad {
        bail!(
            "{}",
            failure(comm.rank(), sender, size, which, i, want, got)
        );
    }
    Ok(())
}

/// The error of a mismatch.
fn failure(
    rank: Rank,
    sender: Rank,
    size: usize,
    which: Which,
    offset: usize,
    want: u8,
    got: u8,
) -> String {
    format!(
        "--verify failed at size {size}, {which}: rank {rank} received from rank {sender} a wrong byte at offset {offset} (expected {want:#04x}, got {got:#04x})"
    )
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

    #[test]
    fn failure_names_size_iteration_offset_and_bytes() {
        let e = failure(1, 0, 4096, Which::Pass { i: 7, of: 50 }, 2048, 0x12, 0xed);
        assert_eq!(
            e,
            "--verify failed at size 4096, iteration 7 of 50 of the verification pass: rank 1 received from rank 0 a wrong byte at offset 2048 (expected 0x12, got 0xed)"
        );
        let e = failure(0, 1, 8, Which::LastTimed(60), 3, 1, 2);
        assert!(
            e.contains("size 8, iteration 60 (the last timed one)"),
            "{e}"
        );
    }

    #[test]
    fn the_pass_is_bounded() {
        assert_eq!(pass_len(50), 50);
        assert_eq!(pass_len(10_000), 1000);
    }
}
