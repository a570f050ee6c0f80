//! The flags of `kronjob run`, and the settings derived from them.

use std::net::SocketAddr;
use std::time::Duration;

use super::lease::LeaseConfig;
use super::shard::ShardConfig;
use crate::controller::Scope;
use crate::controller::cronjob::ReconcilerArgs;
use crate::controller::ttl::TtlArgs;
use crate::listen::parse_listen_addr;
use crate::selector::parse_selector;
use crate::telemetry::LogFormat;
use crate::webhook::WebhookArgs;

/// A leader-election duration: at least one second, whole seconds.
fn parse_lease_duration(text: &str) -> Result<Duration, String> {
    let d = crate::duration::parse_flag_duration(text)?;
    if d < Duration::from_secs(1) || d.subsec_nanos() != 0 {
        return Err(format!("{text:?} must be whole seconds, at least 1s"));
    }
    Ok(d)
}

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
    /// How long a lease lasts without renewal; a dead leader is replaced within about this.
    #[arg(long, default_value = "15s", value_parser = parse_lease_duration)]
    pub leader_election_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down; below the lease duration.
    #[arg(long, default_value = "10s", value_parser = parse_lease_duration)]
    pub leader_election_renew_deadline: Duration,
    /// How often a standby tries to take the lease and the leader renews it; a released lease
    /// is taken over within about this.
    #[arg(long, default_value = "1s", value_parser = parse_lease_duration)]
    pub leader_election_retry_period: Duration,
    /// This replica's name (the pod name): its leader-election identity and Event instance.
    #[arg(long, env = "POD_NAME", hide = true)]
    pub pod_name: Option<String>,

    /// Share the CronJobs between all replicas instead of electing a leader: each replica
    /// holds its own Lease in --leader-election-namespace and schedules the CronJobs (with
    /// their Jobs and TTLs) that rendezvous hashing assigns it.
    #[arg(long, conflicts_with = "leader_elect")]
    pub sharding: bool,
    /// The shard group: the replicas of one install. Its Leases are `<group>-shard-<pod>`.
    #[arg(long, default_value = "kronjob")]
    pub shard_group: String,
    /// How long a shard Lease lasts without renewal (renewed every third of it): a dead
    /// replica's CronJobs move to the others within about this.
    #[arg(long, default_value = "15s", value_parser = parse_lease_duration)]
    pub shard_lease_duration: Duration,

    /// Address of GET /metrics.
    #[arg(long, default_value = ":8080", value_parser = parse_listen_addr)]
    pub metrics_addr: SocketAddr,
    /// Serve /metrics over HTTPS (the webhook's certificate, else one generated in memory) to
    /// requests whose bearer token may `get` the non-resource URL /metrics (TokenReview and
    /// SubjectAccessReview). `--metrics-secure=false` serves plain HTTP to anyone (local runs).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub metrics_secure: bool,
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

    /// Worker threads of the async runtime. The manager waits on the API server far more than
    /// it computes: one thread holds a burst of 10,000 Job creates at about a quarter of a core,
    /// with fewer wake-ups across threads (and less CPU) than one thread per CPU.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: u16,

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
                "--leader-election-renew-deadline ({:?}) must be below --leader-election-lease-duration ({:?})",
                self.leader_election_renew_deadline, self.leader_election_lease_duration
            ));
        }
        if self.leader_election_retry_period >= self.leader_election_renew_deadline {
            return Err(format!(
                "--leader-election-retry-period ({:?}) must be below --leader-election-renew-deadline ({:?})",
                self.leader_election_retry_period, self.leader_election_renew_deadline
            ));
        }
        if self.sharding && self.shard_lease_duration < Duration::from_secs(3) {
            return Err(format!(
                "--shard-lease-duration ({:?}) must be at least 3s",
                self.shard_lease_duration
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

    /// This replica's identity: the pod name, else host name and process id.
    pub fn identity(&self) -> String {
        self.pod_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "kronjob".to_string());
                format!("{host}-{}", std::process::id())
            })
    }

    /// Namespace of the Leases: `--leader-election-namespace`, else `default`.
    fn lease_namespace(&self) -> String {
        self.leader_election_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_string())
    }

    /// The shard membership settings, when `--sharding` is given.
    pub fn shard(&self) -> Option<ShardConfig> {
        self.sharding.then(|| ShardConfig {
            group: self.shard_group.clone(),
            namespace: self.lease_namespace(),
            identity: self.identity(),
            duration: self.shard_lease_duration,
        })
    }

    /// The leader election settings, when `--leader-elect` is given.
    pub fn lease(&self) -> Option<LeaseConfig> {
        self.leader_elect.then(|| LeaseConfig {
            name: self.leader_election_id.clone(),
            namespace: self.lease_namespace(),
            identity: self.identity(),
            duration: self.leader_election_lease_duration,
            renew_deadline: self.leader_election_renew_deadline,
            retry_period: self.leader_election_retry_period,
        })
    }

    /// The namespaces and selector the controllers handle.
    pub fn scope(&self) -> Scope {
        Scope {
            namespaces: self.namespaces.clone(),
            selector: self.selector.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn one_worker_thread_unless_told() {
        let parse = |args: &[&str]| {
            Command::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
                .map(|c| c.run.worker_threads)
        };
        assert_eq!(parse(&[]).expect("defaults"), 1);
        assert_eq!(parse(&["--worker-threads", "4"]).expect("four"), 4);
        for bad in ["0", "-1", "two", "1025"] {
            let err = parse(&["--worker-threads", bad]).expect_err(bad);
            assert_eq!(err.exit_code(), 2, "{bad}");
        }
    }
}
