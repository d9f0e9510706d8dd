//! ovbench-verbs-sys (lands with its issue)
