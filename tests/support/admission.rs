//! AdmissionReviews as the API server sends them, for the webhook's tests, benches and load
//! tool: one envelope, and one request of a CronJob.

use serde_json::{Value, json};

/// The `request.uid` of [`review`].
pub const REVIEW_UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// An `admission.k8s.io/v1` AdmissionReview around `request`.
pub fn envelope(request: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The review of a CronJob `operation` (`CREATE`, `UPDATE`, `DELETE`) of `object`, whose old
/// version is `old` (`Value::Null` for none), as a 1.34 API server sends it: name and
/// namespace from the object (or the old one; namespace `default` when neither has one), by
/// an administrator, uid [`REVIEW_UID`].
pub fn review(operation: &str, object: Value, old: Value) -> Value {
    let field = |path: &str| {
        object
            .pointer(path)
            .or_else(|| old.pointer(path))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let name = field("/metadata/name").unwrap_or_default();
    let namespace = field("/metadata/namespace").unwrap_or_else(|| "default".into());
    let cronjob = json!({"group": "batch.kronjob.dev", "version": "v1", "kind": "CronJob"});
    let cronjobs = json!({"group": "batch.kronjob.dev", "version": "v1", "resource": "cronjobs"});
    envelope(json!({
        "uid": REVIEW_UID,
        "kind": cronjob,
        "resource": cronjobs,
        "requestKind": cronjob,
        "requestResource": cronjobs,
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": old,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    }))
}
