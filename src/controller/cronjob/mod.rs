//! The CronJob reconciler: observe (owner index) -> plan (pure) -> apply (API calls) -> one
//! status write.
//!
//! - [`reconcile`]: one reconcile and the error policy;
//! - [`plan`]: the pure decision, in named steps;
//! - [`observe`], [`apply`], [`status`]: reading, acting, the status body;
//! - [`context`], [`metrics`]: what a reconcile needs;
//! - [`run`] (here): the watches and the controller.

pub mod apply;
pub mod context;
pub mod manual;
pub mod metrics;
pub mod observe;
pub mod plan;
pub mod reconcile;
pub mod status;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::runtime::controller::Controller;
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, predicates, watcher};
use tokio_util::sync::CancellationToken;

pub use context::Context;
pub use metrics::ReconcilerMetrics;
pub use plan::PlanConfig;
pub use reconcile::{Error, error_policy, reconcile};

use crate::api::CronJob;
use crate::controller::index::{self, IndexWriter, OwnerIndex};
use crate::controller::{Scope, Shared, Stopped, jobs};

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

/// Run the CronJob controller until `shutdown` is cancelled (in-flight reconciles finish).
///
/// One watch of CronJobs and one of Jobs per namespace (or cluster-wide when
/// `scope.namespaces` is empty); the Job watch feeds the owner index and triggers the owning
/// CronJob. `ready` is called once both caches have listed.
pub async fn run(
    shared: Shared,
    args: ReconcilerArgs,
    metrics: ReconcilerMetrics,
    ready: impl FnOnce() + Send,
    shutdown: CancellationToken,
) -> Result<(), Stopped> {
    let Shared {
        client,
        clock,
        scope,
        instance,
    } = shared;
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
        instance,
    ));
    let gauge_reader = cj_reader.clone();
    let pruned = Arc::clone(&ctx);
    let controller = Controller::for_stream(cronjobs, cj_reader.clone())
        .owns_stream(jobs)
        .with_config(kube::runtime::Config::default().concurrency(args.concurrency))
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(move |res| {
            metrics
                .managed_cronjobs
                .set(i64::try_from(gauge_reader.len()).unwrap_or(i64::MAX));
            pruned
                .failures
                .retain(|cronjob| gauge_reader.get(cronjob).is_some());
            log_controller_error(res.err(), &pruned.log);
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
    if shutdown.is_cancelled() {
        Ok(())
    } else {
        Err(Stopped("CronJob"))
    }
}

/// Report what the controller stream says went wrong: watch failures at `warn` (throttled);
/// failed reconciles are reported by the error policy.
fn log_controller_error<E: std::error::Error>(
    error: Option<kube::runtime::controller::Error<Error, E>>,
    log: &crate::telemetry::Throttle,
) {
    use kube::runtime::controller::Error as Stream;
    match error {
        None | Some(Stream::ReconcilerFailed(..)) => {}
        Some(Stream::ObjectNotFound(obj)) => tracing::debug!(%obj, "deleted before its reconcile"),
        Some(e) => {
            if let Some(skipped) = log.allow("watch") {
                tracing::warn!(error = %crate::telemetry::error_chain(&e), skipped, "watch failed; retrying");
            }
        }
    }
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
                .modify(jobs::slim)
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

#[cfg(test)]
mod tests;
