//! What a workload is to kronjob: the object a CronJob runs for each slot (a batch/v1 Job, or
//! any kind a `workloadTemplate` names), its name, how it is built, checked, read and deleted.
//!
//! Defined once, below the controllers, the webhook and the commands:
//!
//! - [`Workload`]: a workload as the plan reads it, whatever its kind: its metadata, when it
//!   started, whether, how and when it finished;
//! - [`name`]: `<cronjob>-<unix minutes>` for a slot, `<cronjob>-m<base 36 seconds>` for a
//!   manual run (pure);
//! - [`build`]: the Job a template makes, for a slot or a manual run (pure);
//! - [`read`]: which CronJob controls a workload and what it ran for (its metadata), how a Job
//!   finished (pure);
//! - [`dry_run`]: the template checked as the API server checks a batch/v1 CronJob's (a
//!   `dryRun=All` create of one carrying it), a workload template by a `dryRun=All` create of
//!   its kind;
//! - [`delete`]: delete by name only while the UID is the one decided on;
//! - [`allowed`]: the kinds the manager may create (`--workload-kinds`, pure);
//! - [`served`]: how the API server serves a kind, if at all (discovery).

pub mod allowed;
pub mod backfill;
pub mod build;
pub mod cel;
pub mod delete;
pub mod dry_run;
pub mod kinds;
pub mod name;
pub mod read;
pub mod rule;
pub mod served;

use std::sync::{Arc, LazyLock};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;

pub use build::{NewWorkload, for_backfill, for_slot, from_template, manual};
pub use delete::{Deletion, delete_guarded};
pub use dry_run::{
    DRY_RUN_TIMEOUT, TemplateDryRun, Unknown, Verdict, invalid, probe, refusal_message,
};
pub use name::{manual_name, scheduled_name};
pub use read::{
    Finish, Outcome, Ran, backfilled, controlled_by, controller_uid, created_by_kronjob,
    is_controlled_by_kronjob, job_finish, ran_for, slot_of, slot_recorded,
};

/// A workload's `apiVersion` and `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadType {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    /// The kind, e.g. `Job`.
    pub kind: String,
}

static JOB: LazyLock<Arc<WorkloadType>> = LazyLock::new(|| {
    Arc::new(WorkloadType {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
    })
});

impl WorkloadType {
    /// batch/v1 Job, the kind of a `jobTemplate` (one shared copy).
    pub fn job() -> Arc<WorkloadType> {
        Arc::clone(&JOB)
    }

    /// Whether this is batch/v1 Job.
    pub fn is_job(&self) -> bool {
        *self == **JOB
    }

    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or("", |(group, _)| group)
    }

    /// The API version within the group.
    pub fn version(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or(self.api_version.as_str(), |(_, version)| version)
    }

    /// How Events and messages name one: `job` for a Job (upstream's word), else the kind.
    pub fn noun(&self) -> &str {
        if self.is_job() { "job" } else { &self.kind }
    }
}

/// The kind a CronJob runs: batch/v1 Job for a `jobTemplate`, else its `workloadTemplate`'s;
/// `None` for neither.
pub fn type_of(spec: &crate::api::CronJobSpec) -> Option<WorkloadType> {
    if spec.job_template.is_some() {
        return Some(WorkloadType::job().as_ref().clone());
    }
    let template = spec.workload_template.as_ref()?;
    Some(WorkloadType {
        api_version: template.api_version.clone(),
        kind: template.kind.clone(),
    })
}

/// A workload as the plan reads it, whatever its kind: its kind, its metadata (the name, UID,
/// owner references, kronjob's annotations, deletion time), and what its kind's rule says of
/// its status.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its apiVersion and kind.
    pub type_: Arc<WorkloadType>,
    /// Its metadata (as the caches keep it).
    pub metadata: ObjectMeta,
    /// When it started (a Job's `status.startTime`), if known.
    pub started: Option<Timestamp>,
    /// Whether, how and when it finished.
    pub finish: Option<Finish>,
    /// When it completed, if its kind records that apart from the finish (a Job's
    /// `status.completionTime`, which dates a success as upstream does).
    pub completed: Option<Timestamp>,
    /// Its TTL after finishing, in seconds, if it has one.
    pub ttl: Option<i32>,
    /// For a kind without a rule in [`kinds`]: the workload as a CronJob's completion rule
    /// reads it (`apiVersion`, `kind`, `metadata`, `status`), as compact JSON; [`Workload::judge`]
    /// reads its finish with that rule.
    pub raw: Option<Arc<str>>,
}

