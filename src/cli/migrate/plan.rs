//! The migration plan: from what was read (the batch/v1 CronJob as JSON, the kronjob CronJob
//! of the same name), what happens to one CronJob, in which steps, what changes on the way
//! and what deserves a warning. Pure: no API calls, no clock.
//!
//! The state of a migration lives in annotations of the kronjob CronJob, so an interrupted run
//! is finished by the next one and a finished one is left alone:
//! `migrated-from: batch/v1` and `migrated-from-uid` (where it came from), `original-suspend`
//! (the `spec.suspend` to restore) and `migration: in-progress | complete | reverting`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::Serialize;
use serde_json::{Value, json};

use super::diff::{Difference, comparable, differences, move_zone_prefix};
use crate::api::validation::{Operation, invalid_message, validate};
use crate::api::{
    ANNOTATION_LAST_APPLIED as LAST_APPLIED, ANNOTATION_TRIGGER, ConcurrencyPolicy, CronJob,
    CronJobSpec,
};
use crate::schedule::Schedule;

/// Annotation naming the API the CronJob was migrated from (value `batch/v1`).
pub const ANNOTATION_MIGRATED_FROM: &str = "batch.kronjob.dev/migrated-from";
/// Annotation holding the UID of the batch/v1 CronJob it was migrated from.
pub const ANNOTATION_MIGRATED_FROM_UID: &str = "batch.kronjob.dev/migrated-from-uid";
/// Annotation holding the `spec.suspend` the CronJob gets when the migration completes.
pub const ANNOTATION_ORIGINAL_SUSPEND: &str = "batch.kronjob.dev/original-suspend";
/// Annotation holding the state of the migration: `in-progress`, `complete` or `reverting`.
pub const ANNOTATION_MIGRATION: &str = "batch.kronjob.dev/migration";
/// The value of [`ANNOTATION_MIGRATED_FROM`].
pub const BATCH_V1: &str = "batch/v1";
/// The API whose types decide which job template fields survive.
const TYPES_VERSION: &str = "Kubernetes 1.33";

/// Where a migration stands, from [`ANNOTATION_MIGRATION`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Created, not yet resumed: the batch/v1 CronJob may still run.
    InProgress,
    /// Done: the kronjob CronJob runs, the batch/v1 one is suspended or deleted.
    Complete,
    /// Being reverted: the kronjob CronJob is suspended for good.
    Reverting,
}

impl State {
    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            State::InProgress => "in-progress",
            State::Complete => "complete",
            State::Reverting => "reverting",
        }
    }
}

/// What the annotations of a migrated kronjob CronJob say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Where the migration stands (an unknown value counts as in progress).
    pub state: State,
    /// UID of the batch/v1 CronJob it came from.
    pub from_uid: Option<String>,
    /// The `spec.suspend` to restore.
    pub original_suspend: bool,
}

/// The migration record of a kronjob CronJob; `None` when it was not migrated from batch/v1.
pub fn record_of(cj: &CronJob) -> Option<Record> {
    let annotations = cj.metadata.annotations.as_ref()?;
    if annotations
        .get(ANNOTATION_MIGRATED_FROM)
        .map(String::as_str)
        != Some(BATCH_V1)
    {
        return None;
    }
    let state = match annotations.get(ANNOTATION_MIGRATION).map(String::as_str) {
        Some("complete") => State::Complete,
        Some("reverting") => State::Reverting,
        _ => State::InProgress,
    };
    Some(Record {
        state,
        from_uid: annotations.get(ANNOTATION_MIGRATED_FROM_UID).cloned(),
        original_suspend: annotations
            .get(ANNOTATION_ORIGINAL_SUSPEND)
            .map(String::as_str)
            == Some("true"),
    })
}

/// The status times a migration carries from one CronJob to the other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Times {
    /// `status.lastScheduleTime`.
    pub last_schedule: Option<Timestamp>,
    /// `status.lastSuccessfulTime`.
    pub last_successful: Option<Timestamp>,
}

