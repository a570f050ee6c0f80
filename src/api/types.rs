//! The `CronJob` custom resource: the same spec and status field names and meanings as the
//! built-in `batch/v1` CronJob, plus additive status fields.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of every kronjob resource.
pub const GROUP: &str = "batch.kronjob.dev";
/// The served and stored version.
pub const VERSION: &str = "v1";
/// Name of the `CronJob` CRD.
pub const CRD_NAME: &str = "cronjobs.batch.kronjob.dev";
/// Name of the `Calendar` CRD.
pub const CALENDAR_CRD_NAME: &str = "calendars.batch.kronjob.dev";
/// Label set on every Job created for a CronJob; its value is the CronJob's name.
pub const LABEL_CRONJOB: &str = "batch.kronjob.dev/cronjob";
/// Annotation holding the scheduled time of a Job (RFC 3339 in the CronJob's time zone).
pub const ANNOTATION_SCHEDULED_AT: &str = "batch.kronjob.dev/scheduled-at";
/// Annotation marking a Job created by `kubectl kronjob trigger` (value `manual`).
pub const ANNOTATION_INSTANTIATE: &str = "batch.kronjob.dev/instantiate";
/// Annotation on a CronJob asking for a manual run (`kubectl kronjob trigger`); its value is
/// the time of the request (RFC 3339), from which the Job's name derives. The controller removes
/// it once the Job exists.
pub const ANNOTATION_TRIGGER: &str = "batch.kronjob.dev/trigger";
/// Annotation on a CronJob asking for a backfill (`kubectl kronjob backfill`): a JSON object
/// `{"from": T1, "to": T2, "parallel": N}` (RFC 3339 instants). The controller runs the slots
/// of the range that never ran, then removes it (see docs/backfill.md).
pub const ANNOTATION_BACKFILL: &str = "batch.kronjob.dev/backfill";
/// Annotation marking a Job a backfill created (value `true`), beside the slot's
/// [`ANNOTATION_SCHEDULED_AT`].
pub const ANNOTATION_BACKFILLED: &str = "batch.kronjob.dev/backfilled";
/// Annotation asking for deletion that many seconds after a run finishes: on a Pod, and on a
/// workload whose kind has no TTL field of its own (kronjob writes the manager's default there).
pub const ANNOTATION_TTL: &str = "batch.kronjob.dev/ttl-seconds-after-finished";
/// The annotation `kubectl apply` leaves on objects: large, and never read by kronjob.
pub const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Default of `spec.successfulJobsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 3;
/// Default of `spec.failedJobsHistoryLimit`.
pub const DEFAULT_FAILED_JOBS_HISTORY_LIMIT: i32 = 1;

/// CronJobSpec describes how the job execution will look like and when it will actually run.
// Several `printcolumn(type_ = ..)` arguments are distinct columns, not duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "batch.kronjob.dev",
    version = "v1",
    kind = "CronJob",
    plural = "cronjobs",
    singular = "cronjob",
    shortname = "kcj",
    category = "kronjob",
    namespaced,
    status = "CronJobStatus",
    derive = "PartialEq",
    doc = "CronJob runs a Job on a time-based schedule. It has the fields and meaning of the built-in batch/v1 CronJob, and adds time-zone-safe DST handling, H jitter, several schedules, a failure policy, and richer status.",
    // `status.schedule`: a printer column cannot show "the first of spec.schedules and how many
    // more", so the controller writes that summary (the schedule itself when there is one).
    printcolumn(name = "Schedule", type_ = "string", json_path = ".status.schedule"),
    printcolumn(name = "Timezone", type_ = "string", json_path = ".spec.timeZone"),
    printcolumn(name = "Suspend", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(name = "Active", type_ = "integer", json_path = ".status.activeCount"),
    printcolumn(
        name = "Queued",
        type_ = "integer",
        json_path = ".status.queuedCount",
        priority = 1
    ),
    printcolumn(
        name = "Last Schedule",
        type_ = "date",
        json_path = ".status.lastScheduleTime"
    ),
    // kubectl prints a `date` column as the age of the time, `<invalid>` for a future one:
    // the next run is shown as the time itself.
    printcolumn(
        name = "Next Schedule",
        type_ = "string",
        json_path = ".status.nextScheduleTime"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron: five fields
    /// (minute, hour, day of month, month, day of week), names JAN-DEC and SUN-SAT, `?` for `*`,
    /// descriptors such as `@hourly` and `@every 90m`. `H` picks a stable per-CronJob value
    /// (`H`, `H(0-29)`, `H/15`) to spread load. Exactly one of `schedule` and `schedules` is
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "string_schema")]
    pub schedule: Option<String>,

    /// Several schedules instead of `schedule` (at most 16), each in the language of
    /// `schedule`, all in `timeZone`. The CronJob runs at every time any of them names, once
    /// per time however many name it (one Job). `H` picks the same values in each. `@every`
    /// cannot be combined with other schedules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "string_list_schema")]
    pub schedules: Option<Vec<String>>,

    /// The time zone name for the given schedule, see
    /// https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, UTC is used.
    /// The time zone database is built into the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,

    /// Optional deadline in seconds for starting the job if it misses scheduled time for any
    /// reason. Missed jobs executions will be counted as failed ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,

    /// Specifies how to treat concurrent executions of a Job. Valid values are: "Allow"
    /// (default): allows CronJobs to run concurrently; "Forbid": forbids concurrent runs,
    /// skipping next run if previous run hasn't finished yet; "Replace": cancels currently
    /// running job and replaces it with a new one; "Enqueue": a slot that falls due while a
    /// Job is running waits in `status.queued` and runs, with its own scheduled time, when no
    /// Job runs any more, oldest first (bounded by `spec.queue`).
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,

    /// The bound of the Enqueue policy's queue. Only with `concurrencyPolicy: Enqueue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueSpec>,

    /// This flag tells the controller to suspend subsequent executions, it does not apply to
    /// already started executions. Defaults to false.
    #[serde(default = "default_suspend", skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// Specifies the job that will be created when executing a CronJob. Exactly one of
    /// `jobTemplate` and `workloadTemplate` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_template: Option<JobTemplateSpec>,

    /// The workload created for each run instead of a batch/v1 Job: any namespaced kind
    /// (JobSet, RayJob, PipelineRun, Workflow, TrainJob, SparkApplication, ...), given by its
    /// `apiVersion`, `kind`, the labels and annotations of its `metadata`, and its `spec`.
    /// Exactly one of `jobTemplate` and `workloadTemplate` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_template: Option<WorkloadTemplate>,

    /// When a run of `workloadTemplate` finished, and whether it succeeded: two CEL expressions
    /// over `self` (the workload's `apiVersion`, `kind`, `metadata` and `status`). Required for
    /// a kind kronjob has no rule for; for a known kind it replaces kronjob's rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<CompletionRule>,

    /// The number of successful finished jobs to retain. Value must be non-negative integer.
    /// Defaults to 3.
    #[serde(
        default = "default_successful_jobs_history_limit",
        skip_serializing_if = "Option::is_none"
    )]
    pub successful_jobs_history_limit: Option<i32>,

    /// The number of failed finished jobs to retain. Value must be non-negative integer.
    /// Defaults to 1.
    #[serde(
        default = "default_failed_jobs_history_limit",
        skip_serializing_if = "Option::is_none"
    )]
    pub failed_jobs_history_limit: Option<i32>,

    /// What the controller does when scheduled Jobs keep failing. Absent: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,

    /// This CronJob's own days on which none of its slots runs (the form of a Calendar's
    /// spec). A day is the slot's local date in `timeZone`. A skipped slot creates no Job, is
    /// not a missed run, and gets a Normal Event `SlotSkipped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusions: Option<CalendarSpec>,

    /// Names of cluster-scoped Calendars (`kubectl get calendars`) whose days none of the
    /// slots runs on, at most 16. While a named Calendar does not exist no slot runs
    /// (`Ready=False` reason `CalendarNotFound`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "string_list_schema")]
    pub calendars: Option<Vec<String>>,

    /// No slot before this instant runs (RFC 3339; a slot exactly at it runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Time>,

    /// No slot after this instant runs (RFC 3339; a slot exactly at it runs). Once no slot is
    /// left, the CronJob reports `Ready=False` reason `Finished`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Time>,
}

