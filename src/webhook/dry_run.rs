//! The webhook's requests to the API server, on a budget of their own. Anyone who can reach the
//! webhook port can send it AdmissionReviews, and each CronJob with a new template would cost
//! one dry-run create on the API server (and, for a workload kind, a lookup of the kind and an
//! access review of its author). So, in front of them:
//!
//! - **deduplicated**: the verdict (valid or invalid) of a template already checked is reused
//!   for [`VERDICT_TTL`], for any CronJob of the namespace with that kind and template; a
//!   kind's lookup for [`KIND_TTL`] ([`MISSING_KIND_TTL`] when it is not served); an access
//!   answer for the same user, groups, kind and namespace for [`access::ALLOWED_TTL`]
//!   ([`access::DENIED_TTL`] when refused);
//! - **rate-limited**: at most `per_minute` dry runs in any minute ([`Window`]); past it a
//!   template is not checked and the CronJob is allowed (the reconciler checks each generation's
//!   Job template once, so an invalid one still gets `Ready=False` `InvalidJobTemplate` and no
//!   Job; an invalid workload gets `InvalidWorkload` when its create is refused). Lookups and
//!   access reviews have a window of their own, [`REVIEWS_PER_MINUTE`]; past it a CronJob of a
//!   workload kind is refused, never allowed on doubt;
//! - **their own client and concurrency**: the manager gives the webhook a client of its own
//!   (another connection to the API server) and at most [`MAX_IN_FLIGHT`] of each run at once,
//!   so the controllers' creates never wait behind them;
//! - **within the webhook's time**: every request gives up at the deadline its review was
//!   given, so an answer always comes before the API server's own timeout.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::SubjectAccessReviewSpec;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use kube::api::{ApiResource, DynamicObject};
use lru::LruCache;
use serde::Serialize;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant as TokioInstant;

use super::access;
use super::api::{AdmissionApi, Served};
use super::metrics::WebhookMetrics;
use crate::api::WorkloadTemplate;
use crate::workload::{Unknown, Verdict, WorkloadType};

/// Default of `--webhook-dry-runs-per-minute`.
pub const DRY_RUNS_PER_MINUTE: u32 = 50;
/// How long a template's verdict is reused.
pub const VERDICT_TTL: Duration = Duration::from_secs(600);
/// Most verdicts remembered (least recently used are forgotten first).
pub const VERDICTS: usize = 4096;
/// Most dry runs in flight at once.
pub const MAX_IN_FLIGHT: usize = 4;
/// How long a dry run waits for one of the [`MAX_IN_FLIGHT`] before it is skipped as busy.
pub const QUEUE_WAIT: Duration = Duration::from_secs(2);
/// Most lookups of workload kinds and access reviews sent in any minute (over it, a CronJob of
/// a workload kind is refused: its author's access cannot be checked).
pub const REVIEWS_PER_MINUTE: u32 = 100;
/// Most access answers remembered.
pub const ACCESS: usize = 4096;
/// Most kinds' lookups remembered.
pub const KINDS: usize = 1024;
/// How long a served kind's lookup is reused.
pub const KIND_TTL: Duration = Duration::from_secs(60);
/// How long a kind found missing stays missing: short, so a CRD just installed is seen soon.
pub const MISSING_KIND_TTL: Duration = Duration::from_secs(5);

/// A sliding window that lets at most `per_minute` events through in any 60 seconds, all of
/// them at once if they come at once (a user applying a directory of CronJobs gets each
/// template checked), none more until the oldest is a minute old. An event lasts from
/// [`take`](Self::take) to [`finish`](Self::finish) (a dry run: from its request to its answer)
/// and counts while it lasts and for a minute after it ended, so at most `per_minute` start,
/// and at most `per_minute` end, in any minute. Pure: the caller gives the time; it holds at
/// most `per_minute` instants.
#[derive(Debug, Clone)]
pub struct Window {
    per_minute: usize,
    lasting: usize,
    ended: VecDeque<Instant>,
}

