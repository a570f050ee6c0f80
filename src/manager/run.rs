//! `kronjob run`: wire the pieces into one process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::{
    Health, LeaseConfig, ManagerError, bind, client, ensure_crd, health_router, identity, lead,
    metrics_router, parse_listen_addr, parse_selector, serve,
};
use crate::clock::{Clock, SystemClock};
use crate::controller::Scope;
use crate::controller::cronjob::{self, ReconcilerArgs, ReconcilerMetrics};
use crate::controller::ttl::{self, TtlArgs, TtlMetrics};
use crate::metrics::Metrics;
use crate::telemetry::{self, LogFormat};
use crate::webhook::{self, WebhookArgs, WebhookMetrics};

/// How long in-flight reconciles may take to finish after a shutdown or a lost lease.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(8);
/// The same for controllers whose caches never synced (nothing can be in flight).
pub const UNSYNCED_DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Flags of `kronjob run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Apply the CRD at start (server-side) instead of requiring it to be installed.
    #[arg(long)]
    pub install_crd: bool,

    /// Elect a leader on a coordination.k8s.io Lease; only the leader runs the controllers,
    /// every replica serves the webhook.
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the Lease.
    #[arg(long, default_value = "kronjob-leader")]
    pub leader_election_id: String,
    /// Namespace of the Lease (default: the pod's namespace, else `default`).
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Seconds a lease lasts without renewal; a dead leader is replaced within about this.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=300))]
    pub leader_election_lease_duration: u64,
    /// Seconds after acquiring or renewing by which the leader renews; below the lease duration.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=299))]
    pub leader_election_renew_deadline: u64,

    /// Address of GET /metrics.
    #[arg(long, default_value = ":8080", value_parser = parse_listen_addr)]
    pub metrics_addr: SocketAddr,
    /// Address of the /healthz and /readyz probes.
    #[arg(long, default_value = ":8081", value_parser = parse_listen_addr)]
    pub health_addr: SocketAddr,

    /// Namespace whose CronJobs this manager handles (repeatable; default: all).
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    /// Label selector on CronJobs, to split a large cluster between managers.
    #[arg(long, value_parser = parse_selector)]
    pub selector: Option<String>,

    /// After SIGTERM, keep serving the webhook this long while reporting not ready, so the
    /// API server stops sending requests here before the listener closes.
    #[arg(long, default_value = "5s", value_parser = crate::duration::parse_flag_duration)]
    pub shutdown_delay: Duration,

    /// Log format; the level comes from RUST_LOG (default info).
    #[arg(long, value_enum, default_value = "auto")]
    pub log_format: LogFormat,

    #[command(flatten)]
    #[allow(missing_docs)]
    pub reconciler: ReconcilerArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub ttl: TtlArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub webhook: WebhookArgs,
}

impl RunArgs {
    /// Checks across flags that clap cannot express; an error is a usage error (exit 2).
    pub fn validate(&self) -> Result<(), String> {
        if self.leader_election_renew_deadline >= self.leader_election_lease_duration {
            return Err(format!(
                "--leader-election-renew-deadline ({}) must be below --leader-election-lease-duration ({})",
                self.leader_election_renew_deadline, self.leader_election_lease_duration
            ));
        }
        if self.namespaces.iter().any(|n| n.trim().is_empty()) {
            return Err("--namespace must not be empty".into());
        }
        Ok(())
    }

    /// Whether this replica serves the admission webhook: it needs certificates, generated
    /// (`--webhook-self-signed`) or present in `--webhook-cert-dir`.
    pub fn webhook_enabled(&self) -> bool {
        self.webhook.webhook_self_signed || self.webhook.webhook_cert_dir.join("tls.crt").exists()
    }

    fn lease(&self) -> Option<LeaseConfig> {
        self.leader_elect.then(|| LeaseConfig {
            name: self.leader_election_id.clone(),
            namespace: self
                .leader_election_namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".to_string()),
            identity: identity(),
            duration_seconds: self.leader_election_lease_duration,
            grace_seconds: self.leader_election_lease_duration
                - self.leader_election_renew_deadline,
        })
    }

    fn scope(&self) -> Scope {
        Scope {
            namespaces: self.namespaces.clone(),
            selector: self.selector.clone(),
        }
    }
}

/// Run the manager until SIGTERM/SIGINT.
pub async fn run(args: RunArgs) -> Result<(), ManagerError> {
    telemetry::init(args.log_format);
    let client = client().await?;
    ensure_crd(client.clone(), args.install_crd).await?;
    run_with(args, client, super::shutdown_on_signal()).await
}

/// Run the manager with a given client until `shutdown` is cancelled.
pub async fn run_with(
    args: RunArgs,
    client: kube::Client,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    let mut registry = Registry::default();
    let reconciler_metrics = ReconcilerMetrics::new(&mut registry);
    let ttl_metrics = TtlMetrics::new(&mut registry);
    let webhook_metrics = WebhookMetrics::new(&mut registry);
    let metrics = Metrics::new(registry);

    let webhook_enabled = args.webhook_enabled();
    let health = Health::new(webhook_enabled);
    // Listeners stop `shutdown_delay` after `shutdown` (at once without a webhook): in between
    // the replica reports not ready but still answers admission requests.
    let servers_stop = CancellationToken::new();
    {
        let (shutdown, servers_stop, health) =
            (shutdown.clone(), servers_stop.clone(), Arc::clone(&health));
        let delay = if webhook_enabled {
            args.shutdown_delay
        } else {
            Duration::ZERO
        };
        tokio::spawn(async move {
            shutdown.cancelled().await;
            health.set_draining();
            tokio::time::sleep(delay).await;
            servers_stop.cancel();
        });
    }
    // Bind before anything runs, so a taken port fails the start.
    let health_listener = bind(args.health_addr).await?;
    let metrics_listener = bind(args.metrics_addr).await?;
    info!(health = %local(&health_listener), metrics = %local(&metrics_listener), "listening");
    let mut servers = tokio::task::JoinSet::new();
    servers.spawn(serve(
        "health",
        health_listener,
        health_router(Arc::clone(&health)),
        servers_stop.clone(),
    ));
    servers.spawn(serve(
        "metrics",
        metrics_listener,
        metrics_router(metrics),
        servers_stop.clone(),
    ));

    if webhook_enabled {
        let addr = args.webhook.webhook_addr;
        let serving = Arc::clone(&health);
        let webhook_shutdown = servers_stop.clone();
        let webhook_client = client.clone();
        let webhook_args = args.webhook.clone();
        servers.spawn(async move {
            let result = webhook::serve(
                webhook_args,
                Some(webhook_client),
                webhook_metrics,
                webhook_shutdown.cancelled_owned(),
            )
            .await;
            serving.set_webhook_serving(false);
            result.map_err(|e| {
                error!(error = %e, "webhook server stopped");
                ManagerError::Webhook(e)
            })
        });
        let ready = Arc::clone(&health);
        tokio::spawn(async move {
            if wait_listening(addr, Duration::from_secs(60)).await {
                info!(%addr, "webhook serving");
                ready.set_webhook_serving(true);
            } else {
                warn!(%addr, "webhook not accepting connections after 60 s");
            }
        });
    } else {
        info!(
            cert_dir = %args.webhook.webhook_cert_dir.display(),
            "no webhook certificates and no --webhook-self-signed: the admission webhook is not served"
        );
    }

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let lead_result = lead(
        client.clone(),
        args.lease(),
        Arc::clone(&health),
        shutdown.clone(),
        |token| {
            let client = client.clone();
            let args = args.clone();
            let clock = Arc::clone(&clock);
            let reconciler_metrics = reconciler_metrics.clone();
            let ttl_metrics = ttl_metrics.clone();
            let health = Arc::clone(&health);
            async move {
                let synced = Arc::clone(&health);
                let reconciler = cronjob::run(
                    client.clone(),
                    args.reconciler.clone(),
                    Arc::clone(&clock),
                    reconciler_metrics,
                    args.scope(),
                    move || synced.set_caches_synced(true),
                    token.clone().cancelled_owned(),
                );
                let ttl = ttl::run(
                    client,
                    args.ttl.clone(),
                    clock,
                    ttl_metrics,
                    args.namespaces.clone(),
                    token.clone().cancelled_owned(),
                );
                let reconciler = async {
                    let result = reconciler.await;
                    info!("CronJob controller stopped");
                    result
                };
                let ttl = async {
                    ttl.await;
                    info!("TTL controller stopped");
                };
                let both = async {
                    let (reconciled, ()) = tokio::join!(reconciler, ttl);
                    if let Err(e) = reconciled {
                        error!(error = %e, "CronJob controller stopped");
                        // Without its reconciler the process is useless: stop everything.
                        token.cancel();
                    }
                };
                // kube-runtime holds a controller's work until its cache is ready; a controller
                // whose cache never synced (API server unreachable) would wait forever. After
                // shutdown, in-flight reconciles get DRAIN_LIMIT, then the controllers are dropped.
                let drain = async {
                    token.cancelled().await;
                    let limit = if health.caches_synced() {
                        DRAIN_LIMIT
                    } else {
                        UNSYNCED_DRAIN_LIMIT
                    };
                    tokio::time::sleep(limit).await;
                    warn!(
                        ?limit,
                        "controllers still busy after shutdown; stopping them"
                    );
                };
                tokio::select! {
                    () = both => {}
                    () = drain => {}
                }
            }
        },
    )
    .await;
    // Controllers are done (shutdown or failure): stop the servers too.
    shutdown.cancel();
    let mut result = lead_result;
    info!("controllers stopped; draining servers");
    while let Some(joined) = servers.join_next().await {
        if let Ok(Err(e)) = joined
            && result.is_ok()
        {
            result = Err(e);
        }
    }
    info!("stopped");
    result
}

fn local(listener: &tokio::net::TcpListener) -> String {
    listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Wait until something accepts TCP connections on `addr` (the unspecified address is reached
/// through loopback).
async fn wait_listening(addr: SocketAddr, limit: Duration) -> bool {
    let target = if addr.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(target).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
