//! Auto's eager limit: the size up to which `--proto auto` sends
//! eagerly, where it came from, and the cost model that chooses it.
//!
//! Above the limit auto runs a rendezvous. Against one eager trip, a
//! rendezvous pays extra one-way trips (RTS, CTS and FIN, and with
//! emulated RMA the write's acknowledgement); against the rendezvous,
//! eager pays passes over the payload in user space (bounce buffers,
//! staging copies), which the transport states in
//! [`Caps::eager_copies`]. The limit is the size where those costs
//! meet: `extra_trips · one_way / (copies · per_byte)`, rounded down to a
//! power of two and kept in [`AUTO_FLOOR`]..=[`AUTO_CAP`]. With no copy
//! to save, a rendezvous never pays, and the limit is the cap.

use std::fmt;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::{Caps, RmaKind};

/// The smallest limit auto picks: below it a rendezvous's extra trips
/// cost more than any copy it saves on every transport measured.
pub const AUTO_FLOOR: usize = 1024;
/// The largest limit auto picks: the default sweep's largest size. An
/// eager message the receiver has not yet posted for is buffered whole,
/// so unbounded eager would let a window of large messages fill memory.
pub const AUTO_CAP: usize = 4 << 20;

/// Where an eager limit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EagerSource {
    /// Computed from a model's parameters (the simulator's, or a job
    /// with no peer to measure).
    Model,
    /// Computed from figures rank 0 measured at start.
    Measured,
    /// Given with `--eager-limit N`.
    Forced,
    /// Not chosen: the protocol does not switch by size, and the engine
    /// keeps its built-in value (which a native path also takes as the
    /// library's switch point).
    Default,
}

impl fmt::Display for EagerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EagerSource::Model => "model",
            EagerSource::Measured => "measured",
            EagerSource::Forced => "forced",
            EagerSource::Default => "default",
        })
    }
}

/// The cost model's inputs, each with where it came from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EagerInputs {
    /// One-way time of a small message, ns: what one extra trip costs.
    pub one_way_ns: f64,
    /// Nanoseconds one user-space pass over one byte costs.
    pub copy_ns_per_byte: f64,
    /// One-way trips a rendezvous makes beyond eager's one.
    pub extra_trips: u32,
    /// User-space passes over the payload eager makes and the
    /// rendezvous does not ([`Caps::eager_copies`]).
    pub copies: u32,
}

impl EagerInputs {
    /// The inputs for a transport with `caps`, given the two figures.
    pub fn for_caps(caps: &Caps, one_way_ns: f64, copy_ns_per_byte: f64) -> EagerInputs {
        EagerInputs {
            one_way_ns,
            copy_ns_per_byte,
            extra_trips: extra_trips(caps.rma),
            copies: caps.eager_copies,
        }
    }

    /// The size where eager's copies cost what the rendezvous's trips
    /// do, in bytes (`None`: there is no copy to save, so never).
    pub fn crossover(&self) -> Option<f64> {
        let per_byte = f64::from(self.copies) * self.copy_ns_per_byte;
        (per_byte > 0.0).then(|| f64::from(self.extra_trips) * self.one_way_ns / per_byte)
    }

    /// The limit these inputs give: the crossover rounded down to a power
    /// of two, kept within [`AUTO_FLOOR`]..=[`AUTO_CAP`].
    pub fn limit(&self) -> usize {
        match self.crossover() {
            None => AUTO_CAP,
            Some(x) if !x.is_finite() || x >= AUTO_CAP as f64 => AUTO_CAP,
            Some(x) if x < AUTO_FLOOR as f64 => AUTO_FLOOR,
            // In range, so the conversion is exact enough and bounded.
            Some(x) => {
                let n = x as usize;
                1usize << (usize::BITS - 1 - n.leading_zeros())
            }
        }
    }
}

/// One-way trips a rendezvous (rdma-write or rdma-read) makes beyond
/// eager's one: RTS, CTS (or the read's request) and FIN; an emulated
/// write also waits for the target's acknowledgement.
pub fn extra_trips(rma: RmaKind) -> u32 {
    match rma {
        RmaKind::Native => 3,
        RmaKind::Emulated => 4,
    }
}

/// Auto's eager limit as a run uses it, for the header and the JSON
/// (`{bytes, source, inputs}`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EagerLimit {
    /// Auto sends messages of up to and including this many bytes eagerly.
    pub bytes: usize,
    /// Where the figure came from.
    pub source: EagerSource,
    /// The cost model's inputs (model and measured only).
    pub inputs: Option<EagerInputs>,
}

