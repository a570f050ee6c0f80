//! CronJobs and Jobs for tests, built from one default and changed with methods that read as
//! prose: `cronjob("0 * * * *").policy(Forbid).suspended()`, `job("j").scheduled().complete_at(t)`.
//!
//! The default CronJob is `ns/cj` (uid `cj-uid`, generation 1, created 2016-05-19T09:59:00Z,
//! history limits 3 and 1); its template carries the label `team=a`, the annotation `x=y` and
//! `parallelism: 1`. A default Job is controlled by that CronJob. [`manifest`] writes a
//! CronJob as its author would, for the webhook and the schema.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus, JobTemplateSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kronjob::api::{
    ANNOTATION_INSTANTIATE, ANNOTATION_SCHEDULED_AT, ConcurrencyPolicy, CronJob, CronJobSpec,
    CronJobStatus, LABEL_CRONJOB,
};

/// Namespace of every fixture.
pub const NS: &str = "ns";
/// Name of the default CronJob.
pub const CJ: &str = "cj";
/// UID of the default CronJob.
pub const CJ_UID: &str = "cj-uid";
/// Creation time of the default CronJob.
pub const CREATED: &str = "2016-05-19T09:59:00Z";

/// A timestamp from RFC 3339.
pub fn t(s: &str) -> Timestamp {
    s.parse().unwrap_or_else(|e| panic!("timestamp {s:?}: {e}"))
}

/// A Kubernetes `Time` from RFC 3339.
pub fn time(s: &str) -> Time {
    Time(t(s))
}

/// The default CronJob with `schedule`.
pub fn cronjob(schedule: &str) -> CronJob {
    let mut cj = CronJob::new(
        CJ,
        CronJobSpec {
            schedule: Some(schedule.into()),
            schedules: None,
            time_zone: None,
            starting_deadline_seconds: None,
            concurrency_policy: ConcurrencyPolicy::Allow,
            queue: None,
            suspend: Some(false),
            job_template: Some(JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(BTreeMap::from([("team".into(), "a".into())])),
                    annotations: Some(BTreeMap::from([("x".into(), "y".into())])),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    parallelism: Some(1),
                    template: PodTemplateSpec {
                        metadata: None,
                        spec: Some(PodSpec {
                            containers: vec![Container {
                                name: "c".into(),
                                image: Some("busybox".into()),
                                ..Default::default()
                            }],
                            restart_policy: Some("OnFailure".into()),
                            ..Default::default()
                        }),
                    },
                    ..Default::default()
                }),
            }),
            workload_template: None,
            completion: None,
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(1),
            failure_policy: None,
            exclusions: None,
            calendars: None,
            not_before: None,
            not_after: None,
        },
    );
    cj.metadata.namespace = Some(NS.into());
    cj.metadata.uid = Some(CJ_UID.into());
    cj.metadata.generation = Some(1);
    cj.metadata.resource_version = Some("1".into());
    cj.metadata.creation_timestamp = Some(Time(t(CREATED)));
    cj
}

/// `cj` as JSON the way its author writes it: no status, nothing the API server sets in its
/// metadata but the UID, and none of the spec fields the webhook defaults that hold their
/// default.
pub fn manifest(cj: &CronJob) -> serde_json::Value {
    let mut object = serde_json::to_value(cj).expect("a CronJob encodes");
    if let Some(fields) = object.as_object_mut() {
        fields.remove("status");
    }
    if let Some(meta) = object["metadata"].as_object_mut() {
        for set_by_the_server in ["generation", "resourceVersion", "creationTimestamp"] {
            meta.remove(set_by_the_server);
        }
    }
    for default in kronjob::api::defaults::spec_defaults() {
        if object["spec"].get(default.field) == Some(&default.value)
            && let Some(spec) = object["spec"].as_object_mut()
        {
            spec.remove(default.field);
        }
    }
    object
}

