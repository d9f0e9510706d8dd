//! ovbench: what communication really costs.

pub mod methods;
pub mod report;
