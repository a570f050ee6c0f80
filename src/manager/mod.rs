//! The manager (`kronjob run`): one process hosting the controllers, the webhook, metrics and
//! probes.
//!
//! The controllers run on the leader only, or on every replica for its share with
//! `--sharding`; the admission webhook on every replica; one shutdown signal stops all.
//!
//! [`run_with`] reads top to bottom: register the metrics, serve the probes and metrics (bound
//! first, so a taken port fails the start), serve the webhook, run the controllers whenever
//! this replica leads, and supervise. Every long-lived task runs by name in a
//! [`TaskSet`], nested where one part owns others (the webhook its
//! server and certificate refresher; each leadership term the CronJob controller with its
//! status writers and outbox, the TTL controller and the cache-sync watch): when any task fails,
//! panics, is aborted or ends on its own, it is logged by name, `/healthz` says so, everything
//! else stops and the process exits non-zero.
//!
//! - [`command`]: the `kronjob` command (`run`, `crd`); [`args`]: the flags of `run`;
//! - [`crd`]: the CRD at start;
//! - [`health`]: what the probes report; [`lease`]: leader election;
//! - [`shard`]: shard group membership (`--sharding`: every replica runs the controllers for
//!   its share of the CronJobs).

pub mod args;
pub mod command;
pub mod crd;
pub mod health;
pub mod lease;
pub mod shard;
mod signal;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use kube::{Api, Client};
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

pub use args::RunArgs;
pub use crd::ensure_crd;
pub use health::{Health, health_router, metrics_router};

use crate::client::{Fence, Observer};
use crate::clock::Clock;
use crate::controller::Shared;
use crate::controller::cronjob::{self, ReconcilerMetrics};
use crate::controller::shard::{Assignment, ShardMetrics, ShardView};
use crate::controller::ttl::{self, TtlMetrics};
use crate::https::HttpsMetrics;
use crate::metrics::Metrics;
use crate::task::{Exit, TaskError, TaskSet, Tasks};
use crate::webhook::{self, WebhookMetrics};

/// Field manager used for server-side apply.
pub const FIELD_MANAGER: &str = "kronjob";
/// How long in-flight reconciles may take to finish after a shutdown or a lost lease.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(8);
/// The same for controllers whose caches never synced (nothing can be in flight).
pub const UNSYNCED_DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// The names the manager's own tasks are supervised by (the webhook's and the controllers'
/// tasks are named in their modules).
pub mod tasks {
    /// `/healthz` and `/readyz`.
    pub const HEALTH_SERVER: &str = "health server";
    /// `/metrics`.
    pub const METRICS_SERVER: &str = "metrics server";
    /// The admission webhook (its server and certificate refresher inside).
    pub const WEBHOOK: &str = "webhook";
    /// This replica's Lease in the shard group (`--sharding`).
    pub const SHARD_MEMBERSHIP: &str = "shard membership";
    /// Leader election, and the controllers while this replica leads.
    pub const CONTROLLERS: &str = "controllers";
    /// Marks the caches synced once every controller's have listed.
    pub const CACHE_SYNC: &str = "cache sync";
}