impl Times {
    /// The times in the `status` of an object read as JSON (unreadable values count as absent).
    pub fn of_json(object: &Value) -> Times {
        let at = |field: &str| object["status"][field].as_str()?.parse::<Timestamp>().ok();
        Times {
            last_schedule: at("lastScheduleTime"),
            last_successful: at("lastSuccessfulTime"),
        }
    }

    /// The times in the status of a kronjob CronJob.
    pub fn of_cronjob(cj: &CronJob) -> Times {
        let status = cj.status.as_ref();
        let at = |t: Option<&Time>| t.map(|t| t.0);
        Times {
            last_schedule: at(status.and_then(|s| s.last_schedule_time.as_ref())),
            last_successful: at(status.and_then(|s| s.last_successful_time.as_ref())),
        }
    }

    /// The later of each time.
    pub fn max(self, other: Times) -> Times {
        Times {
            last_schedule: self.last_schedule.max(other.last_schedule),
            last_successful: self.last_successful.max(other.last_successful),
        }
    }

    /// The times of `self` that are later than those of `other` (the others absent).
    pub fn newer_than(self, other: Times) -> Times {
        let newer = |a: Option<Timestamp>, b: Option<Timestamp>| a.filter(|_| a > b);
        Times {
            last_schedule: newer(self.last_schedule, other.last_schedule),
            last_successful: newer(self.last_successful, other.last_successful),
        }
    }

    /// Whether no time is set.
    pub fn is_empty(self) -> bool {
        self.last_schedule.is_none() && self.last_successful.is_none()
    }

    /// A merge patch of the status subresource setting the times that are set.
    pub fn status_patch(self) -> Value {
        let mut status = serde_json::Map::new();
        if let Some(t) = self.last_schedule {
            status.insert("lastScheduleTime".into(), json!(Time(t)));
        }
        if let Some(t) = self.last_successful {
            status.insert("lastSuccessfulTime".into(), json!(Time(t)));
        }
        json!({ "status": status })
    }

    /// `status.lastScheduleTime 2024-01-15T10:00:00Z and status.lastSuccessfulTime ...`.
    pub fn describe(self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.last_schedule {
            parts.push(format!("status.lastScheduleTime {t}"));
        }
        if let Some(t) = self.last_successful {
            parts.push(format!("status.lastSuccessfulTime {t}"));
        }
        parts.join(" and ")
    }
}

/// What happens to one CronJob.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Migrate a batch/v1 CronJob.
    Migrate,
    /// Finish a migration left half-done.
    Finish,
    /// Delete the batch/v1 CronJob of a completed migration (`--delete-original`).
    DeleteOriginal,
    /// Undo a migration.
    Revert,
    /// Nothing to do.
    None,
    /// Refused; `error` says why.
    Skip,
}

impl Action {
    /// The action as a plan states it: `migrate`.
    pub fn planned(self) -> &'static str {
        match self {
            Action::Migrate => "migrate",
            Action::Finish => "finish the migration",
            Action::DeleteOriginal => "delete the original",
            Action::Revert => "revert",
            Action::None => "nothing to do",
            Action::Skip => "skip",
        }
    }

    /// The action once done: `migrated`.
    pub fn done(self) -> &'static str {
        match self {
            Action::Migrate => "migrated",
            Action::Finish => "migration finished",
            Action::DeleteOriginal => "original deleted",
            Action::Revert => "reverted",
            Action::None => "unchanged",
            Action::Skip => "skipped",
        }
    }
}

