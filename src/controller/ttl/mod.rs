//! TTL-after-finished controller (KEP-592) for Jobs, and the same for annotated Pods.
//!
//! A finished Job with `spec.ttlSecondsAfterFinished` is deleted that many seconds after its
//! `Complete`/`Failed` condition's `lastTransitionTime`. The decision is made on the cached copy;
//! when it says "expired", the object is read fresh from the API server and decided again (the
//! TTL may have been raised, or the object may be being deleted already), and only then deleted,
//! with a UID precondition so that a re-created object of the same name is never touched.
//! Jobs are deleted with `propagationPolicy: Foreground` (as upstream); Pods with `Background`,
//! the Pod default: a Pod rarely has dependents, and Foreground would only add a finalizer that
//! keeps a finished Pod visible longer.
//!
//! Waiting is exact: an object whose TTL has not expired is requeued for `finish + ttl` (capped at
//! [`crate::controller::MAX_REQUEUE`]); nothing polls. The controller is kube-runtime's [`applier`] (the engine
//! behind `Controller`), fed by a watcher that strips managedFields and other bulk from cached
//! objects, with bounded concurrency and per-object exponential backoff on errors.
//!
//! RBAC: `batch` `jobs` get, list, watch, delete; with `--ttl-pods`, core `pods` get, list,
//! watch, delete; `events.k8s.io` `events` create, patch (Warning Events on bad annotations).
//! Scope `owned` watches only Jobs labelled `batch.kronjob.dev/cronjob` (any value) and then
//! requires the controller owner reference; a Job whose label was removed is not handled. Those
//! are the Jobs of the CronJob controller's owner index: in the manager, its watch hands this
//! controller the events it keeps ([`job_tap`]), so there is one Job watch, not two.
//!
//! With `--sharding`, a replica deletes only the expired Jobs of the CronJobs it schedules
//! (Jobs without a controlling CronJob, and Pods, by their own name); it looks at the others
//! again after [`NOT_OURS_RECHECK`], in case their replica died.

pub mod decision;
mod metrics;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, future};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::api::{Api, PropagationPolicy};
use kube::runtime::controller::{Action, Config as ApplierConfig, trigger_self};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, applier, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use crate::api::{ANNOTATION_TTL, LABEL_CRONJOB};
use crate::backoff::{self, Failures};
use crate::clock::Clock;
use crate::controller::Shared;
use crate::controller::cache::SlimJob;
use crate::controller::events::Recorder;
use crate::controller::owner_index::job_watch_config;
use crate::controller::shard::{self, ShardView};
use crate::controller::slot_records::SlotRecords;
use crate::controller::workloads::{Resolved, WorkloadApi};
use crate::task::TaskError;
use crate::workload::cel::Completion;
use crate::workload::{self as jobs, Deletion, Workload};
use decision::{DecisionError, TtlState};
pub use metrics::{ObjectKind, TtlMetrics};
use tokio_util::sync::CancellationToken;

/// Reconciles (and so API calls) in flight at once, over all watched kinds and namespaces.
pub const CONCURRENCY: u16 = 8;
/// An expired scheduled Job whose slot no stored status records yet is looked at again after
/// this: the status write that records it usually lands within it.
pub const RECORD_RECHECK: Duration = Duration::from_secs(1);
/// An expired object another replica handles (`--sharding`) is looked at again after this
/// (the shard lease duration): if that replica died meanwhile, the object is ours by then.
pub const NOT_OURS_RECHECK: Duration = Duration::from_secs(15);
/// Bound of the warned-Pods map.
const WARNED_CAP: usize = 10_000;
/// Pod phases that are not terminal; everything else is worth watching.
const POD_FIELD_SELECTOR: &str =
    "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown";

/// Command-line options of the TTL controller.
#[derive(clap::Args, Debug, Clone)]
pub struct TtlArgs {
    /// Which finished Jobs with `spec.ttlSecondsAfterFinished` to delete: those controlled by a
    /// kronjob CronJob (`owned`), every Job (`all`, the upstream controller's job; do not run
    /// both), or none (`off`).
    #[arg(long, value_enum, default_value = "owned")]
    pub ttl_jobs: TtlScope,
    /// Also delete finished Pods annotated `batch.kronjob.dev/ttl-seconds-after-finished`.
    #[arg(long)]
    pub ttl_pods: bool,
}

