//! The workload a CronJob's template makes (upstream `getJobFromTemplate2` for a Job): for a
//! slot, for a backfill and for a manual run. Pure.
//!
//! Every kind gets the same: the template's labels and annotations plus [`LABEL_CRONJOB`], the
//! CronJob's shard bucket ([`shard::LABEL_SHARD`]) and the run's annotation (the slot's time,
//! or the manual run's mark); a controller owner reference (`blockOwnerDeletion: true`); the
//! template's spec; and the manager's default TTL where the template sets none, in the kind's
//! own TTL field ([`kinds::Row::ttl`]) or else in the annotation [`ANNOTATION_TTL`]. A Job's
//! Pod template also carries the run's time.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{DynamicObject, TypeMeta};
use serde_json::Value;

use super::name::{manual_name, scheduled_name};
use super::{WorkloadType, kinds};
use crate::api::{
    ANNOTATION_BACKFILLED, ANNOTATION_INSTANTIATE, ANNOTATION_SCHEDULED_AT, ANNOTATION_TTL,
    CronJob, LABEL_CRONJOB, WorkloadTemplate, shard,
};
use crate::schedule;

/// A workload to create: a batch/v1 Job (`jobTemplate`), or an object of the kind
/// `workloadTemplate` names.
#[derive(Debug, Clone, PartialEq)]
pub enum NewWorkload {
    /// A batch/v1 Job.
    Job(Box<Job>),
    /// Any other kind.
    Object(Box<DynamicObject>),
}

impl NewWorkload {
    /// Its metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            NewWorkload::Job(job) => &job.metadata,
            NewWorkload::Object(object) => &object.metadata,
        }
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            NewWorkload::Job(job) => &mut job.metadata,
            NewWorkload::Object(object) => &mut object.metadata,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// Its apiVersion and kind.
    pub fn type_(&self) -> Arc<WorkloadType> {
        match self {
            NewWorkload::Job(_) => WorkloadType::job(),
            NewWorkload::Object(object) => {
                let types = object.types.clone().unwrap_or_default();
                Arc::new(WorkloadType {
                    api_version: types.api_version,
                    kind: types.kind,
                })
            }
        }
    }

    /// The Job, if it is one.
    pub fn as_job(&self) -> Option<&Job> {
        match self {
            NewWorkload::Job(job) => Some(job),
            NewWorkload::Object(_) => None,
        }
    }

    /// The Job, if it is one.
    pub fn into_job(self) -> Option<Job> {
        match self {
            NewWorkload::Job(job) => Some(*job),
            NewWorkload::Object(_) => None,
        }
    }

    /// The object, if it is not a Job.
    pub fn as_object(&self) -> Option<&DynamicObject> {
        match self {
            NewWorkload::Job(_) => None,
            NewWorkload::Object(object) => Some(object),
        }
    }

    fn annotate(&mut self, key: &str, value: String) {
        self.metadata_mut()
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value);
    }
}

/// Build the workload of the CronJob's template, named `name`, with `extra_annotation` (the
/// run's) and `default_ttl` where the template sets no TTL. `None` when the CronJob has no
/// name or UID (never the case for an object read from the API), or names no template.
pub fn from_template(
    cj: &CronJob,
    name: String,
    extra_annotation: (&str, String),
    default_ttl: Option<i32>,
) -> Option<NewWorkload> {
    let mut owner = cj.controller_owner_ref(&())?;
    owner.block_owner_deletion = Some(true);
    let mut workload = unowned(cj, name, extra_annotation, default_ttl)?;
    workload.metadata_mut().owner_references = Some(vec![owner]);
    Some(workload)
}

/// [`from_template`] without the owner reference.
fn unowned(
    cj: &CronJob,
    name: String,
    extra_annotation: (&str, String),
    default_ttl: Option<i32>,
) -> Option<NewWorkload> {
    let (labels, annotations) = match (&cj.spec.job_template, &cj.spec.workload_template) {
        (Some(template), _) => {
            let meta = template.metadata.clone().unwrap_or_default();
            (meta.labels, meta.annotations)
        }
        (None, Some(template)) => {
            let meta = template.metadata.clone().unwrap_or_default();
            (meta.labels, meta.annotations)
        }
        (None, None) => return None,
    };
    let mut labels: BTreeMap<String, String> = labels.unwrap_or_default();
    labels.insert(LABEL_CRONJOB.to_string(), cj.metadata.name.clone()?);
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    labels.insert(
        shard::LABEL_SHARD.to_string(),
        shard::label_value(shard::bucket(namespace, cj.metadata.name.as_deref()?)),
    );
    let mut annotations = annotations.unwrap_or_default();
    annotations.insert(extra_annotation.0.to_string(), extra_annotation.1);
    let metadata = ObjectMeta {
        name: Some(name),
        namespace: cj.metadata.namespace.clone(),
        labels: Some(labels),
        annotations: Some(annotations),
        ..Default::default()
    };
    match (&cj.spec.job_template, &cj.spec.workload_template) {
        (Some(template), _) => {
            let mut spec = template.spec.clone().unwrap_or_default();
            if spec.ttl_seconds_after_finished.is_none() {
                spec.ttl_seconds_after_finished = default_ttl;
            }
            Some(NewWorkload::Job(Box::new(Job {
                metadata,
                spec: Some(spec),
                status: None,
            })))
        }
        (None, Some(template)) => Some(NewWorkload::Object(Box::new(object(
            template,
            metadata,
            default_ttl,
        )))),
        (None, None) => None,
    }
}