/// The workload a CronJob creates for each run, when it is not a batch/v1 Job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadTemplate {
    /// The workload's API version, e.g. `jobset.x-k8s.io/v1alpha2`.
    pub api_version: String,
    /// The workload's kind, e.g. `JobSet`.
    pub kind: String,
    /// Labels and annotations for each workload (kronjob adds its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<WorkloadMetadata>,
    /// The workload's spec, as its kind defines it (the API server judges it by a dry run of
    /// the kind when the CronJob is created or changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object_schema")]
    pub spec: Option<serde_json::Value>,
}

/// The labels and annotations of a workload template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadMetadata {
    /// Labels for each workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
    /// Annotations for each workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// When a run finished, and whether it succeeded: CEL expressions over `self`. `failed` is
/// asked first; neither true means still running; an expression reading a field the workload
/// does not have (yet) is not true.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompletionRule {
    /// True once the run succeeded, e.g. `self.status.phase == 'Done'`.
    pub succeeded: String,
    /// True once the run failed, e.g. `self.status.phase in ['Failed', 'Error']`.
    pub failed: String,
}

/// Any JSON object, kept whole (the API server prunes nothing inside).
fn free_object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// A set of days: single dates, inclusive ranges of dates, and dates that return every year.
/// The spec of a Calendar, and the form of a CronJob's `spec.exclusions`.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "batch.kronjob.dev",
    version = "v1",
    kind = "Calendar",
    plural = "calendars",
    singular = "calendar",
    shortname = "kcal",
    category = "kronjob",
    derive = "PartialEq",
    doc = "Calendar is a cluster-wide set of days (holidays, freezes) on which the CronJobs that name it in spec.calendars run no slot. A day is the slot's local date in the CronJob's timeZone."
)]
#[serde(rename_all = "camelCase")]
pub struct CalendarSpec {
    /// Single days, `YYYY-MM-DD` (e.g. `2026-12-24`), at most 366.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "date_list_schema")]
    pub dates: Vec<String>,
    /// Inclusive ranges of days (`from` and `to` both excluded too), at most 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<DateRange>,
    /// Days that return every year, `MM-DD` (e.g. `12-25`), at most 100. `02-29` matches in
    /// leap years only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "string_list_schema")]
    pub yearly: Vec<String>,
}

