//! Calendars and the active window through [`plan_calendars`]: a skipped slot, a missing
//! Calendar, the window's edges.

use std::sync::Arc;

use super::scheduling::Calendars;
use super::*;
use crate::api::{Calendar, CalendarSpec, DateRange};
use crate::testing::fixtures::{self, t};

/// The fixture CronJob (`ns/cj`, created 2016-05-19T09:59Z) running hourly.
fn hourly() -> CronJob {
    fixtures::cronjob("0 * * * *")
}

fn days(dates: &[&str]) -> CalendarSpec {
    CalendarSpec {
        dates: dates.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn run(cj: &CronJob, now: &str) -> Plan {
    let calendars = Calendars::inline(cj);
    plan_calendars(
        cj,
        &[],
        Records::of(cj),
        t(now),
        &PlanConfig::default(),
        None,
        &calendars,
    )
}

fn ready(p: &Plan) -> (String, String) {
    let (status, reason) = status::ready_of(&p.status).expect("Ready");
    (status.to_string(), reason.to_string())
}

/// The message of the planned `Ready` condition.
fn ready_message(p: &Plan) -> String {
    p.status
        .conditions
        .iter()
        .find(|c| c.type_ == status::CONDITION_READY)
        .map(|c| c.message.clone())
        .expect("a Ready condition")
}

fn notes(p: &Plan, reason: &str) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event {
                reason: r, note, ..
            } if *r == reason => Some(note.clone()),
            _ => None,
        })
        .collect()
}

/// The due slot's day is excluded: no Job, `lastScheduleTime` stays, `lastSkippedTime` records
/// it with one Event; planning again from that status publishes nothing more; the next slot is
/// the first of the next allowed day.
#[test]
fn an_excluded_slot_runs_nothing_and_is_told_once() {
    let mut cj = hourly();
    cj.spec.exclusions = Some(days(&["2016-05-19"]));
    let p = run(&cj, "2016-05-19T10:00:05Z");
    assert!(p.run.is_none(), "no Job");
    assert_eq!(p.status.last_schedule_time, None);
    assert_eq!(
        p.status.last_skipped_time.as_ref().map(|t| t.0),
        Some(t("2016-05-19T10:00:00Z"))
    );
    assert_eq!(
        notes(&p, events::SLOT_SKIPPED),
        ["Skipped the slot at 2016-05-19T10:00:00Z: spec.exclusions excludes 2016-05-19"]
    );
    assert_eq!(
        p.status.next_schedule_time.as_ref().map(|t| t.0),
        Some(t("2016-05-20T00:00:00Z")),
        "the excluded day's slots are not next"
    );
    assert_eq!(ready(&p), ("True".into(), "Scheduled".into()));
    // Woken at the next slot of the day (its Event is due then), not at the next allowed one.
    assert_eq!(
        p.requeue_after,
        Some(requeue_for(
            t("2016-05-19T11:00:00Z"),
            t("2016-05-19T10:00:05Z")
        ))
    );

    cj.status = Some(p.status.clone());
    let again = run(&cj, "2016-05-19T10:30:00Z");
    assert!(again.run.is_none());
    assert!(
        notes(&again, events::SLOT_SKIPPED).is_empty(),
        "once per slot"
    );
    let next = run(&cj, "2016-05-19T11:00:01Z");
    assert_eq!(
        notes(&next, events::SLOT_SKIPPED),
        ["Skipped the slot at 2016-05-19T11:00:00Z: spec.exclusions excludes 2016-05-19"]
    );
    // The next day runs, and the skipped slots were no missed runs.
    cj.status = Some(next.status.clone());
    let tomorrow = run(&cj, "2016-05-20T00:00:01Z");
    assert_eq!(tomorrow.scheduled(), Some(t("2016-05-20T00:00:00Z")));
    assert!(
        notes(&tomorrow, events::TOO_MANY_MISSED_TIMES).is_empty()
            && notes(&tomorrow, events::MISS_SCHEDULE).is_empty()
    );
}

