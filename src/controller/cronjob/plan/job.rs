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
    let mut job = unowned_job(cj, name, extra_annotation, default_ttl)?;
    job.metadata.owner_references = Some(vec![owner]);
    Some(job)
}

/// [`job_from_template`] without the owner reference: what a CronJob not yet created (no UID)
/// would make. `None` when the CronJob has no name.
pub fn unowned_job(
    cj: &CronJob,
    name: String,
    extra_annotation: (&str, String),
    default_ttl: Option<i32>,
) -> Option<Job> {
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

/// The Job to check the template with (a dry run): the one [`job_for_slot`] makes for the slot
/// `at`, owned by the CronJob when it has a UID (on creation it has none yet, and the Job is
/// checked without owner). `None` when the CronJob has no name.
pub fn job_for_check(cj: &CronJob, at: Timestamp, tz: &TimeZone, cfg: &PlanConfig) -> Option<Job> {
    if cj.metadata.uid.as_deref().is_some_and(|u| !u.is_empty()) {
        return job_for_slot(cj, at, tz, cfg);
    }
    let name = schedule::job_name(cj.metadata.name.as_deref()?, at);
    unowned_job(
        cj,
        name,
        (ANNOTATION_SCHEDULED_AT, schedule::scheduled_at(at, tz)),
        cfg.default_job_ttl,
    )
}
