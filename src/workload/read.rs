//! Reading a workload, defined once for the controllers and the commands: which CronJob
//! controls it, which run it was for (all from its metadata, whatever its kind), and how a
//! batch/v1 Job finished. Pure: no API calls, no clock.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use crate::api::{ANNOTATION_BACKFILLED, ANNOTATION_INSTANTIATE, ANNOTATION_SCHEDULED_AT, CronJob};

/// UID of the kronjob CronJob controlling the object of `meta`: its controller owner reference
/// of kind `CronJob` in our group and version, if any.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    let api_version = <CronJob as Resource>::api_version(&());
    let kind = <CronJob as Resource>::kind(&());
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == kind && r.api_version == api_version)
        .map(|r| r.uid.as_str())
}

/// Whether a kronjob CronJob controls the object of `meta`.
pub fn is_controlled_by_kronjob(meta: &ObjectMeta) -> bool {
    controller_uid(meta).is_some()
}

/// Whether the kronjob CronJob of UID `uid` controls the object of `meta` (a label alone can
/// be copied; an empty UID controls nothing).
pub fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    !uid.is_empty() && controller_uid(meta) == Some(uid)
}

/// Which run a workload was created for, as its annotations say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran<'a> {
    /// A slot: the scheduled time, RFC 3339 in the CronJob's zone.
    Scheduled(&'a str),
    /// A manual run (`kubectl kronjob trigger`, or `kubectl create job --from`).
    Manual,
    /// Neither mark: not created by kronjob.
    Unknown,
}

/// The run the object of `meta` was for.
pub fn ran_for(meta: &ObjectMeta) -> Ran<'_> {
    let annotations = meta.annotations.as_ref();
    if let Some(at) = annotations.and_then(|a| a.get(ANNOTATION_SCHEDULED_AT)) {
        return Ran::Scheduled(at);
    }
    match annotations.and_then(|a| a.get(ANNOTATION_INSTANTIATE)) {
        Some(value) if value == "manual" => Ran::Manual,
        _ => Ran::Unknown,
    }
}

/// The slot the object of `meta` was created for: its scheduled-time annotation read as an
/// instant; `None` for a manual run, a stranger, or an annotation that is not RFC 3339.
pub fn slot_of(meta: &ObjectMeta) -> Option<Timestamp> {
    match ran_for(meta) {
        Ran::Scheduled(at) => at.parse().ok(),
        Ran::Manual | Ran::Unknown => None,
    }
}

/// Whether the run the object of `meta` was for is recorded by a `status.lastScheduleTime` of
/// `stored`: a manual run or a stranger always is (no slot hangs on it); a scheduled workload
/// whose slot is later than `stored` is the only record that its slot ran.
pub fn slot_recorded(meta: &ObjectMeta, stored: Option<Timestamp>) -> bool {
    match slot_of(meta) {
        Some(slot) => stored.is_some_and(|stored| slot <= stored),
        None => true,
    }
}

/// Whether a backfill created the object of `meta` ([`ANNOTATION_BACKFILLED`]).
pub fn backfilled(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_BACKFILLED))
}

/// Whether the object of `meta` carries the marks of kronjob: the scheduled-time annotation of
/// a scheduled run, or the `instantiate: manual` annotation of a manual run.
pub fn created_by_kronjob(meta: &ObjectMeta) -> bool {
    ran_for(meta) != Ran::Unknown
}

/// How a workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It succeeded (a Job's condition `Complete=True`).
    Complete,
    /// It failed (a Job's condition `Failed=True`).
    Failed,
}

/// A finished workload: how it ended and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finish {
    /// Complete or Failed.
    pub outcome: Outcome,
    /// When, if recorded (for a Job: the finishing condition's `lastTransitionTime`, else,
    /// Complete only, `status.completionTime`).
    pub at: Option<Timestamp>,
}