/// An inclusive range of days.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DateRange {
    /// The first day, `YYYY-MM-DD`.
    #[schemars(schema_with = "date_schema")]
    pub from: String,
    /// The last day, `YYYY-MM-DD`, not before `from`.
    #[schemars(schema_with = "date_schema")]
    pub to: String,
}

impl CalendarSpec {
    /// The days it names, parsed.
    pub fn days(&self) -> crate::schedule::exclusions::Days {
        crate::schedule::exclusions::Days::of(
            &self.dates,
            self.ranges.iter().map(|r| (r.from.as_str(), r.to.as_str())),
            &self.yearly,
        )
    }

    /// Whether it names no day at all.
    pub fn is_empty(&self) -> bool {
        self.dates.is_empty() && self.ranges.is_empty() && self.yearly.is_empty()
    }
}

/// Most `dates` of a Calendar or of `spec.exclusions`.
pub const MAX_CALENDAR_DATES: u64 = 366;
/// Most `ranges` of a Calendar or of `spec.exclusions`.
pub const MAX_CALENDAR_RANGES: u64 = 100;
/// Most `yearly` days of a Calendar or of `spec.exclusions`.
pub const MAX_CALENDAR_YEARLY: u64 = 100;
/// Most Calendars one CronJob names.
pub const MAX_CALENDAR_REFS: u64 = 16;

/// A calendar day (`YYYY-MM-DD`): the API server checks it is a real date.
fn date_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "format": "date"})
}

/// A list of calendar days (see [`date_schema`]).
fn date_list_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "string", "format": "date"}})
}

/// What the controller does when scheduled Jobs keep failing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// After this many scheduled Jobs in a row have failed (finished with condition
    /// `Failed`), the controller sets `spec.suspend` to true, with `Ready=False` reason
    /// `SuspendedAfterFailures`. A successful scheduled Job resets the count, and so does
    /// resuming the CronJob. Manual runs neither count nor reset it. At least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_after_consecutive_failures: Option<i32>,
}

/// The bound of the Enqueue policy's queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// How many slots may wait, 1 to 100. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queued: Option<i32>,
    /// Which slot is dropped when a slot falls due with the queue full: "DropOldest" (default:
    /// the newest slot is the most relevant) or "DropNewest" (the slot that fell due). A
    /// dropped slot gets a Warning Event `QueueFull` naming it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_full: Option<WhenFull>,
}

/// Default of `spec.queue.maxQueued`.
pub const DEFAULT_MAX_QUEUED: i32 = 10;
/// Largest `spec.queue.maxQueued`: a longer queue is a backlog, and the status stays small.
pub const MAX_QUEUED_LIMIT: i32 = 100;

/// Which slot is dropped when a slot falls due with the queue full: "DropOldest" (default: the
/// newest slot is the most relevant) drops the oldest queued slot and queues the new one;
/// "DropNewest" drops the slot that fell due. A dropped slot gets a Warning Event `QueueFull`
/// naming it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum WhenFull {
    /// Drop the oldest queued slot and queue the new one.
    #[default]
    DropOldest,
    /// Drop the slot that fell due.
    DropNewest,
}

