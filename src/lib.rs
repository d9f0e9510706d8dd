//! ovbench: what communication really costs.

pub mod bench;
pub mod cli;
pub mod common;
pub mod control;
pub mod cpu;
pub mod env;
pub mod export;
pub mod header;
pub mod methods;
pub mod output;
pub mod report;
pub mod run;
pub mod sizes;
pub mod stats;
