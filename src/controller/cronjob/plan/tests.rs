//! Tests of [`plan`]: the Job, history, status, adoption, invalid specs, suspension. Upstream's
//! `TestControllerV2SyncCronJob` table is ported in `upstream_tests.rs`.

use jiff::tz::TimeZone;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::*;
use crate::api::{ANNOTATION_SCHEDULED_AT, CronJobStatus, LABEL_CRONJOB};
use crate::controller::MAX_REQUEUE;
use crate::job::job_ref;
use crate::testing::fixtures::{self, JobFixture};

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
    let job = p.creates().next().expect("create");
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
    if let Some(s) = cj2.spec.job_template.spec.as_mut() {
        s.ttl_seconds_after_finished = Some(5);
    }
    let p = plan(&cj2, &[], just_after_the_hour(), &cfg);
    let job = p.creates().next().expect("create");
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
    let job = p.creates().next().expect("create");
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
    let jobs: Vec<Arc<Job>> = vec![
        finish(owned_job("c", "u-c"), "Complete", s(3), end),
        finish(owned_job("b", "u-b"), "Complete", s(1), end),
        finish(owned_job("a", "u-a"), "Complete", s(1), end),
        finish(owned_job("nostart", "u-n"), "Complete", None, end),
        finish(owned_job("f1", "u-f1"), "Failed", s(2), end),
        owned_job("running", "u-r"),
    ]
    .into_iter()
    .map(Arc::new)
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
    let jobs: Vec<Arc<Job>> = vec![
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
    .map(Arc::new)
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
    let mut job = crate::job::for_slot(&cj, slot, &TimeZone::UTC, None).expect("job");
    job.metadata.uid = Some("u1".into());
    let p = plan(
        &cj,
        &[Arc::new(job)],
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
        &[Arc::new(manual), Arc::new(stranger)],
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
        active: vec![job_ref(&done), job_ref(&gone)],
        active_count: 2,
        ..Default::default()
    });
    let p = plan(
        &cj,
        &[Arc::new(done)],
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
        &[Arc::new(other)],
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
        &[Arc::new(elsewhere)],
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
        &[Arc::new(old)],
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
    cj.spec.schedule = "*/1 * * * *".into();
    assert_eq!(
        plan(&cj, &[], now, &PlanConfig::default()).requeue_after,
        Some(d(1))
    );
}