/// Why the manager stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No client could be built.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// The CRD is not installed and `--install-crd` was not given.
    #[error(
        "the CronJob CRD ({}) is not installed: run `kubectl apply -f crd/`, or start with --install-crd",
        crate::api::CRD_NAME
    )]
    CrdMissing,
    /// The CRD could not be read, applied or did not become established.
    #[error("cannot install or verify the CRD {}", crate::api::CRD_NAME)]
    Crd(#[source] kube::Error),
    /// The CRD did not become established in time.
    #[error("the CRD {crd} was not established within {0:?}", crd = crate::api::CRD_NAME)]
    CrdNotEstablished(Duration),
    /// The CRD could not be generated.
    #[error("cannot generate the CRD")]
    CrdGen(#[source] crate::api::crdgen::CrdError),
    /// A listener could not be bound.
    #[error(transparent)]
    Bind(#[from] crate::listen::BindError),
    /// An HTTP server failed.
    #[error("{name} server failed")]
    Serve {
        /// Which server.
        name: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The webhook failed.
    #[error("admission webhook server failed")]
    Webhook(#[source] crate::webhook::WebhookError),
    /// A task (a controller, a worker, a server) ended, failed, panicked or was aborted.
    #[error(transparent)]
    Task(#[from] TaskError),
}

/// The `User-Agent` part ([`crate::client::user_agent`]) of the controllers' requests.
pub const CONTROLLERS_AGENT: &str = "controllers";
/// The `User-Agent` part of the webhook's dry runs and the metrics' token and access reviews.
pub const WEBHOOK_AGENT: &str = "webhook and metrics auth";

/// A client whose requests say they come from `part` of the manager, seen by `observer`.
async fn client_of(part: &str, observer: &Observer) -> Result<Client, crate::client::ClientError> {
    crate::client::client_with(&crate::client::ClientOptions {
        user_agent: Some(crate::client::user_agent(part)),
        observer: Some(observer.clone()),
        ..Default::default()
    })
    .await
}

/// Run the manager until SIGTERM/SIGINT.
pub async fn run(args: RunArgs) -> Result<(), ManagerError> {
    crate::telemetry::init(args.log_format);
    // Both clients' answers measure the API server's clock, which the manager then runs by.
    let observer = Observer::default();
    let client = client_of(CONTROLLERS_AGENT, &observer).await?;
    ensure_crd(client.clone(), args.install_crd).await?;
    // The webhook's dry runs and the metrics' reviews go through a client of their own (its own
    // connection to the API server), so hostile traffic to those ports never queues ahead of
    // the controllers' requests; its user agent tells its requests apart on the server.
    let side = client_of(WEBHOOK_AGENT, &observer).await?;
    let clients = Clients {
        client,
        side,
        observer,
    };
    run_with_clients(
        args,
        clients,
        signal::shutdown_on_signal(),
        Tasks::default(),
    )
    .await
}

/// The manager's clients: `client` for the controllers and the webhook, `side` for the
/// webhook's dry runs and the metrics' token and access reviews, and what observes them (its
/// metrics are exported, and its clock is the manager's).
#[derive(Clone)]
pub struct Clients {
    /// The controllers' and the webhook's client.
    pub client: Client,
    /// The webhook's dry runs and the metrics' reviews.
    pub side: Client,
    /// What sees their requests and answers.
    pub observer: Observer,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("observer", &self.observer)
            .finish_non_exhaustive()
    }
}

/// Run the manager with a given client until `shutdown` is cancelled.
pub async fn run_with(
    args: RunArgs,
    client: Client,
    shutdown: CancellationToken,
) -> Result<(), ManagerError> {
    run_listed(args, client, shutdown, Tasks::default()).await
}

/// [`run_with`], listing every task it runs in `tasks` (where each can be found by name).
pub async fn run_listed(
    args: RunArgs,
    client: Client,
    shutdown: CancellationToken,
    tasks: Tasks,
) -> Result<(), ManagerError> {
    let clients = Clients {
        side: client.clone(),
        client,
        observer: Observer::default(),
    };
    run_with_clients(args, clients, shutdown, tasks).await
}

/// [`run_listed`], with the manager's [`Clients`].
pub async fn run_with_clients(
    args: RunArgs,
    clients: Clients,
    shutdown: CancellationToken,
    tasks: Tasks,
) -> Result<(), ManagerError> {
    let mut manager = Manager::new(&args, clients, shutdown, tasks);
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
    fn new(health: &Arc<Health>, observer: &Observer) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(health::LeaderGauge(Arc::clone(health))));
        observer.register(&mut registry);
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

/// The process: its shared state and its tasks.
struct Manager {
    client: Client,
    /// The client of the webhook's dry runs and the metrics' reviews.
    side: Client,
    /// The webhook's certificate once loaded (the secure metrics server serves it too).
    certificate: tokio::sync::watch::Sender<Option<RustlsConfig>>,
    clock: Arc<dyn Clock>,
    /// The process is stopping.
    shutdown: CancellationToken,
    /// Cancelled `--shutdown-delay` after `shutdown` (at once without a webhook): in between,
    /// the replica reports not ready but still answers admission requests.
    servers_stop: CancellationToken,
    /// How long the servers outlive `shutdown`.
    shutdown_delay: Duration,
    health: Arc<Health>,
    metrics: Registered,
    tasks: TaskSet<ManagerError>,
    directory: Tasks,
}

impl Manager {
    fn new(
        args: &RunArgs,
        clients: Clients,
        shutdown: CancellationToken,
        directory: Tasks,
    ) -> Self {
        let webhook_enabled = args.webhook_enabled();
        let health = Health::new(webhook_enabled);
        let metrics = Registered::new(&health, &clients.observer);
        Self {
            client: clients.client,
            side: clients.side,
            certificate: tokio::sync::watch::Sender::new(None),
            clock: Arc::clone(clients.observer.clock()) as Arc<dyn Clock>,
            servers_stop: CancellationToken::new(),
            shutdown_delay: if webhook_enabled {
                args.shutdown_delay
            } else {
                Duration::ZERO
            },
            tasks: TaskSet::new(&directory, shutdown.clone()),
            shutdown,
            health,
            metrics,
            directory,
        }
    }

    /// Bind the probe and metrics listeners (a taken port fails the start) and serve them:
    /// the probes over plain HTTP, the metrics over HTTPS to authorized readers (or plain
    /// HTTP with `--metrics-secure=false`).
    fn serve_probes_and_metrics(&mut self, args: &RunArgs) -> Result<(), ManagerError> {
        let health = crate::listen::bind(args.health_addr)?;
        let metrics = crate::listen::bind(args.metrics_addr)?;
        info!(health = %local(&health), metrics = %local(&metrics), secure = args.metrics_secure, "listening");
        let router = health_router(Arc::clone(&self.health));
        self.tasks.spawn(
            tasks::HEALTH_SERVER,
            serve_http("health", health, router, self.servers_stop.clone()),
        );
        let router = metrics_router(self.metrics.exposition.clone());
        if !args.metrics_secure {
            self.tasks.spawn(
                tasks::METRICS_SERVER,
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
        self.tasks.spawn(
            tasks::METRICS_SERVER,
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
        let env = webhook::Env {
            client: Some(self.client.clone()),
            api: Some(Arc::new(self.side.clone())),
            workload_kinds: args.reconciler.workload_kinds.clone(),
            clock: Arc::clone(&self.clock),
            tasks: self.directory.clone(),
            connections: self.metrics.https.server("webhook"),
            certificate: Some(self.certificate.clone()),
        };
        let server = webhook::serve(
            args.webhook.clone(),
            env,
            self.metrics.webhook.clone(),
            ready,
            self.servers_stop.clone(),
        );
        self.tasks.spawn(tasks::WEBHOOK, async move {
            let result = server.await;
            stopped.set_webhook_serving(false);
            result.map_err(ManagerError::Webhook)
        });
    }

    /// With `--sharding`, join the shard group: the view the controllers read, and the token
    /// that lets the membership release this replica's Lease once the controllers have drained.
    fn join_shard(&mut self, args: &RunArgs) -> (ShardView, Option<CancellationToken>) {
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
            Arc::clone(&self.clock),
            publish,
            metrics.clone(),
            released.clone(),
        );
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(tasks::SHARD_MEMBERSHIP, async move {
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
        let (shard, released) = self.join_shard(args);
        let lease = args.lease();
        // A leader's controllers write only while its Lease is certainly its own.
        let fence = Fence::default();
        let client = match &lease {
            Some(_) => crate::client::fenced(self.client.clone(), fence.clone()),
            None => self.client.clone(),
        };
        let controllers = Controllers {
            shared: Shared {
                client,
                clock: Arc::clone(&self.clock),
                scope: args.scope(),
                instance: args.pod_name.clone(),
                gate: crate::controller::priority::Gate::new(),
                shard,
                tasks: self.directory.clone(),
                records: Default::default(),
            },
            reconciler: args.reconciler.clone(),
            ttl: args.ttl.clone(),
            reconciler_metrics: self.metrics.reconciler.clone(),
            ttl_metrics: self.metrics.ttl.clone(),
            health: Arc::clone(&self.health),
        };
        let lease_api = lease
            .as_ref()
            .map(|l| Api::namespaced(self.client.clone(), &l.namespace));
        let elected = lease::lead(
            lease_api,
            lease,
            Arc::clone(&self.clock),
            Arc::clone(&self.health),
            fence,
            self.shutdown.clone(),
            move |token, leading| controllers.term(token, leading),
        );
        self.tasks.spawn(tasks::CONTROLLERS, async move {
            // Once the controllers are done (or this task is gone), the shard Lease may go.
            let _release = released.map(CancellationToken::drop_guard);
            Ok(elected.await?)
        });
    }

    /// Wait for every task. The first that fails, panics, is aborted or ends unasked stops
    /// everything and is the process's error; `/healthz` reports it from then on. From the
    /// shutdown on, the replica reports not ready; the servers stop `--shutdown-delay` later.
    async fn supervise(mut self) -> Result<(), ManagerError> {
        let mut first_error = None;
        let drain = drain_servers(
            self.shutdown.clone(),
            self.shutdown_delay,
            Arc::clone(&self.health),
            self.servers_stop.clone(),
        );
        tokio::pin!(drain);
        loop {
            let (name, exit) = tokio::select! {
                next = self.tasks.join_next() => match next {
                    Some(next) => next,
                    None => break,
                },
                () = &mut drain => continue,
            };
            let Err(exit) = exit else { continue };
            // The probe names the task and how it ended; the error's detail is in the log only.
            let error = match exit {
                Exit::Failed(e) => e,
                other => ManagerError::Task(other.into_error(name)),
            };
            let why = crate::telemetry::error_chain(&error);
            error!(task = name, error = %why, "critical task failed: stopping");
            self.health.set_failed(ended(name, &error));
            first_error.get_or_insert(error);
            self.shutdown.cancel();
        }
        info!("stopped");
        first_error.map_or(Ok(()), Err)
    }
}

/// What `/healthz` says of `error`, the end of the task `name`: the innermost supervised task
/// that ended and how, in fixed words (the probe port is plain HTTP: the error's detail, which
/// may name objects, paths or addresses, is in the log only).
fn ended(name: &'static str, error: &ManagerError) -> String {
    let mut said = format!("the {name} failed");
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        let task = match (
            e.downcast_ref::<TaskError>(),
            e.downcast_ref::<ManagerError>(),
            e.downcast_ref::<webhook::WebhookError>(),
        ) {
            (Some(task), _, _)
            | (_, Some(ManagerError::Task(task)), _)
            | (_, _, Some(webhook::WebhookError::Task(task))) => Some(task),
            _ => None,
        };
        if let Some(task) = task {
            said = task.to_string();
        }
        // A transparent wrapper's source is its inner error's: step into the task instead.
        next = match task {
            Some(TaskError::Failed { source, .. }) => Some(source.as_ref()),
            Some(_) => None,
            None => e.source(),
        };
    }
    said
}

/// At `shutdown`, report not ready at once (admission requests go to other replicas), and stop
/// the servers `delay` later. Then never returns.
async fn drain_servers(
    shutdown: CancellationToken,
    delay: Duration,
    health: Arc<Health>,
    servers_stop: CancellationToken,
) {
    shutdown.cancelled().await;
    health.set_draining();
    tokio::time::sleep(delay).await;
    servers_stop.cancel();
    futures::future::pending::<()>().await;
}

/// What one leadership term of the controllers needs.
struct Controllers {
    shared: Shared,
    reconciler: cronjob::ReconcilerArgs,
    ttl: ttl::TtlArgs,
    reconciler_metrics: ReconcilerMetrics,
    ttl_metrics: TtlMetrics,
    health: Arc<Health>,
}

impl Controllers {
    /// One leadership term: the CronJob controller, the TTL controller (unless disabled) and
    /// the watch that marks the caches synced once both have listed, as tasks, until `token`
    /// is cancelled (then drained within [`DRAIN_LIMIT`]) or one of them ends. They start
    /// before the replica leads, to fill their caches, and act only while `leading` says so.
    fn term(
        &self,
        token: CancellationToken,
        leading: tokio::sync::watch::Receiver<bool>,
    ) -> impl std::future::Future<Output = Result<(), TaskError>> + Send + use<> {
        let shared = Shared {
            shard: self.shared.shard.clone().led_by(leading),
            ..self.shared.clone()
        };
        let mut set = TaskSet::new(&shared.tasks, token.clone());
        let (synced, listed) = oneshot::channel();
        // The TTL controller's Jobs are the owner index's (`--ttl-jobs=owned`): one watch.
        let (tap, tapped) = match self.ttl.ttl_jobs {
            ttl::TtlScope::Owned => {
                let (tap, tapped) = ttl::job_tap(Arc::clone(&shared.clock));
                (Some(tap), Some(tapped))
            }
            _ => (None, None),
        };
        // The other kinds' workloads come from their watches, whatever the scope of Jobs.
        let (workload_tap, tapped_workloads) = if self.ttl.enabled() {
            let (tap, tapped) = ttl::workload_tap(Arc::clone(&shared.clock));
            (Some(tap), Some(tapped))
        } else {
            (None, None)
        };
        let reconciler = cronjob::run(
            shared.clone(),
            self.reconciler.clone(),
            self.reconciler_metrics.clone(),
            (tap, workload_tap),
            move || {
                let _ = synced.send(());
            },
            token.clone(),
        );
        set.spawn(cronjob::driver::NAME, reconciler);
        let ttl_listed = self.ttl.enabled().then(|| {
            let (synced, listed) = oneshot::channel();
            let ttl = ttl::run(
                shared.clone(),
                self.ttl.clone(),
                self.ttl_metrics.clone(),
                tapped,
                tapped_workloads,
                move || {
                    let _ = synced.send(());
                },
                token.clone(),
            );
            set.spawn(ttl::NAME, ttl);
            listed
        });
        let health = Arc::clone(&self.health);
        let stop = token.clone();
        set.spawn(tasks::CACHE_SYNC, async move {
            let cronjobs = listed.await.is_ok();
            let ttl = match ttl_listed {
                Some(listed) => listed.await.is_ok(),
                None => true,
            };
            // A controller that ended before its caches listed reports itself.
            if cronjobs && ttl {
                health.set_caches_synced(true);
            }
            stop.cancelled().await;
            Ok(())
        });
        drain_bounded(set.supervise(), Arc::clone(&self.health), token)
    }
}

/// Run `controllers` until `token` is cancelled; then they get [`DRAIN_LIMIT`] to finish
/// in-flight reconciles ([`UNSYNCED_DRAIN_LIMIT`] if their caches never synced: kube-runtime
/// holds a controller's work until its cache is ready, so an unreachable API server would hold
/// the shutdown forever) and are dropped.
async fn drain_bounded(
    controllers: impl std::future::Future<Output = Result<(), TaskError>>,
    health: Arc<Health>,
    token: CancellationToken,
) -> Result<(), TaskError> {
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
        let observer = Observer::default();
        // The clock gauges appear once an answer has told the offset.
        let now = jiff::Timestamp::now();
        observer.clock().observe(now, now, now);
        let registered = Registered::new(&Health::new(false), &observer);
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

    #[test]
    fn healthz_names_the_innermost_task_and_never_the_error_detail() {
        let detail = || std::io::Error::other("team-a/nightly at 10.0.0.1:6443");
        let inner = TaskError::Failed {
            task: "webhook server",
            source: Box::new(webhook::WebhookError::Serve(detail())),
        };
        let error = ManagerError::Webhook(webhook::WebhookError::Task(inner));
        assert!(crate::telemetry::error_chain(&error).contains("team-a/nightly"));
        assert_eq!(ended("webhook", &error), "the webhook server failed");
        let aborted = ManagerError::Task(TaskError::Aborted("CronJob controller"));
        assert_eq!(
            ended("controllers", &aborted),
            "the CronJob controller was aborted"
        );
        let served = ManagerError::Serve {
            name: "metrics",
            source: detail(),
        };
        assert_eq!(
            ended("metrics server", &served),
            "the metrics server failed"
        );
    }

    /// The metric table of docs/operations.md lists every family, as queried (counters with
    /// `_total`), and nothing else.
    #[test]
    fn the_operations_page_documents_every_metric_once() {
        let path = format!("{}/docs/operations.md", env!("CARGO_MANIFEST_DIR"));
        let page = std::fs::read_to_string(&path).expect("docs/operations.md");
        let mut documented = Vec::new();
        for row in page.lines().filter(|l| l.starts_with("| `kronjob_")) {
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
        assert_eq!(
            documented, want,
            "docs/operations.md metric table (name, type)"
        );
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
