//! The CronJob reconciler's command-line settings.

use super::series;

/// Parse `--default-job-ttl` (`3600`, `30m`, `24h`, ...) into whole seconds.
pub fn parse_ttl(s: &str) -> Result<i32, String> {
    let d = crate::duration::parse_flag_duration(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!("TTL {s:?} must be whole seconds"));
    }
    i32::try_from(d.as_secs()).map_err(|_| format!("TTL {s:?} is too large"))
}

/// Command-line settings of the CronJob reconciler.
#[derive(clap::Args, Debug, Clone)]
pub struct ReconcilerArgs {
    /// Most CronJobs reconciled at once (at a slot, about the Job creates in flight).
    #[arg(long, default_value_t = 32)]
    pub concurrency: u16,
    /// `ttlSecondsAfterFinished` for Jobs whose template sets none, e.g. `24h`; unset: none.
    #[arg(long, value_parser = parse_ttl)]
    pub default_job_ttl: Option<i32>,
    /// Most CronJobs exported in the per-CronJob `kronjob_cronjob_*` series (by namespace and
    /// name; the rest are counted in `kronjob_cronjob_series_omitted`); 0 exports none.
    #[arg(long, default_value_t = series::DEFAULT_LIMIT)]
    pub cronjob_metrics_limit: usize,
    /// The workload kinds CronJobs may run, as `RESOURCE.GROUP`, comma
    /// separated (`jobs.batch,jobsets.jobset.x-k8s.io,rayjobs.ray.io`); the install must grant
    /// the manager create, get, list, watch and delete on each.
    #[arg(long, default_value = crate::workload::allowed::DEFAULT)]
    pub workload_kinds: crate::controller::workloads::AllowedKinds,
}
