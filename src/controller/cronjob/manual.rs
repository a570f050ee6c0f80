//! Manual runs: a Job from the CronJob's template, now.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::PostParams;
use kube::{Api, Client};

use super::{Error, plan};
use crate::api::{ANNOTATION_INSTANTIATE, CronJob};

/// `kronjob trigger`: create a Job from the CronJob's template now, named
/// `<cronjob>-manual-<unix seconds>`, annotated `batch.kronjob.dev/instantiate: manual`, owned
/// by the CronJob.
pub async fn trigger(
    client: Client,
    namespace: &str,
    name: &str,
    now: Timestamp,
) -> Result<Job, Error> {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), namespace);
    let cj = cronjobs
        .get_opt(name)
        .await
        .map_err(Error::Kube)?
        .ok_or_else(|| Error::NotFound(format!("{namespace}/{name}")))?;
    let job_name = format!("{name}-manual-{}", now.as_second());
    let job = plan::job_from_template(
        &cj,
        job_name,
        (ANNOTATION_INSTANTIATE, "manual".to_string()),
        None,
    )
    .ok_or(Error::MissingField("metadata.uid"))?;
    let jobs: Api<Job> = Api::namespaced(client, namespace);
    jobs.create(&PostParams::default(), &job)
        .await
        .map_err(Error::Kube)
}
