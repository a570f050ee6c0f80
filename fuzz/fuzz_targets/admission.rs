#![no_main]
//! The admission webhook's pure handler: `admit` on any request body, at both endpoints, and the
//! validation and defaulting it applies, also on a CronJob object given alone (a body that is
//! no `AdmissionReview`), so the fuzzer can reach the rules without the envelope.
//!
//! Input: the request body as the API server would post it.

use kronjob::api::defaults::{apply_defaults, default_patch};
use kronjob::api::validation::{Operation, invalid_message, validate};
use kronjob::webhook::admission::{Answer, Endpoint, admit, invalid_status};
use kronjob::webhook::metrics::Outcome;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let body: Option<Value> = serde_json::from_slice(data).ok();
    for endpoint in [Endpoint::Mutate, Endpoint::Validate] {
        match admit(endpoint, data) {
            Ok(answer) => well_formed(&answer, body.as_ref()),
            // HTTP 400 with this reason.
            Err(bad) => assert!(!bad.to_string().is_empty()),
        }
    }
    if let Some(object) = body.filter(|b| {
        b.is_object() && b.get("kind").and_then(Value::as_str) != Some("AdmissionReview")
    }) {
        validates(&object);
        defaults(&object);
    }
});

/// An answer holds a response for the request's uid, encodes, and says what its outcome says:
/// a denial is a 400 (a 500 when the webhook failed), a patch applies to the object and leaves
/// nothing more to default.
fn well_formed(answer: &Answer, body: Option<&Value>) {
    serde_json::to_vec(&answer.review).expect("the answer encodes");
    let response = answer
        .review
        .response
        .as_ref()
        .expect("an answer holds a response");
    if let Some(uid) = body.and_then(|b| b.pointer("/request/uid")?.as_str()) {
        assert_eq!(response.uid, uid);
    }
    match answer.outcome {
        Outcome::allowed => assert!(response.allowed && response.patch.is_none()),
        Outcome::denied => {
            assert!(!response.allowed);
            assert_eq!(response.result.code, 400, "{:?}", response.result);
            assert!(!response.result.message.is_empty());
        }
        Outcome::error => {
            assert!(!response.allowed);
            assert_eq!(response.result.code, 500);
        }
        Outcome::patched => {
            assert!(response.allowed);
            let patch = response
                .patch
                .as_deref()
                .expect("a patched answer has a patch");
            let patch: json_patch::Patch =
                serde_json::from_slice(patch).expect("the patch is a JSON Patch");
            let mut object = body
                .and_then(|b| b.pointer("/request/object"))
                .cloned()
                .expect("a patch is made for an object");
            json_patch::patch(&mut object, &patch).expect("the patch applies to the object");
            assert!(default_patch(&object).0.is_empty(), "defaulted twice");
        }
        Outcome::bad_request => panic!("a bad request is an Err, not an answer"),
    }
}

/// Validation names every error by a field path under `spec` or `metadata`, renders it as the
/// API server would, and an update that changes nothing fails no check the create passes.
fn validates(object: &Value) {
    let create = validate(object, None, Operation::Create);
    let update = validate(object, Some(object), Operation::Update);
    for e in create.iter().chain(&update) {
        assert!(
            e.path.starts_with("spec") || e.path.starts_with("metadata"),
            "{e}"
        );
        assert!(!e.body().is_empty());
    }
    for e in &update {
        assert!(
            create.contains(e),
            "an unchanged update fails {e}, the create does not"
        );
    }
    if !create.is_empty() {
        assert!(invalid_message("name", &create).contains(&create[0].path));
        let status = invalid_status("name", &create);
        assert_eq!(status.code, 400);
        let causes = status.details.map(|d| d.causes.len());
        assert_eq!(causes, Some(create.len()));
    }
}

/// Defaulting: the patch makes exactly the defaulted object, which needs no further default.
fn defaults(object: &Value) {
    let defaulted = apply_defaults(object);
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &default_patch(object)).expect("the defaults apply");
    assert_eq!(patched, defaulted);
    assert!(default_patch(&defaulted).0.is_empty(), "defaulted twice");
}
