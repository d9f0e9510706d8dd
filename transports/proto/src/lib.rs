//! ovbench-proto
