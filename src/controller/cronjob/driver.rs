//! The CronJob controller as a process part: the CronJob and Job watches (each its own branch,
//! feeding the controller through a channel), the controller with its concurrency, the
//! pruning of state about deleted CronJobs, the shard assignment's follower, and the
//! background workers that send what reconciles queued.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedSender, unbounded};
use kube::Client;
use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use super::args::ReconcilerArgs;
use super::context::Context;
use super::error::Error;
use super::metrics::ReconcilerMetrics;
use super::plan::PlanConfig;
use super::reconcile::{error_policy, reconcile};
use crate::api::Calendar;
use crate::api::{ANNOTATION_BACKFILL, ANNOTATION_TRIGGER};
use crate::controller::cache::{CachedCronJob, SlimJob};
use crate::controller::calendars::{self, CalendarIndex};
use crate::controller::owner_index::{self, IndexWriter, OwnerIndex};
use crate::controller::slot_records::{self, SlotRecords};
use crate::controller::ttl::{JobTap, WorkloadTap};
use crate::controller::workloads::Workloads;
use crate::controller::{Scope, Shared, shard};
use crate::task::{TaskError, TaskSet};

/// How often `kronjob_shard_cronjobs` is recounted (CronJobs come and go between
/// reassignments).
const SHARD_GAUGE_EVERY: Duration = Duration::from_secs(5);

/// CronJobs per page of the CronJob list. A CronJob on the wire carries its managedFields and
/// often a last-applied annotation (~20 KB each once its status is written every minute): a
/// page of 100 is ~2 MB of text to hold while it decodes, where kube's default 500 made ~10 MB.
const CRONJOB_PAGE: u32 = 100;

/// How often state about deleted CronJobs (failure counts, known statuses) is dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// What makes a CronJob change worth a reconcile: a new generation (a spec edit), a new
/// manual-run or backfill request; status and other metadata changes are ours or do not
/// matter.
fn spec_or_trigger(cj: &CachedCronJob) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    cj.metadata.generation.hash(&mut hasher);
    cj.annotations().get(ANNOTATION_TRIGGER).hash(&mut hasher);
    cj.annotations().get(ANNOTATION_BACKFILL).hash(&mut hasher);
    Some(hasher.finish())
}

/// The name the CronJob controller is supervised by.
pub const NAME: &str = "CronJob controller";

/// Run the CronJob controller until `shutdown` is cancelled (in-flight reconciles finish, then
/// queued status writes and Events are sent for a short while).
///
/// One watch of CronJobs and one of Jobs per namespace (or cluster-wide when
/// `scope.namespaces` is empty); the Job watch feeds the owner index and triggers the owning
/// CronJob, and hands the TTL controller what it keeps of its events through `tap` (then the
/// TTL controller needs no Job watch of its own). `ready` is called once both caches have listed. The status writers and the
/// outbox run as tasks of their own ([`super::context::STATUS_WRITER`],
/// [`super::context::OUTBOX`], listed in `shared.tasks`): should one end, the controller stops with its error.
pub async fn run(
    shared: Shared,
    args: ReconcilerArgs,
    metrics: ReconcilerMetrics,
    (tap, workload_tap): (Option<JobTap>, Option<WorkloadTap>),
    ready: impl FnOnce() + Send,
    shutdown: CancellationToken,
) -> Result<(), TaskError> {
    let (index, index_writer) = owner_index::owner_index();
    let config = PlanConfig {
        default_job_ttl: args.default_job_ttl,
    };
    let (mut ctx, background, requests) = Context::new(
        &shared,
        metrics.clone(),
        config,
        index.clone(),
        args.workload_kinds.clone(),
    );
    let (calendars, calendar_writer) = CalendarIndex::new();
    ctx.calendars = calendars;
    if let Some(tap) = workload_tap {
        ctx.workloads.hand_to_ttl(tap);
    }
    let background_stop = CancellationToken::new();
    let mut workers = TaskSet::new(&shared.tasks, background_stop.clone());
    background.spawn(&mut workers);
    let parts_stop = ctx.workloads.clone();
    let parts = Parts {
        ctx: Arc::new(ctx),
        index,
        index_writer,
        requests,
        tap,
        calendar_writer,
    };
    let controller = control(shared, args, metrics, parts, ready, shutdown.clone());
    tokio::select! {
        () = Box::pin(controller) => {}
        Some((name, Err(exit))) = workers.join_next() => return Err(exit.into_error(name)),
    }
    parts_stop.stop();
    background_stop.cancel();
    workers.supervise().await?;
    if shutdown.is_cancelled() {
        Ok(())
    } else {
        Err(TaskError::Ended(NAME))
    }
}