/// Which Jobs the TTL controller handles.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlScope {
    /// Jobs whose controller owner reference is a kronjob `CronJob` (and which carry the
    /// `batch.kronjob.dev/cronjob` label, which the watch selects on).
    Owned,
    /// Every Job.
    All,
    /// No Jobs.
    Off,
}

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the fresh copy failed (other than NotFound).
    #[error("reading {kind} {namespace}/{name} from the API server")]
    Get {
        /// `job` or `pod`.
        kind: &'static str,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// What the client said.
        #[source]
        source: kube::Error,
    },
    /// Deleting failed (other than NotFound or a UID-precondition conflict).
    #[error("deleting {kind} {namespace}/{name}")]
    Delete {
        /// `job` or `pod`.
        kind: &'static str,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// What the client said.
        #[source]
        source: kube::Error,
    },
    /// The object cannot be decided (e.g. finished without a finish time).
    #[error("{kind} {namespace}/{name} cannot be decided")]
    Decision {
        /// `job` or `pod`.
        kind: &'static str,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// Why.
        #[source]
        source: DecisionError,
    },
    /// The object has no namespace or UID (never the case for objects from the API server).
    #[error("{kind} {name} has no namespace or uid")]
    MissingMetadata {
        /// `job` or `pod`.
        kind: &'static str,
        /// The object's name.
        name: String,
    },
    /// Publishing the Warning Event about a bad annotation failed.
    #[error("publishing an Event about {kind} {namespace}/{name}")]
    Event {
        /// `job` or `pod`.
        kind: &'static str,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// What the client said.
        #[source]
        source: kube::Error,
    },
}

/// Every value [`Error::category`] gives: the error counter exports each at zero from the
/// start, so a rate over it has series before the first error.
pub const CATEGORIES: [&str; 6] = [
    "get",
    "delete",
    "missing_finish_time",
    "bad_annotation",
    "missing_metadata",
    "event",
];

impl Error {
    /// A fixed, low-cardinality name of the error, for metrics (one of [`CATEGORIES`]).
    pub fn category(&self) -> &'static str {
        match self {
            Self::Get { .. } => "get",
            Self::Delete { .. } => "delete",
            Self::Decision {
                source: DecisionError::MissingFinishTime,
                ..
            } => "missing_finish_time",
            Self::Decision {
                source: DecisionError::BadAnnotation { .. },
                ..
            } => "bad_annotation",
            Self::MissingMetadata { .. } => "missing_metadata",
            Self::Event { .. } => "event",
        }
    }
}

/// An object kind the TTL controller can handle.
trait TtlObject:
    Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + Send + Sync + 'static
{
    const KIND: ObjectKind;
    /// The decision at `now`.
    fn ttl_state(&self, now: Timestamp) -> TtlState;
    /// When the object finished, if known (for the clock-skew warning).
    fn finish_time(&self) -> Option<Timestamp>;
    /// Whether this object is ours to handle under `scope`.
    fn in_scope(&self, scope: TtlScope) -> bool;
    /// How its deletion propagates (the UID is always a precondition).
    const PROPAGATION: PropagationPolicy;
    /// What to watch.
    fn watch_config(scope: TtlScope) -> watcher::Config;
    /// Whether the objects watched under `scope` carry the shard label (`--sharding` then
    /// watches only this replica's buckets).
    fn labelled(scope: TtlScope) -> bool;
    /// Drop what the decision never reads, before the object enters the cache.
    fn slim(&mut self);
    /// The key it is assigned to a replica by (`--sharding`).
    fn shard_key(&self) -> String;
    /// Whether deleting it now leaves a record that its CronJob's slot ran (see
    /// [`SlotRecords`]); always for objects that run no slot.
    fn slot_recorded(&self, _records: &SlotRecords) -> bool {
        true
    }
    /// It as the API server has it now (`None`: gone).
    fn fresh(
        &self,
        client: &Client,
        namespace: &str,
    ) -> BoxFuture<'static, Result<Option<Self>, kube::Error>>;
    /// Delete it (`name`) while its UID is `uid`, with [`TtlObject::PROPAGATION`].
    fn delete(
        &self,
        client: &Client,
        namespace: &str,
        uid: &str,
    ) -> BoxFuture<'static, Result<Deletion, kube::Error>>;
    /// What an Event about it names.
    fn reference(&self) -> k8s_openapi::api::core::v1::ObjectReference {
        self.object_ref(&())
    }
}

/// [`TtlObject::fresh`] of a kind with a typed API.
fn typed_fresh<K>(
    obj: &K,
    client: &Client,
    namespace: &str,
) -> BoxFuture<'static, Result<Option<K>, kube::Error>>
where
    K: TtlObject + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let name = obj.name_any();
    async move { api.get_opt(&name).await }.boxed()
}

