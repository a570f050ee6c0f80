//! Tests of [`plan`]: the Job, history, status, adoption, invalid specs, suspension. Upstream's
//! `TestControllerV2SyncCronJob` table is ported in `upstream_tests.rs`.

use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::*;
use crate::api::{ANNOTATION_SCHEDULED_AT, CronJobStatus, LABEL_CRONJOB};
use crate::controller::MAX_REQUEUE;
use crate::testing::fixtures::{self, JobFixture, workload};

const ON_THE_HOUR: &str = "0 * * * ?";

use fixtures::t;
fn just_before_the_hour() -> Timestamp {
    t("2016-05-19T09:59:00Z")
}
fn just_after_the_hour() -> Timestamp {
    t("2016-05-19T10:01:00Z")
}
fn top_of_the_hour() -> Timestamp {
    t("2016-05-19T10:00:00Z")
}
fn secs(n: i64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_secs(n)
}
fn d(secs: u64) -> Duration {
    Duration::from_secs(secs) + NEXT_SCHEDULE_DELTA
}

/// The fixture CronJob (`ns/cj`, created just before the hour) with `schedule`.
fn cronjob(schedule: &str) -> CronJob {
    fixtures::cronjob(schedule)
}

/// A Job named `name` with UID `uid`, controlled by the fixture CronJob.
fn owned_job(name: &str, uid: &str) -> Job {
    let mut job = fixtures::job(name);
    job.metadata.uid = Some(uid.into());
    job
}

/// `job` finished (`how` is `Complete` or `Failed`) at `end`, started at `start`.
fn finish(job: Job, how: &str, start: Option<Timestamp>, end: Timestamp) -> Job {
    let job = match start {
        Some(start) => job.started_at(&start.to_string()),
        None => job,
    };
    if how == "Complete" {
        job.complete_at(&end.to_string())
    } else {
        job.failed_at(&end.to_string())
    }
}

#[test]
fn created_job_carries_template_label_annotation_and_ttl() {
    let cj = cronjob(ON_THE_HOUR);
    let cfg = PlanConfig {
        default_job_ttl: Some(3600),
    };
    let p = plan(&cj, &[], just_after_the_hour(), &cfg);
    let job = p
        .creates()
        .next()
        .and_then(crate::workload::NewWorkload::as_job)
        .expect("create");
    assert_eq!(job.metadata.name.as_deref(), Some("cj-24394200"));
    let labels = job.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels["team"], "a");
    assert_eq!(labels[LABEL_CRONJOB], "cj");
    let ann = job.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(ann["x"], "y");
    assert_eq!(ann[ANNOTATION_SCHEDULED_AT], "2016-05-19T10:00:00Z");
    let spec = job.spec.as_ref().expect("spec");
    assert_eq!(spec.parallelism, Some(1));
    assert_eq!(spec.ttl_seconds_after_finished, Some(3600));
    // A template TTL wins over the default.
    let mut cj2 = cronjob(ON_THE_HOUR);
    if let Some(s) = cj2.spec.job_template.as_mut().and_then(|t| t.spec.as_mut()) {
        s.ttl_seconds_after_finished = Some(5);
    }
    let p = plan(&cj2, &[], just_after_the_hour(), &cfg);
    let job = p
        .creates()
        .next()
        .and_then(crate::workload::NewWorkload::as_job)
        .expect("create");
    assert_eq!(
        job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished),
        Some(5)
    );
}

#[test]
fn scheduled_at_is_in_the_cronjobs_zone() {
    let mut cj = cronjob(ON_THE_HOUR);
    cj.spec.time_zone = Some("America/New_York".into());
    let p = plan(&cj, &[], just_after_the_hour(), &PlanConfig::default());
    let job = p
        .creates()
        .next()
        .and_then(crate::workload::NewWorkload::as_job)
        .expect("create");
    let ann = job.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(ann[ANNOTATION_SCHEDULED_AT], "2016-05-19T06:00:00-04:00");
}

#[test]
fn history_trims_oldest_first_nil_start_last_ties_by_name() {
    let mut cj = cronjob(ON_THE_HOUR);
    cj.spec.successful_jobs_history_limit = Some(2);
    cj.spec.failed_jobs_history_limit = Some(0);
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(top_of_the_hour())),
        ..Default::default()
    });
    let s = |h: i64| Some(t("2016-05-19T00:00:00Z") + secs(h * 3600));
    let end = t("2016-05-19T09:30:00Z");
    let jobs: Vec<Arc<Workload>> = vec![
        finish(owned_job("c", "u-c"), "Complete", s(3), end),
        finish(owned_job("b", "u-b"), "Complete", s(1), end),
        finish(owned_job("a", "u-a"), "Complete", s(1), end),
        finish(owned_job("nostart", "u-n"), "Complete", None, end),
        finish(owned_job("f1", "u-f1"), "Failed", s(2), end),
        owned_job("running", "u-r"),
    ]
    .into_iter()
    .map(workload)
    .collect();
    let p = plan(&cj, &jobs, just_before_the_hour(), &PlanConfig::default());
    let deleted: Vec<_> = p.deletes().collect();
    assert_eq!(
        deleted,
        vec![
            ("a", DeleteReason::History),
            ("b", DeleteReason::History),
            ("f1", DeleteReason::History)
        ]
    );
    // Never a running Job.
    assert!(!deleted.iter().any(|(n, _)| *n == "running"));
}