impl Window {
    /// An empty window for `per_minute` events a minute (0: none ever).
    pub fn per_minute(per_minute: u32) -> Self {
        let per_minute = usize::try_from(per_minute).unwrap_or(usize::MAX);
        Window {
            per_minute,
            lasting: 0,
            ended: VecDeque::with_capacity(per_minute.min(1024)),
        }
    }

    /// Start one event at `now`, if fewer than `per_minute` last or ended in the last minute.
    pub fn take(&mut self, now: Instant) -> bool {
        while let Some(first) = self.ended.front() {
            if now.saturating_duration_since(*first) >= MINUTE {
                self.ended.pop_front();
            } else {
                break;
            }
        }
        if self.lasting + self.ended.len() < self.per_minute {
            self.lasting += 1;
            true
        } else {
            false
        }
    }

    /// End at `now` an event [`take`](Self::take) started.
    pub fn finish(&mut self, now: Instant) {
        if self.lasting > 0 {
            self.lasting -= 1;
            let at = self.ended.back().map_or(now, |last| now.max(*last));
            self.ended.push_back(at);
        }
    }
}

const MINUTE: Duration = Duration::from_secs(60);

/// What identifies a template's verdict: the namespace, the kind and the template, as a
/// SHA-256 digest of its JSON (the template carries nothing of the CronJob or the slot).
pub fn template_key(namespace: &str, type_: &WorkloadType, template: &impl Serialize) -> [u8; 32] {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [namespace, &type_.api_version, &type_.kind] {
        digest.update(part.as_bytes());
        digest.update(&[0]);
    }
    digest.update(&json);
    let mut key = [0; 32];
    key.copy_from_slice(digest.finish().as_ref());
    key
}

/// What a key is remembered with, until when: at most `capacity` entries, the least recently
/// used forgotten first. Pure: the caller gives the time.
#[derive(Debug)]
pub struct Expiring<V> {
    entries: LruCache<[u8; 32], (Instant, V)>,
}

impl<V: Clone> Expiring<V> {
    /// Room for `capacity` entries (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Expiring {
            entries: LruCache::new(capacity),
        }
    }

    /// The value of `key`, if it is remembered until after `now`.
    pub fn get(&mut self, key: &[u8; 32], now: Instant) -> Option<V> {
        match self.entries.get(key) {
            Some((until, value)) if now < *until => Some(value.clone()),
            Some(_) => {
                self.entries.pop(key);
                None
            }
            None => None,
        }
    }

    /// Remember `value` for `key` until `until`.
    pub fn put(&mut self, key: [u8; 32], value: V, until: Instant) {
        self.entries.put(key, (until, value));
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Why a request to the API server was not made, or not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unchecked {
    /// Over its rate ([`Window`]).
    RateLimited,
    /// [`MAX_IN_FLIGHT`] in flight until the wait ran out.
    Busy,
    /// No answer in time.
    Timeout,
    /// Another failure, as text.
    Failed(String),
}

impl Unchecked {
    /// The `reason` label of a skipped request: `rate_limited` or `busy` (else `error`).
    pub fn label(&self) -> &'static str {
        match self {
            Unchecked::RateLimited => "rate_limited",
            Unchecked::Busy => "busy",
            Unchecked::Timeout => "timeout",
            Unchecked::Failed(_) => "error",
        }
    }
}

impl std::fmt::Display for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unchecked::RateLimited => {
                f.write_str("the webhook's requests to the API server are rate limited")
            }
            Unchecked::Busy => {
                f.write_str("the webhook's requests to the API server are all in flight")
            }
            Unchecked::Timeout => f.write_str("the API server did not answer in time"),
            Unchecked::Failed(why) => write!(f, "the API server's answer: {why}"),
        }
    }
}

/// A rate ([`Window`]) and at most [`MAX_IN_FLIGHT`] at once.
#[derive(Debug)]
struct Limiter {
    window: Mutex<Window>,
    in_flight: Semaphore,
}