/// [`TtlObject::delete`] of a kind with a typed API.
fn typed_delete<K>(
    obj: &K,
    client: &Client,
    namespace: &str,
    uid: &str,
) -> BoxFuture<'static, Result<Deletion, kube::Error>>
where
    K: TtlObject + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let (name, uid) = (obj.name_any(), uid.to_string());
    async move { jobs::delete_guarded(&api, &name, Some(&uid), K::PROPAGATION).await }.boxed()
}

/// Jobs are watched and read decoded slim ([`SlimJob`]: no pod template, no managedFields).
impl TtlObject for SlimJob {
    const KIND: ObjectKind = ObjectKind::Job;
    const PROPAGATION: PropagationPolicy = PropagationPolicy::Foreground;

    fn ttl_state(&self, now: Timestamp) -> TtlState {
        decision::job_ttl_state(&self.0, now)
    }

    fn finish_time(&self) -> Option<Timestamp> {
        jobs::job_finish(&self.0).and_then(|f| f.at)
    }

    fn in_scope(&self, scope: TtlScope) -> bool {
        match scope {
            TtlScope::Owned => jobs::is_controlled_by_kronjob(&self.0.metadata),
            TtlScope::All => true,
            TtlScope::Off => false,
        }
    }

    fn watch_config(scope: TtlScope) -> watcher::Config {
        match scope {
            // Our Jobs carry the CronJob label; the owner reference is checked in the reconcile.
            TtlScope::Owned => watcher::Config::default().labels(LABEL_CRONJOB),
            TtlScope::All | TtlScope::Off => watcher::Config::default(),
        }
    }

    fn labelled(scope: TtlScope) -> bool {
        // kronjob's Jobs carry their CronJob's bucket; other Jobs carry none.
        scope == TtlScope::Owned
    }

    fn slim(&mut self) {
        // Decoded slim already.
    }

    fn shard_key(&self) -> String {
        // With the CronJob that controls it: one replica handles a CronJob and its Jobs.
        shard::job_key(&self.0)
    }

    fn slot_recorded(&self, records: &SlotRecords) -> bool {
        records.deletable(&self.0.metadata)
    }

    fn fresh(
        &self,
        client: &Client,
        namespace: &str,
    ) -> BoxFuture<'static, Result<Option<Self>, kube::Error>> {
        typed_fresh(self, client, namespace)
    }

    fn delete(
        &self,
        client: &Client,
        namespace: &str,
        uid: &str,
    ) -> BoxFuture<'static, Result<Deletion, kube::Error>> {
        typed_delete(self, client, namespace, uid)
    }
}

impl TtlObject for Pod {
    const KIND: ObjectKind = ObjectKind::Pod;
    const PROPAGATION: PropagationPolicy = PropagationPolicy::Background;

    fn ttl_state(&self, now: Timestamp) -> TtlState {
        decision::pod_ttl_state(self, now)
    }

    fn finish_time(&self) -> Option<Timestamp> {
        decision::pod_finish_time(self)
    }

    fn in_scope(&self, _scope: TtlScope) -> bool {
        // Opted in per Pod by the annotation; `--ttl-pods` decides whether we watch at all.
        true
    }

    fn watch_config(_scope: TtlScope) -> watcher::Config {
        // Only terminal phases; a Pod entering one arrives as an ADDED event.
        watcher::Config::default().fields(POD_FIELD_SELECTOR)
    }

    fn labelled(_scope: TtlScope) -> bool {
        false
    }

    fn slim(&mut self) {
        self.metadata.managed_fields = None;
        if let Some(annotations) = self.metadata.annotations.as_mut() {
            annotations.retain(|k, _| k == ANNOTATION_TTL);
        }
        self.spec = Some(PodSpec::default());
    }

    fn shard_key(&self) -> String {
        shard::key(
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }

    fn fresh(
        &self,
        client: &Client,
        namespace: &str,
    ) -> BoxFuture<'static, Result<Option<Self>, kube::Error>> {
        typed_fresh(self, client, namespace)
    }

    fn delete(
        &self,
        client: &Client,
        namespace: &str,
        uid: &str,
    ) -> BoxFuture<'static, Result<Deletion, kube::Error>> {
        typed_delete(self, client, namespace, uid)
    }
}

