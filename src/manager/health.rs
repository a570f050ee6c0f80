//! What the probes report, and the HTTP routes that report it: `/healthz` (alive), `/readyz`
//! (ready) and `/metrics`. The probes are plain HTTP and answer `ok`, `ready`/`not ready`, or
//! `failed:` with the name of the task that ended and how (never an error's detail, which is
//! in the log).
//!
//! - Alive: no supervised task (a server, a controller or one of its workers, leader
//!   election, the certificate refresher) has ended, failed, panicked or been aborted.
//! - Ready: not shutting down; the webhook, when enabled, serves with its certificates loaded;
//!   and on the leader, every cache the controllers need has listed (CronJobs, the owner index
//!   of Jobs, the TTL controller's Jobs and Pods). The CRD is Established before the probes
//!   are served at all ([`super::crd`]). Readiness never depends on leadership itself, so every
//!   replica serves the webhook.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

use crate::metrics::{CONTENT_TYPE, Metrics};

/// Readiness and liveness as the probes see them.
#[derive(Debug, Default)]
pub struct Health {
    draining: AtomicBool,
    webhook_enabled: AtomicBool,
    webhook_serving: AtomicBool,
    leader: AtomicBool,
    caches_synced: AtomicBool,
    failed: Mutex<Option<String>>,
}

impl Health {
    /// A new health state; `webhook_enabled` says whether readiness waits for the webhook.
    pub fn new(webhook_enabled: bool) -> Arc<Self> {
        let health = Self::default();
        health
            .webhook_enabled
            .store(webhook_enabled, Ordering::Relaxed);
        Arc::new(health)
    }

    /// The process is shutting down: report not ready so traffic moves to other replicas.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// The webhook serves with its certificates loaded (or no longer serves).
    pub fn set_webhook_serving(&self, serving: bool) {
        self.webhook_serving.store(serving, Ordering::Relaxed);
    }

    /// This replica leads (or no longer leads) the controllers.
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Relaxed);
        if !leader {
            self.caches_synced.store(false, Ordering::Relaxed);
        }
    }

    /// Every cache the controllers need has listed (or, `false`, not yet).
    pub fn set_caches_synced(&self, synced: bool) {
        self.caches_synced.store(synced, Ordering::Relaxed);
    }

    /// A critical task failed: `/healthz` reports `why` from now on (the task's name and how it
    /// ended: the probe port is plain HTTP, so no error's detail).
    pub fn set_failed(&self, why: String) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        failed.get_or_insert(why);
    }

    /// Whether the leader's caches have synced.
    pub fn caches_synced(&self) -> bool {
        self.caches_synced.load(Ordering::Relaxed)
    }

    /// Whether this replica leads the controllers.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    /// `Err(why)` once a critical task failed.
    pub fn alive(&self) -> Result<(), String> {
        match &*self.failed.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    /// Ready: alive, not shutting down, the webhook serves (when enabled) and, on the leader,
    /// the caches have synced.
    pub fn ready(&self) -> bool {
        if self.draining.load(Ordering::Relaxed) || self.alive().is_err() {
            return false;
        }
        let webhook_ok = !self.webhook_enabled.load(Ordering::Relaxed)
            || self.webhook_serving.load(Ordering::Relaxed);
        let caches_ok =
            !self.leader.load(Ordering::Relaxed) || self.caches_synced.load(Ordering::Relaxed);
        webhook_ok && caches_ok
    }
}

/// `kronjob_leader`: 1 while this replica leads the controllers, else 0; read from [`Health`] at
/// scrape time.
#[derive(Debug)]
pub struct LeaderGauge(pub Arc<Health>);

impl Collector for LeaderGauge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = ConstGauge::new(i64::from(self.0.is_leader()));
        gauge.encode(encoder.encode_descriptor(
            "kronjob_leader",
            "1 while this replica leads the controllers, else 0",
            None,
            gauge.metric_type(),
        )?)
    }
}