/// Whether `job` finished, how and when (upstream `IsJobFinished`: the first `Complete` or
/// `Failed` condition with status `True`; the interim `SuccessCriteriaMet` and `FailureTarget`
/// conditions do not finish a Job). One definition for history, `lastSuccessfulTime`,
/// `lastFailureTime` and the TTL controller.
pub fn job_finish(job: &Job) -> Option<Finish> {
    let status = job.status.as_ref()?;
    let condition = status
        .conditions
        .as_deref()?
        .iter()
        .find(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"))?;
    let outcome = if condition.type_ == "Complete" {
        Outcome::Complete
    } else {
        Outcome::Failed
    };
    let at = condition
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| match outcome {
            Outcome::Complete => status.completion_time.as_ref().map(|t| t.0),
            Outcome::Failed => None,
        });
    Some(Finish { outcome, at })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

    use crate::testing::fixtures::t;

    fn owned_by(api_version: &str, kind: &str, controller: Option<bool>) -> Job {
        Job {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    name: "cj".into(),
                    uid: "u1".into(),
                    controller,
                    block_owner_deletion: None,
                }]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn only_a_controller_reference_to_our_cronjob_counts() {
        let cases = [
            ("batch.kronjob.dev/v1", "CronJob", Some(true), Some("u1")),
            ("batch.kronjob.dev/v1", "CronJob", Some(false), None),
            ("batch.kronjob.dev/v1", "CronJob", None, None),
            ("batch/v1", "CronJob", Some(true), None),
            ("batch.kronjob.dev/v1", "Job", Some(true), None),
        ];
        for (api_version, kind, controller, want) in cases {
            let job = owned_by(api_version, kind, controller);
            assert_eq!(
                controller_uid(&job.metadata),
                want,
                "{api_version} {kind} {controller:?}"
            );
            assert_eq!(is_controlled_by_kronjob(&job.metadata), want.is_some());
        }
        assert_eq!(controller_uid(&ObjectMeta::default()), None);
        let ours = owned_by("batch.kronjob.dev/v1", "CronJob", Some(true));
        assert!(controlled_by(&ours.metadata, "u1"));
        assert!(!controlled_by(&ours.metadata, "u2"));
        assert!(!controlled_by(&ObjectMeta::default(), ""));
    }

    #[test]
    fn the_run_a_job_was_for_comes_from_its_annotations() {
        let annotated = |pairs: &[(&str, &str)]| Job {
            metadata: ObjectMeta {
                annotations: Some(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        let at = "2016-05-19T10:00:00Z";
        let cases = [
            (
                annotated(&[(ANNOTATION_SCHEDULED_AT, at)]),
                Ran::Scheduled(at),
            ),
            (
                annotated(&[(ANNOTATION_INSTANTIATE, "manual")]),
                Ran::Manual,
            ),
            (
                annotated(&[(ANNOTATION_INSTANTIATE, "other")]),
                Ran::Unknown,
            ),
            (Job::default(), Ran::Unknown),
        ];
        for (job, want) in &cases {
            assert_eq!(ran_for(&job.metadata), *want);
            assert_eq!(created_by_kronjob(&job.metadata), *want != Ran::Unknown);
        }
    }

    #[test]
    fn the_slot_of_a_job_is_its_annotation_read_as_an_instant() {
        let annotated = |key: &str, value: &str| Job {
            metadata: ObjectMeta {
                annotations: Some([(key.to_string(), value.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let cases = [
            (
                ANNOTATION_SCHEDULED_AT,
                "2016-05-19T10:00:00Z",
                Some("2016-05-19T10:00:00Z"),
            ),
            // The CronJob's zone: the same instant.
            (
                ANNOTATION_SCHEDULED_AT,
                "2016-05-19T12:00:00+02:00",
                Some("2016-05-19T10:00:00Z"),
            ),
            (ANNOTATION_SCHEDULED_AT, "yesterday", None),
            (ANNOTATION_INSTANTIATE, "manual", None),
        ];
        for (key, value, want) in cases {
            let want = want.map(|w| w.parse::<Timestamp>().expect("instant"));
            assert_eq!(
                slot_of(&annotated(key, value).metadata),
                want,
                "{key}={value}"
            );
        }
        assert_eq!(slot_of(&ObjectMeta::default()), None);
    }

    #[test]
    fn a_scheduled_job_is_recorded_once_the_stored_last_schedule_reaches_its_slot() {
        let slot = |at: &str| Job {
            metadata: ObjectMeta {
                annotations: Some([(ANNOTATION_SCHEDULED_AT.to_string(), at.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let ten = slot("2016-05-19T10:00:00Z");
        let at = |s: &str| Some(s.parse::<Timestamp>().expect("instant"));
        assert!(!slot_recorded(&ten.metadata, None));
        assert!(!slot_recorded(&ten.metadata, at("2016-05-19T09:59:00Z")));
        assert!(slot_recorded(&ten.metadata, at("2016-05-19T10:00:00Z")));
        assert!(slot_recorded(&ten.metadata, at("2016-05-19T11:00:00Z")));
        // No slot hangs on a manual run or a Job kronjob did not make.
        assert!(slot_recorded(&ObjectMeta::default(), None));
    }

    fn with_conditions(conditions: &[(&str, &str, Option<&str>)], completion: Option<&str>) -> Job {
        Job {
            status: Some(JobStatus {
                completion_time: completion.map(|c| Time(t(c))),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(type_, status, at)| JobCondition {
                            type_: (*type_).into(),
                            status: (*status).into(),
                            last_transition_time: at.map(|a| Time(t(a))),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn finish_table() {
        let a = "2024-01-01T00:00:05Z";
        let b = "2024-01-01T00:00:09Z";
        let cases: Vec<(&str, Job, Option<Finish>)> = vec![
            ("no status", Job::default(), None),
            ("running", with_conditions(&[], None), None),
            (
                "interim conditions do not finish",
                with_conditions(
                    &[
                        ("SuccessCriteriaMet", "True", Some(a)),
                        ("FailureTarget", "True", Some(a)),
                    ],
                    None,
                ),
                None,
            ),
            (
                "Complete=False",
                with_conditions(&[("Complete", "False", Some(a))], None),
                None,
            ),
            (
                "complete: the condition's time, not completionTime",
                with_conditions(
                    &[
                        ("SuccessCriteriaMet", "True", Some(a)),
                        ("Complete", "True", Some(b)),
                    ],
                    Some(a),
                ),
                Some(Finish {
                    outcome: Outcome::Complete,
                    at: Some(t(b)),
                }),
            ),
            (
                "complete without a condition time: completionTime",
                with_conditions(&[("Complete", "True", None)], Some(a)),
                Some(Finish {
                    outcome: Outcome::Complete,
                    at: Some(t(a)),
                }),
            ),
            (
                "failed",
                with_conditions(&[("Failed", "True", Some(b))], None),
                Some(Finish {
                    outcome: Outcome::Failed,
                    at: Some(t(b)),
                }),
            ),
            (
                "failed without a time: unknown",
                with_conditions(&[("Failed", "True", None)], Some(a)),
                Some(Finish {
                    outcome: Outcome::Failed,
                    at: None,
                }),
            ),
        ];
        for (name, job, want) in cases {
            assert_eq!(job_finish(&job), want, "{name}");
        }
    }
}
