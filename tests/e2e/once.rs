//! A slot runs once on a real API server, also when its Job is gone in seconds: TTL 0 and no
//! history with the Job finished at once, a user deleting the Job right after its creation,
//! a manager killed every 20 s; under an idle manager and a busy one (a namespace of thousands
//! of CronJobs deleted just before the slot); and, to make the race certain rather than likely,
//! a status write held back by an admission webhook while the Job is deleted and the CronJob
//! edited. Every Job created in the namespace is seen by a watch opened before the first slot,
//! so a Job deleted seconds after its creation still counts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kronjob::api::CronJob;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::harness::{Ctx, Env, Manager, at_second, metric_sum, set_pod_phase, wait_for};

crate::cases!(
    once:
    a_status_write_held_back_never_lets_a_deleted_job_run_its_slot_again,
    a_job_gone_in_seconds_never_runs_its_slot_again,
    a_job_gone_in_seconds_under_a_busy_manager,
    a_manager_killed_every_20s_runs_each_slot_once,
);

/// The CronJob whose Jobs finish at once and go at once: TTL 0, no history.
const GONE_BY_TTL: &str = "gone-ttl";
/// The CronJob whose Jobs a user deletes right after their creation.
const GONE_BY_USER: &str = "gone-user";

/// `* * * * *` with a fast-finishing container, `ttl` seconds after finished (if any), and
/// `history` kept of each kind.
fn every_minute(name: &str, ttl: Option<i32>, history: i32) -> Value {
    let mut spec = json!({
        "backoffLimit": 0,
        "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}]
        }}
    });
    if let Some(ttl) = ttl {
        spec["ttlSecondsAfterFinished"] = ttl.into();
    }
    json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": history,
            "failedJobsHistoryLimit": history,
            "jobTemplate": {"spec": spec}
        }
    })
}

/// Every Job ever created in a namespace while the watch ran: name -> UIDs.
#[derive(Clone, Default)]
pub(crate) struct Created(Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>);

impl Created {
    /// Watch the Jobs of `api` from now on.
    pub(crate) fn watch(api: Api<Job>) -> (Self, JoinHandle<()>) {
        let created = Created::default();
        let seen = created.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(event) = events.next().await {
                if let Ok(job) = event {
                    seen.add(&job);
                }
            }
        });
        (created, task)
    }

    fn add(&self, job: &Job) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.entry(job.name_any())
            .or_default()
            .insert(job.uid().unwrap_or_default());
    }

    /// The slots (minutes since the epoch) `cronjob` ran, each with how many Jobs it got.
    pub(crate) fn runs(&self, cronjob: &str) -> BTreeMap<i64, usize> {
        let prefix = format!("{cronjob}-");
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter_map(|(name, uids)| {
                let minute = name.strip_prefix(&prefix)?.parse().ok()?;
                Some((minute, uids.len()))
            })
            .collect()
    }
}

/// Each of `cronjobs` ran each slot of `slots` with exactly one Job.
fn assert_each_slot_once(
    created: &Created,
    cronjobs: &[&str],
    slots: std::ops::RangeInclusive<i64>,
) {
    for cronjob in cronjobs {
        let runs = created.runs(cronjob);
        let want: BTreeMap<i64, usize> = slots.clone().map(|s| (s, 1)).collect();
        let got: BTreeMap<i64, usize> = runs
            .into_iter()
            .filter(|(s, _)| slots.contains(s))
            .collect();
        assert_eq!(got, want, "{cronjob}: slot -> Jobs created");
    }
}

/// Finish every Pod of `cronjob`'s Jobs (Succeeded) as soon as it exists, as a fast kubelet.
fn finish_pods_at_once(env: &Env, cronjob: &str) -> JoinHandle<()> {
    let pods: Api<Pod> = env.api();
    let prefix = format!("{cronjob}-");
    tokio::spawn(async move {
        let mut events = watcher(pods.clone(), watcher::Config::default())
            .applied_objects()
            .boxed();
        let mut done = BTreeSet::new();
        while let Some(event) = events.next().await {
            let Ok(pod) = event else { continue };
            let job = pod
                .labels()
                .get("batch.kubernetes.io/job-name")
                .cloned()
                .unwrap_or_default();
            let pending = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
            if job.starts_with(&prefix) && pending && done.insert(pod.name_any()) {
                set_pod_phase(&pods, &pod.name_any(), "Succeeded").await;
            }
        }
    })
}

/// Delete every Job of `cronjob` as soon as it exists, as a user would.
fn delete_jobs_at_once(env: &Env, cronjob: &str) -> JoinHandle<()> {
    let jobs: Api<Job> = env.api();
    let selector = format!("batch.kronjob.dev/cronjob={cronjob}");
    tokio::spawn(async move {
        let mut events = watcher(jobs.clone(), watcher::Config::default().labels(&selector))
            .applied_objects()
            .boxed();
        while let Some(event) = events.next().await {
            let Ok(job) = event else { continue };
            if job.metadata.deletion_timestamp.is_none() {
                let _ = jobs
                    .delete(&job.name_any(), &DeleteParams::background())
                    .await;
            }
        }
    })
}