#[test]
fn status_tracks_last_success_failure_and_never_lowers() {
    let mut cj = cronjob(ON_THE_HOUR);
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(top_of_the_hour())),
        last_failure_time: Some(Time(t("2016-05-19T09:50:00Z"))),
        ..Default::default()
    });
    let jobs: Vec<Arc<Workload>> = vec![
        finish(
            owned_job("ok1", "1"),
            "Complete",
            None,
            t("2016-05-19T08:00:00Z"),
        ),
        finish(
            owned_job("ok2", "2"),
            "Complete",
            None,
            t("2016-05-19T09:00:00Z"),
        ),
        finish(
            owned_job("bad", "3"),
            "Failed",
            None,
            t("2016-05-19T07:00:00Z"),
        ),
    ]
    .into_iter()
    .map(workload)
    .collect();
    let p = plan(
        &cj,
        &jobs,
        t("2016-05-19T10:30:00Z"),
        &PlanConfig::default(),
    );
    assert_eq!(
        p.status.last_successful_time,
        Some(Time(t("2016-05-19T09:00:00Z")))
    );
    assert_eq!(
        p.status.last_failure_time,
        Some(Time(t("2016-05-19T09:50:00Z")))
    );
    assert_eq!(
        p.status.next_schedule_time,
        Some(Time(t("2016-05-19T11:00:00Z")))
    );
    assert_eq!(p.status.observed_generation, Some(1));
    let ready: &Condition = &p.status.conditions[0];
    assert_eq!(
        (
            ready.type_.as_str(),
            ready.status.as_str(),
            ready.reason.as_str()
        ),
        ("Ready", "True", "Scheduled")
    );
}

#[test]
fn deleting_history_never_reruns_a_slot() {
    // The 10:00 Job ran and its history was deleted; lastScheduleTime still says 10:00.
    let mut cj = cronjob(ON_THE_HOUR);
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(top_of_the_hour())),
        ..Default::default()
    });
    let p = plan(&cj, &[], just_after_the_hour(), &PlanConfig::default());
    assert_eq!(p.creates().count(), 0);
    assert_eq!(p.status.last_schedule_time, Some(Time(top_of_the_hour())));
}

#[test]
fn job_for_due_slot_already_in_cache_is_adopted_not_recreated() {
    let cj = cronjob(ON_THE_HOUR);
    let slot = top_of_the_hour();
    let mut job = crate::workload::for_slot(&cj, slot, &TimeZone::UTC, None)
        .and_then(crate::workload::NewWorkload::into_job)
        .expect("job");
    job.metadata.uid = Some("u1".into());
    let p = plan(
        &cj,
        &[workload(job)],
        just_after_the_hour(),
        &PlanConfig::default(),
    );
    assert_eq!(p.creates().count(), 0);
    assert_eq!(p.status.active.len(), 1);
    assert_eq!(p.status.active_count, 1);
    assert_eq!(p.status.last_schedule_time, Some(Time(slot)));
    assert_eq!(p.events().count(), 0, "our own Job is not unexpected");
}

#[test]
fn manual_runs_join_active_and_strangers_warn() {
    let mut cj = cronjob(ON_THE_HOUR);
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(just_before_the_hour())),
        ..Default::default()
    });
    let manual = owned_job("cj-manual-1", "m").manual();
    let stranger = owned_job("other", "s");
    let p = plan(
        &cj,
        &[workload(manual), workload(stranger)],
        just_before_the_hour(),
        &PlanConfig::default(),
    );
    assert_eq!(p.status.active_count, 2);
    let events: Vec<_> = p.events().collect();
    assert_eq!(events, vec![(EventType::Warning, events::UNEXPECTED_JOB)]);
}

#[test]
fn missing_and_completed_active_jobs_leave_active() {
    let mut cj = cronjob(ON_THE_HOUR);
    let done = finish(
        owned_job("done", "d"),
        "Complete",
        None,
        just_before_the_hour(),
    );
    let gone = owned_job("gone", "g");
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(just_before_the_hour())),
        active: vec![
            workload(done.clone()).reference(),
            workload(gone.clone()).reference(),
        ],
        active_count: 2,
        ..Default::default()
    });
    let p = plan(
        &cj,
        &[workload(done)],
        just_before_the_hour(),
        &PlanConfig::default(),
    );
    assert!(p.status.active.is_empty());
    assert_eq!(p.status.active_count, 0);
    let mut events: Vec<_> = p.events().map(|(_, r)| r).collect();
    events.sort_unstable();
    assert_eq!(events, vec![events::MISSING_JOB, events::SAW_COMPLETED_JOB]);
}

#[test]
fn jobs_of_other_owners_are_ignored() {
    let cj = cronjob(ON_THE_HOUR);
    let mut other = owned_job("x", "x");
    if let Some(refs) = other.metadata.owner_references.as_mut() {
        refs[0].uid = "someone-else".into();
    }
    let p = plan(
        &cj,
        &[workload(other)],
        just_before_the_hour(),
        &PlanConfig::default(),
    );
    assert!(p.status.active.is_empty());
}

