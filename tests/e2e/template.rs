//! A Job template the API server refuses: the webhook denies it with the field path under
//! `spec.jobTemplate`, and with the webhook off the reconciler reports it in the `Ready`
//! condition and creates no Job. Both ask the real API server (a dry-run create of the Job).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt;
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{CronJob, LABEL_CRONJOB};
use kronjob::webhook::admission::VALIDATE_PATH;
use kronjob::webhook::{WebhookMetrics, router_with_dry_run};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tower::ServiceExt;

/// An environment variable name with a space: the CRD schema and kronjob's local rules take it,
/// the API server's Job validation does not.
const FIELD: &str = "spec.template.spec.containers[0].env[0].name";

fn manifest(name: &str) -> Value {
    json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "c", "image": "busybox:1.36", "command": ["true"],
                    "env": [{ "name": "MY VAR", "value": "1" }]
                }]
            }}}}
        }
    })
}

/// The validating webhook, in process, asks the cluster: denied, with the CronJob's path.
pub async fn webhook_denies_with_the_field_path(client: Client, ns: &str) {
    let app = router_with_dry_run(
        WebhookMetrics::new(&mut Default::default()),
        Arc::new(client.clone()),
    );
    let mut object = manifest("refused");
    object["metadata"]["namespace"] = json!(ns);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e2e-0001",
            "kind": {"group": "batch.kronjob.dev", "version": "v1", "kind": "CronJob"},
            "resource": {"group": "batch.kronjob.dev", "version": "v1", "resource": "cronjobs"},
            "name": "refused",
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "e2e"},
            "object": object,
        }
    });
    let request = axum::http::Request::post(VALIDATE_PATH)
        .header("content-type", "application/json")
        .body(Body::from(review.to_string()))
        .expect("request");
    let response = app.oneshot(request).await.expect("infallible");
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).expect("JSON answer");
    let response = &answer["response"];
    assert_eq!(response["allowed"], false, "{answer}");
    let causes = response["status"]["details"]["causes"]
        .as_array()
        .expect("causes");
    let want = format!("spec.jobTemplate.{FIELD}");
    assert!(
        causes.iter().any(|c| c["field"] == want.as_str()),
        "{answer}"
    );
}

/// With the webhook off, the reconciler reports the refusal and creates no Job.
pub async fn reconciler_reports_the_refusal_and_creates_no_job(client: Client, ns: &str) {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    let cj: CronJob = serde_json::from_value(manifest("refused")).expect("CronJob");
    cronjobs
        .create(&PostParams::default(), &cj)
        .await
        .expect("create CronJob (no webhook in front)");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let message = loop {
        let ready = cronjobs
            .get_status("refused")
            .await
            .ok()
            .and_then(|cj| cj.status)
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"));
        if let Some(c) = ready.filter(|c| c.reason == "InvalidJobTemplate") {
            assert_eq!(c.status, "False");
            break c.message;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never Ready=False InvalidJobTemplate"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(message.contains(FIELD), "{message}");
    // Past the next slot: still no Job.
    tokio::time::sleep(Duration::from_secs(65)).await;
    let jobs: Api<Job> = Api::namespaced(client, ns);
    let listed = jobs
        .list(&ListParams::default().labels(&format!("{LABEL_CRONJOB}=refused")))
        .await
        .expect("list jobs");
    assert!(listed.items.is_empty(), "{:?}", listed.items);
}
