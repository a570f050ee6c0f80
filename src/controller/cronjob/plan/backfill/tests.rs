//! The backfill step through [`plan_recorded`]: oldest first, at most `parallel` unfinished,
//! only slots recorded as missed, the repeat creating nothing, and the schedule untouched.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::super::{Plan, PlanConfig, Records, plan_recorded};
use super::*;
use crate::api::{ANNOTATION_BACKFILL, ConcurrencyPolicy, CronJobStatus, MissedSlots};
use crate::testing::fixtures::{self, JobFixture, t, workload};
use crate::workload::Workload;
use crate::workload::backfill::Request;

/// `* * * * *`, created at 09:59:00, with a backfill of `from`..`to` asked for.
fn asked(from: &str, to: &str, parallel: u32) -> CronJob {
    let mut cj = fixtures::cronjob("* * * * *");
    let request = Request::new(t(from), t(to), parallel).expect("request");
    cj.metadata
        .annotations
        .get_or_insert_default()
        .insert(ANNOTATION_BACKFILL.into(), request.value());
    cj
}

/// The Job a backfill created for `at`, `state` "running", "complete" or "failed".
fn backfilled(at: &str, state: &str) -> Arc<Workload> {
    let cj = fixtures::cronjob("* * * * *");
    let mut job = crate::workload::for_backfill(&cj, t(at), &jiff::tz::TimeZone::UTC, None)
        .and_then(crate::workload::NewWorkload::into_job)
        .expect("job");
    job.metadata.uid = Some(format!("uid-{at}"));
    let job = match state {
        "complete" => job.complete_at("2016-05-19T10:00:20Z"),
        "failed" => job.failed_at("2016-05-19T10:00:20Z"),
        _ => job,
    };
    workload(job)
}

fn slots(plan: &Plan) -> Vec<String> {
    match &plan.backfill {
        Some(Backfill::Run { creates, .. }) => creates
            .iter()
            .map(|(slot, _)| slot.strftime("%H:%M").to_string())
            .collect(),
        _ => Vec::new(),
    }
}

fn minute(m: u32) -> String {
    format!("2016-05-19T09:{m:02}:00Z")
}

const NOW: &str = "2016-05-19T10:00:30Z";

#[test]
fn oldest_first_at_most_parallel_unfinished_then_done_and_the_repeat_creates_nothing() {
    let cfg = PlanConfig::default();
    let now = t(NOW);
    // Ten slots before the creation (09:59:00): 09:50 to 09:59.
    let cj = asked(&minute(50), &minute(59), 3);

    let first = plan_recorded(&cj, &[], Records::of(&cj), now, &cfg);
    assert_eq!(slots(&first), ["09:50", "09:51", "09:52"]);
    let job = first.creates().last().expect("a create");
    assert_eq!(
        job.metadata().name.as_deref(),
        Some(crate::workload::scheduled_name("cj", t(&minute(52))).as_str()),
        "the slot's own name"
    );

    // Three running: nothing more.
    let running: Vec<Arc<Workload>> = (50..53)
        .map(|m| backfilled(&minute(m), "running"))
        .collect();
    let ledger = Records {
        backfilled: Some((t(&minute(50)), t(&minute(52)))),
        ..Records::of(&cj)
    };
    let full = plan_recorded(&cj, &running, ledger, now, &cfg);
    assert_eq!(slots(&full), Vec::<String>::new(), "3 unfinished");
    assert!(matches!(full.backfill, Some(Backfill::Run { .. })));
    assert!(
        full.status.active.is_empty(),
        "backfill Jobs are not the schedule's"
    );

    // One finished, one failed: two more, oldest first.
    let mixed = vec![
        backfilled(&minute(50), "complete"),
        backfilled(&minute(51), "failed"),
        backfilled(&minute(52), "running"),
    ];
    let next = plan_recorded(&cj, &mixed, ledger, now, &cfg);
    assert_eq!(slots(&next), ["09:53", "09:54"]);
    assert_eq!(
        next.status.consecutive_failures, 0,
        "a backfill's failure is not counted"
    );
    assert_eq!(
        next.status.last_schedule_time, None,
        "a backfill never moves lastScheduleTime"
    );

    // The ledger alone (its Jobs deleted, the status write not landed) keeps them from running.
    let gone = plan_recorded(&cj, &[], ledger, now, &cfg);
    assert_eq!(slots(&gone), ["09:53", "09:54", "09:55"]);

    // Every slot ran: the status records it, and the request goes.
    let mut stored = cj.clone();
    let mut status = CronJobStatus::default();
    for m in 50..60 {
        record_created(&mut status, t(&minute(50)), t(&minute(m)), true);
    }
    stored.status = Some(CronJobStatus {
        missed: status.missed.clone(),
        backfill: Some(BackfillProgress {
            request: crate::workload::backfill::requested(&cj)
                .expect("asked")
                .into(),
            created: 10,
        }),
        ..Default::default()
    });
    let done = plan_recorded(&stored, &[], Records::of(&stored), now, &cfg);
    match &done.backfill {
        Some(Backfill::Done { note, .. }) => {
            assert!(
                note.contains("10 Jobs created, 0 slots already run"),
                "{note}"
            )
        }
        other => panic!("not done: {other:?}"),
    }
    assert_eq!(
        done.creates().count(),
        1,
        "the schedule's own 10:00 slot, nothing of the backfill"
    );

    // The same range again: nothing to run.
    let mut again = stored.clone();
    again.status.as_mut().expect("status").backfill = None;
    let repeat = plan_recorded(&again, &[], Records::of(&again), now, &cfg);
    match &repeat.backfill {
        Some(Backfill::Done { note, .. }) => {
            assert!(
                note.contains("0 Jobs created, 10 slots already run"),
                "{note}"
            )
        }
        other => panic!("not done: {other:?}"),
    }
    assert_eq!(
        repeat.creates().count(),
        1,
        "the schedule's own 10:00 slot only"
    );
}

