//! Faults of the control plane and of the network, on a real API server. Each case counts
//! every Job created (a watch opened before the first slot, and a list at the end: a slot run
//! twice shows as two Jobs, or as a Job of the same name with a second UID for the `gone-`
//! CronJobs, whose Jobs the test deletes as soon as it sees them, as a user would), asserts
//! 0 duplicates and 0 missed slots, and prints its recovery (`faults:` lines):
//!
//! - etcd killed (SIGKILL) 5 s before a slot and started again 20 s later: the slot runs once
//!   soon after its return, the watches recover by themselves (a CronJob created after the
//!   return runs its next slot), the manager never restarts;
//! - the API server stopped as a rollout does (SIGTERM, with `--shutdown-send-retry-after`:
//!   it answers 429 with `Retry-After` while it drains) 3 s before a slot and started again;
//!   and killed (SIGKILL) 2 s before a slot and started again;
//! - API Priority and Fairness holding the manager's ServiceAccount to one seat with a short
//!   queue during a slot: every slot once, the 429s counted by the manager, and its Lease, in
//!   `leader-election` through the chart's FlowSchema, never lost;
//! - two replicas whose clocks run 5 s ahead of and behind the API server's (libfaketime;
//!   `KRONJOB_E2E_SKEW` sets another number of seconds, e.g. 90): each measures and logs its
//!   offset, the Jobs on both sides of a handover are created at their slot by the API
//!   server's clock, never before, and the two never lead at once;
//! - the network between the leader and the API server cut for 45 s (a proxy that stops
//!   forwarding and closes nothing): the leader stops leading (its writes fenced) before the
//!   standby takes over, the standby runs the slot, nothing runs twice, and the old leader
//!   follows when the network is back.
//!
//! The control plane faults run on a control plane of their own, without
//! kube-controller-manager (the Jobs are suspended: they start no Pod).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::harness::{Ctx, Env, Manager, at_second, http_get, metric_sum, wait_for};

crate::cases!(
    faults:
    etcd_killed_at_a_slot_and_away_for_20s,
    api_server_restarted_gracefully_at_a_slot,
    api_server_killed_at_a_slot,
    apf_throttling_never_costs_the_lease,
    replicas_with_skewed_clocks_run_slots_by_the_api_servers_clock,
    a_cut_network_fences_the_leader_before_the_standby_takes_over,
);