impl Limiter {
    fn per_minute(per_minute: u32) -> Self {
        Limiter {
            window: Mutex::new(Window::per_minute(per_minute)),
            in_flight: Semaphore::new(MAX_IN_FLIGHT),
        }
    }

    /// A place among those in flight (waiting at most [`QUEUE_WAIT`], and never past
    /// `until`), then one of the window's: held until dropped.
    async fn enter(&self, until: TokioInstant) -> Result<Entered<'_>, Unchecked> {
        let wait = until
            .saturating_duration_since(TokioInstant::now())
            .min(QUEUE_WAIT);
        let Ok(Ok(permit)) = tokio::time::timeout(wait, self.in_flight.acquire()).await else {
            return Err(Unchecked::Busy);
        };
        let lasting = Lasting::start(&self.window).ok_or(Unchecked::RateLimited)?;
        Ok(Entered {
            _permit: permit,
            _lasting: lasting,
        })
    }
}

/// A request in flight and in its [`Window`].
struct Entered<'a> {
    _permit: SemaphorePermit<'a>,
    _lasting: Lasting<'a>,
}

/// What a dry run judges: a Job template (in a batch/v1 CronJob), or a workload template (the
/// object it makes, of the kind as served).
#[derive(Debug, Clone, Copy)]
pub enum Probe<'a> {
    /// A `spec.jobTemplate`.
    Job(&'a JobTemplateSpec),
    /// A `spec.workloadTemplate`, the object its dry run creates, and its kind's resource.
    Workload {
        /// The template (what the verdict is remembered by).
        template: &'a WorkloadTemplate,
        /// The object created ([`crate::workload::build::probe_object`]).
        object: &'a DynamicObject,
        /// Where it is created.
        resource: &'a ApiResource,
    },
}

impl Probe<'_> {
    fn key(&self, namespace: &str) -> [u8; 32] {
        match self {
            Probe::Job(template) => template_key(namespace, &WorkloadType::job(), template),
            Probe::Workload { template, .. } => {
                let type_ = WorkloadType {
                    api_version: template.api_version.clone(),
                    kind: template.kind.clone(),
                };
                template_key(namespace, &type_, template)
            }
        }
    }
}

/// The webhook's requests to the API server ([`AdmissionApi`]) behind caches, rate limits and
/// concurrency limits: dry runs ([`Budgeted::dry_run`]: remembered by template,
/// `--webhook-dry-runs-per-minute`; counted in `kronjob_webhook_dry_run_total` and
/// `kronjob_webhook_dry_runs_skipped_total`), and the lookups of workload kinds and the
/// authors' access reviews ([`Budgeted::served`], [`Budgeted::may_create`]: remembered briefly,
/// [`REVIEWS_PER_MINUTE`], counted in `kronjob_webhook_access_reviews_total`).
pub struct Budgeted {
    api: Arc<dyn AdmissionApi>,
    dry_runs: Limiter,
    verdicts: Mutex<Expiring<Verdict>>,
    reviews: Limiter,
    kinds: Mutex<Expiring<Option<Served>>>,
    access: Mutex<Expiring<bool>>,
    metrics: WebhookMetrics,
}