/// `status.lastScheduleTime` of `name`, in minutes since the epoch.
async fn last_scheduled(env: &Env, name: &str) -> Option<i64> {
    let cj = env.api::<CronJob>().get(name).await.ok()?;
    let t = cj.status?.last_schedule_time?;
    Some(t.0.as_second().div_euclid(60))
}

/// The two CronJobs whose Jobs are gone in seconds, with the helpers that make them go, and
/// the watch that sees every Job created.
struct Gone {
    created: Created,
    tasks: Vec<JoinHandle<()>>,
}

impl Gone {
    async fn start(env: &Env) -> Gone {
        let (created, watch) = Created::watch(env.api());
        crate::cronjob::create(env, every_minute(GONE_BY_TTL, Some(0), 0)).await;
        crate::cronjob::create(env, every_minute(GONE_BY_USER, None, 3)).await;
        let tasks = vec![
            watch,
            finish_pods_at_once(env, GONE_BY_TTL),
            delete_jobs_at_once(env, GONE_BY_USER),
        ];
        Gone { created, tasks }
    }

    /// After `slots` ran: each ran once; both statuses record the last; the TTL-0 Jobs are
    /// gone; the user's deletions are reported as missing Jobs, not run again.
    async fn check(&self, env: &Env, slots: std::ops::RangeInclusive<i64>) {
        assert_each_slot_once(&self.created, &[GONE_BY_TTL, GONE_BY_USER], slots.clone());
        let last = *slots.end();
        for name in [GONE_BY_TTL, GONE_BY_USER] {
            wait_for(
                Duration::from_secs(30),
                &format!("{name} records {last}"),
                || async { (last_scheduled(env, name).await >= Some(last)).then_some(()) },
            )
            .await;
        }
        wait_for(
            Duration::from_secs(60),
            "the TTL-0 Jobs deleted",
            || async {
                let left = env.jobs_of(GONE_BY_TTL).await;
                left.is_empty().then_some(())
            },
        )
        .await;
        let missing = Duration::from_secs(30);
        crate::observe::wait_event(env, GONE_BY_USER, "MissingJob", GONE_BY_USER, missing).await;
    }

