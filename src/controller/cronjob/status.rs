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
    /// `spec.schedule` does not parse or never fires.
    pub const INVALID_SCHEDULE: &str = "InvalidSchedule";
    /// `spec.timeZone` is not a known zone.
    pub const UNKNOWN_TIME_ZONE: &str = "UnknownTimeZone";
    /// Another spec field is unusable (e.g. a negative startingDeadlineSeconds).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The CronJob is being deleted.
    pub const TERMINATING: &str = "Terminating";
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

/// Body of the merge patch on the status subresource: the whole status, `null` for absent
/// fields (which removes them).
pub fn status_patch(status: &CronJobStatus) -> serde_json::Value {
    serde_json::json!({ "status": status })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
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
    fn patch_carries_nulls_for_absent_fields() {
        let body = status_patch(&CronJobStatus::default());
        assert!(body["status"]["lastScheduleTime"].is_null());
        assert!(
            body["status"]
                .as_object()
                .expect("object")
                .contains_key("lastScheduleTime")
        );
    }
}
