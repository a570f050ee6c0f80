//! Step 2: history. The last success and failure over every owned Job, manual runs included,
//! never lowered (upstream A4, PR #122025); and the oldest finished Jobs beyond the history
//! limits, to delete (upstream H1-H3: by `status.startTime`, Jobs without one count as newest,
//! ties by name).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Action, DeleteReason};
use crate::api::CronJobStatus;
use crate::workload::Workload;
use crate::workload::{self as jobs, Outcome};

/// Raise `lastSuccessfulTime` and `lastFailureTime` to the latest finish among `owned`. A
/// success is dated by the Job's `completionTime`, as upstream does (the Job controller may add
/// the `Complete` condition a moment after it); a failure by its `Failed` condition.
pub fn record_last_finished(owned: &[&Workload], status: &mut CronJobStatus) {
    for job in owned {
        let Some(jobs::Finish {
            outcome,
            at: Some(at),
        }) = job.finish
        else {
            continue;
        };
        let (slot, at) = match outcome {
            Outcome::Complete => (
                &mut status.last_successful_time,
                job.completed.unwrap_or(at),
            ),
            Outcome::Failed => (&mut status.last_failure_time, at),
        };
        if slot.as_ref().is_none_or(|t| t.0 < at) {
            *slot = Some(Time(at));
        }
    }
}

/// The latest slot that ran, from every record of a run: `old` (the status planned from),
/// `ran` (what this process ran, its status write pending or lost to a conflict) and the
/// scheduled Jobs among `owned` (a Job is the record of its slot until a status carries it;
/// slots after `now` are not believed). Never earlier than `old`: `lastScheduleTime` only
/// moves forward. Also the Jobs whose slot this recording adds to `old`, oldest slot first.
pub fn last_scheduled<'a>(
    old: Option<Timestamp>,
    ran: Option<Timestamp>,
    owned: &[&'a Workload],
    now: Timestamp,
) -> (Option<Timestamp>, Vec<&'a Workload>) {
    let mut added: Vec<(Timestamp, &Workload)> = owned
        .iter()
        .filter_map(|j| Some((jobs::slot_of(&j.metadata)?, *j)))
        .filter(|(slot, _)| *slot <= now && old.is_none_or(|old| *slot > old))
        .collect();
    added.sort_by_key(|(slot, _)| *slot);
    let newest_job = added.last().map(|(slot, _)| *slot);
    let last = [old, ran.filter(|r| *r <= now), newest_job]
        .into_iter()
        .flatten()
        .max();
    (last, added.into_iter().map(|(_, j)| j).collect())
}

/// Order for trimming: oldest first by `status.startTime`, Jobs without one last, ties by name.
fn age_key(job: &Workload) -> (bool, Option<Timestamp>, String) {
    let start = job.started;
    (
        start.is_none(),
        start,
        job.metadata.name.clone().unwrap_or_default(),
    )
}

/// Deletes of the finished Jobs beyond `successful_limit` / `failed_limit` (negative counts as
/// 0), oldest first. Jobs already being deleted are neither counted nor deleted again; a Job
/// that is the only record of its slot (see [`jobs::slot_recorded`]: were the process to die
/// after its delete, before the status that records the slot is written, the slot would run
/// again) counts but waits.
pub fn trim(
    owned: &[&Workload],
    successful_limit: i32,
    failed_limit: i32,
    stored: Option<Timestamp>,
) -> Trim {
    let mut deletes = Vec::new();
    let mut held = 0;
    for (outcome, limit) in [
        (Outcome::Complete, successful_limit),
        (Outcome::Failed, failed_limit),
    ] {
        let mut done: Vec<&Workload> = owned
            .iter()
            .copied()
            .filter(|j| j.outcome() == Some(outcome) && j.metadata.deletion_timestamp.is_none())
            .collect();
        let keep = usize::try_from(limit.max(0)).unwrap_or(0);
        if done.len() <= keep {
            continue;
        }
        done.sort_by_key(|j| age_key(j));
        let excess = done.len() - keep;
        for job in done.into_iter().take(excess) {
            if !jobs::slot_recorded(&job.metadata, stored) {
                held += 1;
                continue;
            }
            deletes.push(Action::DeleteJob {
                type_: Arc::clone(&job.type_),
                name: job.metadata.name.clone().unwrap_or_default(),
                uid: job.metadata.uid.clone(),
                reason: DeleteReason::History,
            });
        }
    }
    Trim { deletes, held }
}

