//! The webhook's dry runs of Job templates, on a budget of their own. Anyone who can reach the
//! webhook port can send it AdmissionReviews, and each CronJob with a new template would cost
//! one dry-run create on the API server. So, in front of the dry run:
//!
//! - **deduplicated by template**: the verdict (valid or invalid) of a template already checked
//!   is reused for [`VERDICT_TTL`], for any CronJob of the namespace with that template;
//! - **rate-limited**: at most `per_minute` dry runs in any minute ([`TokenBucket`]); past it a
//!   template is not checked and the CronJob is allowed (the reconciler checks each generation's
//!   template once, so an invalid one still gets `Ready=False` `InvalidJobTemplate` and no Job);
//! - **their own client and concurrency**: the manager gives the webhook a client of its own
//!   (another connection to the API server) and at most [`MAX_IN_FLIGHT`] run at once, so the
//!   controllers' Job creates never wait behind them.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use lru::LruCache;
use tokio::sync::Semaphore;

use super::metrics::WebhookMetrics;
use crate::job::{TemplateDryRun, Unknown, Verdict};

/// Default of `--webhook-dry-runs-per-minute`.
pub const DRY_RUNS_PER_MINUTE: u32 = 50;
/// How long a template's verdict is reused.
pub const VERDICT_TTL: Duration = Duration::from_secs(600);
/// Most verdicts remembered (least recently used are forgotten first).
pub const VERDICTS: usize = 4096;
/// Most dry runs in flight at once.
pub const MAX_IN_FLIGHT: usize = 4;

/// A token bucket that lets at most `per_minute` events through in any 60 seconds: a burst of
/// a fifth of them, refilled at the rate of the other four fifths. Pure: the caller gives the
/// time.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket for `per_minute` events a minute (0: none ever).
    pub fn per_minute(per_minute: u32, now: Instant) -> Self {
        let burst = (per_minute / 5).max(1).min(per_minute);
        TokenBucket {
            capacity: f64::from(burst),
            per_second: f64::from(per_minute - burst) / 60.0,
            tokens: f64::from(burst),
            last: now,
        }
    }

    /// Take one token at `now`, if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What identifies a template's verdict: the namespace and the template, as a SHA-256 digest
/// of its JSON (the template carries nothing of the CronJob or the slot).
pub fn template_key(namespace: &str, template: &JobTemplateSpec) -> [u8; 32] {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    digest.update(namespace.as_bytes());
    digest.update(&[0]);
    digest.update(&json);
    let mut key = [0; 32];
    key.copy_from_slice(digest.finish().as_ref());
    key
}

/// A [`TemplateDryRun`] behind the cache, the rate limit and the concurrency limit; it counts what
/// it sends (`kronjob_webhook_dry_run_total`) and what it spares
/// (`kronjob_webhook_dry_runs_skipped_total`).
pub struct Budgeted {
    inner: Arc<dyn TemplateDryRun>,
    bucket: Mutex<TokenBucket>,
    verdicts: Mutex<LruCache<[u8; 32], (Instant, Verdict)>>,
    in_flight: Semaphore,
    metrics: WebhookMetrics,
}

impl std::fmt::Debug for Budgeted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budgeted").finish_non_exhaustive()
    }
}

impl Budgeted {
    /// `inner` with at most `per_minute` dry runs a minute.
    pub fn new(inner: Arc<dyn TemplateDryRun>, per_minute: u32, metrics: WebhookMetrics) -> Self {
        let capacity = NonZeroUsize::new(VERDICTS).unwrap_or(NonZeroUsize::MIN);
        Budgeted {
            inner,
            bucket: Mutex::new(TokenBucket::per_minute(per_minute, Instant::now())),
            verdicts: Mutex::new(LruCache::new(capacity)),
            in_flight: Semaphore::new(MAX_IN_FLIGHT),
            metrics,
        }
    }

    fn remembered(&self, key: &[u8; 32], now: Instant) -> Option<Verdict> {
        let mut verdicts = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
        match verdicts.get(key) {
            Some((at, verdict)) if now.duration_since(*at) < VERDICT_TTL => Some(verdict.clone()),
            Some(_) => {
                verdicts.pop(key);
                None
            }
            None => None,
        }
    }

    fn remember(&self, key: [u8; 32], verdict: &Verdict) {
        if matches!(verdict, Verdict::Valid | Verdict::Invalid(_)) {
            let mut verdicts = self.verdicts.lock().unwrap_or_else(|e| e.into_inner());
            verdicts.put(key, (Instant::now(), verdict.clone()));
        }
    }

    fn skipped(&self, why: &'static str) -> Verdict {
        self.metrics.dry_run_skipped(why);
        Verdict::Unknown(Unknown::Failed(format!(
            "not checked: {why} (the webhook's dry runs are limited)"
        )))
    }

