//! The run flow: choose the role (launcher, rank, or the in-process
//! simulation), build the communicator, print the header on rank 0 and
//! run the command.

mod command;
pub mod features;

pub use command::execute;