#[test]
fn jobs_in_another_namespace_are_not_ours() {
    // A controller reference to this CronJob's UID from another namespace: not its Job.
    let cj = cronjob(ON_THE_HOUR);
    let elsewhere = owned_job("elsewhere", "e").in_namespace("other");
    let p = plan(
        &cj,
        &[workload(elsewhere)],
        just_before_the_hour(),
        &PlanConfig::default(),
    );
    assert!(p.status.active.is_empty());
    assert_eq!(p.events().count(), 0, "no UnexpectedJob either");
}

#[test]
fn invalid_spec_conditions_and_warning_once() {
    let mut cj = cronjob("obvious error schedule");
    let p = plan(&cj, &[], just_before_the_hour(), &PlanConfig::default());
    assert_eq!(p.requeue_after, None);
    assert_eq!(p.status.conditions[0].reason, "InvalidSchedule");
    assert_eq!(p.status.conditions[0].status, "False");
    assert_eq!(p.events().count(), 1);
    // Same problem on the next reconcile: no new warning, no transition.
    cj.status = Some(p.status.clone());
    let p2 = plan(&cj, &[], just_after_the_hour(), &PlanConfig::default());
    assert_eq!(p2.events().count(), 0);
    assert_eq!(p2.status, p.status);
    // Unknown zone.
    let mut cj = cronjob(ON_THE_HOUR);
    cj.spec.time_zone = Some("Europe/Pariss".into());
    let p = plan(&cj, &[], just_before_the_hour(), &PlanConfig::default());
    assert_eq!(p.status.conditions[0].reason, "UnknownTimeZone");
    assert_eq!(
        p.events().collect::<Vec<_>>(),
        vec![(EventType::Warning, events::UNKNOWN_TIME_ZONE)]
    );
}

#[test]
fn suspend_stops_creation_but_not_history_and_resume_runs_latest_slot() {
    let mut cj = cronjob(ON_THE_HOUR);
    cj.spec.suspend = Some(true);
    cj.spec.successful_jobs_history_limit = Some(0);
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T06:00:00Z"))),
        ..Default::default()
    });
    let old = finish(
        owned_job("old", "o"),
        "Complete",
        None,
        t("2016-05-19T06:30:00Z"),
    );
    let p = plan(
        &cj,
        &[workload(old)],
        just_after_the_hour(),
        &PlanConfig::default(),
    );
    assert_eq!(p.creates().count(), 0);
    assert_eq!(p.deletes().count(), 1);
    assert_eq!(p.status.conditions[0].reason, "Suspended");
    assert_eq!(p.status.next_schedule_time, None);
    assert_eq!(p.requeue_after, None);
    // Resume: the most recent missed slot (10:00) runs, once.
    cj.spec.suspend = Some(false);
    let p = plan(&cj, &[], just_after_the_hour(), &PlanConfig::default());
    assert_eq!(p.scheduled(), Some(top_of_the_hour()));
    assert_eq!(p.creates().count(), 1);
}

#[test]
fn requeue_is_clamped() {
    let now = t("2024-01-01T00:00:00Z");
    assert_eq!(requeue_for(now + secs(3 * 365 * 86400), now), MAX_REQUEUE);
    assert_eq!(requeue_for(now, now + secs(5)), NEXT_SCHEDULE_DELTA);
}

#[test]
fn schedule_edit_replans_with_new_spec() {
    let mut cj = cronjob("30 * * * *");
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(just_before_the_hour())),
        ..Default::default()
    });
    let now = t("2016-05-19T09:59:59Z");
    assert_eq!(
        plan(&cj, &[], now, &PlanConfig::default()).requeue_after,
        Some(d(30 * 60 + 1))
    );
    cj.spec.schedule = Some("*/1 * * * *".into());
    assert_eq!(
        plan(&cj, &[], now, &PlanConfig::default()).requeue_after,
        Some(d(1))
    );
}

/// The plan's Job name and scheduled-at annotation, if it creates one.
fn created(p: &Plan) -> Vec<(String, String)> {
    p.creates()
        .map(|j| {
            let name = j.name().to_string();
            let at = j
                .metadata()
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_SCHEDULED_AT).cloned())
                .unwrap_or_default();
            (name, at)
        })
        .collect()
}

