//! The whole manager: listeners, webhook, metrics, readiness and a clean shutdown.

use std::net::SocketAddr;
use std::time::Duration;

#[path = "support/mod.rs"]
mod support;
#[path = "tls_support/mod.rs"]
mod tls_support;

use support::http::get;
use support::manager::{Booted, run_args, unreachable_client};

/// The whole manager, with an API server that refuses connections: its listeners come up on
/// the given ports, the webhook answers over TLS, every subsystem's metrics are exported,
/// readiness waits for the leader's caches, and a shutdown stops everything promptly.
#[tokio::test]
async fn whole_manager_starts_serves_and_stops_cleanly() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("manager");
    pki.write_leaf(&dir, "localhost");
    let cert_dir = format!("--webhook-cert-dir={}", dir.display());
    let flags = [
        cert_dir.as_str(),
        "--shutdown-delay=2s",
        "--metrics-secure=false",
    ];
    assert!(
        run_args(&flags).expect("flags parse").webhook_enabled(),
        "certificates in the cert dir enable the webhook"
    );
    // An API server nobody listens on: watches fail and back off; nothing may crash.
    let manager = Booted::start(unreachable_client(), &flags);
    let (health_addr, metrics_addr, webhook_addr) =
        (manager.health, manager.metrics, manager.webhook);
    manager.listening(health_addr).await;
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

    manager.shut_down();
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
    let result = manager.ended(Duration::from_secs(15)).await;
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("secure-metrics");
    let leaf = pki.write_leaf(&dir, "localhost");
    let cert_dir = format!("--webhook-cert-dir={}", dir.display());
    let flags = [cert_dir.as_str(), "--shutdown-delay=0s"];
    assert!(
        run_args(&flags).expect("flags parse").metrics_secure,
        "secure by default"
    );
    let manager = Booted::start(unreachable_client(), &flags);
    let (metrics_addr, health_addr) = (manager.metrics, manager.health);
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
    let result = manager.stop().await;
    assert!(result.is_ok(), "{result:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A critical task that fails (here the webhook, whose certificate does not parse) stops the
/// whole manager with its error, instead of leaving a process that looks alive.
#[tokio::test]
async fn a_failing_webhook_stops_the_manager_with_an_error() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tls_support::temp_dir("broken");
    std::fs::write(dir.join("tls.crt"), "not a certificate").expect("write");
    std::fs::write(dir.join("tls.key"), "not a key").expect("write");
    let cert_dir = format!("--webhook-cert-dir={}", dir.display());
    let manager = Booted::start(
        unreachable_client(),
        &[cert_dir.as_str(), "--shutdown-delay=0s"],
    );
    // It stops on its own.
    let result = manager.ended(Duration::from_secs(15)).await;
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
        let pod = format!("--pod-name={name}");
        let flags = [
            "--sharding",
            pod.as_str(),
            "--leader-election-namespace=kronjob-system",
            "--webhook-cert-dir=/nonexistent",
            "--shutdown-delay=0s",
            "--metrics-secure=false",
        ];
        assert!(run_args(&flags).expect("flags parse").validate().is_ok());
        let manager = Booted::start(sim.client(), &flags);
        manager.listening(manager.metrics).await;
        metrics.push(manager.metrics);
        managers.push(manager);
    }
    let shared = until_gauges(&metrics, |g| {
        g.iter().all(|(_, members)| *members == 2) && g.iter().map(|(c, _)| c).sum::<i64>() == N
    })
    .await;
    assert!(
        shared.iter().all(|(c, _)| *c > 0),
        "both schedule some: {shared:?}"
    );

    managers.remove(0).stop().await.expect("clean stop");
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
    managers.remove(0).stop().await.expect("clean stop");
}

#[test]
fn sharding_and_leader_election_exclude_each_other() {
    let err = run_args(&["--sharding", "--leader-elect"]).expect_err("usage");
    assert!(err.to_string().contains("cannot be used with"), "{err}");
    let args = run_args(&["--sharding", "--shard-lease-duration=2s"]).expect("parses");
    assert!(
        args.validate()
            .expect_err("too short")
            .contains("at least 3s")
    );
    let args = run_args(&["--sharding", "--shard-group=team-a-kronjob"]).expect("parses");
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
) -> Booted {
    let cert_dir = format!("--webhook-cert-dir={}", cert_dir.display());
    let mut flags = vec![cert_dir.as_str(), "--shutdown-delay=1s"];
    flags.extend(extra);
    let manager = Booted::start_listed(sim.client(), &flags, tasks);
    manager.ready().await;
    manager
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
        let manager = ready_manager(&sim, &dir, extra, &tasks).await;
        let health = manager.health;
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
        // It stops on its own.
        let result = manager.ended(Duration::from_secs(20)).await;
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