/// What a reconcile shares with the watches that feed it.
struct Parts {
    ctx: Arc<Context>,
    index: OwnerIndex,
    index_writer: IndexWriter,
    requests: futures::channel::mpsc::UnboundedReceiver<super::writer::Key>,
    tap: Option<JobTap>,
    calendar_writer: reflector::store::Writer<Calendar>,
}

/// The watches, the controller, the pruning and the shard follower, until the controller has
/// shut down (or one of them ended, which they do not).
async fn control(
    shared: Shared,
    args: ReconcilerArgs,
    metrics: ReconcilerMetrics,
    parts: Parts,
    ready: impl FnOnce() + Send,
    shutdown: CancellationToken,
) {
    let Parts {
        ctx,
        index,
        index_writer,
        requests,
        tap,
        calendar_writer,
    } = parts;
    let Shared {
        client,
        scope,
        records,
        ..
    } = shared;

    // The watches run as their own branches and feed the controller through channels, so they
    // reconnect on their own schedule, whatever the controller is busy with; a watch that works
    // again after failing retries every failed CronJob at once.
    let (job_tx, job_rx) = unbounded::<SlimJob>();
    let jobs = feed(
        job_trigger_stream(
            &client,
            &scope,
            &ctx.shard,
            index.clone(),
            index_writer,
            tap,
            recovery(Arc::clone(&ctx)),
        ),
        job_tx,
        Arc::clone(&ctx),
    );
    let (cj_reader, cj_writer) = reflector::store::<CachedCronJob>();
    answer_slot_records(&records, cj_reader.clone(), ctx.status.clone());
    let _series = metrics.cronjobs.attach(
        cj_reader.clone(),
        args.cronjob_metrics_limit,
        ctx.shard.clone(),
    );
    let (cj_tx, cj_rx) = unbounded::<CachedCronJob>();
    let cronjobs = feed(
        cronjob_trigger_stream(
            &client,
            &scope,
            &ctx.shard,
            cj_writer,
            cj_reader.clone(),
            (
                ctx.status.clone(),
                ctx.calendars.clone(),
                ctx.workloads.clone(),
            ),
            recovery(Arc::clone(&ctx)),
        ),
        cj_tx,
        Arc::clone(&ctx),
    );

    let stream_ctx = Arc::clone(&ctx);
    let gauge_reader = cj_reader.clone();
    let controller = Controller::for_stream(cj_rx.map(Ok::<_, watcher::Error>), cj_reader.clone())
        .owns_stream(job_rx.map(Ok::<_, watcher::Error>))
        .reconcile_on(requests)
        .with_config(kube::runtime::Config::default().concurrency(args.concurrency))
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(move |res| {
            metrics
                .managed_cronjobs
                .set(i64::try_from(gauge_reader.len()).unwrap_or(i64::MAX));
            log_controller_error(res.err(), &stream_ctx.log);
            futures::future::ready(())
        });
    let started = started(cj_reader.clone(), index, Arc::clone(&ctx), ready);
    let prune = prune(Arc::clone(&ctx), cj_reader.clone());
    let shard = follow_shard(Arc::clone(&ctx), cj_reader);
    let strays =
        crate::controller::shard_labels::run(client.clone(), scope.clone(), ctx.shard.clone());
    let calendar_log = Arc::clone(&ctx);
    let calendar_watch = calendars::watch(
        client.clone(),
        ctx.calendars.clone(),
        calendar_writer,
        ctx.reconcile.clone(),
        move |e| {
            if let Some(skipped) = calendar_log.log.allow("calendar watch") {
                tracing::warn!(error = %crate::telemetry::error_chain(e), skipped, "Calendar watch failed; retrying");
            }
        },
    );
    // Each branch is boxed: their state machines are large, and polling them inline nests
    // frames deep enough to exhaust a thread's stack in unoptimised builds.
    tokio::select! {
        () = Box::pin(controller) => {},
        () = started => {},
        () = prune => {},
        () = Box::pin(cronjobs) => {},
        () = Box::pin(jobs) => {},
        () = Box::pin(shard) => {},
        () = Box::pin(strays) => {},
        () = Box::pin(calendar_watch) => {},
    }
}