/// Catch-up never runs an excluded slot, nor an older allowed one in its place.
#[test]
fn catch_up_runs_no_excluded_slot_nor_an_older_one() {
    let mut cj = hourly();
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-18T20:00:00Z"))),
        ..Default::default()
    });
    // 18 May 21:00-23:00 were allowed and missed; every slot of 19 May is excluded.
    cj.spec.exclusions = Some(CalendarSpec {
        ranges: vec![DateRange {
            from: "2016-05-19".into(),
            to: "2016-05-19".into(),
        }],
        ..Default::default()
    });
    let p = run(&cj, "2016-05-19T10:01:00Z");
    assert!(p.run.is_none(), "{:?}", p.run);
    assert_eq!(
        p.status.last_skipped_time.as_ref().map(|t| t.0),
        Some(t("2016-05-19T10:00:00Z"))
    );
    // With a deadline that hides the slot: no MissSchedule for an excluded slot.
    cj.spec.starting_deadline_seconds = Some(10);
    let p = run(&cj, "2016-05-19T10:01:00Z");
    assert!(p.run.is_none());
    assert!(notes(&p, events::MISS_SCHEDULE).is_empty());
    // Without the exclusion, the most recent slot runs as usual.
    cj.spec.starting_deadline_seconds = None;
    cj.spec.exclusions = None;
    assert_eq!(
        run(&cj, "2016-05-19T10:01:00Z").scheduled(),
        Some(t("2016-05-19T10:00:00Z"))
    );
}

/// A named Calendar that does not exist: no slot runs, `Ready=False` reason
/// `CalendarNotFound` naming it, one Warning; once it exists the CronJob schedules, and a
/// Calendar's day is reported with its name.
#[test]
fn a_missing_calendar_stops_every_slot_until_it_exists() {
    let mut cj = hourly();
    cj.spec.calendars = Some(vec!["holidays".into()]);
    let missing = Calendars::resolve(&cj, |_| None);
    assert_eq!(missing, Calendars::Missing(vec!["holidays".into()]));
    let plan_with = |cj: &CronJob, cals: &Calendars, now: &str| {
        plan_calendars(
            cj,
            &[],
            Records::of(cj),
            t(now),
            &PlanConfig::default(),
            None,
            cals,
        )
    };
    let p = plan_with(&cj, &missing, "2016-05-19T10:00:05Z");
    assert!(p.run.is_none());
    assert_eq!(ready(&p), ("False".into(), "CalendarNotFound".into()));
    assert_eq!(
        notes(&p, events::CALENDAR_NOT_FOUND),
        ["Calendar holidays not found (spec.calendars): no slot runs until it exists"]
    );
    assert_eq!(p.status.next_schedule_time, None);
    cj.status = Some(p.status.clone());
    let again = plan_with(&cj, &missing, "2016-05-19T10:00:30Z");
    assert!(notes(&again, events::CALENDAR_NOT_FOUND).is_empty(), "once");

    let calendar = Arc::new(Calendar::new("holidays", days(&["2016-05-19"])));
    let found = Calendars::resolve(&cj, |name| (name == "holidays").then(|| calendar.clone()));
    let p = plan_with(&cj, &found, "2016-05-19T10:00:40Z");
    assert_eq!(ready(&p), ("True".into(), "Scheduled".into()));
    assert!(p.run.is_none());
    assert_eq!(
        notes(&p, events::SLOT_SKIPPED),
        ["Skipped the slot at 2016-05-19T10:00:00Z: Calendar holidays excludes 2016-05-19"]
    );
    let other = Arc::new(Calendar::new("holidays", days(&["2016-05-20"])));
    let found = Calendars::resolve(&cj, |_| Some(other.clone()));
    let p = plan_with(&cj, &found, "2016-05-19T10:00:40Z");
    assert_eq!(
        p.scheduled(),
        Some(t("2016-05-19T10:00:00Z")),
        "it appeared: it runs"
    );
}

