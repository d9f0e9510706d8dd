//! The one number formatter of tables and notes, and the one rounding of
//! JSON figures: every printed figure goes through [`fixed`], so a unit's
//! precision is chosen where the column is declared, not re-implemented.

/// `x` with `decimals` decimals.
pub fn fixed(x: f64, decimals: usize) -> String {
    format!("{x:.decimals$}")
}

/// Nanoseconds printed as microseconds (benches print 2 decimals, the
/// methods 3, as the tools they follow do).
pub fn us(ns: f64, decimals: usize) -> String {
    fixed(ns / 1000.0, decimals)
}

/// A rate in MB/s (10^6 bytes per second) with two decimals.
pub fn mbps(bytes_per_sec: f64) -> String {
    fixed(bytes_per_sec / 1e6, 2)
}

/// Round to two decimals for JSON readability.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A row's figure that its JSON gives rounded to two decimals (tables
/// print the figure itself, at their column's precision).
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd)]
pub struct Rounded2(pub f64);

impl serde::Serialize for Rounded2 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(round2(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(us(1500.0, 2), "1.50");
        assert_eq!(us(1500.0, 3), "1.500");
        assert_eq!(mbps(2.5e9), "2500.00");
        assert_eq!(fixed(12.5, 0), "12");
        assert_eq!(round2(1.23456), 1.23);
    }
}