/// From now on, tell the TTL controller what the API server stores of a CronJob's last slot:
/// the cache's copy, or what the status writer knows newer.
fn answer_slot_records(
    records: &SlotRecords,
    cronjobs: reflector::Store<CachedCronJob>,
    status: super::writer::StatusWriter,
) {
    records.install(Box::new(move |namespace, name, uid| {
        use futures::FutureExt;
        if !matches!(cronjobs.wait_until_ready().now_or_never(), Some(Ok(()))) {
            return Err(slot_records::Unknown);
        }
        let cached = cronjobs.get(&ObjectRef::new(name).within(namespace));
        Ok(cached
            .filter(|cj| cj.metadata.uid.as_deref() == Some(uid))
            .map(|cj| status.stored_last_schedule(cj)))
    }));
}

/// Once both caches have listed: say so (with what they hold, so whoever watches the log knows
/// scheduling runs) and call `ready`. Never returns.
async fn started(
    cronjobs: reflector::Store<CachedCronJob>,
    index: OwnerIndex,
    ctx: Arc<Context>,
    ready: impl FnOnce(),
) {
    let _ = cronjobs.wait_until_ready().await;
    index.wait_until_ready().await;
    let state = cronjobs.state();
    let scheduled = state.iter().filter(|cj| ctx.owns(cj.as_ref())).count();
    tracing::info!(
        cronjobs = state.len(),
        scheduled,
        jobs = index.len(),
        "CronJob controller started"
    );
    ready();
    futures::future::pending::<()>().await;
}

/// Every [`PRUNE_EVERY`], forget what is kept about CronJobs that no longer exist (failure
/// counts, known statuses) and what the cache has caught up with. Never returns.
async fn prune(ctx: Arc<Context>, cronjobs: reflector::Store<CachedCronJob>) {
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    loop {
        tick.tick().await;
        ctx.failures.retain(|cj| cronjobs.get(cj).is_some());
        ctx.status.prune(|cj| cronjobs.get(cj));
    }
}

/// The CronJob watch: label-selected, slimmed, merged over namespaces, cached in `writer`
/// (read through `reader`), and turned into the CronJobs whose changes are worth a reconcile
/// (a new generation or a new manual-run request).
fn cronjob_trigger_stream(
    client: &Client,
    scope: &Scope,
    view: &shard::ShardView,
    writer: reflector::store::Writer<CachedCronJob>,
    reader: reflector::Store<CachedCronJob>,
    (status, calendars, workloads): (super::writer::StatusWriter, CalendarIndex, Workloads),
    health: impl FnMut(&Result<watcher::Event<CachedCronJob>, watcher::Error>) + Send + 'static,
) -> impl futures::Stream<Item = Result<CachedCronJob, watcher::Error>> + Send + 'static {
    let mut config = watcher::Config::default().page_size(CRONJOB_PAGE);
    if let Some(sel) = &scope.selector {
        config = config.labels(sel);
    }
    let watches = scope
        .apis::<CachedCronJob>(client)
        .into_iter()
        .map(|(ns, api)| {
            let watch = shard::watch(api, config.clone(), view, view.register_cache());
            (ns, watch)
        })
        .collect();
    reflector::reflector(
        writer,
        owner_index::merge_watches(watches, move || reader.state()).inspect(health),
    )
    .inspect(move |event| {
        // Once the cache holds a version, what the status writer knew newer than an older one
        // is moot.
        if let Ok(watcher::Event::Apply(cj) | watcher::Event::InitApply(cj)) = event {
            status.observed(cj);
        }
        if let Ok(event) = event {
            calendars.observe(event);
            workloads.observe(event);
        }
    })
    .applied_objects()
    .predicate_filter(spec_or_trigger, Default::default())
}