/// The object a workload template makes, with `metadata`; `default_ttl` goes in the kind's
/// own TTL field when the template's spec sets none there, else (a kind without one) in the
/// annotation [`ANNOTATION_TTL`] unless the template has it.
fn object(
    template: &WorkloadTemplate,
    mut metadata: ObjectMeta,
    default_ttl: Option<i32>,
) -> DynamicObject {
    let type_ = WorkloadType {
        api_version: template.api_version.clone(),
        kind: template.kind.clone(),
    };
    let mut spec = template
        .spec
        .clone()
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(ttl) = default_ttl {
        match kinds::known(type_.group(), &type_.kind).and_then(|row| row.ttl) {
            Some(path) => set_if_absent(&mut spec, &path[1..], ttl.into()),
            None => {
                metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .entry(ANNOTATION_TTL.to_string())
                    .or_insert_with(|| ttl.to_string());
            }
        }
    }
    DynamicObject {
        types: Some(TypeMeta {
            api_version: type_.api_version,
            kind: type_.kind,
        }),
        metadata,
        data: serde_json::json!({ "spec": spec }),
    }
}

/// The object a server-side dry run of `template` creates (the webhook's check of a CronJob's
/// workload, as a batch/v1 CronJob carries a Job template): named by the API server from
/// [`PROBE_NAME_PREFIX`](super::dry_run::PROBE_NAME_PREFIX), the template's labels and
/// annotations plus [`LABEL_CRONJOB`] (`cronjob`, when given), and the template's spec as
/// written (no owner, no run annotation, no default TTL: nothing the template does not say).
pub fn probe_object(template: &WorkloadTemplate, cronjob: &str) -> DynamicObject {
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    if !cronjob.is_empty() {
        labels.insert(LABEL_CRONJOB.to_string(), cronjob.to_string());
    }
    let metadata = ObjectMeta {
        generate_name: Some(super::dry_run::PROBE_NAME_PREFIX.to_string()),
        labels: (!labels.is_empty()).then_some(labels),
        annotations: meta.annotations,
        ..Default::default()
    };
    object(template, metadata, None)
}

