//! ovbench-sim
