//! xfer_time(size): the time of the bare data operation of a size on the
//! same transport, measured before the run (or read with --xfer-table).

#![deny(clippy::arithmetic_side_effects)]

use serde::{Deserialize, Serialize};

/// Measured (size, nanoseconds) points, sorted by size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct XferTable {
    points: Vec<(u64, f64)>,
}

/// The longest transfer time a table may hold: 10^12 ns (1000 s). The
/// methods compute for multiples of it and count the computation in
/// whole nanoseconds, so a larger (or absurd, 1e308) time would make a
/// step of years, or a count that does not fit.
pub const MAX_XFER_NS: f64 = 1e12;

impl XferTable {
    /// A table from measured points (any order; duplicate sizes keep the last).
    pub fn new(mut points: Vec<(u64, f64)>) -> Result<XferTable, String> {
        if points.is_empty() {
            return Err("the transfer-time table is empty: measure at least one size".into());
        }
        if let Some(p) = points
            .iter()
            .find(|p| !(p.1.is_finite() && p.1 >= 0.0 && p.1 <= MAX_XFER_NS))
        {
            // 1e308 as 1e308, not its 309 digits.
            let ns = if p.1.abs() < 1e15 {
                p.1.to_string()
            } else {
                format!("{:e}", p.1)
            };
            return Err(format!(
                "the transfer-time table has {ns} ns for {} bytes: times must be finite, non-negative and at most 1e12 ns (1000 s)",
                p.0
            ));
        }
        points.sort_by_key(|p| p.0);
        points.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
        Ok(XferTable { points })
    }

    /// Read `size bytes, ns` lines (comments with `#`) as written by ovbench.
    /// A file, unlike a measurement, is refused where it gives a size twice
    /// (which line is meant?) or a time of 0 (overlap's computation is a
    /// multiple of it: every step would compute nothing).
    pub fn parse(text: &str) -> Result<XferTable, String> {
        let mut pts = Vec::new();
        let mut first_line = std::collections::HashMap::new();
        for (line, n) in text.lines().zip(1u64..) {
            let l = line.split('#').next().unwrap_or("").trim();
            if l.is_empty() {
                continue;
            }
            let mut it = l
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty());
            let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                return Err(format!("line {n}: expected `SIZE_BYTES NS`, got `{l}`"));
            };
            let size = a
                .parse::<u64>()
                .map_err(|e| format!("line {n}: size `{a}`: {e}"))?;
            let ns = b
                .parse::<f64>()
                .map_err(|e| format!("line {n}: time `{b}`: {e}"))?;
            if let Some(first) = first_line.insert(size, n) {
                return Err(format!(
                    "line {n}: size {size} is given again (first on line {first}): give each size once"
                ));
            }
            if ns == 0.0 {
                return Err(format!(
                    "line {n}: size {size} takes 0 ns: a transfer takes some time, and overlap's computation is a multiple of it (measure the table with --write-xfer-table)"
                ));
            }
            pts.push((size, ns));
        }
        XferTable::new(pts)
    }

    /// The text [`Self::parse`] reads back: a comment line, then one
    /// `SIZE_BYTES NS` line per point (for `--xfer-table FILE`).
    pub fn to_text(&self) -> String {
        let mut s = String::from("# ovbench xfer_time table: size_bytes ns\n");
        for (size, ns) in &self.points {
            s.push_str(&format!("{size} {ns}\n"));
        }
        s
    }

    /// The measured (size in bytes, time in ns) points, sorted by size
    /// with no size twice.
    pub fn points(&self) -> &[(u64, f64)] {
        &self.points
    }

    /// Nanoseconds to move `size` bytes: linear between measured sizes,
    /// extended along the last two points beyond them, the first point's
    /// time below it (and everywhere, for a one-point table).
    pub fn xfer_ns(&self, size: u64) -> f64 {
        let p = &self.points;
        let Some(&(s0, t0)) = p.first() else {
            return 0.0;
        };
        if size <= s0 || p.len() == 1 {
            // One measured size says nothing about the slope: keep its time.
            return t0;
        }
        // 1 ≤ i < len: the points are sorted by size, none twice.
        let i = p
            .partition_point(|q| q.0 < size)
            .min(p.len().saturating_sub(1))
            .max(1);
        let (a, b) = (p[i.saturating_sub(1)], p[i]);
        let f = (size as f64 - a.0 as f64) / b.0.saturating_sub(a.0) as f64;
        (a.1 + f * (b.1 - a.1)).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_and_extends() {
        let t = XferTable::new(vec![(1024, 2000.0), (0, 1000.0), (2048, 3000.0)]).unwrap();
        assert_eq!(t.xfer_ns(0), 1000.0);
        assert_eq!(t.xfer_ns(512), 1500.0);
        assert_eq!(t.xfer_ns(2048), 3000.0);
        assert_eq!(t.xfer_ns(4096), 5000.0);
        let one = XferTable::new(vec![(0, 700.0)]).unwrap();
        assert_eq!(one.xfer_ns(1 << 20), 700.0);
    }

    #[test]
    fn parses_and_rejects() {
        let t = XferTable::parse("# size ns\n8 1500\n1024, 2500\n").unwrap();
        assert_eq!(t.points(), &[(8, 1500.0), (1024, 2500.0)]);
        assert!(XferTable::parse("8").unwrap_err().contains("line 1"));
        assert!(XferTable::parse("").is_err());
        assert!(XferTable::new(vec![(1, f64::NAN)]).is_err());
        let twice = XferTable::parse("8 1500\n16 1600\n8 1700\n").unwrap_err();
        assert!(
            twice.contains("line 3") && twice.contains("line 1"),
            "{twice}"
        );
        let zero = XferTable::parse("8 0\n").unwrap_err();
        assert!(zero.contains("0 ns"), "{zero}");
        for huge in ["8 1e308", "8 inf", "8 1000000000001"] {
            let e = XferTable::parse(huge).unwrap_err();
            assert!(
                e.contains("at most 1e12 ns") && e.len() < 160,
                "{huge}: {e}"
            );
        }
        assert!(XferTable::parse("8 1e12").is_ok());
    }

    #[test]
    fn text_roundtrip() {
        let t = XferTable::new(vec![(0, 1.5), (65536, 12345.25)]).unwrap();
        assert_eq!(XferTable::parse(&t.to_text()).unwrap(), t);
    }
}