/// CronJobs of a control plane fault case and of the throttling case, beside the `gone-`
/// ones; `KRONJOB_E2E_FAULT_CRONJOBS` sets another number (e.g. 1,000 for the throttled slot
/// of the issue).
fn cronjobs() -> usize {
    std::env::var("KRONJOB_E2E_FAULT_CRONJOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}
/// CronJobs whose Jobs the test deletes as soon as it sees them.
const GONE: usize = 5;

// ---------------------------------------------------------------------------------------------
// What ran
// ---------------------------------------------------------------------------------------------

/// Every Job seen in a namespace: name -> UID -> creation (Unix seconds).
#[derive(Clone, Default)]
pub(crate) struct Jobs(Arc<Mutex<BTreeMap<String, BTreeMap<String, i64>>>>);

/// How a range of slots ran.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// `cronjob@slot` without a Job.
    pub(crate) missed: Vec<String>,
    /// `cronjob@slot` with more than one.
    pub(crate) duplicates: Vec<String>,
}

impl Jobs {
    /// Watch the Jobs of `api` from now on (reconnecting after an outage), deleting those of
    /// the `gone-` CronJobs as soon as they are seen.
    pub(crate) fn watch(api: Api<Job>) -> (Jobs, JoinHandle<()>) {
        let jobs = Jobs::default();
        let seen = jobs.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api.clone(), watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(job) = event else { continue };
                seen.add(&job);
                if job.name_any().starts_with("gone-") && job.metadata.deletion_timestamp.is_none()
                {
                    let _ = api
                        .delete(&job.name_any(), &DeleteParams::background())
                        .await;
                }
            }
        });
        (jobs, task)
    }

    fn add(&self, job: &Job) {
        let created = job
            .creation_timestamp()
            .map(|t| t.0.as_second())
            .unwrap_or_default();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(job.name_any())
            .or_default()
            .insert(job.uid().unwrap_or_default(), created);
    }

    /// Add what a list of `api` holds (a Job the watch missed would show here).
    pub(crate) async fn add_listed(&self, api: &Api<Job>) {
        let listed = api.list(&ListParams::default()).await.expect("list Jobs");
        for job in &listed.items {
            self.add(job);
        }
    }

    /// The creations of `cronjob`'s Jobs for `slot`.
    fn runs(&self, cronjob: &str, slot: i64) -> Vec<i64> {
        let name = format!("{cronjob}-{slot}");
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&name)
            .map(|uids| uids.values().copied().collect())
            .unwrap_or_default()
    }

    /// The first slot `cronjob` ran.
    fn first(&self, cronjob: &str) -> Option<i64> {
        let prefix = format!("{cronjob}-");
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.keys()
            .filter_map(|name| name.strip_prefix(&prefix)?.parse().ok())
            .min()
    }

    /// Each of `cronjobs` from its first slot (at the latest `from`) to `to`.
    pub(crate) fn tally(&self, cronjobs: &[String], from: i64, to: i64) -> Tally {
        let mut tally = Tally::default();
        for cronjob in cronjobs {
            let first = self.first(cronjob).unwrap_or(from).min(from);
            for slot in first..=to {
                match self.runs(cronjob, slot).len() {
                    0 => tally.missed.push(format!("{cronjob}@{slot}")),
                    1 => {}
                    n => tally.duplicates.push(format!("{cronjob}@{slot} x{n}")),
                }
            }
        }
        tally
    }

    /// Wait until each of `cronjobs` has a Job for `slot`; their creations. On a timeout, the
    /// panic names those without one.
    pub(crate) async fn wait_slot(
        &self,
        cronjobs: &[String],
        slot: i64,
        limit: Duration,
    ) -> Vec<i64> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let firsts: Vec<Option<i64>> = cronjobs
                .iter()
                .map(|cronjob| self.runs(cronjob, slot).iter().min().copied())
                .collect();
            if let Some(created) = firsts.iter().copied().collect::<Option<Vec<i64>>>() {
                return created;
            }
            if tokio::time::Instant::now() >= deadline {
                let missing: Vec<&String> = cronjobs
                    .iter()
                    .zip(&firsts)
                    .filter(|(_, first)| first.is_none())
                    .map(|(name, _)| name)
                    .take(10)
                    .collect();
                panic!("after {limit:?}, no Job for minute {slot} of {missing:?}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// `count` CronJobs `f-NNN` and [`GONE`] CronJobs `gone-N`, on `* * * * *` with suspended
/// Jobs (no Pod), created 16 at a time; their names.
pub(crate) async fn create_cronjobs(env: &Env, count: usize) -> Vec<String> {
    let names: Vec<String> = (0..count)
        .map(|i| format!("f-{i:03}"))
        .chain((0..GONE).map(|i| format!("gone-{i}")))
        .collect();
    futures::stream::iter(names.clone())
        .for_each_concurrent(16, |name| async move {
            crate::cronjob::create(env, crate::cronjob::quiet_every_minute(&name)).await;
        })
        .await;
    names
}

/// The p50, p99 and max of `values`.
pub(crate) fn spread(values: &[i64]) -> (i64, i64, i64) {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let at = |q: f64| {
        let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
        sorted.get(i).copied().unwrap_or_default()
    };
    (
        at(0.5),
        at(0.99),
        sorted.last().copied().unwrap_or_default(),
    )
}

/// A process's resident memory, MiB.
pub(crate) fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// When the API server of `env` first creates an object (a ConfigMap, tried every 250 ms, 2 s
/// each): it writes to etcd again.
async fn writable(env: &Env) -> i64 {
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> = env.api();
    wait_for(
        Duration::from_secs(120),
        "the API server to write again",
        || async {
            let probe: k8s_openapi::api::core::v1::ConfigMap =
                serde_json::from_value(json!({"metadata": {"generateName": "probe-"}})).ok()?;
            let params = kube::api::PostParams::default();
            let created = configmaps.create(&params, &probe);
            tokio::time::timeout(Duration::from_secs(2), created)
                .await
                .ok()?
                .ok()
                .map(|_| now())
        },
    )
    .await
}

/// Sleep until second `second` of minute `minute` (since the epoch).
async fn wait_past(minute: i64, second: i64) {
    let wait = (minute * 60 + second) * 1000 - jiff::Timestamp::now().as_millisecond();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Control plane faults
// ---------------------------------------------------------------------------------------------

/// A control plane of the case's own without kube-controller-manager, the API server started
/// with `apiserver_args` added.
async fn own_plane(ctx: &Ctx, apiserver_args: &[&str]) -> kronjob_envtest::ControlPlane {
    ctx.own_control_plane(kronjob_envtest::Options {
        controllers: Vec::new(),
        apiserver_args: apiserver_args.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    })
    .await
}

/// A control plane fault case: its CronJobs, the Jobs seen, and the manager.
struct Fleet {
    env: Env,
    names: Vec<String>,
    jobs: Jobs,
    watch: JoinHandle<()>,
    manager: Manager,
}

impl Fleet {
    async fn start(ctx: &Ctx, kubeconfig: &Path) -> Fleet {
        let env = Env::on(ctx, kubeconfig).await;
        let (jobs, watch) = Jobs::watch(env.api());
        let names = create_cronjobs(&env, cronjobs()).await;
        let mut manager = env.manager(&[]);
        manager.wait_ready(Duration::from_secs(60)).await;
        Fleet {
            env,
            names,
            jobs,
            watch,
            manager,
        }
    }

    /// After the fault ended at `back` (the slot `slot` due during it): the API server writes
    /// again (a ConfigMap created, tried every 250 ms); the slot runs once for every CronJob; a
    /// CronJob created now runs the next slot (the CronJob watch came back by itself); the
    /// next slot runs once and on time; the manager never restarted. Prints the recovery: the
    /// slot's Jobs' creation after `back` and after the API server wrote again (p50/p99/max),
    /// and the manager's memory before the fault (`rss_before`) and after.
    async fn recovered(mut self, fault: &str, slot: i64, back: i64, rss_before: f64) {
        let writes = writable(&self.env).await;
        let created = self
            .jobs
            .wait_slot(&self.names, slot, Duration::from_secs(60))
            .await;
        let late: Vec<i64> = created.iter().map(|c| c - back).collect();
        let (p50, p99, max) = spread(&late);
        let after_writes: Vec<i64> = created.iter().map(|c| c - writes).collect();
        let (w50, w99, wmax) = spread(&after_writes);
        let after_slot: Vec<i64> = created.iter().map(|c| c - slot * 60).collect();
        let (s50, s99, smax) = spread(&after_slot);
        // Created 15 s after the return at the earliest: on the suite's etcd (3.4.23, without
        // the progress notifications the API server's consistent list from its cache relies
        // on), a list in the first seconds after an API server restart can miss an object just
        // created, and a watch started from that list never sends it (a watch of the test's
        // own missed it as the manager's did, until the next relist). The API server may also
        // still answer 429 while its caches fill again.
        wait_past(back.div_euclid(60), back.rem_euclid(60) + 15).await;
        wait_for(
            Duration::from_secs(30),
            "a CronJob created after the fault",
            || async {
                let cj: kronjob::api::CronJob =
                    serde_json::from_value(crate::cronjob::quiet_every_minute("after")).ok()?;
                self.env
                    .api::<kronjob::api::CronJob>()
                    .create(&Default::default(), &cj)
                    .await
                    .ok()
            },
        )
        .await;
        let mut all = self.names.clone();
        all.push("after".into());
        let next = self
            .jobs
            .wait_slot(&all, slot + 1, Duration::from_secs(90))
            .await;
        let (next_p50, next_p99, next_late) =
            spread(&next.iter().map(|c| c - (slot + 1) * 60).collect::<Vec<_>>());
        assert!(
            self.manager.exited().is_none(),
            "the manager never restarts:\n{}",
            self.manager.log()
        );
        self.jobs.add_listed(&self.env.api()).await;
        let tally = self.jobs.tally(&self.names, slot, slot + 1);
        let after = self.jobs.runs("after", slot + 1).len();
        let rss_after = rss_mib(self.manager.pid());
        eprintln!(
            "faults: {fault}: back {} s after the slot, the API server writing again {} s after the return; the slot's Jobs created {s50}/{s99}/{smax} s (p50/p99/max) after the slot, {p50}/{p99}/{max} s after the return, {w50}/{w99}/{wmax} s after the API server wrote again; next slot {next_p50}/{next_p99}/{next_late} s after it was due; {} missed, {} duplicates; manager RSS {rss_before:.1} MiB before, {rss_after:.1} MiB after",
            back - slot * 60,
            writes - back,
            tally.missed.len(),
            tally.duplicates.len()
        );
        assert!(
            tally.missed.is_empty() && tally.duplicates.is_empty() && after == 1,
            "every slot once: {tally:?}, `after` ran {after} times"
        );
        // Generous bounds: the figures above are what is measured; these catch a manager that
        // waited for a backoff of minutes.
        assert!(
            p99 <= 15,
            "the missed slot soon after the return: p99 {p99} s"
        );
        assert!(next_late <= 5, "the next slot on time: {next_late} s");
        self.watch.abort();
        drop(self.manager);
    }
}

/// etcd SIGKILLed 5 s before a slot, started again 20 s later.
pub async fn etcd_killed_at_a_slot_and_away_for_20s(ctx: Ctx) {
    let mut plane = own_plane(&ctx, &[]).await;
    let fleet = Fleet::start(&ctx, plane.kubeconfig()).await;
    let slot = at_second(55).await + 1;
    let rss = rss_mib(fleet.manager.pid());
    plane.kill_etcd();
    tokio::time::sleep(Duration::from_secs(20)).await;
    plane.start_etcd().await.expect("etcd starts again");
    let back = now();
    fleet
        .recovered(
            "etcd killed 5 s before a slot, back 20 s later",
            slot,
            back,
            rss,
        )
        .await;
}

/// The API server stopped as a rollout does 3 s before a slot: it goes on serving for 1 s
/// (`--shutdown-delay-duration`), then answers 429 `Retry-After: 5` until its requests drain,
/// exits, and is started again at once.
pub async fn api_server_restarted_gracefully_at_a_slot(ctx: Ctx) {
    let mut plane = own_plane(
        &ctx,
        &[
            "--shutdown-delay-duration=1s",
            "--shutdown-send-retry-after=true",
        ],
    )
    .await;
    let fleet = Fleet::start(&ctx, plane.kubeconfig()).await;
    let slot = at_second(57).await + 1;
    let rss = rss_mib(fleet.manager.pid());
    let exited = plane.stop_apiserver(Duration::from_secs(60)).await;
    assert!(
        exited.is_some_and(|s| s.success()),
        "a graceful stop: {exited:?}"
    );
    plane
        .start_apiserver()
        .await
        .expect("the API server starts again");
    let back = now();
    let throttled = metric_sum(
        &fleet.manager.metrics_text().await,
        "kronjob_api_throttled_total",
        &[],
    );
    eprintln!(
        "faults: graceful API server restart: the manager was answered 429 {throttled} times"
    );
    fleet
        .recovered(
            "API server restarted gracefully 3 s before a slot",
            slot,
            back,
            rss,
        )
        .await;
}

/// The API server SIGKILLed 2 s before a slot and started again at once.
pub async fn api_server_killed_at_a_slot(ctx: Ctx) {
    let mut plane = own_plane(&ctx, &[]).await;
    let fleet = Fleet::start(&ctx, plane.kubeconfig()).await;
    let slot = at_second(58).await + 1;
    let rss = rss_mib(fleet.manager.pid());
    plane.kill_apiserver();
    plane
        .start_apiserver()
        .await
        .expect("the API server starts again");
    let back = now();
    fleet
        .recovered("API server killed 2 s before a slot", slot, back, rss)
        .await;
}

// ---------------------------------------------------------------------------------------------
// Throttling
// ---------------------------------------------------------------------------------------------

/// Whether the manager's metrics say it leads.
pub(crate) async fn leads(manager: &Manager) -> bool {
    manager
        .metrics_text()
        .await
        .lines()
        .any(|l| l == "kronjob_leader 1")
}

/// The API server's metric `name` summed over the series with `labels`.
async fn apiserver_metric(env: &Env, name: &str, labels: &[(&str, &str)]) -> f64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = env
        .client
        .request_text(request)
        .await
        .expect("the API server's metrics");
    metric_sum(&text, name, labels)
}

/// The manager runs as the chart's ServiceAccount, with the chart's FlowSchema, on an API
/// server whose API Priority and Fairness gives that ServiceAccount's other requests one seat
/// and a queue of 5 (past it: 429): 200 CronJobs' slot (see [`cronjobs`]) runs once, the manager counts the
/// 429s, and its Lease requests, matched by the chart's FlowSchema first, go to
/// `leader-election`: it never loses the Lease.
pub async fn apf_throttling_never_costs_the_lease(ctx: Ctx) {
    // 150 seats in all: a level of one share gets one.
    let plane = own_plane(
        &ctx,
        &[
            "--max-requests-inflight=100",
            "--max-mutating-requests-inflight=50",
        ],
    )
    .await;
    let env = Env::on(&ctx, plane.kubeconfig()).await;
    let ns = env.namespace.clone();
    let release = "apf";
    let fullname = format!("{release}-kronjob");
    let objects = crate::rbac::render(&env, release, &[]);
    crate::rbac::apply_identity(&ctx, &env, &objects);
    let schema = objects
        .iter()
        .find(|o| o["kind"] == "FlowSchema")
        .expect("the chart's FlowSchema")
        .clone();
    let schema_name = schema["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    let account = objects
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .and_then(|o| o["metadata"]["name"].as_str())
        .expect("the ServiceAccount")
        .to_string();
    let throttle = format!("throttle-{ns}");
    let apf = json!({"apiVersion": "v1", "kind": "List", "items": [
        schema,
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
         "metadata": {"name": throttle},
         "spec": {"type": "Limited", "limited": {
             "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
             "limitResponse": {"type": "Queue", "queuing": {
                 "queues": 1, "handSize": 1, "queueLengthLimit": 5}}}}},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
         "metadata": {"name": throttle},
         "spec": {"matchingPrecedence": 1000, "priorityLevelConfiguration": {"name": throttle},
             "distinguisherMethod": {"type": "ByUser"},
             "rules": [{"subjects": [{"kind": "ServiceAccount",
                     "serviceAccount": {"name": account, "namespace": ns}}],
                 "resourceRules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"],
                     "clusterScope": true, "namespaces": ["*"]}],
                 "nonResourceRules": [{"nonResourceURLs": ["*"], "verbs": ["*"]}]}]}}
    ]});
    let file = ctx.logs.join("apf.json");
    std::fs::write(&file, apf.to_string()).expect("write the APF objects");
    env.kubectl_ok(&["apply", "-f", file.to_str().expect("utf-8 path")]);
    let (jobs, watch) = Jobs::watch(env.api());
    let names = create_cronjobs(&env, cronjobs()).await;
    let (mut manager, _, _) =
        crate::rbac::start_as_the_chart(&ctx, &env, &objects, &fullname, &["--metrics-secure"]);
    manager.wait_ready(Duration::from_secs(90)).await;
    wait_for(Duration::from_secs(30), "the manager to lead", || async {
        leads(&manager).await.then_some(())
    })
    .await;
    let lease: Api<Lease> = env.api();
    let lease_name = format!("{fullname}-leader");
    let transitions = |l: Lease| l.spec.and_then(|s| s.lease_transitions).unwrap_or_default();
    let before = transitions(lease.get(&lease_name).await.expect("the Lease"));
    // The next slot under throttling (the one after if this one is under 10 s away); the
    // leader gauge sampled every 500 ms until its last Job and 20 s more.
    let first = (now() + 10).div_euclid(60) + 1;
    let (samples, sampler) = sample_leaders(vec![manager.metrics], Duration::from_millis(500));
    let limit = Duration::from_secs(120 + u64::try_from(names.len()).unwrap_or(0) / 4);
    let created = jobs.wait_slot(&names, first, limit).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    sampler.abort();
    let not_leading = samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(_, leading)| !leading[0])
        .count();
    let (p50, p99, max) = spread(&created.iter().map(|c| c - first * 60).collect::<Vec<_>>());
    jobs.add_listed(&env.api()).await;
    let tally = jobs.tally(&names, first, first);
    let after = transitions(lease.get(&lease_name).await.expect("the Lease"));
    let text = manager.metrics_text().await;
    let throttled = metric_sum(&text, "kronjob_api_throttled_total", &[]);
    let waited = metric_sum(&text, "kronjob_api_retry_wait_seconds_total", &[]);
    let slow_posts = metric_sum(
        &text,
        "kronjob_api_request_duration_seconds_count",
        &[("method", "POST")],
    ) - metric_sum(
        &text,
        "kronjob_api_request_duration_seconds_bucket",
        &[("method", "POST"), ("le", "0.5")],
    );
    let lease_level = apiserver_metric(
        &env,
        "apiserver_flowcontrol_dispatched_requests_total",
        &[
            ("flow_schema", &schema_name),
            ("priority_level", "leader-election"),
        ],
    )
    .await;
    let throttled_level = apiserver_metric(
        &env,
        "apiserver_flowcontrol_dispatched_requests_total",
        &[("flow_schema", &throttle), ("priority_level", &throttle)],
    )
    .await;
    let rejected = apiserver_metric(
        &env,
        "apiserver_flowcontrol_rejected_requests_total",
        &[("priority_level", &throttle)],
    )
    .await;
    eprintln!(
        "faults: APF, one seat and a queue of 5: slot {first}'s Jobs created {p50}/{p99}/{max} s (p50/p99/max) after it; {} missed, {} duplicates; the manager counted {throttled} 429s and waited {waited:.1} s to retry, {slow_posts} POSTs took over 0.5 s; the API server dispatched {lease_level} Lease requests at leader-election, {throttled_level} at the throttled level and rejected {rejected}; lease transitions {before} -> {after}, not leading in {not_leading} samples",
        tally.missed.len(),
        tally.duplicates.len()
    );
    assert!(
        tally.missed.is_empty() && tally.duplicates.is_empty(),
        "every slot once: {tally:?}"
    );
    assert!(
        lease_level > 0.0 && throttled_level > 0.0,
        "the Lease requests go to leader-election ({lease_level}), the rest to the throttled level ({throttled_level})"
    );
    assert!(
        throttled > 0.0 && rejected > 0.0,
        "throttling is visible: {throttled} 429s counted, {rejected} rejected"
    );
    assert_eq!(not_leading, 0, "leadership never lost");
    assert_eq!(before, after, "no lease transition");
    assert!(
        !manager.log().contains("lost leadership"),
        "{}",
        manager.log()
    );
    watch.abort();
    drop(manager);
}

