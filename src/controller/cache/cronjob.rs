//! The CronJob as the controller caches it: its metadata as [`super::meta`] keeps it, the
//! spec's scalars, the Job template as its compact JSON text (one copy shared by every CronJob
//! with the same template, decoded only when a reconcile needs the whole CronJob), and the
//! status. Decoded straight from the API server's JSON; a whole [`CronJob`] is made from it
//! for each reconcile ([`CachedCronJob::to_cronjob`]).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

use super::status::Status;
use crate::api::{
    ConcurrencyPolicy, CronJob, CronJobSpec, CronJobStatus, DEFAULT_FAILED_JOBS_HISTORY_LIMIT,
    DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT, DEFAULT_SUSPEND, FailurePolicy, QueueSpec,
    ScheduleFieldsError, schedule_exprs,
};

/// A cached CronJob.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "Wire")]
pub struct CachedCronJob {
    /// Identity, versions, creation and deletion time, kronjob's annotations.
    pub metadata: ObjectMeta,
    /// The spec's scalars and the template's text.
    pub spec: Spec,
    /// The status, its `active` list compacted.
    pub status: Option<Status>,
}

/// A CronJob as decoded, before its status is compacted.
#[derive(Deserialize)]
struct Wire {
    #[serde(deserialize_with = "super::meta::deserialize")]
    metadata: ObjectMeta,
    spec: Spec,
    #[serde(default)]
    status: Option<CronJobStatus>,
}

impl From<Wire> for CachedCronJob {
    fn from(w: Wire) -> Self {
        let mut cj = CachedCronJob {
            metadata: w.metadata,
            spec: w.spec,
            status: None,
        };
        cj.set_status(w.status);
        cj
    }
}

/// The spec, with the fields and defaults of [`CronJobSpec`] and the template kept as text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// `spec.schedule`.
    #[serde(default)]
    pub schedule: Option<String>,
    /// `spec.schedules`.
    #[serde(default)]
    pub schedules: Option<Vec<String>>,
    /// `spec.timeZone`.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// `spec.startingDeadlineSeconds`.
    #[serde(default)]
    pub starting_deadline_seconds: Option<i64>,
    /// `spec.concurrencyPolicy`.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// `spec.queue`.
    #[serde(default)]
    pub queue: Option<QueueSpec>,
    /// `spec.suspend`.
    #[serde(default = "suspend")]
    pub suspend: Option<bool>,
    /// `spec.jobTemplate`, as compact JSON text.
    #[serde(default)]
    pub job_template: Option<Template>,
    /// `spec.workloadTemplate`, as compact JSON text.
    #[serde(default)]
    pub workload_template: Option<Template>,
    /// `spec.completion` (boxed: rarely set).
    #[serde(default)]
    pub completion: Option<Box<crate::api::CompletionRule>>,
    /// `spec.successfulJobsHistoryLimit`.
    #[serde(default = "successful")]
    pub successful_jobs_history_limit: Option<i32>,
    /// `spec.failedJobsHistoryLimit`.
    #[serde(default = "failed")]
    pub failed_jobs_history_limit: Option<i32>,
    /// `spec.failurePolicy`.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// `spec.exclusions`.
    #[serde(default)]
    pub exclusions: Option<crate::api::CalendarSpec>,
    /// `spec.calendars`.
    #[serde(default)]
    pub calendars: Option<Vec<String>>,
    /// `spec.notBefore`.
    #[serde(default)]
    pub not_before: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// `spec.notAfter`.
    #[serde(default)]
    pub not_after: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

fn suspend() -> Option<bool> {
    Some(DEFAULT_SUSPEND)
}
fn successful() -> Option<i32> {
    Some(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT)
}
fn failed() -> Option<i32> {
    Some(DEFAULT_FAILED_JOBS_HISTORY_LIMIT)
}

impl Spec {
    /// Whether creation of new Jobs is suspended.
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }

    /// The schedule expressions, as [`CronJobSpec::schedule_exprs`] gives them.
    pub fn schedule_exprs(&self) -> Result<&[String], ScheduleFieldsError> {
        schedule_exprs(self.schedule.as_ref(), self.schedules.as_deref())
    }
}

