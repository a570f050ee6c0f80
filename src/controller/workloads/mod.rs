//! The workload kinds CronJobs name, as the manager serves them: which it may create
//! (`--workload-kinds`, [`kinds`]), how the API server serves each (discovery), and one watch
//! per kind in use, feeding the owner index.
//!
//! A kind's watch starts when the first CronJob names it and stops when the last one stops
//! naming it (its workloads then leave the index). Until its first list a CronJob naming it
//! waits (a plan without its workloads could miss a running one); a kind that cannot be used
//! makes the CronJob report why (`Ready=False`): not among `--workload-kinds`
//! (`WorkloadKindNotAllowed`), not installed (`WorkloadKindNotFound`: looked up again every
//! [`RECHECK`], so the CronJob starts by itself once the CRD appears), not namespaced
//! (`InvalidWorkload`), or not granted to the manager by RBAC (`WorkloadKindForbidden`, naming
//! the verb). batch/v1 Jobs are always watched (the owner index's Job watch).
//!
//! - [`api`]: create, read and delete a workload of any kind;
//! - [`AllowedKinds`]: the kinds `--workload-kinds` allows ([`crate::workload::allowed`]).

pub mod api;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use futures::{StreamExt, stream};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

pub use crate::workload::allowed::AllowedKinds;
pub use api::{Resolved, WorkloadApi};

use super::Scope;
use super::cache::CachedCronJob;
use super::cronjob::status::reason;
use super::owner_index::{self, IndexWriter, OwnerIndex};
use super::shard::{self, ShardView};
use super::ttl::{TtlWorkload, WorkloadTap};
use crate::api::CompletionRule;
use crate::workload::cel::Completion;
use crate::workload::{Workload, WorkloadType, kinds as table};

/// How often a kind that is not installed, or not granted to the manager, is looked up again.
pub const RECHECK: Duration = Duration::from_secs(10);

/// Whether a kind can be used now.
#[derive(Debug, Clone, PartialEq)]
pub enum Availability {
    /// Its watch has listed: its workloads can be created and read.
    Ready(Arc<Resolved>),
    /// It is being looked up or listed: look again shortly.
    Pending,
    /// It cannot be used, and why.
    Unavailable(Problem),
}

/// Why a kind cannot be used: the `Ready` condition's reason (also the Warning Event's) and
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// One of [`reason`]'s `WORKLOAD_KIND_*` or `INVALID_WORKLOAD`.
    pub reason: &'static str,
    /// What is wrong, in words.
    pub message: String,
}

/// The kinds in use and their watches. Cheap to clone.
#[derive(Clone)]
pub struct Workloads {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Workloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workloads")
            .field("allowed", &self.shared.allowed)
            .finish_non_exhaustive()
    }
}

struct Shared {
    client: Client,
    scope: Scope,
    shard: ShardView,
    index: OwnerIndex,
    allowed: AllowedKinds,
    /// Asks for a reconcile of a CronJob.
    wake: UnboundedSender<ObjectRef<CachedCronJob>>,
    /// Ends every kind's task.
    stop: CancellationToken,
    state: Mutex<State>,
    /// Where the workloads' events go for the TTL controller, once it is running.
    ttl: std::sync::OnceLock<WorkloadTap>,
}

#[derive(Default)]
struct State {
    /// The kind each CronJob names, for the CronJobs that name another kind than Job.
    users: HashMap<ObjectRef<CachedCronJob>, Arc<WorkloadType>>,
    /// The completion rule of each CronJob that has one, compiled (what the TTL controller
    /// judges its workloads by).
    rules: HashMap<ObjectRef<CachedCronJob>, Arc<Completion>>,
    kinds: HashMap<Arc<WorkloadType>, Kind>,
}

struct Kind {
    users: usize,
    availability: Availability,
    stop: CancellationToken,
}

impl Workloads {
    /// The kinds the CronJobs in `scope` name, watched into `index`; `wake` asks for a
    /// reconcile of a CronJob (when its kind's availability changes, or a workload of it
    /// changes meaning); every watch ends with `stop`.
    pub fn new(
        client: Client,
        scope: Scope,
        shard: ShardView,
        index: OwnerIndex,
        allowed: AllowedKinds,
        wake: UnboundedSender<ObjectRef<CachedCronJob>>,
        stop: CancellationToken,
    ) -> Self {
        Workloads {
            shared: Arc::new(Shared {
                client,
                scope,
                shard,
                index,
                allowed,
                wake,
                stop,
                state: Mutex::default(),
                ttl: std::sync::OnceLock::new(),
            }),
        }
    }

