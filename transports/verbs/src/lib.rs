//! ovbench-verbs (lands with its issue)
