//! The read step: this CronJob's workloads from the owner index, plus a live GET for any
//! workload still listed in `status.active` that the cache does not hold (upstream A5: the
//! cache may lag); a workload of a kind without a rule is judged by the CronJob's completion
//! rule.

use std::sync::Arc;

use super::context::Context;
use super::error::Error;
use crate::api::CronJob;
use crate::controller::workloads::WorkloadApi;
use crate::workload::cel::Completion;
use crate::workload::{Workload, WorkloadType};

/// The workloads of `cj` to plan with, judged by `completion` where their kind has no rule.
pub async fn observe(
    ctx: &Context,
    cj: &CronJob,
    completion: Option<&Arc<Completion>>,
) -> Result<Vec<Arc<Workload>>, Error> {
    let Some(uid) = cj.metadata.uid.as_deref() else {
        return Ok(Vec::new());
    };
    let mut jobs = ctx.index.workloads_of(uid);
    if let Some(status) = cj.status.as_ref() {
        let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
        for r in &status.active {
            let known = jobs
                .iter()
                .any(|j| j.metadata.uid.is_some() && j.metadata.uid == r.uid);
            let Some(name) = r.name.as_deref().filter(|_| !known) else {
                continue;
            };
            let type_ = WorkloadType {
                api_version: r.api_version.clone().unwrap_or_default(),
                kind: r.kind.clone().unwrap_or_default(),
            };
            // A kind no longer watched cannot be read: the entry is dropped as missing.
            let Some(kind) = ctx.workloads.resolved(&type_) else {
                continue;
            };
            let api = WorkloadApi::new(ctx.client.clone(), namespace, &kind);
            if let Some(workload) = api.get_opt(name).await.map_err(Error::Kube)?
                && workload.metadata.uid == r.uid
            {
                jobs.push(Arc::new(workload));
            }
        }
    }
    if let Some(completion) = completion {
        for job in &mut jobs {
            if job.raw.is_some() {
                Arc::make_mut(job).judge(completion);
            }
        }
    }
    Ok(jobs)
}