/// One request (or read-then-maybe-write) of a plan, in the order it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Create [`Plan::target`], suspended, marked in progress.
    Create,
    /// Write the carried times to the kronjob CronJob's status, where they are later.
    WriteMigratedStatus,
    /// Merge patch `spec.suspend: true` on the batch/v1 CronJob.
    SuspendOriginal,
    /// Read the batch/v1 CronJob again and carry a later status to the kronjob CronJob.
    Recheck,
    /// Delete the batch/v1 CronJob, orphaning its Jobs.
    DeleteOriginal,
    /// Set the kronjob CronJob's `spec.suspend` and mark the migration complete.
    Complete {
        /// The `spec.suspend` it gets.
        suspend: bool,
    },
    /// Suspend the kronjob CronJob and mark it reverting.
    SuspendMigrated {
        /// A new `original-suspend` to record (the kronjob CronJob's own, when it ran).
        record: Option<bool>,
    },
    /// Create [`Plan::recreate`], the batch/v1 CronJob, suspended.
    RecreateOriginal,
    /// Write the carried times to the batch/v1 CronJob's status, where they are later.
    WriteOriginalStatus,
    /// Set the batch/v1 CronJob's `spec.suspend`.
    RestoreOriginal {
        /// The value.
        suspend: bool,
    },
    /// Delete the kronjob CronJob, orphaning its Jobs.
    DeleteMigrated,
}

/// What was read about one name: either CronJob may be missing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Found<'a> {
    /// The batch/v1 CronJob, as JSON (so fields our types do not know are seen).
    pub original: Option<&'a Value>,
    /// The kronjob CronJob of the same name.
    pub migrated: Option<&'a CronJob>,
}

/// The plan for one CronJob.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Namespace.
    pub namespace: String,
    /// Name (the same for both CronJobs).
    pub name: String,
    /// What happens.
    pub action: Action,
    /// How, in order.
    pub steps: Vec<Step>,
    /// What changes, one line each, in order.
    pub changes: Vec<String>,
    /// What the user should know.
    pub warnings: Vec<String>,
    /// Why the CronJob is skipped.
    pub error: Option<String>,
    /// The kronjob CronJob to create.
    pub target: Option<CronJob>,
    /// The batch/v1 CronJob to recreate (revert, when it was deleted).
    pub recreate: Option<Value>,
    /// The status times of the batch/v1 CronJob as read.
    pub original_times: Times,
    /// The status times of the kronjob CronJob as read.
    pub migrated_times: Times,
    /// UID of the batch/v1 CronJob as read.
    pub original_uid: Option<String>,
    /// resourceVersion of the batch/v1 CronJob as read: suspending or deleting it requires
    /// it unchanged, so an edit made since the plan is never lost.
    pub original_resource_version: Option<String>,
    /// UID of the kronjob CronJob as read.
    pub migrated_uid: Option<String>,
}

impl Plan {
    fn new(namespace: &str, name: &str, found: Found) -> Plan {
        Plan {
            namespace: namespace.into(),
            name: name.into(),
            action: Action::None,
            steps: Vec::new(),
            changes: Vec::new(),
            warnings: Vec::new(),
            error: None,
            target: None,
            recreate: None,
            original_times: found.original.map(Times::of_json).unwrap_or_default(),
            migrated_times: found.migrated.map(Times::of_cronjob).unwrap_or_default(),
            original_uid: found
                .original
                .and_then(|o| o["metadata"]["uid"].as_str())
                .map(String::from),
            original_resource_version: found
                .original
                .and_then(|o| o["metadata"]["resourceVersion"].as_str())
                .map(String::from),
            migrated_uid: found.migrated.and_then(|m| m.metadata.uid.clone()),
        }
    }

    fn skip(mut self, error: String) -> Plan {
        self.action = Action::Skip;
        self.steps.clear();
        self.changes.clear();
        self.error = Some(error);
        self
    }

    /// `cronjob.batch/NAME`.
    pub fn original_ref(&self) -> String {
        format!("cronjob.batch/{}", self.name)
    }

    /// `cronjob.batch.kronjob.dev/NAME`.
    pub fn migrated_ref(&self) -> String {
        format!("cronjob.batch.kronjob.dev/{}", self.name)
    }
}

/// Options of a migration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Delete the batch/v1 CronJob instead of leaving it suspended.
    pub delete_original: bool,
}

