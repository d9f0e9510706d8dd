//! The counts users give (iterations, warmup, window, steps, repetitions),
//! parsed with their bounds: a count beyond its bound is refused by the
//! parser, naming the option, the bound and why it is there, before any
//! rank starts (exit 2), so that no loop, buffer or virtual clock sized by
//! it can overflow or run for days (docs/exit-codes.md § Resource guards).

#![deny(clippy::arithmetic_side_effects)]

/// Timed iterations a size (latency, bw, bibw, msgrate, overhead,
/// overlap, commtest), and bcast's broadcasts a measurement: each is kept
/// as an 8-byte sample, so 10^9 of them are 8 GB of address space (only
/// touched as they are taken; the tests' runs to be stopped by a signal
/// use 10^9).
pub const MAX_ITERS: u64 = 1_000_000_000;
/// Untimed iterations before the timed ones: 10^9, kept as nothing, but
/// each a message or two.
pub const MAX_WARMUP: u64 = 1_000_000_000;
/// Messages in flight of bw, bibw and msgrate (osu's default is 64): each
/// holds a request, and every window is one sample.
pub const MAX_WINDOW: u64 = 65_536;
/// overlap's computation steps a size, and bcast's measurements a figure.
pub const MAX_STEPS: u64 = 100_000;
/// logp's base repetition cap (×4 below 1 KiB, as logp_test has it).
pub const MAX_ITS: u64 = 1_000_000;

/// `s` as a whole number from `lo` to `hi`; the error says what the count
/// is and the range to give.
fn bounded(s: &str, lo: u64, hi: u64, what: &str) -> Result<u64, String> {
    let t = s.trim();
    let range = format!("give {lo} to {hi}");
    let v: u64 = match t.parse() {
        Ok(v) => v,
        Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(format!("`{s}` is more than {hi} {what}: {range}"))
        }
        Err(_) => return Err(format!("`{s}` is not a whole number: {range}")),
    };
    if v < lo {
        return Err(format!("`{s}` is less than {lo}: {range}"));
    }
    if v > hi {
        return Err(format!("`{s}` is more than {hi} {what}: {range}"));
    }
    Ok(v)
}

/// The same as a `u32` (every bound here fits one).
fn bounded_u32(s: &str, lo: u64, hi: u64, what: &str) -> Result<u32, String> {
    let v = bounded(s, lo, hi, what)?;
    u32::try_from(v).map_err(|_| format!("`{s}` is more than {} {what}", u32::MAX))
}

/// The same as a `usize`.
fn bounded_usize(s: &str, lo: u64, hi: u64, what: &str) -> Result<usize, String> {
    let v = bounded(s, lo, hi, what)?;
    usize::try_from(v).map_err(|_| format!("`{s}` is more than {} {what}", usize::MAX))
}

/// `--iters`: timed iterations, 1 to [`MAX_ITERS`].
pub fn iters(s: &str) -> Result<u64, String> {
    bounded(
        s,
        1,
        MAX_ITERS,
        "timed iterations (each is kept as an 8-byte sample)",
    )
}

/// `--warmup`: untimed iterations, 0 to [`MAX_WARMUP`].
pub fn warmup(s: &str) -> Result<u64, String> {
    bounded(s, 0, MAX_WARMUP, "untimed iterations")
}

/// `--window`: messages in flight, 1 to [`MAX_WINDOW`].
pub fn window(s: &str) -> Result<u32, String> {
    bounded_u32(
        s,
        1,
        MAX_WINDOW,
        "messages in flight (each holds a request)",
    )
}

/// overlap's `--steps`, 1 to [`MAX_STEPS`].
pub fn steps(s: &str) -> Result<u32, String> {
    bounded_u32(s, 1, MAX_STEPS, "computation steps")
}

/// overlap's `--xfer-reps`: repetitions kept as samples, 1 to [`MAX_ITERS`].
pub fn reps_u32(s: &str) -> Result<u32, String> {
    bounded_u32(
        s,
        1,
        MAX_ITERS,
        "repetitions (each is kept as an 8-byte sample)",
    )
}

/// commtest's `--iters`: 0 to [`MAX_ITERS`] (0 is commtest's own check).
pub fn repetitions(s: &str) -> Result<u32, String> {
    bounded_u32(s, 0, MAX_ITERS, "timed repetitions")
}

/// bcast's `--reps`: 0 to [`MAX_ITERS`] (0 is refused with bcast's own reason).
pub fn reps(s: &str) -> Result<u64, String> {
    bounded(
        s,
        0,
        MAX_ITERS,
        "broadcasts a measurement (each is kept as an 8-byte sample)",
    )
}

/// bcast's `--min-measurements` and `--max-measurements`: 0 to
/// [`MAX_STEPS`] (0 and their order are bcast's own checks).
pub fn measurements(s: &str) -> Result<usize, String> {
    bounded_usize(s, 0, MAX_STEPS, "measurements a figure")
}

/// logp's `--max-its`: 0 to [`MAX_ITS`] (0 is logp's own check).
pub fn max_its(s: &str) -> Result<usize, String> {
    bounded_usize(s, 0, MAX_ITS, "repetitions (the cap grows ×4 below 1 KiB)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_taken_and_beyond_them_refused_with_the_range() {
        assert_eq!(iters("1"), Ok(1));
        assert_eq!(iters("1000000000"), Ok(MAX_ITERS));
        for bad in [
            "0",
            "1000000001",
            "4294967295",
            "18446744073709551615",
            "99999999999999999999999",
        ] {
            let e = iters(bad).unwrap_err();
            assert!(
                e.contains(&format!("`{bad}`")) && e.contains("give 1 to 1000000000"),
                "{e}"
            );
        }
        assert!(iters("-1").unwrap_err().contains("not a whole number"));
        assert!(iters("many").unwrap_err().contains("not a whole number"));
        assert_eq!(warmup("0"), Ok(0));
        assert!(warmup("9223372036854775808")
            .unwrap_err()
            .contains("give 0 to 1000000000"));
        assert_eq!(window("65536"), Ok(65_536));
        assert!(window("65537").unwrap_err().contains("messages in flight"));
        assert!(window("0").unwrap_err().contains("less than 1"));
        assert_eq!(steps("16"), Ok(16));
        assert!(steps("4294967295").is_err());
        assert_eq!(reps("0"), Ok(0));
        assert!(reps("4294967295").is_err());
        assert_eq!(reps_u32("21"), Ok(21));
        assert_eq!(measurements("30"), Ok(30));
        assert!(measurements("18446744073709551615").is_err());
        assert_eq!(max_its("18"), Ok(18));
        assert!(max_its("9223372036854775808").is_err());
    }
}
