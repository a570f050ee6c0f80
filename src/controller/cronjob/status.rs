//! Status helpers: the `Ready` condition with metav1 semantics, and the status patch body.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::api::CronJobStatus;

/// Condition type telling whether the CronJob schedules Jobs.
pub const CONDITION_READY: &str = "Ready";

/// Reasons of the `Ready` condition.
pub mod reason {
    /// The schedule is valid and Jobs are being created.
    pub const SCHEDULED: &str = "Scheduled";
    /// `spec.suspend` is true.
    pub const SUSPENDED: &str = "Suspended";
    /// `spec.suspend` is true and the failure policy's count of scheduled Jobs that failed in
    /// a row is reached (the controller suspended the CronJob, or it failed while suspended).
    pub const SUSPENDED_AFTER_FAILURES: &str = "SuspendedAfterFailures";
    /// `spec.schedule` (or one of `spec.schedules`) does not parse, or the schedule never
    /// fires.
    pub const INVALID_SCHEDULE: &str = "InvalidSchedule";
    /// `spec.timeZone` is not a known zone.
    pub const UNKNOWN_TIME_ZONE: &str = "UnknownTimeZone";
    /// Another spec field is unusable (e.g. a negative startingDeadlineSeconds).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The CronJob is being deleted.
    pub const TERMINATING: &str = "Terminating";
    /// The API server refuses the Job the template makes (422 Invalid); no Job is created until
    /// the spec changes.
    pub const INVALID_JOB_TEMPLATE: &str = "InvalidJobTemplate";
    /// A Calendar named in `spec.calendars` does not exist: no slot runs until it does.
    pub const CALENDAR_NOT_FOUND: &str = "CalendarNotFound";
    /// `spec.notAfter` has passed: no slot is left to run.
    pub const FINISHED: &str = "Finished";
    /// The workload kind is not installed (no CRD serves it): no slot runs until it is.
    pub const WORKLOAD_KIND_NOT_FOUND: &str = "WorkloadKindNotFound";
    /// The workload kind is not among the manager's `--workload-kinds`.
    pub const WORKLOAD_KIND_NOT_ALLOWED: &str = "WorkloadKindNotAllowed";
    /// RBAC does not let the manager create, read or delete the workload kind.
    pub const WORKLOAD_KIND_FORBIDDEN: &str = "WorkloadKindForbidden";
    /// The workload cannot be run as it is: a cluster-scoped kind, a kind without a rule and
    /// no `spec.completion`, or a completion rule that does not compile.
    pub const INVALID_WORKLOAD: &str = "InvalidWorkload";
}

/// Set condition `type_` with metav1 semantics: `lastTransitionTime` moves only when `status`
/// changes; reason, message and observedGeneration are always updated.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if status { "True" } else { "False" }.to_string();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Time(now);
                c.status = status;
            }
            c.reason = reason.to_string();
            c.message = message;
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message,
            observed_generation: generation,
            last_transition_time: Time(now),
        }),
    }
}

/// The current `Ready` condition's (status, reason), if any.
pub fn ready_of(status: &CronJobStatus) -> Option<(&str, &str)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_READY)
        .map(|c| (c.status.as_str(), c.reason.as_str()))
}

/// Every field of `status`, as the merge patch must name them: an absent field is `null`, which
/// removes it (an empty `active` list is removed, as upstream omits it).
pub const STATUS_FIELDS: [&str; 15] = [
    "active",
    "activeCount",
    "lastScheduleTime",
    "lastSuccessfulTime",
    "lastFailureTime",
    "nextScheduleTime",
    "observedGeneration",
    "schedule",
    "consecutiveFailures",
    "queued",
    "queuedCount",
    "conditions",
    "lastSkippedTime",
    "missed",
    "backfill",
];

/// Record that `status` describes `generation` of the spec: `observedGeneration` and the
/// `Ready` condition's (after the controller itself changed the spec, e.g. to suspend it).
pub fn observe_generation(status: &mut CronJobStatus, generation: Option<i64>) {
    status.observed_generation = generation;
    for c in &mut status.conditions {
        if c.type_ == CONDITION_READY {
            c.observed_generation = generation;
        }
    }
}

/// Body of the merge patch on the status subresource: the whole status, `null` for absent
/// fields, and `metadata.resourceVersion` (the precondition; `null` for none). Encoded
/// straight to text, field by field (a status write per CronJob at every slot).
#[derive(Debug, Serialize)]
pub struct StatusPatch<'a> {
    metadata: Precondition<'a>,
    status: Nulled<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Precondition<'a> {
    resource_version: Option<&'a str>,
}

/// Every field of [`STATUS_FIELDS`], `null` where the status has none.
#[derive(Debug)]
struct Nulled<'a>(&'a CronJobStatus);

impl<'a> StatusPatch<'a> {
    /// The patch writing `status` on top of `resource_version`.
    pub fn new(status: &'a CronJobStatus, resource_version: Option<&'a str>) -> Self {
        StatusPatch {
            metadata: Precondition { resource_version },
            status: Nulled(status),
        }
    }
}