// ---------------------------------------------------------------------------------------------
// Clock skew
// ---------------------------------------------------------------------------------------------

/// Where Debian's libfaketime is (`KRONJOB_E2E_LIBFAKETIME` names another).
fn libfaketime() -> PathBuf {
    if let Some(path) = std::env::var_os("KRONJOB_E2E_LIBFAKETIME") {
        return PathBuf::from(path);
    }
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("libfaketime not found: run ./scripts/install-tools.sh"))
}

/// Which of `managers` lead, sampled every so often: (Unix milliseconds, each one's answer).
pub(crate) type Samples = Arc<Mutex<Vec<(i64, Vec<bool>)>>>;

pub(crate) fn sample_leaders(ports: Vec<u16>, every: Duration) -> (Samples, JoinHandle<()>) {
    let samples: Samples = Arc::default();
    let out = Arc::clone(&samples);
    let task = tokio::spawn(async move {
        loop {
            let mut leading = Vec::with_capacity(ports.len());
            for port in &ports {
                let text = http_get(*port, "/metrics")
                    .await
                    .map(|(_, body)| body)
                    .unwrap_or_default();
                leading.push(text.lines().any(|l| l == "kronjob_leader 1"));
            }
            let at = jiff::Timestamp::now().as_millisecond();
            out.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((at, leading));
            tokio::time::sleep(every).await;
        }
    });
    (samples, task)
}

