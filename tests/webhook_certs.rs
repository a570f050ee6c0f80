//! Self-provisioned certificates against a scripted API server (tower-test mock): the first
//! replica creates the Secret and fills the caBundles; a replica that loses the creation race
//! uses the winner's Secret and writes nothing; the issued chain verifies over real TLS for
//! the Service's DNS name.

#[path = "support/mod.rs"]
mod support;
mod tls_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use kronjob::webhook::certs::{MUTATING_CONFIG, SelfSigned, VALIDATING_CONFIG};
use serde_json::{Value, json};
use support::api_script::{Expect, mock_client};

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
    // Replica 1: nothing exists yet. It creates the Secret and fills both caBundles.
    let created: Arc<Mutex<Option<Value>>> = Arc::default();
    let ca_written: Arc<Mutex<Vec<String>>> = Arc::default();
    let (client, script) = mock_client();
    let keep = created.clone();
    let record_ca = |written: Arc<Mutex<Vec<String>>>| {
        move |body: &Value| {
            written.lock().expect("lock").push(
                body["webhooks"][0]["clientConfig"]["caBundle"]
                    .as_str()
                    .expect("caBundle")
                    .to_string(),
            );
        }
    };
    let verdict = script.run(vec![
        Expect::get(SECRET_PATH).fails(StatusCode::NOT_FOUND, "NotFound"),
        Expect::post(SECRETS_PATH).answer(move |body| {
            *keep.lock().expect("lock") = Some(body.clone());
            (StatusCode::CREATED, body.clone())
        }),
        Expect::get(MUTATING_PATH).ok(config(
            "MutatingWebhookConfiguration",
            MUTATING_CONFIG,
            None,
        )),
        Expect::put(MUTATING_PATH).check(record_ca(ca_written.clone())),
        Expect::get(VALIDATING_PATH).ok(config(
            "ValidatingWebhookConfiguration",
            VALIDATING_CONFIG,
            Some("b2xk"),
        )),
        Expect::put(VALIDATING_PATH).check(record_ca(ca_written.clone())),
    ]);
    let first = SelfSigned::new(client, "kronjob-webhook", "kronjob-system")
        .ensure(jiff::Timestamp::now())
        .await
        .expect("provisioned");
    verdict.await.expect("replica 1 requests as scripted");
    let secret = created
        .lock()
        .expect("lock")
        .clone()
        .expect("secret created");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let written = ca_written.lock().expect("lock").clone();
    assert_eq!(written.len(), 2, "both configurations get the caBundle");
    assert_eq!(written[0], written[1]);
    assert_eq!(written[0], secret["data"]["ca.crt"]);

    // Replica 2 loses the creation race and reads the winner's Secret; the caBundles are
    // already right, so it writes nothing.
    let ca = written[0].clone();
    let (client, script) = mock_client();
    let verdict = script.run(vec![
        Expect::get(SECRET_PATH).fails(StatusCode::NOT_FOUND, "NotFound"),
        Expect::post(SECRETS_PATH).fails(StatusCode::CONFLICT, "AlreadyExists"),
        Expect::get(SECRET_PATH).ok(secret.clone()),
        Expect::get(MUTATING_PATH).ok(config(
            "MutatingWebhookConfiguration",
            MUTATING_CONFIG,
            Some(&ca),
        )),
        Expect::get(VALIDATING_PATH).ok(config(
            "ValidatingWebhookConfiguration",
            VALIDATING_CONFIG,
            Some(&ca),
        )),
    ]);
    let second = SelfSigned::new(client, "kronjob-webhook", "kronjob-system")
        .ensure(jiff::Timestamp::now())
        .await
        .expect("provisioned");
    verdict.await.expect("replica 2 requests as scripted");
    assert_eq!(second, first, "both replicas serve the same pair");

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

/// A serving certificate within 30 days of its expiry is renewed in the Secret: replaced with
/// the resourceVersion that was read (so a replica that renewed first wins and is read
/// instead), signed by the same CA, so the caBundles stay as they are.
#[tokio::test]
async fn a_leaf_due_for_renewal_is_replaced_in_the_secret() {
    let issued_at = jiff::Timestamp::now();
    let created: Arc<Mutex<Option<Value>>> = Arc::default();
    let keep = created.clone();
    let (client, script) = mock_client();
    let verdict = script.run(vec![
        Expect::get(SECRET_PATH).fails(StatusCode::NOT_FOUND, "NotFound"),
        Expect::post(SECRETS_PATH).answer(move |body| {
            *keep.lock().expect("lock") = Some(body.clone());
            (StatusCode::CREATED, body.clone())
        }),
        Expect::get(MUTATING_PATH).ok(config(
            "MutatingWebhookConfiguration",
            MUTATING_CONFIG,
            None,
        )),
        Expect::put(MUTATING_PATH),
        Expect::get(VALIDATING_PATH).ok(config(
            "ValidatingWebhookConfiguration",
            VALIDATING_CONFIG,
            None,
        )),
        Expect::put(VALIDATING_PATH),
    ]);
    let first = SelfSigned::new(client, "kronjob-webhook", "kronjob-system")
        .ensure(issued_at)
        .await
        .expect("provisioned");
    verdict.await.expect("the first issue as scripted");
    let mut stored = created.lock().expect("lock").clone().expect("the Secret");
    stored["metadata"]["resourceVersion"] = json!("3");
    let ca = stored["data"]["ca.crt"].clone();
    let old_leaf = stored["data"]["tls.crt"].clone();

    // 340 days later: 25 days left, under the 30 of the renewal.
    let later = issued_at + jiff::SignedDuration::from_hours(340 * 24);
    let replaced: Arc<Mutex<Option<Value>>> = Arc::default();
    let keep = replaced.clone();
    let (client, script) = mock_client();
    let ca_str = ca.as_str().expect("ca.crt").to_string();
    let verdict = script.run(vec![
        Expect::get(SECRET_PATH).ok(stored),
        Expect::put(SECRET_PATH).answer(move |body| {
            *keep.lock().expect("lock") = Some(body.clone());
            (StatusCode::OK, body.clone())
        }),
        Expect::get(MUTATING_PATH).ok(config(
            "MutatingWebhookConfiguration",
            MUTATING_CONFIG,
            Some(&ca_str),
        )),
        Expect::get(VALIDATING_PATH).ok(config(
            "ValidatingWebhookConfiguration",
            VALIDATING_CONFIG,
            Some(&ca_str),
        )),
    ]);
    let renewed = SelfSigned::new(client, "kronjob-webhook", "kronjob-system")
        .ensure(later)
        .await
        .expect("renewed");
    verdict
        .await
        .expect("the renewal as scripted: a replace, no caBundle write");
    let put = replaced
        .lock()
        .expect("lock")
        .clone()
        .expect("the replaced Secret");
    assert_eq!(put["metadata"]["resourceVersion"], "3", "{put}");
    assert_eq!(put["data"]["ca.crt"], ca, "the same CA");
    assert_ne!(
        put["data"]["tls.crt"], old_leaf,
        "a new serving certificate"
    );
    assert_eq!(renewed.ca_cert_pem, first.ca_cert_pem);
    assert!(renewed.not_after > first.not_after, "{renewed:?}");
}