/// Plan the migration of the batch/v1 CronJob `namespace/name`.
pub fn plan_migration(namespace: &str, name: &str, found: Found, options: Options) -> Plan {
    let plan = Plan::new(namespace, name, found);
    match (found.original, found.migrated) {
        (None, None) => {
            let missing = format!("{} not found", plan.original_ref());
            plan.skip(missing)
        }
        (Some(original), None) => fresh(plan, original, options),
        (original, Some(migrated)) => match record_of(migrated) {
            Some(record) => continue_migration(plan, original, migrated, &record, options),
            None if original.is_none() => {
                let missing = format!("{} not found", plan.original_ref());
                plan.skip(missing)
            }
            None => {
                let taken = format!(
                    "{} already exists and was not migrated from {}: rename or delete one of them",
                    plan.migrated_ref(),
                    plan.original_ref()
                );
                plan.skip(taken)
            }
        },
    }
}

/// A kronjob CronJob from this migration exists: finish, repair or leave it.
fn continue_migration(
    plan: Plan,
    original: Option<&Value>,
    migrated: &CronJob,
    record: &Record,
    options: Options,
) -> Plan {
    if let (Some(uid), Some(from)) = (&plan.original_uid, &record.from_uid)
        && uid != from
    {
        let other = format!(
            "{} was migrated from another {} (uid {from}, this one is {uid})",
            plan.migrated_ref(),
            plan.original_ref()
        );
        return plan.skip(other);
    }
    match record.state {
        State::Reverting => {
            let reverting = format!(
                "a revert of {} is in progress: run with --revert to finish it",
                plan.migrated_ref()
            );
            plan.skip(reverting)
        }
        State::InProgress => match original.map(|o| spec_differences(o, migrated)) {
            Some(changed) if !changed.is_empty() => {
                let stale = changed_since_created(&plan, &changed);
                plan.skip(stale)
            }
            _ => finish(plan, original, record, options),
        },
        State::Complete => completed(plan, original, options),
    }
}

/// The batch/v1 CronJob changed after an earlier run created the kronjob CronJob from it:
/// finishing would lose the change, so the migration stops and says how to carry it.
fn changed_since_created(plan: &Plan, changed: &[Difference]) -> String {
    let (original, migrated) = (plan.original_ref(), plan.migrated_ref());
    let fields: Vec<String> = changed
        .iter()
        .map(|d| d.swapped().describe(&original, &migrated))
        .collect();
    format!(
        "{original} was changed after {migrated} was created from it ({}); finishing would lose the change: delete {migrated} (created suspended by an earlier run, it never ran) and run the migration again",
        fields.join("; ")
    )
}

/// A migration left in progress: carry the status, suspend (or delete) the original, resume.
fn finish(mut plan: Plan, original: Option<&Value>, record: &Record, options: Options) -> Plan {
    plan.action = Action::Finish;
    plan.changes.push(format!(
        "finish the migration to {}, started earlier",
        plan.migrated_ref()
    ));
    if let Some(original) = original {
        plan.steps.push(Step::WriteMigratedStatus);
        let newer = plan.original_times.newer_than(plan.migrated_times);
        if !newer.is_empty() {
            let to = plan.migrated_ref();
            plan.changes
                .push(format!("copy {} to {to}", newer.describe()));
        }
        stop_original(&mut plan, original, options);
    }
    resume(&mut plan, record.original_suspend);
    plan
}

/// A completed migration: nothing to do, unless the original runs again or is to go.
fn completed(mut plan: Plan, original: Option<&Value>, options: Options) -> Plan {
    let Some(original) = original else {
        plan.changes
            .push(format!("already migrated to {}", plan.migrated_ref()));
        return plan;
    };
    if !suspended(original) {
        plan.action = Action::Finish;
        plan.warnings.push(format!(
            "{} was resumed after the migration: both controllers would run it; it is suspended again",
            plan.original_ref()
        ));
        stop_original(&mut plan, original, options);
    } else if options.delete_original {
        plan.action = Action::DeleteOriginal;
        stop_original(&mut plan, original, options);
    } else {
        plan.changes.push(format!(
            "already migrated to {}; {} stays suspended",
            plan.migrated_ref(),
            plan.original_ref()
        ));
    }
    plan
}

