//! ovbench
