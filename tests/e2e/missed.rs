//! Missed runs, as the README's "Missed runs" says: a manager that starts after slots passed
//! runs only the most recent one, within `startingDeadlineSeconds`; more than 100 missed slots
//! give a `TooManyMissedTimes` warning and the latest still runs; a suspended CronJob runs its
//! most recent missed slot on resume, within the deadline. The slots are missed for real: the
//! CronJob's `status.lastScheduleTime` is set minutes (or hours) back through the status
//! subresource before any manager runs, as if the manager had been down since.

use std::time::Duration;

use jiff::Timestamp;
use kronjob::api::CronJob;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::cronjob::create;
use crate::harness::{Ctx, Env, at_second, this_minute};
use crate::observe::{
    at_minute, cronjob, events, job_of_slot, job_on_time, minutes_of_every_hour,
    not_at_the_end_of_a_minute, set_last_schedule_time, sleep_until, slots_of, status, wait_event,
    wait_status,
};

crate::cases!(
    missed:
    only_the_most_recent_missed_slot_runs,
    more_than_100_missed_slots_warn_and_the_latest_runs,
    a_slot_past_its_starting_deadline_waits_for_the_next,
    resume_runs_the_most_recent_missed_slot_within_the_deadline,
    last_schedule_ahead_of_the_clock_waits_for_the_slot_after_it,
);

const SOON: Duration = Duration::from_secs(30);

