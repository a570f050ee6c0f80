//! Pure TTL-after-finished decisions (KEP-592): is an object a candidate, when did it finish,
//! and how long until it may be deleted. No API calls; the current time is passed in. A Job's
//! finish (upstream: the `lastTransitionTime` of its `Complete` or `Failed` condition) is
//! [`crate::workload::finish`], the definition the CronJob reconciler uses too.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use crate::api::ANNOTATION_TTL;
use crate::workload::{self as jobs, Workload};

/// What the TTL controller should do with one object, as of a given instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtlState {
    /// Not ours to delete: no TTL, not finished, or already being deleted.
    NotCandidate,
    /// Finished with a TTL that has not expired yet; look again after this long (always > 0).
    Wait(SignedDuration),
    /// The TTL expired at `expired_at` (finish time + TTL), which is not after `now`.
    Expired {
        /// Finish time plus TTL.
        expired_at: Timestamp,
    },
    /// A candidate that cannot be decided.
    Error(DecisionError),
}

/// Why a finished object with a TTL cannot be decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    /// The object finished, but no finish time is recorded (yet).
    #[error("unable to find the time when the object finished")]
    MissingFinishTime,
    /// The Pod's TTL annotation is not a non-negative integer number of seconds.
    #[error("annotation {ANNOTATION_TTL} must be a non-negative integer, got {value:?}")]
    BadAnnotation {
        /// The annotation's value as found.
        value: String,
    },
}

/// The TTL state of a Job at `now`.
pub fn job_ttl_state(job: &Job, now: Timestamp) -> TtlState {
    if job.metadata.deletion_timestamp.is_some() {
        return TtlState::NotCandidate;
    }
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
        return TtlState::NotCandidate;
    };
    match jobs::job_finish(job) {
        None => TtlState::NotCandidate,
        Some(jobs::Finish { at: None, .. }) => TtlState::Error(DecisionError::MissingFinishTime),
        Some(jobs::Finish {
            at: Some(finished), ..
        }) => expiry(finished, i64::from(ttl), now),
    }
}

/// The TTL state of a workload of any kind at `now`: its TTL (its kind's own field, else the
/// annotation kronjob writes) from its finish as its kind's rule dates it.
pub fn workload_ttl_state(workload: &Workload, now: Timestamp) -> TtlState {
    if workload.metadata.deletion_timestamp.is_some() {
        return TtlState::NotCandidate;
    }
    let Some(ttl) = workload.ttl else {
        return TtlState::NotCandidate;
    };
    match workload.finish {
        None => TtlState::NotCandidate,
        Some(jobs::Finish { at: None, .. }) => TtlState::Error(DecisionError::MissingFinishTime),
        Some(jobs::Finish {
            at: Some(finished), ..
        }) => expiry(finished, i64::from(ttl), now),
    }
}

/// Whether a Pod's phase is terminal (`Succeeded` or `Failed`).
fn pod_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The time a finished Pod finished: the latest `state.terminated.finishedAt` of its (init)
/// containers, falling back to the `Ready` condition's `lastTransitionTime`.
pub fn pod_finish_time(pod: &Pod) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    let latest = status
        .container_statuses
        .iter()
        .chain(status.init_container_statuses.iter())
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max();
    latest.or_else(|| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0)
    })
}

/// The Pod's TTL from its annotation: `None` if absent, an error if not a non-negative integer.
pub fn pod_ttl(pod: &Pod) -> Option<Result<i64, DecisionError>> {
    let value = pod.metadata.annotations.as_ref()?.get(ANNOTATION_TTL)?;
    // Only plain ASCII digits: no sign, no whitespace, no empty string.
    let parsed = if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only, so the only possible failure is overflow: saturate ("practically never").
        Ok(value.parse::<i64>().unwrap_or(i64::MAX))
    } else {
        Err(DecisionError::BadAnnotation {
            value: value.clone(),
        })
    };
    Some(parsed)
}

/// The TTL state of a Pod at `now` (annotation [`ANNOTATION_TTL`]).
///
/// A bad annotation is reported only once the Pod is finished: until then it does not matter.
pub fn pod_ttl_state(pod: &Pod, now: Timestamp) -> TtlState {
    if pod.metadata.deletion_timestamp.is_some() {
        return TtlState::NotCandidate;
    }
    let Some(ttl) = pod_ttl(pod) else {
        return TtlState::NotCandidate;
    };
    if !pod_finished(pod) {
        return TtlState::NotCandidate;
    }
    let ttl = match ttl {
        Ok(ttl) => ttl,
        Err(e) => return TtlState::Error(e),
    };
    match pod_finish_time(pod) {
        None => TtlState::Error(DecisionError::MissingFinishTime),
        Some(finished) => expiry(finished, ttl, now),
    }
}

