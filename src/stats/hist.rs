//! A sample's distribution kept in the JSON, compactly: an HDR histogram
//! (3 significant digits, values in picoseconds) in HdrHistogram's V2
//! deflate encoding, as base64 text, so `ovbench compare` can test two
//! runs' samples long after they were taken. And the test it runs:
//! Mann–Whitney U straight from two histograms (ties by mid-ranks, normal
//! approximation with the tie correction).

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// Picoseconds per recorded unit (as [`super::Summary`] records).
pub const PS_PER_NS: f64 = 1000.0;

/// The histogram of `values_ns`, encoded; `None` for an empty sample.
pub fn encode(values_ns: &[f64]) -> Option<String> {
    if values_ns.is_empty() {
        return None;
    }
    let mut h = Histogram::<u64>::new(3).ok()?;
    h.auto(true);
    for &v in values_ns {
        h.record((v.max(0.0) * PS_PER_NS).round() as u64).ok()?;
    }
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut bytes).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A histogram written by [`encode`]: (value in ns, count) per bucket
/// recorded, in increasing value.
pub fn decode(text: &str) -> Result<Vec<(f64, u64)>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("histogram is not base64: {e}"))?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram does not decode: {e:?}"))?;
    Ok(h.iter_recorded()
        .map(|v| {
            (
                h.highest_equivalent(v.value_iterated_to()) as f64 / PS_PER_NS,
                v.count_at_value(),
            )
        })
        .collect())
}

/// (value, count) pairs from plain values (the methods' repeats).
pub fn from_values(values: &[f64]) -> Vec<(f64, u64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let mut out: Vec<(f64, u64)> = Vec::new();
    for x in v {
        match out.last_mut() {
            Some((last, n)) if *last == x => *n += 1,
            _ => out.push((x, 1)),
        }
    }
    out
}

/// The number of values.
pub fn count(h: &[(f64, u64)]) -> u64 {
    h.iter().map(|b| b.1).sum()
}

/// The median (the lower middle value for an even count).
pub fn median(h: &[(f64, u64)]) -> Option<f64> {
    let n = count(h);
    if n == 0 {
        return None;
    }
    let want = n.div_ceil(2);
    let mut seen = 0;
    for &(v, c) in h {
        seen += c;
        if seen >= want {
            return Some(v);
        }
    }
    None
}

/// Mann–Whitney U of `a` against `b`: the two-sided p-value that both
/// come from one distribution, and the probability that a value of `a`
/// exceeds one of `b` (ties count half).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    pub p: f64,
    pub a_greater: f64,
}

pub fn mann_whitney(a: &[(f64, u64)], b: &[(f64, u64)]) -> Option<MannWhitney> {
    let (na, nb) = (count(a) as f64, count(b) as f64);
    if na == 0.0 || nb == 0.0 {
        return None;
    }
    // Walk the merged distinct values; each group of ties takes the mean
    // of the ranks it spans.
    let (mut i, mut j) = (0, 0);
    let mut below = 0.0; // values ranked so far
    let (mut rank_sum_a, mut ties) = (0.0, 0.0);
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.0.min(y.0),
            (Some(x), None) => x.0,
            (None, Some(y)) => y.0,
            (None, None) => break,
        };
        let ca = match a.get(i) {
            Some(x) if x.0 == v => {
                i += 1;
                x.1 as f64
            }
            _ => 0.0,
        };
        let cb = match b.get(j) {
            Some(y) if y.0 == v => {
                j += 1;
                y.1 as f64
            }
            _ => 0.0,
        };
        let t = ca + cb;
        let mid_rank = below + (t + 1.0) / 2.0;
        rank_sum_a += ca * mid_rank;
        ties += t * t * t - t;
        below += t;
    }
    let u = rank_sum_a - na * (na + 1.0) / 2.0;
    let n = na + nb;
    let mean = na * nb / 2.0;
    let var = na * nb / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)).max(1.0));
    let p = if var <= 0.0 {
        1.0 // every value the same: no difference to find
    } else {
        // Continuity correction of a half towards the mean.
        let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
        2.0 * normal_upper_tail(z)
    };
    Some(MannWhitney {
        p: p.min(1.0),
        a_greater: u / (na * nb),
    })
}

/// P(Z > z) for a standard normal Z (Abramowitz and Stegun 7.1.26 on
/// erfc; absolute error below 1.5e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let poly = t
        * (0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    0.5 * poly * (-x * x).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_counts_and_values_to_three_digits() {
        let v: Vec<f64> = (1..=1000).map(|x| x as f64 * 1.5).collect();
        let text = encode(&v).unwrap();
        let h = decode(&text).unwrap();
        assert_eq!(count(&h), 1000);
        let m = median(&h).unwrap();
        assert!((m / 750.0 - 1.0).abs() < 0.002, "{m}");
        // Compact: well under the 8 bytes a value of the raw sample.
        assert!(text.len() < 4000, "{}", text.len());
        assert!(decode("not base64!").is_err());
    }

    #[test]
    fn mann_whitney_against_a_textbook_case() {
        // Two samples of 10 with no overlap: U = 0, exact two-sided
        // p = 2/C(20,10) ≈ 1.1e-5; the normal approximation gives ~1.8e-4.
        let a = from_values(&(1..=10).map(f64::from).collect::<Vec<_>>());
        let b = from_values(&(11..=20).map(f64::from).collect::<Vec<_>>());
        let r = mann_whitney(&a, &b).unwrap();
        assert_eq!(r.a_greater, 0.0);
        assert!(r.p < 5e-4 && r.p > 1e-5, "{}", r.p);
        // Interleaved samples: no difference.
        let c = from_values(&[1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0, 17.0, 19.0]);
        let d = from_values(&[2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0]);
        let r = mann_whitney(&c, &d).unwrap();
        assert!(r.p > 0.5, "{}", r.p);
        // All values equal: p = 1.
        let e = from_values(&[5.0; 12]);
        assert_eq!(mann_whitney(&e, &e).unwrap().p, 1.0);
    }

    #[test]
    fn normal_tail() {
        assert!((normal_upper_tail(1.959964) - 0.025).abs() < 1e-6);
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-6);
    }
}
