//! The manager: one process hosting the controllers (on the leader only), the webhook (on every
//! replica), the metrics endpoint and the health probes, with one shutdown signal for all.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::{CONTENT_TYPE, Metrics};

mod run;
pub mod selector;
pub use run::{RunArgs, run, run_with};
pub use selector::parse_selector;

/// Name of the CRD this manager serves.
pub const CRD_NAME: &str = "cronjobs.batch.kronjob.dev";
/// Field manager used for server-side apply.
pub const FIELD_MANAGER: &str = "kronjob";

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No Kubernetes configuration could be found.
    #[error(
        "no Kubernetes configuration: set KUBECONFIG or create ~/.kube/config, or run inside a cluster"
    )]
    NoConfig(#[source] kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// The CRD is not installed and `--install-crd` was not given.
    #[error(
        "the CronJob CRD ({CRD_NAME}) is not installed: run `kubectl apply -f crd/`, or start with --install-crd"
    )]
    CrdMissing,
    /// The CRD could not be read, applied or did not become established.
    #[error("cannot install or verify the CRD {CRD_NAME}")]
    Crd(#[source] kube::Error),
    /// The CRD did not become established in time.
    #[error("the CRD {CRD_NAME} was not established within {0:?}")]
    CrdNotEstablished(Duration),
    /// The CRD could not be generated.
    #[error("cannot generate the CRD")]
    CrdGen(#[source] crate::api::crdgen::CrdError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An HTTP server failed.
    #[error("{name} server failed")]
    Serve {
        /// Which server.
        name: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Leader election could not start or stopped.
    #[error("leader election failed")]
    Lease(#[source] kube_lease_manager::LeaseManagerError),
    /// The leader-election task ended unexpectedly.
    #[error("leader election stopped unexpectedly")]
    LeaseStopped,
    /// The webhook server failed.
    #[error("admission webhook server failed")]
    Webhook(#[source] crate::webhook::WebhookError),
}

/// Readiness and liveness as the probes see them.
#[derive(Debug, Default)]
pub struct Health {
    draining: AtomicBool,
    webhook_enabled: AtomicBool,
    webhook_serving: AtomicBool,
    leader: AtomicBool,
    caches_synced: AtomicBool,
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

    /// The webhook listener is (or is no longer) serving.
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

    /// The controllers' caches have synced.
    pub fn set_caches_synced(&self, synced: bool) {
        self.caches_synced.store(synced, Ordering::Relaxed);
    }

    /// Whether the leader's caches have synced.
    pub fn caches_synced(&self) -> bool {
        self.caches_synced.load(Ordering::Relaxed)
    }

    /// Whether this replica leads the controllers.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    /// Ready: not shutting down, the webhook serves (when enabled) and, on the leader, the
    /// caches have synced.
    /// Readiness never depends on leadership itself, so every replica serves the webhook.
    pub fn ready(&self) -> bool {
        if self.draining.load(Ordering::Relaxed) {
            return false;
        }
        let webhook_ok = !self.webhook_enabled.load(Ordering::Relaxed)
            || self.webhook_serving.load(Ordering::Relaxed);
        let caches_ok =
            !self.leader.load(Ordering::Relaxed) || self.caches_synced.load(Ordering::Relaxed);
        webhook_ok && caches_ok
    }
}

/// `/healthz` (live) and `/readyz` (ready) for the probes.
pub fn health_router(health: Arc<Health>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { (StatusCode::OK, "ok") }))
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

/// Bind a listener, with the address in the error.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ManagerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ManagerError::Bind { addr, source })
}

/// Serve `router` on `listener` until `shutdown`, then finish in-flight requests.
pub async fn serve(
    name: &'static str,
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(|source| ManagerError::Serve { name, source })
}

/// A token cancelled on the first SIGTERM or SIGINT. A second signal exits at once.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        info!("shutdown requested; draining");
        cancel.cancel();
        wait_for_signal().await;
        warn!("second signal; exiting now");
        std::process::exit(130);
    });
    token
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A client for the cluster in KUBECONFIG (or ~/.kube/config), or the in-cluster one.
pub async fn client() -> Result<Client, ManagerError> {
    let config = Config::infer().await.map_err(ManagerError::NoConfig)?;
    Client::try_from(config).map_err(ManagerError::Client)
}

