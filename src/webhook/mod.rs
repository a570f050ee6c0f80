//! The admission webhook server: defaulting (`/mutate-…`) and validation (`/validate-…`) of
//! `CronJob` objects, served over TLS on every replica.
//!
//! - [`admission`]: from request bytes to an `AdmissionReview` answer (pure);
//! - [`server`]: the axum routes and hardening layers;
//! - [`tls`]: rustls configuration and certificate-directory reloading;
//! - [`certs`]: self-provisioned certificates (`--webhook-self-signed`);
//! - [`metrics`]: Prometheus metrics.

pub mod admission;
pub mod certs;
pub mod metrics;
pub mod server;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;

pub use metrics::WebhookMetrics;
pub use server::router;

/// Default certificate directory (the kubebuilder convention).
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// How long open connections may finish their requests after shutdown is asked for.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Command-line flags of the webhook server.
#[derive(clap::Args, Debug, Clone)]
pub struct WebhookArgs {
    /// Address the HTTPS webhook server listens on.
    #[arg(long = "webhook-addr", default_value = "0.0.0.0:9443")]
    pub webhook_addr: SocketAddr,
    /// Directory holding tls.crt and tls.key; re-read every 10 s, so a renewed certificate is
    /// served without a restart.
    #[arg(long = "webhook-cert-dir", default_value = DEFAULT_CERT_DIR)]
    pub webhook_cert_dir: PathBuf,
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
}

/// Why the webhook server stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The serving certificate could not be loaded.
    #[error("cannot load the webhook certificate")]
    Tls(#[from] tls::TlsError),
    /// Self-signed certificates were asked for without a Kubernetes client.
    #[error("--webhook-self-signed needs a Kubernetes client")]
    NoClient,
    /// Self-provisioning the certificate failed.
    #[error("cannot provision the self-signed webhook certificate")]
    Certs(#[from] certs::CertError),
    /// The server failed.
    #[error("webhook server failed")]
    Serve(#[source] std::io::Error),
}

/// Serve the webhook until `shutdown` completes, then stop accepting connections and let open
/// ones finish (at most [`DRAIN_TIMEOUT`]).
///
/// Certificates come from `--webhook-cert-dir` (reloaded when they change) or, with
/// `--webhook-self-signed`, are provisioned through the API (`client` is then required).
pub async fn serve(
    args: WebhookArgs,
    client: Option<kube::Client>,
    metrics: WebhookMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WebhookError> {
    let listener = bind(args.webhook_addr)?;
    let app = router(metrics);
    if args.webhook_self_signed {
        let client = client.ok_or(WebhookError::NoClient)?;
        let provisioner =
            certs::SelfSigned::new(client, &args.webhook_service_name, &args.webhook_namespace);
        let bundle = provisioner.ensure(jiff::Timestamp::now()).await?;
        let config = RustlsConfig::from_config(tls::server_config(
            bundle.cert_pem.as_bytes(),
            bundle.key_pem.as_bytes(),
        )?);
        tracing::info!(addr = %args.webhook_addr, "webhook serving a self-provisioned certificate");
        let refresher = tokio::spawn(certs::keep_fresh(
            provisioner,
            config.clone(),
            bundle,
            certs::CHECK_INTERVAL,
        ));
        run(listener, config, app, shutdown, refresher).await
    } else {
        tracing::info!(addr = %args.webhook_addr, dir = %args.webhook_cert_dir.display(), "webhook serving certificates from a directory");
        serve_cert_dir(
            listener,
            args.webhook_cert_dir,
            tls::RELOAD_INTERVAL,
            app,
            shutdown,
        )
        .await
    }
}

/// Bind `addr` for [`serve_cert_dir`].
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, WebhookError> {
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| WebhookError::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| WebhookError::Bind { addr, source })?;
    Ok(listener)
}

/// Serve `app` over TLS on `listener` with the pair in `cert_dir`, re-read every
/// `reload_every`, until `shutdown` completes. Used by [`serve`]; public for tests that bind an
/// ephemeral port.
pub async fn serve_cert_dir(
    listener: std::net::TcpListener,
    cert_dir: PathBuf,
    reload_every: Duration,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WebhookError> {
    let (config, pair) = tls::load_dir(&cert_dir).await?;
    let watcher = tokio::spawn(tls::watch_dir(cert_dir, config.clone(), pair, reload_every));
    run(listener, config, app, shutdown, watcher).await
}

async fn run(
    listener: std::net::TcpListener,
    config: RustlsConfig,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    background: tokio::task::JoinHandle<()>,
) -> Result<(), WebhookError> {
    let handle = axum_server::Handle::new();
    let stopper = {
        let handle = handle.clone();
        tokio::spawn(async move {
            shutdown.await;
            handle.graceful_shutdown(Some(DRAIN_TIMEOUT));
        })
    };
    let result = match axum_server::from_tcp_rustls(listener, config) {
        Ok(server) => server.handle(handle).serve(app.into_make_service()).await,
        Err(e) => Err(e),
    };
    background.abort();
    stopper.abort();
    result.map_err(WebhookError::Serve)
}