    /// From now on, hand the TTL controller the workloads of every kind watched.
    pub fn hand_to_ttl(&self, tap: WorkloadTap) {
        let _ = self.shared.ttl.set(tap);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stop every kind's watch (the end of the controller's term).
    pub fn stop(&self) {
        self.shared.stop.cancel();
    }

    /// Whether workloads of `type_` can be created and read now.
    pub fn availability(&self, type_: &WorkloadType) -> Availability {
        if type_.is_job() {
            static JOB: std::sync::LazyLock<Arc<Resolved>> =
                std::sync::LazyLock::new(|| Arc::new(Resolved::job()));
            return if self.shared.allowed.allows("jobs", "batch") {
                Availability::Ready(Arc::clone(&JOB))
            } else {
                Availability::Unavailable(not_allowed("jobs.batch", &self.shared.allowed))
            };
        }
        self.state()
            .kinds
            .get(type_)
            .map_or(Availability::Pending, |k| k.availability.clone())
    }

    /// The kind `type_` as served, if it is ready (for the deletes of its workloads).
    pub fn resolved(&self, type_: &WorkloadType) -> Option<Arc<Resolved>> {
        match self.availability(type_) {
            Availability::Ready(resolved) => Some(resolved),
            _ => None,
        }
    }

    /// Follow the CronJob cache: the kind each CronJob names, a kind's watch started by its
    /// first CronJob and stopped after its last.
    pub fn observe(&self, event: &watcher::Event<CachedCronJob>) {
        match event {
            // A CronJob of Jobs names no kind to watch (unless it used to).
            watcher::Event::Apply(cj) | watcher::Event::InitApply(cj)
                if cj.spec.job_template.is_some() && self.state().users.is_empty() => {}
            watcher::Event::Apply(cj) | watcher::Event::InitApply(cj) => {
                self.ruled(ObjectRef::from_obj(cj), cj.spec.completion.as_deref());
                self.named(ObjectRef::from_obj(cj), cj.workload_type());
            }
            watcher::Event::Delete(cj) => {
                self.ruled(ObjectRef::from_obj(cj), None);
                self.named(ObjectRef::from_obj(cj), None);
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }

    /// `cronjob` now has the completion rule `rule` (compiled, unless it does not compile:
    /// then its workloads are judged by nothing, and its reconcile says why).
    fn ruled(&self, cronjob: ObjectRef<CachedCronJob>, rule: Option<&CompletionRule>) {
        let mut state = self.state();
        let compiled =
            rule.and_then(|rule| Completion::compile(&rule.succeeded, &rule.failed).ok());
        let same = match (state.rules.get(&cronjob), rule) {
            (Some(kept), Some(rule)) => {
                kept.source() == (rule.succeeded.as_str(), rule.failed.as_str())
            }
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        match compiled {
            Some(compiled) => {
                state.rules.insert(cronjob, Arc::new(compiled));
            }
            None => {
                state.rules.remove(&cronjob);
            }
        }
    }

    /// The completion rule of the CronJob `owner` of `namespace`, if it has one.
    fn rule_of(&self, namespace: &str, owner: &str) -> Option<Arc<Completion>> {
        let key = ObjectRef::new(owner).within(namespace);
        self.state().rules.get(&key).cloned()
    }

    /// `cronjob` now names `type_` (`None`: no kind, or a Job).
    fn named(&self, cronjob: ObjectRef<CachedCronJob>, type_: Option<WorkloadType>) {
        let type_ = type_.filter(|t| !t.is_job());
        let mut state = self.state();
        if state.users.get(&cronjob).map(|t| &**t) == type_.as_ref() {
            return;
        }
        if let Some(old) = state.users.remove(&cronjob) {
            let gone = state.kinds.get_mut(&old).is_some_and(|kind| {
                kind.users -= 1;
                kind.users == 0
            });
            if gone && let Some(kind) = state.kinds.remove(&old) {
                kind.stop.cancel();
                drop(state);
                self.shared.index.forget_kind(&old);
                tracing::info!(kind = %old.kind, api_version = %old.api_version, "no CronJob names this kind any more: its watch stopped");
                state = self.state();
            }
        }
        let Some(type_) = type_ else {
            return;
        };
        let type_ = Arc::new(type_);
        state.users.insert(cronjob, Arc::clone(&type_));
        if let Some(kind) = state.kinds.get_mut(&type_) {
            kind.users += 1;
            return;
        }
        let stop = self.shared.stop.child_token();
        state.kinds.insert(
            Arc::clone(&type_),
            Kind {
                users: 1,
                availability: Availability::Pending,
                stop: stop.clone(),
            },
        );
        drop(state);
        let this = self.clone();
        tokio::spawn(async move { this.serve(type_, stop).await });
    }

    /// Record `availability` for `type_` and wake the CronJobs naming it when it changed.
    fn set(&self, type_: &Arc<WorkloadType>, availability: Availability) {
        let mut state = self.state();
        let Some(kind) = state.kinds.get_mut(type_) else {
            return;
        };
        if kind.availability == availability {
            return;
        }
        if let Availability::Unavailable(problem) = &availability {
            tracing::warn!(kind = %type_.kind, api_version = %type_.api_version, reason = problem.reason, message = %problem.message, "workload kind unavailable");
        }
        kind.availability = availability;
        let users: Vec<_> = state
            .users
            .iter()
            .filter(|(_, t)| *t == type_)
            .map(|(cj, _)| cj.clone())
            .collect();
        drop(state);
        for cj in users {
            let _ = self.shared.wake.unbounded_send(cj);
        }
    }

    /// Look `type_` up, check it may be used, and watch it, until `stop`; again after
    /// [`RECHECK`] while it is not installed or not granted, and when its CRD goes away.
    async fn serve(self, type_: Arc<WorkloadType>, stop: CancellationToken) {
        loop {
            let outcome = tokio::select! {
                () = stop.cancelled() => return,
                outcome = self.try_serve(&type_) => outcome,
            };
            if let Some(problem) = outcome {
                self.set(&type_, Availability::Unavailable(problem));
            }
            self.shared.index.forget_kind(&type_);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RECHECK) => {}
            }
        }
    }

    /// One attempt: look the kind up, check it, and watch it until its watch says it is gone
    /// (then why, as a problem) or fails to be looked up (`None`: try again).
    async fn try_serve(&self, type_: &Arc<WorkloadType>) -> Option<Problem> {
        let client = &self.shared.client;
        let gvk = GroupVersionKind::gvk(type_.group(), type_.version(), &type_.kind);
        let (resource, capabilities) = match kube::discovery::pinned_kind(client, &gvk).await {
            Ok(found) => found,
            Err(e) if not_found(&e) => return Some(kind_not_found(type_)),
            Err(e) => {
                tracing::warn!(kind = %type_.kind, error = %crate::telemetry::error_chain(&e), "looking up a workload kind failed; retrying");
                return None;
            }
        };
        if capabilities.scope != kube::discovery::Scope::Namespaced {
            return Some(Problem {
                reason: reason::INVALID_WORKLOAD,
                message: format!(
                    "{} {} is cluster-scoped: a CronJob runs namespaced kinds only",
                    type_.api_version, type_.kind
                ),
            });
        }
        let row = table::known(type_.group(), &type_.kind);
        let resolved = Arc::new(Resolved {
            type_: Arc::clone(type_),
            resource,
            row,
        });
        if !self
            .shared
            .allowed
            .allows(&resolved.resource.plural, &resolved.resource.group)
        {
            return Some(not_allowed(&resolved.name(), &self.shared.allowed));
        }
        if let Some(problem) = self.forbidden(&resolved).await {
            return Some(problem);
        }
        self.watch(resolved).await
    }

    /// What the manager may not do with `kind` in its scope, if anything (asked of the API
    /// server's authorizer for each verb kronjob uses).
    async fn forbidden(&self, kind: &Resolved) -> Option<Problem> {
        let api: Api<SelfSubjectAccessReview> = Api::all(self.shared.client.clone());
        let namespaces: Vec<Option<String>> = if self.shared.scope.namespaces.is_empty() {
            vec![None]
        } else {
            self.shared
                .scope
                .namespaces
                .iter()
                .cloned()
                .map(Some)
                .collect()
        };
        for namespace in namespaces {
            for verb in ["create", "get", "list", "watch", "delete"] {
                let review = SelfSubjectAccessReview {
                    spec: SelfSubjectAccessReviewSpec {
                        resource_attributes: Some(ResourceAttributes {
                            group: Some(kind.resource.group.clone()),
                            resource: Some(kind.resource.plural.clone()),
                            verb: Some(verb.into()),
                            namespace: namespace.clone(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                match api.create(&PostParams::default(), &review).await {
                    Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => {}
                    Ok(_) => {
                        let within = namespace
                            .as_deref()
                            .map_or_else(String::new, |ns| format!(" in namespace {ns}"));
                        return Some(Problem {
                            reason: reason::WORKLOAD_KIND_FORBIDDEN,
                            message: format!(
                                "the manager may not {verb} {}{within}: grant it (RBAC) with the kind in --workload-kinds",
                                kind.name()
                            ),
                        });
                    }
                    // No answer says nothing: the watch itself tells.
                    Err(_) => return None,
                }
            }
        }
        None
    }

    /// Watch `kind` (one watch per namespace in scope, this replica's buckets with
    /// `--sharding`) into the owner index, waking the owners of what changes; ready once every
    /// watch has listed. Ends when a watch says the kind is gone or forbidden (why).
    async fn watch(&self, kind: Arc<Resolved>) -> Option<Problem> {
        let shared = &self.shared;
        let apis: Vec<(Option<String>, Api<DynamicObject>)> = if shared.scope.namespaces.is_empty()
        {
            vec![(None, Api::all_with(shared.client.clone(), &kind.resource))]
        } else {
            let mut namespaces = shared.scope.namespaces.clone();
            namespaces.sort();
            namespaces.dedup();
            namespaces
                .into_iter()
                .map(|ns| {
                    let api = Api::namespaced_with(shared.client.clone(), &ns, &kind.resource);
                    (Some(ns), api)
                })
                .collect()
        };
        let mut writers: Vec<IndexWriter> = apis
            .iter()
            .map(|(ns, _)| shared.index.writer(&kind.type_, ns.as_deref()))
            .collect();
        let watches = apis.into_iter().enumerate().map(|(i, (_, api))| {
            shard::watch(api, owner_index::job_watch_config(), &shared.shard, None)
                .map(move |event| (i, event))
        });
        let mut events = stream::select_all(watches);
        while let Some((i, event)) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    if let Some(code) = status_code(&e)
                        && (code == 404 || code == 403)
                    {
                        return Some(if code == 404 {
                            kind_not_found(&kind.type_)
                        } else {
                            Problem {
                                reason: reason::WORKLOAD_KIND_FORBIDDEN,
                                message: format!(
                                    "the manager may not watch {}: grant it (RBAC) with the kind in --workload-kinds",
                                    kind.name()
                                ),
                            }
                        });
                    }
                    tracing::debug!(kind = %kind.type_.kind, error = %crate::telemetry::error_chain(&e), "workload watch failed; retrying");
                    continue;
                }
            };
            let row = kind.row;
            let owners =
                writers[i].apply_workload_event(&event, |object| Workload::of_object(object, row));
            if let Some(tap) = shared.ttl.get() {
                tap.forward(&kind, self.for_ttl(&kind, &event));
            }
            for (namespace, owner) in owners {
                let _ = shared
                    .wake
                    .unbounded_send(ObjectRef::new(&owner.name).within(&namespace));
            }
            if writers.iter().all(IndexWriter::is_listed) {
                self.set(&kind.type_, Availability::Ready(Arc::clone(&kind)));
            }
        }
        None
    }
}

impl Workloads {
    /// `event` as the TTL controller takes it: each workload read through its kind's rule, or
    /// judged by its CronJob's completion rule.
    fn for_ttl(
        &self,
        kind: &Arc<Resolved>,
        event: &watcher::Event<DynamicObject>,
    ) -> watcher::Event<TtlWorkload> {
        let read = |object: &DynamicObject| {
            let mut workload = Workload::of_object(object, kind.row);
            let completion = match kind.row {
                Some(_) => None,
                None => {
                    let owner = object
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .find(|o| o.controller == Some(true))
                        .map(|o| o.name.clone())
                        .unwrap_or_default();
                    let namespace = object.metadata.namespace.clone().unwrap_or_default();
                    self.rule_of(&namespace, &owner)
                }
            };
            if let Some(completion) = &completion {
                workload.judge(completion);
            }
            TtlWorkload {
                workload,
                kind: Arc::clone(kind),
                completion,
            }
        };
        match event {
            watcher::Event::Apply(o) => watcher::Event::Apply(read(o)),
            watcher::Event::Delete(o) => watcher::Event::Delete(read(o)),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitApply(o) => watcher::Event::InitApply(read(o)),
            watcher::Event::InitDone => watcher::Event::InitDone,
        }
    }
}

/// The problem of a kind not in `--workload-kinds`.
fn not_allowed(name: &str, allowed: &AllowedKinds) -> Problem {
    Problem {
        reason: reason::WORKLOAD_KIND_NOT_ALLOWED,
        message: allowed.refusal(name),
    }
}

/// The problem of a kind the API server does not serve.
fn kind_not_found(type_: &WorkloadType) -> Problem {
    Problem {
        reason: reason::WORKLOAD_KIND_NOT_FOUND,
        message: format!(
            "the API server serves no kind {} in {}: install its CRD (kronjob looks again every {}s)",
            type_.kind,
            type_.api_version,
            RECHECK.as_secs()
        ),
    }
}

/// Whether a discovery error says the group, version or kind does not exist.
fn not_found(error: &kube::Error) -> bool {
    crate::workload::served::not_served(error)
}

/// The HTTP status of a watch error, if it has one.
fn status_code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}