impl Workload {
    /// A batch/v1 Job read as a workload.
    pub fn of_job(job: &Job) -> Self {
        let status = job.status.as_ref();
        Workload {
            type_: WorkloadType::job(),
            metadata: job.metadata.clone(),
            started: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            finish: job_finish(job),
            completed: status.and_then(|s| s.completion_time.as_ref()).map(|t| t.0),
            ttl: job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished),
            raw: None,
        }
    }

    /// An object of any kind read as a workload, with its kind's `row` (`None`: a kind
    /// without a rule; its finish waits for [`Workload::judge`]).
    pub fn of_object(object: &DynamicObject, row: Option<&kinds::Row>) -> Self {
        let types = object.types.clone().unwrap_or_default();
        let status = object.data.get("status");
        let state = row.map(|row| {
            let whole = serde_json::json!({ "status": status });
            row.rule.state(&whole, &row.times)
        });
        let ttl = row
            .and_then(|row| row.ttl)
            .and_then(|path| rule::at(&object.data, path))
            .and_then(serde_json::Value::as_i64)
            .or_else(|| {
                let annotations = object.metadata.annotations.as_ref()?;
                annotations.get(crate::api::ANNOTATION_TTL)?.parse().ok()
            })
            .map(|ttl| i32::try_from(ttl).unwrap_or(i32::MAX));
        let raw = row.is_none().then(|| {
            let meta = &object.metadata;
            let view = serde_json::json!({
                "apiVersion": types.api_version,
                "kind": types.kind,
                "metadata": {
                    "name": meta.name,
                    "namespace": meta.namespace,
                    "uid": meta.uid,
                    "generation": meta.generation,
                    "labels": meta.labels,
                    "annotations": meta.annotations,
                },
                "status": status,
            });
            Arc::from(view.to_string())
        });
        let state = state.unwrap_or_default();
        Workload {
            type_: Arc::new(WorkloadType {
                api_version: types.api_version,
                kind: types.kind,
            }),
            metadata: object.metadata.clone(),
            started: state.started,
            finish: state.finish,
            completed: state.completed,
            ttl,
            raw,
        }
    }

    /// Read the finish of a workload of a kind without a rule with the CronJob's own
    /// `completion` (nothing changes for a kind with a rule).
    pub fn judge(&mut self, completion: &Arc<cel::Completion>) {
        let Some(raw) = self.raw.as_deref() else {
            return;
        };
        let Ok(object) = serde_json::from_str::<serde_json::Value>(raw) else {
            return;
        };
        let state = rule::Rule::Cel(Arc::clone(completion)).state(&object, &rule::USUAL_TIMES);
        self.started = state.started;
        self.finish = state.finish;
        self.completed = state.completed;
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// How it ended, if it did.
    pub fn outcome(&self) -> Option<Outcome> {
        self.finish.map(|f| f.outcome)
    }

    /// The reference `status.active` keeps of it.
    pub fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.type_.api_version.clone()),
            kind: Some(self.type_.kind.clone()),
            name: self.metadata.name.clone(),
            namespace: self.metadata.namespace.clone(),
            uid: self.metadata.uid.clone(),
            ..Default::default()
        }
    }
}

impl From<&Job> for Workload {
    fn from(job: &Job) -> Self {
        Workload::of_job(job)
    }
}

impl From<Job> for Workload {
    fn from(job: Job) -> Self {
        Workload::of_job(&job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_names_its_group_version_and_noun() {
        let job = WorkloadType::job();
        assert!(job.is_job());
        assert_eq!(
            (job.group(), job.version(), job.noun()),
            ("batch", "v1", "job")
        );
        let jobset = WorkloadType {
            api_version: "jobset.x-k8s.io/v1alpha2".into(),
            kind: "JobSet".into(),
        };
        assert!(!jobset.is_job());
        assert_eq!(
            (jobset.group(), jobset.version(), jobset.noun()),
            ("jobset.x-k8s.io", "v1alpha2", "JobSet")
        );
        let pod = WorkloadType {
            api_version: "v1".into(),
            kind: "Pod".into(),
        };
        assert_eq!((pod.group(), pod.version()), ("", "v1"));
    }
}
