//! ovbench-ofi-sys (lands with its issue)
