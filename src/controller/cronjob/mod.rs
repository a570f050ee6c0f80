//! The CronJob reconciler: observe (owner index) -> plan (pure) -> apply (API calls) -> one
//! status write.
//!
//! - [`driver`]: [`run`], the watches, the controller and its background tasks;
//! - [`mod@reconcile`]: one reconcile and the error policy; [`error`]: what fails it;
//! - [`plan`]: the pure decision, in named steps;
//! - [`kind`]: the kind of workload a CronJob runs, as a reconcile finds it;
//! - [`observe`], [`apply`], [`status`]: reading, acting, the status body;
//! - [`template`]: the Job template's check (a dry run once per generation);
//! - [`writer`], [`outbox`]: status writes, Events and history deletes, sent behind the slot's
//!   creates;
//! - [`args`]: its command-line settings; [`context`], [`metrics`]: what a reconcile needs;
//!   [`series`]: the per-CronJob series.

pub mod apply;
pub mod args;
pub mod context;
pub mod driver;
pub mod error;
pub mod kind;
pub mod metrics;
pub mod observe;
pub mod outbox;
pub mod plan;
pub mod reconcile;
pub mod series;
pub mod status;
pub mod template;
pub mod writer;

pub use args::{ReconcilerArgs, parse_ttl};
pub use context::Context;
pub use driver::run;
pub use error::Error;
pub use metrics::ReconcilerMetrics;
pub use plan::PlanConfig;
pub use reconcile::{error_policy, reconcile};

#[cfg(test)]
mod tests;