impl EagerLimit {
    /// `--eager-limit N`.
    pub fn forced(bytes: usize) -> EagerLimit {
        EagerLimit {
            bytes,
            source: EagerSource::Forced,
            inputs: None,
        }
    }

    /// The engine's built-in value, for protocols that do not switch by size.
    pub fn default_of(bytes: usize) -> EagerLimit {
        EagerLimit {
            bytes,
            source: EagerSource::Default,
            inputs: None,
        }
    }

    /// Chosen by the cost model from `inputs` (`source` says whether they
    /// were measured or come from a model).
    pub fn chosen(source: EagerSource, inputs: EagerInputs) -> EagerLimit {
        EagerLimit {
            bytes: inputs.limit(),
            source,
            inputs: Some(inputs),
        }
    }
}

impl fmt::Display for EagerInputs {
    /// The inputs in words, for the header.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} extra trips of {:.2} µs against {} copies",
            self.extra_trips,
            self.one_way_ns / 1e3,
            self.copies
        )?;
        if self.copy_ns_per_byte > 0.0 {
            write!(f, " at {:.2} GB/s", 1.0 / self.copy_ns_per_byte)?;
        }
        match self.crossover() {
            Some(x) => write!(f, ", crossover {x:.0} B"),
            None => write!(f, ", no crossover (eager up to the {} B cap)", AUTO_CAP),
        }
    }
}

impl Serialize for EagerInputs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("EagerInputs", 5)?;
        m.serialize_field("one_way_ns", &self.one_way_ns)?;
        m.serialize_field("copy_ns_per_byte", &self.copy_ns_per_byte)?;
        m.serialize_field("extra_trips", &self.extra_trips)?;
        m.serialize_field("copies", &self.copies)?;
        m.serialize_field("crossover_bytes", &self.crossover())?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(one_way_ns: f64, copy: f64, trips: u32, copies: u32) -> EagerInputs {
        EagerInputs {
            one_way_ns,
            copy_ns_per_byte: copy,
            extra_trips: trips,
            copies,
        }
    }

    #[test]
    fn the_limit_is_the_crossover_rounded_down_to_a_power_of_two() {
        // 4 trips of 10 µs against 3 passes at 0.1 ns/B: 133 333 B.
        let i = inputs(10_000.0, 0.1, 4, 3);
        assert_eq!(i.crossover().map(f64::round), Some(133_333.0));
        assert_eq!(i.limit(), 128 * 1024);
        // Exactly a power of two stays.
        assert_eq!(inputs(1024.0, 1.0, 64, 1).limit(), 64 * 1024);
    }

    #[test]
    fn no_copy_to_save_means_the_cap_and_tiny_crossovers_the_floor() {
        assert_eq!(inputs(5_000.0, 0.1, 3, 0).crossover(), None);
        assert_eq!(inputs(5_000.0, 0.1, 3, 0).limit(), AUTO_CAP);
        assert_eq!(inputs(5_000.0, 0.0, 3, 2).limit(), AUTO_CAP);
        assert_eq!(inputs(1e9, 0.1, 4, 1).limit(), AUTO_CAP);
        assert_eq!(inputs(10.0, 1.0, 3, 2).limit(), AUTO_FLOOR);
        assert_eq!(inputs(f64::NAN, 1.0, 3, 2).limit(), AUTO_CAP);
    }

    #[test]
    fn the_record_serializes_bytes_source_and_inputs() {
        let l = EagerLimit::chosen(EagerSource::Measured, inputs(10_000.0, 0.1, 4, 3));
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v["bytes"], 131072);
        assert_eq!(v["source"], "measured");
        assert_eq!(v["inputs"]["extra_trips"], 4);
        let f = serde_json::to_value(EagerLimit::forced(8192)).unwrap();
        assert_eq!(f["source"], "forced");
        assert!(f["inputs"].is_null());
        let text = l.inputs.unwrap().to_string();
        assert!(
            text.starts_with("4 extra trips of 10.00 µs against 3 copies at 10.00 GB/s"),
            "{text}"
        );
    }

    #[test]
    fn emulated_rma_pays_the_write_acknowledgement() {
        assert_eq!(
            extra_trips(RmaKind::Emulated),
            extra_trips(RmaKind::Native) + 1
        );
    }
}