/// Make sure the CRD is there: apply it (server-side, as `kronjob`) when `install` is set and
/// wait until it is established; otherwise check that it exists.
pub async fn ensure_crd(client: Client, install: bool) -> Result<(), ManagerError> {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    if install {
        let crd = crate::api::crdgen::crd().map_err(ManagerError::CrdGen)?;
        api.patch(
            CRD_NAME,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(ManagerError::Crd)?;
        info!(crd = CRD_NAME, "CRD applied");
        let limit = Duration::from_secs(30);
        tokio::time::timeout(
            limit,
            await_condition(api, CRD_NAME, conditions::is_crd_established()),
        )
        .await
        .map_err(|_| ManagerError::CrdNotEstablished(limit))?
        .map_err(|e| ManagerError::Crd(kube::Error::Service(Box::new(e))))?;
        Ok(())
    } else {
        match api.get_opt(CRD_NAME).await.map_err(ManagerError::Crd)? {
            Some(_) => Ok(()),
            None => Err(ManagerError::CrdMissing),
        }
    }
}

/// Leader election settings (client-go defaults: lease 15 s, renew by 10 s).
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a lease lasts without renewal, in seconds.
    pub duration_seconds: u64,
    /// How long before expiry the holder renews, in seconds (duration - renew deadline).
    pub grace_seconds: u64,
}

/// Run `work` whenever this replica leads, until `shutdown`. Without a lease config the replica
/// leads for its whole life. When leadership is lost, `work`'s token is cancelled at once and
/// the replica goes back to waiting; on shutdown the lease is released.
pub async fn lead<F, Fut>(
    client: Client,
    lease: Option<LeaseConfig>,
    health: Arc<Health>,
    shutdown: CancellationToken,
    work: F,
) -> Result<(), ManagerError>
where
    F: Fn(CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(lease) = lease else {
        health.set_leader(true);
        work(shutdown.child_token()).await;
        health.set_leader(false);
        return Ok(());
    };
    let manager = LeaseManagerBuilder::new(client, lease.name.clone())
        .with_namespace(lease.namespace.clone())
        .with_identity(lease.identity.clone())
        .with_duration(lease.duration_seconds)
        .with_grace(lease.grace_seconds)
        .build()
        .await
        .map_err(ManagerError::Lease)?;
    let (mut leading, task) = manager.watch().await;
    info!(lease = %lease.name, namespace = %lease.namespace, identity = %lease.identity, "waiting for leadership");
    loop {
        // Wait to lead (or to stop).
        while !*leading.borrow_and_update() {
            tokio::select! {
                _ = shutdown.cancelled() => return release(leading, task).await,
                changed = leading.changed() => {
                    if changed.is_err() {
                        return Err(ManagerError::LeaseStopped);
                    }
                }
            }
        }
        info!(identity = %lease.identity, "leading: starting controllers");
        health.set_leader(true);
        let token = shutdown.child_token();
        let run = work(token.clone());
        tokio::pin!(run);
        let lost = async {
            loop {
                if leading.changed().await.is_err() || !*leading.borrow_and_update() {
                    return;
                }
            }
        };
        tokio::select! {
            _ = &mut run => {}
            _ = lost => {
                warn!(identity = %lease.identity, "lost leadership: stopping controllers");
                token.cancel();
                run.await;
            }
        }
        health.set_leader(false);
        if shutdown.is_cancelled() {
            return release(leading, task).await;
        }
    }
}

async fn release(
    leading: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<
        Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>,
    >,
) -> Result<(), ManagerError> {
    // Dropping the last receiver makes the lease task release the lease and end.
    drop(leading);
    match tokio::time::timeout(Duration::from_secs(5), task).await {
        Ok(Ok(Ok(_))) => {
            info!("lease released");
            Ok(())
        }
        Ok(Ok(Err(e))) => Err(ManagerError::Lease(e)),
        Ok(Err(_)) | Err(_) => Err(ManagerError::LeaseStopped),
    }
}

/// This replica's identity for the lease: the pod name, or host name and process id.
pub fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "kronjob".to_string());
            format!("{host}-{}", std::process::id())
        })
}

/// Parse a listen address; `:8080` means every interface.
pub fn parse_listen_addr(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_string()
    };
    full.parse()
        .map_err(|e| format!("invalid address {text:?} (want HOST:PORT or :PORT): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let no_webhook = Health::new(false);
        assert!(no_webhook.ready());
    }

    #[test]
    fn listen_addresses() {
        assert_eq!(
            parse_listen_addr(":8080"),
            Ok("0.0.0.0:8080".parse().expect("addr"))
        );
        assert_eq!(
            parse_listen_addr("127.0.0.1:9"),
            Ok("127.0.0.1:9".parse().expect("addr"))
        );
        assert!(parse_listen_addr("8080").is_err());
        assert!(parse_listen_addr("nohost:x").is_err());
    }
}
