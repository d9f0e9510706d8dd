//! ovbench-ucx (lands with its issue)
