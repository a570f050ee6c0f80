//! Controllers: the parts of kronjob that watch the API server and act on it.
//!
//! - [`cronjob`]: the CronJob reconciler (observe -> pure plan -> apply -> status);
//! - [`index`]: the owner index of Jobs it reads from;
//! - [`ttl`]: the TTL-after-finished controller for Jobs (and, optionally, Pods);
//! - [`backoff`]: how fast their watches reconnect after an API server outage.

pub mod backoff;
pub mod cronjob;
pub mod index;
pub mod ttl;

/// Which CronJobs a controller manages.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Namespaces to watch; empty means all namespaces.
    pub namespaces: Vec<String>,
    /// Label selector on CronJobs (e.g. `team=a`); `None` means every CronJob.
    pub selector: Option<String>,
}
