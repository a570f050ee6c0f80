//! `concurrencyPolicy: Enqueue` with Jobs that really run (their Pods stay Pending until a case
//! finishes them): slots that fall due while a Job runs wait in `status.queued` and run one
//! after another, each as its own slot; a full queue drops per `whenFull`; a manager killed
//! while slots wait loses none and runs none twice; and a Job created suspended (as Kueue
//! expects) counts as running, under Forbid and under Enqueue.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{ANNOTATION_SCHEDULED_AT, CronJob};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::cronjob::create;
use crate::harness::{Ctx, Env, metric_sum, wait_for};
use crate::observe::{
    at_minute, cronjob, job_of_slot, job_on_time, minute_of, not_at_the_end_of_a_minute, status,
    wait_event, wait_status,
};
use crate::once::Created;

crate::cases!(
    enqueue:
    queued_slots_run_one_after_another_and_a_full_queue_drops_per_policy,
    a_manager_killed_while_slots_wait_loses_none_and_runs_none_twice,
    a_suspended_job_holds_the_next_slot_under_forbid_and_queues_it_under_enqueue,
);

const SOON: Duration = Duration::from_secs(20);
/// How long a queued slot's Job runs before the case finishes it.
const RUNS: Duration = Duration::from_secs(20);

/// An Enqueue CronJob on `* * * * *` keeping every Job, with `queue` as its `spec.queue`.
fn enqueue(name: &str, queue: serde_json::Value) -> serde_json::Value {
    cronjob(
        name,
        "* * * * *",
        json!({
            "concurrencyPolicy": "Enqueue",
            "queue": queue,
            "successfulJobsHistoryLimit": 20,
        }),
    )
}

/// The first slot of `cj`: the minute after its creation.
fn first_slot(cj: &CronJob) -> i64 {
    minute_of(cj.creation_timestamp().expect("creationTimestamp").0) + 1
}

/// The minutes in `status.queued`.
fn queued_minutes(s: &kronjob::api::CronJobStatus) -> Vec<i64> {
    s.queued.iter().map(|t| minute_of(t.0)).collect()
}

/// Whether the Job has finished (`Complete` or `Failed` true).
fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

