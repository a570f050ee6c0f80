//! Self-provisioned certificates against a scripted API server (tower-test mock): the first
//! replica creates the Secret and fills the caBundles; a replica that loses the creation race
//! uses the winner's Secret and writes nothing; the issued chain verifies over real TLS for
//! the Service's DNS name.

mod tls_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use kronjob::webhook::certs::{MUTATING_CONFIG, SelfSigned, VALIDATING_CONFIG};
use serde_json::{Value, json};

type Calls = Arc<Mutex<Vec<(String, String)>>>;

/// A mock API server: `respond(method, path, body) -> (status, body)`; records every call.
fn mock_client(
    respond: impl Fn(&str, &str, Option<Value>) -> (StatusCode, Value) + Send + 'static,
) -> (kube::Client, Calls) {
    let (service, mut handle) =
        tower_test::mock::pair::<Request<kube::client::Body>, Response<kube::client::Body>>();
    let calls: Calls = Arc::default();
    let recorded = calls.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request.uri().path().to_string();
            let bytes = http_body_util::BodyExt::collect(request.into_body())
                .await
                .expect("request body")
                .to_bytes();
            let body = serde_json::from_slice::<Value>(&bytes).ok();
            recorded
                .lock()
                .expect("lock")
                .push((method.clone(), path.clone()));
            let (status, answer) = respond(&method, &path, body);
            send.send_response(
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(answer.to_string().into_bytes()))
                    .expect("response"),
            );
        }
    });
    (kube::Client::new(service, "kronjob-system"), calls)
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": reason})
}

fn config(kind: &str, name: &str, ca: Option<&str>) -> Value {
    let mut hook = json!({
        "name": format!("{}cronjob-v1.batch.kronjob.dev", if kind.starts_with("Mutating") { "m" } else { "v" }),
        "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"service": {"name": "kronjob-webhook", "namespace": "kronjob-system"}}
    });
    if let Some(ca) = ca {
        hook["clientConfig"]["caBundle"] = json!(ca);
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name, "resourceVersion": "7"},
        "webhooks": [hook]
    })
}

const SECRET_PATH: &str = "/api/v1/namespaces/kronjob-system/secrets/kronjob-webhook-self-signed";
const SECRETS_PATH: &str = "/api/v1/namespaces/kronjob-system/secrets";
const MUTATING_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kronjob-mutating";
const VALIDATING_PATH: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kronjob-validating";

#[tokio::test]
async fn first_replica_creates_second_replica_reuses() {
    // Replica 1: nothing exists yet.
    let created: Arc<Mutex<Option<Value>>> = Arc::default();
    let ca_written: Arc<Mutex<Vec<String>>> = Arc::default();
    let (client, calls) = {
        let created = created.clone();
        let ca_written = ca_written.clone();
        mock_client(move |method, path, body| match (method, path) {
            ("GET", SECRET_PATH) => (StatusCode::NOT_FOUND, status(404, "NotFound")),
            ("POST", SECRETS_PATH) => {
                let body = body.expect("secret body");
                *created.lock().expect("lock") = Some(body.clone());
                (StatusCode::CREATED, body)
            }
            ("GET", MUTATING_PATH) => (
                StatusCode::OK,
                config("MutatingWebhookConfiguration", MUTATING_CONFIG, None),
            ),
            ("GET", VALIDATING_PATH) => (
                StatusCode::OK,
                config(
                    "ValidatingWebhookConfiguration",
                    VALIDATING_CONFIG,
                    Some("b2xk"),
                ),
            ),
            ("PUT", MUTATING_PATH | VALIDATING_PATH) => {
                let body = body.expect("config body");
                ca_written.lock().expect("lock").push(
                    body["webhooks"][0]["clientConfig"]["caBundle"]
                        .as_str()
                        .expect("caBundle")
                        .to_string(),
                );
                (StatusCode::OK, body)
            }
            other => panic!("unexpected call {other:?}"),
        })
    };
    let first = SelfSigned::new(client, "kronjob-webhook", "kronjob-system")
        .ensure(jiff::Timestamp::now())
        .await
        .expect("provisioned");
    let secret = created
        .lock()
        .expect("lock")
        .clone()
        .expect("secret created");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(
        calls
            .lock()
            .expect("lock")
            .iter()
            .filter(|(m, _)| m == "PUT")
            .count(),
        2,
        "both configurations get the caBundle"
    );
    let written = ca_written.lock().expect("lock").clone();
    assert_eq!(written.len(), 2);
    assert_eq!(written[0], written[1]);
    assert_eq!(written[0], secret["data"]["ca.crt"]);

    // Replica 2 loses the creation race and reads the winner's Secret; the caBundles are
    // already right, so it writes nothing.
    let got_after_conflict = Arc::new(Mutex::new(false));
    let (client, calls) = {
        let secret = secret.clone();
        let ca = written[0].clone();
        let got_after_conflict = got_after_conflict.clone();
        mock_client(move |method, path, _| match (method, path) {
            ("GET", SECRET_PATH) => {
                let mut seen = got_after_conflict.lock().expect("lock");
                if *seen {
                    (StatusCode::OK, secret.clone())
                } else {
                    *seen = true;
                    (StatusCode::NOT_FOUND, status(404, "NotFound"))
                }
            }
            ("POST", SECRETS_PATH) => (StatusCode::CONFLICT, status(409, "AlreadyExists")),
            ("GET", MUTATING_PATH) => (
                StatusCode::OK,
                config("MutatingWebhookConfiguration", MUTATING_CONFIG, Some(&ca)),
            ),
            ("GET", VALIDATING_PATH) => (
                StatusCode::OK,
                config(
                    "ValidatingWebhookConfiguration",
                    VALIDATING_CONFIG,
                    Some(&ca),
                ),
            ),
            other => panic!("unexpected call {other:?}"),
        })
    };
    let second = SelfSigned::new(client, "kronjob-webhook", "kronjob-system")
        .ensure(jiff::Timestamp::now())
        .await
        .expect("provisioned");
    assert_eq!(second, first, "both replicas serve the same pair");
    let methods: Vec<String> = calls
        .lock()
        .expect("lock")
        .iter()
        .map(|(m, _)| m.clone())
        .collect();
    assert_eq!(methods, ["GET", "POST", "GET", "GET", "GET"]);

    // The issued chain verifies for the Service's DNS name over real TLS.
    let dir = tls_support::temp_dir("selfsigned");
    std::fs::write(dir.join("tls.crt"), &first.cert_pem).expect("write");
    std::fs::write(dir.join("tls.key"), &first.key_pem).expect("write");
    let (addr, stop, server) = tls_support::serve_dir(&dir, Duration::from_secs(60)).await;
    let client = tls_support::Client::new(&first.ca_bundle_pem);
    for name in [
        "kronjob-webhook.kronjob-system.svc",
        "kronjob-webhook.kronjob-system.svc.cluster.local",
    ] {
        let (code, _) = client.post(addr, name, "/healthz", String::new()).await;
        assert_eq!(code, 405, "{name}: POST /healthz reaches the router");
    }
    assert!(
        client
            .try_connect(addr, "other.kronjob-system.svc")
            .await
            .is_err()
    );
    stop.cancel();
    server.await.expect("task").expect("clean shutdown");
    let _ = std::fs::remove_dir_all(dir);
}