impl WhenFull {
    /// The JSON spelling of the value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DropOldest => "DropOldest",
            Self::DropNewest => "DropNewest",
        }
    }
}

impl QueueSpec {
    /// `maxQueued` with its default, within 1 to [`MAX_QUEUED_LIMIT`].
    pub fn limit(&self) -> usize {
        let n = self
            .max_queued
            .unwrap_or(DEFAULT_MAX_QUEUED)
            .clamp(1, MAX_QUEUED_LIMIT);
        usize::try_from(n).unwrap_or(1)
    }

    /// `whenFull` with its default.
    pub fn when_full(&self) -> WhenFull {
        self.when_full.unwrap_or_default()
    }
}

/// ConcurrencyPolicy describes how the job will be handled.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Allows CronJobs to run concurrently.
    #[default]
    Allow,
    /// Forbids concurrent runs, skipping next run if previous hasn't finished yet.
    Forbid,
    /// Cancels currently running job and replaces it with a new one.
    Replace,
    /// Queues a slot that falls due while a Job runs; queued slots run one after another.
    Enqueue,
}

impl ConcurrencyPolicy {
    /// Every accepted value, in the order the API documents them.
    pub const ALL: [ConcurrencyPolicy; 4] =
        [Self::Allow, Self::Forbid, Self::Replace, Self::Enqueue];

    /// The JSON spelling of the value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "Allow",
            Self::Forbid => "Forbid",
            Self::Replace => "Replace",
            Self::Enqueue => "Enqueue",
        }
    }
}

/// Default of `spec.suspend`.
pub const DEFAULT_SUSPEND: bool = false;

/// A string that is absent rather than `null`: the API server prunes a `null` there, so CEL
/// and the webhook agree that the field is not set.
fn string_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string"})
}

/// A list of strings that is absent rather than `null` (see [`string_schema`]).
fn string_list_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "string"}})
}

fn default_suspend() -> Option<bool> {
    Some(DEFAULT_SUSPEND)
}
fn default_successful_jobs_history_limit() -> Option<i32> {
    Some(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT)
}
fn default_failed_jobs_history_limit() -> Option<i32> {
    Some(DEFAULT_FAILED_JOBS_HISTORY_LIMIT)
}

/// Why a spec names no usable set of schedule expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleFieldsError {
    /// Neither `schedule` nor `schedules`.
    #[error("one of spec.schedule and spec.schedules is required")]
    Neither,
    /// Both `schedule` and `schedules`.
    #[error("spec.schedule and spec.schedules may not both be set")]
    Both,
}

/// The schedule expressions of a spec with `schedule` and `schedules`: `schedule` as the only
/// one, or `schedules`.
pub fn schedule_exprs<'a>(
    schedule: Option<&'a String>,
    schedules: Option<&'a [String]>,
) -> Result<&'a [String], ScheduleFieldsError> {
    match (schedule, schedules) {
        (Some(one), None) => Ok(std::slice::from_ref(one)),
        (None, Some(list)) => Ok(list),
        (Some(_), Some(_)) => Err(ScheduleFieldsError::Both),
        (None, None) => Err(ScheduleFieldsError::Neither),
    }
}

impl CronJobSpec {
    /// `notBefore` and `notAfter`: the slots that may run at all.
    pub fn window(&self) -> crate::schedule::exclusions::Window {
        crate::schedule::exclusions::Window {
            not_before: self.not_before.as_ref().map(|t| t.0),
            not_after: self.not_after.as_ref().map(|t| t.0),
        }
    }

    /// The schedule expressions: `schedule` as the only one, or `schedules`.
    pub fn schedule_exprs(&self) -> Result<&[String], ScheduleFieldsError> {
        schedule_exprs(self.schedule.as_ref(), self.schedules.as_deref())
    }

    /// The schedule in one line, as `status.schedule` and the SCHEDULE columns show it: the
    /// expression, or the first of several and how many more (`*/2 * * * * (+1)`); empty
    /// when there is none.
    pub fn schedule_summary(&self) -> String {
        let exprs = match (&self.schedule, &self.schedules) {
            (Some(one), _) => return one.clone(),
            (None, Some(list)) => list.as_slice(),
            (None, None) => &[],
        };
        match exprs {
            [] => String::new(),
            [one] => one.clone(),
            [first, rest @ ..] => format!("{first} (+{})", rest.len()),
        }
    }

    /// `failurePolicy.suspendAfterConsecutiveFailures`, when set.
    pub fn suspend_after_failures(&self) -> Option<i32> {
        self.failure_policy
            .as_ref()
            .and_then(|p| p.suspend_after_consecutive_failures)
    }