    async fn check(&self, namespace: &str, template: &JobTemplateSpec) -> Verdict {
        let key = template_key(namespace, template);
        if let Some(verdict) = self.remembered(&key, Instant::now()) {
            self.metrics.dry_run_skipped("cached");
            return verdict;
        }
        let granted = {
            let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            bucket.take(Instant::now())
        };
        if !granted {
            return self.skipped("rate_limited");
        }
        let Ok(_permit) = self.in_flight.try_acquire() else {
            return self.skipped("busy");
        };
        let verdict = self.inner.dry_run(namespace, template).await;
        self.metrics.dry_run(verdict.label());
        self.remember(key, &verdict);
        verdict
    }
}

impl TemplateDryRun for Budgeted {
    fn dry_run<'a>(
        &'a self,
        namespace: &'a str,
        template: &'a JobTemplateSpec,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(self.check(namespace, template))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_bucket_never_lets_more_than_its_rate_through_in_any_minute() {
        for per_minute in [1, 5, 50, 120] {
            let start = Instant::now();
            let mut bucket = TokenBucket::per_minute(per_minute, start);
            // Ask every 100 ms for ten minutes; record when a token was given.
            let mut given = Vec::new();
            for tick in 0..6000u64 {
                let now = start + Duration::from_millis(tick * 100);
                if bucket.take(now) {
                    given.push(now);
                }
            }
            for (i, first) in given.iter().enumerate() {
                let within = given[i..]
                    .iter()
                    .take_while(|t| t.duration_since(*first) < Duration::from_secs(60))
                    .count();
                assert!(
                    within <= per_minute as usize,
                    "{per_minute}/min: {within} within a minute"
                );
            }
            // Under constant demand the rate is used, not just bounded.
            let last_minute = given
                .iter()
                .filter(|t| t.duration_since(start) >= Duration::from_secs(540))
                .count();
            let floor = (per_minute - (per_minute / 5).max(1)) as usize;
            assert!(
                last_minute + 1 >= floor,
                "{per_minute}/min: {last_minute} in the tenth minute"
            );
        }
        let mut none = TokenBucket::per_minute(0, Instant::now());
        assert!(!none.take(Instant::now() + Duration::from_secs(3600)));
    }

    fn job(image: &str) -> JobTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"team": "a"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}
        }))
        .expect("template")
    }

    #[test]
    fn the_key_is_the_template_and_namespace_only() {
        let a = template_key("ns", &job("busybox"));
        assert_eq!(a, template_key("ns", &job("busybox")), "the same template");
        assert_ne!(a, template_key("other", &job("busybox")));
        assert_ne!(a, template_key("ns", &job("alpine")));
    }

    /// Counts the dry runs it is asked for; every template with `bad` in its image is invalid.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl TemplateDryRun for Counting {
        fn dry_run<'a>(
            &'a self,
            _: &'a str,
            template: &'a JobTemplateSpec,
        ) -> BoxFuture<'a, Verdict> {
            self.0.fetch_add(1, Ordering::SeqCst);
            let image = serde_json::to_string(&template.spec).unwrap_or_default();
            Box::pin(async move {
                if image.contains("bad") {
                    Verdict::Invalid(Box::new(kube::core::Status::failure("bad", "Invalid")))
                } else {
                    Verdict::Valid
                }
            })
        }
    }

    #[tokio::test]
    async fn templates_are_checked_once_and_within_the_rate() {
        let inner = Arc::new(Counting::default());
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = WebhookMetrics::new(&mut registry);
        let budgeted = Budgeted::new(inner.clone(), 10, metrics);
        // The same template from many CronJobs: one dry run, the rest cached.
        for _ in 0..20 {
            let verdict = budgeted.dry_run("ns", &job("busybox")).await;
            assert_eq!(verdict, Verdict::Valid);
        }
        let invalid = budgeted.dry_run("ns", &job("bad")).await;
        assert_eq!(invalid.label(), "invalid");
        let again = budgeted.dry_run("ns", &job("bad")).await;
        assert_eq!(again.label(), "invalid", "a refusal is remembered too");
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        // New templates: the burst (a fifth of 10) minus the two used, then rate-limited.
        let mut verdicts = Vec::new();
        for i in 0..10 {
            let verdict = budgeted.dry_run("ns", &job(&format!("image{i}"))).await;
            verdicts.push(verdict.label());
        }
        assert_eq!(inner.0.load(Ordering::SeqCst), 2, "{verdicts:?}");
        assert!(verdicts.iter().all(|l| *l == "error"), "{verdicts:?}");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            "kronjob_webhook_dry_run_total{result=\"valid\"} 1",
            "kronjob_webhook_dry_run_total{result=\"invalid\"} 1",
            "kronjob_webhook_dry_runs_skipped_total{reason=\"cached\"} 20",
            "kronjob_webhook_dry_runs_skipped_total{reason=\"rate_limited\"} 10",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