/// The history Jobs to delete now, and how many more wait for the status that records their
/// slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Trim {
    /// Deletes, oldest first.
    pub deletes: Vec<Action>,
    /// Jobs beyond the limits kept for now, until a status records their slot.
    pub held: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{JobFixture, job, t};
    use crate::workload::Workload;

    fn deleted(trim: &Trim) -> Vec<String> {
        trim.deletes
            .iter()
            .filter_map(|a| match a {
                Action::DeleteJob { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// (name, owned, successful limit, failed limit, deleted).
    type Case<'a> = (&'a str, Vec<&'a Workload>, i32, i32, Vec<&'a str>);

    #[test]
    fn trim_table() {
        let ok = |name: &str, start: Option<&str>| {
            let j = job(name).complete_at("2024-01-01T12:00:00Z");
            match start {
                Some(s) => j.started_at(s),
                None => j,
            }
        };
        let a = Workload::from(ok("a", Some("2024-01-01T01:00:00Z")));
        let b = Workload::from(ok("b", Some("2024-01-01T02:00:00Z")));
        let b2 = Workload::from(ok("b2", Some("2024-01-01T02:00:00Z")));
        let none = Workload::from(ok("none", None));
        let f1: Workload = job("f1")
            .started_at("2024-01-01T01:00:00Z")
            .failed_at("2024-01-01T12:00:00Z")
            .into();
        let f2: Workload = job("f2")
            .started_at("2024-01-01T03:00:00Z")
            .failed_at("2024-01-01T12:00:00Z")
            .into();
        let going = Workload::from(ok("going", Some("2024-01-01T00:00:00Z")).deleting());
        let running: Workload = job("running").started_at("2024-01-01T00:00:00Z").into();
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
                deleted(&trim(&owned, ok_limit, failed_limit, None)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn a_job_that_is_the_only_record_of_its_slot_counts_but_waits() {
        let slot = |name: &str, at: &str| -> Workload {
            job(name)
                .scheduled_for(at)
                .started_at(at)
                .complete_at("2024-01-01T12:00:00Z")
                .into()
        };
        let ten = slot("ten", "2024-01-01T10:00:00Z");
        let eleven = slot("eleven", "2024-01-01T11:00:00Z");
        let manual: Workload = job("manual")
            .manual()
            .started_at("2024-01-01T11:30:00Z")
            .complete_at("2024-01-01T12:00:00Z")
            .into();
        // (name, stored lastScheduleTime, successful limit, deleted)
        let cases = [
            (
                "both stored",
                Some("2024-01-01T11:00:00Z"),
                0,
                vec!["ten", "eleven"],
            ),
            (
                "the newer not stored yet",
                Some("2024-01-01T10:00:00Z"),
                0,
                vec!["ten"],
            ),
            ("nothing stored", None, 0, vec![]),
            // Held, it still counts against the limit: the older one goes.
            (
                "limit 1, the newest held",
                Some("2024-01-01T10:00:00Z"),
                1,
                vec!["ten"],
            ),
        ];
        for (name, stored, limit, want) in cases {
            let owned = [&ten, &eleven];
            let trimmed = trim(&owned, limit, 1, stored.map(t));
            let kept = [&ten, &eleven].len() - usize::try_from(limit).unwrap_or(0);
            assert_eq!(deleted(&trimmed), want, "{name}");
            assert_eq!(trimmed.held, kept - want.len(), "{name}: held");
        }
        // A manual run is no slot's record.
        assert_eq!(deleted(&trim(&[&manual], 0, 1, None)), ["manual"]);
    }

    /// (name, old, ran, owned, last, Jobs added).
    type LastCase<'a> = (
        &'a str,
        Option<Timestamp>,
        Option<Timestamp>,
        Vec<&'a Workload>,
        Option<Timestamp>,
        Vec<&'a str>,
    );

    #[test]
    fn the_last_slot_comes_from_every_record_and_never_moves_back() {
        let now = t("2024-01-01T12:00:00Z");
        let ten: Workload = job("ten").scheduled_for("2024-01-01T10:00:00Z").into();
        let eleven: Workload = job("eleven").scheduled_for("2024-01-01T11:00:00Z").into();
        let future: Workload = job("future").scheduled_for("2024-01-02T00:00:00Z").into();
        let manual: Workload = job("manual").manual().into();
        let at = |s: &str| Some(t(s));
        let names = |jobs: Vec<&Workload>| -> Vec<String> {
            jobs.iter()
                .filter_map(|j| j.metadata.name.clone())
                .collect()
        };
        let cases: Vec<LastCase> = vec![
            ("nothing ran", None, None, vec![&manual], None, vec![]),
            (
                "the status alone",
                at("2024-01-01T09:00:00Z"),
                None,
                vec![],
                at("2024-01-01T09:00:00Z"),
                vec![],
            ),
            (
                "Jobs the status lacks",
                at("2024-01-01T09:00:00Z"),
                None,
                vec![&eleven, &ten],
                at("2024-01-01T11:00:00Z"),
                vec!["ten", "eleven"],
            ),
            (
                "Jobs the status has",
                at("2024-01-01T11:00:00Z"),
                None,
                vec![&ten, &eleven],
                at("2024-01-01T11:00:00Z"),
                vec![],
            ),
            (
                "what this process ran, its Job gone",
                at("2024-01-01T09:00:00Z"),
                at("2024-01-01T11:00:00Z"),
                vec![&ten],
                at("2024-01-01T11:00:00Z"),
                vec!["ten"],
            ),
            (
                "never backwards",
                at("2024-01-01T11:30:00Z"),
                at("2024-01-01T10:00:00Z"),
                vec![&ten],
                at("2024-01-01T11:30:00Z"),
                vec![],
            ),
            (
                "a slot after now is not believed",
                None,
                at("2024-01-02T00:00:00Z"),
                vec![&future],
                None,
                vec![],
            ),
        ];
        for (name, old, ran, owned, want, added) in cases {
            let (last, new) = last_scheduled(old, ran, &owned, now);
            assert_eq!(last, want, "{name}");
            assert_eq!(names(new), added, "{name}");
        }
    }

    #[test]
    fn last_finished_rises_and_never_lowers() {
        let early: Workload = job("early").complete_at("2024-01-01T01:00:00Z").into();
        let late: Workload = job("late").complete_at("2024-01-01T03:00:00Z").into();
        let failed: Workload = job("failed").failed_at("2024-01-01T02:00:00Z").into();
        let manual: Workload = job("manual")
            .manual()
            .complete_at("2024-01-01T04:00:00Z")
            .into();
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
        let mut done: Workload = job("done").complete_at("2024-01-01T01:00:01Z").into();
        done.completed = Some(t("2024-01-01T01:00:00Z"));
        let mut status = CronJobStatus::default();
        record_last_finished(&[&done], &mut status);
        assert_eq!(
            status.last_successful_time,
            Some(Time(t("2024-01-01T01:00:00Z")))
        );
    }
}
