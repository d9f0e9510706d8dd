//! ovbench-tcp