    fn stop(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// An idle manager; two slots.
pub async fn a_job_gone_in_seconds_never_runs_its_slot_again(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let gone = Gone::start(&env).await;
    let first = at_second(5).await + 1;
    wait_past(first + 1, 40).await;
    gone.check(&env, first..=first + 1).await;
    gone.stop();
    env.cleanup().await;
}

/// CronJobs in the busy namespace: each slot makes that many Jobs and status writes
/// (`KRONJOB_E2E_BUSY` sets another number, e.g. 10,000 for a measurement).
const BUSY: usize = 2_000;

/// The CronJob whose finished Jobs only the TTL controller deletes (TTL 0, history kept): the
/// TTL controller's lateness under load is read off it.
const GONE_BY_TTL_ONLY: &str = "gone-ttl-only";

/// The same on a manager that is busy: it also schedules a namespace of [`BUSY`] CronJobs on
/// `* * * * *`, which runs one slot and is deleted 10 s before the next, as in the run that
/// found the bug. The TTL controller's lateness over the run is printed.
pub async fn a_job_gone_in_seconds_under_a_busy_manager(ctx: Ctx) {
    let plane = ctx.own_control_plane(Default::default()).await;
    let env = Env::on(&ctx, plane.kubeconfig()).await;
    let busy = Env::on(&ctx, plane.kubeconfig()).await;
    let mut manager = env.manager(&["--namespace", busy.namespace.as_str()]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let busy_count = std::env::var("KRONJOB_E2E_BUSY")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(BUSY);
    create_many(&busy.client, &busy.namespace, busy_count).await;
    let gone = Gone::start(&env).await;
    crate::cronjob::create(&env, every_minute(GONE_BY_TTL_ONLY, Some(0), 100)).await;
    let ttl_only = finish_pods_at_once(&env, GONE_BY_TTL_ONLY);
    // The busy namespace runs slot `first` with the others, and is deleted 10 s before the
    // next one.
    let first = at_second(5).await + 1;
    wait_past(first, 50).await;
    Api::<Namespace>::all(busy.client.clone())
        .delete(&busy.namespace, &DeleteParams::background())
        .await
        .expect("delete the busy namespace");
    wait_past(first + 2, 40).await;
    gone.check(&env, first..=first + 2).await;
    assert_each_slot_once(&gone.created, &[GONE_BY_TTL_ONLY], first..=first + 2);
    wait_for(
        Duration::from_secs(120),
        "the TTL controller to delete every Job",
        || async { env.jobs_of(GONE_BY_TTL_ONLY).await.is_empty().then_some(()) },
    )
    .await;
    report_ttl_lateness(&manager).await;
    ttl_only.abort();
    gone.stop();
    env.cleanup().await;
}

/// Ten CronJobs (half of them TTL 0 and no history, their Pods finished at once) and a
/// manager killed (SIGKILL) every 20 s, one kill 300 ms after each slot, and started again at
/// once: over four slots, each CronJob runs each slot exactly once, none missed.
pub async fn a_manager_killed_every_20s_runs_each_slot_once(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let (created, watch) = Created::watch(env.api());
    let mut names = Vec::new();
    let mut helpers = vec![watch];
    for i in 0..10 {
        let name = format!("kill-{i}");
        let manifest = if i % 2 == 0 {
            helpers.push(finish_pods_at_once(&env, &name));
            every_minute(&name, Some(0), 0)
        } else {
            every_minute(&name, None, 100)
        };
        crate::cronjob::create(&env, manifest).await;
        names.push(name);
    }
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let first = at_second(50).await + 1;
    let last = first + 3;
    let mut kills = 0;
    loop {
        // 0.3 s after a slot, then 20 and 40 s after it.
        let now = jiff::Timestamp::now();
        let minute = now.as_second().div_euclid(60);
        if minute > last {
            break;
        }
        let next = [300, 20_000, 40_000]
            .into_iter()
            .map(|ms| minute * 60_000 + ms)
            .find(|at| *at > now.as_millisecond())
            .unwrap_or((minute + 1) * 60_000 + 300);
        let wait = next - now.as_millisecond();
        tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
        manager.kill();
        kills += 1;
        manager = env.manager(&[]);
    }
    manager.wait_ready(Duration::from_secs(60)).await;
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    wait_for(Duration::from_secs(40), "every slot's Jobs", || async {
        names
            .iter()
            .all(|n| created.runs(n).contains_key(&last))
            .then_some(())
    })
    .await;
    assert!(kills >= 10, "{kills} kills");
    assert_each_slot_once(&created, &names, first..=last);
    for helper in helpers {
        helper.abort();
    }
    env.cleanup().await;
}

/// Sleep until second `second` of minute `minute` (minutes since the epoch).
async fn wait_past(minute: i64, second: i64) {
    let target = minute * 60 + second;
    let now = jiff::Timestamp::now();
    let wait = target * 1000 - now.as_millisecond();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
    }
}

/// Create `count` CronJobs on `* * * * *` whose Jobs start no Pod, 32 at a time.
async fn create_many(client: &Client, namespace: &str, count: usize) {
    let api: Api<CronJob> = Api::namespaced(client.clone(), namespace);
    futures::stream::iter(0..count)
        .for_each_concurrent(32, |i| {
            let api = api.clone();
            async move {
                let manifest = crate::cronjob::quiet_every_minute(&format!("busy-{i:05}"));
                let cj: CronJob = serde_json::from_value(manifest).expect("CronJob");
                api.create(&PostParams::default(), &cj)
                    .await
                    .expect("create a busy CronJob");
            }
        })
        .await;
    let listed = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .len();
    assert_eq!(listed, count);
}

/// Print how late the TTL controller deleted Jobs over the run (from its histogram).
async fn report_ttl_lateness(manager: &Manager) {
    let text = manager.metrics_text().await;
    let labels = [("kind", "job")];
    let count = metric_sum(&text, "kronjob_ttl_deletion_delay_seconds_count", &labels);
    let sum = metric_sum(&text, "kronjob_ttl_deletion_delay_seconds_sum", &labels);
    let buckets: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("kronjob_ttl_deletion_delay_seconds_bucket{kind=\"job\""))
        .collect();
    eprintln!(
        "TTL deletions under load: {count} Jobs, mean {:.2} s late\n{}",
        if count > 0.0 { sum / count } else { 0.0 },
        buckets.join("\n")
    );
}

/// An admission webhook on `cronjobs/status` updates of one namespace that holds every review
/// while `holding` is true: a status write that lags, on the real API server.
struct HoldingWebhook {
    holding: tokio::sync::watch::Sender<bool>,
    /// Reviews answered or waiting.
    calls: Arc<std::sync::atomic::AtomicUsize>,
    /// Reviews waiting now.
    held: Arc<std::sync::atomic::AtomicUsize>,
    server: JoinHandle<()>,
}

impl HoldingWebhook {
    async fn install(ctx: &Ctx, env: &Env) -> HoldingWebhook {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = crate::tls_support::temp_dir("holding-webhook");
        let ca = crate::webhook::write_serving_pair(&dir);
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(
            dir.join("tls.crt"),
            dir.join("tls.key"),
        )
        .await
        .expect("serving pair");
        let (holding, watch) = tokio::sync::watch::channel(false);
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let state = (watch, Arc::clone(&calls), Arc::clone(&held));
        let app = axum::Router::new()
            .route("/hold", axum::routing::post(review))
            .with_state(state);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = listener.local_addr().expect("address").port();
        listener.set_nonblocking(true).expect("non-blocking");
        let server = tokio::spawn(async move {
            let _ = axum_server::from_tcp_rustls(listener, tls)
                .expect("listener")
                .serve(app.into_make_service())
                .await;
        });
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": format!("hold-{}", env.namespace),
                         "labels": {crate::harness::CASE_LABEL: ctx.label()}},
            "webhooks": [{
                "name": "hold.e2e.kronjob.dev",
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/hold"),
                                 "caBundle": k8s_openapi::ByteString(ca.into_bytes())},
                "rules": [{"apiGroups": ["batch.kronjob.dev"], "apiVersions": ["v1"],
                           "operations": ["UPDATE"], "resources": ["cronjobs/status"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": env.namespace}},
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 30, "failurePolicy": "Fail"
            }]
        });
        let config: k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration =
            serde_json::from_value(config).expect("configuration");
        Api::all(env.client.clone())
            .create(&PostParams::default(), &config)
            .await
            .expect("install the holding webhook");
        HoldingWebhook {
            holding,
            calls,
            held,
            server,
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn held(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }
}

type HoldState = (
    tokio::sync::watch::Receiver<bool>,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<std::sync::atomic::AtomicUsize>,
);

/// Allow the review, once the hold is off.
async fn review(
    axum::extract::State((mut holding, calls, held)): axum::extract::State<HoldState>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    use std::sync::atomic::Ordering;
    calls.fetch_add(1, Ordering::SeqCst);
    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
    if *holding.borrow() {
        held.fetch_add(1, Ordering::SeqCst);
        let _ = holding.wait_for(|h| !*h).await;
        held.fetch_sub(1, Ordering::SeqCst);
    }
    axum::Json(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": true}
    }))
}

