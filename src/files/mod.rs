//! The files a run reads and writes (docs/files.md): [`input`], the one
//! reader of input files.

pub mod input;