impl Serialize for Nulled<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Destructured whole: a new status field does not compile until it is written here.
        let CronJobStatus {
            active,
            active_count,
            last_schedule_time,
            last_successful_time,
            last_failure_time,
            next_schedule_time,
            observed_generation,
            schedule,
            consecutive_failures,
            queued,
            queued_count,
            last_skipped_time,
            conditions,
            missed,
            backfill,
        } = self.0;
        let [
            f_active,
            f_active_count,
            f_last_schedule,
            f_last_successful,
            f_last_failure,
            f_next_schedule,
            f_observed,
            f_schedule,
            f_failures,
            f_queued,
            f_queued_count,
            f_conditions,
            f_last_skipped,
            f_missed,
            f_backfill,
        ] = STATUS_FIELDS;
        let mut map = s.serialize_map(Some(STATUS_FIELDS.len()))?;
        map.serialize_entry(f_active, &(!active.is_empty()).then_some(active))?;
        map.serialize_entry(f_active_count, active_count)?;
        map.serialize_entry(f_last_schedule, last_schedule_time)?;
        map.serialize_entry(f_last_successful, last_successful_time)?;
        map.serialize_entry(f_last_failure, last_failure_time)?;
        map.serialize_entry(f_next_schedule, next_schedule_time)?;
        map.serialize_entry(f_observed, observed_generation)?;
        map.serialize_entry(f_schedule, schedule)?;
        map.serialize_entry(
            f_failures,
            &(*consecutive_failures != 0).then_some(consecutive_failures),
        )?;
        map.serialize_entry(f_queued, &(!queued.is_empty()).then_some(queued))?;
        map.serialize_entry(
            f_queued_count,
            &(*queued_count != 0).then_some(queued_count),
        )?;
        map.serialize_entry(f_conditions, conditions)?;
        map.serialize_entry(f_last_skipped, last_skipped_time)?;
        map.serialize_entry(f_missed, missed)?;
        map.serialize_entry(f_backfill, backfill)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::fixtures::t;

    /// A status with every field set.
    fn full_status() -> CronJobStatus {
        CronJobStatus {
            active: vec![Default::default()],
            active_count: 1,
            last_schedule_time: Some(Time(t("2024-01-01T00:00:00Z"))),
            last_successful_time: Some(Time(t("2024-01-01T00:01:00Z"))),
            last_failure_time: Some(Time(t("2024-01-01T00:02:00Z"))),
            next_schedule_time: Some(Time(t("2024-01-01T00:03:00Z"))),
            observed_generation: Some(4),
            schedule: Some("0 * * * *".into()),
            consecutive_failures: 2,
            queued: vec![Time(t("2024-01-01T00:00:30Z"))],
            queued_count: 1,
            last_skipped_time: Some(Time(t("2024-01-01T00:02:30Z"))),
            conditions: vec![Condition {
                type_: CONDITION_READY.into(),
                status: "True".into(),
                reason: reason::SCHEDULED.into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(t("2024-01-01T00:00:00Z")),
            }],
            missed: Some(vec![crate::api::MissedSlots {
                after: None,
                before: Time(t("2024-01-01T00:00:00Z")),
            }]),
            backfill: Some(crate::api::BackfillProgress {
                request: "{}".into(),
                created: 1,
            }),
        }
    }

    /// The patch as its definition says: the status as it encodes, `null` for each field of
    /// [`STATUS_FIELDS`] it leaves out.
    fn by_definition(status: &CronJobStatus, rv: Option<&str>) -> serde_json::Value {
        let mut body = serde_json::to_value(status).expect("encodes");
        let fields = body.as_object_mut().expect("an object");
        for field in STATUS_FIELDS {
            fields.entry(field).or_insert(serde_json::Value::Null);
        }
        serde_json::json!({"metadata": {"resourceVersion": rv}, "status": body})
    }

    #[test]
    fn the_status_patch_writes_every_field_and_nulls_the_absent_ones() {
        let full = full_status();
        let mut with_condition = CronJobStatus::default();
        set_condition(
            &mut with_condition.conditions,
            "Ready",
            true,
            "Scheduled",
            "n".into(),
            Some(1),
            t("2024-01-01T00:00:00Z"),
        );
        for (status, rv) in [
            (CronJobStatus::default(), None),
            (full, Some("7")),
            (with_condition, Some("8")),
        ] {
            let text = serde_json::to_string(&StatusPatch::new(&status, rv)).expect("encodes");
            let patch: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            assert_eq!(patch, by_definition(&status, rv));
            assert_eq!(patch["status"].as_object().map(|m| m.len()), Some(15));
        }
    }

    #[test]
    fn transition_time_moves_only_on_status_flip() {
        let mut c = Vec::new();
        let t0 = t("2024-01-01T00:00:00Z");
        let t1 = t("2024-01-01T01:00:00Z");
        let t2 = t("2024-01-01T02:00:00Z");
        set_condition(&mut c, "Ready", true, "Scheduled", "a".into(), Some(1), t0);
        set_condition(&mut c, "Ready", true, "Scheduled", "b".into(), Some(2), t1);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].last_transition_time, Time(t0));
        assert_eq!(c[0].message, "b");
        assert_eq!(c[0].observed_generation, Some(2));
        set_condition(&mut c, "Ready", false, "Suspended", "c".into(), Some(3), t2);
        assert_eq!(c[0].last_transition_time, Time(t2));
        assert_eq!(c[0].status, "False");
        assert_eq!(c[0].reason, "Suspended");
    }

    #[test]
    fn patch_names_every_field_and_removes_absent_ones_and_empty_active() {
        let body = serde_json::to_value(StatusPatch::new(&CronJobStatus::default(), None))
            .expect("encodes");
        let fields = body["status"].as_object().expect("object");
        for field in STATUS_FIELDS {
            assert!(fields.contains_key(field), "{field}");
        }
        assert!(body["status"]["lastScheduleTime"].is_null());
        assert!(
            body["status"]["active"].is_null(),
            "an empty list is removed, not []"
        );
        // The list is the struct's: a fully set status names exactly these fields.
        let full = full_status();
        let serialized = serde_json::to_value(&full).expect("json");
        let mut keys: Vec<&str> = serialized
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        let mut want = STATUS_FIELDS.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want);
        // And upstream's shape: no `active` key when nothing runs.
        let idle = serde_json::to_value(CronJobStatus::default()).expect("json");
        assert!(idle.get("active").is_none(), "{idle}");
    }
}
