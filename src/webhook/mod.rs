//! The admission webhook server: defaulting and validation of CronJobs, over TLS.
//!
//! Defaulting (`/mutate-…`) and validation (`/validate-…`) of `CronJob` objects, served on
//! every replica.
//!
//! Start-up runs one way: [`serve`] binds, asks [`certs`] for the certificate (which turns PEM
//! into a rustls configuration with [`tls`]), and hands both to [`server`].
//!
//! - [`admission`]: from request bytes to an `AdmissionReview` answer (pure);
//! - [`judge`]: what the API server says of a new template: a Job template's dry run; a
//!   workload's kind (`--workload-kinds`, installed, namespaced), its author's access
//!   ([`access`], pure) and its dry run as its kind;
//! - [`api`]: those requests to the API server (dry runs, discovery, `SubjectAccessReview`);
//! - [`server`]: the axum routes, hardening layers and the handlers, served by
//!   [`crate::https`] (connection cap, timeouts, HTTP/1.1 only by default);
//! - [`budget`]: the memory budget of request bodies in flight;
//! - [`dry_run`]: the cache, rate limits and concurrency of the requests to the API server;
//! - [`certs`]: where the certificate comes from (a directory, or self-provisioned);
//! - [`tls`]: PEM to a rustls configuration (pure);
//! - [`metrics`]: Prometheus metrics.

pub mod access;
pub mod admission;
pub mod api;
pub mod budget;
pub mod certs;
pub mod dry_run;
pub mod judge;
pub mod metrics;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use metrics::WebhookMetrics;

use crate::clock::Clock;
use crate::https::ServerMetrics;
use crate::task::Tasks;
use crate::workload::allowed::AllowedKinds;
pub use server::{router, router_with_api, router_with_dry_run};

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
    /// Most dry runs of templates the webhook sends the API server in any minute (0: none;
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
    Bind(#[from] crate::listen::BindError),
    /// Self-signed certificates were asked for without a Kubernetes client.
    #[error("--webhook-self-signed needs a Kubernetes client")]
    NoClient,
    /// No usable certificate.
    #[error("cannot load the webhook certificate")]
    Certs(#[from] certs::CertError),
    /// The server failed.
    #[error("webhook server failed")]
    Serve(#[source] std::io::Error),
    /// The server or the certificate's refresher ended.
    #[error(transparent)]
    Task(#[from] crate::task::TaskError),
}

/// What the webhook runs with besides its flags: the clients (one for `--webhook-self-signed`
/// to provision with; one for the template checks, see [`router_with_api`], a client of its
/// own so they never hold up the controllers' requests), the kinds the manager creates
/// (`--workload-kinds`), the clock, its connection metrics, where the loaded certificate is
/// told (the secure metrics server serves the same), and where its tasks are listed.
#[derive(Clone)]
pub struct Env {
    /// The API client of the self-signed certificates, if any.
    pub client: Option<kube::Client>,
    /// The API server the template checks ask (the manager's client of its own for them);
    /// none: the local rules only.
    pub api: Option<Arc<dyn api::AdmissionApi>>,
    /// The kinds the manager creates (`--workload-kinds`): a CronJob naming another is refused.
    pub workload_kinds: AllowedKinds,
    /// The one source of "now".
    pub clock: Arc<dyn Clock>,
    /// Where the server and the certificate's refresher are listed.
    pub tasks: Tasks,
    /// The server's connection metrics.
    pub connections: ServerMetrics,
    /// Told the certificate once it is loaded.
    pub certificate: Option<watch::Sender<Option<RustlsConfig>>>,
}

impl Env {
    /// Without an API server: the local rules only, certificates from a directory, the
    /// system clock, metrics and tasks listed nowhere else.
    pub fn local() -> Self {
        Self {
            client: None,
            api: None,
            workload_kinds: AllowedKinds::default(),
            clock: Arc::new(crate::clock::SystemClock),
            tasks: Tasks::default(),
            connections: ServerMetrics::unregistered("webhook"),
            certificate: None,
        }
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("client", &self.client.is_some())
            .field("api", &self.api.is_some())
            .field("clock", &self.clock)
            .field("tasks", &self.tasks)
            .finish_non_exhaustive()
    }
}

/// Serve the webhook until `shutdown`, then stop accepting connections and let open ones
/// finish (at most [`server::DRAIN_TIMEOUT`]). `ready` gets the bound address once the
/// certificate is loaded and the listener accepts TLS connections.
pub async fn serve(
    args: WebhookArgs,
    env: Env,
    metrics: WebhookMetrics,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
    shutdown: CancellationToken,
) -> Result<(), WebhookError> {
    let listener = crate::listen::bind(args.webhook_addr)?;
    let app = match env.api {
        Some(api) => router_with_api(
            metrics,
            api,
            args.webhook_dry_runs_per_minute,
            env.workload_kinds,
        ),
        None => router(metrics),
    };
    let loaded = args.certificates(env.client)?.load(env.clock).await?;
    if let Some(certificate) = env.certificate {
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
        (limits, env.connections),
        ready,
        shutdown,
        &env.tasks,
    )
    .await
}