/// The slot's status write is held back (an admission webhook), while a user deletes the
/// slot's Job and labels the CronJob: the plan the deletion brings sees neither the Job nor the
/// slot in the cache's status, and the held write is refused once let go (the label moved the
/// version). The slot runs once, and the status records it.
pub async fn a_status_write_held_back_never_lets_a_deleted_job_run_its_slot_again(ctx: Ctx) {
    const NAME: &str = "held";
    let env = Env::new(&ctx).await;
    let (created, watch) = Created::watch(env.api());
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    crate::cronjob::create(&env, every_minute(NAME, None, 3)).await;
    let cronjobs = env.api::<CronJob>();
    wait_for(Duration::from_secs(30), "the first status", || async {
        cronjobs.get(NAME).await.ok()?.status.map(|_| ())
    })
    .await;
    let webhook = HoldingWebhook::install(&ctx, &env).await;
    // The API server calls it within a moment: probe with status writes of our own.
    wait_for(
        Duration::from_secs(30),
        "the API server to call the webhook",
        || async {
            let probe =
                json!({"metadata": {"annotations": {"probe": jiff::Timestamp::now().to_string()}}});
            let _ = cronjobs
                .patch_status(
                    NAME,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&probe),
                )
                .await;
            (webhook.calls() > 0).then_some(())
        },
    )
    .await;
    let slot = at_second(50).await + 1;
    webhook.holding.send_replace(true);
    wait_for(
        Duration::from_secs(30),
        "the slot's status write, held",
        || async { (webhook.held() > 0 && created.runs(NAME).contains_key(&slot)).then_some(()) },
    )
    .await;
    let job = format!("{NAME}-{slot}");
    env.api::<Job>()
        .delete(&job, &DeleteParams::background())
        .await
        .expect("delete the slot's Job");
    let label = json!({"metadata": {"labels": {"team": "b"}}});
    cronjobs
        .patch(
            NAME,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&label),
        )
        .await
        .expect("label the CronJob");
    // Time for the deletion to reach the manager and for a plan to run on it.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        created.runs(NAME).get(&slot),
        Some(&1),
        "the slot ran again"
    );
    webhook.holding.send_replace(false);
    wait_for(
        Duration::from_secs(30),
        "the status to record the slot",
        || async { (last_scheduled(&env, NAME).await == Some(slot)).then_some(()) },
    )
    .await;
    assert_eq!(
        created.runs(NAME).get(&slot),
        Some(&1),
        "the slot ran again"
    );
    let missing = Duration::from_secs(30);
    crate::observe::wait_event(&env, NAME, "MissingJob", &job, missing).await;
    webhook.server.abort();
    watch.abort();
    env.cleanup().await;
}