/// `/healthz` (alive) and `/readyz` (ready) for the probes.
pub fn health_router(health: Arc<Health>) -> Router {
    let live = Arc::clone(&health);
    Router::new()
        .route(
            "/healthz",
            get(move || {
                let health = Arc::clone(&live);
                async move {
                    match health.alive() {
                        Ok(()) => (StatusCode::OK, "ok".to_string()),
                        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("failed: {why}")),
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let health = Arc::clone(&health);
                async move {
                    if health.ready() {
                        (StatusCode::OK, "ready")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        )
}

/// `/metrics` in the OpenMetrics text format.
pub fn metrics_router(metrics: Metrics) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move {
                match metrics.encode() {
                    Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
                    Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                }
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_gauge_follows_leadership() {
        let health = Health::new(false);
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(LeaderGauge(Arc::clone(&health))));
        let metrics = Metrics::new(registry);
        let sample = |metrics: &Metrics| {
            let text = metrics.encode().expect("encode");
            text.lines()
                .find(|l| l.starts_with("kronjob_leader "))
                .map(str::to_string)
        };
        assert_eq!(sample(&metrics).as_deref(), Some("kronjob_leader 0"));
        health.set_leader(true);
        assert_eq!(sample(&metrics).as_deref(), Some("kronjob_leader 1"));
        health.set_leader(false);
        assert_eq!(sample(&metrics).as_deref(), Some("kronjob_leader 0"));
    }

    #[test]
    fn readiness_waits_for_webhook_and_leader_caches() {
        let h = Health::new(true);
        assert!(!h.ready(), "webhook not serving yet");
        h.set_webhook_serving(true);
        assert!(h.ready(), "a follower with a serving webhook is ready");
        h.set_leader(true);
        assert!(!h.ready(), "a new leader waits for its caches");
        h.set_caches_synced(true);
        assert!(h.ready());
        h.set_leader(false);
        assert!(
            h.ready(),
            "losing leadership does not make the webhook unready"
        );
        h.set_draining();
        assert!(!h.ready(), "draining");
        let no_webhook = Health::new(false);
        assert!(no_webhook.ready());
    }

    async fn get(router: Router, path: &str) -> (StatusCode, String, String) {
        use tower::ServiceExt;
        let response = router
            .oneshot(
                axum::http::Request::get(path)
                    .body(axum::body::Body::empty())
                    .expect("request"),
            )
            .await
            .expect("infallible");
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        (
            status,
            content_type,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    #[tokio::test]
    async fn probes_follow_the_health_state() {
        let health = Health::new(true);
        let router = health_router(Arc::clone(&health));
        assert_eq!(get(router.clone(), "/healthz").await.0, StatusCode::OK);
        assert_eq!(
            get(router.clone(), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        health.set_webhook_serving(true);
        assert_eq!(get(router.clone(), "/readyz").await.0, StatusCode::OK);
        health.set_failed("the controllers failed".into());
        let (status, _, body) = get(router.clone(), "/healthz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "failed: the controllers failed");
        assert_eq!(
            get(router.clone(), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(get(router, "/nope").await.0, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn metrics_are_served_as_openmetrics() {
        use prometheus_client::metrics::counter::Counter;
        let mut registry = prometheus_client::registry::Registry::default();
        let counter: Counter = Counter::default();
        registry.register("kronjob_test_events", "Test events", counter.clone());
        counter.inc();
        let (status, content_type, body) =
            get(metrics_router(Metrics::new(registry)), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            content_type.starts_with("application/openmetrics-text"),
            "{content_type}"
        );
        assert!(body.contains("kronjob_test_events_total 1"), "{body}");
    }

    #[test]
    fn a_failed_task_makes_the_process_dead_and_unready() {
        let h = Health::new(false);
        assert_eq!(h.alive(), Ok(()));
        h.set_failed("webhook server: boom".into());
        h.set_failed("second failure is not the reported one".into());
        assert_eq!(h.alive(), Err("webhook server: boom".into()));
        assert!(!h.ready());
    }
}
