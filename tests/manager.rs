//! The whole manager: listeners, webhook, metrics, readiness and a clean shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        content_type,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

#[path = "tls_support/mod.rs"]
mod tls_support;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

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
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "batch.kronjob.dev", "version": "v1", "kind": "CronJob"},
            "resource": {"group": "batch.kronjob.dev", "version": "v1", "resource": "cronjobs"},
            "operation": "CREATE",
            "name": "c", "namespace": "default",
            "userInfo": {"username": "test"},
            "object": {
                "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
                "metadata": {"name": "c", "namespace": "default"},
                "spec": {"schedule": "61 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}}
            }
        }
    });
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