/// A template as the API server sent it (compact JSON); CronJobs with the same template share
/// one copy.
#[derive(Debug, Clone)]
pub struct Template(Arc<str>);

impl PartialEq for Template {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Template {
    /// The template for `text`, shared with any other of the same text.
    pub fn new(text: &str) -> Self {
        Template(super::interned::text(text))
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The template, decoded.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de serde_json::value::RawValue>::deserialize(d);
        match raw {
            Ok(raw) => Ok(Template::new(raw.get())),
            // Not borrowable from the input (a `serde_json::Value`, or a reader): go through a
            // value, then its compact text.
            Err(_) => Err(serde::de::Error::custom(
                "a template must be decoded from JSON text",
            )),
        }
    }
}

resource_like!(CachedCronJob, CronJob, .metadata);

impl CachedCronJob {
    /// The kind of workload it runs: batch/v1 Job for a `jobTemplate`, the `apiVersion` and
    /// `kind` of a `workloadTemplate`; `None` for neither (or a template that does not read).
    pub fn workload_type(&self) -> Option<crate::workload::WorkloadType> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Named {
            api_version: String,
            kind: String,
        }
        if self.spec.job_template.is_some() {
            return Some(crate::workload::WorkloadType {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
            });
        }
        let named: Named = self.spec.workload_template.as_ref()?.decode().ok()?;
        Some(crate::workload::WorkloadType {
            api_version: named.api_version,
            kind: named.kind,
        })
    }

    /// The whole CronJob, its template decoded.
    pub fn to_cronjob(&self) -> Result<CronJob, serde_json::Error> {
        let spec = &self.spec;
        Ok(CronJob {
            metadata: self.metadata.clone(),
            spec: CronJobSpec {
                schedule: spec.schedule.clone(),
                schedules: spec.schedules.clone(),
                time_zone: spec.time_zone.clone(),
                starting_deadline_seconds: spec.starting_deadline_seconds,
                concurrency_policy: spec.concurrency_policy,
                queue: spec.queue.clone(),
                suspend: spec.suspend,
                job_template: spec
                    .job_template
                    .as_ref()
                    .map(Template::decode)
                    .transpose()?,
                workload_template: spec
                    .workload_template
                    .as_ref()
                    .map(Template::decode)
                    .transpose()?,
                completion: spec.completion.as_deref().cloned(),
                successful_jobs_history_limit: spec.successful_jobs_history_limit,
                failed_jobs_history_limit: spec.failed_jobs_history_limit,
                failure_policy: spec.failure_policy.clone(),
                exclusions: spec.exclusions.clone(),
                calendars: spec.calendars.clone(),
                not_before: spec.not_before.clone(),
                not_after: spec.not_after.clone(),
            },
            status: self.status(),
        })
    }

    /// The status as read (or as set).
    pub fn status(&self) -> Option<CronJobStatus> {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        let namespace = self.metadata.namespace.as_deref();
        self.status.as_ref().map(|s| s.to_status(name, namespace))
    }

    /// Every field of the status but `active` (empty here; `activeCount` counts it), without
    /// making the whole status.
    pub fn status_fields(&self) -> Option<&CronJobStatus> {
        self.status.as_ref().map(Status::others)
    }

    /// `status.lastScheduleTime`.
    pub fn last_schedule_time(&self) -> Option<jiff::Timestamp> {
        self.status_fields()?
            .last_schedule_time
            .as_ref()
            .map(|t| t.0)
    }

    /// The latest slot the status records as run, queued slots left out (see
    /// [`crate::controller::cronjob::plan::recorded_through`]).
    pub fn recorded_through(&self) -> Option<jiff::Timestamp> {
        self.status_fields()
            .and_then(crate::controller::cronjob::plan::recorded_through)
    }

