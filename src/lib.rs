//! kronjob: a Kubernetes operator for the `CronJob` custom resource (`batch.kronjob.dev/v1`).
//!
//! The crate is split by what talks to the API server and what does not:
//! - [`api`]: the CRD types, defaults and validation rules (pure);
//! - [`schedule`]: cron parsing, time zones, DST and missed-run maths (pure, clock injected);
//! - [`cli`]: command-line subcommands;
//! - [`webhook`]: the admission webhook server (defaulting and validation over TLS).

pub mod api;
pub mod cli;
pub mod clock;
pub mod schedule;
pub mod webhook;
