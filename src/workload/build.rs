//! The Job a CronJob's template makes (upstream `getJobFromTemplate2`): for a slot, for a manual
//! run, and for the dry run that checks the template. Pure.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::name::{manual_name, scheduled_name};
use crate::api::{
    ANNOTATION_BACKFILLED, ANNOTATION_INSTANTIATE, ANNOTATION_SCHEDULED_AT, CronJob, LABEL_CRONJOB,
    shard,
};
use crate::schedule;

/// Build a Job from the CronJob's template: labels and annotations of `jobTemplate.metadata`
/// plus [`LABEL_CRONJOB`], the CronJob's shard bucket ([`shard::LABEL_SHARD`]) and `extra_annotation`, a controller owner reference
/// (`blockOwnerDeletion: true`), the template's spec, and `default_ttl` when the template sets
/// no `ttlSecondsAfterFinished`. `None` when the CronJob has no name or UID (never the case for
/// an object read from the API).
pub fn from_template(
    cj: &CronJob,
    name: String,
    extra_annotation: (&str, String),
    default_ttl: Option<i32>,
) -> Option<Job> {
    let mut owner = cj.controller_owner_ref(&())?;
    owner.block_owner_deletion = Some(true);
    let mut job = unowned(cj, name, extra_annotation, default_ttl)?;
    job.metadata.owner_references = Some(vec![owner]);
    Some(job)
}

/// [`from_template`] without the owner reference. `None` when the CronJob has no name.
fn unowned(
    cj: &CronJob,
    name: String,
    extra_annotation: (&str, String),
    default_ttl: Option<i32>,
) -> Option<Job> {
    let template = &cj.spec.job_template;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = meta.labels.unwrap_or_default();
    labels.insert(LABEL_CRONJOB.to_string(), cj.metadata.name.clone()?);
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    labels.insert(
        shard::LABEL_SHARD.to_string(),
        shard::label_value(shard::bucket(namespace, cj.metadata.name.as_deref()?)),
    );
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

/// The Job for the slot `scheduled`: named by [`scheduled_name`], annotated with the scheduled
/// time in the CronJob's zone, and so is its Pod template ([`stamp_pods`]).
pub fn for_slot(
    cj: &CronJob,
    scheduled: Timestamp,
    tz: &TimeZone,
    default_ttl: Option<i32>,
) -> Option<Job> {
    let name = scheduled_name(cj.metadata.name.as_deref()?, scheduled);
    let at = schedule::scheduled_at(scheduled, tz);
    let mut job = from_template(cj, name, (ANNOTATION_SCHEDULED_AT, at.clone()), default_ttl)?;
    stamp_pods(&mut job, at);
    Some(job)
}

/// The Job a backfill runs for the slot `scheduled`: the slot's own Job ([`for_slot`]), marked
/// [`ANNOTATION_BACKFILLED`].
pub fn for_backfill(
    cj: &CronJob,
    scheduled: Timestamp,
    tz: &TimeZone,
    default_ttl: Option<i32>,
) -> Option<Job> {
    let mut job = for_slot(cj, scheduled, tz, default_ttl)?;
    job.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_BACKFILLED.to_string(), "true".to_string());
    Some(job)
}

/// The Job of the manual run requested at `requested`: named by [`manual_name`], annotated
/// `instantiate: manual` (as `kubectl create job --from`); its Pod template carries the time
/// the run was asked for ([`stamp_pods`]).
pub fn manual(cj: &CronJob, requested: Timestamp, default_ttl: Option<i32>) -> Option<Job> {
    let name = manual_name(cj.metadata.name.as_deref()?, requested);
    let mut job = from_template(
        cj,
        name,
        (ANNOTATION_INSTANTIATE, "manual".to_string()),
        default_ttl,
    )?;
    stamp_pods(&mut job, requested.to_string());
    Some(job)
}

