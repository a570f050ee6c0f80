//! Running kronjob's controllers against the simulated API server (`kronjob-apisim`).

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kronjob::clock::Clock;
use kronjob::controller::cronjob::{self, ReconcilerArgs, ReconcilerMetrics};
use kronjob::controller::{Scope, Shared};
use kronjob_apisim::{ApiSim, Resource};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::api_script::record_call;

/// A clock that moves with tokio's clock (paused or not), from `start`: simulations run minutes
/// of wall-clock time in milliseconds under `tokio::time::pause()`.
#[derive(Debug)]
pub struct TokioClock {
    start: Timestamp,
    at: tokio::time::Instant,
}

impl TokioClock {
    /// The clock reads `start` now.
    pub fn new(start: Timestamp) -> Arc<Self> {
        Arc::new(Self {
            start,
            at: tokio::time::Instant::now(),
        })
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = SignedDuration::try_from(self.at.elapsed()).unwrap_or(SignedDuration::MAX);
        self.start.saturating_add(elapsed).unwrap_or(self.start)
    }
}

/// The simulated API server's clock reading `clock`.
pub fn sim_clock(clock: Arc<dyn Clock>) -> kronjob_apisim::Clock {
    Arc::new(move || clock.now())
}

/// A CronJob object `ns/name`, created at `created`, its last slot `last` (if any).
pub fn cronjob_json(
    ns: &str,
    name: &str,
    schedule: &str,
    created: &str,
    last: Option<&str>,
) -> Value {
    let mut cj = json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
        "spec": {
            "schedule": schedule, "concurrencyPolicy": "Allow", "suspend": false,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
        }
    });
    if let Some(last) = last {
        cj["status"] = json!({"lastScheduleTime": last});
    }
    cj
}

/// The CronJob controller running against `sim` until the token is cancelled.
pub struct Running {
    /// Stops the controller.
    pub stop: CancellationToken,
    /// Its metrics.
    pub metrics: ReconcilerMetrics,
    /// The controller's task.
    pub task: tokio::task::JoinHandle<Result<(), kronjob::task::TaskError>>,
    /// Resolved once its caches have synced.
    pub synced: tokio::sync::oneshot::Receiver<()>,
}

/// Start the CronJob controller against `sim`, reading time from `clock`.
pub fn run_cronjob_controller(sim: &ApiSim, clock: Arc<dyn Clock>, concurrency: u16) -> Running {
    run_cronjob_controller_with(sim, clock, concurrency, Default::default())
}

/// [`run_cronjob_controller`], creating the workload kinds `kinds` (`--workload-kinds`).
pub fn run_cronjob_controller_with(
    sim: &ApiSim,
    clock: Arc<dyn Clock>,
    concurrency: u16,
    kinds: kronjob::controller::workloads::AllowedKinds,
) -> Running {
    let shared = Shared {
        client: sim.client(),
        clock,
        scope: Scope::default(),
        instance: Some("test".into()),
        gate: Default::default(),
        shard: Default::default(),
        tasks: Default::default(),
        records: Default::default(),
    };
    let args = ReconcilerArgs {
        concurrency,
        default_job_ttl: None,
        cronjob_metrics_limit: cronjob::series::DEFAULT_LIMIT,
        workload_kinds: kinds,
    };
    let metrics = ReconcilerMetrics::new(&mut Default::default());
    let stop = CancellationToken::new();
    let (tx, synced) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(cronjob::run(
        shared,
        args,
        metrics.clone(),
        (None, None),
        move || {
            let _ = tx.send(());
        },
        stop.clone(),
    ));
    Running {
        stop,
        metrics,
        task,
        synced,
    }
}

impl Running {
    /// Stop and wait (bounded).
    pub async fn shut_down(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.task).await;
    }
}

/// Append the requests `sim` served to the API call log (the RBAC check reads it).
pub fn record_calls(sim: &ApiSim) {
    for r in sim.requests() {
        let query = if r.query.is_empty() {
            String::new()
        } else {
            format!("?{}", r.query)
        };
        record_call(&r.method, &format!("{}{query}", r.path));
    }
}

/// Requests by `verb resource` since the log was cleared, writes only.
pub fn writes(sim: &ApiSim) -> std::collections::BTreeMap<String, usize> {
    sim.counts()
        .into_iter()
        .filter(|(k, _)| {
            ["create", "update", "patch", "delete"]
                .iter()
                .any(|v| k.starts_with(&format!("{v} ")))
        })
        .collect()
}

/// The kronjob CronJobs, as the simulated API serves them.
pub fn cronjobs() -> Resource {
    Resource::new("batch.kronjob.dev", "v1", "cronjobs", true)
}

/// The CronJob controller on `sim`, once its caches have synced and 5 s more have passed (its
/// first status write, the template check's record, has landed).
pub async fn synced_controller(sim: &ApiSim, clock: &Arc<TokioClock>) -> Running {
    let mut running = run_cronjob_controller(sim, clock.clone(), 4);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(5)).await;
    running
}

/// The Jobs `sim` created (201), by name, in order.
pub fn created_jobs(sim: &ApiSim) -> Vec<String> {
    sim.requests()
        .into_iter()
        .filter(|r| r.verb == "create" && r.resource == "jobs" && r.status == 201)
        .filter_map(|r| r.name)
        .collect()
}
