//! kronjob: a Kubernetes operator for the `CronJob` custom resource (`batch.kronjob.dev/v1`).
//!
//! The crate is split by what talks to the API server and what does not:
//! - [`api`]: the CRD types, defaults and validation rules (pure);
//! - [`schedule`]: cron parsing, time zones, DST and missed-run maths (pure, clock injected);
//! - [`controller`]: the controllers that watch and act on the API server;
//! - [`webhook`]: the admission webhook server (defaulting and validation over TLS);
//! - [`manager`], [`metrics`], [`telemetry`], [`net`]: the process that hosts them;
//! - [`cli`], [`duration`]: command-line subcommands and flag parsing.

// Lets the test support shared with the integration tests name this crate `kronjob`.
extern crate self as kronjob;

pub mod api;
pub mod cli;
pub mod clock;
pub mod controller;
pub mod duration;
pub mod hash;
pub mod https;
pub mod manager;
pub mod metrics;
pub mod metrics_auth;
pub mod net;
pub mod schedule;
pub mod telemetry;
pub mod webhook;

#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod testing;