impl std::fmt::Debug for Budgeted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budgeted").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Budgeted {
    /// `api` with at most `per_minute` dry runs a minute, and [`REVIEWS_PER_MINUTE`] lookups
    /// and access reviews.
    pub fn new(api: Arc<dyn AdmissionApi>, per_minute: u32, metrics: WebhookMetrics) -> Self {
        Budgeted {
            api,
            dry_runs: Limiter::per_minute(per_minute),
            verdicts: Mutex::new(Expiring::with_capacity(VERDICTS)),
            reviews: Limiter::per_minute(REVIEWS_PER_MINUTE),
            kinds: Mutex::new(Expiring::with_capacity(KINDS)),
            access: Mutex::new(Expiring::with_capacity(ACCESS)),
            metrics,
        }
    }

    /// The API server's verdict on `probe` in `namespace`, known or asked for (answered by
    /// `until`); without one (limited, or no answer) [`Verdict::Unknown`].
    pub async fn dry_run(&self, namespace: &str, probe: Probe<'_>, until: TokioInstant) -> Verdict {
        let key = probe.key(namespace);
        if let Some(verdict) = lock(&self.verdicts).get(&key, Instant::now()) {
            self.metrics.dry_run_skipped("cached");
            return verdict;
        }
        // One in flight of MAX_IN_FLIGHT first, so a dry run starts when the window lets it.
        let _entered = match self.dry_runs.enter(until).await {
            Ok(entered) => entered,
            Err(why) => {
                self.metrics.dry_run_skipped(why.label());
                return Verdict::Unknown(Unknown::Failed(format!(
                    "not checked: {} (the webhook's dry runs are limited)",
                    why.label()
                )));
            }
        };
        let asked = async {
            match probe {
                Probe::Job(template) => self.api.dry_run(namespace, template).await,
                Probe::Workload {
                    object, resource, ..
                } => self.api.dry_run_workload(namespace, resource, object).await,
            }
        };
        let verdict = tokio::time::timeout_at(until, asked)
            .await
            .unwrap_or(Verdict::Unknown(Unknown::Timeout));
        self.metrics.dry_run(verdict.label());
        if matches!(verdict, Verdict::Valid | Verdict::Invalid(_)) {
            lock(&self.verdicts).put(key, verdict.clone(), Instant::now() + VERDICT_TTL);
        }
        verdict
    }

    /// How the API server serves `type_` (`None`: not at all), known or looked up by `until`.
    pub async fn served(
        &self,
        type_: &WorkloadType,
        until: TokioInstant,
    ) -> Result<Option<Served>, Unchecked> {
        let key = template_key("", type_, &());
        if let Some(served) = lock(&self.kinds).get(&key, Instant::now()) {
            return Ok(served);
        }
        let _entered = self.reviews.enter(until).await?;
        let served = match tokio::time::timeout_at(until, self.api.discover(type_)).await {
            Err(_) => return Err(Unchecked::Timeout),
            Ok(Err(e)) => return Err(Unchecked::Failed(crate::telemetry::error_chain(&e))),
            Ok(Ok(served)) => served,
        };
        let ttl = if served.is_some() {
            KIND_TTL
        } else {
            MISSING_KIND_TTL
        };
        lock(&self.kinds).put(key, served.clone(), Instant::now() + ttl);
        Ok(served)
    }

    /// Whether the authorizer allows the access `spec` describes, known or asked by `until`;
    /// an error when it could not be asked or did not answer (the caller refuses: never
    /// allowed on doubt).
    pub async fn may_create(
        &self,
        spec: &SubjectAccessReviewSpec,
        until: TokioInstant,
    ) -> Result<bool, Unchecked> {
        let key = access::key(spec);
        if let Some(allowed) = lock(&self.access).get(&key, Instant::now()) {
            self.metrics.access_review("cached");
            return Ok(allowed);
        }
        let answer = match self.reviews.enter(until).await {
            Err(why) => Err(why),
            Ok(_entered) => match tokio::time::timeout_at(until, self.api.review(spec)).await {
                Err(_) => Err(Unchecked::Timeout),
                Ok(Err(e)) => Err(Unchecked::Failed(crate::telemetry::error_chain(&e))),
                Ok(Ok(allowed)) => Ok(allowed),
            },
        };
        match &answer {
            Ok(allowed) => {
                self.metrics
                    .access_review(if *allowed { "allowed" } else { "denied" });
                let until = Instant::now() + access::ttl(*allowed);
                lock(&self.access).put(key, *allowed, until);
            }
            Err(_) => self.metrics.access_review("unchecked"),
        }
        answer
    }
}

/// A request in the [`Window`], from its start until it is dropped (answered, or given up).
struct Lasting<'a>(&'a Mutex<Window>);

impl<'a> Lasting<'a> {
    fn start(window: &'a Mutex<Window>) -> Option<Self> {
        let started = lock(window).take(Instant::now());
        started.then(|| Lasting(window))
    }
}

