//! The read step: this CronJob's Jobs from the owner index, plus a live GET for any Job still
//! listed in `status.active` that the cache does not hold (upstream A5: the cache may lag).

use std::sync::Arc;

use kube::Api;

use super::context::Context;
use super::error::Error;
use crate::api::CronJob;
use crate::controller::cache::SlimJob;
use crate::workload::Workload;

/// The Jobs of `cj` to plan with.
pub async fn observe(ctx: &Context, cj: &CronJob) -> Result<Vec<Arc<Workload>>, Error> {
    let Some(uid) = cj.metadata.uid.as_deref() else {
        return Ok(Vec::new());
    };
    let mut jobs = ctx.index.workloads_of(uid);
    let Some(status) = cj.status.as_ref() else {
        return Ok(jobs);
    };
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    for r in &status.active {
        let known = jobs
            .iter()
            .any(|j| j.metadata.uid.is_some() && j.metadata.uid == r.uid);
        let Some(name) = r.name.as_deref().filter(|_| !known) else {
            continue;
        };
        let api: Api<SlimJob> = Api::namespaced(ctx.client.clone(), namespace);
        if let Some(SlimJob(job)) = api.get_opt(name).await.map_err(Error::Kube)?
            && job.metadata.uid == r.uid
        {
            jobs.push(Arc::new(Workload::of_job(&job)));
        }
    }
    Ok(jobs)
}
