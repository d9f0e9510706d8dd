//! The work loop behind the communicator: computation the methods insert
//! between communication calls. Real runs use a calibrated loop; the sim
//! supplies a virtual one that advances its clock.

/// Computation and delays that call no communication function.
pub trait Work: Send {
    /// Spend `units` of computation.
    fn work(&mut self, units: u64);
    /// Nanoseconds one unit takes (calibrated; exact under sim).
    fn unit_ns(&self) -> f64;
    /// Busy-wait `ns` nanoseconds.
    fn delay(&mut self, ns: f64);
}