    /// Whether the status still queues `slot` or an earlier one.
    pub fn queues_through(&self, slot: jiff::Timestamp) -> bool {
        self.status_fields()
            .is_some_and(|s| s.queued.iter().any(|q| q.0 <= slot))
    }

    /// Replace the status (kept compact; the name and namespace must be set first).
    pub fn set_status(&mut self, status: Option<CronJobStatus>) {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        let namespace = self.metadata.namespace.as_deref();
        self.status = status.map(|s| Status::new(s, name, namespace));
    }

    /// What the cache would hold of `cj` (as if read from the API server).
    pub fn of(cj: &CronJob) -> Result<Self, serde_json::Error> {
        serde_json::from_str(&serde_json::to_string(cj)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::cronjob;

    #[test]
    fn the_whole_cronjob_comes_back_without_what_is_not_read() {
        let mut cj = cronjob("*/5 * * * *");
        cj.spec.time_zone = Some("Europe/Berlin".into());
        cj.spec.starting_deadline_seconds = Some(30);
        cj.spec.concurrency_policy = ConcurrencyPolicy::Forbid;
        cj.metadata.managed_fields = Some(vec![Default::default()]);
        cj.status = Some(CronJobStatus {
            active_count: 0,
            observed_generation: Some(4),
            ..Default::default()
        });
        let cached = CachedCronJob::of(&cj).expect("decodes");
        let back = cached.to_cronjob().expect("template decodes");
        let mut want = cj.clone();
        want.metadata.managed_fields = None;
        assert_eq!(back, want);
    }

    #[test]
    fn several_schedules_and_the_failure_policy_come_back() {
        let mut cj = cronjob("*/5 * * * *");
        cj.spec.schedule = None;
        cj.spec.schedules = Some(vec!["*/2 * * * *".into(), "*/3 * * * *".into()]);
        cj.spec.failure_policy = Some(FailurePolicy {
            suspend_after_consecutive_failures: Some(3),
        });
        cj.status = Some(CronJobStatus {
            consecutive_failures: 2,
            schedule: Some(cj.spec.schedule_summary()),
            ..Default::default()
        });
        let cached = CachedCronJob::of(&cj).expect("decodes");
        assert_eq!(
            cached.spec.schedule_exprs(),
            cj.spec.schedule_exprs(),
            "the same expressions"
        );
        assert_eq!(cached.to_cronjob().expect("template decodes"), cj);
        let mut both = cached.clone();
        both.spec.schedule = Some("* * * * *".into());
        assert_eq!(both.spec.schedule_exprs(), Err(ScheduleFieldsError::Both));
    }

    #[test]
    fn same_templates_share_one_copy() {
        let a = CachedCronJob::of(&cronjob("* * * * *")).expect("a");
        let mut other = cronjob("0 * * * *");
        other.metadata.name = Some("other".into());
        let b = CachedCronJob::of(&other).expect("b");
        let template = |cj: &CachedCronJob| cj.spec.job_template.clone().expect("a template").0;
        assert!(Arc::ptr_eq(&template(&a), &template(&b)));
        let mut different = cronjob("* * * * *");
        different
            .spec
            .job_template
            .as_mut()
            .expect("a template")
            .metadata = Some(ObjectMeta {
            labels: Some([("x".to_string(), "y".to_string())].into()),
            ..Default::default()
        });
        let c = CachedCronJob::of(&different).expect("c");
        assert!(!Arc::ptr_eq(&template(&a), &template(&c)));
        assert_ne!(a.spec.job_template, c.spec.job_template);
    }

    #[test]
    fn defaults_are_the_specs() {
        let json =
            r#"{"metadata": {"name": "a"}, "spec": {"schedule": "* * * * *", "jobTemplate": {}}}"#;
        let cached: CachedCronJob = serde_json::from_str(json).expect("decodes");
        let spec: CronJobSpec =
            serde_json::from_str(r#"{"schedule": "* * * * *", "jobTemplate": {}}"#).expect("spec");
        let back = cached.to_cronjob().expect("cronjob").spec;
        assert_eq!(back, spec);
    }
}