/// A workload of a kind other than Job, as its kind's watch hands it over ([`WorkloadTap`]):
/// read through its kind's rule (or its CronJob's completion rule), with its kind as served.
#[derive(Debug, Clone)]
pub struct TtlWorkload {
    /// The workload.
    pub workload: Workload,
    /// Its kind, as served.
    pub kind: Arc<Resolved>,
    /// Its CronJob's completion rule, for a kind without a rule.
    pub completion: Option<Arc<Completion>>,
}

impl Resource for TtlWorkload {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    // Requests go through the kind as served (`kind`); these name the wrapper only.
    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Workload".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "workloads".into()
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.workload.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.workload.metadata
    }
}

impl TtlObject for TtlWorkload {
    const KIND: ObjectKind = ObjectKind::Workload;
    const PROPAGATION: PropagationPolicy = PropagationPolicy::Foreground;

    fn ttl_state(&self, now: Timestamp) -> TtlState {
        decision::workload_ttl_state(&self.workload, now)
    }

    fn finish_time(&self) -> Option<Timestamp> {
        self.workload.finish.and_then(|f| f.at)
    }

    fn in_scope(&self, scope: TtlScope) -> bool {
        // kronjob's own, unless the TTL controller deletes nothing of the kind.
        scope != TtlScope::Off && jobs::is_controlled_by_kronjob(&self.workload.metadata)
    }

    fn watch_config(_scope: TtlScope) -> watcher::Config {
        // Never watched here: its kind's watch hands it over.
        job_watch_config()
    }

    fn labelled(_scope: TtlScope) -> bool {
        true
    }

    fn slim(&mut self) {}

    fn shard_key(&self) -> String {
        shard::workload_key(&self.workload.metadata)
    }

    fn slot_recorded(&self, records: &SlotRecords) -> bool {
        records.deletable(&self.workload.metadata)
    }

    fn fresh(
        &self,
        client: &Client,
        namespace: &str,
    ) -> BoxFuture<'static, Result<Option<Self>, kube::Error>> {
        let api = WorkloadApi::new(client.clone(), namespace, &self.kind);
        let name = self.workload.name().to_string();
        let (kind, completion) = (Arc::clone(&self.kind), self.completion.clone());
        async move {
            let Some(mut workload) = api.get_opt(&name).await? else {
                return Ok(None);
            };
            if let Some(completion) = &completion {
                workload.judge(completion);
            }
            Ok(Some(TtlWorkload {
                workload,
                kind,
                completion,
            }))
        }
        .boxed()
    }

    fn delete(
        &self,
        client: &Client,
        namespace: &str,
        uid: &str,
    ) -> BoxFuture<'static, Result<Deletion, kube::Error>> {
        let api = WorkloadApi::new(client.clone(), namespace, &self.kind);
        let (name, uid) = (self.workload.name().to_string(), uid.to_string());
        async move { api.delete(&name, Some(&uid), Self::PROPAGATION).await }.boxed()
    }

    fn reference(&self) -> k8s_openapi::api::core::v1::ObjectReference {
        self.workload.reference()
    }
}

/// Everything a reconcile touches.
struct Context {
    client: Client,
    clock: Arc<dyn Clock>,
    metrics: TtlMetrics,
    scope: TtlScope,
    recorder: Recorder,
    /// Bounds API calls in flight over all pipelines.
    permits: Semaphore,
    /// TTL deletes wait for the slot's creates.
    gate: crate::controller::priority::Gate,
    /// Consecutive failures per object (`kind/namespace/name`), for backoff.
    failures: Failures<String>,
    /// Keeps failure logs to a trickle during an outage.
    log: crate::telemetry::Throttle,
    /// Pods (by UID) already warned about, with the bad value warned about.
    warned: Mutex<HashMap<String, String>>,
    /// Which objects this replica handles (all without `--sharding`).
    shard: ShardView,
    /// Whether a scheduled Job's slot is recorded (the CronJob controller answers).
    records: SlotRecords,
}

impl Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("clock", &self.clock)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Context {
    fn new(shared: &Shared, metrics: TtlMetrics, scope: TtlScope) -> Self {
        let client = shared.client.clone();
        let clock = Arc::clone(&shared.clock);
        let instance = shared.instance.clone();
        Self {
            gate: shared.gate.clone(),
            recorder: crate::controller::recorder(client.clone(), instance),
            client,
            clock,
            metrics,
            scope,
            permits: Semaphore::new(usize::from(CONCURRENCY)),
            failures: Failures::default(),
            log: crate::telemetry::Throttle::default(),
            warned: Mutex::default(),
            shard: shared.shard.clone(),
            records: shared.records.clone(),
        }
    }

