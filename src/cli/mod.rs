//! Command-line subcommands.

pub mod next;
