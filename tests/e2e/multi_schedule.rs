//! Several schedules on a real API server, applied with `kubectl apply`: `*/2` and `*/3` make
//! one Job at each minute divisible by 6 and Jobs only at minutes divisible by 2 or 3; the
//! SCHEDULE column, `status.schedule`, `status.nextScheduleTime`, `kubectl kronjob next` and
//! `list` show the merged schedule; `kubectl explain` documents the new fields.

use std::time::Duration;

use kube::ResourceExt;

use crate::harness::{Ctx, Env, metric_sum, this_minute, wait_for};
use crate::observe::{
    at_minute, events, job_name, job_of_slot, not_at_the_end_of_a_minute, sleep_until, slots_of,
    status,
};

crate::cases!(
    multi_schedule:
    two_schedules_make_one_job_at_the_minute_both_name,
);

/// The zones the case may pick: UTC, and one 45 minutes off, so that a minute divisible by 6
/// in one of them is at most 3 minutes away whenever the case starts.
const ZONES: [(&str, i64); 2] = [("UTC", 0), ("Asia/Kathmandu", 5 * 60 + 45)];

/// Whether the minute `minute` (since the epoch) is a slot of `*/2` or `*/3` in a zone
/// `offset` minutes ahead of UTC.
fn is_slot(minute: i64, offset: i64) -> bool {
    let local = (minute + offset).rem_euclid(60);
    local % 2 == 0 || local % 3 == 0
}

/// `schedules: ["*/2 * * * *", "*/3 * * * *"]`, applied with `kubectl apply`: the Jobs of the
/// slots up to the first minute divisible by 6 are exactly the merged slots, one each; the Job
/// of that minute is created once (one create, one Event).
pub async fn two_schedules_make_one_job_at_the_minute_both_name(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    not_at_the_end_of_a_minute().await;
    let now = this_minute();
    // The zone whose next minute divisible by 6 comes first.
    let ((zone, offset), shared) = ZONES
        .iter()
        .map(|z| {
            let next = (now + 1..).find(|m| (m + z.1).rem_euclid(6) == 0);
            (*z, next.expect("a minute divisible by 6"))
        })
        .min_by_key(|(_, m)| *m)
        .expect("a zone");
    let manifest = serde_json::json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": {"name": "multi"},
        "spec": {
            "schedules": ["*/2 * * * *", "*/3 * * * *"],
            "timeZone": zone,
            "successfulJobsHistoryLimit": 10,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}]
            }}}}
        }
    });
    std::fs::create_dir_all(&ctx.logs).expect("the case's folder");
    let file = ctx.logs.join("multi.json");
    std::fs::write(&file, manifest.to_string()).expect("write the manifest");
    let applied = env.kubectl_ok(&["apply", "-n", &env.namespace, "-f", &file.to_string_lossy()]);
    assert!(
        applied.contains("cronjob.batch.kronjob.dev/multi created"),
        "{applied}"
    );
    let created = env
        .api::<kronjob::api::CronJob>()
        .get("multi")
        .await
        .expect("the CronJob")
        .creation_timestamp()
        .expect("creationTimestamp")
        .0;
    let first = crate::observe::minute_of(created) + 1;

    shows_the_merged_schedule(&env, first, offset).await;

    let until = at_minute(shared).duration_since(jiff::Timestamp::now());
    let limit = Duration::try_from(until).unwrap_or_default() + Duration::from_secs(20);
    let job = job_of_slot(&env, "multi", shared, limit).await;
    // The annotation is the slot in the CronJob's zone: its minute is divisible by 6.
    let at = job
        .annotations()
        .get(kronjob::api::ANNOTATION_SCHEDULED_AT)
        .cloned()
        .unwrap_or_default();
    let local_minute: i64 = at.get(14..16).and_then(|m| m.parse().ok()).unwrap_or(-1);
    assert_eq!(local_minute % 6, 0, "{at} in {zone}");
    // Let a second create of that minute have its chance, then count.
    sleep_until(at_minute(shared) + jiff::SignedDuration::from_secs(20)).await;
    let want: Vec<i64> = (first..=shared).filter(|m| is_slot(*m, offset)).collect();
    assert_eq!(
        slots_of(&env, "multi").await,
        want,
        "one Job per merged slot ({zone})"
    );
    let name = job_name("multi", shared);
    let creates: Vec<_> = events(&env, "multi")
        .await
        .into_iter()
        .filter(|e| e.reason == "SuccessfulCreate" && e.note == format!("Created job {name}"))
        .collect();
    assert_eq!(creates.len(), 1, "{creates:?}");
    let metrics = manager.metrics_text().await;
    let created_total = metric_sum(&metrics, "kronjob_jobs_created_total", &[]);
    assert_eq!(created_total, want.len() as f64, "one create per slot");
    let after = status(&env, "multi").await;
    let next = (shared + 1..)
        .find(|m| is_slot(*m, offset))
        .expect("a next slot");
    assert_eq!(after.next_schedule_time.map(|t| t.0), Some(at_minute(next)));
    env.cleanup().await;
}

/// Before the first slot: `status.schedule` and the SCHEDULE column of `kubectl get` and of
/// `kubectl kronjob list` read `*/2 * * * * (+1)`; `kubectl kronjob next` prints the merged
/// times; `kubectl explain` documents `schedules` and the failure policy.
async fn shows_the_merged_schedule(env: &Env, first: i64, offset: i64) {
    let summary = "*/2 * * * * (+1)";
    wait_for(Duration::from_secs(30), "status.schedule", || async {
        let s = status(env, "multi").await;
        (s.schedule.as_deref() == Some(summary)).then_some(())
    })
    .await;
    let table = env.kubectl_ok(&["get", "kcj", "multi", "-n", &env.namespace]);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|row| row.contains(summary)),
        "{table}"
    );
    let listed = env.plugin_ok(&["list", "-n", &env.namespace]);
    assert!(
        listed.contains(&format!("multi   {summary}   ")),
        "{listed}"
    );
    let next = env.plugin_ok(&["next", "multi", "-n", &env.namespace, "--count", "3"]);
    let want: Vec<String> = (first..)
        .filter(|m| is_slot(*m, offset))
        .take(3)
        .map(|m| at_minute(m).to_string())
        .collect();
    let utc: Vec<String> = next
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect();
    assert_eq!(utc, want, "{next}");
    // kubectl wraps the descriptions: compare with single spaces.
    let explain = |field: &str| {
        let text = env.kubectl_ok(&["explain", field]);
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let schedules = explain("kcj.spec.schedules");
    assert!(
        schedules.contains("Several schedules instead of"),
        "{schedules}"
    );
    let policy = explain("kcj.spec.failurePolicy.suspendAfterConsecutiveFailures");
    assert!(
        policy.contains("scheduled Jobs in a row have failed"),
        "{policy}"
    );
}
