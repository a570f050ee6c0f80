//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

/// A minimal Job as JSON.
pub fn job_json(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}},
    })
}

/// A minimal typed Job.
pub fn job(name: &str) -> Job {
    serde_json::from_value(job_json(name, json!({}))).unwrap()
}

/// The `Status` of a kube API error.
pub fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Default `PostParams`.
pub fn pp() -> kube::api::PostParams {
    kube::api::PostParams::default()
}

/// Default `PatchParams`.
pub fn mp() -> kube::api::PatchParams {
    kube::api::PatchParams::default()
}
