//! Message sizes and durations as users type them (docs/architecture.md § Conventions,
//! Units): bytes with `K`/`M`/`G` suffixes (powers of 1024), `MIN:MAX` for
//! MIN then the powers of two up to MAX, and comma lists such as `8,1K,1M`.

#![deny(clippy::arithmetic_side_effects)]

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ovbench_core::shown::value;

/// A byte count parsed from `123`, `16K`, `4M`, `1G` (K = 1024).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub usize);

impl ByteSize {
    pub fn bytes(self) -> usize {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_bytes(s).map(ByteSize)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_bytes(self.0))
    }
}

/// Parse one size token: digits with an optional `K`, `M`, `G`, `T` or `P` suffix
/// (either case, optionally followed by `B`/`iB`). An error names the part
/// that is wrong (no number, an unknown unit) and the spellings accepted.
pub fn parse_bytes(token: &str) -> Result<usize, String> {
    let shown = value(token);
    let t = token.trim();
    if t.is_empty() {
        return Err("a size is empty: give bytes with an optional K, M, G, T or P suffix (K = 1024), e.g. 64, 16K, 4M".into());
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "bad size `{shown}`: no number: give bytes with an optional K, M, G, T or P suffix (K = 1024), e.g. 64, 16K, 4M"
        ));
    }
    if unit.starts_with('.') {
        return Err(format!(
            "bad size `{shown}`: a size is a whole number of bytes: write it in a smaller unit, e.g. 1536 for 1.5K"
        ));
    }
    let upper = unit.to_ascii_uppercase();
    let prefix = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let mult: usize = match prefix {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        // Never a size to run, but one to refuse as too large for memory
        // (the preflight's check) rather than as a typo.
        "T" => 1 << 40,
        "P" => 1 << 50,
        _ => {
            return Err(format!(
                "bad size `{shown}`: `{}` is not a unit: use K, M, G, T or P (K = 1024), optionally followed by B or iB, e.g. 16K or 16KiB",
                value(unit)
            ))
        }
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("size `{shown}` is too large"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size `{shown}` is too large"))
}

/// The shortest exact spelling of a byte count: `0`, `8`, `16K`, `4M`.
pub fn format_bytes(n: usize) -> String {
    if n >= 1 << 30 && n % (1 << 30) == 0 {
        format!("{}G", n >> 30)
    } else if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// An ordered list of message sizes (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sizes(Vec<usize>);

impl Sizes {
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }
    pub fn max(&self) -> usize {
        self.0.iter().copied().max().unwrap_or(0)
    }
}

impl FromStr for Sizes {
    type Err = String;
    /// `0:4M` → 0, 1, 2, 4, …, 4M; `3:100` → 3, 4, 8, …, 64 (powers of two
    /// after MIN, not above MAX); `8,1K,1M` → as listed. Lists may contain
    /// ranges: `0,64:1K`.
    fn from_str(s: &str) -> Result<Self, String> {
        let list = value(s);
        let mut out: Vec<usize> = Vec::new();
        for (part, n) in s.split(',').zip(1usize..) {
            if part.trim().is_empty() {
                return Err(format!(
                    "bad size list `{list}`: item {n} is empty: give sizes between the commas, e.g. 8,1K,1M"
                ));
            }
            let sizes = match part.split_once(':') {
                Some((lo, hi)) => range(part, lo, hi)?,
                None => vec![parse_bytes(part)?],
            };
            for n in sizes {
                if out.contains(&n) {
                    return Err(format!(
                        "bad size list `{list}`: {} comes twice: give each size once (MIN:MAX holds MIN and the powers of two above it up to MAX)",
                        format_bytes(n)
                    ));
                }
                out.push(n);
            }
        }
        Ok(Sizes(out))
    }
}

/// The sizes of one `MIN:MAX` item, its missing or inverted ends named.
fn range(part: &str, lo: &str, hi: &str) -> Result<Vec<usize>, String> {
    let shown = value(part);
    let missing = |end: &str, e: &str| {
        format!("bad size range `{shown}`: {end} is missing: write MIN:MAX, e.g. {e}")
    };
    match (lo.trim().is_empty(), hi.trim().is_empty()) {
        (true, true) => return Err(missing("MIN and MAX", "0:4M")),
        (true, false) => return Err(missing("MIN", &format!("0:{}", value(hi.trim())))),
        (false, true) => return Err(missing("MAX", &format!("{}:4M", value(lo.trim())))),
        _ => {}
    }
    let (lo, hi) = (parse_bytes(lo)?, parse_bytes(hi)?);
    if lo > hi {
        return Err(format!(
            "bad size range `{shown}`: MIN is above MAX (write MIN:MAX, e.g. 0:4M)"
        ));
    }
    Ok(pow2_range(lo, hi))
}

/// MIN, then every power of two above MIN up to MAX.
fn pow2_range(lo: usize, hi: usize) -> Vec<usize> {
    let mut v = vec![lo];
    // No power of two above MIN fits a usize: MIN alone (found by the
    // `parsers` fuzz target: next_power_of_two overflowed).
    let Some(mut p) = (if lo == 0 {
        Some(1)
    } else {
        lo.checked_next_power_of_two()
    }) else {
        return v;
    };
    if p == lo {
        p = p.saturating_mul(2);
    }
    while p <= hi && p > *v.last().unwrap_or(&0) {
        v.push(p);
        match p.checked_mul(2) {
            Some(n) => p = n,
            None => break,
        }
    }
    v
}

impl fmt::Display for Sizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|&n| format_bytes(n)).collect();
        f.write_str(&parts.join(","))
    }
}

