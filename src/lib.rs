//! kronjob: a Kubernetes operator for the `CronJob` custom resource (`batch.kronjob.dev/v1`).
//!
//! Two binaries are built from it: `kronjob` ([`manager::command`]: the manager and `crd`) and
//! `kubectl-kronjob` ([`cli`]: the plugin). The modules, from the top down (a module uses only
//! those below it, and the small shared pieces at the bottom):
//!
//! - [`manager`]: one process hosting the controllers, the webhook, metrics and probes;
//! - [`cli`]: the kubectl plugin's commands;
//! - [`webhook`]: the admission webhook server: defaulting and validation of CronJobs, over TLS;
//! - [`metrics_auth`]: who may read `/metrics` (TokenReview and SubjectAccessReview);
//! - [`controller`]: the controllers that watch the API server and act on it;
//! - [`job`]: what a Job is to kronjob: its name, how it is built, checked, read and deleted;
//! - [`api`]: the `CronJob` API: types, defaults, validation rules, the CRD (pure);
//! - [`schedule`]: cron, time zones, DST and missed runs (pure, time passed in);
//! - small shared pieces: [`client`] (the Kubernetes client), [`backoff`] (every retry
//!   timing), [`task`] (named, supervised tasks), [`https`] (the hardened HTTPS server loop),
//!   [`clock`], [`command`] (exit codes, error output), [`duration`], [`hash`], [`metrics`],
//!   [`listen`], [`selector`], [`telemetry`].

// Lets the test support shared with the integration tests name this crate `kronjob`.
extern crate self as kronjob;

pub mod api;
pub mod backoff;
pub mod cli;
pub mod client;
pub mod clock;
pub mod command;
pub mod controller;
pub mod duration;
pub mod hash;
pub mod https;
pub mod listen;
pub mod manager;
pub mod metrics;
pub mod metrics_auth;
pub mod schedule;
pub mod selector;
pub mod task;
pub mod telemetry;
pub mod webhook;
pub mod workload;

#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod testing;
