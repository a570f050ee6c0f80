//! The admission webhook server: defaulting (`/mutate-…`) and validation (`/validate-…`) of
//! `CronJob` objects, served over TLS on every replica.
//!
//! Start-up runs one way: [`serve`] binds, asks [`certs`] for the certificate (which turns PEM
//! into a rustls configuration with [`tls`]), and hands both to [`server`].
//!
//! - [`admission`]: from request bytes to an `AdmissionReview` answer (pure);
//! - [`server`]: the axum routes, hardening layers and the handlers, served by
//!   [`crate::https`] (connection cap, timeouts, HTTP/1.1 only by default);
//! - [`budget`]: the memory budget of request bodies in flight;
//! - [`dry_run`]: the Job template dry runs' cache, rate limit and concurrency;
//! - [`certs`]: where the certificate comes from (a directory, or self-provisioned);
//! - [`tls`]: PEM to a rustls configuration (pure);
//! - [`metrics`]: Prometheus metrics.

pub mod admission;
pub mod budget;
pub mod certs;
pub mod dry_run;
pub mod metrics;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use tokio_util::sync::CancellationToken;

pub use metrics::WebhookMetrics;
pub use server::{router, router_with_dry_run, router_with_dry_run_budget};

/// Default certificate directory (the kubebuilder convention).
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// Command-line flags of the webhook server.
#[derive(clap::Args, Debug, Clone)]
pub struct WebhookArgs {
    /// Address the HTTPS webhook server listens on.
    #[arg(long = "webhook-addr", default_value = "0.0.0.0:9443")]
    pub webhook_addr: SocketAddr,
    /// Directory holding tls.crt and tls.key, re-read so a renewed certificate is served
    /// without a restart.
    #[arg(long = "webhook-cert-dir", default_value = DEFAULT_CERT_DIR)]
    pub webhook_cert_dir: PathBuf,
    /// How often --webhook-cert-dir is re-read.
    #[arg(long = "webhook-cert-reload-interval", default_value = "10s", value_parser = crate::duration::parse_flag_duration)]
    pub webhook_cert_reload_interval: Duration,
    /// Generate a CA and serving certificate, share them between replicas through a Secret,
    /// keep the webhook configurations' caBundle up to date and rotate before expiry, instead
    /// of reading --webhook-cert-dir.
    #[arg(long = "webhook-self-signed")]
    pub webhook_self_signed: bool,
    /// Name of the Service in front of the webhook (for the certificate's DNS names).
    #[arg(long = "webhook-service-name", default_value = "kronjob-webhook")]
    pub webhook_service_name: String,
    /// Namespace of that Service (and of the self-signed certificate's Secret).
    #[arg(
        long = "webhook-namespace",
        env = "POD_NAMESPACE",
        default_value = "kronjob-system"
    )]
    pub webhook_namespace: String,
    /// The MutatingWebhookConfiguration whose caBundle `--webhook-self-signed` keeps current
    /// (each release names its own).
    #[arg(long = "webhook-mutating-configuration", default_value = certs::MUTATING_CONFIG)]
    pub webhook_mutating_configuration: String,
    /// The ValidatingWebhookConfiguration whose caBundle `--webhook-self-signed` keeps current.
    #[arg(long = "webhook-validating-configuration", default_value = certs::VALIDATING_CONFIG)]
    pub webhook_validating_configuration: String,
    /// Most connections open to the webhook; further ones wait until one closes.
    #[arg(long = "webhook-max-connections", default_value_t = crate::https::MAX_CONNECTIONS, value_parser = clap::value_parser!(usize))]
    pub webhook_max_connections: usize,
    /// Most dry runs of Job templates the webhook sends the API server in any minute (0: none;
    /// templates are then checked by the reconciler only).
    #[arg(long = "webhook-dry-runs-per-minute", default_value_t = dry_run::DRY_RUNS_PER_MINUTE)]
    pub webhook_dry_runs_per_minute: u32,
    /// Serve HTTP/2 besides HTTP/1.1 on the webhook and secure metrics servers (off: HTTP/2's
    /// rapid-reset attack, CVE-2023-44487, cannot reach them).
    #[arg(long = "enable-http2")]
    pub enable_http2: bool,
}