#[test]
fn several_schedules_run_each_instant_once_over_merged_slots() {
    use fixtures::CronJobFixture;
    // (what, schedules, zone, deadline, lastScheduleTime, now, Jobs created, next, events)
    type Case<'a> = (
        &'a str,
        &'a [&'a str],
        Option<&'a str>,
        Option<i64>,
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        Option<&'a str>,
        &'a [&'a str],
    );
    let cases: &[Case] = &[
        (
            "minute 6 matches both: one Job",
            &["*/2 * * * *", "*/3 * * * *"],
            None,
            None,
            "2016-05-19T10:04:00Z",
            "2016-05-19T10:06:10Z",
            &[("cj-24394206", "2016-05-19T10:06:00Z")],
            Some("2016-05-19T10:08:00Z"),
            &[],
        ),
        (
            "minute 9 matches the second only",
            &["*/2 * * * *", "*/3 * * * *"],
            None,
            None,
            "2016-05-19T10:08:00Z",
            "2016-05-19T10:09:01Z",
            &[("cj-24394209", "2016-05-19T10:09:00Z")],
            Some("2016-05-19T10:10:00Z"),
            &[],
        ),
        (
            "after 12 minutes down the latest merged slot runs, within the deadline",
            &["*/2 * * * *", "*/3 * * * *"],
            None,
            Some(211),
            "2016-05-19T10:00:00Z",
            "2016-05-19T10:12:30Z",
            &[("cj-24394212", "2016-05-19T10:12:00Z")],
            Some("2016-05-19T10:14:00Z"),
            &[],
        ),
        (
            "a slot past the deadline waits for the next, with MissSchedule",
            &["0 9 * * *", "0 17 * * *"],
            None,
            Some(3600),
            "2016-05-19T09:00:00Z",
            "2016-05-20T08:00:00Z",
            &[],
            Some("2016-05-20T09:00:00Z"),
            &[events::MISS_SCHEDULE],
        ),
        (
            "spring forward: 02:30 and */30 meet at the jump, one Job at 03:00",
            &["30 2 * * *", "*/30 * * * *"],
            Some("America/New_York"),
            None,
            "2024-03-10T06:30:00Z",
            "2024-03-10T07:00:05Z",
            &[("cj-28500900", "2024-03-10T03:00:00-04:00")],
            Some("2024-03-10T07:30:00Z"),
            &[],
        ),
        (
            "fall back: the hourly runs in the second 01:00, the fixed 01:30 does not again",
            &["30 1 * * *", "0 * * * *"],
            Some("America/New_York"),
            None,
            "2024-11-03T05:30:00Z",
            "2024-11-03T06:00:05Z",
            &[("cj-28843560", "2024-11-03T01:00:00-05:00")],
            Some("2024-11-03T07:00:00Z"),
            &[],
        ),
    ];
    for (what, exprs, tz, deadline, last, now, want, next, want_events) in cases {
        let mut cj = fixtures::cronjob("unused")
            .schedules(exprs)
            .created_at("2016-05-19T00:00:00Z")
            .last_scheduled(last);
        if let Some(tz) = tz {
            cj = cj.zone(tz);
        }
        if let Some(d) = deadline {
            cj = cj.deadline(*d);
        }
        let p = plan(&cj, &[], t(now), &PlanConfig::default());
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, a)| (n.to_string(), a.to_string()))
            .collect();
        assert_eq!(created(&p), want, "{what}: Jobs");
        assert_eq!(
            p.status.next_schedule_time.as_ref().map(|t| t.0),
            next.map(t),
            "{what}: next"
        );
        let reasons: Vec<&str> = p.events().map(|(_, r)| r).collect();
        assert_eq!(reasons, *want_events, "{what}: events");
        assert_eq!(
            p.status.schedule.as_deref(),
            Some(format!("{} (+1)", exprs[0]).as_str()),
            "{what}: the summary"
        );
    }
}

#[test]
fn the_job_of_a_merged_slot_is_created_once_whatever_matches_it() {
    use fixtures::CronJobFixture;
    let cj = fixtures::cronjob("unused")
        .schedules(&["*/2 * * * *", "*/3 * * * *"])
        .last_scheduled("2016-05-19T10:04:00Z");
    let slot = t("2016-05-19T10:06:00Z");
    let mut job = crate::workload::for_slot(&cj, slot, &TimeZone::UTC, None)
        .and_then(crate::workload::NewWorkload::into_job)
        .expect("job");
    job.metadata.uid = Some("u6".into());
    let p = plan(
        &cj,
        &[workload(job)],
        t("2016-05-19T10:06:30Z"),
        &PlanConfig::default(),
    );
    assert_eq!(p.creates().count(), 0, "already created");
    assert_eq!(p.status.last_schedule_time, Some(Time(slot)));
    let ready = &p.status.conditions[0];
    assert_eq!(ready.reason, "Scheduled");
    assert_eq!(
        ready.message,
        "schedules [\"*/2 * * * *\", \"*/3 * * * *\"] in time zone UTC"
    );
}

#[test]
fn an_invalid_schedule_entry_or_none_at_all_is_reported_with_its_field() {
    use fixtures::CronJobFixture;
    let bad = fixtures::cronjob("unused").schedules(&["0 * * * *", "61 * * * *"]);
    let mut neither = fixtures::cronjob("unused");
    neither.spec.schedule = None;
    let mut every = fixtures::cronjob("unused").schedules(&["0 * * * *", "@every 1h"]);
    every.spec.suspend = Some(false);
    let cases = [
        (
            bad,
            "invalid schedule: spec.schedules[1] \"61 * * * *\" : end of range (61) above maximum (59): 61",
        ),
        (
            neither,
            "invalid schedule: one of spec.schedule and spec.schedules is required",
        ),
        (
            every,
            "invalid schedule: spec.schedules[1] \"@every 1h\" : @every cannot be combined with other schedules",
        ),
    ];
    for (cj, want) in cases {
        let p = plan(&cj, &[], just_after_the_hour(), &PlanConfig::default());
        let ready = &p.status.conditions[0];
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            ("InvalidSchedule", want)
        );
        assert_eq!(p.creates().count(), 0);
        assert_eq!(
            p.events().collect::<Vec<_>>(),
            vec![(EventType::Warning, events::INVALID_SCHEDULE)]
        );
    }
}

