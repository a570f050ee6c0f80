//! The webhook's dry runs of Job templates, on a budget of their own. Anyone who can reach the
//! webhook port can send it AdmissionReviews, and each CronJob with a new template would cost
//! one dry-run create on the API server. So, in front of the dry run:
//!
//! - **deduplicated by template**: the verdict (valid or invalid) of a template already checked
//!   is reused for [`VERDICT_TTL`], for any CronJob of the namespace with that template;
//! - **rate-limited**: at most `per_minute` dry runs in any minute ([`Window`]); past it a
//!   template is not checked and the CronJob is allowed (the reconciler checks each generation's
//!   template once, so an invalid one still gets `Ready=False` `InvalidJobTemplate` and no Job);
//! - **their own client and concurrency**: the manager gives the webhook a client of its own
//!   (another connection to the API server) and at most [`MAX_IN_FLIGHT`] run at once, so the
//!   controllers' Job creates never wait behind them.

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use lru::LruCache;
use tokio::sync::Semaphore;

use super::metrics::WebhookMetrics;
use crate::workload::{TemplateDryRun, Unknown, Verdict};

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
    window: Mutex<Window>,
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
            window: Mutex::new(Window::per_minute(per_minute)),
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
        // One in flight of MAX_IN_FLIGHT first, so a dry run starts when the window lets it.
        let Ok(Ok(_permit)) = tokio::time::timeout(QUEUE_WAIT, self.in_flight.acquire()).await
        else {
            return self.skipped("busy");
        };
        let Some(_lasting) = Lasting::start(&self.window) else {
            return self.skipped("rate_limited");
        };
        let verdict = self.inner.dry_run(namespace, template).await;
        self.metrics.dry_run(verdict.label());
        self.remember(key, &verdict);
        verdict
    }
}

/// A dry run in the [`Window`], from its start until it is dropped (answered, or given up).
struct Lasting<'a>(&'a Mutex<Window>);

impl<'a> Lasting<'a> {
    fn start(window: &'a Mutex<Window>) -> Option<Self> {
        let started = {
            let mut w = window.lock().unwrap_or_else(|e| e.into_inner());
            w.take(Instant::now())
        };
        started.then(|| Lasting(window))
    }
}

impl Drop for Lasting<'_> {
    fn drop(&mut self) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.finish(Instant::now());
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
        // New templates: the rest of the minute's 10 (two used), then rate-limited.
        let mut verdicts = Vec::new();
        for i in 0..10 {
            let verdict = budgeted.dry_run("ns", &job(&format!("image{i}"))).await;
            verdicts.push(verdict.label());
        }
        assert_eq!(inner.0.load(Ordering::SeqCst), 10, "{verdicts:?}");
        assert_eq!(verdicts[..8], ["valid"; 8], "{verdicts:?}");
        assert_eq!(verdicts[8..], ["error"; 2], "{verdicts:?}");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            "kronjob_webhook_dry_run_total{result=\"valid\"} 9",
            "kronjob_webhook_dry_run_total{result=\"invalid\"} 1",
            "kronjob_webhook_dry_runs_skipped_total{reason=\"cached\"} 20",
            "kronjob_webhook_dry_runs_skipped_total{reason=\"rate_limited\"} 2",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
