//! Student's t distribution: the quantiles behind a confidence interval of
//! a mean from few samples (logp_mpi's repetition rule, docs/architecture.md's
//! "every result carries its spread").
//!
//! The CDF is written through the regularised incomplete beta function,
//! `P(T ≤ t) = 1 − ½·I_{ν/(ν+t²)}(ν/2, ½)` for t ≥ 0, evaluated by the
//! continued fraction of Numerical Recipes (§6.4) with Lanczos' ln Γ;
//! quantiles are found by bisection, which is slow but exact to 1e-10 and
//! runs once per reported figure.

/// ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9; relative error < 1e-13).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / off_zero(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        h *= lentz_step(aa, &mut c, &mut d);
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        let del = lentz_step(aa, &mut c, &mut d);
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// One term `aa` of the continued fraction: updates Lentz's `c` and `d`
/// and returns the factor the partial value is multiplied by.
fn lentz_step(aa: f64, c: &mut f64, d: &mut f64) -> f64 {
    *d = 1.0 / off_zero(1.0 + aa * *d);
    *c = off_zero(1.0 + aa / *c);
    *d * *c
}

/// `v`, kept off zero (Lentz's guard against dividing by it).
fn off_zero(v: f64) -> f64 {
    const TINY: f64 = 1e-300;
    if v.abs() < TINY {
        TINY
    } else {
        v
    }
}

/// The regularised incomplete beta function I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom.
pub fn cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `p` quantile of Student's t with `df` degrees of freedom
/// (`0 < p < 1`, `df > 0`).
pub fn quantile(p: f64, df: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && df > 0.0, "quantile({p}, {df})");
    if p < 0.5 {
        return -quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while cdf(hi, df) < p {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// The two-sided critical value for a confidence `level` (e.g. 0.95).
pub fn critical(level: f64, df: f64) -> f64 {
    quantile(0.5 + level / 2.0, df)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() < tol, "{a} vs {b}");
    }

    #[test]
    fn ln_gamma_known_values() {
        close(ln_gamma(1.0), 0.0, 1e-12);
        close(ln_gamma(5.0), (24.0f64).ln(), 1e-12);
        close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-12);
    }

    #[test]
    fn cdf_is_symmetric_and_half_at_zero() {
        close(cdf(0.0, 7.0), 0.5, 1e-12);
        close(cdf(1.3, 4.0) + cdf(-1.3, 4.0), 1.0, 1e-12);
        // df = 1 is the Cauchy distribution: F(t) = 1/2 + atan(t)/π.
        close(
            cdf(2.0, 1.0),
            0.5 + 2.0f64.atan() / std::f64::consts::PI,
            1e-10,
        );
    }

    #[test]
    fn quantiles_match_the_tables() {
        // Two-sided critical values from standard t tables.
        close(critical(0.95, 1.0), 12.706, 1e-3);
        close(critical(0.95, 10.0), 2.228, 1e-3);
        close(critical(0.99, 5.0), 4.032, 1e-3);
        close(critical(0.90, 30.0), 1.697, 1e-3);
        // Large df tends to the normal: z_0.975 = 1.95996.
        close(critical(0.95, 1e7), 1.95996, 1e-4);
        close(quantile(0.025, 10.0), -2.228, 1e-3);
    }
}
