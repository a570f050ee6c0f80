//! The whole manager: listeners, webhook, metrics, readiness and a clean shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

#[path = "support/mod.rs"]
mod support;
#[path = "tls_support/mod.rs"]
mod tls_support;

use support::http::{free_port, get};

#[derive(clap::Parser, Debug)]
struct RunOnly {
    #[command(flatten)]
    args: kronjob::manager::RunArgs,
}

/// The whole manager, with an API server that refuses connections: its listeners come up on
/// the given ports, the webhook answers over TLS, every subsystem's metrics are exported,
/// readiness waits for the leader's caches, and a shutdown stops everything promptly.
#[tokio::test]
async fn whole_manager_starts_serves_and_stops_cleanly() {
    use clap::Parser;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("manager");
    pki.write_leaf(&dir, "localhost");
    let (health_port, metrics_port, webhook_port) = (free_port(), free_port(), free_port());
    let args = RunOnly::try_parse_from([
        "run".to_string(),
        format!("--health-addr=127.0.0.1:{health_port}"),
        format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        format!("--webhook-addr=127.0.0.1:{webhook_port}"),
        format!("--webhook-cert-dir={}", dir.display()),
        "--shutdown-delay=2s".to_string(),
        "--metrics-secure=false".to_string(),
    ])
    .expect("flags parse")
    .args;
    assert!(
        args.webhook_enabled(),
        "certificates in the cert dir enable the webhook"
    );
    // An API server nobody listens on: watches fail and back off; nothing may crash.
    let config = kube::Config::new(
        format!("http://127.0.0.1:{}", free_port())
            .parse()
            .expect("url"),
    );
    let client = kube::Client::try_from(config).expect("client");
    let shutdown = CancellationToken::new();
    let manager = tokio::spawn(kronjob::manager::run_with(args, client, shutdown.clone()));

    let health_addr: SocketAddr = format!("127.0.0.1:{health_port}").parse().expect("addr");
    let metrics_addr: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().expect("addr");
    let webhook_addr: SocketAddr = format!("127.0.0.1:{webhook_port}").parse().expect("addr");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(health_addr).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "health listener up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(health_addr, "/healthz").await.0, 200);
    // Without an API server the leader's caches never sync: not ready, but alive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(health_addr, "/readyz").await.0, 503);

    let client = tls_support::Client::new(&pki.ca_pem);
    let object = serde_json::json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"schedule": "61 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}}
    });
    let review = support::admission::review("CREATE", object, serde_json::Value::Null);
    let (status, body) = client
        .post(
            webhook_addr,
            "localhost",
            "/validate-batch-kronjob-dev-v1-cronjob",
            review.to_string(),
        )
        .await;
    assert_eq!(status, 200);
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("\"allowed\":false"), "{body}");
    assert!(
        body.contains("end of range (61) above maximum (59)"),
        "{body}"
    );

    let (status, _, body) = get(metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    for name in [
        "kronjob_job_creation_skew_seconds",
        "kronjob_ttl_deletion_delay_seconds",
        "kronjob_webhook_request_duration_seconds",
        "kronjob_shard_cronjobs",
        "kronjob_shard_members 1",
    ] {
        assert!(body.contains(name), "metrics export {name}: {body}");
    }
    // Without --leader-elect the replica leads; its CronJob cache has not listed (the API
    // server is unreachable), so no CronJob has series yet, and none was left out.
    for line in [
        "kronjob_leader 1\n",
        "kronjob_cronjob_series_omitted 0\n",
        "# TYPE kronjob_cronjob_next_schedule_time_seconds gauge\n",
        "kronjob_jobs_deleted_total{reason=\"history\"} 0\n",
    ] {
        assert!(body.contains(line), "metrics export {line:?}: {body}");
    }
    assert!(!body.contains("cronjob=\""), "{body}");

    shutdown.cancel();
    // Draining: not ready, but admission requests are still answered for --shutdown-delay.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(get(health_addr, "/readyz").await.0, 503);
    let (status, _) = client
        .post(
            webhook_addr,
            "localhost",
            "/validate-batch-kronjob-dev-v1-cronjob",
            review.to_string(),
        )
        .await;
    assert_eq!(status, 200, "the webhook still answers while draining");
    let result = tokio::time::timeout(Duration::from_secs(15), manager)
        .await
        .expect("manager stops within 15 s of shutdown")
        .expect("task");
    assert!(result.is_ok(), "clean stop: {result:?}");
    for addr in [health_addr, metrics_addr, webhook_addr] {
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "{addr} closed after shutdown"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// By default `/metrics` is HTTPS with the webhook's certificate and needs a token: none is
/// 401 (without asking the API server), and one that cannot be reviewed (no API server) is
/// 503. The probes stay plain HTTP.
#[tokio::test]
async fn metrics_are_https_with_the_webhook_certificate_and_need_a_token() {
    use clap::Parser;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("secure-metrics");
    let leaf = pki.write_leaf(&dir, "localhost");
    let (health_port, metrics_port) = (free_port(), free_port());
    let args = RunOnly::try_parse_from([
        "run".to_string(),
        format!("--health-addr=127.0.0.1:{health_port}"),
        format!("--metrics-addr=127.0.0.1:{metrics_port}"),
        "--webhook-addr=127.0.0.1:0".to_string(),
        format!("--webhook-cert-dir={}", dir.display()),
        "--shutdown-delay=0s".to_string(),
    ])
    .expect("flags parse")
    .args;
    assert!(args.metrics_secure, "secure by default");
    let config = kube::Config::new(
        format!("http://127.0.0.1:{}", free_port())
            .parse()
            .expect("url"),
    );
    let client = kube::Client::try_from(config).expect("client");
    let shutdown = CancellationToken::new();
    let manager = tokio::spawn(kronjob::manager::run_with(args, client, shutdown.clone()));
    let metrics_addr: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().expect("addr");
    let health_addr: SocketAddr = format!("127.0.0.1:{health_port}").parse().expect("addr");
    let tls = tls_support::Client::new(&pki.ca_pem);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tls.try_connect(metrics_addr, "localhost").await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "metrics served over TLS"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let presented = tls.peer_leaf(metrics_addr).await;
    assert_eq!(presented, leaf, "the webhook's certificate");
    let (status, body) = tls.get(metrics_addr, "localhost", "/metrics", None).await;
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
    assert!(!String::from_utf8_lossy(&body).contains("kronjob_"));
    let (status, _) = tls
        .get(metrics_addr, "localhost", "/metrics", Some("some-token"))
        .await;
    assert_eq!(status, 503, "no API server to review the token");
    assert_eq!(
        get(health_addr, "/healthz").await.0,
        200,
        "probes stay plain"
    );
    shutdown.cancel();
    let result = tokio::time::timeout(Duration::from_secs(15), manager)
        .await
        .expect("stops")
        .expect("task");
    assert!(result.is_ok(), "{result:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A critical task that fails (here the webhook, whose certificate does not parse) stops the
/// whole manager with its error, instead of leaving a process that looks alive.
#[tokio::test]
async fn a_failing_webhook_stops_the_manager_with_an_error() {
    use clap::Parser;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tls_support::temp_dir("broken");
    std::fs::write(dir.join("tls.crt"), "not a certificate").expect("write");
    std::fs::write(dir.join("tls.key"), "not a key").expect("write");
    let args = RunOnly::try_parse_from([
        "run".to_string(),
        "--health-addr=127.0.0.1:0".to_string(),
        "--metrics-addr=127.0.0.1:0".to_string(),
        "--webhook-addr=127.0.0.1:0".to_string(),
        format!("--webhook-cert-dir={}", dir.display()),
        "--shutdown-delay=0s".to_string(),
    ])
    .expect("flags parse")
    .args;
    let config = kube::Config::new(
        format!("http://127.0.0.1:{}", free_port())
            .parse()
            .expect("url"),
    );
    let client = kube::Client::try_from(config).expect("client");
    let result = tokio::time::timeout(
        Duration::from_secs(15),
        kronjob::manager::run_with(args, client, CancellationToken::new()),
    )
    .await
    .expect("the manager stops on its own within 15 s");
    let error = result.expect_err("a failed webhook is a failed manager");
    assert!(
        matches!(error, kronjob::manager::ManagerError::Webhook(_)),
        "{error:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The value of an unlabelled gauge in a `/metrics` body.
fn gauge(body: &str, name: &str) -> Option<i64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Poll `/metrics` of each address until `done` holds for their (shard_cronjobs,
/// shard_members) gauges, for at most 15 s.
async fn until_gauges(
    addrs: &[SocketAddr],
    done: impl Fn(&[(i64, i64)]) -> bool,
) -> Vec<(i64, i64)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let mut gauges = Vec::new();
        for addr in addrs {
            let body = get(*addr, "/metrics").await.2;
            gauges.push((
                gauge(&body, "kronjob_shard_cronjobs").unwrap_or(-1),
                gauge(&body, "kronjob_shard_members").unwrap_or(-1),
            ));
        }
        if done(&gauges) {
            return gauges;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gauges stuck at {gauges:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two whole managers with `--sharding` on one simulated API server share the CronJobs and say
/// so in `/metrics`; when one stops, it releases its Lease and the other takes everything.
#[tokio::test]
async fn sharded_managers_share_the_cronjobs_and_a_stopping_one_hands_over() {
    use clap::Parser;
    const N: i64 = 40;
    let sim = kronjob_apisim::ApiSim::new(kronjob_apisim::CostModel::free());
    for i in 0..N {
        sim.insert(support::sim::cronjob_json(
            "load",
            &format!("cj-{i}"),
            "0 0 1 1 *",
            "2024-01-01T09:00:00Z",
            None,
        ));
    }
    let mut managers = Vec::new();
    let mut metrics = Vec::new();
    for name in ["kronjob-a", "kronjob-b"] {
        let metrics_port = free_port();
        let args = RunOnly::try_parse_from([
            "run".to_string(),
            "--sharding".to_string(),
            format!("--pod-name={name}"),
            "--leader-election-namespace=kronjob-system".to_string(),
            "--health-addr=127.0.0.1:0".to_string(),
            format!("--metrics-addr=127.0.0.1:{metrics_port}"),
            "--webhook-cert-dir=/nonexistent".to_string(),
            "--shutdown-delay=0s".to_string(),
            "--metrics-secure=false".to_string(),
        ])
        .expect("flags parse")
        .args;
        assert!(args.validate().is_ok());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(kronjob::manager::run_with(
            args,
            sim.client(),
            shutdown.clone(),
        ));
        managers.push((shutdown, task));
        metrics.push(SocketAddr::from(([127, 0, 0, 1], metrics_port)));
    }
    for addr in &metrics {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "metrics listener up"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let shared = until_gauges(&metrics, |g| {
        g.iter().all(|(_, members)| *members == 2) && g.iter().map(|(c, _)| c).sum::<i64>() == N
    })
    .await;
    assert!(
        shared.iter().all(|(c, _)| *c > 0),
        "both schedule some: {shared:?}"
    );

    let (stop_a, task_a) = managers.remove(0);
    stop_a.cancel();
    task_a.await.expect("join").expect("clean stop");
    let leases = sim.list(&kronjob_apisim::Resource::leases(), Some("kronjob-system"));
    let names: Vec<&str> = leases
        .iter()
        .filter_map(|l| l["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["kronjob-shard-kronjob-b"],
        "the stopped replica released its Lease"
    );
    until_gauges(&metrics[1..], |g| g[0] == (N, 1)).await;
    support::sim::record_calls(&sim);
    let (stop_b, task_b) = managers.remove(0);
    stop_b.cancel();
    task_b.await.expect("join").expect("clean stop");
}

#[test]
fn sharding_and_leader_election_exclude_each_other() {
    use clap::Parser;
    let err = RunOnly::try_parse_from(["run", "--sharding", "--leader-elect"]).expect_err("usage");
    assert!(err.to_string().contains("cannot be used with"), "{err}");
    let args = RunOnly::try_parse_from(["run", "--sharding", "--shard-lease-duration=2s"])
        .expect("parses")
        .args;
    assert!(
        args.validate()
            .expect_err("too short")
            .contains("at least 3s")
    );
    let args = RunOnly::try_parse_from(["run", "--sharding", "--shard-group=team-a-kronjob"])
        .expect("parses")
        .args;
    let config = args.shard().expect("sharding on");
    assert_eq!(config.group, "team-a-kronjob");
    assert_eq!(config.duration, Duration::from_secs(15));
    assert!(args.lease().is_none());
}

/// Every task a manager runs, by name: the manager's servers and webhook, the controllers
/// (and inside them, per leadership term, each controller with its workers and the watch that
/// marks the caches synced), and with `--sharding` the shard membership.
const TASKS: [&str; 11] = [
    "CronJob controller",
    "TTL controller",
    "cache sync",
    "certificate refresher",
    "controllers",
    "health server",
    "metrics server",
    "outbox",
    "status writer",
    "webhook",
    "webhook server",
];

/// A whole manager on `sim`, webhook served with certificates from `cert_dir`, its tasks
/// listed in `tasks`; ready (webhook serving, every cache listed) when this returns.
async fn ready_manager(
    sim: &kronjob_apisim::ApiSim,
    cert_dir: &std::path::Path,
    extra: &[&str],
    tasks: &kronjob::task::Tasks,
) -> (
    SocketAddr,
    tokio::task::JoinHandle<Result<(), kronjob::manager::ManagerError>>,
) {
    use clap::Parser;
    let health_port = free_port();
    let mut flags = vec![
        "run".to_string(),
        format!("--health-addr=127.0.0.1:{health_port}"),
        "--metrics-addr=127.0.0.1:0".to_string(),
        "--webhook-addr=127.0.0.1:0".to_string(),
        format!("--webhook-cert-dir={}", cert_dir.display()),
        "--shutdown-delay=1s".to_string(),
    ];
    flags.extend(extra.iter().map(|f| f.to_string()));
    let args = RunOnly::try_parse_from(flags).expect("flags parse").args;
    let manager = tokio::spawn(kronjob::manager::run_listed(
        args,
        sim.client(),
        CancellationToken::new(),
        tasks.clone(),
    ));
    let health = SocketAddr::from(([127, 0, 0, 1], health_port));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if tokio::net::TcpStream::connect(health).await.is_ok()
            && get(health, "/readyz").await.0 == 200
        {
            return (health, manager);
        }
        assert!(tokio::time::Instant::now() < deadline, "manager ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Ending any one task of a whole manager from outside (as a crash would) turns `/healthz` red
/// with the task's name (for the health server itself: its listener closes), and the manager
/// stops with an error naming the task, whichever task it is.
#[tokio::test]
async fn ending_any_task_turns_healthz_red_and_stops_the_manager_naming_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("supervised");
    pki.write_leaf(&dir, "localhost");
    let sharding = [
        "--sharding",
        "--pod-name=kronjob-a",
        "--leader-election-namespace=kronjob-system",
    ];
    let mut runs: Vec<(&str, &[&str])> = TASKS.iter().map(|t| (*t, &[][..])).collect();
    runs.push(("shard membership", &sharding[..]));
    for (task, extra) in runs {
        let sim = kronjob_apisim::ApiSim::new(kronjob_apisim::CostModel::free());
        sim.insert(support::sim::cronjob_json(
            "ns",
            "cj",
            "0 0 1 1 *",
            "2024-01-01T09:00:00Z",
            None,
        ));
        let tasks = kronjob::task::Tasks::default();
        let (health, manager) = ready_manager(&sim, &dir, extra, &tasks).await;
        let mut want: Vec<&str> = TASKS.to_vec();
        if !extra.is_empty() {
            want.push("shard membership");
        }
        want.sort();
        assert_eq!(tasks.names(), want, "the tasks of a running manager");

        assert!(tasks.abort(task), "{task} runs");
        if task == "health server" {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while tokio::net::TcpStream::connect(health).await.is_ok() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "health listener closes"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } else {
            // Red at once, and for the whole --shutdown-delay the servers stay up.
            let deadline = tokio::time::Instant::now() + Duration::from_millis(900);
            let (status, body) = loop {
                let (status, _, body) = get(health, "/healthz").await;
                if status != 200 || tokio::time::Instant::now() >= deadline {
                    break (status, body);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            assert_eq!(status, 503, "/healthz after the {task} ended: {body}");
            assert!(body.contains(&format!("the {task} was aborted")), "{body}");
        }
        let result = tokio::time::timeout(Duration::from_secs(20), manager)
            .await
            .unwrap_or_else(|_| panic!("the manager stops after the {task} ended"))
            .expect("join");
        let error = result.expect_err("a manager missing a task is a failed manager");
        let chain = kronjob::telemetry::error_chain(&error);
        assert!(
            chain.contains(&format!("the {task} was aborted")),
            "{chain}"
        );
        assert!(tasks.names().is_empty(), "{task}: left {:?}", tasks.names());
    }
    let _ = std::fs::remove_dir_all(dir);
}
