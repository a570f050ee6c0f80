//! The failure policy on a real API server, applied with `kubectl apply`: three scheduled Jobs
//! whose Pods fail (the Job controller fails them, `backoffLimit: 0`) suspend a CronJob with
//! `suspendAfterConsecutiveFailures: 3`, with the condition, the Event and the metrics; no slot
//! runs while it is suspended; `kubectl kronjob resume` resets the count and runs the missed
//! slot.

use std::time::Duration;

use kronjob::api::CronJob;
use kube::ResourceExt;
use serde_json::json;

use crate::harness::{Ctx, Env, metric_sum, wait_for};
use crate::observe::{
    at_minute, cronjob, finished_job, job_name, job_on_time, minute_of, not_at_the_end_of_a_minute,
    sleep_until, slots_of, status, wait_event, wait_status,
};

crate::cases!(
    failure_policy:
    three_failed_jobs_suspend_and_resume_resets_the_count,
);

const STATUS: Duration = Duration::from_secs(20);

/// `* * * * *` with `suspendAfterConsecutiveFailures: 3`: the Pods of three slots in a row fail;
/// the count reads 1, 2, then the CronJob is suspended with `Ready=False
/// SuspendedAfterFailures` naming the count and the third Job, a Warning Event and the metrics;
/// the fourth slot gets no Job; `kubectl kronjob resume` resets the count and runs it.
pub async fn three_failed_jobs_suspend_and_resume_resets_the_count(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    not_at_the_end_of_a_minute().await;
    let manifest = cronjob(
        "breaker",
        "* * * * *",
        json!({
            "failedJobsHistoryLimit": 5,
            "failurePolicy": {"suspendAfterConsecutiveFailures": 3},
        }),
    );
    std::fs::create_dir_all(&ctx.logs).expect("the case's folder");
    let file = ctx.logs.join("breaker.json");
    std::fs::write(&file, manifest.to_string()).expect("write the manifest");
    env.kubectl_ok(&["apply", "-n", &env.namespace, "-f", &file.to_string_lossy()]);
    let cj: CronJob = env.api().get("breaker").await.expect("the CronJob");
    let first = minute_of(cj.creation_timestamp().expect("created").0) + 1;

    for (i, slot) in (first..first + 3).enumerate() {
        let job = job_on_time(&env, &cj, slot).await;
        env.finish_pods(&job.name_any(), "Failed").await;
        let done = finished_job(&env, &job.name_any()).await;
        let failed = done
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Failed" && c.status == "True"));
        assert!(failed, "Job {} failed", job.name_any());
        let count = i as i32 + 1;
        wait_status(
            &env,
            "breaker",
            STATUS,
            &format!("{count} failures in a row"),
            |s| (s.consecutive_failures == count && s.active.is_empty()).then_some(()),
        )
        .await;
    }

    let third = job_name("breaker", first + 2);
    let suspended = wait_for(STATUS, "spec.suspend set by the controller", || async {
        let cj: CronJob = env.api().get("breaker").await.ok()?;
        cj.spec.is_suspended().then_some(cj)
    })
    .await;
    let after = suspended.status.unwrap_or_default();
    let ready = after
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "SuspendedAfterFailures")
    );
    let message = format!(
        "3 scheduled Jobs failed in a row, the last {third}: suspended by failurePolicy.suspendAfterConsecutiveFailures (3); resume to schedule again"
    );
    assert_eq!(ready.message, message);
    assert_eq!(after.consecutive_failures, 3);
    assert_eq!(after.next_schedule_time, None);
    let event = wait_event(&env, "breaker", "SuspendedAfterFailures", &third, STATUS).await;
    assert_eq!(
        (event.type_.as_str(), event.note.as_str()),
        ("Warning", message.as_str())
    );
    let labels = [("cronjob", "breaker")];
    let want = |suspensions: f64, count: f64, suspended: f64| {
        let manager = &manager;
        move || async move {
            let text = manager.metrics_text().await;
            let got = (
                metric_sum(
                    &text,
                    "kronjob_cronjobs_suspended_after_failures_total",
                    &[],
                ),
                metric_sum(&text, "kronjob_cronjob_consecutive_failures", &labels),
                metric_sum(&text, "kronjob_cronjob_suspended", &labels),
            );
            (got == (suspensions, count, suspended)).then_some(())
        }
    };
    wait_for(STATUS, "the metrics of the suspension", want(1.0, 3.0, 1.0)).await;

    // The fourth slot passes without a Job.
    sleep_until(at_minute(first + 3) + jiff::SignedDuration::from_secs(10)).await;
    assert_eq!(
        slots_of(&env, "breaker").await,
        [first, first + 1, first + 2]
    );

    let resumed = env.plugin_ok(&["resume", "breaker", "-n", &env.namespace]);
    assert!(resumed.contains("resumed"), "{resumed}");
    let latest = crate::harness::this_minute();
    wait_for(STATUS, "the missed slot's Job after the resume", || async {
        let slots = slots_of(&env, "breaker").await;
        slots
            .iter()
            .any(|s| *s >= first + 3 && *s <= latest)
            .then_some(())
    })
    .await;
    let reset = wait_status(&env, "breaker", STATUS, "the count reset", |s| {
        let ready = s.conditions.iter().find(|c| c.type_ == "Ready")?;
        (s.consecutive_failures == 0 && ready.reason == "Scheduled").then(|| s.clone())
    })
    .await;
    assert!(reset.next_schedule_time.is_some(), "{reset:?}");
    wait_for(STATUS, "the metrics after the resume", want(1.0, 0.0, 0.0)).await;
    assert_eq!(status(&env, "breaker").await.consecutive_failures, 0);
    env.cleanup().await;
}