/// When more than one led: how many samples say so, from when to when (Unix ms).
fn together(samples: &Samples) -> (usize, Option<(i64, i64)>) {
    let at: Vec<i64> = samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(_, leading)| leading.iter().filter(|l| **l).count() > 1)
        .map(|(at, _)| *at)
        .collect();
    (at.len(), at.first().zip(at.last()).map(|(a, b)| (*a, *b)))
}

/// Two replicas, one whose clock runs `KRONJOB_E2E_SKEW` seconds (5 by default) ahead of the
/// API server's and one as far behind: each measures its offset from the API server's `Date`
/// headers, exports it and logs it; the one ahead leads and runs a slot, is killed, and the
/// one behind takes over and runs the next: every Job is created at its slot by the API
/// server's clock (never before, within 3 s), each slot once, the two never lead at once.
pub async fn replicas_with_skewed_clocks_run_slots_by_the_api_servers_clock(ctx: Ctx) {
    let skew: i64 = std::env::var("KRONJOB_E2E_SKEW")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let env = Env::new(&ctx).await;
    let lib = libfaketime();
    let lib = lib.to_str().expect("utf-8 path");
    let lease = [
        "--leader-elect",
        "--leader-election-namespace",
        env.namespace.as_str(),
        "--leader-election-id",
        "skew",
    ];
    let faked = |offset: String| {
        env.manager_with_env(
            &env.kubeconfig,
            &lease,
            &[
                ("LD_PRELOAD", lib),
                ("FAKETIME", &offset),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ],
        )
    };
    let mut ahead = faked(format!("+{skew}s"));
    ahead.wait_ready(Duration::from_secs(60)).await;
    wait_for(
        Duration::from_secs(15),
        "the replica ahead to lead",
        || async { leads(&ahead).await.then_some(()) },
    )
    .await;
    let mut behind = faked(format!("-{skew}s"));
    behind.wait_ready(Duration::from_secs(60)).await;
    let (samples, sampler) = sample_leaders(
        vec![ahead.metrics, behind.metrics],
        Duration::from_millis(100),
    );
    let (jobs, watch) = Jobs::watch(env.api());
    let names: Vec<String> = (0..10).map(|i| format!("skew-{i}")).collect();
    for name in &names {
        crate::cronjob::create(&env, crate::cronjob::quiet_every_minute(name)).await;
    }
    // Each measured its offset: the API server's clock minus its own.
    for (manager, want) in [(&ahead, -skew), (&behind, skew)] {
        let text = manager.metrics_text().await;
        let offset = metric_sum(&text, "kronjob_clock_offset_seconds", &[]);
        let uncertainty = metric_sum(&text, "kronjob_clock_offset_uncertainty_seconds", &[]);
        eprintln!(
            "faults: skew {want:+} s: measured {offset:+.3} s, uncertainty {uncertainty:.3} s"
        );
        assert!(
            (offset - want as f64).abs() <= uncertainty + 0.2 && uncertainty < 0.6,
            "measured {offset} ± {uncertainty}, want {want}"
        );
        assert!(
            manager
                .log()
                .contains("the system clock is off from the API server's"),
            "the skew is logged:\n{}",
            manager.log()
        );
    }
    // The first slot after the CronJobs' creation.
    let slot = now().div_euclid(60) + 1;
    wait_past(slot, 1).await;
    let by_ahead = jobs.wait_slot(&names, slot, Duration::from_secs(30)).await;
    wait_past(slot, 20).await;
    ahead.kill();
    let by_behind = jobs
        .wait_slot(&names, slot + 1, Duration::from_secs(70))
        .await;
    sampler.abort();
    watch.abort();
    jobs.add_listed(&env.api()).await;
    let tally = jobs.tally(&names, slot, slot + 1);
    let early_late = |created: &[i64], slot: i64| {
        let offsets: Vec<i64> = created.iter().map(|c| c - slot * 60).collect();
        (
            offsets.iter().copied().min().unwrap_or_default(),
            offsets.iter().copied().max().unwrap_or_default(),
        )
    };
    let (a_min, a_max) = early_late(&by_ahead, slot);
    let (b_min, b_max) = early_late(&by_behind, slot + 1);
    let overlap = together(&samples);
    eprintln!(
        "faults: clocks {skew} s ahead and behind: Jobs created {a_min}..{a_max} s after their slot by the replica ahead, {b_min}..{b_max} s by the one behind after the handover; {} missed, {} duplicates; {} samples with both leading",
        tally.missed.len(),
        tally.duplicates.len(),
        overlap.0
    );
    assert!(
        a_min >= 0 && b_min >= 0,
        "no Job before its slot by the API server's clock"
    );
    assert!(a_max <= 3 && b_max <= 3, "every Job on time");
    assert!(
        tally.missed.is_empty() && tally.duplicates.is_empty(),
        "every slot once: {tally:?}"
    );
    assert_eq!(
        overlap.0, 0,
        "both led (samples, from/to Unix ms): {overlap:?}"
    );
    drop(behind);
    env.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// A cut network
// ---------------------------------------------------------------------------------------------

/// A TCP proxy that can stop forwarding without closing anything: while cut it reads and
/// writes nothing (what it holds waits, as in a network that drops every packet) and accepts
/// new connections without connecting them; when restored, everything moves on.
struct Proxy {
    port: u16,
    cut: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let port = listener.local_addr().expect("address").port();
        let (cut, network) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let mut network = network.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if network.wait_for(|cut| !cut).await.is_err() {
                        return;
                    }
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (from_client, to_client) = client.into_split();
                    let (from_server, to_server) = server.into_split();
                    tokio::join!(
                        pipe(from_client, to_server, network.clone()),
                        pipe(from_server, to_client, network)
                    );
                });
            }
        });
        Proxy { port, cut, task }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copy `from` to `to` while the network is up.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut network: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if network.wait_for(|cut| !cut).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            _ = network.wait_for(|cut| *cut) => continue,
        };
        let n = match read {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // Read just before a cut: held until the network is back.
        if network.wait_for(|cut| !cut).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn read_kubeconfig(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).expect("read the admin kubeconfig");
    serde_yaml_ng::from_str(&text).expect("the admin kubeconfig is YAML or JSON")
}