/// Changes to a fixture CronJob.
pub trait CronJobFixture: Sized {
    /// Another name (and UID `<name>-uid`).
    fn named(self, name: &str) -> Self;
    /// `spec.concurrencyPolicy`.
    fn policy(self, policy: ConcurrencyPolicy) -> Self;
    /// `spec.suspend: true`.
    fn suspended(self) -> Self;
    /// `spec.timeZone`.
    fn zone(self, tz: &str) -> Self;
    /// `spec.schedules` instead of `spec.schedule`.
    fn schedules(self, exprs: &[&str]) -> Self;
    /// `spec.failurePolicy.suspendAfterConsecutiveFailures`.
    fn suspend_after(self, failures: i32) -> Self;
    /// `spec.startingDeadlineSeconds`.
    fn deadline(self, seconds: i64) -> Self;
    /// The history limits.
    fn history(self, successful: i32, failed: i32) -> Self;
    /// `metadata.creationTimestamp`.
    fn created_at(self, at: &str) -> Self;
    /// `status.lastScheduleTime`.
    fn last_scheduled(self, at: &str) -> Self;
    /// `status.active` lists these Jobs.
    fn running(self, jobs: &[&Job]) -> Self;
    /// The whole status.
    fn status(self, status: CronJobStatus) -> Self;
}

impl CronJobFixture for CronJob {
    fn named(mut self, name: &str) -> Self {
        self.metadata.name = Some(name.into());
        self.metadata.uid = Some(format!("{name}-uid"));
        self
    }
    fn policy(mut self, policy: ConcurrencyPolicy) -> Self {
        self.spec.concurrency_policy = policy;
        self
    }
    fn suspended(mut self) -> Self {
        self.spec.suspend = Some(true);
        self
    }
    fn zone(mut self, tz: &str) -> Self {
        self.spec.time_zone = Some(tz.into());
        self
    }
    fn schedules(mut self, exprs: &[&str]) -> Self {
        self.spec.schedule = None;
        self.spec.schedules = Some(exprs.iter().map(|e| e.to_string()).collect());
        self
    }
    fn suspend_after(mut self, failures: i32) -> Self {
        self.spec.failure_policy = Some(kronjob::api::FailurePolicy {
            suspend_after_consecutive_failures: Some(failures),
        });
        self
    }
    fn deadline(mut self, seconds: i64) -> Self {
        self.spec.starting_deadline_seconds = Some(seconds);
        self
    }
    fn history(mut self, successful: i32, failed: i32) -> Self {
        self.spec.successful_jobs_history_limit = Some(successful);
        self.spec.failed_jobs_history_limit = Some(failed);
        self
    }
    fn created_at(mut self, at: &str) -> Self {
        self.metadata.creation_timestamp = Some(Time(t(at)));
        self
    }
    fn last_scheduled(mut self, at: &str) -> Self {
        self.status
            .get_or_insert_with(Default::default)
            .last_schedule_time = Some(Time(t(at)));
        self
    }
    fn running(mut self, jobs: &[&Job]) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        status.set_active(
            jobs.iter()
                .map(|j| workload(Job::clone(j)).reference())
                .collect(),
        );
        self
    }
    fn status(mut self, status: CronJobStatus) -> Self {
        self.status = Some(status);
        self
    }
}

/// A Job named `name` in [`NS`], controlled by the default CronJob, labelled as kronjob labels
/// its Jobs, with UID `<name>-uid`.
/// `job` as the plan reads it.
pub fn workload(job: Job) -> Arc<kronjob::workload::Workload> {
    Arc::new(kronjob::workload::Workload::of_job(&job))
}

pub fn job(name: &str) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            uid: Some(format!("{name}-uid")),
            resource_version: Some("1".into()),
            labels: Some(BTreeMap::from([(LABEL_CRONJOB.into(), CJ.into())])),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch.kronjob.dev/v1".into(),
                kind: "CronJob".into(),
                name: CJ.into(),
                uid: CJ_UID.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: Some(JobSpec::default()),
        status: None,
    }
}

