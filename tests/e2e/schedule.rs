//! Scheduled runs on a real API server, slot by slot: each Job on time, named after its slot,
//! owned and annotated; the status the README lists (active, activeCount, lastScheduleTime,
//! nextScheduleTime, observedGeneration, Ready; lastSuccessfulTime and lastFailureTime from
//! Jobs the Job controller finished); the history limits; the Events.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::api::CronJob;
use kube::ResourceExt;
use serde_json::json;

use crate::cronjob::create;
use crate::harness::{Ctx, Env};
use crate::observe::{
    active_names, at_minute, cronjob, events, finished_at, finished_job, job_name, job_on_time,
    minute_of, not_at_the_end_of_a_minute, slots_of, status, wait_event, wait_status,
};

crate::cases!(
    schedule:
    jobs_run_on_time_with_status_history_and_events,
);

const STATUS: Duration = Duration::from_secs(20);

/// Two CronJobs on `* * * * *` with history limits 1 and 1, over three slots: `ontime`'s Pods
/// succeed, fail, succeed; `failing`'s fail twice. Each Job is checked on time; `ontime`'s
/// status is checked while each Job runs and after it ends; after the third slot `ontime`
/// keeps its newest success and its failure, `failing` its newest failure.
pub async fn jobs_run_on_time_with_status_history_and_events(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    not_at_the_end_of_a_minute().await;
    let limits = json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1});
    let ontime = create(&env, cronjob("ontime", "* * * * *", limits.clone())).await;
    let failing = create(&env, cronjob("failing", "* * * * *", limits)).await;
    let created = ontime.creation_timestamp().expect("creationTimestamp").0;
    let first = minute_of(created) + 1;

    // Slot 1: a success.
    let job = job_on_time(&env, &ontime, first).await;
    job_on_time(&env, &failing, first).await;
    running(&env, &ontime, &job, first).await;
    env.finish_pods(&job.name_any(), "Succeeded").await;
    env.finish_pods(&job_name("failing", first), "Failed").await;
    let done = finished_job(&env, &job.name_any()).await;
    let completed = done
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
        .expect("a Complete Job has a completionTime")
        .0;
    let after = wait_status(&env, "ontime", STATUS, "the success recorded", |s| {
        (s.last_successful_time.is_some() && s.active.is_empty()).then(|| s.clone())
    })
    .await;
    assert_eq!(
        after.last_successful_time.as_ref().map(|t| t.0),
        Some(completed),
        "lastSuccessfulTime is the Job's completionTime"
    );
    assert_eq!(after.active_count, 0);
    assert_eq!(after.last_failure_time, None);
    assert_eq!(
        after.last_schedule_time.as_ref().map(|t| t.0),
        Some(at_minute(first))
    );

    // Slot 2: a failure; `failing` fails again and its first failure goes.
    let job = job_on_time(&env, &ontime, first + 1).await;
    job_on_time(&env, &failing, first + 1).await;
    running(&env, &ontime, &job, first + 1).await;
    env.finish_pods(&job.name_any(), "Failed").await;
    env.finish_pods(&job_name("failing", first + 1), "Failed")
        .await;
    let failed = finished_at(&finished_job(&env, &job.name_any()).await, "Failed");
    let after = wait_status(&env, "ontime", STATUS, "the failure recorded", |s| {
        (s.last_failure_time.is_some() && s.active.is_empty()).then(|| s.clone())
    })
    .await;
    assert_eq!(after.last_failure_time.as_ref().map(|t| t.0), Some(failed));
    assert_eq!(
        after.last_successful_time.as_ref().map(|t| t.0),
        Some(completed)
    );
    history_becomes(&env, "failing", &[first + 1]).await;

    // Slot 3: a success; the first success goes, the failure stays.
    let job = job_on_time(&env, &ontime, first + 2).await;
    running(&env, &ontime, &job, first + 2).await;
    env.finish_pods(&job.name_any(), "Succeeded").await;
    finished_job(&env, &job.name_any()).await;
    history_becomes(&env, "ontime", &[first + 1, first + 2]).await;
    let after = status(&env, "ontime").await;
    assert!(
        after
            .last_successful_time
            .as_ref()
            .is_some_and(|t| t.0 > completed),
        "{after:?}"
    );

    every_job_has_its_events(&env, first).await;
    env.cleanup().await;
}

/// While the slot's Job runs: `status.active` lists it (and only it), `activeCount` counts it,
/// `lastScheduleTime` is the slot, `nextScheduleTime` the next minute, `observedGeneration` the
/// CronJob's generation, and `Ready` is True.
async fn running(env: &Env, cj: &CronJob, job: &Job, slot: i64) {
    let name = cj.name_any();
    let status = wait_status(env, &name, STATUS, "the running Job recorded", |s| {
        (s.last_schedule_time.as_ref().map(|t| t.0) == Some(at_minute(slot))).then(|| s.clone())
    })
    .await;
    assert_eq!(active_names(&status), vec![job.name_any()], "{status:?}");
    assert_eq!(status.active[0].uid, job.metadata.uid);
    assert_eq!(status.active[0].kind.as_deref(), Some("Job"));
    assert_eq!(status.active_count, 1);
    assert_eq!(
        status.next_schedule_time.as_ref().map(|t| t.0),
        Some(at_minute(slot + 1))
    );
    assert_eq!(status.observed_generation, cj.metadata.generation);
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Scheduled")
    );
}

/// Wait until the Jobs of `cronjob` are exactly those of `slots`.
async fn history_becomes(env: &Env, cronjob: &str, slots: &[i64]) {
    let what = format!("the Jobs of {cronjob} are those of slots {slots:?}");
    crate::harness::wait_for(STATUS, &what, || async {
        (slots_of(env, cronjob).await == slots).then_some(())
    })
    .await;
}

/// An Event per Job of `ontime` created (`Created job <name>`), finished (`SawCompletedJob`)
/// and trimmed (the first slot's, `SuccessfulDelete`), reported by kronjob; no warning.
async fn every_job_has_its_events(env: &Env, first: i64) {
    for slot in [first, first + 1, first + 2] {
        let name = job_name("ontime", slot);
        let created = wait_event(env, "ontime", "SuccessfulCreate", &name, STATUS).await;
        assert_eq!(created.note, format!("Created job {name}"));
        assert_eq!(
            (created.type_.as_str(), created.controller.as_str()),
            ("Normal", "kronjob")
        );
        let seen = wait_event(env, "ontime", "SawCompletedJob", &name, STATUS).await;
        assert_eq!(seen.type_, "Normal");
    }
    let deleted = job_name("ontime", first);
    wait_event(env, "ontime", "SuccessfulDelete", &deleted, STATUS).await;
    let all = events(env, "ontime").await;
    let warnings: Vec<_> = all.iter().filter(|e| e.type_ != "Normal").collect();
    assert!(warnings.is_empty(), "{warnings:?}");
}
