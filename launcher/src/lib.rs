//! ovbench-launcher
