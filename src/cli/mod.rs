//! Command-line subcommands.

pub mod bench;
pub mod next;