/// A duration: a number with a unit (`ns`, `us`, `ms`, `s`, `m`), or a
/// plain number of seconds (`60`, `0.5`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seconds(pub Duration);

impl FromStr for Seconds {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let shown = value(s);
        let v: f64 = num.parse().map_err(|_| {
            format!("bad duration `{shown}`: no number: use seconds (60, 0.5) or a number with ns, us, ms, s or m")
        })?;
        let scale = match unit.trim() {
            "" | "s" => 1.0,
            "ms" => 1e-3,
            "us" => 1e-6,
            "ns" => 1e-9,
            "m" | "min" => 60.0,
            u => {
                return Err(format!(
                    "bad duration `{shown}`: `{}` is not a unit: use ns, us, ms, s, m or min (µs is written us), or no unit for seconds",
                    value(u)
                ))
            }
        };
        let secs = v * scale;
        if !secs.is_finite() || secs <= 0.0 {
            return Err(format!("bad duration `{shown}`: it must be positive"));
        }
        // A duration past Duration's range (~584 billion years) is an
        // error, not a panic (found by the `parsers` fuzz target).
        Duration::try_from_secs_f64(secs).map(Seconds).map_err(|_| {
            format!("bad duration `{shown}`: too long (at most a few centuries make sense)")
        })
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(s: &str) -> Vec<usize> {
        s.parse::<Sizes>().unwrap().as_slice().to_vec()
    }

    #[test]
    fn suffixes_are_binary() {
        assert_eq!(parse_bytes("0").unwrap(), 0);
        assert_eq!(parse_bytes("16K").unwrap(), 16384);
        assert_eq!(parse_bytes("16k").unwrap(), 16384);
        assert_eq!(parse_bytes("4M").unwrap(), 4 << 20);
        assert_eq!(parse_bytes("1G").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("64KB").unwrap(), 65536);
        assert_eq!(parse_bytes("2MiB").unwrap(), 2 << 20);
    }

    #[test]
    fn range_is_min_then_powers_of_two() {
        let v = sizes("0:4M");
        assert_eq!(v.len(), 24); // 0, 2^0 .. 2^22
        assert_eq!(&v[..5], &[0, 1, 2, 4, 8]);
        assert_eq!(*v.last().unwrap(), 4 << 20);
        assert_eq!(sizes("3:100"), vec![3, 4, 8, 16, 32, 64]);
        assert_eq!(sizes("8:8"), vec![8]);
        assert_eq!(sizes("1K:4K"), vec![1024, 2048, 4096]);
    }

    #[test]
    fn lists_and_mixed() {
        assert_eq!(sizes("8,1K,1M"), vec![8, 1024, 1 << 20]);
        assert_eq!(sizes("0,64:256"), vec![0, 64, 128, 256]);
    }

    #[test]
    fn errors_name_the_token() {
        let e = "8,1X,1M".parse::<Sizes>().unwrap_err();
        assert!(e.contains("`1X`"), "{e}");
        let e = "4M:1K".parse::<Sizes>().unwrap_err();
        assert!(e.contains("4M:1K") && e.contains("MIN is above MAX"), "{e}");
        let e = "8,,16".parse::<Sizes>().unwrap_err();
        assert!(e.contains("item 2 is empty"), "{e}");
        let e = "8,16,".parse::<Sizes>().unwrap_err();
        assert!(e.contains("item 3 is empty"), "{e}");
        let e = "8:".parse::<Sizes>().unwrap_err();
        assert!(e.contains("MAX is missing") && e.contains("8:4M"), "{e}");
        let e = ":8".parse::<Sizes>().unwrap_err();
        assert!(e.contains("MIN is missing") && e.contains("0:8"), "{e}");
        let e = "16X".parse::<Sizes>().unwrap_err();
        assert!(
            e.contains("`X` is not a unit") && e.contains("K, M, G"),
            "{e}"
        );
        let e = "K".parse::<Sizes>().unwrap_err();
        assert!(e.contains("no number"), "{e}");
        let e = "8,8,16".parse::<Sizes>().unwrap_err();
        assert!(e.contains("8 comes twice"), "{e}");
        let e = "0:1K,1K".parse::<Sizes>().unwrap_err();
        assert!(e.contains("1K comes twice"), "{e}");
        let e = format!("{}X", "9".repeat(500))
            .parse::<Sizes>()
            .unwrap_err();
        assert!(e.len() < 300, "{e}");
        let e = "1µs".parse::<Seconds>().unwrap_err();
        assert!(e.contains("not a unit") && e.contains("us"), "{e}");
        assert!(parse_bytes("99999999999999999999G").is_err());
    }

    #[test]
    fn formatting_round_trips() {
        for s in ["0", "8", "16K", "4M", "1G", "1536"] {
            assert_eq!(format_bytes(parse_bytes(s).unwrap()), s);
        }
        assert_eq!(sizes("8,1K").len(), 2);
        assert_eq!(
            sizes("14347467590662984589:14347467590662984589"),
            [14347467590662984589]
        );
        assert_eq!("8,1K,1M".parse::<Sizes>().unwrap().to_string(), "8,1K,1M");
    }

    #[test]
    fn durations() {
        assert_eq!("60".parse::<Seconds>().unwrap().0, Duration::from_secs(60));
        assert_eq!(
            "250ms".parse::<Seconds>().unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!("2m".parse::<Seconds>().unwrap().0, Duration::from_secs(120));
        assert!("0".parse::<Seconds>().is_err());
        assert!("5 parsecs"
            .parse::<Seconds>()
            .unwrap_err()
            .contains("5 parsecs"));
        assert!("922222222222222222222222222222222222222"
            .parse::<Seconds>()
            .unwrap_err()
            .contains("too long"));
    }
}