/// The window's edges: a slot exactly at `notBefore` and exactly at `notAfter` runs; before the
/// window the next slot is its first; after it, `Ready=False` reason `Finished`, no next slot,
/// no requeue and no Warning.
#[test]
fn the_window_bounds_the_slots_and_finishes() {
    let mut cj = hourly();
    cj.spec.not_before = Some(Time(t("2016-05-19T12:00:00Z")));
    cj.spec.not_after = Some(Time(t("2016-05-19T14:00:00Z")));
    #[rustfmt::skip]
    let cases = [
        // (now, runs, next, Ready reason)
        ("2016-05-19T10:00:05Z", None, Some("2016-05-19T12:00:00Z"), "Scheduled"),
        ("2016-05-19T12:00:01Z", Some("2016-05-19T12:00:00Z"), Some("2016-05-19T13:00:00Z"), "Scheduled"),
        ("2016-05-19T14:00:01Z", Some("2016-05-19T14:00:00Z"), None, "Scheduled"),
        ("2016-05-19T15:00:01Z", None, None, "Finished"),
    ];
    for (now, runs, next, why) in cases {
        let p = run(&cj, now);
        assert_eq!(p.scheduled(), runs.map(t), "{now}: run");
        assert_eq!(
            p.status.next_schedule_time.as_ref().map(|t| t.0),
            next.map(t),
            "{now}: next"
        );
        assert_eq!(ready(&p).1, why, "{now}");
        assert!(
            p.events().all(|(type_, _)| type_ == EventType::Normal),
            "{now}: no Warning"
        );
    }
    // Before the window: woken at its first slot, not at each slot before it.
    let early = run(&cj, "2016-05-19T10:00:05Z");
    assert_eq!(
        early.requeue_after,
        Some(requeue_for(
            t("2016-05-19T12:00:00Z"),
            t("2016-05-19T10:00:05Z")
        ))
    );
    // After the last slot ran (recorded): Finished, nothing to wait for.
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T14:00:00Z"))),
        ..Default::default()
    });
    let done = run(&cj, "2016-05-19T14:00:02Z");
    assert_eq!(ready(&done).1, "Finished");
    assert_eq!(done.requeue_after, None);
    assert_eq!(
        ready_message(&done),
        "the active window ended at 2016-05-19T14:00:00Z (spec.notAfter): no slot is left to run"
    );
}

/// A window from the first instant there is (`notBefore`) panicked the plan, which stepped a
/// nanosecond back from it: every slot is inside it.
#[test]
fn a_window_from_the_first_instant_holds_every_slot() {
    let mut cj = hourly();
    cj.spec.not_before = Some(Time(jiff::Timestamp::MIN));
    let p = run(&cj, "2016-05-19T10:00:05Z");
    assert_eq!(p.scheduled(), Some(t("2016-05-19T10:00:00Z")));
    assert_eq!(ready(&p).1, "Scheduled");
}

/// Every slot left in the window is excluded: finished already, saying why.
#[test]
fn a_window_whose_remaining_days_are_excluded_is_finished_early() {
    let mut cj = hourly();
    cj.spec.exclusions = Some(days(&["2016-05-19"]));
    cj.spec.not_after = Some(Time(t("2016-05-19T20:00:00Z")));
    let p = run(&cj, "2016-05-19T10:30:00Z");
    assert!(p.run.is_none());
    assert_eq!(ready(&p).1, "Finished");
    assert_eq!(p.status.next_schedule_time, None);
    assert_eq!(
        ready_message(&p),
        "the calendars exclude every slot left before the active window ends at 2016-05-19T20:00:00Z (spec.notAfter)"
    );
}

/// A run asked for with `kubectl kronjob trigger` is explicit: it runs on an excluded day and
/// after the window has ended, as it runs while the CronJob is suspended.
#[test]
fn a_manual_run_runs_on_an_excluded_day_and_after_the_window() {
    let mut cj = hourly();
    cj.spec.exclusions = Some(days(&["2016-05-19"]));
    cj.spec.not_after = Some(Time(t("2016-05-19T09:59:30Z")));
    cj.metadata.annotations.get_or_insert_default().insert(
        crate::api::ANNOTATION_TRIGGER.into(),
        "2016-05-19T10:00:00Z".into(),
    );
    let p = run(&cj, "2016-05-19T10:00:05Z");
    assert_eq!(ready(&p), ("False".into(), "Finished".into()));
    let names: Vec<String> = p
        .creates()
        .filter_map(|j| j.metadata().name.clone())
        .collect();
    assert_eq!(
        names,
        [crate::workload::manual_name(
            "cj",
            t("2016-05-19T10:00:00Z")
        )]
    );
}