    /// Whether this replica handles `obj` (always without `--sharding`, while it leads).
    fn owns<K: TtlObject>(&self, obj: &K) -> bool {
        if !self.shard.is_sharded() {
            return self.shard.is_leading();
        }
        self.shard.owns(&obj.shard_key())
    }

    fn forget_warning<K: TtlObject>(&self, obj: &K) {
        if let Some(uid) = obj.meta().uid.as_deref() {
            let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
            if !warned.is_empty() {
                warned.remove(uid);
            }
        }
    }
}

/// `remaining` as a requeue delay, capped at [`crate::controller::MAX_REQUEUE`].
fn requeue_for(remaining: SignedDuration) -> Action {
    crate::controller::requeue(Duration::try_from(remaining).unwrap_or(Duration::ZERO))
}

fn failure_key<K: TtlObject>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::KIND.as_str(),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

/// One reconcile, with the failure count cleared on success.
async fn reconcile<K: TtlObject>(obj: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let action = reconcile_inner(&*obj, &ctx).await?;
    ctx.failures.clear(&failure_key(&*obj));
    Ok(action)
}

async fn reconcile_inner<K: TtlObject>(obj: &K, ctx: &Context) -> Result<Action, Error> {
    let kind = K::KIND.as_str();
    if !obj.in_scope(ctx.scope) {
        return Ok(Action::await_change());
    }
    let name = obj.name_any();
    let Some(namespace) = obj.namespace() else {
        return Err(Error::MissingMetadata { kind, name });
    };
    let now = ctx.clock.now();
    let state = obj.ttl_state(now);
    if !matches!(state, TtlState::Error(DecisionError::BadAnnotation { .. })) {
        // A fixed annotation: warn again if it ever breaks again.
        ctx.forget_warning(obj);
    }
    match state {
        TtlState::NotCandidate => return Ok(Action::await_change()),
        TtlState::Wait(remaining) => return Ok(wait(obj, now, remaining)),
        TtlState::Error(source) => return undecidable(obj, ctx, &namespace, source).await,
        TtlState::Expired { .. } => {}
    }
    if !ctx.owns(obj) {
        // Another replica deletes it; should that replica die, it is ours by the next look.
        return Ok(Action::requeue(NOT_OURS_RECHECK));
    }
    if !obj.slot_recorded(&ctx.records) {
        // The only record that its slot ran, until its CronJob's status write lands.
        debug!(kind, %namespace, %name, "expired; waiting for the status that records its slot");
        return Ok(Action::requeue(RECORD_RECHECK));
    }

    // Expired according to the cache: decide again on a fresh copy before deleting, once the
    // urgent lane (Job creates at a slot) is idle.
    let _permit = ctx.permits.acquire().await;
    ctx.gate.background().await;
    let fresh = match obj.fresh(&ctx.client, &namespace).await {
        Ok(Some(fresh)) => fresh,
        Ok(None) => {
            debug!(kind, %namespace, %name, "already gone");
            return Ok(Action::await_change());
        }
        Err(source) => {
            return Err(Error::Get {
                kind,
                namespace,
                name,
                source,
            });
        }
    };
    if !fresh.in_scope(ctx.scope) {
        return Ok(Action::await_change());
    }
    let now = ctx.clock.now();
    let expired_at = match fresh.ttl_state(now) {
        TtlState::NotCandidate => return Ok(Action::await_change()),
        TtlState::Wait(remaining) => return Ok(wait(&fresh, now, remaining)),
        TtlState::Error(source) => return undecidable(&fresh, ctx, &namespace, source).await,
        TtlState::Expired { expired_at } => expired_at,
    };
    let Some(uid) = fresh.uid() else {
        return Err(Error::MissingMetadata { kind, name });
    };
    match fresh.delete(&ctx.client, &namespace, &uid).await {
        Ok(Deletion::Deleted) => {
            let delay = ctx.clock.now().duration_since(expired_at);
            ctx.metrics.deleted(K::KIND, delay.as_secs_f64());
            info!(kind, %namespace, %name, %uid, %expired_at, "deleted: TTL after finished expired");
        }
        Ok(Deletion::Gone) => debug!(kind, %namespace, %name, "already gone"),
        Ok(Deletion::Replaced) => {
            debug!(kind, %namespace, %name, %uid, "replaced by a new object; not deleted");
        }
        Err(source) => {
            return Err(Error::Delete {
                kind,
                namespace,
                name,
                source,
            });
        }
    }
    Ok(Action::await_change())
}