/// Set `value` at `path` under `node` (objects made on the way), unless a value is there.
fn set_if_absent(node: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = node;
    for key in parents {
        let Value::Object(map) = node else {
            return;
        };
        node = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
    if let Value::Object(map) = node {
        map.entry(last.to_string()).or_insert(value);
    }
}

/// The workload for the slot `scheduled`: named by [`scheduled_name`], annotated with the
/// scheduled time in the CronJob's zone (a Job's Pod template too, [`stamp_pods`]).
pub fn for_slot(
    cj: &CronJob,
    scheduled: Timestamp,
    tz: &TimeZone,
    default_ttl: Option<i32>,
) -> Option<NewWorkload> {
    let name = scheduled_name(cj.metadata.name.as_deref()?, scheduled);
    let at = schedule::scheduled_at(scheduled, tz);
    let mut workload = from_template(cj, name, (ANNOTATION_SCHEDULED_AT, at.clone()), default_ttl)?;
    stamp_pods(&mut workload, at);
    Some(workload)
}

/// The workload a backfill runs for the slot `scheduled`: the slot's own ([`for_slot`]),
/// marked [`ANNOTATION_BACKFILLED`].
pub fn for_backfill(
    cj: &CronJob,
    scheduled: Timestamp,
    tz: &TimeZone,
    default_ttl: Option<i32>,
) -> Option<NewWorkload> {
    let mut workload = for_slot(cj, scheduled, tz, default_ttl)?;
    workload.annotate(ANNOTATION_BACKFILLED, "true".to_string());
    Some(workload)
}

/// The workload of the manual run requested at `requested`: named by [`manual_name`],
/// annotated `instantiate: manual` (as `kubectl create job --from`); a Job's Pod template
/// carries the time the run was asked for ([`stamp_pods`]).
pub fn manual(cj: &CronJob, requested: Timestamp, default_ttl: Option<i32>) -> Option<NewWorkload> {
    let name = manual_name(cj.metadata.name.as_deref()?, requested);
    let mut workload = from_template(
        cj,
        name,
        (ANNOTATION_INSTANTIATE, "manual".to_string()),
        default_ttl,
    )?;
    stamp_pods(&mut workload, requested.to_string());
    Some(workload)
}

/// Annotate a Job's Pod template with [`ANNOTATION_SCHEDULED_AT`] = `at`, so a container reads
/// the time its run is for through the downward API
/// (`metadata.annotations['batch.kronjob.dev/scheduled-at']`). Only the workload's own
/// annotation says which slot it ran: the Pod's is for the program.
fn stamp_pods(workload: &mut NewWorkload, at: String) {
    if let NewWorkload::Job(job) = workload
        && let Some(spec) = job.spec.as_mut()
    {
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
        let job = for_slot(&cronjob("0 * * * *"), at, &TimeZone::UTC, Some(60))
            .and_then(NewWorkload::into_job)
            .expect("job");
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
        let slot = for_slot(&cj, at, &TimeZone::UTC, None)
            .and_then(NewWorkload::into_job)
            .expect("job");
        let mut job = for_backfill(&cj, at, &TimeZone::UTC, None)
            .and_then(NewWorkload::into_job)
            .expect("job");
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
        let job = manual(&cronjob("0 * * * *"), at, None)
            .and_then(NewWorkload::into_job)
            .expect("job");
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
            .as_mut()
            .expect("a Job template")
            .spec
            .get_or_insert_with(Default::default)
            .template
            .metadata = Some(ObjectMeta {
            annotations: Some(BTreeMap::from([("team".to_string(), "a".to_string())])),
            ..Default::default()
        });
        let tz: TimeZone = TimeZone::get("Europe/Berlin").expect("zone");
        let job = for_slot(&cj, t("2016-05-19T10:00:00Z"), &tz, None)
            .and_then(NewWorkload::into_job)
            .expect("job");
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
                .and_then(|t| t.spec)
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

    fn runs(api_version: &str, kind: &str, spec: serde_json::Value) -> CronJob {
        let mut cj = cronjob("0 * * * *");
        cj.spec.job_template = None;
        cj.spec.workload_template = Some(WorkloadTemplate {
            api_version: api_version.into(),
            kind: kind.into(),
            metadata: Some(crate::api::WorkloadMetadata {
                labels: Some(BTreeMap::from([("team".into(), "a".into())])),
                annotations: Some(BTreeMap::from([("x".into(), "y".into())])),
            }),
            spec: Some(spec),
        });
        cj
    }

    fn object(workload: NewWorkload) -> DynamicObject {
        workload.as_object().cloned().expect("an object, not a Job")
    }

    #[test]
    fn a_workload_template_makes_an_object_marked_and_owned_as_a_job_is() {
        let cj = runs(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            serde_json::json!({"replicatedJobs": [{"name": "w"}]}),
        );
        let tz: TimeZone = TimeZone::get("Europe/Berlin").expect("zone");
        let made = for_slot(&cj, t("2016-05-19T10:00:00Z"), &tz, Some(60)).expect("a workload");
        assert_eq!(made.name(), "cj-24394200");
        assert_eq!(made.type_().kind, "JobSet");
        let object = object(made);
        let types = object.types.clone().expect("types");
        assert_eq!(types.api_version, "jobset.x-k8s.io/v1alpha2");
        let meta = &object.metadata;
        let labels = meta.labels.clone().expect("labels");
        assert_eq!(
            (labels["team"].as_str(), labels[LABEL_CRONJOB].as_str()),
            ("a", CJ)
        );
        assert!(labels.contains_key(shard::LABEL_SHARD));
        let annotations = meta.annotations.clone().expect("annotations");
        assert_eq!(annotations["x"], "y");
        assert_eq!(
            annotations[ANNOTATION_SCHEDULED_AT],
            "2016-05-19T12:00:00+02:00"
        );
        assert!(
            !annotations.contains_key(ANNOTATION_TTL),
            "a JobSet has a TTL field of its own"
        );
        let owner = &meta.owner_references.clone().expect("owned")[0];
        assert_eq!((owner.uid.as_str(), owner.controller), (CJ_UID, Some(true)));
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert_eq!(
            object.data["spec"],
            serde_json::json!({"replicatedJobs": [{"name": "w"}], "ttlSecondsAfterFinished": 60}),
            "the default TTL in the kind's own field, the rest as written"
        );
    }

    #[test]
    fn the_default_ttl_goes_where_the_kind_keeps_one_and_never_over_the_templates() {
        let at = t("2016-05-19T10:00:00Z");
        let ttl_of = |cj: &CronJob| {
            let object = object(for_slot(cj, at, &TimeZone::UTC, Some(60)).expect("a workload"));
            let annotation = object
                .metadata
                .annotations
                .and_then(|a| a.get(ANNOTATION_TTL).cloned());
            (object.data["spec"].clone(), annotation)
        };
        let workflow = runs("argoproj.io/v1alpha1", "Workflow", serde_json::json!({}));
        assert_eq!(
            ttl_of(&workflow),
            (
                serde_json::json!({"ttlStrategy": {"secondsAfterCompletion": 60}}),
                None
            )
        );
        let set = runs(
            "argoproj.io/v1alpha1",
            "Workflow",
            serde_json::json!({"ttlStrategy": {"secondsAfterCompletion": 5}}),
        );
        assert_eq!(
            ttl_of(&set).0,
            serde_json::json!({"ttlStrategy": {"secondsAfterCompletion": 5}}),
            "the template's TTL wins"
        );
        let pipeline = runs("tekton.dev/v1", "PipelineRun", serde_json::json!({"x": 1}));
        assert_eq!(
            ttl_of(&pipeline),
            (serde_json::json!({"x": 1}), Some("60".to_string())),
            "a kind without a TTL field: the annotation"
        );
        let mut own = runs("example.com/v1", "Thing", serde_json::json!({}));
        if let Some(meta) = own
            .spec
            .workload_template
            .as_mut()
            .and_then(|t| t.metadata.as_mut())
        {
            meta.annotations
                .get_or_insert_default()
                .insert(ANNOTATION_TTL.into(), "7".into());
        }
        assert_eq!(ttl_of(&own).1, Some("7".to_string()), "the template's wins");
    }

    #[test]
    fn a_probe_is_the_template_as_written_with_kronjobs_label_and_a_generated_name() {
        let cj = runs(
            "ray.io/v1",
            "RayJob",
            serde_json::json!({"entrypoint": "x"}),
        );
        let template = cj
            .spec
            .workload_template
            .as_ref()
            .expect("a workload template");
        let probe = probe_object(template, CJ);
        assert_eq!(
            probe.types,
            Some(TypeMeta {
                api_version: "ray.io/v1".into(),
                kind: "RayJob".into()
            })
        );
        let meta = &probe.metadata;
        assert_eq!(meta.name, None);
        assert_eq!(
            meta.generate_name.as_deref(),
            Some(super::super::dry_run::PROBE_NAME_PREFIX)
        );
        assert_eq!(meta.namespace, None, "the dry run's path says where");
        assert_eq!(meta.owner_references, None);
        assert_eq!(
            meta.labels,
            Some(BTreeMap::from([
                ("team".to_string(), "a".to_string()),
                (LABEL_CRONJOB.to_string(), CJ.to_string()),
            ]))
        );
        assert_eq!(
            meta.annotations,
            Some(BTreeMap::from([("x".to_string(), "y".to_string())]))
        );
        assert_eq!(probe.data, serde_json::json!({"spec": {"entrypoint": "x"}}));
        // Without metadata, spec or a name: nothing added but the generated name.
        let bare = WorkloadTemplate {
            api_version: "example.com/v1".into(),
            kind: "Thing".into(),
            metadata: None,
            spec: None,
        };
        let probe = probe_object(&bare, "");
        assert_eq!(probe.metadata.labels, None);
        assert_eq!(probe.metadata.annotations, None);
        assert_eq!(probe.data, serde_json::json!({"spec": {}}));
    }

    #[test]
    fn a_workloads_backfill_and_manual_runs_carry_their_marks() {
        let cj = runs(
            "ray.io/v1",
            "RayJob",
            serde_json::json!({"entrypoint": "x"}),
        );
        let at = t("2016-05-19T10:00:00Z");
        let backfill = object(for_backfill(&cj, at, &TimeZone::UTC, None).expect("backfill"));
        let annotations = backfill.metadata.annotations.expect("annotations");
        assert_eq!(annotations[ANNOTATION_BACKFILLED], "true");
        assert_eq!(annotations[ANNOTATION_SCHEDULED_AT], "2016-05-19T10:00:00Z");
        let manual = object(manual(&cj, at, None).expect("manual"));
        assert_eq!(manual.metadata.name, Some(manual_name(CJ, at)));
        let annotations = manual.metadata.annotations.expect("annotations");
        assert_eq!(annotations[ANNOTATION_INSTANTIATE], "manual");
        assert_eq!(manual.data["spec"], serde_json::json!({"entrypoint": "x"}));
    }
}