impl Drop for Lasting<'_> {
    fn drop(&mut self) {
        lock(self.0).finish(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::future::BoxFuture;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_window_never_lets_more_than_its_rate_start_or_end_in_any_minute() {
        fn most_within_a_minute(times: &[Instant]) -> usize {
            let mut times = times.to_vec();
            times.sort();
            (0..times.len())
                .map(|i| {
                    times[i..]
                        .iter()
                        .take_while(|t| t.duration_since(times[i]) < MINUTE)
                        .count()
                })
                .max()
                .unwrap_or(0)
        }
        for per_minute in [1, 5, 50, 120] {
            let start = Instant::now();
            let mut window = Window::per_minute(per_minute);
            // Ask every 100 ms for ten minutes; each event lasts 0 to 3 s (a fixed sequence).
            let (mut starts, mut ends, mut lasting) = (Vec::new(), Vec::new(), Vec::new());
            let mut seed = 7u64;
            for tick in 0..6000u64 {
                let now = start + Duration::from_millis(tick * 100);
                lasting.sort();
                while lasting.first().is_some_and(|end| *end <= now) {
                    let end = lasting.remove(0);
                    window.finish(end);
                    ends.push(end);
                }
                if window.take(now) {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    starts.push(now);
                    lasting.push(now + Duration::from_millis((seed >> 33) % 3000));
                }
            }
            let n = per_minute as usize;
            assert!(
                most_within_a_minute(&starts) <= n,
                "{per_minute}/min: starts"
            );
            assert!(most_within_a_minute(&ends) <= n, "{per_minute}/min: ends");
            // Under constant demand the rate is used, not just bounded.
            let tenth_minute = starts
                .iter()
                .filter(|t| t.duration_since(start) >= Duration::from_secs(540))
                .count();
            assert!(
                tenth_minute * 10 >= n * 9,
                "{per_minute}/min: {tenth_minute}"
            );
        }
        // A burst: all of the rate at one instant; answered a second later, the next may start
        // a minute after the answers.
        let start = Instant::now();
        let mut window = Window::per_minute(50);
        assert_eq!((0..80).filter(|_| window.take(start)).count(), 50);
        for _ in 0..50 {
            window.finish(start + Duration::from_secs(1));
        }
        assert!(!window.take(start + MINUTE));
        assert!(window.take(start + MINUTE + Duration::from_secs(1)));
        let mut none = Window::per_minute(0);
        assert!(!none.take(Instant::now() + Duration::from_secs(3600)));
    }

    fn job(image: &str) -> JobTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"team": "a"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}
        }))
        .expect("template")
    }

    fn workload(api_version: &str, kind: &str, spec: serde_json::Value) -> WorkloadTemplate {
        serde_json::from_value(serde_json::json!({
            "apiVersion": api_version, "kind": kind, "spec": spec
        }))
        .expect("template")
    }

    fn type_of(template: &WorkloadTemplate) -> WorkloadType {
        WorkloadType {
            api_version: template.api_version.clone(),
            kind: template.kind.clone(),
        }
    }

    #[test]
    fn the_key_is_the_namespace_kind_and_template_only() {
        let job_type = WorkloadType::job();
        let a = template_key("ns", &job_type, &job("busybox"));
        assert_eq!(
            a,
            template_key("ns", &job_type, &job("busybox")),
            "the same template"
        );
        assert_ne!(a, template_key("other", &job_type, &job("busybox")));
        assert_ne!(a, template_key("ns", &job_type, &job("alpine")));
        let ray = workload("ray.io/v1", "RayJob", serde_json::json!({"x": 1}));
        let jobset = workload(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            serde_json::json!({"x": 1}),
        );
        let key = |t: &WorkloadTemplate| template_key("ns", &type_of(t), t);
        assert_ne!(key(&ray), key(&jobset), "the same spec, another kind");
        let mut v2 = ray.clone();
        v2.api_version = "ray.io/v2".into();
        assert_ne!(key(&ray), key(&v2), "another version");
        assert_eq!(key(&ray), key(&ray.clone()));
    }

    #[test]
    fn entries_last_until_their_time_and_the_least_used_go_first() {
        let now = Instant::now();
        let later = |s: u64| now + Duration::from_secs(s);
        let mut cache: Expiring<bool> = Expiring::with_capacity(2);
        cache.put([1; 32], true, later(30));
        cache.put([2; 32], false, later(5));
        // (key, at, remembered)
        let cases = [
            ([1; 32], now, Some(true)),
            ([2; 32], later(4), Some(false)),
            ([2; 32], later(5), None),
            ([1; 32], later(29), Some(true)),
            ([3; 32], now, None),
        ];
        for (key, at, want) in cases {
            assert_eq!(cache.get(&key, at), want, "{key:?} at {:?}", at - now);
        }
        assert_eq!(cache.len(), 1, "the expired entry is gone");
        cache.put([3; 32], true, later(60));
        cache.put([4; 32], true, later(60));
        assert_eq!(cache.len(), 2, "bounded");
        assert_eq!(
            cache.get(&[1; 32], now),
            None,
            "the least recently used went"
        );
        assert!(!cache.is_empty());
    }

    /// The API server, counting what it is asked: every template with `bad` in it is invalid;
    /// kinds `Missing` are not served, `Cluster` are cluster-scoped, `Broken` fail to be looked
    /// up; users named `alice` may create, `slow` get no answer, `error` an error; the rest
    /// may not.
    #[derive(Default)]
    pub(crate) struct Fake {
        pub dry_runs: AtomicUsize,
        pub lookups: AtomicUsize,
        pub reviews: AtomicUsize,
    }

    fn verdict_of(json: String) -> Verdict {
        if json.contains("bad") {
            Verdict::Invalid(Box::new(kube::core::Status::failure("bad", "Invalid")))
        } else {
            Verdict::Valid
        }
    }

    impl crate::workload::TemplateDryRun for Fake {
        fn dry_run<'a>(
            &'a self,
            _: &'a str,
            template: &'a JobTemplateSpec,
        ) -> BoxFuture<'a, Verdict> {
            self.dry_runs.fetch_add(1, Ordering::SeqCst);
            let json = serde_json::to_string(&template.spec).unwrap_or_default();
            Box::pin(async move { verdict_of(json) })
        }
    }

    impl AdmissionApi for Fake {
        fn dry_run_workload<'a>(
            &'a self,
            _: &'a str,
            _: &'a ApiResource,
            object: &'a DynamicObject,
        ) -> BoxFuture<'a, Verdict> {
            self.dry_runs.fetch_add(1, Ordering::SeqCst);
            let json = object.data.to_string();
            Box::pin(async move { verdict_of(json) })
        }

        fn discover<'a>(
            &'a self,
            type_: &'a WorkloadType,
        ) -> BoxFuture<'a, Result<Option<Served>, kube::Error>> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            let gvk = kube::api::GroupVersionKind::gvk(type_.group(), type_.version(), &type_.kind);
            let answer = match type_.kind.as_str() {
                "Missing" => Ok(None),
                "Broken" => Err(kube::Error::Service("connection refused".into())),
                kind => Ok(Some(Served {
                    resource: ApiResource::from_gvk(&gvk),
                    namespaced: kind != "Cluster",
                })),
            };
            Box::pin(async move { answer })
        }

        fn review<'a>(
            &'a self,
            spec: &'a SubjectAccessReviewSpec,
        ) -> BoxFuture<'a, Result<bool, kube::Error>> {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            let user = spec.user.clone().unwrap_or_default();
            Box::pin(async move {
                match user.as_str() {
                    "alice" => Ok(true),
                    "slow" => std::future::pending().await,
                    "error" => Err(kube::Error::Service("connection refused".into())),
                    _ => Ok(false),
                }
            })
        }
    }

    fn soon() -> TokioInstant {
        TokioInstant::now() + Duration::from_secs(3)
    }

    fn metrics() -> (prometheus_client::registry::Registry, WebhookMetrics) {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = WebhookMetrics::new(&mut registry);
        (registry, metrics)
    }

    fn text(registry: &prometheus_client::registry::Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
        text
    }

    #[tokio::test]
    async fn templates_are_checked_once_and_within_the_rate() {
        let api = Arc::new(Fake::default());
        let (registry, metrics) = metrics();
        let budgeted = Budgeted::new(api.clone(), 10, metrics);
        let job = |image: &str| job(image);
        // The same template from many CronJobs: one dry run, the rest cached.
        for _ in 0..20 {
            let verdict = budgeted
                .dry_run("ns", Probe::Job(&job("busybox")), soon())
                .await;
            assert_eq!(verdict, Verdict::Valid);
        }
        let invalid = budgeted
            .dry_run("ns", Probe::Job(&job("bad")), soon())
            .await;
        assert_eq!(invalid.label(), "invalid");
        let again = budgeted
            .dry_run("ns", Probe::Job(&job("bad")), soon())
            .await;
        assert_eq!(again.label(), "invalid", "a refusal is remembered too");
        assert_eq!(api.dry_runs.load(Ordering::SeqCst), 2);
        // Workloads share the budget and the cache, keyed by their kind too.
        let resource =
            ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("ray.io", "v1", "RayJob"));
        let ray = workload("ray.io/v1", "RayJob", serde_json::json!({"x": "bad"}));
        let object = crate::workload::build::probe_object(&ray, "cj");
        let probe = Probe::Workload {
            template: &ray,
            object: &object,
            resource: &resource,
        };
        for _ in 0..3 {
            assert_eq!(
                budgeted.dry_run("ns", probe, soon()).await.label(),
                "invalid"
            );
        }
        assert_eq!(api.dry_runs.load(Ordering::SeqCst), 3);
        // New templates: the rest of the minute's 10 (three used), then rate-limited.
        let mut verdicts = Vec::new();
        for i in 0..9 {
            let verdict = budgeted
                .dry_run("ns", Probe::Job(&job(&format!("image{i}"))), soon())
                .await;
            verdicts.push(verdict.label());
        }
        assert_eq!(api.dry_runs.load(Ordering::SeqCst), 10, "{verdicts:?}");
        assert_eq!(verdicts[..7], ["valid"; 7], "{verdicts:?}");
        assert_eq!(verdicts[7..], ["error"; 2], "{verdicts:?}");
        let text = text(&registry);
        for line in [
            "kronjob_webhook_dry_run_total{result=\"valid\"} 8",
            "kronjob_webhook_dry_run_total{result=\"invalid\"} 2",
            "kronjob_webhook_dry_runs_skipped_total{reason=\"cached\"} 22",
            "kronjob_webhook_dry_runs_skipped_total{reason=\"rate_limited\"} 2",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    fn user(name: &str) -> k8s_openapi::api::authentication::v1::UserInfo {
        k8s_openapi::api::authentication::v1::UserInfo {
            username: Some(name.into()),
            groups: Some(vec!["system:authenticated".into()]),
            ..Default::default()
        }
    }

    fn rayjobs() -> ApiResource {
        ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("ray.io", "v1", "RayJob"))
    }

    #[tokio::test]
    async fn access_is_asked_once_per_user_kind_and_namespace_and_never_assumed() {
        let api = Arc::new(Fake::default());
        let (registry, metrics) = metrics();
        let budgeted = Budgeted::new(api.clone(), 10, metrics);
        let ask =
            |name: &str, namespace: &str| access::review_spec(&user(name), &rayjobs(), namespace);
        // (who, namespace, answer, reviews sent so far)
        let cases: [(&str, &str, Result<bool, Unchecked>, usize); 6] = [
            ("alice", "a", Ok(true), 1),
            ("alice", "a", Ok(true), 1),
            ("alice", "b", Ok(true), 2),
            ("bob", "a", Ok(false), 3),
            ("bob", "a", Ok(false), 3),
            (
                "error",
                "a",
                Err(Unchecked::Failed("connection refused".into())),
                4,
            ),
        ];
        for (who, namespace, want, sent) in cases {
            let got = budgeted.may_create(&ask(who, namespace), soon()).await;
            match (&got, &want) {
                (Err(Unchecked::Failed(text)), Err(Unchecked::Failed(part))) => {
                    assert!(text.contains(part.as_str()), "{who}: {text}")
                }
                _ => assert_eq!(got, want, "{who} in {namespace}"),
            }
            assert_eq!(
                api.reviews.load(Ordering::SeqCst),
                sent,
                "{who} in {namespace}"
            );
        }
        // An error is not remembered: asked again.
        assert!(
            budgeted
                .may_create(&ask("error", "a"), soon())
                .await
                .is_err()
        );
        assert_eq!(api.reviews.load(Ordering::SeqCst), 5);
        let text = text(&registry);
        for line in [
            "kronjob_webhook_access_reviews_total{result=\"allowed\"} 2",
            "kronjob_webhook_access_reviews_total{result=\"denied\"} 1",
            "kronjob_webhook_access_reviews_total{result=\"cached\"} 2",
            "kronjob_webhook_access_reviews_total{result=\"unchecked\"} 2",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_access_review_without_answer_in_time_is_no_answer() {
        let api = Arc::new(Fake::default());
        let budgeted = Budgeted::new(api.clone(), 10, metrics().1);
        let spec = access::review_spec(&user("slow"), &rayjobs(), "a");
        let until = TokioInstant::now() + Duration::from_secs(1);
        assert_eq!(
            budgeted.may_create(&spec, until).await,
            Err(Unchecked::Timeout)
        );
        assert_eq!(TokioInstant::now(), until, "given up at the deadline");
    }

    #[tokio::test]
    async fn access_reviews_and_lookups_share_a_rate_and_past_it_nothing_is_assumed() {
        let api = Arc::new(Fake::default());
        let budgeted = Budgeted::new(api.clone(), 0, metrics().1);
        let gadget = |kind: &str| WorkloadType {
            api_version: "example.com/v1".into(),
            kind: kind.into(),
        };
        // Lookups: remembered (a missing kind too), a failure not.
        for _ in 0..3 {
            let served = budgeted.served(&gadget("Gadget"), soon()).await;
            assert_eq!(
                served.expect("served").map(|s| s.resource.plural),
                Some("gadgets".into())
            );
            assert_eq!(budgeted.served(&gadget("Missing"), soon()).await, Ok(None));
        }
        assert_eq!(api.lookups.load(Ordering::SeqCst), 2);
        for _ in 0..2 {
            let broken = budgeted.served(&gadget("Broken"), soon()).await;
            assert!(matches!(broken, Err(Unchecked::Failed(_))), "{broken:?}");
        }
        assert_eq!(api.lookups.load(Ordering::SeqCst), 4);
        // The reviews' own rate, whatever the dry runs' (0 here): 100 distinct users a
        // minute, the rest refused for lack of an answer.
        let spent = REVIEWS_PER_MINUTE as usize - 4;
        for i in 0..spent {
            let spec = access::review_spec(&user(&format!("user{i}")), &rayjobs(), "a");
            assert_eq!(budgeted.may_create(&spec, soon()).await, Ok(false), "{i}");
        }
        let alice = access::review_spec(&user("alice"), &rayjobs(), "a");
        assert_eq!(
            budgeted.may_create(&alice, soon()).await,
            Err(Unchecked::RateLimited),
            "never allowed on doubt"
        );
        assert_eq!(
            budgeted.served(&gadget("Other"), soon()).await,
            Err(Unchecked::RateLimited)
        );
        assert_eq!(api.reviews.load(Ordering::SeqCst), spent);
        // A remembered answer needs no request.
        let known = access::review_spec(&user("user0"), &rayjobs(), "a");
        assert_eq!(budgeted.may_create(&known, soon()).await, Ok(false));
    }
}