/// `finished + ttl` against `now`: expired when the remaining time is zero or less (a TTL of 0
/// expires as soon as the object finishes). Saturates instead of overflowing.
fn expiry(finished: Timestamp, ttl_seconds: i64, now: Timestamp) -> TtlState {
    let expired_at = finished
        .saturating_add(SignedDuration::from_secs(ttl_seconds))
        .unwrap_or(Timestamp::MAX);
    let remaining = now.duration_until(expired_at);
    if remaining.is_positive() {
        TtlState::Wait(remaining)
    } else {
        TtlState::Expired { expired_at }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, FixedClock};
    use serde_json::json;

    const NOW: &str = "2024-03-10T12:00:00Z";

    use crate::testing::fixtures::t as ts;

    fn secs(n: i64) -> SignedDuration {
        SignedDuration::from_secs(n)
    }

    /// A Job from JSON pieces: TTL, conditions and whether it is being deleted.
    fn job(ttl: Option<i32>, conditions: serde_json::Value, deleting: bool) -> Job {
        let mut metadata = json!({"name": "j", "namespace": "ns", "uid": "u1"});
        if deleting {
            metadata["deletionTimestamp"] = json!("2024-03-10T11:59:00Z");
        }
        let mut spec = json!({"template": {}});
        if let Some(ttl) = ttl {
            spec["ttlSecondsAfterFinished"] = json!(ttl);
        }
        serde_json::from_value(json!({
            "metadata": metadata,
            "spec": spec,
            // completionTime deliberately differs from every lastTransitionTime below.
            "status": {"conditions": conditions, "completionTime": "2024-03-10T00:00:00Z"},
        }))
        .expect("job JSON")
    }

    fn cond(type_: &str, status: &str, at: Option<&str>) -> serde_json::Value {
        let mut c = json!({"type": type_, "status": status});
        if let Some(at) = at {
            c["lastTransitionTime"] = json!(at);
        }
        c
    }

    #[test]
    fn job_table() {
        let clock = FixedClock::new(ts(NOW));
        let ten_ago = Some("2024-03-10T11:59:50Z");
        let cases: Vec<(&str, Job, TtlState)> = vec![
            (
                "no TTL",
                job(None, json!([cond("Complete", "True", ten_ago)]), false),
                TtlState::NotCandidate,
            ),
            (
                "being deleted",
                job(Some(0), json!([cond("Complete", "True", ten_ago)]), true),
                TtlState::NotCandidate,
            ),
            (
                "not finished: no conditions",
                job(Some(0), json!([]), false),
                TtlState::NotCandidate,
            ),
            (
                "not finished: Complete=False",
                job(Some(0), json!([cond("Complete", "False", ten_ago)]), false),
                TtlState::NotCandidate,
            ),
            (
                "not finished: other condition types",
                job(
                    Some(0),
                    json!([
                        cond("Suspended", "True", ten_ago),
                        cond("FailureTarget", "True", ten_ago)
                    ]),
                    false,
                ),
                TtlState::NotCandidate,
            ),
            (
                "Complete, 90 s to go",
                job(Some(100), json!([cond("Complete", "True", ten_ago)]), false),
                TtlState::Wait(secs(90)),
            ),
            (
                "Failed, 90 s to go",
                job(Some(100), json!([cond("Failed", "True", ten_ago)]), false),
                TtlState::Wait(secs(90)),
            ),
            (
                "finish time is the condition's, after an unrelated False condition",
                job(
                    Some(100),
                    json!([
                        cond("Complete", "False", Some("2024-03-10T11:00:00Z")),
                        cond("Failed", "True", ten_ago)
                    ]),
                    false,
                ),
                TtlState::Wait(secs(90)),
            ),
            (
                "expired exactly now",
                job(Some(10), json!([cond("Complete", "True", ten_ago)]), false),
                TtlState::Expired {
                    expired_at: ts(NOW),
                },
            ),
            (
                "expired 5 s ago",
                job(Some(5), json!([cond("Failed", "True", ten_ago)]), false),
                TtlState::Expired {
                    expired_at: ts("2024-03-10T11:59:55Z"),
                },
            ),
            (
                "zero TTL expires at the finish time",
                job(Some(0), json!([cond("Complete", "True", ten_ago)]), false),
                TtlState::Expired {
                    expired_at: ts("2024-03-10T11:59:50Z"),
                },
            ),
            (
                "finished in the future (skew): wait TTL plus skew",
                job(
                    Some(0),
                    json!([cond("Complete", "True", Some("2024-03-10T12:00:30Z"))]),
                    false,
                ),
                TtlState::Wait(secs(30)),
            ),
            (
                "complete without lastTransitionTime: completionTime",
                job(Some(0), json!([cond("Complete", "True", None)]), false),
                TtlState::Expired {
                    expired_at: ts("2024-03-10T00:00:00Z"),
                },
            ),
            (
                "failed without lastTransitionTime: unknown",
                job(Some(0), json!([cond("Failed", "True", None)]), false),
                TtlState::Error(DecisionError::MissingFinishTime),
            ),
            (
                "largest TTL does not overflow",
                job(
                    Some(i32::MAX),
                    json!([cond("Complete", "True", Some(NOW))]),
                    false,
                ),
                TtlState::Wait(secs(i64::from(i32::MAX))),
            ),
        ];
        for (name, job, want) in cases {
            assert_eq!(job_ttl_state(&job, clock.now()), want, "{name}");
        }
    }

    #[test]
    fn raised_ttl_on_the_fresh_copy_means_wait_again() {
        let now = ts(NOW);
        let conditions = json!([cond("Complete", "True", Some("2024-03-10T11:00:00Z"))]);
        let cached = job(Some(60), conditions.clone(), false);
        let fresh = job(Some(7200), conditions, false);
        assert!(matches!(
            job_ttl_state(&cached, now),
            TtlState::Expired { .. }
        ));
        assert_eq!(job_ttl_state(&fresh, now), TtlState::Wait(secs(3600)));
    }

    #[test]
    fn clock_moves_a_waiting_job_to_expired() {
        let clock = FixedClock::new(ts(NOW));
        let j = job(
            Some(30),
            json!([cond("Complete", "True", Some(NOW))]),
            false,
        );
        assert_eq!(job_ttl_state(&j, clock.now()), TtlState::Wait(secs(30)));
        clock.advance(secs(29));
        assert_eq!(job_ttl_state(&j, clock.now()), TtlState::Wait(secs(1)));
        clock.advance(secs(1));
        assert_eq!(
            job_ttl_state(&j, clock.now()),
            TtlState::Expired {
                expired_at: ts("2024-03-10T12:00:30Z")
            }
        );
    }

    /// A Pod from JSON pieces.
    fn pod(annotation: Option<&str>, phase: Option<&str>, status: serde_json::Value) -> Pod {
        let mut metadata = json!({"name": "p", "namespace": "ns", "uid": "u1"});
        if let Some(a) = annotation {
            metadata["annotations"] = json!({ ANNOTATION_TTL: a });
        }
        let mut status = status;
        if let Some(phase) = phase {
            status["phase"] = json!(phase);
        }
        serde_json::from_value(json!({"metadata": metadata, "status": status})).expect("pod JSON")
    }

    fn terminated(at: &str) -> serde_json::Value {
        json!({"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"terminated": {"exitCode": 0, "finishedAt": at}}})
    }

    #[test]
    fn pod_table() {
        let now = ts(NOW);
        let two_containers = json!({
            "containerStatuses": [terminated("2024-03-10T11:59:00Z"), terminated("2024-03-10T11:59:40Z")],
            "initContainerStatuses": [terminated("2024-03-10T11:50:00Z")],
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2024-03-10T11:00:00Z"}],
        });
        let ready_only = json!({
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false,
                                   "restartCount": 0, "state": {"waiting": {}}}],
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2024-03-10T11:59:30Z"}],
        });
        let cases: Vec<(&str, Pod, TtlState)> = vec![
            (
                "no annotation",
                pod(None, Some("Succeeded"), two_containers.clone()),
                TtlState::NotCandidate,
            ),
            (
                "Pending",
                pod(Some("0"), Some("Pending"), two_containers.clone()),
                TtlState::NotCandidate,
            ),
            (
                "Running",
                pod(Some("0"), Some("Running"), two_containers.clone()),
                TtlState::NotCandidate,
            ),
            (
                "Unknown",
                pod(Some("0"), Some("Unknown"), two_containers.clone()),
                TtlState::NotCandidate,
            ),
            (
                "no phase",
                pod(Some("0"), None, two_containers.clone()),
                TtlState::NotCandidate,
            ),
            (
                "Succeeded: latest finishedAt of all containers",
                pod(Some("30"), Some("Succeeded"), two_containers.clone()),
                TtlState::Wait(secs(10)),
            ),
            (
                "Failed: latest finishedAt of all containers",
                pod(Some("30"), Some("Failed"), two_containers.clone()),
                TtlState::Wait(secs(10)),
            ),
            (
                "zero TTL",
                pod(Some("0"), Some("Succeeded"), two_containers.clone()),
                TtlState::Expired {
                    expired_at: ts("2024-03-10T11:59:40Z"),
                },
            ),
            (
                "Ready condition fallback",
                pod(Some("60"), Some("Failed"), ready_only),
                TtlState::Wait(secs(30)),
            ),
            (
                "no finish time at all",
                pod(Some("60"), Some("Failed"), json!({})),
                TtlState::Error(DecisionError::MissingFinishTime),
            ),
            (
                "huge TTL saturates",
                pod(
                    Some("99999999999999999999999"),
                    Some("Succeeded"),
                    two_containers.clone(),
                ),
                TtlState::Wait(now.duration_until(Timestamp::MAX)),
            ),
            (
                "bad annotation on a running Pod does not matter yet",
                pod(Some("abc"), Some("Running"), two_containers.clone()),
                TtlState::NotCandidate,
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(pod_ttl_state(&pod, now), want, "{name}");
        }
        let mut deleting = pod(Some("0"), Some("Succeeded"), two_containers);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        assert_eq!(pod_ttl_state(&deleting, now), TtlState::NotCandidate);
    }

    #[test]
    fn bad_pod_annotations_are_errors() {
        let now = ts(NOW);
        let status = json!({"containerStatuses": [terminated("2024-03-10T11:59:40Z")]});
        for bad in ["abc", "-1", "", " 5", "+5", "1.5", "5s", "٣"] {
            assert_eq!(
                pod_ttl_state(&pod(Some(bad), Some("Succeeded"), status.clone()), now),
                TtlState::Error(DecisionError::BadAnnotation {
                    value: bad.to_owned()
                }),
                "{bad:?}"
            );
        }
    }

    /// A workload of another kind, read through its kind's row, from JSON pieces.
    fn workload(
        kind: (&str, &str),
        spec: serde_json::Value,
        status: serde_json::Value,
        annotations: serde_json::Value,
    ) -> Workload {
        let object: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": kind.0,
            "kind": kind.1,
            "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "annotations": annotations},
            "spec": spec,
            "status": status,
        }))
        .expect("an object");
        let group = kind.0.split_once('/').map_or("", |(g, _)| g);
        Workload::of_object(&object, crate::workload::kinds::known(group, kind.1))
    }

    #[test]
    fn a_workload_expires_by_its_kinds_ttl_field_or_the_annotation() {
        let now = ts(NOW);
        let done = |at: &str| json!({"conditions": [{"type": "Completed", "status": "True", "lastTransitionTime": at}]});
        let jobset = ("jobset.x-k8s.io/v1alpha2", "JobSet");
        let cases: Vec<(&str, Workload, TtlState)> = vec![
            (
                "the kind's own field",
                workload(
                    jobset,
                    json!({"ttlSecondsAfterFinished": 60}),
                    done("2024-03-10T11:58:00Z"),
                    json!({}),
                ),
                TtlState::Expired {
                    expired_at: ts("2024-03-10T11:59:00Z"),
                },
            ),
            (
                "not yet",
                workload(
                    jobset,
                    json!({"ttlSecondsAfterFinished": 60}),
                    done("2024-03-10T11:59:30Z"),
                    json!({}),
                ),
                TtlState::Wait(secs(30)),
            ),
            (
                "running",
                workload(
                    jobset,
                    json!({"ttlSecondsAfterFinished": 60}),
                    json!({}),
                    json!({}),
                ),
                TtlState::NotCandidate,
            ),
            (
                "no TTL",
                workload(jobset, json!({}), done("2024-03-10T11:58:00Z"), json!({})),
                TtlState::NotCandidate,
            ),
            (
                "a kind without a field: the annotation",
                workload(
                    ("tekton.dev/v1", "PipelineRun"),
                    json!({}),
                    json!({"conditions": [{"type": "Succeeded", "status": "False", "lastTransitionTime": "2024-03-10T11:00:00Z"}]}),
                    json!({ANNOTATION_TTL: "600"}),
                ),
                TtlState::Expired {
                    expired_at: ts("2024-03-10T11:10:00Z"),
                },
            ),
            (
                "finished without a time",
                workload(
                    ("ray.io/v1", "RayJob"),
                    json!({}),
                    json!({"jobDeploymentStatus": "Failed"}),
                    json!({ANNOTATION_TTL: "0"}),
                ),
                TtlState::Error(DecisionError::MissingFinishTime),
            ),
        ];
        for (name, w, want) in cases {
            assert_eq!(workload_ttl_state(&w, now), want, "{name}");
        }
    }
}
