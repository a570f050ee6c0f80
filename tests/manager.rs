//! The manager's listeners: health probes and metrics on ephemeral ports, and a clean shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use kronjob::manager::{Health, bind, health_router, metrics_router, serve};
use kronjob::metrics::Metrics;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
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

#[tokio::test]
async fn probes_and_metrics_serve_and_shut_down_cleanly() {
    let mut registry = Registry::default();
    let counter: Counter = Counter::default();
    registry.register("kronjob_test_events", "Test events", counter.clone());
    counter.inc();
    let metrics = Metrics::new(registry);
    let health = Health::new(true);
    let shutdown = CancellationToken::new();

    let health_listener = bind("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    let metrics_listener = bind("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    let health_addr = health_listener.local_addr().expect("addr");
    let metrics_addr = metrics_listener.local_addr().expect("addr");
    let h = tokio::spawn(serve(
        "health",
        health_listener,
        health_router(health.clone()),
        shutdown.clone(),
    ));
    let m = tokio::spawn(serve(
        "metrics",
        metrics_listener,
        metrics_router(metrics),
        shutdown.clone(),
    ));

    assert_eq!(get(health_addr, "/healthz").await.0, 200);
    assert_eq!(
        get(health_addr, "/readyz").await.0,
        503,
        "webhook not serving yet"
    );
    health.set_webhook_serving(true);
    assert_eq!(get(health_addr, "/readyz").await.0, 200);
    health.set_leader(true);
    assert_eq!(
        get(health_addr, "/readyz").await.0,
        503,
        "leader caches not synced"
    );
    health.set_caches_synced(true);
    assert_eq!(get(health_addr, "/readyz").await.0, 200);

    let (status, content_type, body) = get(metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(body.contains("kronjob_test_events_total 1"), "{body}");
    assert_eq!(get(metrics_addr, "/nope").await.0, 404);

    shutdown.cancel();
    for task in [h, m] {
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("server stops within 5 s")
            .expect("task")
            .expect("server ended without error");
    }
    assert!(
        tokio::net::TcpStream::connect(health_addr).await.is_err(),
        "listener closed"
    );
}