/// Slots 4, 3 and 2 minutes ago were missed (the last run was 6 minutes ago): the manager runs
/// the one 2 minutes ago, late and once, and neither earlier one; the next run is in an hour.
pub async fn only_the_most_recent_missed_slot_runs(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let m = this_minute();
    let schedule = minutes_of_every_hour(&[m - 4, m - 3, m - 2]);
    let cj = create(&env, cronjob("late", &schedule, json!({}))).await;
    set_last_schedule_time(&env, "late", at_minute(m - 6)).await;
    let _manager = env.manager(&[]);
    let job = job_of_slot(&env, "late", m - 2, SOON).await;
    assert_eq!(
        job.annotations().get("batch.kronjob.dev/scheduled-at"),
        Some(&at_minute(m - 2).to_string())
    );
    let after = wait_status(&env, "late", SOON, "the late run recorded", |s| {
        (s.last_schedule_time.as_ref().map(|t| t.0) == Some(at_minute(m - 2))).then(|| s.clone())
    })
    .await;
    assert_eq!(
        after.next_schedule_time.as_ref().map(|t| t.0),
        Some(at_minute(m - 4 + 60)),
        "the next run is the first of the next hour"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(slots_of(&env, "late").await, vec![m - 2], "no backfill");
    let seen = events(&env, &cj.name_any()).await;
    assert!(
        !seen.iter().any(|e| e.reason == "TooManyMissedTimes"),
        "{seen:?}"
    );
    env.cleanup().await;
}

/// `* * * * *` last run 150 minutes ago: a `TooManyMissedTimes` Warning, and the current
/// minute's slot runs (only it).
pub async fn more_than_100_missed_slots_warn_and_the_latest_runs(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    not_at_the_end_of_a_minute().await;
    let m = this_minute();
    create(&env, cronjob("overdue", "* * * * *", json!({}))).await;
    set_last_schedule_time(&env, "overdue", at_minute(m - 150)).await;
    let _manager = env.manager(&[]);
    job_of_slot(&env, "overdue", m, SOON).await;
    let warning = wait_event(&env, "overdue", "TooManyMissedTimes", "", SOON).await;
    assert_eq!(warning.type_, "Warning");
    assert_eq!(
        warning.note,
        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
    );
    wait_status(&env, "overdue", SOON, "the latest slot recorded", |s| {
        (s.last_schedule_time.as_ref().map(|t| t.0) == Some(at_minute(m))).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let slots = slots_of(&env, "overdue").await;
    assert_eq!(slots, vec![m], "only the latest missed slot runs");
    env.cleanup().await;
}

/// `* * * * *` with `startingDeadlineSeconds: 10`, last run 5 minutes ago, manager started 20 s
/// into a minute: that minute's slot is past its deadline and never runs; the next one runs on
/// time.
pub async fn a_slot_past_its_starting_deadline_waits_for_the_next(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let m = at_second(20).await;
    let manifest = cronjob(
        "deadline",
        "* * * * *",
        json!({"startingDeadlineSeconds": 10}),
    );
    let cj = create(&env, manifest).await;
    set_last_schedule_time(&env, "deadline", at_minute(m - 5)).await;
    let _manager = env.manager(&[]);
    let ready = wait_status(&env, "deadline", SOON, "Ready", |s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready" && c.status == "True")
            .and(s.next_schedule_time.clone())
    })
    .await;
    assert_eq!(ready.0, at_minute(m + 1), "the next slot");
    wait_event(
        &env,
        "deadline",
        "MissSchedule",
        &format!("Missed scheduled time to start a job: {}", at_minute(m)),
        SOON,
    )
    .await;
    assert!(slots_of(&env, "deadline").await.is_empty(), "slot {m} ran");
    job_on_time(&env, &cj, m + 1).await;
    assert_eq!(slots_of(&env, "deadline").await, vec![m + 1]);
    let after = status(&env, "deadline").await;
    assert_ne!(
        after.last_schedule_time.as_ref().map(|t| t.0),
        Some(at_minute(m)),
        "the skipped slot is not recorded as run"
    );
    env.cleanup().await;
}

/// Two suspended CronJobs whose last run was 6 minutes ago and whose slots 4, 3 and 2 minutes
/// ago passed while suspended: on resume, the one with `startingDeadlineSeconds: 600` runs the
/// slot 2 minutes ago (only it); the one with 60 runs nothing.
pub async fn resume_runs_the_most_recent_missed_slot_within_the_deadline(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let m = this_minute();
    let schedule = minutes_of_every_hour(&[m - 4, m - 3, m - 2]);
    for (name, deadline) in [("within", 600), ("beyond", 60)] {
        let spec = json!({"suspend": true, "startingDeadlineSeconds": deadline});
        create(&env, cronjob(name, &schedule, spec)).await;
        set_last_schedule_time(&env, name, at_minute(m - 6)).await;
    }
    let _manager = env.manager(&[]);
    for name in ["within", "beyond"] {
        let suspended = wait_status(&env, name, SOON, "Ready=False Suspended", |s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Ready" && c.status == "False" && c.reason == "Suspended")
                .map(|_| s.clone())
        })
        .await;
        assert_eq!(
            suspended.next_schedule_time, None,
            "no next run while suspended"
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        slots_of(&env, "within").await.is_empty(),
        "ran while suspended"
    );
    let resume = json!({"spec": {"suspend": false}});
    let api = env.api::<CronJob>();
    for name in ["within", "beyond"] {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&resume))
            .await
            .unwrap_or_else(|e| panic!("resume {name}: {e}"));
    }
    job_of_slot(&env, "within", m - 2, SOON).await;
    for name in ["within", "beyond"] {
        wait_status(&env, name, SOON, "Ready=True, the next slot", |s| {
            let ready = s
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (ready && s.next_schedule_time.as_ref().map(|t| t.0) == Some(at_minute(m - 4 + 60)))
                .then_some(())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(slots_of(&env, "within").await, vec![m - 2]);
    assert!(
        slots_of(&env, "beyond").await.is_empty(),
        "a slot past its deadline ran on resume"
    );
    env.cleanup().await;
}

/// `status.lastScheduleTime` 3 minutes ahead of the clock (the clock went back): no Job for
/// the slots before it, and `status.nextScheduleTime` is the first slot after it, not the next
/// minute.
pub async fn last_schedule_ahead_of_the_clock_waits_for_the_slot_after_it(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let m = this_minute();
    let ahead = at_minute(m + 3);
    create(&env, cronjob("ahead", "* * * * *", json!({}))).await;
    set_last_schedule_time(&env, "ahead", ahead).await;
    let _manager = env.manager(&[]);
    let first = wait_status(&env, "ahead", SOON, "nextScheduleTime", |s| {
        s.next_schedule_time.as_ref().map(|t| t.0)
    })
    .await;
    // Past the next minute's slot: still nothing, and the status still waits for `ahead`.
    sleep_until(at_minute(m + 1) + jiff::SignedDuration::from_secs(10)).await;
    let later = status(&env, "ahead").await;
    assert!(
        slots_of(&env, "ahead").await.is_empty(),
        "a slot before lastScheduleTime {ahead} ran"
    );
    assert_eq!(
        later.last_schedule_time.as_ref().map(|t| t.0),
        Some(ahead),
        "lastScheduleTime is kept"
    );
    let want = at_minute(m + 4);
    assert_eq!(
        (first, later.next_schedule_time.as_ref().map(|t| t.0)),
        (want, Some(want)),
        "nextScheduleTime (first written, then after the next minute) is the slot after lastScheduleTime {ahead}"
    );
    assert!(Timestamp::now() < ahead, "checked before lastScheduleTime");
    env.cleanup().await;
}