#[test]
fn only_slots_the_scheduler_passed_over_are_backfilled() {
    let cfg = PlanConfig::default();
    // It ran 10:00; the manager was down until 10:05:10.
    let mut cj = fixtures::cronjob("* * * * *");
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T10:00:00Z"))),
        ..Default::default()
    });
    let now = t("2016-05-19T10:05:10Z");
    let plan = plan_recorded(&cj, &[], Records::of(&cj), now, &cfg);
    assert_eq!(plan.scheduled(), Some(t("2016-05-19T10:05:00Z")));
    let missed = plan.status.missed.clone().expect("recorded");
    assert_eq!(
        missed.last(),
        Some(&MissedSlots {
            after: Some(Time(t("2016-05-19T10:00:00Z"))),
            before: Time(t("2016-05-19T10:05:00Z")),
        })
    );

    // The next reconcile backfills 09:58-10:05: before creation (09:58, 09:59) and the gap.
    let mut after = cj.clone();
    after.status = Some(plan.status.clone());
    after.status.as_mut().expect("status").last_schedule_time =
        Some(Time(t("2016-05-19T10:05:00Z")));
    let request =
        Request::new(t("2016-05-19T09:58:00Z"), t("2016-05-19T10:05:00Z"), 10).expect("request");
    after
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(ANNOTATION_BACKFILL.into(), request.value());
    let ran_10 = workload(
        fixtures::job(&crate::workload::scheduled_name(
            "cj",
            t("2016-05-19T10:00:00Z"),
        ))
        .scheduled_for("2016-05-19T10:00:00Z"),
    );
    let plan = plan_recorded(&after, &[ran_10], Records::of(&after), now, &cfg);
    assert_eq!(
        slots(&plan),
        ["09:58", "09:59", "10:01", "10:02", "10:03", "10:04"],
        "10:00 and 10:05 ran"
    );
}

