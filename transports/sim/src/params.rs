//! The model's parameters, parsed from `--sim KEY=VAL,…` (docs/architecture.md § The
//! sim model). Keys are case-sensitive; durations need a unit (ps, ns, us,
//! ms, s) and are kept as integer picoseconds so closed forms in tests hold
//! exactly. G is kept in femtoseconds per byte so sub-picosecond gaps
//! (fast links) are not rounded away.

#![deny(clippy::arithmetic_side_effects)]

use std::collections::BTreeMap;

use ovbench_core::shown::value;
use ovbench_core::Progress;

/// Picoseconds: the simulator's unit of virtual time.
pub type Ps = u64;

/// The largest duration a model parameter (L, os, or, g, jitter, a skew)
/// may take: one hour. The virtual clock counts picoseconds in 64 bits
/// ([`CLOCK_BOUND`]); a longer cost would fill it within a few thousand
/// messages.
pub const MAX_PARAM_PS: Ps = 3_600 * 1_000_000_000_000;
/// The largest per-byte gap G: 1 s/B, in femtoseconds.
pub const MAX_G_FS: u64 = 1_000_000_000_000_000;
/// The virtual clock's bound, as refusals name it.
pub const CLOCK_BOUND: &str =
    "the virtual clock's bound, 2^64 - 1 ps (about 213 days of virtual time)";

/// LogGP parameters plus the model's switches. Every field is public so a
/// caller (the CLI's `--progress`) can override one after parsing.
#[derive(Clone, Debug, PartialEq)]
pub struct SimParams {
    /// Wire latency: injection start to last byte at the target, less m·G.
    pub l: Ps,
    /// CPU cost of each operation the engine posts (send, write, read).
    pub o_s: Ps,
    /// CPU cost of consuming one arrived two-sided message (or serving one
    /// one-sided request when not offloaded).
    pub o_r: Ps,
    /// Minimum gap between two injections at one NIC.
    pub g: Ps,
    /// Per-byte gap, femtoseconds per byte (default 0.1 ns = 100 000 fs).
    pub big_g_fs: u64,
    /// One-sided operations served by the target's NIC (`yes`) or by the
    /// target's next library call (`no`).
    pub offload: bool,
    /// Two-sided progress: consumed inside library calls, or by a thread.
    pub progress: Progress,
    /// Largest uniform random extra added to L per message (0: none).
    pub jitter: Ps,
    /// Seed of the jitter's generator.
    pub seed: u64,
    /// Clock offset per rank, picoseconds (may be negative).
    pub skew: BTreeMap<u32, i64>,
    /// Clock drift per rank: the rank's clock reads t·(1 + drift).
    pub drift: BTreeMap<u32, f64>,
    /// Record the truth ([`crate::SimReport`]): every operation and
    /// computation interval. Off (`truth=no`) for long runs that only
    /// want the methods' output: the record grows with every message.
    pub truth: bool,
}

impl Default for SimParams {
    fn default() -> Self {
        SimParams {
            l: 1_000_000,
            o_s: 300_000,
            o_r: 300_000,
            g: 500_000,
            big_g_fs: 100_000,
            offload: true,
            progress: Progress::Poll,
            jitter: 0,
            seed: 0,
            skew: BTreeMap::new(),
            drift: BTreeMap::new(),
            truth: true,
        }
    }
}