/// Requeue at expiry, warning when the finish time is in the future (clock skew).
fn wait<K: TtlObject>(obj: &K, now: Timestamp, remaining: SignedDuration) -> Action {
    if let Some(finished) = obj.finish_time().filter(|f| *f > now) {
        warn!(
            kind = K::KIND.as_str(),
            namespace = obj.namespace().unwrap_or_default(),
            name = obj.name_any(),
            %finished,
            %now,
            "found an object finished in the future, likely clock skew in the cluster; cleanup deferred"
        );
    }
    requeue_for(remaining)
}

/// A candidate that cannot be decided: a bad annotation gets one Warning Event and waits for a
/// change; a missing finish time is an error (retried with backoff).
async fn undecidable<K: TtlObject>(
    obj: &K,
    ctx: &Context,
    namespace: &str,
    source: DecisionError,
) -> Result<Action, Error> {
    let kind = K::KIND.as_str();
    let name = obj.name_any();
    let DecisionError::BadAnnotation { value } = &source else {
        return Err(Error::Decision {
            kind,
            namespace: namespace.to_owned(),
            name,
            source,
        });
    };
    let uid = obj.uid().unwrap_or_default();
    let already = ctx
        .warned
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&uid)
        == Some(value);
    if already {
        return Ok(Action::await_change());
    }
    ctx.metrics.error(K::KIND, "bad_annotation");
    warn!(kind, %namespace, %name, %value, "bad {ANNOTATION_TTL} annotation; not deleting");
    let event = Event {
        type_: EventType::Warning,
        reason: "InvalidTTLAnnotation".into(),
        note: Some(format!(
            "{source}; kronjob will not delete this {kind} until the annotation is fixed"
        )),
        action: "TTLAfterFinished".into(),
        secondary: None,
    };
    if let Err(source) = ctx.recorder.publish(&event, &obj.reference()).await {
        return Err(Error::Event {
            kind,
            namespace: namespace.to_owned(),
            name,
            source,
        });
    }
    let mut warned = ctx.warned.lock().unwrap_or_else(|e| e.into_inner());
    if warned.len() >= WARNED_CAP {
        warned.clear();
    }
    warned.insert(uid, value.clone());
    Ok(Action::await_change())
}

/// Count the error and retry after a jittered, per-object exponential backoff.
fn error_policy<K: TtlObject>(obj: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    Action::requeue(retry_delay(&*obj, error, &ctx))
}

/// Count and log the error; the delay before the next attempt at `obj`.
fn retry_delay<K: TtlObject>(obj: &K, error: &Error, ctx: &Context) -> Duration {
    let key = failure_key(obj);
    let attempt = ctx.failures.record(&key);
    let delay = backoff::retry_delay(attempt);
    ctx.metrics.error(K::KIND, error.category());
    if let Some(skipped) = ctx.log.allow(error.category()) {
        warn!(
            error = &*crate::telemetry::error_chain(error),
            attempt,
            retry_in_s = delay.as_secs_f64(),
            skipped,
            "TTL reconcile failed"
        );
    }
    delay
}

/// Whether a watch event is worth caching and reconciling: objects that can expire (finished,
/// with a TTL, not being deleted) and everything that is not an object's new state. A running
/// Job or one without a TTL is neither cached nor reconciled: when it finishes or gets a TTL,
/// its next event brings it in. A cached copy that stops qualifying stays until its deletion;
/// it can only cause a fresh read, which decides again.
fn worth_keeping<K: TtlObject>(
    event: &Result<watcher::Event<K>, watcher::Error>,
    now: Timestamp,
) -> bool {
    match event {
        Ok(event) => event_worth_keeping(event, now),
        Err(_) => true,
    }
}

fn event_worth_keeping<K: TtlObject>(event: &watcher::Event<K>, now: Timestamp) -> bool {
    match event {
        watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
            !matches!(obj.ttl_state(now), TtlState::NotCandidate)
        }
        _ => true,
    }
}

/// The sending side of the Job watch the TTL controller shares with the owner index (with
/// `--ttl-jobs=owned`, the default, both watch the same Jobs): the index hands over the events
/// the TTL controller would keep ([`worth_keeping`]), so the API server sends, and kronjob
/// decodes, each Job event once. At a slot the new Jobs are running: nothing is handed over.
#[derive(Clone)]
pub struct JobTap {
    tx: UnboundedSender<watcher::Event<SlimJob>>,
    clock: Arc<dyn Clock>,
}