#[test]
fn a_suspended_or_forbid_cronjob_still_backfills_and_bad_requests_are_removed() {
    let cfg = PlanConfig::default();
    let now = t(NOW);
    let mut cj = asked(&minute(58), &minute(59), 1);
    cj.spec.suspend = Some(true);
    cj.spec.concurrency_policy = ConcurrencyPolicy::Forbid;
    let plan = plan_recorded(&cj, &[], Records::of(&cj), now, &cfg);
    assert_eq!(slots(&plan), ["09:58"]);

    cj.metadata
        .annotations
        .get_or_insert_default()
        .insert(ANNOTATION_BACKFILL.into(), "{\"from\":\"soon\"}".into());
    let plan = plan_recorded(&cj, &[], Records::of(&cj), now, &cfg);
    match plan.backfill {
        Some(Backfill::Invalid { warning, .. }) => {
            let Action::Event { reason, .. } = warning else {
                panic!("an event")
            };
            assert_eq!(reason, INVALID_BACKFILL);
        }
        other => panic!("not refused: {other:?}"),
    }

    // A scheduled slot with a running backfill Job: Forbid does not see it.
    let mut cj = asked(&minute(58), &minute(59), 1);
    cj.spec.concurrency_policy = ConcurrencyPolicy::Forbid;
    let running = vec![backfilled(&minute(58), "running")];
    let plan = plan_recorded(
        &cj,
        &running,
        Records::of(&cj),
        t("2016-05-19T10:00:05Z"),
        &cfg,
    );
    assert_eq!(
        plan.scheduled(),
        Some(t("2016-05-19T10:00:00Z")),
        "the schedule runs"
    );
    assert!(
        slots(&plan).is_empty(),
        "the backfill waits for its own Job"
    );
}

#[test]
fn slots_a_backfill_ran_are_recorded_again_when_their_status_write_was_lost() {
    let cfg = PlanConfig::default();
    // The request is gone (done), but the status write that took 09:50-09:52 out of the
    // missed slots never landed: the ledger still knows.
    let cj = fixtures::cronjob("* * * * *");
    let ledger = Records {
        backfilled: Some((t(&minute(50)), t(&minute(52)))),
        ..Records::of(&cj)
    };
    let plan = plan_recorded(&cj, &[], ledger, t(NOW), &cfg);
    let gaps: Vec<crate::workload::backfill::Gap> = plan
        .status
        .missed
        .as_deref()
        .expect("recorded")
        .iter()
        .map(|m| crate::workload::backfill::Gap {
            after: m.after.as_ref().map(|t| t.0),
            before: m.before.0,
        })
        .collect();
    for m in 50..53 {
        assert!(
            !crate::workload::backfill::contains(&gaps, t(&minute(m))),
            "09:{m} ran"
        );
    }
    assert!(crate::workload::backfill::contains(&gaps, t(&minute(49))));
    assert!(crate::workload::backfill::contains(&gaps, t(&minute(53))));
    let plain = plan_recorded(&cj, &[], Records::of(&cj), t(NOW), &cfg);
    assert_eq!(plain.status.missed, None, "nothing to record");
}

#[test]
fn a_backfill_waits_for_a_missing_calendar_and_runs_no_day_one_excludes() {
    use super::super::plan_calendars;
    let cfg = PlanConfig::default();
    let now = t(NOW);
    let mut cj = asked(&minute(50), &minute(59), 3);
    cj.spec.calendars = Some(vec!["holidays".into()]);

    let missing = Calendars::resolve(&cj, |_| None);
    let waiting = plan_calendars(&cj, &[], Records::of(&cj), now, &cfg, None, &missing);
    assert_eq!(waiting.backfill, None, "no Job, and the request stays");
    assert_eq!(waiting.creates().count(), 0);

    let holidays = Arc::new(crate::api::Calendar::new(
        "holidays",
        crate::api::CalendarSpec {
            dates: vec!["2016-05-19".into()],
            ..Default::default()
        },
    ));
    let found = Calendars::resolve(&cj, |_| Some(holidays.clone()));
    let excluded = plan_calendars(&cj, &[], Records::of(&cj), now, &cfg, None, &found);
    assert_eq!(
        excluded.creates().count(),
        0,
        "every slot's day is excluded"
    );
    match &excluded.backfill {
        Some(Backfill::Done { note, .. }) => assert!(
            note.ends_with(
                "0 Jobs created, 0 slots already run, 10 slots ruled out by calendars or the window"
            ),
            "{note}"
        ),
        other => panic!("want Done, got {other:?}"),
    }
}