impl SimParams {
    /// Parse `KEY=VAL,…` over the defaults; an empty string gives the
    /// defaults. Errors name the key and the offending value.
    pub fn parse(s: &str) -> Result<SimParams, String> {
        let mut p = SimParams::default();
        let mut given: Vec<&str> = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, val) = item
                .split_once('=')
                .ok_or_else(|| format!("--sim: `{}` is not KEY=VALUE", value(item)))?;
            let (key, val) = (key.trim(), val.trim());
            let bad = |e: String| format!("--sim {}={}: {e}", value(key), value(val));
            // Which of two values was meant? Refused, not the last kept.
            let canonical = match key {
                "os" => "o_s",
                "or" => "o_r",
                k => k,
            };
            if given.contains(&canonical) {
                return Err(format!(
                    "--sim: {} is given twice: give each key once",
                    value(canonical)
                ));
            }
            given.push(canonical);
            let cost = |v: &str| parse_duration_ps(v).and_then(|ps| at_most_an_hour(ps, v));
            match key {
                "L" => p.l = cost(val).map_err(bad)?,
                "os" | "o_s" => p.o_s = cost(val).map_err(bad)?,
                "or" | "o_r" => p.o_r = cost(val).map_err(bad)?,
                "g" => p.g = cost(val).map_err(bad)?,
                "G" => {
                    p.big_g_fs = parse_per_byte_fs(val)
                        .and_then(|fs| {
                            if fs <= MAX_G_FS {
                                Ok(fs)
                            } else {
                                Err(format!("`{val}` is more than 1s/B, the model's largest per-byte gap: give at most 1s/B (e.g. 0.1ns/B)"))
                            }
                        })
                        .map_err(bad)?
                }
                "offload" => p.offload = parse_yes_no(val).map_err(bad)?,
                "truth" => p.truth = parse_yes_no(val).map_err(bad)?,
                "progress" => p.progress = val.parse().map_err(bad)?,
                "jitter" => p.jitter = cost(val).map_err(bad)?,
                "seed" => {
                    p.seed = val
                        .parse()
                        .map_err(|_| bad("expected an unsigned integer".into()))?
                }
                _ => {
                    if let Some(r) = key.strip_prefix("skew.") {
                        let rank = parse_rank(r).map_err(bad)?;
                        let skew = parse_signed_ps(val)
                            .and_then(|ps| at_most_an_hour(ps.unsigned_abs(), val).map(|_| ps))
                            .map_err(bad)?;
                        p.skew.insert(rank, skew);
                    } else if let Some(r) = key.strip_prefix("drift.") {
                        let rank = parse_rank(r).map_err(bad)?;
                        p.drift.insert(rank, parse_drift(val).map_err(bad)?);
                    } else {
                        return Err(format!(
                            "--sim: unknown key `{}` (keys are case-sensitive: L, os, o_s, or, o_r, g, G, offload, progress, jitter, seed, skew.R, drift.R, truth)",
                            value(key)
                        ));
                    }
                }
            }
        }
        if p.l == 0 && p.o_s == 0 && p.o_r == 0 && p.g == 0 && p.big_g_fs == 0 {
            return Err(format!(
                "--sim {}: every cost of the model is 0 (L, os, or, g and G), so no message takes virtual time and every latency is 0 and every rate infinite: give at least one of them above 0, e.g. L=1us",
                s.trim()
            ));
        }
        Ok(p)
    }

    /// m·G in picoseconds (rounded down; [`Ps::MAX`], which the clock
    /// takes for an overflow, beyond it).
    pub fn bytes_ps(&self, m: u64) -> Ps {
        let fs = u128::from(m).saturating_mul(u128::from(self.big_g_fs));
        Ps::try_from(fs / 1000).unwrap_or(Ps::MAX)
    }

    /// An upper bound of the virtual time one message of `m` bytes adds
    /// to a run: both overheads, the gap, the wire twice (the send's
    /// completion comes back one L after the arrival), the jitter and
    /// m·G twice (the injection and the NIC's gap). Saturates.
    pub fn message_bound_ps(&self, m: u64) -> Ps {
        let b = self.bytes_ps(m);
        [
            self.o_s,
            self.o_r,
            self.g,
            self.l,
            self.l,
            self.jitter,
            b,
            b,
        ]
        .iter()
        .fold(0, |t: Ps, &d| t.saturating_add(d))
    }

    /// Gap a NIC keeps after starting an injection of m bytes: max(g, m·G).
    pub fn inject_gap(&self, m: u64) -> Ps {
        self.g.max(self.bytes_ps(m))
    }

    /// Check that every per-rank key names a rank of an `np`-rank job.
    pub fn check_ranks(&self, np: u32) -> Result<(), String> {
        let bad = self
            .skew
            .keys()
            .map(|r| ("skew", r))
            .chain(self.drift.keys().map(|r| ("drift", r)))
            .find(|(_, &r)| r >= np);
        match bad {
            Some((k, r)) => Err(format!(
                "--sim {k}.{r}: rank {r} does not exist in a {np}-rank run"
            )),
            None => Ok(()),
        }
    }

    /// `key=value` pairs for the header.
    pub fn describe(&self) -> Vec<(String, String)> {
        let ns = |ps: Ps| format!("{}ns", ps as f64 / 1000.0);
        vec![
            ("L".into(), ns(self.l)),
            ("o_s".into(), ns(self.o_s)),
            ("o_r".into(), ns(self.o_r)),
            ("g".into(), ns(self.g)),
            (
                "G".into(),
                format!("{}ns/B", self.big_g_fs as f64 / 1_000_000.0),
            ),
            (
                "offload".into(),
                if self.offload { "yes" } else { "no" }.into(),
            ),
            ("progress".into(), self.progress.to_string()),
            ("jitter".into(), ns(self.jitter)),
            ("seed".into(), self.seed.to_string()),
        ]
    }
}