impl WebhookArgs {
    /// Where the certificate comes from; self-signed provisioning needs a client.
    pub fn certificates(
        &self,
        client: Option<kube::Client>,
    ) -> Result<certs::Source, WebhookError> {
        if self.webhook_self_signed {
            let client = client.ok_or(WebhookError::NoClient)?;
            return Ok(certs::Source::SelfSigned(
                certs::SelfSigned::new(client, &self.webhook_service_name, &self.webhook_namespace)
                    .with_configurations(
                        &self.webhook_mutating_configuration,
                        &self.webhook_validating_configuration,
                    ),
            ));
        }
        Ok(certs::Source::Directory {
            dir: self.webhook_cert_dir.clone(),
            every: self.webhook_cert_reload_interval,
        })
    }
}

/// Why the webhook server stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The listen address could not be bound.
    #[error(transparent)]
    Bind(#[from] crate::net::BindError),
    /// Self-signed certificates were asked for without a Kubernetes client.
    #[error("--webhook-self-signed needs a Kubernetes client")]
    NoClient,
    /// No usable certificate.
    #[error("cannot load the webhook certificate")]
    Certs(#[from] certs::CertError),
    /// The server failed.
    #[error("webhook server failed")]
    Serve(#[source] std::io::Error),
}

/// What the webhook server needs besides its flags.
pub struct Serving {
    /// The client of the self-signed certificates (`--webhook-self-signed`).
    pub client: Option<kube::Client>,
    /// The client of the Job template dry runs (a client of their own, so they never hold up
    /// the controllers' requests); none: the local rules only.
    pub dry_run: Option<kube::Client>,
    /// The webhook's metrics.
    pub metrics: WebhookMetrics,
    /// Its connection metrics.
    pub connections: crate::https::ServerMetrics,
    /// Told the certificate once it is loaded (the secure metrics server serves the same).
    pub certificate: Option<tokio::sync::watch::Sender<Option<RustlsConfig>>>,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving").finish_non_exhaustive()
    }
}

impl Serving {
    /// The local rules only, with metrics registered nowhere else.
    pub fn local(metrics: WebhookMetrics) -> Self {
        Serving {
            client: None,
            dry_run: None,
            metrics,
            connections: crate::https::ServerMetrics::unregistered("webhook"),
            certificate: None,
        }
    }
}

/// Serve the webhook until `shutdown` (with `client`, Job templates are dry-run, see
/// [`router_with_dry_run`]), then stop accepting connections and let open ones finish
/// (at most [`server::DRAIN_TIMEOUT`]). `ready` gets the bound address once the certificate is
/// loaded and the listener accepts TLS connections.
pub async fn serve(
    args: WebhookArgs,
    client: Option<kube::Client>,
    metrics: WebhookMetrics,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
    shutdown: CancellationToken,
) -> Result<(), WebhookError> {
    let serving = Serving {
        dry_run: client.clone(),
        client,
        ..Serving::local(metrics)
    };
    serve_with(args, serving, ready, shutdown).await
}

/// [`serve`] with the clients and metrics of `serving`.
pub async fn serve_with(
    args: WebhookArgs,
    serving: Serving,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
    shutdown: CancellationToken,
) -> Result<(), WebhookError> {
    let listener = crate::net::bind(args.webhook_addr)?;
    let app = match serving.dry_run {
        Some(client) => router_with_dry_run_budget(
            serving.metrics,
            std::sync::Arc::new(client),
            args.webhook_dry_runs_per_minute,
        ),
        None => router(serving.metrics),
    };
    let loaded = args.certificates(serving.client)?.load().await?;
    if let Some(certificate) = serving.certificate {
        certificate.send_replace(Some(loaded.config.clone()));
    }
    let limits = crate::https::Limits {
        max_connections: args.webhook_max_connections,
        ..crate::https::Limits::standard(args.enable_http2)
    };
    server::run(
        listener,
        loaded,
        app,
        (limits, serving.connections),
        ready,
        shutdown,
    )
    .await
}