/// Changes to a fixture Job.
pub trait JobFixture: Sized {
    /// Marked as the run of an earlier slot (09:00, an hour before the fixtures' usual due slot).
    fn scheduled(self) -> Self;
    /// Marked as the run of the slot `at` (the scheduled-at annotation).
    fn scheduled_for(self, at: &str) -> Self;
    /// Marked as a manual run.
    fn manual(self) -> Self;
    /// Controlled by the CronJob with this UID (and name `<uid>` stripped of `-uid`).
    fn owned_by(self, uid: &str) -> Self;
    /// No owner at all.
    fn orphan(self) -> Self;
    /// Another namespace.
    fn in_namespace(self, ns: &str) -> Self;
    /// `status.startTime`.
    fn started_at(self, at: &str) -> Self;
    /// Finished: `Complete=True` at `at` (with `SuccessCriteriaMet`, as 1.31+ writes it).
    fn complete_at(self, at: &str) -> Self;
    /// `status.completionTime` only. The Job controller dates it by when the success criteria
    /// were met; the `Complete` condition it adds once no Pod terminates may come seconds later.
    fn completion_time(self, at: &str) -> Self;
    /// Finished: `Failed=True` at `at` (with `FailureTarget`).
    fn failed_at(self, at: &str) -> Self;
    /// `spec.ttlSecondsAfterFinished`.
    fn ttl(self, seconds: i32) -> Self;
    /// Being deleted.
    fn deleting(self) -> Self;
}

fn finished(mut job: Job, outcome: &str, interim: &str, at: &str) -> Job {
    let status = job.status.get_or_insert_with(JobStatus::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    for type_ in [interim, outcome] {
        conditions.push(JobCondition {
            type_: type_.into(),
            status: "True".into(),
            last_transition_time: Some(Time(t(at))),
            ..Default::default()
        });
    }
    if outcome == "Complete" {
        status.completion_time = Some(Time(t(at)));
        status.succeeded = Some(1);
    } else {
        status.failed = Some(1);
    }
    job
}

impl JobFixture for Job {
    fn scheduled(self) -> Self {
        self.scheduled_for("2016-05-19T09:00:00Z")
    }
    fn scheduled_for(mut self, at: &str) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_SCHEDULED_AT.into(), at.into());
        self
    }
    fn manual(mut self) -> Self {
        self.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_INSTANTIATE.into(), "manual".into());
        self
    }
    fn owned_by(mut self, uid: &str) -> Self {
        if let Some(owner) = self
            .metadata
            .owner_references
            .as_mut()
            .and_then(|o| o.first_mut())
        {
            owner.uid = uid.into();
            owner.name = uid.trim_end_matches("-uid").into();
        }
        self
    }
    fn orphan(mut self) -> Self {
        self.metadata.owner_references = None;
        self
    }
    fn in_namespace(mut self, ns: &str) -> Self {
        self.metadata.namespace = Some(ns.into());
        self
    }
    fn started_at(mut self, at: &str) -> Self {
        self.status
            .get_or_insert_with(JobStatus::default)
            .start_time = Some(Time(t(at)));
        self
    }
    fn complete_at(self, at: &str) -> Self {
        finished(self, "Complete", "SuccessCriteriaMet", at)
    }
    fn completion_time(mut self, at: &str) -> Self {
        self.status
            .get_or_insert_with(JobStatus::default)
            .completion_time = Some(Time(t(at)));
        self
    }
    fn failed_at(self, at: &str) -> Self {
        finished(self, "Failed", "FailureTarget", at)
    }
    fn ttl(mut self, seconds: i32) -> Self {
        self.spec
            .get_or_insert_with(JobSpec::default)
            .ttl_seconds_after_finished = Some(seconds);
        self
    }
    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp = Some(Time(t("2016-05-19T10:00:00Z")));
        self
    }
}
