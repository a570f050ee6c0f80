//! The CronJob reconciler: observe (owner index) -> plan (pure) -> apply (API calls) -> one
//! status write.

pub mod apply;
pub mod metrics;
pub mod observe;
pub mod plan;
pub mod status;

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Api, Client, ResourceExt};

pub use metrics::ReconcilerMetrics;
pub use plan::PlanConfig;

use crate::api::{ANNOTATION_INSTANTIATE, CronJob};
use crate::clock::Clock;
use crate::controller::Scope;
use crate::controller::index::{self, IndexWriter, OwnerIndex};

/// Reporting controller name on Events.
pub const REPORTER: &str = "kronjob";

/// Errors of the CronJob reconciler.
#[derive(thiserror::Error, Debug)]
pub enum Error {
    /// An API call failed.
    #[error("kubernetes API error: {0}")]
    Kube(#[source] kube::Error),
    /// The CronJob lacks a field the API always sets (name, namespace, UID).
    #[error("CronJob is missing {0}")]
    MissingField(&'static str),
    /// The CronJob does not exist.
    #[error("CronJob {0} not found")]
    NotFound(String),
}

impl Error {
    /// A fixed, low-cardinality category for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(s)) if s.is_conflict() => "api_conflict",
            Error::Kube(kube::Error::Api(s)) if s.is_not_found() => "api_not_found",
            Error::Kube(kube::Error::Api(s)) if s.is_forbidden() => "api_forbidden",
            Error::Kube(kube::Error::Api(s)) if s.is_invalid() => "api_invalid",
            Error::Kube(kube::Error::Api(s)) if s.code >= 500 || s.code == 429 => "api_server",
            Error::Kube(kube::Error::Api(_)) => "api_other",
            Error::Kube(_) => "transport",
            Error::MissingField(_) => "invalid_object",
            Error::NotFound(_) => "not_found",
        }
    }

    /// Whether retrying without a change to the object cannot help.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Error::MissingField(_))
    }
}

/// Parse `--default-job-ttl` (`3600`, `30m`, `24h`, ...) into whole seconds.
pub fn parse_ttl(s: &str) -> Result<i32, String> {
    let d = crate::duration::parse_flag_duration(s)?;
    if d.subsec_nanos() != 0 {
        return Err(format!("TTL {s:?} must be whole seconds"));
    }
    i32::try_from(d.as_secs()).map_err(|_| format!("TTL {s:?} is too large"))
}

/// Command-line settings of the CronJob reconciler.
#[derive(clap::Args, Debug, Clone)]
pub struct ReconcilerArgs {
    /// Most CronJobs reconciled at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// `ttlSecondsAfterFinished` for Jobs whose template sets none, e.g. `24h`; unset: none.
    #[arg(long, value_parser = parse_ttl)]
    pub default_job_ttl: Option<i32>,
}

