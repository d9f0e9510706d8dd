//! What the methods share: unit conversion, size lists, small control
//! messages between ranks (always outside the timed regions), and the
//! statistics the stopping rules need (mean, standard deviation), and
//! the [`Verdict`] that flags impossible figures.

use anyhow::{bail, Context};
use ovbench_core::{Buf, Communicator, Rank, Tag};
use serde::Serialize;

use crate::output::Column;

/// Tag of control messages (commands, continue/stop flags, gathers).
pub(crate) const TAG_CTRL: Tag = 0x4f56_0001;

/// Nanoseconds of a tick difference on the communicator's clock.
pub(crate) fn ns(comm: &dyn Communicator, ticks: u64) -> f64 {
    comm.clock().to_ns(ticks)
}

/// A method's column showing the time `field`, in µs with 3 decimals (the
/// tools the methods follow print that many).
pub(crate) fn micros<R: 'static>(
    head: &'static str,
    field: &'static str,
    ns: fn(&R) -> f64,
) -> Column<R> {
    Column::micros(head, field, 3, ns)
}

/// A small buffer for control words, sent with [`TAG_CTRL`].
pub(crate) struct Ctrl {
    buf: Buf,
}

const CTRL_WORDS: usize = 16;

impl Ctrl {
    pub(crate) fn new(comm: &mut dyn Communicator) -> anyhow::Result<Ctrl> {
        Ok(Ctrl {
            buf: comm.alloc(CTRL_WORDS * 8)?,
        })
    }

    /// Send up to sixteen words to `dst`.
    pub(crate) fn send(
        &self,
        comm: &mut dyn Communicator,
        dst: Rank,
        words: &[u64],
    ) -> anyhow::Result<()> {
        assert!(words.len() <= CTRL_WORDS);
        comm.fill(self.buf, &mut |b| {
            for (i, w) in words.iter().enumerate() {
                b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
            }
        })?;
        comm.send(self.buf.first(words.len() * 8), dst, TAG_CTRL)
            .with_context(|| format!("control message to rank {dst}"))?;
        Ok(())
    }

    /// Receive the words `src` sent.
    pub(crate) fn recv(&self, comm: &mut dyn Communicator, src: Rank) -> anyhow::Result<Vec<u64>> {
        let st = comm
            .recv(self.buf.first(CTRL_WORDS * 8), Some(src), Some(TAG_CTRL))
            .with_context(|| format!("control message from rank {src}"))?;
        let mut out = Vec::with_capacity(st.len / 8);
        comm.inspect(self.buf, &mut |b| {
            for i in 0..st.len / 8 {
                let mut w = [0u8; 8];
                w.copy_from_slice(&b[i * 8..i * 8 + 8]);
                out.push(u64::from_le_bytes(w));
            }
        })?;
        Ok(out)
    }

    /// Rank 0's words reach every rank along a binomial tree; every rank
    /// calls this and gets them back.
    pub(crate) fn bcast(
        &self,
        comm: &mut dyn Communicator,
        words: &[u64],
    ) -> anyhow::Result<Vec<u64>> {
        let (me, n) = (comm.rank(), comm.size());
        let mut mine = words.to_vec();
        let mut mask = 1u32;
        while mask < n {
            if me & mask != 0 {
                mine = self.recv(comm, me - mask)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if me + mask < n {
                self.send(comm, me + mask, &mine)?;
            }
            mask >>= 1;
        }
        Ok(mine)
    }

    /// Every rank's value arrives at rank 0 (`Some` there, `None` elsewhere).
    pub(crate) fn gather(
        &self,
        comm: &mut dyn Communicator,
        value: f64,
    ) -> anyhow::Result<Option<Vec<f64>>> {
        Ok(self
            .gather_each(comm, &[value])?
            .map(|all| all.into_iter().map(|v| v[0]).collect()))
    }

    /// Every rank's `values` (up to sixteen, as many on every rank) arrive
    /// at rank 0 in one message a rank: `Some` there, one list a rank.
    pub(crate) fn gather_each(
        &self,
        comm: &mut dyn Communicator,
        values: &[f64],
    ) -> anyhow::Result<Option<Vec<Vec<f64>>>> {
        let words: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        if comm.rank() != 0 {
            self.send(comm, 0, &words)?;
            return Ok(None);
        }
        let mut all = vec![values.to_vec()];
        for r in 1..comm.size() {
            let w = self.recv(comm, r)?;
            if w.len() != values.len() {
                bail!(
                    "gather: rank {r} sent {} values where {} were due",
                    w.len(),
                    values.len()
                );
            }
            all.push(w.into_iter().map(f64::from_bits).collect());
        }
        Ok(Some(all))
    }
}

/// Arithmetic mean (0 for no samples).
pub(crate) fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// Sample standard deviation (0 below two samples).
pub(crate) fn stddev(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let m = mean(x);
    (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

/// Whether a row's figures can be results at all (a negative latency or
/// overhead, an availability outside 0–100 %, a negative L or OL_i
/// cannot): an impossible figure is flagged, never printed as a plain
/// result. The table gets a `flag` cell, the JSON row `"valid"` and, when
/// false, `"reason"`, and the reason is printed as a note under the table.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Verdict {
    reasons: Vec<String>,
}

/// A [`Verdict`] as a row shows it: `#[serde(flatten)]` into the row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Marks {
    pub valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Marks {
    /// The `flag` cell: `ok`, or `INVALID`.
    pub(crate) fn cell(&self) -> String {
        if self.valid { "ok" } else { "INVALID" }.to_string()
    }
}

impl Verdict {
    /// Record `reason` unless `ok`.
    pub(crate) fn check(&mut self, ok: bool, reason: impl FnOnce() -> String) -> &mut Self {
        if !ok {
            self.reasons.push(reason());
        }
        self
    }

    /// A verdict from one check.
    pub(crate) fn of(ok: bool, reason: impl FnOnce() -> String) -> Verdict {
        let mut v = Verdict::default();
        v.check(ok, reason);
        v
    }

    pub fn valid(&self) -> bool {
        self.reasons.is_empty()
    }

    /// Why not valid, reasons joined by "; " (empty when valid).
    pub fn reason(&self) -> String {
        self.reasons.join("; ")
    }

    /// The row fields `"valid"` (and `"reason"`), flattened into a row.
    pub(crate) fn marks(&self) -> Marks {
        Marks {
            valid: self.valid(),
            reason: (!self.valid()).then(|| self.reason()),
        }
    }

    /// Print the reason under the table for the row named `what`.
    pub(crate) fn note(&self, sink: &mut dyn crate::report::Sink, what: &str) {
        if !self.valid() {
            sink.note(&format!("{what}: INVALID, not a result: {}", self.reason()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_marks_rows() {
        let mut v = Verdict::default();
        v.check(true, || "fine".into());
        let j = crate::output::to_json(&v.marks());
        assert_eq!(j, serde_json::json!({"valid": true}));
        v.check(false, || "overhead < 0".into());
        let j = crate::output::to_json(&v.marks());
        assert_eq!(
            (j["valid"].as_bool(), j["reason"].as_str()),
            (Some(false), Some("overhead < 0"))
        );
        assert_eq!(v.marks().cell(), "INVALID");
    }
}