/// The `host:port` of the API server of the kubeconfig at `path`.
fn api_server(path: &Path) -> String {
    read_kubeconfig(path)["clusters"][0]["cluster"]["server"]
        .as_str()
        .and_then(|s| s.strip_prefix("https://"))
        .expect("an https server")
        .to_string()
}

/// The kubeconfig `admin` with its server moved to `127.0.0.1:port`, written to `path`.
fn through_proxy(admin: &Path, port: u16, path: &Path) {
    let mut config = read_kubeconfig(admin);
    for cluster in config["clusters"].as_array_mut().into_iter().flatten() {
        cluster["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
    }
    std::fs::write(path, config.to_string()).expect("write a kubeconfig");
}

/// Two replicas; the leader talks to the API server through a proxy, which stops forwarding
/// (closing nothing) 25 s before a slot and forwards again 20 s after it (45 s, three lease
/// durations). The leader stops leading at its renew deadline (within 10 s of the cut) and its
/// writes with it; the standby takes over no earlier (its Lease duration after the last
/// renewal it saw) and runs the slot, half of whose Jobs the test deletes at once (a second
/// create would then succeed); the old leader's writes held in the network (none: it was
/// fenced before the slot) create nothing; back on the network it follows.
pub async fn a_cut_network_fences_the_leader_before_the_standby_takes_over(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let kubeconfig = ctx.logs.join("through-proxy.kubeconfig");
    let proxy = Proxy::start(api_server(&env.kubeconfig)).await;
    through_proxy(&env.kubeconfig, proxy.port, &kubeconfig);
    let lease = [
        "--leader-elect",
        "--leader-election-namespace",
        env.namespace.as_str(),
        "--leader-election-id",
        "cut",
    ];
    let mut cut_off = env.manager_as(&kubeconfig, &lease);
    cut_off.wait_ready(Duration::from_secs(60)).await;
    wait_for(
        Duration::from_secs(15),
        "the first replica to lead",
        || async { leads(&cut_off).await.then_some(()) },
    )
    .await;
    let mut standby = env.manager(&lease);
    standby.wait_ready(Duration::from_secs(60)).await;
    let (jobs, watch) = Jobs::watch(env.api());
    let names: Vec<String> = (0..5)
        .map(|i| format!("f-{i}"))
        .chain((0..5).map(|i| format!("gone-{i}")))
        .collect();
    for name in &names {
        crate::cronjob::create(&env, crate::cronjob::quiet_every_minute(name)).await;
    }
    let (samples, sampler) = sample_leaders(
        vec![cut_off.metrics, standby.metrics],
        Duration::from_millis(100),
    );
    let slot = at_second(35).await + 1;
    let cut_at = jiff::Timestamp::now().as_millisecond();
    proxy.set_cut(true);
    let created = jobs.wait_slot(&names, slot, Duration::from_secs(40)).await;
    wait_past(slot, 20).await;
    proxy.set_cut(false);
    let back_at = jiff::Timestamp::now().as_millisecond();
    // Back on the network for 20 s: it follows.
    tokio::time::sleep(Duration::from_secs(20)).await;
    sampler.abort();
    watch.abort();
    assert!(!leads(&cut_off).await, "the old leader follows");
    assert!(leads(&standby).await, "the new leader leads on");
    jobs.add_listed(&env.api()).await;
    let tally = jobs.tally(&names, slot, slot);
    let samples_now = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let stopped = samples_now
        .iter()
        .find(|(at, leading)| *at >= cut_at && !leading[0])
        .map(|(at, _)| *at);
    let took_over = samples_now
        .iter()
        .find(|(at, leading)| *at >= cut_at && leading[1])
        .map(|(at, _)| *at);
    let relead = samples_now
        .iter()
        .any(|(at, leading)| *at >= back_at && leading[0]);
    let overlap = together(&samples);
    let (stopped, took_over) = (
        stopped.expect("the cut-off leader stopped leading"),
        took_over.expect("the standby took over"),
    );
    let latest = created.iter().max().copied().unwrap_or_default() - slot * 60;
    eprintln!(
        "faults: network cut for 45 s: the leader stopped leading {:.1} s after the cut, the standby led {:.1} s after it ({:.1} s later); the slot's Jobs created by {latest} s after it; {} missed, {} duplicates; {} samples with both leading",
        (stopped - cut_at) as f64 / 1000.0,
        (took_over - cut_at) as f64 / 1000.0,
        (took_over - stopped) as f64 / 1000.0,
        tally.missed.len(),
        tally.duplicates.len(),
        overlap.0
    );
    assert_eq!(
        overlap.0, 0,
        "both led (samples, from/to Unix ms): {overlap:?}"
    );
    assert!(
        stopped - cut_at <= 10_500,
        "fenced within the renew deadline of the cut: {} ms",
        stopped - cut_at
    );
    assert!(stopped < took_over, "stopped before the standby took over");
    assert!(!relead, "the old leader never led again");
    assert!(
        tally.missed.is_empty() && tally.duplicates.is_empty(),
        "every slot once: {tally:?}"
    );
    assert!(
        cut_off.log().contains("lost leadership"),
        "{}",
        cut_off.log()
    );
    drop(standby);
    drop(cut_off);
    env.cleanup().await;
}
