//! ovbench-ofi (lands with its issue)
