//! Whether a step's overlap bounds can be results. The bounds bracket the
//! overlap only if every transfer of the step was recorded on both sides
//! and xfer_time is the transfer's real duration: a step with transfers
//! missing, or run with an xfer time from a table far from what this run
//! measures, is no result (`valid: false`, with the reason). A step whose
//! transfers were stretched (queued, or waiting for the peer) still
//! brackets the overlap, just not tightly: it is flagged and stays valid.

use crate::methods::common::{Marks, Verdict};

/// A table's xfer_time for a size against the one this run measured:
/// outside [`TABLE_LOW`, `TABLE_HIGH`] times it, the table is not this
/// transfer's.
pub const TABLE_LOW: f64 = 0.5;
/// See [`TABLE_LOW`].
pub const TABLE_HIGH: f64 = 2.0;

/// Bare operations timed to check a table's entries.
pub const TABLE_CHECK_REPS: u32 = 5;

/// A step's verdict as its row shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCheck {
    /// `ok`, `stretched` or `INVALID`.
    pub flag: &'static str,
    pub marks: Marks,
    verdict: Verdict,
}

impl StepCheck {
    /// The reason under the table, for the step named `what`.
    pub fn note(&self, sink: &mut dyn crate::report::Sink, what: &str) {
        self.verdict.note(sink, what);
    }
}

/// The verdict of a step of `iters` transfers in which the sender and
/// the receiver recorded `transfers`, `stretched` of them stretched, run
/// with xfer time `xfer_ns`, and `measured_ns` measured here for the same
/// size where the xfer time came from a table.
pub fn step_check(
    iters: u64,
    transfers: (u64, u64),
    stretched: u64,
    (xfer_ns, measured_ns): (f64, Option<f64>),
) -> StepCheck {
    let mut v = Verdict::default();
    for (side, n) in [("sender", transfers.0), ("receiver", transfers.1)] {
        v.check(n >= iters, || {
            format!(
                "the {side} recorded {n} of the step's {iters} transfers: the bounds cannot bracket its overlap"
            )
        });
    }
    if let Some(m) = measured_ns {
        let ratio = xfer_ns / m;
        v.check((TABLE_LOW..=TABLE_HIGH).contains(&ratio), || {
            format!(
                "xfer_time from the table, {xfer_ns:.1} ns, is {ratio:.2} x the {m:.1} ns this run measured (median of {TABLE_CHECK_REPS} bare operations), outside [{TABLE_LOW}, {TABLE_HIGH}]: the table is not this transfer's"
            )
        });
    }
    let flag = match (v.valid(), stretched) {
        (false, _) => "INVALID",
        (true, 0) => "ok",
        (true, _) => "stretched",
    };
    StepCheck {
        flag,
        marks: v.marks(),
        verdict: v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_transfers_and_a_foreign_table_are_no_result() {
        let ok = step_check(5, (5, 5), 0, (1000.0, None));
        assert_eq!((ok.flag, ok.marks.valid), ("ok", true));
        let lost = step_check(5, (5, 0), 0, (1000.0, None));
        assert_eq!((lost.flag, lost.marks.valid), ("INVALID", false));
        assert!(lost
            .marks
            .reason
            .unwrap()
            .contains("receiver recorded 0 of the step's 5"));
        for (table, valid) in [
            (1000.0, true),
            (1990.0, true),
            (2010.0, false),
            (490.0, false),
        ] {
            let c = step_check(5, (5, 5), 0, (table, Some(1000.0)));
            assert_eq!(c.marks.valid, valid, "table {table}");
        }
        // More transfers than messages (pipelined fragments) are fine.
        assert!(step_check(5, (15, 15), 0, (1000.0, None)).marks.valid);
    }

    #[test]
    fn stretched_transfers_are_flagged_but_stay_valid() {
        let c = step_check(5, (5, 5), 2, (1000.0, None));
        assert_eq!((c.flag, c.marks.valid), ("stretched", true));
    }
}