/// Sample the Jobs of `cronjob` every 300 ms: the most that were unfinished at once.
fn most_running(env: &Env, cronjob: &str) -> (Arc<AtomicUsize>, JoinHandle<()>) {
    let most = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&most);
    let jobs = env.api::<Job>();
    let selector = format!("batch.kronjob.dev/cronjob={cronjob}");
    let task = tokio::spawn(async move {
        loop {
            let params = kube::api::ListParams::default().labels(&selector);
            if let Ok(list) = jobs.list(&params).await {
                let running = list.items.iter().filter(|j| !finished(j)).count();
                seen.fetch_max(running, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    (most, task)
}

/// The scheduled-time annotation of `job` as a minute.
fn annotated_minute(job: &Job) -> i64 {
    let at = job
        .annotations()
        .get(ANNOTATION_SCHEDULED_AT)
        .unwrap_or_else(|| panic!("Job {} has no scheduled time", job.name_any()));
    minute_of(at.parse().expect("RFC 3339"))
}

/// One CronJob's run with `maxQueued: 2` and `when_full`: its first Job runs past three more
/// slots (two queue, the third finds the queue full), then every Job runs `RUNS` and the
/// queued slots run one after another, then the next slot on time. Returns the slots run.
async fn queue_of_two(env: &Env, created: &Created, name: &str, when_full: &str) -> Vec<i64> {
    // Through `kubectl apply`, as a user would.
    let manifest = enqueue(name, json!({"maxQueued": 2, "whenFull": when_full}));
    let file = std::env::temp_dir().join(format!("{}-{name}.json", env.namespace));
    std::fs::write(&file, manifest.to_string()).expect("write the manifest");
    let path = file.to_string_lossy().into_owned();
    env.kubectl_ok(&["apply", "-n", &env.namespace, "-f", &path]);
    let _ = std::fs::remove_file(&file);
    let cj = env.api::<CronJob>().get(name).await.expect("the CronJob");
    let (most, sampler) = most_running(env, name);
    let m0 = first_slot(&cj);
    let first = job_on_time(env, &cj, m0).await;
    let queued = |want: Vec<i64>| {
        let what = format!("status.queued {want:?}");
        async move {
            wait_status(env, name, Duration::from_secs(80), &what, |s| {
                (queued_minutes(s) == want && s.queued_count as usize == want.len()).then_some(())
            })
            .await
        }
    };
    queued(vec![m0 + 1]).await;
    queued(vec![m0 + 1, m0 + 2]).await;
    let wide = env.kubectl_ok(&["get", "kcj", name, "-n", &env.namespace, "-o", "wide"]);
    let header = wide.lines().next().unwrap_or_default();
    assert!(header.contains("QUEUED"), "{wide}");
    let list = env.plugin_ok(&["list", "-n", &env.namespace]);
    let row = list
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_default();
    assert!(list.contains("QUEUED") && row.contains(" 2 "), "{list}");
    let history = env.plugin_ok(&["history", name, "-n", &env.namespace]);
    assert_eq!(history.matches("Queued").count(), 2, "{history}");
    let (dropped, kept) = match when_full {
        "DropOldest" => (m0 + 1, vec![m0 + 2, m0 + 3]),
        _ => (m0 + 3, vec![m0 + 1, m0 + 2]),
    };
    // The third slot finds the queue full: recorded, one slot dropped.
    wait_status(env, name, Duration::from_secs(80), "the third slot", |s| {
        (s.last_schedule_time.as_ref().map(|t| minute_of(t.0)) == Some(m0 + 3)).then_some(())
    })
    .await;
    queued(kept.clone()).await;
    let full = wait_event(
        env,
        name,
        "QueueFull",
        &at_minute(dropped).to_string(),
        SOON,
    )
    .await;
    assert_eq!(full.type_, "Warning");
    env.finish_job(&first.name_any(), "Succeeded").await;
    // The queued slots, oldest first, then the next slot: on time, as nothing waits by then.
    let mut expected = kept.clone();
    expected.push(m0 + 4);
    for slot in &expected {
        let job = if *slot == m0 + 4 {
            job_on_time(env, &cj, *slot).await
        } else {
            job_of_slot(env, name, *slot, Duration::from_secs(60)).await
        };
        assert_eq!(annotated_minute(&job), *slot, "{}", job.name_any());
        tokio::time::sleep(RUNS).await;
        env.finish_job(&job.name_any(), "Succeeded").await;
    }
    wait_status(env, name, SOON, "an empty queue", |s| {
        (s.queued.is_empty() && s.queued_count == 0).then_some(())
    })
    .await;
    sampler.abort();
    assert_eq!(most.load(Ordering::SeqCst), 1, "one Job at a time");
    let runs = created.runs(name);
    let mut want = vec![m0];
    want.extend(&expected);
    // Slots after the last one checked run on schedule while the case winds up: only those
    // up to it are compared.
    assert_eq!(
        runs.range(..=m0 + 4)
            .map(|(slot, _)| *slot)
            .collect::<Vec<_>>(),
        want,
        "the slots that ran"
    );
    assert!(runs.values().all(|n| *n == 1), "each slot once: {runs:?}");
    want
}

/// Two CronJobs, `maxQueued: 2`, DropOldest and DropNewest, their first Job running ~3.3
/// minutes: slots 1 and 2 queue, slot 3 finds the queue full (DropOldest drops slot 1 and
/// queues 3, DropNewest drops slot 3) with a Warning `QueueFull` naming the dropped slot; the
/// kept slots then run one after another as their own slots, and slot 4 on time. Never two
/// Jobs at once, each slot once; the drops are counted by policy.
pub async fn queued_slots_run_one_after_another_and_a_full_queue_drops_per_policy(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let (created, watch) = Created::watch(env.api());
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    not_at_the_end_of_a_minute().await;
    let (oldest, newest) = tokio::join!(
        queue_of_two(&env, &created, "oldest", "DropOldest"),
        queue_of_two(&env, &created, "newest", "DropNewest"),
    );
    assert_eq!(oldest.len(), 4);
    assert_eq!(newest.len(), 4);
    let metrics = manager.metrics_text().await;
    for policy in ["DropOldest", "DropNewest"] {
        let labels = [("reason", "full"), ("policy", policy)];
        assert_eq!(
            metric_sum(&metrics, "kronjob_queue_dropped_total", &labels),
            1.0,
            "{policy}"
        );
    }
    watch.abort();
    env.cleanup().await;
}

/// An Enqueue CronJob whose first Job runs while two slots queue; the manager is killed
/// (SIGKILL) and started again while they wait, right after the first queued slot's Job is
/// created, and right after the second's: every slot runs exactly once (one Job per slot
/// name, never re-created), in order, and the next slot on time.
pub async fn a_manager_killed_while_slots_wait_loses_none_and_runs_none_twice(ctx: Ctx) {
    const NAME: &str = "killed";
    let env = Env::new(&ctx).await;
    let (created, watch) = Created::watch(env.api());
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    not_at_the_end_of_a_minute().await;
    let cj = create(&env, enqueue(NAME, json!({}))).await;
    let m0 = first_slot(&cj);
    let first = job_on_time(&env, &cj, m0).await;
    wait_status(
        &env,
        NAME,
        Duration::from_secs(150),
        "two queued slots",
        |s| (queued_minutes(s) == [m0 + 1, m0 + 2]).then_some(()),
    )
    .await;
    manager.kill();
    manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    env.finish_job(&first.name_any(), "Succeeded").await;
    for slot in [m0 + 1, m0 + 2] {
        let job = job_of_slot(&env, NAME, slot, SOON).await;
        manager.kill();
        manager = env.manager(&[]);
        manager.wait_ready(Duration::from_secs(60)).await;
        assert_eq!(annotated_minute(&job), slot);
        env.finish_job(&job.name_any(), "Succeeded").await;
    }
    wait_status(&env, NAME, SOON, "an empty queue", |s| {
        s.queued.is_empty().then_some(())
    })
    .await;
    let next = job_on_time(&env, &cj, m0 + 3).await;
    assert_eq!(annotated_minute(&next), m0 + 3);
    // Time for a slot run twice to show.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let runs = created.runs(NAME);
    assert_eq!(
        runs.keys().copied().collect::<Vec<_>>(),
        vec![m0, m0 + 1, m0 + 2, m0 + 3],
        "the slots that ran"
    );
    assert!(runs.values().all(|n| *n == 1), "each slot once: {runs:?}");
    let s = status(&env, NAME).await;
    assert!(s.queued.is_empty(), "{s:?}");
    watch.abort();
    env.cleanup().await;
}

/// A Job template with `suspend: true` and Kueue's queue label (no Kueue here: the case
/// unsuspends the Job as Kueue's admission would): the Job carries both unchanged, and while it
/// waits suspended it counts as running: Forbid skips the next slot (`JobAlreadyActive`),
/// Enqueue queues it; once it is unsuspended and finishes, both run that slot as its own.
pub async fn a_suspended_job_holds_the_next_slot_under_forbid_and_queues_it_under_enqueue(
    ctx: Ctx,
) {
    let env = Env::new(&ctx).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    not_at_the_end_of_a_minute().await;
    let kueued = |name: &str, policy: &str| {
        let mut manifest = cronjob(name, "* * * * *", json!({"concurrencyPolicy": policy}));
        manifest["spec"]["jobTemplate"]["metadata"] =
            json!({"labels": {"kueue.x-k8s.io/queue-name": "user-queue"}});
        manifest["spec"]["jobTemplate"]["spec"]["suspend"] = json!(true);
        manifest
    };
    let forbid = create(&env, kueued("forbid", "Forbid")).await;
    let queue = create(&env, kueued("queue", "Enqueue")).await;
    let mut firsts = Vec::new();
    for cj in [&forbid, &queue] {
        let m0 = first_slot(cj);
        let job = job_on_time(&env, cj, m0).await;
        let spec = job.spec.as_ref().expect("spec");
        assert_eq!(spec.suspend, Some(true), "{}", job.name_any());
        assert_eq!(
            job.labels()
                .get("kueue.x-k8s.io/queue-name")
                .map(String::as_str),
            Some("user-queue")
        );
        firsts.push((cj.name_any(), m0, job.name_any()));
    }
    for (name, m0, _) in &firsts {
        let until = Duration::from_secs(
            u64::try_from(
                at_minute(m0 + 1)
                    .duration_since(jiff::Timestamp::now())
                    .as_secs(),
            )
            .unwrap_or(0),
        ) + SOON;
        if name == "forbid" {
            let skipped = wait_event(&env, name, "JobAlreadyActive", "", until).await;
            assert_eq!(skipped.type_, "Normal");
        } else {
            wait_status(&env, name, until, "the next slot queued", |s| {
                (queued_minutes(s) == [m0 + 1]).then_some(())
            })
            .await;
        }
        let s = status(&env, name).await;
        assert_eq!(s.active_count, 1, "{name}: the suspended Job is active");
    }
    let jobs = env.api::<Job>();
    for (name, m0, first) in &firsts {
        // As Kueue admits it.
        let unsuspend = json!({"spec": {"suspend": false}});
        jobs.patch(first, &PatchParams::default(), &Patch::Merge(&unsuspend))
            .await
            .unwrap_or_else(|e| panic!("unsuspend {first}: {e}"));
        env.finish_job(first, "Succeeded").await;
        let late = job_of_slot(&env, name, m0 + 1, Duration::from_secs(40)).await;
        assert_eq!(annotated_minute(&late), m0 + 1, "{name}");
        assert_eq!(late.spec.as_ref().and_then(|s| s.suspend), Some(true));
    }
    wait_for(SOON, "the queue empties", || async {
        status(&env, "queue").await.queued.is_empty().then_some(())
    })
    .await;
    env.cleanup().await;
}