impl Debug for JobTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobTap").finish_non_exhaustive()
    }
}

/// The receiving side of a [`JobTap`], for [`run`].
pub struct TappedJobs(UnboundedReceiver<watcher::Event<SlimJob>>);

impl Debug for TappedJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TappedJobs").finish_non_exhaustive()
    }
}

/// A tap and its receiving side: create both before either watch starts, so the TTL
/// controller sees the index's first list.
pub fn job_tap(clock: Arc<dyn Clock>) -> (JobTap, TappedJobs) {
    let (tx, rx) = unbounded();
    (JobTap { tx, clock }, TappedJobs(rx))
}

impl JobTap {
    /// Hand over `event` if the TTL controller would keep it (a receiver gone is ignored: the
    /// term is ending).
    pub fn forward(&self, event: &watcher::Event<SlimJob>) {
        if event_worth_keeping(event, self.clock.now()) {
            let _ = self.tx.unbounded_send(event.clone());
        }
    }
}

/// The sending side of the workload watches' hand-over to the TTL controller: the watch of each
/// kind other than Job ([`crate::controller::workloads`]) hands over the events of its
/// workloads the TTL controller would keep, each kind to a pipeline of its own.
#[derive(Clone)]
pub struct WorkloadTap {
    tx: UnboundedSender<(Arc<Resolved>, watcher::Event<TtlWorkload>)>,
    clock: Arc<dyn Clock>,
}

impl Debug for WorkloadTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadTap").finish_non_exhaustive()
    }
}

/// The receiving side of a [`WorkloadTap`], for [`run`].
pub struct TappedWorkloads(UnboundedReceiver<(Arc<Resolved>, watcher::Event<TtlWorkload>)>);

impl Debug for TappedWorkloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TappedWorkloads").finish_non_exhaustive()
    }
}

/// A workload tap and its receiving side.
pub fn workload_tap(clock: Arc<dyn Clock>) -> (WorkloadTap, TappedWorkloads) {
    let (tx, rx) = unbounded();
    (WorkloadTap { tx, clock }, TappedWorkloads(rx))
}

impl WorkloadTap {
    /// Hand over `event` of a workload of `kind` if the TTL controller would keep it (a re-list
    /// always: it replaces what the kind's pipeline holds).
    pub fn forward(&self, kind: &Arc<Resolved>, event: watcher::Event<TtlWorkload>) {
        if event_worth_keeping(&event, self.clock.now()) {
            let _ = self.tx.unbounded_send((Arc::clone(kind), event));
        }
    }
}

/// Hand each kind's events to a pipeline of its own (started on its first event), until
/// `shutdown`.
async fn dispatch_workloads(
    TappedWorkloads(mut events): TappedWorkloads,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) {
    let mut kinds: HashMap<
        Arc<crate::workload::WorkloadType>,
        UnboundedSender<watcher::Event<TtlWorkload>>,
    > = HashMap::new();
    let mut runs = futures::stream::FuturesUnordered::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            Some(()) = runs.next(), if !runs.is_empty() => {}
            next = events.next() => {
                let Some((kind, event)) = next else { return };
                let tx = kinds.entry(Arc::clone(&kind.type_)).or_insert_with(|| {
                    let (tx, rx) = unbounded();
                    let pipeline = pipeline_of(rx.map(Ok).boxed(), Arc::clone(&ctx), shutdown.clone());
                    runs.push(pipeline.run);
                    tx
                });
                let _ = tx.unbounded_send(event);
            }
        }
    }
}

/// A watch of one kind and namespace: `listed` resolves once its cache has listed (with how
/// many objects it holds), `run` reconciles every object that can expire until `shutdown`.
struct Pipeline {
    listed: BoxFuture<'static, usize>,
    run: BoxFuture<'static, ()>,
}

/// Watch `api` and reconcile every object that can expire, until `shutdown`.
fn pipeline<K: TtlObject + DeserializeOwned>(
    api: Api<K>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) -> Pipeline {
    let config = K::watch_config(ctx.scope);
    let objects = if K::labelled(ctx.scope) {
        shard::watch(api, config, &ctx.shard, None)
    } else {
        watcher(api, config)
            .backoff(backoff::watch_backoff())
            .boxed()
    };
    pipeline_of(objects, ctx, shutdown)
}