    /// Whether creation of new Jobs is suspended.
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }

    /// `successfulJobsHistoryLimit` with its default applied.
    pub fn successful_history_limit(&self) -> i32 {
        self.successful_jobs_history_limit
            .unwrap_or(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT)
    }

    /// `failedJobsHistoryLimit` with its default applied.
    pub fn failed_history_limit(&self) -> i32 {
        self.failed_jobs_history_limit
            .unwrap_or(DEFAULT_FAILED_JOBS_HISTORY_LIMIT)
    }
}

/// CronJobStatus represents the current state of a cron job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// A list of pointers to currently running jobs. Absent when none runs, as upstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<ObjectReference>,

    /// The number of currently running jobs (the length of `active`), for printing.
    #[serde(default)]
    pub active_count: i32,

    /// Information when was the last time the job was successfully scheduled.
    #[serde(default)]
    pub last_schedule_time: Option<Time>,

    /// Information when was the last time the job successfully completed.
    #[serde(default)]
    pub last_successful_time: Option<Time>,

    /// Information when was the last time a job failed.
    #[serde(default)]
    pub last_failure_time: Option<Time>,

    /// The next time a job will be scheduled, if the schedule fires again and the CronJob is
    /// not suspended.
    #[serde(default)]
    pub next_schedule_time: Option<Time>,

    /// The generation of the spec this status was computed from.
    #[serde(default)]
    pub observed_generation: Option<i64>,

    /// The schedule as the SCHEDULE column shows it: `spec.schedule`, or the first of
    /// `spec.schedules` and how many more, e.g. `*/2 * * * * (+1)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,

    /// Scheduled Jobs that failed in a row: raised by each scheduled Job that finishes
    /// `Failed`, reset by one that completes and by resuming the CronJob; absent means 0.
    /// Manual runs do not count. `spec.failurePolicy` acts on it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive_failures: i32,

    /// Enqueue policy: the slots waiting to run, oldest first, each run as its own scheduled
    /// time once no Job runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<Time>,

    /// The number of queued slots (the length of `queued`), for printing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued_count: i32,

    /// The latest slot skipped because a calendar excludes its day (`spec.exclusions` or a
    /// Calendar): it ran no Job, and its Event `SlotSkipped` has been published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_skipped_time: Option<Time>,

    /// Slots known not to have run, as ranges: every slot strictly after `after` (from the
    /// beginning when absent) and strictly before `before`. The controller adds the slots it
    /// passed over (manager down, suspended, deadline, Forbid) when it runs the next one, and a
    /// backfill removes the slots it runs. At most 20 ranges: the oldest is forgotten (its
    /// slots then count as run). Absent: only the slots up to the CronJob's creation never ran
    /// (none for a CronJob migrated from batch/v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<Vec<MissedSlots>>,

    /// The backfill in progress (`kubectl kronjob backfill`), while its request is on the
    /// CronJob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<BackfillProgress>,

    /// Standard conditions. `Ready` tells whether the CronJob schedules Jobs, with reasons such
    /// as `Scheduled`, `Suspended`, `SuspendedAfterFailures`, `InvalidSchedule`,
    /// `UnknownTimeZone`, `InvalidJobTemplate`, `CalendarNotFound` and `Finished`.
    #[serde(default)]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

impl CronJobStatus {
    /// Set `active`, keeping `activeCount` equal to its length (the one place it is counted).
    pub fn set_active(&mut self, active: Vec<ObjectReference>) {
        self.active = active;
        self.active_count = i32::try_from(self.active.len()).unwrap_or(i32::MAX);
    }

    /// Set `queued`, keeping `queuedCount` equal to its length.
    pub fn set_queued(&mut self, queued: Vec<Time>) {
        self.queued = queued;
        self.queued_count = i32::try_from(self.queued.len()).unwrap_or(i32::MAX);
    }

    /// Add one Job to `active`, keeping `activeCount` equal to its length.
    pub fn push_active(&mut self, job: ObjectReference) {
        let mut active = std::mem::take(&mut self.active);
        active.push(job);
        self.set_active(active);
    }
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// A range of slots that did not run: strictly after `after` (from the beginning when absent)
/// and strictly before `before`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MissedSlots {
    /// The range starts after this time; absent: from the beginning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Time>,
    /// The range ends before this time.
    pub before: Time,
}

/// The progress of a backfill.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackfillProgress {
    /// The request (the value of the `batch.kronjob.dev/backfill` annotation).
    pub request: String,
    /// Jobs the backfill created so far.
    #[serde(default)]
    pub created: i32,
}
