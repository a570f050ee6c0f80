//! An in-memory stand-in for the Kubernetes API server, for kronjob's tests and benchmarks.
//!
//! [`ApiSim`] keeps objects as JSON in memory and serves them with the API server's semantics:
//! list and watch with resourceVersions, create/get/update/patch/delete with conflicts,
//! AlreadyExists, preconditions, the status subresource and label/field selectors. It models the
//! cost of requests ([`CostModel`]: sampled latency and a write throughput cap), can fail on
//! demand ([`ApiSim::set_down`], [`ApiSim::fail_next`], [`ApiSim::set_validator`]), completes
//! Jobs like a crude Job controller, and logs every request ([`ApiSim::requests`]).
//!
//! Use it in-process through [`ApiSim::client`] (a `kube::Client` over [`SimService`]), or over
//! plain HTTP with [`ApiSim::serve_http`] for the real binary and kubectl.
//!
//! All waiting uses `tokio::time`, so a whole simulation runs under `tokio::time::pause()`.
//!
//! # Simplifications
//! - One stored version per resource: any version in a path reads the same JSON, unconverted.
//! - No admission, defaulting or schema validation (see [`ApiSim::set_validator`]); server-side
//!   apply is a merge patch without field managers (never conflicts); a strategic merge patch is
//!   a merge patch (lists are replaced, not merged by key).
//! - Deletion is immediate: no finalizers, graceful deletion or garbage collection.
//! - Lists ignore `limit`/`continue` and `resourceVersion` (always the latest state); field
//!   selectors accept any dotted path; every resource counts `metadata.generation`.
//! - Watch bookmarks come after every second of idle time (the real server: about a minute).
//! - JSON only (no protobuf, no Table), legacy discovery only, no OpenAPI; no namespace exists
//!   unless created, and objects may be created in any namespace.

mod body;
mod cost;
mod discovery;
mod fault;
mod http;
mod jobs;
mod ops;
mod route;
mod selector;
mod service;
mod store;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::time::Instant;

pub use body::SimBody;
pub use cost::{CostModel, Latency};
pub use fault::{Cause, Fault, Hold, Invalid};
pub use service::SimService;

use cost::{CostState, SplitMix64};
use route::{ResKey, Route};
use store::{Store, meta_mut, str_of};

/// The Job controller's workers, as kube-controller-manager's `--concurrent-job-syncs` default.
pub const JOB_WORKERS: usize = 5;

/// The clock objects' timestamps come from.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// A validator for creates and updates of one resource.
pub type Validator = Arc<dyn Fn(&Value) -> Result<(), Invalid> + Send + Sync>;

/// A resource: API group, version, plural, and whether it lives in namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The API group, `""` for the core group.
    pub group: String,
    /// The version, e.g. `v1`.
    pub version: String,
    /// The plural, e.g. `jobs`.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Resource {
    /// A resource by its parts.
    pub fn new(group: &str, version: &str, plural: &str, namespaced: bool) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// The resource of a kind: `("batch/v1", "Job")` is `jobs` in `batch`. Unknown kinds get an
    /// English plural and are namespaced unless their plural is a well-known cluster-scoped one.
    pub fn for_kind(api_version: &str, kind: &str) -> Self {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let plural = route::plural_of(group, kind);
        let namespaced = route::WELL_KNOWN
            .iter()
            .find(|r| r.0 == group && r.3 == plural)
            .map_or(!route::is_cluster_scoped(&plural), |r| r.4);
        Resource::new(group, version, &plural, namespaced)
    }

    /// `batch/v1` Jobs.
    pub fn jobs() -> Self {
        Resource::new("batch", "v1", "jobs", true)
    }

    /// `coordination.k8s.io/v1` Leases.
    pub fn leases() -> Self {
        Resource::new("coordination.k8s.io", "v1", "leases", true)
    }

    /// `v1` Namespaces.
    pub fn namespaces() -> Self {
        Resource::new("", "v1", "namespaces", false)
    }

    /// `apiextensions.k8s.io/v1` CustomResourceDefinitions.
    pub fn crds() -> Self {
        Resource::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            false,
        )
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        route::api_version(&self.group, &self.version)
    }

    fn key(&self) -> ResKey {
        ResKey::new(&self.group, &self.plural)
    }
}