/// A model cost of `ps` (spelled `val`), refused beyond [`MAX_PARAM_PS`].
fn at_most_an_hour(ps: Ps, val: &str) -> Result<Ps, String> {
    if ps <= MAX_PARAM_PS {
        Ok(ps)
    } else {
        Err(format!(
            "`{val}` is more than 3600s, the model's longest cost (a longer one fills {CLOCK_BOUND} within a few thousand messages): give at most 3600s"
        ))
    }
}

fn parse_rank(s: &str) -> Result<u32, String> {
    s.parse().map_err(|_| format!("`{s}` is not a rank number"))
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("expected `yes` or `no`".into()),
    }
}

/// A drift ratio: a plain number (`1e-6`) or parts per million (`5ppm`).
fn parse_drift(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix("ppm") {
        Some(n) => (n, 1e-6),
        None => (s, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| "expected a ratio such as 1e-6 or 5ppm".to_string())?;
    if !v.is_finite() || v * scale <= -1.0 {
        return Err("drift must be finite and above -1".into());
    }
    Ok(v * scale)
}

/// Split `12.5ns` into its decimal number and its unit in picoseconds; an
/// unknown unit (`µs`, `sec`) is named with the spellings accepted.
fn split_unit(s: &str) -> Result<(&str, u128), String> {
    const UNITS: [(&str, u128); 5] = [
        ("ps", 1),
        ("ns", 1_000),
        ("us", 1_000_000),
        ("ms", 1_000_000_000),
        ("s", 1_000_000_000_000),
    ];
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if unit.is_empty() {
        return Err(format!(
            "`{}` needs a unit: ps, ns, us, ms or s (e.g. 300ns)",
            value(s)
        ));
    }
    match UNITS.iter().find(|(u, _)| *u == unit) {
        Some(&(_, ps)) => Ok((num, ps)),
        None => Err(format!(
            "`{}` is not a unit: use ps, ns, us, ms or s (µs is written us), e.g. 300ns",
            value(unit)
        )),
    }
}

/// Exact decimal × scale → integer, refusing anything finer than 1.
fn decimal_times(num: &str, scale: u128, what: &str) -> Result<u128, String> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!("`{num}` is not a non-negative decimal number"));
    }
    let digits = format!("{int}{frac}");
    let mantissa: u128 = digits
        .parse::<u128>()
        .map_err(|_| format!("`{num}` is too large"))?;
    let pow = 10u128
        .checked_pow(frac.len() as u32)
        .ok_or_else(|| format!("`{num}` has too many decimals"))?;
    let scaled = mantissa
        .checked_mul(scale)
        .ok_or_else(|| format!("`{num}` is too large"))?;
    // pow is a power of ten, never 0.
    match (scaled.checked_rem(pow), scaled.checked_div(pow)) {
        (Some(0), Some(v)) => Ok(v),
        _ => Err(format!("`{num}` is finer than the model's {what}")),
    }
}

/// A non-negative duration with a unit → picoseconds.
pub fn parse_duration_ps(s: &str) -> Result<Ps, String> {
    let (num, ps) = split_unit(s)?;
    let v = decimal_times(num, ps, "1 ps resolution")?;
    Ps::try_from(v).map_err(|_| format!("`{s}` is too large"))
}

/// A possibly negative duration → picoseconds.
pub fn parse_signed_ps(s: &str) -> Result<i64, String> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = i64::try_from(parse_duration_ps(body)?).map_err(|_| format!("`{s}` is too large"))?;
    Ok(if neg { v.saturating_neg() } else { v })
}