/// Suspend the original unless it is, read it again after suspending it, delete it if asked.
fn stop_original(plan: &mut Plan, original: &Value, options: Options) {
    if !suspended(original) {
        plan.steps.extend([Step::SuspendOriginal, Step::Recheck]);
        plan.changes
            .push(format!("suspend {}", plan.original_ref()));
        plan.changes.push(format!(
            "read {} again and copy a later status to {} (a run that started before the suspension)",
            plan.original_ref(),
            plan.migrated_ref()
        ));
    }
    if options.delete_original {
        plan.steps.push(Step::DeleteOriginal);
        plan.changes.push(format!(
            "delete {} with propagationPolicy Orphan: its Jobs keep running and are left in place",
            plan.original_ref()
        ));
    }
}

/// Give the kronjob CronJob its `spec.suspend` and mark the migration complete.
fn resume(plan: &mut Plan, suspend: bool) {
    plan.steps.push(Step::Complete { suspend });
    let what = if suspend {
        format!(
            "leave {} suspended, as the original was",
            plan.migrated_ref()
        )
    } else {
        format!("resume {}", plan.migrated_ref())
    };
    plan.changes
        .push(format!("{what}, and mark the migration complete"));
}

/// Whether a batch/v1 CronJob read as JSON is suspended.
pub fn suspended(original: &Value) -> bool {
    original["spec"]["suspend"].as_bool() == Some(true)
}

/// A batch/v1 CronJob not migrated yet: the whole sequence.
fn fresh(mut plan: Plan, original: &Value, options: Options) -> Plan {
    let target = match target(&plan, original) {
        Ok((target, conversions, dropped)) => {
            plan.changes.push(format!(
                "create {}, suspended, with the spec, labels and annotations of {}",
                plan.migrated_ref(),
                plan.original_ref()
            ));
            plan.changes.extend(conversions);
            plan.warnings.extend(dropped);
            target
        }
        Err(error) => return plan.skip(error),
    };
    plan.action = Action::Migrate;
    plan.warnings.extend(warnings(&plan, original));
    plan.steps.extend([Step::Create, Step::WriteMigratedStatus]);
    if !plan.original_times.is_empty() {
        let copy = format!(
            "copy {} to {}",
            plan.original_times.describe(),
            plan.migrated_ref()
        );
        plan.changes.push(copy);
    }
    plan.target = Some(target);
    stop_original(&mut plan, original, options);
    resume(&mut plan, suspended(original));
    plan
}