/// Reconcile every object of `objects` (watch events) that can expire, until `shutdown`.
fn pipeline_of<K: TtlObject>(
    objects: BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>,
    ctx: Arc<Context>,
    shutdown: CancellationToken,
) -> Pipeline {
    let (reader, writer) = reflector::store();
    let listed = {
        let reader = reader.clone();
        async move {
            let _ = reader.wait_until_ready().await;
            reader.len()
        }
        .boxed()
    };
    let clock = Arc::clone(&ctx.clock);
    let objects = objects
        .modify(K::slim)
        .filter(move |event| future::ready(worth_keeping(event, clock.now())))
        .reflect(writer)
        .applied_objects();
    let queue = trigger_self(objects, ()).take_until(shutdown.cancelled_owned());
    let log = Arc::clone(&ctx);
    let run = applier(
        |obj, ctx| Box::pin(reconcile::<K>(obj, ctx)),
        error_policy::<K>,
        ctx,
        reader,
        queue,
        ApplierConfig::default().concurrency(CONCURRENCY),
    )
    .for_each(move |result| {
        match result {
            Ok((obj, action)) => debug!(%obj, ?action, "reconciled"),
            Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {} // logged by error_policy
            Err(error) => {
                if let Some(skipped) = log.log.allow("watch") {
                    warn!(
                        error = &*crate::telemetry::error_chain(&error),
                        skipped, "TTL watch failed; retrying"
                    );
                }
            }
        }
        future::ready(())
    })
    .boxed();
    Pipeline { listed, run }
}

/// The name the TTL controller is supervised by.
pub const NAME: &str = "TTL controller";

impl TtlArgs {
    /// Whether the TTL controller has anything to do (Jobs or Pods).
    pub fn enabled(&self) -> bool {
        self.ttl_jobs != TtlScope::Off || self.ttl_pods
    }
}

/// Run the TTL-after-finished controller until `shutdown` is cancelled; run it on the leader.
///
/// One watch per kind (Jobs, and Pods with `--ttl-pods`) and namespace in scope, or
/// cluster-wide; `ready` is called once every watch's cache has listed. With `jobs` (the owner
/// index's Job watch, [`job_tap`]) and `--ttl-jobs=owned`, Jobs come from it instead of a watch
/// of their own. Returns at once if `args` disables both Jobs and Pods.
pub async fn run(
    shared: Shared,
    args: TtlArgs,
    metrics: TtlMetrics,
    jobs: Option<TappedJobs>,
    workloads: Option<TappedWorkloads>,
    ready: impl FnOnce() + Send,
    shutdown: CancellationToken,
) -> Result<(), TaskError> {
    let ctx = Arc::new(Context::new(&shared, metrics, args.ttl_jobs));
    let workloads = match workloads {
        Some(tapped) if args.ttl_jobs != TtlScope::Off => {
            dispatch_workloads(tapped, Arc::clone(&ctx), shutdown.clone()).boxed()
        }
        _ => future::pending().boxed(),
    };
    let mut pipelines = Vec::new();
    match (args.ttl_jobs, jobs) {
        (TtlScope::Off, _) => {}
        (TtlScope::Owned, Some(TappedJobs(events))) => {
            let events = events.map(Ok).boxed();
            pipelines.push(pipeline_of(events, ctx.clone(), shutdown.clone()));
        }
        _ => {
            for (_, api) in shared.scope.apis::<SlimJob>(&shared.client) {
                pipelines.push(pipeline(api, ctx.clone(), shutdown.clone()));
            }
        }
    }
    if args.ttl_pods {
        for (_, api) in shared.scope.apis::<Pod>(&shared.client) {
            pipelines.push(pipeline::<Pod>(api, ctx.clone(), shutdown.clone()));
        }
    }
    if pipelines.is_empty() {
        info!("TTL-after-finished controller disabled");
        return Ok(());
    }
    let (listed, runs): (Vec<_>, Vec<_>) = pipelines.into_iter().map(|p| (p.listed, p.run)).unzip();
    let started = async {
        let candidates: usize = future::join_all(listed).await.into_iter().sum();
        info!(jobs = ?args.ttl_jobs, pods = args.ttl_pods, namespaces = ?shared.scope.namespaces, candidates, "TTL-after-finished controller started");
        ready();
        future::pending::<()>().await;
    };
    tokio::select! {
        _ = future::join_all(runs) => {}
        () = started => {}
        () = workloads => {}
    }
    info!("TTL-after-finished controller stopped");
    if shutdown.is_cancelled() {
        Ok(())
    } else {
        Err(TaskError::Ended(NAME))
    }
}