/// A per-byte time (`0.1ns`, optionally `0.1ns/B`) → femtoseconds per byte.
pub fn parse_per_byte_fs(s: &str) -> Result<u64, String> {
    let body = s.strip_suffix("/B").unwrap_or(s);
    let (num, ps) = split_unit(body)?;
    let scale = ps
        .checked_mul(1000)
        .ok_or_else(|| format!("`{s}` is too large"))?;
    let fs = decimal_times(num, scale, "1 fs/B resolution")?;
    u64::try_from(fs).map_err(|_| format!("`{s}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_design() {
        let p = SimParams::parse("").unwrap();
        assert_eq!(p.l, 1_000_000);
        assert_eq!((p.o_s, p.o_r, p.g), (300_000, 300_000, 500_000));
        assert_eq!(p.big_g_fs, 100_000);
        assert!(p.offload);
        assert_eq!(p.progress, Progress::Poll);
        assert_eq!((p.jitter, p.seed), (0, 0));
        assert!(p.truth);
    }

    #[test]
    fn every_key_and_unit() {
        let p = SimParams::parse(
            "L=2us,os=1ns,o_r=250ps,g=0.5us,G=0.02ns/B,offload=no,progress=thread,jitter=1.5ns,seed=7,skew.3=-2us,drift.1=5ppm,truth=no",
        )
        .unwrap();
        assert_eq!(p.l, 2_000_000);
        assert_eq!(p.o_s, 1_000);
        assert_eq!(p.o_r, 250);
        assert_eq!(p.g, 500_000);
        assert_eq!(p.big_g_fs, 20_000);
        assert!(!p.offload);
        assert_eq!(p.progress, Progress::Thread);
        assert_eq!(p.jitter, 1_500);
        assert_eq!(p.seed, 7);
        assert_eq!(p.skew[&3], -2_000_000);
        assert!((p.drift[&1] - 5e-6).abs() < 1e-18);
        assert!(!p.truth);
        let q = SimParams::parse("o_s=1ms,or=1s,G=3ps").unwrap();
        assert_eq!(
            (q.o_s, q.o_r, q.big_g_fs),
            (1_000_000_000, 1_000_000_000_000, 3_000)
        );
    }

    #[test]
    fn errors_name_key_and_value() {
        let e = SimParams::parse("l=1us").unwrap_err();
        assert!(e.contains("unknown key `l`"), "{e}");
        let e = SimParams::parse("L=1").unwrap_err();
        assert!(e.contains("L=1") && e.contains("unit"), "{e}");
        let e = SimParams::parse("g=0.0001ns").unwrap_err();
        assert!(e.contains("g=0.0001ns") && e.contains("finer"), "{e}");
        let e = SimParams::parse("offload=maybe").unwrap_err();
        assert!(e.contains("offload=maybe"), "{e}");
        let e = SimParams::parse("L=1µs").unwrap_err();
        assert!(e.contains("not a unit") && e.contains("us"), "{e}");
        let e = SimParams::parse("L=1us,g=2ns,L=2us").unwrap_err();
        assert!(e.contains("L is given twice"), "{e}");
        let e = SimParams::parse("os=1ns,o_s=2ns").unwrap_err();
        assert!(e.contains("o_s is given twice"), "{e}");
        let e = SimParams::parse(&format!("L={}sec", "1".repeat(300))).unwrap_err();
        assert!(e.len() < 400, "{e}");
        let e = SimParams::parse("os=-3ns").unwrap_err();
        assert!(e.contains("os=-3ns"), "{e}");
        let e = SimParams::parse("skew.x=1ns").unwrap_err();
        assert!(e.contains("skew.x") && e.contains("rank"), "{e}");
        assert!(SimParams::parse("L").unwrap_err().contains("KEY=VALUE"));
        assert!(SimParams::parse("seed=abc")
            .unwrap_err()
            .contains("seed=abc"));
    }

    #[test]
    fn costs_are_bounded_and_an_all_zero_model_refused() {
        let p =
            SimParams::parse("L=3600s,os=3600s,jitter=1h".replace("1h", "3600s").as_str()).unwrap();
        assert_eq!(p.l, MAX_PARAM_PS);
        for bad in [
            "L=3601s",
            "L=1000000s",
            "os=18446744ms",
            "jitter=4000s",
            "skew.0=-3601s",
            "g=3600.000000000001s",
        ] {
            let e = SimParams::parse(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("at most 3600s"), "{bad}: {e}");
        }
        let e = SimParams::parse("G=2s/B").unwrap_err();
        assert!(e.contains("G=2s/B") && e.contains("at most 1s/B"), "{e}");
        assert_eq!(SimParams::parse("G=1s").unwrap().big_g_fs, MAX_G_FS);
        let e = SimParams::parse("L=0ns,os=0ns,or=0ns,g=0ns,G=0ns").unwrap_err();
        assert!(
            e.contains("every cost of the model is 0") && e.contains("L=1us"),
            "{e}"
        );
        assert!(SimParams::parse("L=0ns,os=0ns,or=0ns,g=0ns,G=1ps").is_ok());
        // m·G saturates rather than truncates, and so does a message's bound.
        let q = SimParams::parse("G=1s").unwrap();
        assert_eq!(q.bytes_ps(u64::MAX), Ps::MAX);
        assert_eq!(q.message_bound_ps(u64::MAX), Ps::MAX);
        let d = SimParams::default();
        assert_eq!(
            d.message_bound_ps(0),
            300_000 + 300_000 + 500_000 + 2_000_000
        );
    }

    #[test]
    fn gaps_follow_loggp() {
        let p = SimParams::default();
        assert_eq!(p.bytes_ps(1000), 100_000);
        assert_eq!(p.inject_gap(0), 500_000);
        assert_eq!(p.inject_gap(1 << 20), 104_857_600);
        assert!(p.check_ranks(4).is_ok());
        let q = SimParams::parse("skew.9=1ns").unwrap();
        assert!(q.check_ranks(4).unwrap_err().contains("skew.9"));
    }
}