/// Follow the shard assignment (`--sharding`): whenever the caches have listed with a new one,
/// reconcile at once the CronJobs that became ours (a slot that fell due while their previous
/// owner was gone runs now, within its deadline) and log how many moved; every few seconds,
/// count the CronJobs this replica schedules for `kronjob_shard_cronjobs`. Never returns.
async fn follow_shard(ctx: Arc<Context>, cronjobs: reflector::Store<CachedCronJob>) {
    let mut listed = ctx.shard.subscribe_listed();
    let mut previous = listed.as_ref().map(|l| Arc::clone(&l.borrow()));
    let mut leading = ctx.shard.subscribe_leading();
    let mut tick = tokio::time::interval(SHARD_GAUGE_EVERY);
    loop {
        tokio::select! {
            Some(next) = async {
                let l = listed.as_mut()?;
                l.changed().await.ok()?;
                Some(Arc::clone(&l.borrow_and_update()))
            } => {
                rebalance(&ctx, &cronjobs, previous.as_deref(), &next);
                previous = Some(next);
            }
            Some(()) = async {
                let l = leading.as_mut()?;
                l.wait_for(|leads| *leads).await.ok()?;
                Some(())
            } => {
                // Once: a term leads until it ends.
                leading = None;
                take_over(&ctx, &cronjobs);
            }
            _ = tick.tick() => {}
        }
        let state = cronjobs.state();
        relabel_misfiled(&ctx, &state);
        let owned = state.iter().filter(|cj| ctx.owns(cj.as_ref())).count();
        ctx.shard
            .metrics
            .cronjobs
            .set(i64::try_from(owned).unwrap_or(i64::MAX));
        // The cache changes when the share does, with no reconcile to recount it.
        ctx.metrics
            .managed_cronjobs
            .set(i64::try_from(state.len()).unwrap_or(i64::MAX));
    }
}

/// With `--sharding`, and the caches listed with the current assignment: a cached CronJob whose
/// bucket is not this replica's carries another bucket's label (edited with the webhook off),
/// so no replica would schedule it. This replica, the only one that sees it, sets the label to
/// its bucket (in the background), and the replica owning that bucket takes it.
fn relabel_misfiled(ctx: &Arc<Context>, cronjobs: &[Arc<CachedCronJob>]) {
    let (Some(current), Some(listed)) = (ctx.shard.current(), ctx.shard.listed()) else {
        return;
    };
    if current.my_buckets() != listed.my_buckets() {
        return; // a change in progress: the caches may hold the buckets of either
    }
    for cj in cronjobs {
        let (Some(namespace), Some(name)) =
            (cj.metadata.namespace.clone(), cj.metadata.name.clone())
        else {
            continue;
        };
        let bucket = crate::api::shard::bucket(&namespace, &name);
        if listed.owns_bucket(bucket) {
            continue;
        }
        let client = ctx.client.clone();
        tokio::spawn(async move {
            let api: kube::Api<crate::api::CronJob> = kube::Api::namespaced(client, &namespace);
            crate::controller::shard_labels::set_bucket(&api, &name, bucket).await;
        });
    }
}

/// This standby has just become the leader: reconcile every CronJob its warm caches hold
/// (their reconciles until now did nothing), so a slot that fell due while no replica led runs
/// now, and every next one is scheduled. CronJobs the caches have not listed yet are
/// reconciled as they arrive.
fn take_over(ctx: &Context, cronjobs: &reflector::Store<CachedCronJob>) {
    let state = cronjobs.state();
    for cj in &state {
        let _ = ctx
            .reconcile
            .unbounded_send(ObjectRef::from_obj(cj.as_ref()));
    }
    tracing::info!(
        cronjobs = state.len(),
        "leading: reconciling every cached CronJob"
    );
}

/// Compare who owns each cached CronJob before and after a reassignment; reconcile the gained
/// ones now and log the counts.
fn rebalance(
    ctx: &Context,
    cronjobs: &reflector::Store<CachedCronJob>,
    previous: Option<&shard::Assignment>,
    next: &shard::Assignment,
) {
    let (mut owned, mut gained, mut lost) = (0usize, 0usize, 0usize);
    for cj in cronjobs.state() {
        let key = shard::key(
            cj.metadata.namespace.as_deref().unwrap_or_default(),
            cj.metadata.name.as_deref().unwrap_or_default(),
        );
        let was = previous.is_some_and(|p| p.owns(&key));
        let is = next.owns(&key);
        owned += usize::from(is);
        match (was, is) {
            (false, true) => {
                gained += 1;
                let _ = ctx
                    .reconcile
                    .unbounded_send(ObjectRef::from_obj(cj.as_ref()));
            }
            (true, false) => lost += 1,
            _ => {}
        }
    }
    tracing::info!(
        members = next.members().len(),
        member = next.is_member(),
        owned,
        gained,
        lost,
        moved = gained + lost,
        "rebalanced"
    );
}