/// One request as the simulator saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRecord {
    /// `GET`, `POST`...
    pub method: String,
    /// The request path.
    pub path: String,
    /// The raw query string.
    pub query: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`
    /// (`get` for non-resource paths such as `/version`).
    pub verb: &'static str,
    /// The API group (`""` for core).
    pub group: String,
    /// The plural, with the subresource: `jobs`, `cronjobs/status` (the path for non-resource
    /// requests).
    pub resource: String,
    /// The namespace in the path.
    pub namespace: Option<String>,
    /// The object name: in the path, or for a create in the body.
    pub name: Option<String>,
    /// The HTTP status answered; 0 when refused (server down).
    pub status: u16,
    /// Whether it was a dry run (`dryRun=All`).
    pub dry_run: bool,
    /// When it arrived.
    pub started: Instant,
    /// When it was answered (for a watch: when the stream started).
    pub finished: Instant,
    /// The clock's time when it arrived.
    pub at: Timestamp,
}

impl RequestRecord {
    /// `"{verb} {resource}"`, the key of [`ApiSim::counts`]; a dry run is counted apart, as
    /// `"{verb} {resource} (dry run)"`.
    pub fn key(&self) -> String {
        let dry = if self.dry_run { " (dry run)" } else { "" };
        format!("{} {}{dry}", self.verb, self.resource)
    }

    /// How long it took to answer.
    pub fn latency(&self) -> Duration {
        self.finished.duration_since(self.started)
    }
}

/// What the simulator learned about a resource from the objects written to it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KindInfo {
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) namespaced: bool,
}

/// Locks a mutex, ignoring poisoning (the data stays consistent: no user code runs under locks).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A hold as requests see it.
pub(crate) struct HeldBy {
    method: String,
    path_contains: String,
    state: tokio::sync::watch::Receiver<fault::Held>,
    waiting: Arc<std::sync::atomic::AtomicUsize>,
}

pub(crate) struct Inner {
    pub(crate) store: Mutex<Store>,
    /// The latest resourceVersion; its changes wake watches (also sent when going down).
    pub(crate) changed: tokio::sync::watch::Sender<u64>,
    pub(crate) down: AtomicBool,
    /// Bumped whenever the server goes down, so open watches end.
    pub(crate) down_epoch: AtomicU64,
    pub(crate) cost: CostModel,
    pub(crate) cost_state: Mutex<CostState>,
    pub(crate) ids: Mutex<SplitMix64>,
    pub(crate) clock: RwLock<Clock>,
    pub(crate) faults: Mutex<Vec<Fault>>,
    /// Where requests matching a [`Hold`] wait: its method, path and release.
    pub(crate) holds: Mutex<Vec<HeldBy>>,
    pub(crate) validators: Mutex<HashMap<ResKey, Validator>>,
    pub(crate) job_duration: Mutex<Option<Duration>>,
    /// The Job controller's workers (`--concurrent-job-syncs`).
    pub(crate) job_workers: Arc<tokio::sync::Semaphore>,
    /// Whether the Job controller runs at all.
    pub(crate) job_controller: AtomicBool,
    pub(crate) log: Mutex<Vec<RequestRecord>>,
    pub(crate) kinds: Mutex<BTreeMap<ResKey, KindInfo>>,
}

impl Inner {
    pub(crate) fn now(&self) -> Timestamp {
        let clock = self
            .clock
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        clock()
    }

    /// The clock's time in whole seconds, RFC 3339 with `Z`, as object timestamps are.
    pub(crate) fn now_seconds(&self) -> String {
        let now = self.now();
        Timestamp::from_second(now.as_second())
            .unwrap_or(now)
            .to_string()
    }

    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    /// Runs `f` on the store, then wakes watches if the resourceVersion moved.
    pub(crate) fn with_store<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let (result, rv) = {
            let mut store = lock(&self.store);
            let result = f(&mut store);
            (result, store.rv())
        };
        self.changed.send_if_modified(|current| {
            let moved = rv > *current;
            *current = (*current).max(rv);
            moved
        });
        result
    }

    /// A random UUID (version 4 layout) from the seeded generator.
    pub(crate) fn uid(&self) -> String {
        let (a, b) = {
            let mut ids = lock(&self.ids);
            (ids.next_u64(), ids.next_u64())
        };
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    /// A `generateName` suffix: five characters of the API server's alphabet.
    pub(crate) fn name_suffix(&self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut ids = lock(&self.ids);
        (0..5)
            .map(|_| ALPHABET[(ids.next_u64() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    /// Records a written object's kind (and a CRD's resource) for lists, bookmarks and discovery.
    pub(crate) fn learn(&self, route: &Route, object: &Value) {
        let mut kinds = lock(&self.kinds);
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        if !kind.is_empty() {
            let namespaced =
                route.namespace.is_some() || !store::meta_str(object, "namespace").is_empty();
            kinds.insert(
                route.res.clone(),
                KindInfo {
                    version: route.version.clone(),
                    kind: kind.into(),
                    namespaced,
                },
            );
        }
        if route.res.plural == "customresourcedefinitions" {
            let spec = object.get("spec").unwrap_or(&Value::Null);
            let text = |p: &str| {
                spec.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let version = text("/versions/0/name");
            if !text("/names/plural").is_empty() && !version.is_empty() {
                let key = ResKey::new(&text("/group"), &text("/names/plural"));
                let info = KindInfo {
                    version,
                    kind: text("/names/kind"),
                    namespaced: text("/scope") == "Namespaced",
                };
                kinds.insert(key, info);
            }
        }
    }

    /// The kind of a resource's objects: learned, else the table, else `Object`.
    pub(crate) fn kind_name(&self, res: &ResKey) -> String {
        if let Some(info) = lock(&self.kinds).get(res) {
            return info.kind.clone();
        }
        route::kind_of(&res.group, &res.plural)
            .unwrap_or("Object")
            .to_string()
    }

    pub(crate) fn record(&self, mut record: RequestRecord, status: u16) {
        record.status = status;
        record.finished = Instant::now();
        lock(&self.log).push(record);
    }

    /// Takes one matching injected fault, if any.
    /// Wait while a hold matching the request holds it; `false` when the request is lost.
    /// Holds whose requests were lost, or that were dropped, let later requests through.
    pub(crate) async fn held(&self, method: &str, path: &str) -> bool {
        let matching: Vec<_> = {
            let mut holds = lock(&self.holds);
            holds.retain(|h| {
                h.state.has_changed().is_ok() && *h.state.borrow() != fault::Held::Failed
            });
            holds
                .iter()
                .filter(|h| h.method == method && path.contains(&h.path_contains))
                .map(|h| (h.state.clone(), Arc::clone(&h.waiting)))
                .collect()
        };
        let mut answered = true;
        for (mut state, waiting) in matching {
            waiting.fetch_add(1, Ordering::SeqCst);
            let ended = state.wait_for(|s| *s != fault::Held::Waiting).await;
            waiting.fetch_sub(1, Ordering::SeqCst);
            answered &= !matches!(ended.as_deref(), Ok(fault::Held::Failed));
        }
        answered
    }

    pub(crate) fn take_fault(&self, method: &str, path: &str) -> Option<fault::ApiError> {
        let mut faults = lock(&self.faults);
        let index = faults.iter().position(|f| f.matches(method, path))?;
        let error = faults[index].to_error();
        faults[index].count -= 1;
        if faults[index].count == 0 {
            faults.remove(index);
        }
        Some(error)
    }

    /// Waits for the request's turn in the write bucket, then for its sampled latency (to the
    /// nearest millisecond: the resolution of Tokio's timer).
    pub(crate) async fn pay(&self, write: bool) {
        let (slot, latency) = lock(&self.cost_state).reserve(&self.cost, write);
        if let Some(slot) = slot {
            tokio::time::sleep_until(slot).await;
        }
        if !latency.is_zero() {
            // Tokio's timer fires on the first millisecond tick at or after a deadline; aiming
            // half a tick early rounds to the nearest millisecond instead of always up.
            tokio::time::sleep(latency.saturating_sub(Duration::from_micros(500))).await;
        }
    }
}

/// The simulated API server. Cheap to clone: clones share the same state.
#[derive(Clone)]
pub struct ApiSim {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for ApiSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiSim")
            .field("resource_version", &self.resource_version())
            .field("down", &self.inner.is_down())
            .field("cost", &self.inner.cost)
            .finish_non_exhaustive()
    }
}

impl ApiSim {
    /// An empty server with this cost model and the wall clock.
    pub fn new(cost: CostModel) -> Self {
        let (changed, _) = tokio::sync::watch::channel(0);
        let inner = Inner {
            store: Mutex::new(Store::new(store::DEFAULT_EVENT_CAPACITY)),
            changed,
            down: AtomicBool::new(false),
            down_epoch: AtomicU64::new(0),
            cost_state: Mutex::new(CostState::new(cost.seed)),
            ids: Mutex::new(SplitMix64::new(cost.seed ^ 0x1d5_c0ff_ee00)),
            cost,
            clock: RwLock::new(Arc::new(Timestamp::now)),
            faults: Mutex::new(Vec::new()),
            holds: Mutex::new(Vec::new()),
            validators: Mutex::new(HashMap::new()),
            job_duration: Mutex::new(None),
            job_workers: Arc::new(tokio::sync::Semaphore::new(JOB_WORKERS)),
            job_controller: AtomicBool::new(true),
            log: Mutex::new(Vec::new()),
            kinds: Mutex::new(BTreeMap::new()),
        };
        ApiSim {
            inner: Arc::new(inner),
        }
    }

    /// Uses this clock for creationTimestamps, Job times and [`RequestRecord::at`].
    pub fn with_clock(self, clock: Clock) -> Self {
        *self
            .inner
            .clock
            .write()
            .unwrap_or_else(PoisonError::into_inner) = clock;
        self
    }

    /// Retains this many watch events (default 200,000); older resourceVersions get 410 Expired.
    pub fn with_event_capacity(self, events: usize) -> Self {
        lock(&self.inner.store).set_capacity(events);
        self
    }

    /// A `kube::Client` over [`ApiSim::service`], default namespace `default`.
    /// Must be called inside a Tokio runtime (kube spawns its buffer worker).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// The tower `Service` answering requests in-process.
    pub fn service(&self) -> SimService {
        SimService::new(self.clone())
    }

    /// The current resourceVersion (the global counter).
    pub fn resource_version(&self) -> u64 {
        lock(&self.inner.store).rv()
    }

    /// Stores an object (create or overwrite), bypassing the cost model, faults, validators and
    /// the status subresource; the resource comes from `apiVersion` and `kind`
    /// ([`Resource::for_kind`]). Fills uid, creationTimestamp and generation when missing; a
    /// missing namespace of a namespaced resource is `default`. Emits ADDED or MODIFIED.
    ///
    /// # Panics
    /// If the object has no `apiVersion` and `kind`, or neither a name nor a generateName.
    pub fn insert(&self, object: Value) -> Value {
        let text = |k: &str| {
            object
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        assert!(
            !api_version.is_empty() && !kind.is_empty(),
            "apisim insert: the object needs apiVersion and kind"
        );
        self.insert_as(&Resource::for_kind(&api_version, &kind), object)
    }

    /// [`ApiSim::insert`] into an explicit resource.
    ///
    /// # Panics
    /// If the object is not a JSON object, or has neither a name nor a generateName.
    pub fn insert_as(&self, r: &Resource, object: Value) -> Value {
        let Value::Object(mut object) = object else {
            panic!("apisim insert: not a JSON object")
        };
        let inner = &self.inner;
        let now = inner.now_seconds();
        object
            .entry("apiVersion")
            .or_insert_with(|| json!(r.api_version()));
        let kind = inner.kind_name(&r.key());
        object.entry("kind").or_insert_with(|| json!(kind));
        let meta = meta_mut(&mut object);
        if r.namespaced {
            if str_of(meta, "namespace").is_empty() {
                meta.insert("namespace".into(), json!("default"));
            }
        } else {
            meta.remove("namespace");
        }
        if str_of(meta, "name").is_empty() {
            let prefix = str_of(meta, "generateName").to_string();
            assert!(
                !prefix.is_empty(),
                "apisim insert: the object needs a name or generateName"
            );
            meta.insert(
                "name".into(),
                json!(format!("{prefix}{}", inner.name_suffix())),
            );
        }
        let (ns, name) = (
            str_of(meta, "namespace").to_string(),
            str_of(meta, "name").to_string(),
        );
        let existing = lock(&inner.store).get(&r.key(), &ns, &name);
        for (key, fallback) in [
            ("uid", json!(inner.uid())),
            ("creationTimestamp", json!(now)),
            ("generation", json!(1)),
        ] {
            let kept = existing
                .as_ref()
                .and_then(|e| e.pointer(&format!("/metadata/{key}")))
                .cloned();
            meta.entry(key).or_insert(kept.unwrap_or(fallback));
        }
        meta.remove("resourceVersion");
        if r.plural == "customresourcedefinitions" && !object.contains_key("status") {
            ops::crd_status(&mut object, &now);
        }
        let route = Route {
            res: r.key(),
            version: r.version.clone(),
            namespace: r.namespaced.then_some(ns),
            name: Some(name),
            sub: None,
        };
        let stored = inner.with_store(|s| s.put(&route.res, object));
        inner.learn(&route, &stored);
        (*stored).clone()
    }

    /// An object, bypassing the cost model.
    pub fn get(&self, r: &Resource, namespace: Option<&str>, name: &str) -> Option<Value> {
        lock(&self.inner.store)
            .get(&r.key(), namespace.unwrap_or(""), name)
            .map(|o| (*o).clone())
    }

    /// The objects of a resource in one namespace (or all), in name order, bypassing the cost
    /// model.
    pub fn list(&self, r: &Resource, namespace: Option<&str>) -> Vec<Value> {
        lock(&self.inner.store)
            .list(&r.key(), namespace)
            .into_iter()
            .map(|o| (*o).clone())
            .collect()
    }

    /// Deletes an object, bypassing the cost model; emits DELETED.
    pub fn remove(&self, r: &Resource, namespace: Option<&str>, name: &str) -> Option<Value> {
        self.inner
            .with_store(|s| s.remove(&r.key(), namespace.unwrap_or(""), name))
            .map(|o| (*o).clone())
    }

    /// While down, every new request fails at once with a transport error
    /// (`io::ErrorKind::ConnectionRefused`), and going down ends every open watch with an error.
    pub fn set_down(&self, down: bool) {
        let inner = &self.inner;
        if down && !inner.down.swap(true, Ordering::SeqCst) {
            inner.down_epoch.fetch_add(1, Ordering::SeqCst);
            inner.changed.send_modify(|_| {});
        } else if !down {
            inner.down.store(false, Ordering::SeqCst);
        }
    }

    /// Queues a fault; faults are matched in the order queued.
    pub fn fail_next(&self, fault: Fault) {
        lock(&self.inner.faults).push(fault);
    }

    /// Holds back every `method` request whose path contains `path_contains` until the
    /// returned [`Hold`] is released or dropped.
    pub fn hold(&self, method: &str, path_contains: &str) -> Hold {
        let (state, watch) = tokio::sync::watch::channel(fault::Held::Waiting);
        let waiting = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        lock(&self.inner.holds).push(HeldBy {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            state: watch,
            waiting: Arc::clone(&waiting),
        });
        Hold { state, waiting }
    }

    /// Validates creates, updates, patches and their dry runs of this resource (not status
    /// writes): `Err` answers 422 Invalid with the causes.
    pub fn set_validator(&self, r: &Resource, validator: Validator) {
        lock(&self.inner.validators).insert(r.key(), validator);
    }

    /// Removes a resource's validator.
    pub fn clear_validator(&self, r: &Resource) {
        lock(&self.inner.validators).remove(&r.key());
    }

    /// Every request so far, in the order answered.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.inner.log).clone()
    }

    /// Requests by `"{verb} {resource}"`, e.g. `"create jobs"`, `"patch cronjobs/status"`
    /// (refused and faulted requests included).
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for r in lock(&self.inner.log).iter() {
            *counts.entry(r.key()).or_insert(0) += 1;
        }
        counts
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        lock(&self.inner.log).clear();
    }
}
