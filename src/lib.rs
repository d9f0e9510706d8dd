//! ovbench: what communication really costs.

pub mod common;
pub mod methods;
pub mod report;
pub mod sizes;
pub mod stats;
