//! The manager: one process hosting the controllers (on the leader only, or on every replica for
//! its share with `--sharding`), the admission webhook
//! (on every replica), the metrics endpoint and the health probes, with one shutdown signal.
//!
//! [`run_with`] reads top to bottom: register the metrics, serve the probes and metrics (bound
//! first, so a taken port fails the start), serve the webhook, run the controllers whenever
//! this replica leads, and supervise. Every task is critical: when one fails or stops on its own,
//! `/healthz` says so, everything else stops and the process exits non-zero.
//!
//! - [`args`]: the flags; [`client`]: the API client; [`crd`]: the CRD at start;
//! - [`health`]: what the probes report; [`lease`]: leader election;
//! - [`shard`]: shard group membership (`--sharding`: every replica runs the controllers for
//!   its share of the CronJobs);
//! - [`selector`]: `--selector` validation.

pub mod args;
pub mod client;
pub mod crd;
pub mod health;
pub mod lease;
pub mod selector;
pub mod shard;
mod signal;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use args::RunArgs;
use client as client_module;
pub use client::client;
pub use crd::{CRD_NAME, ensure_crd};
pub use health::{Health, health_router, metrics_router};
pub use selector::parse_selector;

use crate::clock::{Clock, SystemClock};
use crate::controller::cronjob::{self, ReconcilerMetrics};
use crate::controller::shard::{Assignment, ShardMetrics, ShardView};
use crate::controller::ttl::{self, TtlMetrics};
use crate::controller::{Shared, Stopped};
use crate::https::HttpsMetrics;
use crate::metrics::Metrics;
use crate::webhook::{self, WebhookMetrics};

