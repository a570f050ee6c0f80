//! The Job built from a CronJob's template (upstream `getJobFromTemplate2`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::PlanConfig;
use crate::api::{ANNOTATION_SCHEDULED_AT, CronJob, LABEL_CRONJOB};
use crate::schedule;

/// Build a Job from the CronJob's template: labels and annotations of `jobTemplate.metadata`
/// plus [`LABEL_CRONJOB`] and `extra_annotation`, a controller owner reference
/// (`blockOwnerDeletion: true`), the template's spec, and `default_ttl` when the template sets
/// no `ttlSecondsAfterFinished`. `None` when the CronJob has no name or UID (never the case for
/// an object read from the API).
pub fn job_from_template(
    cj: &CronJob,
    name: String,
    extra_annotation: (&str, String),
    default_ttl: Option<i32>,
) -> Option<Job> {
    let mut owner = cj.controller_owner_ref(&())?;
    owner.block_owner_deletion = Some(true);
    let template = &cj.spec.job_template;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = meta.labels.unwrap_or_default();
    labels.insert(LABEL_CRONJOB.to_string(), cj.metadata.name.clone()?);
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(extra_annotation.0.to_string(), extra_annotation.1);
    let mut spec = template.spec.clone().unwrap_or_default();
    if spec.ttl_seconds_after_finished.is_none() {
        spec.ttl_seconds_after_finished = default_ttl;
    }
    Some(Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: cj.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The Job for the slot `scheduled`: named `<cronjob>-<unix minutes>`, annotated with the
/// scheduled time in the CronJob's zone.
pub fn job_for_slot(
    cj: &CronJob,
    scheduled: Timestamp,
    tz: &TimeZone,
    cfg: &PlanConfig,
) -> Option<Job> {
    let name = schedule::job_name(cj.metadata.name.as_deref()?, scheduled);
    job_from_template(
        cj,
        name,
        (
            ANNOTATION_SCHEDULED_AT,
            schedule::scheduled_at(scheduled, tz),
        ),
        cfg.default_job_ttl,
    )
}
