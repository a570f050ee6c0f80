//! A manager starting on many CronJobs shortly before a slot, as after a restart or a
//! replacement: `KRONJOB_E2E_STARTUP_CRONJOBS` (1,000 by default) CronJobs of one Job template,
//! never reconciled, each with a running Job its previous manager made for the last slot; the
//! manager starts 20 s before the next one. Every CronJob gets its first status (its running
//! Job in `active`), the slot runs once for every CronJob, and the shared template is judged
//! by a handful of dry runs (at most one per reconcile running at once), not one per CronJob:
//! this fails without the reconciler's memory of valid templates, which sends 1,000. It prints
//! the start-up (`startup:` lines): to every first status write, and the slot's skew.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::CronJob;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::harness::{Ctx, Env, metric_sum, wait_for};

crate::cases!(
    startup: a_manager_started_before_a_slot_writes_every_status_and_runs_it_once,
);

/// CronJobs of the case (`KRONJOB_E2E_STARTUP_CRONJOBS`, else 1,000).
fn cronjobs() -> usize {
    std::env::var("KRONJOB_E2E_STARTUP_CRONJOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// Most reconciles at once (the manager's default `--concurrency`): the first of them may all
/// judge the template before one verdict is known.
const CONCURRENCY: f64 = 32.0;

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// Sleep until `at` (wall clock).
async fn sleep_until(at: jiff::Timestamp) {
    let wait = at.duration_since(now());
    tokio::time::sleep(Duration::try_from(wait).unwrap_or_default()).await;
}

/// Every Job the watch saw: name -> (UIDs, first arrival).
type Seen = Arc<Mutex<BTreeMap<String, (BTreeSet<String>, jiff::Timestamp)>>>;

fn watch_jobs(api: Api<Job>) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(job)) = events.next().await {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            let entry = log
                .entry(job.name_any())
                .or_insert((BTreeSet::new(), now()));
            entry.0.insert(job.uid().unwrap_or_default());
        }
    });
    (seen, task)
}

pub async fn a_manager_started_before_a_slot_writes_every_status_and_runs_it_once(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let count = cronjobs();
    // The slot the manager starts before: at least a minute away, so the objects below are
    // made first, and no slot between the CronJobs' creation and the start lacks its Job.
    let slot_minute = now().as_second().div_euclid(60) + 2;
    let slot = jiff::Timestamp::from_second(slot_minute * 60).expect("slot");
    let previous = jiff::Timestamp::from_second((slot_minute - 1) * 60).expect("slot");
    let names: Vec<String> = (0..count).map(|i| format!("s-{i:04}")).collect();
    let created: Vec<CronJob> =
        futures::stream::iter(names.clone())
            .map(|name| {
                let env = &env;
                async move {
                    crate::cronjob::create(env, crate::cronjob::quiet_every_minute(&name)).await
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
    // The running Job a previous manager made for the last slot, as kronjob makes it.
    let jobs: Api<Job> = env.api();
    futures::stream::iter(created.iter())
        .for_each_concurrent(32, |cj| {
            let jobs = &jobs;
            async move {
                let job = kronjob::workload::for_slot(cj, previous, &jiff::tz::TimeZone::UTC, None)
                    .and_then(kronjob::workload::NewWorkload::into_job)
                    .expect("the slot's Job");
                jobs.create(&PostParams::default(), &job)
                    .await
                    .expect("create the running Job");
            }
        })
        .await;
    let (seen, watch) = watch_jobs(jobs.clone());
    let start = slot
        .checked_sub(jiff::SignedDuration::from_secs(20))
        .expect("start");
    assert!(
        now() < start,
        "{count} CronJobs and Jobs took too long to create: raise the lead"
    );
    sleep_until(start).await;
    let started = Instant::now();
    let manager = env.manager(&[]);

    // Every CronJob's first status: its running Job in `active`.
    let cronjobs: Api<CronJob> = env.api();
    let written = wait_for(
        Duration::from_secs(180),
        "every CronJob's first status",
        || async {
            let list = cronjobs.list(&ListParams::default()).await.ok()?;
            let done = list.items.iter().all(|cj| {
                cj.status
                    .as_ref()
                    .is_some_and(|s| s.active.iter().any(|a| a.name.is_some()))
            });
            (done && list.items.len() == count).then(|| started.elapsed().as_secs_f64())
        },
    )
    .await;

    // The slot: one Job for every CronJob.
    sleep_until(
        slot.checked_add(jiff::SignedDuration::from_secs(50))
            .expect("time"),
    )
    .await;
    for job in jobs.list(&ListParams::default()).await.expect("list").items {
        let mut log = seen.lock().unwrap_or_else(|e| e.into_inner());
        let entry = log
            .entry(job.name_any())
            .or_insert((BTreeSet::new(), now()));
        entry.0.insert(job.uid().unwrap_or_default());
    }
    watch.abort();
    let log = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut missed = Vec::new();
    let mut doubled = Vec::new();
    let mut skew: Vec<f64> = Vec::new();
    for name in &names {
        match log.get(&format!("{name}-{slot_minute}")) {
            None => missed.push(name.clone()),
            Some((uids, arrived)) => {
                if uids.len() > 1 {
                    doubled.push(name.clone());
                }
                skew.push(arrived.duration_since(slot).as_secs_f64());
            }
        }
    }
    skew.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((q * skew.len() as f64).ceil() as usize).clamp(1, skew.len().max(1)) - 1;
        skew.get(i).copied().unwrap_or_default()
    };
    let metrics = manager.metrics_text().await;
    let dry_runs = metric_sum(&metrics, "kronjob_template_dry_runs_total", &[]);
    println!(
        "startup: {count} CronJobs, each with a running Job, the manager started 20 s before a slot: \
         every first status written {written:.1} s after the start; the slot's Jobs at the watch \
         p50/p99/max {:.2} / {:.2} / {:.2} s after it; {dry_runs} template dry runs",
        at(0.5),
        at(0.99),
        skew.last().copied().unwrap_or_default()
    );
    assert!(missed.is_empty(), "the slot did not run for {missed:?}");
    assert!(doubled.is_empty(), "the slot ran twice for {doubled:?}");
    assert!(
        (1.0..=CONCURRENCY).contains(&dry_runs),
        "{dry_runs} dry runs judged one template shared by {count} CronJobs"
    );
}