/// A `Ready` condition with this reason.
fn ready(reason: &str) -> Condition {
    Condition {
        type_: "Ready".into(),
        status: if reason == "Scheduled" {
            "True"
        } else {
            "False"
        }
        .into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: Time(t("2016-05-19T09:00:00Z")),
    }
}

/// A Job listed in `status.active`: its name, kind (`scheduled`, `manual`, or `missing`: listed
/// but gone) and how and when it ended.
type Listed = (
    &'static str,
    &'static str,
    Option<(&'static str, &'static str)>,
);

/// One row of the failure policy's table.
struct FailureRow {
    what: &'static str,
    /// `suspendAfterConsecutiveFailures`.
    limit: Option<i32>,
    /// `spec.suspend`.
    suspended: bool,
    /// The `Ready` reason the status had.
    was: &'static str,
    /// `status.consecutiveFailures` before.
    count: i32,
    /// The Jobs listed in `status.active`, as (name, kind, how and when it ended).
    listed: &'static [Listed],
    /// `status.consecutiveFailures` after.
    want_count: i32,
    /// The suspension asked for, as (count, last failed Job).
    want_suspend: Option<(i32, Option<&'static str>)>,
    /// The `Ready` reason after.
    want_ready: &'static str,
    /// Whether the due 10:00 slot runs.
    want_run: bool,
}

fn failure_rows() -> Vec<FailureRow> {
    let row = |what| FailureRow {
        what,
        limit: Some(3),
        suspended: false,
        was: "Scheduled",
        count: 0,
        listed: &[],
        want_count: 0,
        want_suspend: None,
        want_ready: "Scheduled",
        want_run: true,
    };
    const F1: (&str, &str) = ("Failed", "2016-05-19T09:30:00Z");
    const F2: (&str, &str) = ("Failed", "2016-05-19T09:40:00Z");
    const OK: (&str, &str) = ("Complete", "2016-05-19T09:35:00Z");
    vec![
        FailureRow {
            listed: &[("a", "scheduled", Some(F1))],
            want_count: 1,
            ..row("a scheduled failure counts")
        },
        FailureRow {
            count: 2,
            listed: &[("a", "scheduled", Some(OK))],
            want_count: 0,
            ..row("a success resets")
        },
        FailureRow {
            count: 1,
            listed: &[("b", "scheduled", Some(F2)), ("a", "scheduled", Some(OK))],
            want_count: 1,
            ..row("a success, then a failure: in the order they finished")
        },
        FailureRow {
            count: 1,
            listed: &[("a", "scheduled", Some(F1)), ("b", "scheduled", Some(OK))],
            want_count: 0,
            ..row("a failure, then a success")
        },
        FailureRow {
            count: 1,
            listed: &[("m", "manual", Some(F1))],
            want_count: 1,
            ..row("a failed manual run does not count")
        },
        FailureRow {
            count: 1,
            listed: &[("m", "manual", Some(OK))],
            want_count: 1,
            ..row("a successful manual run does not reset")
        },
        FailureRow {
            count: 1,
            listed: &[("gone", "missing", None)],
            want_count: 1,
            ..row("a Job deleted while it ran is no failure")
        },
        FailureRow {
            count: 1,
            listed: &[("r", "scheduled", None)],
            want_count: 1,
            want_run: true,
            ..row("a running Job is no failure")
        },
        FailureRow {
            count: 2,
            listed: &[("a", "scheduled", Some(F1))],
            want_count: 3,
            want_suspend: Some((3, Some("a"))),
            want_ready: "SuspendedAfterFailures",
            want_run: false,
            ..row("the third failure in a row suspends: the due slot does not run")
        },
        FailureRow {
            limit: None,
            count: 2,
            listed: &[("a", "scheduled", Some(F1))],
            want_count: 3,
            ..row("without a policy the count is only kept")
        },
        FailureRow {
            count: 3,
            suspended: true,
            was: "SuspendedAfterFailures",
            want_count: 3,
            want_ready: "SuspendedAfterFailures",
            want_run: false,
            ..row("suspended at the limit: no second suspension")
        },
        FailureRow {
            count: 3,
            was: "SuspendedAfterFailures",
            want_count: 0,
            ..row("a resume resets the count and runs the latest slot")
        },
        FailureRow {
            count: 2,
            was: "Suspended",
            want_count: 0,
            ..row("any resume resets")
        },
        FailureRow {
            count: 2,
            suspended: true,
            was: "Suspended",
            want_count: 2,
            want_ready: "Suspended",
            want_run: false,
            ..row("suspended by hand below the limit")
        },
        FailureRow {
            limit: Some(2),
            count: 3,
            want_count: 3,
            want_suspend: Some((3, None)),
            want_ready: "SuspendedAfterFailures",
            want_run: false,
            ..row("a limit lowered below the count suspends")
        },
    ]
}

/// The fixture CronJob on the hour, its 10:00 slot due, with the row's policy and history.
fn failure_case(r: &FailureRow) -> (CronJob, Vec<Arc<Workload>>) {
    use fixtures::CronJobFixture;
    let mut cj = cronjob(ON_THE_HOUR).last_scheduled("2016-05-19T09:00:00Z");
    if let Some(limit) = r.limit {
        cj = cj.suspend_after(limit);
    }
    if r.suspended {
        cj = cj.suspended();
    }
    let mut jobs = Vec::new();
    let mut listed = Vec::new();
    for (name, kind, end) in r.listed {
        let mut job = fixtures::job(name);
        job = match *kind {
            "manual" => job.manual(),
            _ => job.scheduled(),
        };
        job = match end {
            Some(("Failed", at)) => job.failed_at(at),
            Some((_, at)) => job.complete_at(at),
            None => job,
        };
        listed.push(workload(job.clone()).reference());
        if *kind != "missing" {
            jobs.push(workload(job));
        }
    }
    let status = cj.status.get_or_insert_default();
    status.set_active(listed);
    status.consecutive_failures = r.count;
    status.conditions = vec![ready(r.was)];
    (cj, jobs)
}

#[test]
fn failure_policy_table() {
    for r in failure_rows() {
        let (cj, jobs) = failure_case(&r);
        let p = plan(&cj, &jobs, just_after_the_hour(), &PlanConfig::default());
        let what = r.what;
        assert_eq!(p.status.consecutive_failures, r.want_count, "{what}: count");
        let suspend = p
            .suspend
            .as_ref()
            .map(|s| (s.count, s.last_failed.as_deref()));
        assert_eq!(suspend, r.want_suspend, "{what}: suspension");
        let ready = &p.status.conditions[0];
        assert_eq!(ready.reason, r.want_ready, "{what}: Ready");
        assert_eq!(p.scheduled().is_some(), r.want_run, "{what}: run");
        if r.want_ready == "SuspendedAfterFailures" {
            assert_eq!(p.status.next_schedule_time, None, "{what}: no next run");
            assert_eq!(p.requeue_after, None, "{what}: waits for a change");
        }
        // The status the plan writes (after the spec patch, when it suspends) counts each Job
        // once: planning again from it changes nothing more.
        let mut again = cj.clone();
        again.status = Some(p.status.clone());
        if p.suspend.is_some() {
            again.spec.suspend = Some(true);
        }
        let p2 = plan(&again, &jobs, just_after_the_hour(), &PlanConfig::default());
        assert_eq!(
            p2.status.consecutive_failures, r.want_count,
            "{what}: again"
        );
    }
}

#[test]
fn the_suspension_names_the_count_and_the_last_failed_job_and_keeps_that_message() {
    use fixtures::CronJobFixture;
    let r = FailureRow {
        count: 2,
        listed: &[(
            "cj-24394140",
            "scheduled",
            Some(("Failed", "2016-05-19T09:01:30Z")),
        )],
        ..failure_rows().remove(0)
    };
    let (cj, jobs) = failure_case(&r);
    let p = plan(&cj, &jobs, just_after_the_hour(), &PlanConfig::default());
    let want = "3 scheduled Jobs failed in a row, the last cj-24394140: suspended by failurePolicy.suspendAfterConsecutiveFailures (3); resume to schedule again";
    assert_eq!(
        p.suspend.as_ref().map(|s| s.message()).as_deref(),
        Some(want)
    );
    assert_eq!(p.status.conditions[0].message, want);
    // Once suspended (the Job trimmed away by the history limit), the condition keeps naming it.
    let suspended = CronJob {
        status: Some(p.status.clone()),
        ..cj.clone().suspended()
    };
    let p2 = plan(
        &suspended,
        &[],
        just_after_the_hour(),
        &PlanConfig::default(),
    );
    assert_eq!(p2.status.conditions[0].message, want);
    assert_eq!(p2.suspend, None);
    assert_eq!(p2.events().count(), 0, "no second warning");
}

#[test]
fn a_failed_job_of_a_slot_created_before_a_lost_status_write_counts_once() {
    use fixtures::CronJobFixture;
    let cj = cronjob(ON_THE_HOUR)
        .last_scheduled("2016-05-19T09:00:00Z")
        .suspend_after(1);
    let slot = top_of_the_hour();
    let mut job = crate::workload::for_slot(&cj, slot, &TimeZone::UTC, None)
        .and_then(crate::workload::NewWorkload::into_job)
        .expect("job");
    job.metadata.uid = Some("u10".into());
    let job = job.failed_at("2016-05-19T10:00:40Z");
    let jobs = vec![workload(job)];
    let p = plan(&cj, &jobs, just_after_the_hour(), &PlanConfig::default());
    assert_eq!(p.creates().count(), 0);
    assert_eq!(p.status.last_schedule_time, Some(Time(slot)));
    assert_eq!(p.status.consecutive_failures, 1);
    // The count reaches the limit in this reconcile: it suspends now.
    assert_eq!(p.suspend.as_ref().map(|s| s.count), Some(1));
    // Planned again once suspended, the Job is not counted again.
    let mut next = cj.clone().suspended();
    next.status = Some(p.status.clone());
    let p2 = plan(&next, &jobs, just_after_the_hour(), &PlanConfig::default());
    assert_eq!(p2.status.consecutive_failures, 1);
    assert_eq!(p2.suspend, None);
}

/// The Enqueue policy through [`plan_recorded`]: what the queue step decides reaches the status,
/// the run and the history.
mod enqueue {
    use super::*;
    use crate::api::ConcurrencyPolicy;
    use crate::testing::fixtures::CronJobFixture;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

