//! ovbench-ucx-sys (lands with its issue)