/// Annotate the Job's Pod template with [`ANNOTATION_SCHEDULED_AT`] = `at`, so a container
/// reads the time its run is for through the downward API
/// (`metadata.annotations['batch.kronjob.dev/scheduled-at']`). Only the Job's own annotation
/// says which slot a Job ran: the Pod's is for the workload.
fn stamp_pods(job: &mut Job, at: String) {
    if let Some(spec) = job.spec.as_mut() {
        spec.template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_SCHEDULED_AT.to_string(), at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{CJ, CJ_UID, cronjob, t};

    #[test]
    fn a_slot_job_is_owned_named_labelled_and_gets_the_default_ttl() {
        let at = t("2016-05-19T10:00:00Z");
        let job = for_slot(&cronjob("0 * * * *"), at, &TimeZone::UTC, Some(60)).expect("job");
        let owners = job.metadata.owner_references.expect("owned");
        assert_eq!(owners[0].uid, CJ_UID);
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(job.metadata.name.as_deref(), Some("cj-24394200"));
        let labels = job.metadata.labels.expect("labels");
        assert_eq!(labels[LABEL_CRONJOB], CJ);
        let namespace = cronjob("0 * * * *").metadata.namespace.unwrap_or_default();
        assert_eq!(
            labels[shard::LABEL_SHARD],
            shard::bucket(&namespace, CJ).to_string(),
            "the Job goes with its CronJob's shard"
        );
        assert_eq!(
            job.spec.and_then(|s| s.ttl_seconds_after_finished),
            Some(60)
        );
        let mut nameless = cronjob("0 * * * *");
        nameless.metadata.name = None;
        assert!(for_slot(&nameless, at, &TimeZone::UTC, None).is_none());
    }

    #[test]
    fn a_backfill_job_is_the_slots_job_marked() {
        let at = t("2016-05-19T10:00:00Z");
        let cj = cronjob("0 * * * *");
        let slot = for_slot(&cj, at, &TimeZone::UTC, None).expect("job");
        let mut job = for_backfill(&cj, at, &TimeZone::UTC, None).expect("job");
        assert_eq!(job.metadata.name, slot.metadata.name);
        let marked = job.metadata.annotations.as_mut().expect("annotations");
        assert_eq!(
            marked.remove(ANNOTATION_BACKFILLED).as_deref(),
            Some("true")
        );
        assert_eq!(job, slot, "otherwise the slot's own Job");
    }

    #[test]
    fn a_manual_job_is_marked_and_named_after_its_request() {
        let at = t("2026-11-25T09:40:12Z");
        let job = manual(&cronjob("0 * * * *"), at, None).expect("job");
        assert_eq!(job.metadata.name, Some(manual_name(CJ, at)));
        let annotations = job.metadata.annotations.clone().expect("annotations");
        assert_eq!(annotations[ANNOTATION_INSTANTIATE], "manual");
        assert!(!annotations.contains_key(ANNOTATION_SCHEDULED_AT));
        assert_eq!(
            pod_annotation(&job),
            Some("2026-11-25T09:40:12Z"),
            "the Pod says when the run was asked for"
        );
    }

    fn pod_annotation(job: &Job) -> Option<&str> {
        let template = job.spec.as_ref()?.template.metadata.as_ref()?;
        template
            .annotations
            .as_ref()?
            .get(ANNOTATION_SCHEDULED_AT)
            .map(String::as_str)
    }

    #[test]
    fn a_slot_jobs_pods_carry_its_scheduled_time_beside_the_templates_annotations() {
        let mut cj = cronjob("0 * * * *");
        cj.spec
            .job_template
            .spec
            .get_or_insert_with(Default::default)
            .template
            .metadata = Some(ObjectMeta {
            annotations: Some(BTreeMap::from([("team".to_string(), "a".to_string())])),
            ..Default::default()
        });
        let tz: TimeZone = TimeZone::get("Europe/Berlin").expect("zone");
        let job = for_slot(&cj, t("2016-05-19T10:00:00Z"), &tz, None).expect("job");
        let at = "2016-05-19T12:00:00+02:00";
        assert_eq!(
            job.metadata.annotations.as_ref().expect("annotations")[ANNOTATION_SCHEDULED_AT],
            at
        );
        assert_eq!(pod_annotation(&job), Some(at));
        let template = job.spec.expect("spec").template.metadata.expect("metadata");
        assert_eq!(template.annotations.expect("annotations")["team"], "a");
        assert!(
            !cj.spec
                .job_template
                .spec
                .expect("spec")
                .template
                .metadata
                .expect("metadata")
                .annotations
                .expect("annotations")
                .contains_key(ANNOTATION_SCHEDULED_AT),
            "the CronJob's template is left alone"
        );
    }
}
