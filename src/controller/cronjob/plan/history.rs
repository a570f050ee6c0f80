//! Step 2: history. The last success and failure over every owned Job, manual runs included,
//! never lowered (upstream A4, PR #122025); and the oldest finished Jobs beyond the history
//! limits, to delete (upstream H1-H3: by `status.startTime`, Jobs without one count as newest,
//! ties by name).

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Action, DeleteReason};
use crate::api::CronJobStatus;
use crate::job::{self as jobs, Outcome};

/// Raise `lastSuccessfulTime` and `lastFailureTime` to the latest finish among `owned`. A
/// success is dated by the Job's `completionTime`, as upstream does (the Job controller may add
/// the `Complete` condition a moment after it); a failure by its `Failed` condition.
pub fn record_last_finished(owned: &[&Job], status: &mut CronJobStatus) {
    for job in owned {
        let Some(jobs::Finish {
            outcome,
            at: Some(at),
        }) = jobs::finish(job)
        else {
            continue;
        };
        let (slot, at) = match outcome {
            Outcome::Complete => {
                let completed = job.status.as_ref().and_then(|s| s.completion_time.as_ref());
                (
                    &mut status.last_successful_time,
                    completed.map_or(at, |t| t.0),
                )
            }
            Outcome::Failed => (&mut status.last_failure_time, at),
        };
        if slot.as_ref().is_none_or(|t| t.0 < at) {
            *slot = Some(Time(at));
        }
    }
}

/// Order for trimming: oldest first by `status.startTime`, Jobs without one last, ties by name.
fn age_key(job: &Job) -> (bool, Option<Timestamp>, String) {
    let start = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    (
        start.is_none(),
        start,
        job.metadata.name.clone().unwrap_or_default(),
    )
}

/// Deletes of the finished Jobs beyond `successful_limit` / `failed_limit` (negative counts as
/// 0), oldest first. Jobs already being deleted are neither counted nor deleted again.
pub fn trim(owned: &[&Job], successful_limit: i32, failed_limit: i32) -> Vec<Action> {
    let mut deletes = Vec::new();
    for (outcome, limit) in [
        (Outcome::Complete, successful_limit),
        (Outcome::Failed, failed_limit),
    ] {
        let mut done: Vec<&Job> = owned
            .iter()
            .copied()
            .filter(|j| {
                jobs::outcome(j) == Some(outcome) && j.metadata.deletion_timestamp.is_none()
            })
            .collect();
        let keep = usize::try_from(limit.max(0)).unwrap_or(0);
        if done.len() <= keep {
            continue;
        }
        done.sort_by_key(|j| age_key(j));
        let excess = done.len() - keep;
        deletes.extend(done.into_iter().take(excess).map(|job| Action::DeleteJob {
            name: job.metadata.name.clone().unwrap_or_default(),
            uid: job.metadata.uid.clone(),
            reason: DeleteReason::History,
        }));
    }
    deletes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{JobFixture, job, t};

    fn deleted(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::DeleteJob { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// (name, owned, successful limit, failed limit, deleted).
    type Case<'a> = (&'a str, Vec<&'a Job>, i32, i32, Vec<&'a str>);

    #[test]
    fn trim_table() {
        let ok = |name: &str, start: Option<&str>| {
            let j = job(name).complete_at("2024-01-01T12:00:00Z");
            match start {
                Some(s) => j.started_at(s),
                None => j,
            }
        };
        let a = ok("a", Some("2024-01-01T01:00:00Z"));
        let b = ok("b", Some("2024-01-01T02:00:00Z"));
        let b2 = ok("b2", Some("2024-01-01T02:00:00Z"));
        let none = ok("none", None);
        let f1 = job("f1")
            .started_at("2024-01-01T01:00:00Z")
            .failed_at("2024-01-01T12:00:00Z");
        let f2 = job("f2")
            .started_at("2024-01-01T03:00:00Z")
            .failed_at("2024-01-01T12:00:00Z");
        let going = ok("going", Some("2024-01-01T00:00:00Z")).deleting();
        let running = job("running").started_at("2024-01-01T00:00:00Z");
        let cases: Vec<Case> = vec![
            ("within limits", vec![&a, &b, &f1], 3, 1, vec![]),
            ("oldest success first", vec![&b, &a], 1, 1, vec!["a"]),
            (
                "no start time counts as newest",
                vec![&none, &a, &b],
                1,
                1,
                vec!["a", "b"],
            ),
            ("ties by name", vec![&b2, &b], 1, 1, vec!["b"]),
            ("failed separately", vec![&f2, &f1, &a], 3, 1, vec!["f1"]),
            (
                "limit 0 deletes all of that kind",
                vec![&a, &b, &f1],
                0,
                1,
                vec!["a", "b"],
            ),
            ("negative limit is 0", vec![&f1], 3, -1, vec!["f1"]),
            (
                "being deleted: not counted, not deleted again",
                vec![&going, &a],
                1,
                1,
                vec![],
            ),
            ("running Jobs are not history", vec![&running], 0, 0, vec![]),
        ];
        for (name, owned, ok_limit, failed_limit, want) in cases {
            assert_eq!(
                deleted(&trim(&owned, ok_limit, failed_limit)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn last_finished_rises_and_never_lowers() {
        let early = job("early").complete_at("2024-01-01T01:00:00Z");
        let late = job("late").complete_at("2024-01-01T03:00:00Z");
        let failed = job("failed").failed_at("2024-01-01T02:00:00Z");
        let manual = job("manual").manual().complete_at("2024-01-01T04:00:00Z");
        let mut status = CronJobStatus::default();
        record_last_finished(&[&early, &late, &failed], &mut status);
        assert_eq!(
            status.last_successful_time,
            Some(Time(t("2024-01-01T03:00:00Z")))
        );
        assert_eq!(
            status.last_failure_time,
            Some(Time(t("2024-01-01T02:00:00Z")))
        );
        // Manual runs count; an older finish never lowers the time.
        record_last_finished(&[&early, &manual], &mut status);
        assert_eq!(
            status.last_successful_time,
            Some(Time(t("2024-01-01T04:00:00Z")))
        );
        record_last_finished(&[&early], &mut status);
        assert_eq!(
            status.last_successful_time,
            Some(Time(t("2024-01-01T04:00:00Z")))
        );
    }

    #[test]
    fn a_success_is_dated_by_its_completion_time() {
        let mut done = job("done").complete_at("2024-01-01T01:00:01Z");
        if let Some(s) = done.status.as_mut() {
            s.completion_time = Some(Time(t("2024-01-01T01:00:00Z")));
        }
        let mut status = CronJobStatus::default();
        record_last_finished(&[&done], &mut status);
        assert_eq!(
            status.last_successful_time,
            Some(Time(t("2024-01-01T01:00:00Z")))
        );
    }
}