/// Everything a reconcile needs.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Event publisher (reporter `kronjob`).
    pub recorder: Recorder,
    /// The one source of "now".
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: ReconcilerMetrics,
    /// Plan settings.
    pub config: PlanConfig,
    /// Jobs by owner.
    pub index: OwnerIndex,
    /// Consecutive transient failures per CronJob, for backoff.
    failures: Mutex<HashMap<ObjectRef<CronJob>, u32>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("clock", &self.clock)
            .field("config", &self.config)
            .field("index_len", &self.index.len())
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context; `index` is the owner index the controller's Job watch keeps current.
    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        metrics: ReconcilerMetrics,
        config: PlanConfig,
        index: OwnerIndex,
    ) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: REPORTER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        Self {
            client,
            recorder,
            clock,
            metrics,
            config,
            index,
            failures: Mutex::default(),
        }
    }

    /// Drop the backoff counters of CronJobs for which `exists` is false (deleted ones). The
    /// map is empty when all is well, so this costs nothing then.
    pub fn forget_gone(&self, exists: impl Fn(&ObjectRef<CronJob>) -> bool) {
        let mut failures = self.failures();
        if !failures.is_empty() {
            failures.retain(|cronjob, _| exists(cronjob));
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<CronJob>, u32>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reconcile one CronJob: observe, plan, apply, and write status once if it changed.
pub async fn reconcile(cj: Arc<CronJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    ctx.metrics.reconciles.inc();
    let result = reconcile_inner(&cj, &ctx).await;
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    if result.is_ok() {
        ctx.failures().remove(&ObjectRef::from_obj(cj.as_ref()));
    }
    result
}

async fn reconcile_inner(cj: &CronJob, ctx: &Context) -> Result<Action, Error> {
    if !ctx.index.is_ready() {
        // The Job cache has not listed yet: planning now could miss running Jobs.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let name = cj
        .metadata
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let namespace = cj
        .metadata
        .namespace
        .as_deref()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let now = ctx.clock.now();
    let jobs = observe::observe(ctx, cj).await?;
    let plan = plan::plan(cj, &jobs, now, &ctx.config);
    let requeue = plan.requeue_after;
    let mut applied = apply::apply(ctx, cj, plan).await;
    applied.status.active_count = i32::try_from(applied.status.active.len()).unwrap_or(i32::MAX);
    let current = cj.status.clone().unwrap_or_default();
    if applied.status != current {
        let api: Api<CronJob> = Api::namespaced(ctx.client.clone(), namespace);
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(status::status_patch(&applied.status)),
        )
        .await
        .map_err(Error::Kube)?;
    }
    if let Some(e) = applied.error {
        return Err(e);
    }
    Ok(match requeue {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// Backoff after the `n`th consecutive failure: 1 s doubling to 5 min, times 1..2 jitter.
pub fn backoff(n: u32) -> Duration {
    let base = Duration::from_secs(1)
        .saturating_mul(1u32 << n.min(9))
        .min(Duration::from_secs(300));
    let mut h = RandomState::new().build_hasher();
    h.write_u32(n);
    let jitter = (h.finish() % 1000) as f64 / 1000.0;
    base.mul_f64(1.0 + jitter)
}

/// What to do after a failed reconcile: permanent errors wait for an edit; transient ones
/// back off per object with jitter.
pub fn error_policy(cj: Arc<CronJob>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics
        .reconcile_errors
        .get_or_create(&metrics::ErrorLabels {
            category: error.category(),
        })
        .inc();
    tracing::warn!(cronjob = %cj.name_any(), category = error.category(), %error, "reconcile failed");
    if error.is_permanent() {
        return Action::await_change();
    }
    let mut failures = ctx.failures();
    let n = failures
        .entry(ObjectRef::from_obj(cj.as_ref()))
        .or_insert(0);
    *n = n.saturating_add(1);
    Action::requeue(backoff(*n - 1))
}

/// Run the CronJob controller until `shutdown` resolves (in-flight reconciles finish).
///
/// One watch of CronJobs and one of Jobs per namespace (or cluster-wide when
/// `scope.namespaces` is empty); the Job watch feeds the owner index and triggers the owning
/// CronJob. `ready` is called once both caches have listed.
pub async fn run(
    client: Client,
    args: ReconcilerArgs,
    clock: Arc<dyn Clock>,
    metrics: ReconcilerMetrics,
    scope: Scope,
    ready: impl FnOnce() + Send,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), Error> {
    let (index, index_writer) = index::owner_index();
    let jobs = job_trigger_stream(&client, &scope, index.clone(), index_writer);

    let mut cj_config = watcher::Config::default();
    if let Some(sel) = &scope.selector {
        cj_config = cj_config.labels(sel);
    }
    let (cj_reader, cj_writer) = reflector::store::<CronJob>();
    let snapshot_reader = cj_reader.clone();
    let cj_watches = scope
        .apis::<CronJob>(&client)
        .into_iter()
        .map(|(ns, api)| {
            (
                ns,
                watcher(api, cj_config.clone())
                    .backoff(super::backoff::watch_backoff())
                    .boxed(),
            )
        })
        .collect();
    let cronjobs = reflector::reflector(
        cj_writer,
        index::merge_watches(cj_watches, move || snapshot_reader.state()),
    )
    .applied_objects()
    .predicate_filter(predicates::generation, Default::default());

    let ctx = Arc::new(Context::new(
        client,
        clock,
        metrics.clone(),
        PlanConfig {
            default_job_ttl: args.default_job_ttl,
        },
        index.clone(),
    ));
    let gauge_reader = cj_reader.clone();
    let pruned = Arc::clone(&ctx);
    let controller = Controller::for_stream(cronjobs, cj_reader.clone())
        .owns_stream(jobs)
        .with_config(kube::runtime::Config::default().concurrency(args.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(move |res| {
            metrics
                .managed_cronjobs
                .set(i64::try_from(gauge_reader.len()).unwrap_or(i64::MAX));
            pruned.forget_gone(|cronjob| gauge_reader.get(cronjob).is_some());
            if let Err(e) = res {
                tracing::debug!(error = %e, "controller event");
            }
            futures::future::ready(())
        });
    let readiness = async move {
        let _ = cj_reader.wait_until_ready().await;
        index.wait_until_ready().await;
        ready();
        futures::future::pending::<()>().await;
    };
    tokio::select! {
        () = controller => {},
        () = readiness => {},
    }
    Ok(())
}

/// The Job watch: label-filtered, slimmed, merged over namespaces, applied to the owner
/// index, and turned into the objects that trigger their owners.
fn job_trigger_stream(
    client: &Client,
    scope: &Scope,
    index: OwnerIndex,
    mut writer: IndexWriter,
) -> impl futures::Stream<Item = Result<Job, watcher::Error>> + Send + 'static {
    let watches = scope
        .apis::<Job>(client)
        .into_iter()
        .map(|(ns, api)| {
            let s = watcher(api, index::job_watch_config())
                .backoff(super::backoff::watch_backoff())
                .modify(index::strip_job)
                .boxed();
            (ns, s)
        })
        .collect();
    index::merge_watches(watches, move || index.snapshot())
        .map(move |ev| {
            if let Ok(ev) = &ev {
                writer.apply_watcher_event(ev);
            }
            ev
        })
        .touched_objects()
}

/// `kronjob trigger`: create a Job from the CronJob's template now, named
/// `<cronjob>-manual-<unix seconds>`, annotated `batch.kronjob.dev/instantiate: manual`, owned
/// by the CronJob.
pub async fn trigger(
    client: Client,
    namespace: &str,
    name: &str,
    now: Timestamp,
) -> Result<Job, Error> {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), namespace);
    let cj = cronjobs
        .get_opt(name)
        .await
        .map_err(Error::Kube)?
        .ok_or_else(|| Error::NotFound(format!("{namespace}/{name}")))?;
    let job_name = format!("{name}-manual-{}", now.as_second());
    let job = plan::job_from_template(
        &cj,
        job_name,
        (ANNOTATION_INSTANTIATE, "manual".to_string()),
        None,
    )
    .ok_or(Error::MissingField("metadata.uid"))?;
    let jobs: Api<Job> = Api::namespaced(client, namespace);
    jobs.create(&PostParams::default(), &job)
        .await
        .map_err(Error::Kube)
}

#[cfg(test)]
mod tests;
