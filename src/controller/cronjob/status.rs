//! Status helpers: the `Ready` condition with metav1 semantics, and the status patch body.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

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
pub const STATUS_FIELDS: [&str; 10] = [
    "active",
    "activeCount",
    "lastScheduleTime",
    "lastSuccessfulTime",
    "lastFailureTime",
    "nextScheduleTime",
    "observedGeneration",
    "schedule",
    "consecutiveFailures",
    "conditions",
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
/// fields.
pub fn status_patch(status: &CronJobStatus) -> serde_json::Value {
    let mut body = serde_json::to_value(status).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(fields) = body.as_object_mut() {
        for field in STATUS_FIELDS {
            fields.entry(field).or_insert(serde_json::Value::Null);
        }
    }
    serde_json::json!({ "status": body })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::fixtures::t;

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
        let body = status_patch(&CronJobStatus::default());
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
        let full = CronJobStatus {
            active: vec![Default::default()],
            active_count: 1,
            last_schedule_time: Some(Time(t("2024-01-01T00:00:00Z"))),
            last_successful_time: Some(Time(t("2024-01-01T00:00:00Z"))),
            last_failure_time: Some(Time(t("2024-01-01T00:00:00Z"))),
            next_schedule_time: Some(Time(t("2024-01-01T00:00:00Z"))),
            observed_generation: Some(1),
            schedule: Some("0 * * * *".into()),
            consecutive_failures: 2,
            conditions: vec![Condition {
                type_: CONDITION_READY.into(),
                status: "True".into(),
                reason: reason::SCHEDULED.into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time(t("2024-01-01T00:00:00Z")),
            }],
        };
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