/// Drive `stream`, sending what it yields to `tx` and logging its errors (throttled).
async fn feed<T, E: std::error::Error>(
    stream: impl futures::Stream<Item = Result<T, E>>,
    tx: UnboundedSender<T>,
    ctx: Arc<Context>,
) {
    stream
        .for_each(|item| {
            match item {
                Ok(object) => {
                    let _ = tx.unbounded_send(object);
                }
                Err(e) => {
                    if let Some(skipped) = ctx.log.allow("watch") {
                        tracing::warn!(error = %crate::telemetry::error_chain(&e), skipped, "watch failed; retrying");
                    }
                }
            }
            futures::future::ready(())
        })
        .await;
}

/// Watch a stream's health: when it works again after failing (the API server is back), every
/// CronJob whose last reconcile failed is reconciled at once instead of at its backoff.
pub(super) fn recovery<T, E>(ctx: Arc<Context>) -> impl FnMut(&Result<T, E>) {
    let mut failing = false;
    move |item| match item {
        Err(_) => failing = true,
        Ok(_) if failing => {
            failing = false;
            let keys = ctx.failures.failing();
            if !keys.is_empty() {
                tracing::info!(
                    cronjobs = keys.len(),
                    "API server reachable again: retrying failed CronJobs now"
                );
            }
            for key in keys {
                let _ = ctx.reconcile.unbounded_send(key);
            }
        }
        Ok(_) => {}
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
/// index, and turned into the Jobs whose changes matter to their owners.
fn job_trigger_stream(
    client: &Client,
    scope: &Scope,
    view: &shard::ShardView,
    index: OwnerIndex,
    mut writer: IndexWriter,
    tap: Option<JobTap>,
    health: impl FnMut(&Result<watcher::Event<SlimJob>, watcher::Error>) + Send + 'static,
) -> impl futures::Stream<Item = Result<SlimJob, watcher::Error>> + Send + 'static {
    let watches = scope
        .apis::<SlimJob>(client)
        .into_iter()
        .map(|(ns, api)| {
            let s = shard::watch(
                api,
                owner_index::job_watch_config(),
                view,
                view.register_cache(),
            );
            (ns, s)
        })
        .collect();
    owner_index::merge_watches(watches, move || index.snapshot())
        .inspect(health)
        .inspect(move |ev| {
            if let (Ok(ev), Some(tap)) = (ev, &tap) {
                tap.forward(ev);
            }
        })
        .map(move |ev| match ev {
            Ok(ev) => futures::stream::iter(writer.apply_watcher_event(&ev).into_iter().map(Ok))
                .left_stream(),
            Err(e) => futures::stream::iter([Err(e)]).right_stream(),
        })
        .flatten()
}

#[cfg(test)]
mod predicate_tests {
    use super::*;
    use crate::testing::fixtures::cronjob;

    #[test]
    fn a_spec_edit_or_a_new_trigger_passes_status_and_labels_do_not() {
        let base = cronjob("* * * * *");
        let key =
            |cj: &crate::api::CronJob| spec_or_trigger(&CachedCronJob::of(cj).expect("cached"));
        let mut status = base.clone();
        status.status = Some(Default::default());
        status.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        assert_eq!(key(&status), key(&base));
        let mut edited = base.clone();
        edited.metadata.generation = Some(base.metadata.generation.unwrap_or(0) + 1);
        assert_ne!(key(&edited), key(&base));
        let mut asked = base.clone();
        asked
            .annotations_mut()
            .insert(ANNOTATION_TRIGGER.into(), "2026-11-25T09:40:12Z".into());
        assert_ne!(key(&asked), key(&base));
        let mut asked_again = asked.clone();
        asked_again
            .annotations_mut()
            .insert(ANNOTATION_TRIGGER.into(), "2026-11-25T09:41:00Z".into());
        assert_ne!(key(&asked_again), key(&asked));
        let mut backfill = base.clone();
        backfill
            .annotations_mut()
            .insert(ANNOTATION_BACKFILL.into(), "{}".into());
        assert_ne!(key(&backfill), key(&base), "a backfill request");
    }
}
