//! Why a window bench's MB/s and its median window disagree. MB/s is every
//! message over the slowest rank's whole timed interval; the median window
//! (`p50win`) is the middle one of rank 0's pair. The two agree when the
//! windows are alike and the pairs keep pace; a reader who sees them apart
//! needs to know which of those failed.

use crate::output::mbps;
use crate::stats::Summary;

/// How far apart (relative) the two rates may be before a note explains.
pub const AGREE_WITHIN: f64 = 0.10;

/// What the note needs of one size's row.
pub struct Measured {
    /// MB/s as printed: all messages / the slowest rank's elapsed time.
    pub bytes_per_sec: f64,
    /// Bytes one window moves for the whole job (window × size × pairs ×
    /// directions).
    pub bytes_per_window: f64,
    /// Rank 0's and the slowest rank's timed intervals, ns.
    pub rank0_elapsed_ns: f64,
    pub slowest_elapsed_ns: f64,
    /// The slowest rank.
    pub slowest_rank: u32,
}

/// The note for size `len`, or `None` where MB/s and the median window's
/// rate agree within [`AGREE_WITHIN`].
pub fn disagreement(len: usize, r: &Measured, windows: &Summary) -> Option<String> {
    if !(windows.p50 > 0.0 && r.bytes_per_sec > 0.0) {
        return None;
    }
    let median_rate = r.bytes_per_window / windows.p50 * 1e9;
    let apart = (r.bytes_per_sec - median_rate).abs() / median_rate;
    if apart <= AGREE_WITHIN {
        return None;
    }
    let mut why = Vec::new();
    let skew = windows.mean / windows.p50;
    if (skew - 1.0).abs() > AGREE_WITHIN {
        why.push(format!(
            "the windows were unequal (mean {:.2} us against p50 {:.2} us, p99 {:.2} us): MB/s counts the slow ones, the median leaves them out",
            windows.mean / 1e3,
            windows.p50 / 1e3,
            windows.p99 / 1e3
        ));
    }
    if r.slowest_elapsed_ns > (1.0 + AGREE_WITHIN) * r.rank0_elapsed_ns {
        why.push(format!(
            "rank {} took {:.0}% longer than rank 0, whose pair the windows are: MB/s is over the slowest rank's time",
            r.slowest_rank,
            100.0 * (r.slowest_elapsed_ns / r.rank0_elapsed_ns - 1.0)
        ));
    }
    if why.is_empty() {
        why.push(
            "neither unequal windows nor a slower rank explains it (time outside the windows)"
                .into(),
        );
    }
    Some(format!(
        "size {len}: MB/s {} is {:.0}% {} the median window's {} MB/s: {}",
        mbps(r.bytes_per_sec),
        100.0 * apart,
        if r.bytes_per_sec < median_rate {
            "below"
        } else {
            "above"
        },
        mbps(median_rate),
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(p50: f64, mean: f64) -> Summary {
        let mut s = Summary::of(&[p50], 0.95).expect("one sample");
        s.p50 = p50;
        s.mean = mean;
        s.p99 = mean * 3.0;
        s
    }

    fn rates(bps: f64, rank0: f64, slowest: f64) -> Measured {
        Measured {
            bytes_per_sec: bps,
            bytes_per_window: 64.0 * 1024.0,
            rank0_elapsed_ns: rank0,
            slowest_elapsed_ns: slowest,
            slowest_rank: 3,
        }
    }

    #[test]
    fn agreeing_rates_need_no_note() {
        // 64 KiB a 10 us window is 6553.6 MB/s; 6000 is within 10 %.
        assert_eq!(
            disagreement(1024, &rates(6.0e9, 1e6, 1e6), &windows(10e3, 10.2e3)),
            None
        );
    }

    #[test]
    fn unequal_windows_are_named() {
        let n = disagreement(1024, &rates(3.0e9, 1e6, 1e6), &windows(10e3, 21e3)).unwrap();
        assert!(
            n.starts_with("size 1024: MB/s 3000.00 is 54% below the median window's 6553.60 MB/s"),
            "{n}"
        );
        assert!(
            n.contains("windows were unequal (mean 21.00 us against p50 10.00 us"),
            "{n}"
        );
        assert!(!n.contains("rank 3"), "{n}");
    }

    #[test]
    fn a_slower_rank_is_named() {
        let n = disagreement(8, &rates(3.0e9, 1e6, 2e6), &windows(10e3, 10e3)).unwrap();
        assert!(n.contains("rank 3 took 100% longer than rank 0"), "{n}");
        assert!(!n.contains("unequal"), "{n}");
        let n = disagreement(8, &rates(3.0e9, 1e6, 1e6), &windows(10e3, 10e3)).unwrap();
        assert!(n.contains("neither"), "{n}");
    }
}