    const EVERY_MINUTE: &str = "* * * * *";

    /// A Job of the fixture CronJob for `slot`, running (or as `edit` leaves it).
    fn slot_job(cj: &CronJob, slot: &str) -> Job {
        let mut job = crate::workload::for_slot(cj, t(slot), &TimeZone::UTC, None)
            .and_then(crate::workload::NewWorkload::into_job)
            .expect("job");
        job.metadata.uid = Some(format!("{slot}-uid"));
        job.metadata.namespace = cj.metadata.namespace.clone();
        job
    }

    fn enqueue_cj(last: &str, queued: &[&str], running: &[&Job]) -> CronJob {
        let mut cj = cronjob(EVERY_MINUTE)
            .policy(ConcurrencyPolicy::Enqueue)
            .last_scheduled(last)
            .running(running);
        if let Some(s) = cj.status.as_mut() {
            s.set_queued(queued.iter().map(|q| Time(t(q))).collect());
        }
        cj
    }

    fn queued(p: &Plan) -> Vec<Timestamp> {
        p.status.queued.iter().map(|q| q.0).collect()
    }

    #[test]
    fn a_slot_due_while_a_job_runs_is_queued_and_recorded() {
        let base = cronjob(EVERY_MINUTE);
        let running = slot_job(&base, "2016-05-19T10:00:00Z");
        let cj = enqueue_cj("2016-05-19T10:00:00Z", &[], &[&running]);
        let jobs = [workload(running)];
        let p = plan(
            &cj,
            &jobs,
            t("2016-05-19T10:01:05Z"),
            &PlanConfig::default(),
        );
        assert_eq!(p.creates().count(), 0);
        assert_eq!(queued(&p), vec![t("2016-05-19T10:01:00Z")]);
        assert_eq!(p.status.queued_count, 1);
        assert_eq!(
            p.status.last_schedule_time,
            Some(Time(t("2016-05-19T10:01:00Z")))
        );
        // Forbid skips the same slot.
        let forbid = cj.clone().policy(ConcurrencyPolicy::Forbid);
        let p = plan(
            &forbid,
            &jobs,
            t("2016-05-19T10:01:05Z"),
            &PlanConfig::default(),
        );
        assert!(queued(&p).is_empty());
        assert!(p.events().any(|(_, r)| r == events::JOB_ALREADY_ACTIVE));
    }