/// Field manager used for server-side apply.
pub const FIELD_MANAGER: &str = "kronjob";
/// How long in-flight reconciles may take to finish after a shutdown or a lost lease.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(8);
/// The same for controllers whose caches never synced (nothing can be in flight).
pub const UNSYNCED_DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No Kubernetes configuration could be found.
    #[error(
        "no Kubernetes configuration: set KUBECONFIG or create ~/.kube/config, or run inside a cluster"
    )]
    NoConfig(#[source] kube::config::InferConfigError),
    /// The kubeconfig named by `--kubeconfig` or `--context` could not be loaded.
    #[error("cannot load the kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
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
    #[error(transparent)]
    Bind(#[from] crate::net::BindError),
    /// An HTTP server failed.
    #[error("{name} server failed")]
    Serve {
        /// Which server.
        name: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The webhook server failed.
    #[error("admission webhook server failed")]
    Webhook(#[source] crate::webhook::WebhookError),
    /// A controller stopped on its own.
    #[error(transparent)]
    Controller(#[from] Stopped),
    /// A task ended although nobody asked it to.
    #[error("the {0} stopped unexpectedly")]
    Ended(&'static str),
    /// A task panicked.
    #[error("the {0} panicked")]
    Panicked(&'static str),
}

/// Run the manager until SIGTERM/SIGINT.
pub async fn run(args: RunArgs) -> Result<(), ManagerError> {
    crate::telemetry::init(args.log_format);
    let client = client().await?;
    ensure_crd(client.clone(), args.install_crd).await?;
    // The webhook's dry runs and the metrics' reviews go through a client of their own (its own
    // connection to the API server), so hostile traffic to those ports never queues ahead of
    // the controllers' requests.
    let side = client_module::client().await?;
    run_with_clients(args, client, side, signal::shutdown_on_signal()).await
}

/// Run the manager with a given client until `shutdown` is cancelled.
pub async fn run_with(
    args: RunArgs,
    client: Client,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    let side = client.clone();
    run_with_clients(args, client, side, shutdown).await
}

/// [`run_with`], with `side` for the webhook's dry runs and the metrics' token and access
/// reviews.
pub async fn run_with_clients(
    args: RunArgs,
    client: Client,
    side: Client,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    let mut manager = Manager::new(&args, client, side, shutdown);
    manager.serve_probes_and_metrics(&args)?;
    manager.serve_webhook(&args);
    manager.run_controllers(&args);
    manager.supervise().await
}

/// Every subsystem's metrics, registered in one registry.
struct Registered {
    reconciler: ReconcilerMetrics,
    shard: ShardMetrics,
    ttl: TtlMetrics,
    webhook: WebhookMetrics,
    https: HttpsMetrics,
    exposition: Metrics,
}

impl Registered {
    fn new(health: &Arc<Health>) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(health::LeaderGauge(Arc::clone(health))));
        Self {
            reconciler: ReconcilerMetrics::new(&mut registry),
            shard: ShardMetrics::new(&mut registry),
            ttl: TtlMetrics::new(&mut registry),
            webhook: WebhookMetrics::new(&mut registry),
            https: HttpsMetrics::new(&mut registry),
            exposition: Metrics::new(registry),
        }
    }
}

/// The process: its shared state and its critical tasks.
struct Manager {
    client: Client,
    /// The client of the webhook's dry runs and the metrics' reviews.
    side: Client,
    /// The webhook's certificate once loaded (the secure metrics server serves it too).
    certificate: tokio::sync::watch::Sender<Option<RustlsConfig>>,
    /// The process is stopping.
    shutdown: CancellationToken,
    /// Cancelled `--shutdown-delay` after `shutdown` (at once without a webhook): in between,
    /// the replica reports not ready but still answers admission requests.
    servers_stop: CancellationToken,
    health: Arc<Health>,
    metrics: Registered,
    tasks: JoinSet<(&'static str, Result<(), ManagerError>)>,
}

impl Manager {
    fn new(args: &RunArgs, client: Client, side: Client, shutdown: CancellationToken) -> Self {
        let webhook_enabled = args.webhook_enabled();
        let health = Health::new(webhook_enabled);
        let servers_stop = CancellationToken::new();
        let delay = if webhook_enabled {
            args.shutdown_delay
        } else {
            Duration::ZERO
        };
        let (stopping, stop_servers, draining) =
            (shutdown.clone(), servers_stop.clone(), Arc::clone(&health));
        tokio::spawn(async move {
            stopping.cancelled().await;
            draining.set_draining();
            tokio::time::sleep(delay).await;
            stop_servers.cancel();
        });
        let metrics = Registered::new(&health);
        Self {
            client,
            side,
            certificate: tokio::sync::watch::Sender::new(None),
            shutdown,
            servers_stop,
            health,
            metrics,
            tasks: JoinSet::new(),
        }
    }

    /// Bind the probe and metrics listeners (a taken port fails the start) and serve them:
    /// the probes over plain HTTP, the metrics over HTTPS to authorized readers (or plain
    /// HTTP with `--metrics-secure=false`).
    fn serve_probes_and_metrics(&mut self, args: &RunArgs) -> Result<(), ManagerError> {
        let health = crate::net::bind(args.health_addr)?;
        let metrics = crate::net::bind(args.metrics_addr)?;
        info!(health = %local(&health), metrics = %local(&metrics), secure = args.metrics_secure, "listening");
        let router = health_router(Arc::clone(&self.health));
        self.spawn(
            "health server",
            serve_http("health", health, router, self.servers_stop.clone()),
        );
        let router = metrics_router(self.metrics.exposition.clone());
        if !args.metrics_secure {
            self.spawn(
                "metrics server",
                serve_http("metrics", metrics, router, self.servers_stop.clone()),
            );
            return Ok(());
        }
        let authorizer = Arc::new(crate::metrics_auth::Authorizer::new(Arc::new(
            self.side.clone(),
        )));
        let server = SecureMetrics {
            router: crate::metrics_auth::protect(router, authorizer),
            certificate: args.webhook_enabled().then(|| self.certificate.subscribe()),
            limits: crate::https::Limits::standard(args.webhook.enable_http2),
            connections: self.metrics.https.server("metrics"),
        };
        self.spawn(
            "metrics server",
            server.serve(metrics, self.servers_stop.clone()),
        );
        Ok(())
    }

    /// Serve the admission webhook when it has certificates; ready once they are loaded.
    fn serve_webhook(&mut self, args: &RunArgs) {
        if !args.webhook_enabled() {
            info!(
                cert_dir = %args.webhook.webhook_cert_dir.display(),
                "no webhook certificates and no --webhook-self-signed: the admission webhook is not served"
            );
            return;
        }
        let serving = Arc::clone(&self.health);
        let ready = move |addr: SocketAddr| {
            info!(%addr, "webhook serving");
            serving.set_webhook_serving(true);
        };
        let stopped = Arc::clone(&self.health);
        let serving = webhook::Serving {
            client: Some(self.client.clone()),
            dry_run: Some(self.side.clone()),
            metrics: self.metrics.webhook.clone(),
            connections: self.metrics.https.server("webhook"),
            certificate: Some(self.certificate.clone()),
        };
        let server = webhook::serve_with(
            args.webhook.clone(),
            serving,
            ready,
            self.servers_stop.clone(),
        );
        self.spawn("webhook server", async move {
            let result = server.await;
            stopped.set_webhook_serving(false);
            result.map_err(ManagerError::Webhook)
        });
    }

    /// With `--sharding`, join the shard group: the view the controllers read, and the token
    /// that lets the membership release this replica's Lease once the controllers have drained.
    fn join_shard(
        &mut self,
        args: &RunArgs,
        clock: Arc<dyn Clock>,
    ) -> (ShardView, Option<CancellationToken>) {
        let metrics = self.metrics.shard.clone();
        let Some(config) = args.shard() else {
            return (ShardView::solo(metrics), None);
        };
        let (publish, assignment) = tokio::sync::watch::channel(Arc::new(Assignment::default()));
        let released = CancellationToken::new();
        let api = Api::namespaced(self.client.clone(), &config.namespace);
        let membership = shard::membership(
            api,
            config,
            clock,
            publish,
            metrics.clone(),
            released.clone(),
        );
        let shutdown = self.shutdown.clone();
        self.spawn("shard membership", async move {
            membership.await;
            // Released after the controllers stopped: the process is stopping.
            shutdown.cancelled().await;
            Ok(())
        });
        (ShardView::sharded(assignment, metrics), Some(released))
    }

    /// Run the controllers whenever this replica leads (always, without `--leader-elect`; for
    /// its share of the CronJobs with `--sharding`).
    fn run_controllers(&mut self, args: &RunArgs) {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let (shard, released) = self.join_shard(args, Arc::clone(&clock));
        let shared = Shared {
            client: self.client.clone(),
            clock: Arc::clone(&clock),
            scope: args.scope(),
            instance: args.pod_name.clone(),
            gate: crate::controller::gate::Gate::new(),
            shard,
        };
        let lease = args.lease();
        let lease_api = lease
            .as_ref()
            .map(|l| Api::namespaced(self.client.clone(), &l.namespace));
        let (reconciler_args, ttl_args) = (args.reconciler.clone(), args.ttl.clone());
        let (reconciler_metrics, ttl_metrics) =
            (self.metrics.reconciler.clone(), self.metrics.ttl.clone());
        let health = Arc::clone(&self.health);
        let work = move |token: CancellationToken| {
            let synced = Arc::clone(&health);
            let reconciler = cronjob::run(
                shared.clone(),
                reconciler_args.clone(),
                reconciler_metrics.clone(),
                move || synced.set_caches_synced(true),
                token.clone(),
            );
            let ttl = ttl::run(
                shared.clone(),
                ttl_args.clone(),
                ttl_metrics.clone(),
                token.clone(),
            );
            Box::pin(drain_bounded(
                async move { tokio::try_join!(reconciler, ttl).map(|_| ()) },
                Arc::clone(&health),
                token,
            ))
        };
        let elected = lease::lead(
            lease_api,
            lease,
            clock,
            Arc::clone(&self.health),
            self.shutdown.clone(),
            work,
        );
        self.spawn("controllers", async move {
            let result = elected.await;
            if let Some(released) = released {
                released.cancel();
            }
            result.map_err(ManagerError::from)
        });
    }

    fn spawn(
        &mut self,
        name: &'static str,
        task: impl std::future::Future<Output = Result<(), ManagerError>> + Send + 'static,
    ) {
        self.tasks.spawn(async move { (name, task.await) });
    }

    /// Wait for every task. The first that fails, panics or ends unasked stops everything and
    /// is the process's error.
    async fn supervise(mut self) -> Result<(), ManagerError> {
        let mut first_error = None;
        while let Some(joined) = self.tasks.join_next().await {
            let (name, result) = match joined {
                Ok(done) => done,
                Err(e) if e.is_panic() => ("task", Err(ManagerError::Panicked("a manager task"))),
                Err(_) => continue,
            };
            let result = match result {
                Ok(()) if !self.shutdown.is_cancelled() => Err(ManagerError::Ended(name)),
                other => other,
            };
            if let Err(e) = result {
                error!(task = name, error = %crate::telemetry::error_chain(&e), "critical task failed: stopping");
                self.health.set_failed(format!("{name}: {e}"));
                first_error.get_or_insert(e);
                self.shutdown.cancel();
            }
        }
        info!("stopped");
        first_error.map_or(Ok(()), Err)
    }
}

/// Run `controllers` until `token` is cancelled; then they get [`DRAIN_LIMIT`] to finish
/// in-flight reconciles ([`UNSYNCED_DRAIN_LIMIT`] if their caches never synced: kube-runtime
/// holds a controller's work until its cache is ready, so an unreachable API server would hold
/// the shutdown forever) and are dropped.
async fn drain_bounded(
    controllers: impl std::future::Future<Output = Result<(), Stopped>>,
    health: Arc<Health>,
    token: CancellationToken,
) -> Result<(), Stopped> {
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
        result = controllers => result,
        () = drain => Ok(()),
    }
}

/// The secure metrics server: what it serves, with which certificate.
struct SecureMetrics {
    router: Router,
    /// The webhook's certificate, once loaded; `None`: the webhook is not served, and a
    /// certificate is generated in memory.
    certificate: Option<tokio::sync::watch::Receiver<Option<RustlsConfig>>>,
    limits: crate::https::Limits,
    connections: crate::https::ServerMetrics,
}

impl SecureMetrics {
    async fn serve(
        self,
        listener: std::net::TcpListener,
        stop: CancellationToken,
    ) -> Result<(), ManagerError> {
        let failed = |source| ManagerError::Serve {
            name: "metrics",
            source,
        };
        let tls = match self.certificate {
            Some(mut loaded) => {
                let config = tokio::select! {
                    config = loaded.wait_for(Option::is_some) => config.ok().and_then(|c| c.clone()),
                    () = stop.cancelled() => None,
                };
                let Some(config) = config else {
                    // Stopping before the webhook loaded its certificate (it reports why).
                    stop.cancelled().await;
                    return Ok(());
                };
                config
            }
            None => generated_certificate().map_err(|e| failed(std::io::Error::other(e)))?,
        };
        let server = crate::https::Server {
            app: self.router,
            tls,
            limits: self.limits,
            metrics: self.connections,
            drain: webhook::server::DRAIN_TIMEOUT,
        };
        crate::https::serve(listener, server, |_| {}, stop)
            .await
            .map_err(failed)
    }
}

/// A certificate for the secure metrics server of a manager without a webhook (a local run):
/// generated in memory for `localhost`, as controller-runtime does; scrapers skip its
/// verification or pin it.
fn generated_certificate() -> Result<RustlsConfig, webhook::certs::CertError> {
    let names = ["localhost".to_string()];
    let bundle = webhook::certs::self_signed::issue_bundle(&names, jiff::Timestamp::now())?;
    let config =
        webhook::tls::server_config(bundle.cert_pem.as_bytes(), bundle.key_pem.as_bytes())?;
    Ok(RustlsConfig::from_config(config))
}

/// Serve `router` on `listener` until `stop`, then finish in-flight requests.
async fn serve_http(
    name: &'static str,
    listener: std::net::TcpListener,
    router: Router,
    stop: CancellationToken,
) -> Result<(), ManagerError> {
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|source| ManagerError::Serve { name, source })?;
    axum::serve(listener, router)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
        .map_err(|source| ManagerError::Serve { name, source })
}

fn local(listener: &std::net::TcpListener) -> String {
    listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every metric family the manager exports, as `# TYPE` names it, with its type. Labelled
    /// families appear once they have a child, so each gets one.
    fn families() -> Vec<(String, String)> {
        let registered = Registered::new(&Health::new(false));
        registered
            .reconciler
            .reconcile_errors
            .get_or_create(&cronjob::metrics::ErrorLabels { category: "api" })
            .inc();
        registered.ttl.error(ttl::ObjectKind::Job, "api");
        drop(registered.https.server("webhook"));
        registered.webhook.observe(
            "/validate",
            crate::webhook::metrics::Outcome::allowed,
            Duration::from_millis(1),
        );
        let text = registered.exposition.encode().expect("encode");
        text.lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .map(|rest| {
                let (name, kind) = rest.split_once(' ').expect("# TYPE name type");
                (name.to_string(), kind.to_string())
            })
            .collect()
    }

    /// Every sample name the manager exports: each family with the suffixes its type gives
    /// its samples.
    fn exported() -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (name, kind) in families() {
            let suffixes: &[&str] = match kind.as_str() {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        }
        names
    }

    /// The metric table of the README lists every family, as queried (counters with
    /// `_total`), and nothing else.
    #[test]
    fn the_readme_documents_every_metric_once() {
        let path = format!("{}/README.md", env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(&path).expect("README.md");
        let mut documented = Vec::new();
        for row in readme.lines().filter(|l| l.starts_with("| `kronjob_")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            documented.push((cells[1].trim_matches('`').to_string(), cells[2].to_string()));
        }
        let mut want: Vec<(String, String)> = families()
            .into_iter()
            .map(|(name, kind)| match kind.as_str() {
                "counter" => (format!("{name}_total"), kind),
                _ => (name, kind),
            })
            .collect();
        want.sort();
        documented.sort();
        assert_eq!(documented, want, "README metric table (name, type)");
    }

    /// The `kronjob_*` names in `text`.
    fn referenced(text: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let mut rest = text;
        while let Some(at) = rest.find("kronjob_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
        names
    }

    fn chart_file(path: &str) -> String {
        let path = format!("{}/config/helm/kronjob/{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn assert_exported(what: &str, used: &BTreeSet<String>) {
        let exported = exported();
        let missing: Vec<_> = used.difference(&exported).collect();
        assert!(
            missing.is_empty(),
            "{what} queries metrics kronjob does not export: {missing:?}; exported: {exported:?}"
        );
    }

    #[test]
    fn exported_names_include_every_subsystem() {
        let exported = exported();
        for name in [
            "kronjob_leader",
            "kronjob_reconciles_total",
            "kronjob_reconcile_errors_total",
            "kronjob_ttl_errors_total",
            "kronjob_job_creation_skew_seconds_bucket",
            "kronjob_jobs_deleted_total",
            "kronjob_ttl_deletions_total",
            "kronjob_webhook_request_duration_seconds_count",
            "kronjob_cronjob_next_schedule_time_seconds",
            "kronjob_cronjob_series_omitted",
        ] {
            assert!(exported.contains(name), "{name} in {exported:?}");
        }
        assert!(!exported.contains("kronjob_leader_total"));
    }

    #[test]
    fn the_alert_rules_query_only_exported_metrics() {
        let template = chart_file("templates/prometheusrule.yaml");
        // The PromQL of each rule: from `expr:` up to its `for:`.
        let mut exprs = String::new();
        let mut inside = false;
        for line in template.lines() {
            let line = line.trim_start();
            if line.starts_with("expr:") {
                inside = true;
            } else if line.starts_with("for:") {
                inside = false;
            }
            if inside && !line.starts_with('#') {
                exprs.push_str(line);
                exprs.push('\n');
            }
        }
        let used = referenced(&exprs);
        assert!(used.len() >= 8, "rules found: {used:?}");
        assert_exported("the PrometheusRule", &used);
    }

    #[test]
    fn the_dashboard_parses_and_queries_only_exported_metrics() {
        let dashboard: serde_json::Value =
            serde_json::from_str(&chart_file("dashboards/kronjob.json")).expect("dashboard JSON");
        let mut queries = Vec::new();
        let panels = dashboard["panels"].as_array().expect("panels");
        for panel in panels {
            for target in panel["targets"].as_array().into_iter().flatten() {
                queries.push(target["expr"].as_str().expect("expr").to_string());
            }
        }
        for variable in dashboard["templating"]["list"]
            .as_array()
            .expect("variables")
        {
            if let Some(query) = variable["query"]["query"].as_str() {
                queries.push(query.to_string());
            }
        }
        let used = referenced(&queries.join("\n"));
        assert!(used.len() >= 15, "dashboard queries: {used:?}");
        assert_exported("the dashboard", &used);
        let titles: BTreeSet<_> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
        for title in [
            "Job creation skew",
            "Reconcile rate and errors",
            "Jobs created and deleted",
            "TTL deletions",
            "Webhook latency",
            "CronJobs",
        ] {
            assert!(titles.contains(title), "panel {title:?} in {titles:?}");
        }
    }
}
