//! Statistics as pure code (criterion.rs style): [`Summary`] of a sample
//! of latencies — HDR-histogram percentiles, exact min/max/mean/stddev and
//! a Student-t confidence interval of the mean — the least-squares
//! [`slope::slope`] of a line with its interval, and the [`Estimate`]
//! type every reported figure with an interval uses.
//!
//! Confidence intervals are two-sided Student-t intervals of the mean at
//! [`DEFAULT_LEVEL`] (95 %) unless a method asks otherwise (logp uses
//! one-sided 90 % intervals, as logp_mpi does).

mod estimate;
pub mod hist;
pub mod slope;
pub mod student;
mod summary;

pub use estimate::{ConfidenceInterval, Estimate, Sample, DEFAULT_LEVEL};
pub use summary::Summary;
