//! Controllers: the CronJob reconciler and the Job owner index it reads from.

pub mod cronjob;
pub mod index;

/// Which CronJobs a controller manages.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Namespaces to watch; empty means all namespaces.
    pub namespaces: Vec<String>,
    /// Label selector on CronJobs (e.g. `team=a`); `None` means every CronJob.
    pub selector: Option<String>,
}