/// Running Jobs the kronjob CronJob will not see, and owners that may undo the change.
fn warnings(plan: &Plan, original: &Value) -> Vec<String> {
    let mut warnings = Vec::new();
    let active = original["status"]["active"].as_array().map_or(0, Vec::len);
    let policy = original["spec"]["concurrencyPolicy"]
        .as_str()
        .unwrap_or("Allow");
    if active > 0 && policy != ConcurrencyPolicy::Allow.as_str() {
        warnings.push(format!(
            "{} has {active} running Job(s) and concurrencyPolicy {policy}: {} does not see them, so its next run neither waits for nor replaces them",
            plan.original_ref(),
            plan.migrated_ref()
        ));
    }
    for owner in original["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
    {
        warnings.push(format!(
            "{} is owned by {} {}: its owner may undo the suspension or recreate it",
            plan.original_ref(),
            owner["kind"].as_str().unwrap_or("?"),
            owner["name"].as_str().unwrap_or("?")
        ));
    }
    warnings
}

type Built = (CronJob, Vec<String>, Vec<String>);

/// The kronjob CronJob a batch/v1 CronJob becomes (suspended, annotated in progress), the
/// conversions made, and the job template fields our types drop; or why it cannot be.
fn target(plan: &Plan, original: &Value) -> Result<Built, String> {
    let mut spec: CronJobSpec = serde_json::from_value(original["spec"].clone()).map_err(|e| {
        format!(
            "spec of {} does not read as a CronJob spec: {e}",
            plan.original_ref()
        )
    })?;
    let mut conversions = Vec::new();
    if let Some(change) = move_zone_prefix(&mut spec)? {
        conversions.push(change);
    }
    let template = spec.job_template.clone().unwrap_or_default();
    let dropped = dropped_fields(&original["spec"]["jobTemplate"], &template)?;
    let original_suspend = spec.is_suspended();
    spec.suspend = Some(true);
    let (labels, annotations, dropped_annotation) = carried_metadata(original);
    if dropped_annotation {
        conversions.push(format!("annotation {LAST_APPLIED} is not copied"));
    }
    let mut annotations = annotations;
    annotations.extend([
        (ANNOTATION_MIGRATED_FROM.to_string(), BATCH_V1.to_string()),
        (
            ANNOTATION_MIGRATED_FROM_UID.to_string(),
            plan.original_uid.clone().unwrap_or_default(),
        ),
        (
            ANNOTATION_ORIGINAL_SUSPEND.to_string(),
            original_suspend.to_string(),
        ),
        (
            ANNOTATION_MIGRATION.to_string(),
            State::InProgress.as_str().to_string(),
        ),
    ]);
    let mut target = CronJob::new(&plan.name, spec);
    target.metadata = ObjectMeta {
        name: Some(plan.name.clone()),
        namespace: Some(plan.namespace.clone()),
        labels: (!labels.is_empty()).then_some(labels),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    };
    check(&target)?;
    Ok((target, conversions, dropped))
}

fn carried_metadata(
    original: &Value,
) -> (BTreeMap<String, String>, BTreeMap<String, String>, bool) {
    let strings = |v: &Value| -> BTreeMap<String, String> {
        serde_json::from_value(v.clone()).unwrap_or_default()
    };
    let labels = strings(&original["metadata"]["labels"]);
    let mut annotations = strings(&original["metadata"]["annotations"]);
    let dropped = annotations.remove(LAST_APPLIED).is_some();
    (labels, annotations, dropped)
}

/// What the API server (or the webhook) would refuse on create.
fn check(target: &CronJob) -> Result<(), String> {
    let object = serde_json::to_value(target).map_err(|e| e.to_string())?;
    let errors = validate(&object, None, Operation::Create);
    if errors.is_empty() {
        Ok(())
    } else {
        let name = target.metadata.name.as_deref().unwrap_or_default();
        Err(format!(
            "cannot migrate: {}",
            invalid_message(name, &errors)
        ))
    }
}

/// Every path of `original` (the job template as JSON) that is lost on its way through the
/// typed struct, as a warning.
fn dropped_fields(original: &Value, kept: &JobTemplateSpec) -> Result<Vec<String>, String> {
    let kept = serde_json::to_value(kept).map_err(|e| e.to_string())?;
    let mut paths = Vec::new();
    lost_paths(original, &kept, "spec.jobTemplate", &mut paths);
    Ok(paths
        .into_iter()
        .map(|path| format!("{path} is not a field of {TYPES_VERSION}'s types: it is dropped"))
        .collect())
}

/// Paths present (and not empty) in `original` but absent from `kept`.
pub fn lost_paths(original: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (original, kept) {
        (Value::Object(fields), Value::Object(kept_fields)) => {
            for (key, value) in fields {
                let at = format!("{path}.{key}");
                match kept_fields.get(key).filter(|v| !v.is_null()) {
                    Some(kept_value) => lost_paths(value, kept_value, &at, out),
                    None if !is_empty(value) => out.push(at),
                    None => {}
                }
            }
        }
        (Value::Array(items), Value::Array(kept_items)) => {
            for (i, value) in items.iter().enumerate() {
                let at = format!("{path}[{i}]");
                match kept_items.get(i) {
                    Some(kept_value) => lost_paths(value, kept_value, &at, out),
                    None if !is_empty(value) => out.push(at),
                    None => {}
                }
            }
        }
        _ => {}
    }
}

/// Null, `{}` and `[]` carry nothing.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Plan undoing the migration of `namespace/name`.
pub fn plan_revert(namespace: &str, name: &str, found: Found) -> Plan {
    let plan = Plan::new(namespace, name, found);
    let Some(migrated) = found.migrated else {
        return match found.original {
            Some(_) => {
                let mut plan = plan;
                let note = format!("not migrated: {} does not exist", plan.migrated_ref());
                plan.changes.push(note);
                plan
            }
            None => {
                let missing = format!("{} not found", plan.migrated_ref());
                plan.skip(missing)
            }
        };
    };
    let Some(record) = record_of(migrated) else {
        let native = format!(
            "{} was not migrated from batch/v1: nothing to revert",
            plan.migrated_ref()
        );
        return plan.skip(native);
    };
    if let Some(request) = crate::workload::backfill::requested(migrated) {
        let busy = format!(
            "{} has a backfill in progress ({}: {request}), which batch/v1 cannot run: wait for it to finish, or remove the annotation to cancel it",
            plan.migrated_ref(),
            crate::api::ANNOTATION_BACKFILL
        );
        return plan.skip(busy);
    }
    revert(plan, found.original, migrated, &record)
}

/// Suspend the kronjob CronJob, bring back the batch/v1 one with the later status, delete the
/// kronjob CronJob.
fn revert(mut plan: Plan, original: Option<&Value>, migrated: &CronJob, record: &Record) -> Plan {
    if let Some(pending) = pending_runs(migrated) {
        let error = format!(
            "{} has manual runs pending ({pending}), which batch/v1 cannot hold: let them run, or cancel them first (kubectl kronjob trigger {} --cancel)",
            plan.migrated_ref(),
            plan.name
        );
        return plan.skip(error);
    }
    plan.action = Action::Revert;
    let record_suspend = (record.state == State::Complete).then(|| migrated.spec.is_suspended());
    let restore = record_suspend.unwrap_or(record.original_suspend);
    if !(record.state == State::Reverting && migrated.spec.is_suspended()) {
        plan.steps.push(Step::SuspendMigrated {
            record: record_suspend,
        });
        plan.changes
            .push(format!("suspend {}", plan.migrated_ref()));
    }
    let original_suspended = match original {
        Some(original) => {
            plan.warnings.extend(spec_drift(&plan, original, migrated));
            suspended(original)
        }
        None => match recreated(&plan, migrated) {
            Ok(object) => {
                plan.recreate = Some(object);
                plan.steps.push(Step::RecreateOriginal);
                plan.changes.push(format!(
                    "create {}, suspended, from the spec of {}",
                    plan.original_ref(),
                    plan.migrated_ref()
                ));
                true
            }
            Err(error) => return plan.skip(error),
        },
    };
    plan.steps.push(Step::WriteOriginalStatus);
    let newer = plan.migrated_times.newer_than(plan.original_times);
    if !newer.is_empty() {
        let to = plan.original_ref();
        plan.changes
            .push(format!("copy {} to {to}", newer.describe()));
    }
    if original_suspended != restore {
        plan.steps.push(Step::RestoreOriginal { suspend: restore });
        let verb = if restore { "suspend" } else { "resume" };
        plan.changes.push(format!("{verb} {}", plan.original_ref()));
    }
    plan.steps.push(Step::DeleteMigrated);
    plan.changes.push(format!(
        "delete {} with propagationPolicy Orphan: its Jobs keep running and are left in place",
        plan.migrated_ref()
    ));
    plan
}

/// Where the spec of the kronjob CronJob (left) differs from the batch/v1 CronJob's (right).
fn spec_differences(original: &Value, migrated: &CronJob) -> Vec<Difference> {
    let Ok(spec) = serde_json::to_value(&migrated.spec) else {
        return Vec::new();
    };
    match (comparable(&spec), comparable(&original["spec"])) {
        (Some(left), Some(right)) => differences(&left, &right, "spec"),
        _ => Vec::new(),
    }
}

/// Every spec change made to the kronjob CronJob after the migration stays behind: the
/// batch/v1 CronJob keeps its own spec. One warning per field.
fn spec_drift(plan: &Plan, original: &Value, migrated: &CronJob) -> Vec<String> {
    let (original_ref, migrated_ref) = (plan.original_ref(), plan.migrated_ref());
    spec_differences(original, migrated)
        .iter()
        .map(|d| {
            format!(
                "{}: {original_ref} keeps its own",
                d.describe(&migrated_ref, &original_ref)
            )
        })
        .collect()
}

/// The manual runs a kronjob CronJob holds asked for (`trigger`, `trigger --at`), as written.
fn pending_runs(migrated: &CronJob) -> Option<String> {
    let value = migrated
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_TRIGGER)?;
    Some(
        value
            .split(',')
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// The batch/v1 CronJob recreated from a kronjob CronJob, suspended; refused when its schedule
/// uses `H`, it has several schedules, runs another kind than Job, or has `concurrencyPolicy:
/// Enqueue`, which batch/v1 does not
/// know (its queued slots would be lost, and Forbid or Allow would run them otherwise). A single entry of
/// `schedules` becomes `schedule`; the failure policy is not carried (batch/v1 has none).
fn recreated(plan: &Plan, migrated: &CronJob) -> Result<Value, String> {
    let key = format!("{}/{}", plan.namespace, plan.name);
    let exprs = migrated.spec.schedule_exprs().unwrap_or_default();
    let gone = format!(
        "{} no longer exists and {}",
        plan.original_ref(),
        plan.migrated_ref()
    );
    if exprs.len() > 1 {
        return Err(format!(
            "{gone} has {} schedules; a batch/v1 CronJob has one",
            exprs.len()
        ));
    }
    if let Some(template) = &migrated.spec.workload_template {
        return Err(format!(
            "{gone} runs {} {}, which a batch/v1 CronJob cannot run: it runs Jobs only",
            template.api_version, template.kind
        ));
    }
    if migrated.spec.concurrency_policy == crate::api::ConcurrencyPolicy::Enqueue {
        return Err(format!(
            "{gone} has concurrencyPolicy Enqueue, which batch/v1 does not know: set Forbid, Allow or Replace first (its queued slots are dropped then)"
        ));
    }
    if Schedule::parse_each(exprs, &key).is_ok_and(|s| s.uses_hash()) {
        return Err(format!(
            "{gone} uses H in its schedule, which batch/v1 does not know"
        ));
    }
    let calendared = [
        ("spec.exclusions", migrated.spec.exclusions.is_some()),
        (
            "spec.calendars",
            migrated
                .spec
                .calendars
                .as_ref()
                .is_some_and(|c| !c.is_empty()),
        ),
        ("spec.notBefore", migrated.spec.not_before.is_some()),
        ("spec.notAfter", migrated.spec.not_after.is_some()),
    ];
    let set: Vec<&str> = calendared
        .iter()
        .filter(|(_, set)| *set)
        .map(|(field, _)| *field)
        .collect();
    if !set.is_empty() {
        return Err(format!(
            "{gone} sets {}, which batch/v1 does not know (a batch/v1 CronJob would run the slots they keep from running): remove {} first",
            set.join(" and "),
            if set.len() > 1 { "them" } else { "it" }
        ));
    }
    let mut spec = migrated.spec.clone();
    spec.schedule = exprs.first().cloned();
    spec.schedules = None;
    spec.failure_policy = None;
    spec.queue = None;
    spec.suspend = Some(true);
    let mut annotations = migrated.metadata.annotations.clone().unwrap_or_default();
    annotations.retain(|key, _| {
        ![
            ANNOTATION_MIGRATED_FROM,
            ANNOTATION_MIGRATED_FROM_UID,
            ANNOTATION_ORIGINAL_SUSPEND,
            ANNOTATION_MIGRATION,
            ANNOTATION_TRIGGER,
            LAST_APPLIED,
        ]
        .contains(&key.as_str())
    });
    let mut metadata = json!({"name": plan.name, "namespace": plan.namespace});
    if let Some(labels) = &migrated.metadata.labels {
        metadata["labels"] = json!(labels);
    }
    if !annotations.is_empty() {
        metadata["annotations"] = json!(annotations);
    }
    Ok(json!({
        "apiVersion": BATCH_V1,
        "kind": "CronJob",
        "metadata": metadata,
        "spec": spec,
    }))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