    #[test]
    fn when_the_job_finishes_the_oldest_queued_slot_starts_as_its_own_slot() {
        let base = cronjob(EVERY_MINUTE);
        let done = finish(
            slot_job(&base, "2016-05-19T10:00:00Z"),
            "Complete",
            Some(t("2016-05-19T10:00:01Z")),
            t("2016-05-19T10:02:30Z"),
        );
        let cj = enqueue_cj(
            "2016-05-19T10:02:00Z",
            &["2016-05-19T10:01:00Z", "2016-05-19T10:02:00Z"],
            &[&done],
        );
        let p = plan(
            &cj,
            &[workload(done)],
            t("2016-05-19T10:02:31Z"),
            &PlanConfig::default(),
        );
        let run = p.run.as_ref().expect("a run");
        assert!(run.queued);
        assert_eq!(run.slot, t("2016-05-19T10:01:00Z"));
        assert_eq!(run.job.name(), "cj-24394201");
        let ann = run
            .job
            .metadata()
            .annotations
            .as_ref()
            .expect("annotations");
        assert_eq!(ann[ANNOTATION_SCHEDULED_AT], "2016-05-19T10:01:00Z");
        // It leaves the queue only once created (apply), and lastScheduleTime stays put.
        assert_eq!(queued(&p).len(), 2);
        assert_eq!(
            p.status.last_schedule_time,
            Some(Time(t("2016-05-19T10:02:00Z")))
        );
    }

    #[test]
    fn a_started_queued_slot_never_starts_again() {
        let base = cronjob(EVERY_MINUTE);
        // 10:01 started from the queue and finished; a stale status still queues it.
        let started = finish(
            slot_job(&base, "2016-05-19T10:01:00Z"),
            "Complete",
            None,
            t("2016-05-19T10:02:40Z"),
        );
        let cj = enqueue_cj(
            "2016-05-19T10:02:00Z",
            &["2016-05-19T10:01:00Z", "2016-05-19T10:02:00Z"],
            &[],
        );
        let now = t("2016-05-19T10:02:45Z");
        let p = plan(&cj, &[workload(started)], now, &PlanConfig::default());
        assert_eq!(p.scheduled(), Some(t("2016-05-19T10:02:00Z")));
        // Its Job gone too, this process remembers it started it.
        let records = Records {
            dequeued: Some(t("2016-05-19T10:01:00Z")),
            ..Records::of(&cj)
        };
        let p = plan_recorded(&cj, &[], records, now, &PlanConfig::default());
        assert_eq!(p.scheduled(), Some(t("2016-05-19T10:02:00Z")));
    }

