//! The files a run reads and writes (docs/files.md): [`input`], the one
//! reader of input files; [`output`], where an output file goes and how
//! it is rewritten; [`run_files`], a run's inputs and outputs checked
//! against each other before any rank starts; [`stdout`], `--json -`.

pub mod input;
pub mod output;
pub mod run_files;
pub mod stdout;