    #[test]
    fn the_job_of_a_queued_slot_is_kept_until_a_stored_status_no_longer_queues_it() {
        let base = cronjob(EVERY_MINUTE);
        let done = finish(
            slot_job(&base, "2016-05-19T10:01:00Z"),
            "Complete",
            Some(t("2016-05-19T10:02:31Z")),
            t("2016-05-19T10:02:50Z"),
        );
        let mut cj = enqueue_cj("2016-05-19T10:02:00Z", &["2016-05-19T10:01:00Z"], &[]);
        cj.spec.successful_jobs_history_limit = Some(0);
        let jobs = [workload(done)];
        let now = t("2016-05-19T10:02:55Z");
        let p = plan(&cj, &jobs, now, &PlanConfig::default());
        assert_eq!(
            p.deletes().count(),
            0,
            "held: the stored status queues its slot"
        );
        assert_eq!(p.requeue_after, Some(HELD_RECHECK));
        let stored = enqueue_cj("2016-05-19T10:02:00Z", &[], &[]);
        let records = Records::of(&stored);
        let p = plan_recorded(&cj, &jobs, records, now, &PlanConfig::default());
        assert_eq!(p.deletes().count(), 1);
        assert_eq!(
            recorded_through(stored.status.as_ref().expect("status")),
            Some(t("2016-05-19T10:02:00Z"))
        );
        assert_eq!(
            recorded_through(cj.status.as_ref().expect("status")),
            Some(t("2016-05-19T10:00:59.999999999Z"))
        );
    }

    /// A slot queued at the first instant there is panicked the plan, which stepped a
    /// nanosecond back from it.
    #[test]
    fn a_slot_queued_at_the_first_instant_is_recorded_as_not_run() {
        let mut cj = enqueue_cj("2016-05-19T10:02:00Z", &[], &[]);
        if let Some(status) = cj.status.as_mut() {
            status.queued = vec![Time(Timestamp::MIN)];
        }
        let status = cj.status.as_ref().expect("status");
        assert_eq!(recorded_through(status), Some(Timestamp::MIN));
        let _ = plan(&cj, &[], t("2016-05-19T10:02:30Z"), &PlanConfig::default());
    }

    #[test]
    fn suspend_keeps_the_queue_and_resume_starts_it() {
        let cj = enqueue_cj("2016-05-19T10:02:00Z", &["2016-05-19T10:01:00Z"], &[]);
        let now = t("2016-05-19T10:02:30Z");
        let p = plan(&cj.clone().suspended(), &[], now, &PlanConfig::default());
        assert!(p.run.is_none());
        assert_eq!(queued(&p), vec![t("2016-05-19T10:01:00Z")]);
        let p = plan(&cj, &[], now, &PlanConfig::default());
        assert_eq!(p.scheduled(), Some(t("2016-05-19T10:01:00Z")));
    }

    #[test]
    fn another_policy_clears_the_queue_with_an_event_and_a_manual_run_is_not_queued() {
        let cj = enqueue_cj("2016-05-19T10:02:00Z", &["2016-05-19T10:01:00Z"], &[])
            .policy(ConcurrencyPolicy::Forbid);
        let p = plan(&cj, &[], t("2016-05-19T10:02:30Z"), &PlanConfig::default());
        assert!(queued(&p).is_empty());
        assert_eq!(p.status.queued_count, 0);
        assert!(p.events().any(|(_, r)| r == events::QUEUE_CLEARED));
        assert_eq!(p.dropped, vec![queue::Dropped::Cleared]);
        assert!(p.run.is_none());
    }

    #[test]
    fn a_suspended_job_counts_as_active() {
        let base = cronjob(EVERY_MINUTE);
        // As Kueue leaves a Job it has not admitted: suspend true, condition Suspended.
        let mut waiting = slot_job(&base, "2016-05-19T10:00:00Z");
        if let Some(spec) = waiting.spec.as_mut() {
            spec.suspend = Some(true);
        }
        waiting.status = Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: "Suspended".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let jobs = [workload(waiting.clone())];
        let now = t("2016-05-19T10:01:05Z");
        for (policy, want_run, want_queued) in [
            (ConcurrencyPolicy::Forbid, false, 0),
            (ConcurrencyPolicy::Enqueue, false, 1),
            (ConcurrencyPolicy::Replace, true, 0),
        ] {
            let cj = enqueue_cj("2016-05-19T10:00:00Z", &[], &[&waiting]).policy(policy);
            let p = plan(&cj, &jobs, now, &PlanConfig::default());
            assert_eq!(p.status.active_count, 1, "{policy:?}");
            assert_eq!(p.run.is_some(), want_run, "{policy:?}");
            assert_eq!(queued(&p).len(), want_queued, "{policy:?}");
            if let Some(run) = &p.run {
                assert_eq!(run.replace.len(), 1, "Replace deletes the suspended Job");
            }
        }
    }
}
