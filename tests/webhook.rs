//! The admission webhook driven through its real router (in process) and over real TLS:
//! defaulting, every validation rule, create versus update, dry run, deletes and other kinds,
//! bad input, panics, metrics, certificate reload and graceful shutdown.

#[path = "support/mod.rs"]
mod support;
mod tls_support;

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kronjob::webhook::admission::{MAX_BODY_BYTES, MUTATE_PATH, VALIDATE_PATH};
use kronjob::webhook::{WebhookMetrics, router};
use serde_json::{Value, json};
use tower::ServiceExt;

use support::admission::{REVIEW_UID as UID, envelope, review};
use support::fixtures::{self, CronJobFixture, NS, manifest};

/// A CronJob `name` as its author writes it (in [`NS`]).
fn cronjob(name: &str) -> Value {
    manifest(
        &fixtures::cronjob("*/5 * * * *")
            .named(name)
            .zone("Europe/Paris"),
    )
}

fn create(object: Value) -> Value {
    review("CREATE", object, Value::Null)
}

async fn post_raw(app: &Router, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, bytes.to_vec())
}

/// Post a review and return the `response` of the answer (HTTP 200 required).
async fn admit(app: &Router, path: &str, review: &Value) -> Value {
    let (status, body) = post_raw(app, path, review.to_string().into_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).expect("JSON answer");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    answer["response"].clone()
}

fn app() -> Router {
    router(WebhookMetrics::new(&mut Default::default()))
}

fn apply_patch(object: &Value, response: &Value) -> Value {
    assert_eq!(response["patchType"], "JSONPatch");
    // kube-core serialises the patch bytes as a JSON array of numbers (which the API server's
    // Go decoder accepts for a []byte field); accept base64 text as well.
    let raw: Vec<u8> = match &response["patch"] {
        Value::String(encoded) => base64_decode(encoded),
        other => serde_json::from_value(other.clone()).expect("patch bytes"),
    };
    let patch: json_patch::Patch = serde_json::from_slice(&raw).expect("patch JSON");
    let mut out = object.clone();
    json_patch::patch(&mut out, &patch).expect("patch applies");
    out
}

/// Minimal standard base64 decoding (no dependency needed for a test).
fn base64_decode(s: &str) -> Vec<u8> {
    let table = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = table.iter().position(|&t| t == c).expect("base64 digit") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[tokio::test]
async fn valid_create_is_defaulted_then_allowed() {
    let app = app();
    let object = cronjob("hello");
    let response = admit(&app, MUTATE_PATH, &create(object.clone())).await;
    assert_eq!(response["uid"], UID);
    assert_eq!(response["allowed"], true);
    let defaulted = apply_patch(&object, &response);
    assert_eq!(defaulted["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(defaulted["spec"]["suspend"], false);
    assert_eq!(defaulted["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(defaulted["spec"]["failedJobsHistoryLimit"], 1);
    // Labelled with its shard bucket.
    assert_eq!(
        defaulted["metadata"]["labels"]["batch.kronjob.dev/shard"],
        kronjob::api::shard::bucket(NS, "hello").to_string()
    );
    // Everything else is untouched.
    let mut without = defaulted.clone();
    without["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("labels");
    for f in [
        "concurrencyPolicy",
        "suspend",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        without["spec"].as_object_mut().expect("spec").remove(f);
    }
    assert_eq!(without, object);

    // The defaulted object needs nothing more, and passes validation.
    let again = admit(&app, MUTATE_PATH, &create(defaulted.clone())).await;
    assert_eq!(again["allowed"], true);
    assert!(again.get("patch").is_none(), "{again}");
    let validated = admit(&app, VALIDATE_PATH, &create(defaulted)).await;
    assert_eq!(validated["allowed"], true, "{validated}");
    assert_eq!(validated["uid"], UID);
}

#[tokio::test]
async fn defaulting_keeps_user_values_and_unknown_fields() {
    let mut object = cronjob("keep");
    object["spec"]["suspend"] = json!(true);
    object["spec"]["concurrencyPolicy"] = json!("Forbid");
    object["spec"]["someFutureField"] = json!({"nested": [1, 2, 3]});
    object["spec"]["jobTemplate"]["spec"]["template"]["spec"]["futurePodField"] = json!("x");
    let response = admit(&app(), MUTATE_PATH, &create(object.clone())).await;
    let defaulted = apply_patch(&object, &response);
    assert_eq!(defaulted["spec"]["suspend"], true);
    assert_eq!(defaulted["spec"]["concurrencyPolicy"], "Forbid");
    assert_eq!(
        defaulted["spec"]["someFutureField"],
        json!({"nested": [1, 2, 3]})
    );
    assert_eq!(
        defaulted["spec"]["jobTemplate"]["spec"]["template"]["spec"]["futurePodField"],
        "x"
    );
}

type Edit = fn(&mut Value);

/// Every invalid case: the edit, the field path, and a fragment of the message.
fn invalid_cases() -> Vec<(&'static str, Edit, &'static str, &'static str)> {
    vec![
        (
            "long name",
            |o| o["metadata"]["name"] = json!("n".repeat(53)),
            "metadata.name",
            "must be no more than 52 characters",
        ),
        (
            "empty schedule",
            |o| o["spec"]["schedule"] = json!(""),
            "spec.schedule",
            "Required value",
        ),
        (
            "bad schedule",
            |o| o["spec"]["schedule"] = json!("61 * * * *"),
            "spec.schedule",
            "Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
        ),
        (
            "TZ in schedule",
            |o| o["spec"]["schedule"] = json!("TZ=UTC 0 * * * *"),
            "spec.schedule",
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ),
        (
            "long schedule",
            |o| o["spec"]["schedule"] = json!("*".repeat(1025)),
            "spec.schedule",
            "must have at most 1024 characters",
        ),
        (
            "empty zone",
            |o| o["spec"]["timeZone"] = json!(""),
            "spec.timeZone",
            "timeZone must be nil or non-empty string",
        ),
        (
            "local zone",
            |o| o["spec"]["timeZone"] = json!("Local"),
            "spec.timeZone",
            "timeZone must be an explicit time zone",
        ),
        (
            "zone shape",
            |o| o["spec"]["timeZone"] = json!("../etc/passwd"),
            "spec.timeZone",
            "unknown time zone",
        ),
        (
            "unknown zone",
            |o| o["spec"]["timeZone"] = json!("Europe/Pariss"),
            "spec.timeZone",
            "Invalid value: \"Europe/Pariss\": unknown time zone Europe/Pariss",
        ),
        (
            "long zone",
            |o| o["spec"]["timeZone"] = json!("a/".repeat(200) + "a"),
            "spec.timeZone",
            "must have at most 255 characters",
        ),
        (
            "deadline",
            |o| o["spec"]["startingDeadlineSeconds"] = json!(-1),
            "spec.startingDeadlineSeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "successful limit",
            |o| o["spec"]["successfulJobsHistoryLimit"] = json!(-1),
            "spec.successfulJobsHistoryLimit",
            "must be greater than or equal to 0",
        ),
        (
            "failed limit",
            |o| o["spec"]["failedJobsHistoryLimit"] = json!(-2),
            "spec.failedJobsHistoryLimit",
            "Invalid value: -2",
        ),
        (
            "policy",
            |o| o["spec"]["concurrencyPolicy"] = json!("Sometimes"),
            "spec.concurrencyPolicy",
            "Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\", \"Enqueue\"",
        ),
        (
            "selector",
            |o| o["spec"]["jobTemplate"]["spec"]["selector"] = json!({"matchLabels": {"a": "b"}}),
            "spec.jobTemplate.spec.selector",
            "`selector` will be auto-generated",
        ),
        (
            "manual selector",
            |o| o["spec"]["jobTemplate"]["spec"]["manualSelector"] = json!(true),
            "spec.jobTemplate.spec.manualSelector",
            "Unsupported value: true: supported values: \"nil\", \"false\"",
        ),
        (
            "parallelism",
            |o| o["spec"]["jobTemplate"]["spec"]["parallelism"] = json!(-1),
            "spec.jobTemplate.spec.parallelism",
            "must be greater than or equal to 0",
        ),
        (
            "completions",
            |o| o["spec"]["jobTemplate"]["spec"]["completions"] = json!(-1),
            "spec.jobTemplate.spec.completions",
            "must be greater than or equal to 0",
        ),
        (
            "active deadline",
            |o| o["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] = json!(-1),
            "spec.jobTemplate.spec.activeDeadlineSeconds",
            "must be greater than or equal to 0",
        ),
        (
            "backoff",
            |o| o["spec"]["jobTemplate"]["spec"]["backoffLimit"] = json!(-1),
            "spec.jobTemplate.spec.backoffLimit",
            "must be greater than or equal to 0",
        ),
        (
            "ttl",
            |o| o["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = json!(-1),
            "spec.jobTemplate.spec.ttlSecondsAfterFinished",
            "must be greater than or equal to 0",
        ),
        (
            "restart always",
            |o| {
                o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] =
                    json!("Always")
            },
            "spec.jobTemplate.spec.template.spec.restartPolicy",
            "Required value: valid values: \"OnFailure\", \"Never\"",
        ),
        (
            "no schedule",
            |o| {
                o["spec"].as_object_mut().expect("spec").remove("schedule");
            },
            "spec.schedule",
            "Required value",
        ),
        (
            "schedule and schedules",
            |o| o["spec"]["schedules"] = json!(["0 * * * *"]),
            "spec.schedules",
            "Forbidden: may not be set together with schedule",
        ),
        (
            "a bad entry of schedules",
            |o| {
                o["spec"].as_object_mut().expect("spec").remove("schedule");
                o["spec"]["schedules"] = json!(["0 * * * *", "*/0 * * * *"]);
            },
            "spec.schedules[1]",
            "Invalid value: \"*/0 * * * *\"",
        ),
        (
            "failure policy of zero",
            |o| o["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": 0}),
            "spec.failurePolicy.suspendAfterConsecutiveFailures",
            "Invalid value: 0: must be greater than or equal to 1",
        ),
        (
            "a queue with another policy",
            |o| {
                o["spec"]["concurrencyPolicy"] = json!("Forbid");
                o["spec"]["queue"] = json!({"maxQueued": 2});
            },
            "spec.queue",
            "Forbidden: may only be set with concurrencyPolicy: Enqueue",
        ),
        (
            "a queue of more than 100",
            |o| {
                o["spec"]["concurrencyPolicy"] = json!("Enqueue");
                o["spec"]["queue"] = json!({"maxQueued": 101});
            },
            "spec.queue.maxQueued",
            "Invalid value: 101: must be less than or equal to 100",
        ),
        (
            "an empty queue",
            |o| {
                o["spec"]["concurrencyPolicy"] = json!("Enqueue");
                o["spec"]["queue"] = json!({"maxQueued": 0});
            },
            "spec.queue.maxQueued",
            "Invalid value: 0: must be greater than or equal to 1",
        ),
        (
            "no job template",
            |o| {
                o["spec"]
                    .as_object_mut()
                    .expect("spec")
                    .remove("jobTemplate");
            },
            "spec.jobTemplate",
            "Required value",
        ),
        (
            "no spec",
            |o| {
                o.as_object_mut().expect("object").remove("spec");
            },
            "spec",
            "Required value",
        ),
    ]
}

#[tokio::test]
async fn each_invalid_field_is_denied_with_its_path() {
    let app = app();
    for (case, edit, path, fragment) in invalid_cases() {
        let mut object = cronjob("bad");
        edit(&mut object);
        let response = admit(&app, VALIDATE_PATH, &create(object)).await;
        assert_eq!(response["uid"], UID, "{case}");
        assert_eq!(response["allowed"], false, "{case}: {response}");
        let status = &response["status"];
        assert_eq!(status["code"], 400, "{case}");
        assert_eq!(status["reason"], "Invalid", "{case}");
        assert_eq!(status["status"], "Failure", "{case}");
        let message = status["message"].as_str().expect("message");
        let name = if case == "long name" {
            "n".repeat(53)
        } else {
            "bad".into()
        };
        assert!(
            message.starts_with(&format!(
                "CronJob.batch.kronjob.dev {name:?} is invalid: {path}: "
            )),
            "{case}: {message}"
        );
        assert!(message.contains(fragment), "{case}: {message}");
        let causes = status["details"]["causes"].as_array().expect("causes");
        assert_eq!(causes.len(), 1, "{case}: {message}");
        assert_eq!(causes[0]["field"], path, "{case}");
        assert_eq!(status["details"]["kind"], "CronJob");
        assert_eq!(status["details"]["group"], "batch.kronjob.dev");
    }
}

#[tokio::test]
async fn every_error_is_listed_at_once() {
    let mut object = cronjob("many");
    for (_, edit, _, _) in invalid_cases().into_iter().filter(|(case, ..)| {
        [
            "bad schedule",
            "deadline",
            "policy",
            "ttl",
            "restart always",
            "unknown zone",
        ]
        .contains(case)
    }) {
        edit(&mut object);
    }
    let response = admit(&app(), VALIDATE_PATH, &create(object)).await;
    let message = response["status"]["message"].as_str().expect("message");
    assert_eq!(
        message,
        "CronJob.batch.kronjob.dev \"many\" is invalid: [\
         spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0, \
         spec.jobTemplate.spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0, \
         spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\", \
         spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\", \"Enqueue\", \
         spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61, \
         spec.timeZone: Invalid value: \"Europe/Pariss\": unknown time zone Europe/Pariss]"
    );
    assert_eq!(
        response["status"]["details"]["causes"]
            .as_array()
            .expect("causes")
            .len(),
        6
    );
}

#[tokio::test]
async fn name_length_is_checked_on_create_only() {
    let app = app();
    let object = cronjob(&"x".repeat(53));
    let created = admit(&app, VALIDATE_PATH, &create(object.clone())).await;
    assert_eq!(created["allowed"], false);
    let updated = admit(
        &app,
        VALIDATE_PATH,
        &review("UPDATE", object.clone(), object.clone()),
    )
    .await;
    assert_eq!(updated["allowed"], true, "{updated}");
    // 52 characters are fine on create.
    let ok = admit(&app, VALIDATE_PATH, &create(cronjob(&"x".repeat(52)))).await;
    assert_eq!(ok["allowed"], true);
}

#[tokio::test]
async fn unchanged_unknown_zone_is_ratcheted_on_update() {
    let app = app();
    let mut object = cronjob("zone");
    object["spec"]["timeZone"] = json!("Europe/Pariss");
    let same = admit(
        &app,
        VALIDATE_PATH,
        &review("UPDATE", object.clone(), object.clone()),
    )
    .await;
    assert_eq!(same["allowed"], true, "{same}");
    let mut old = object.clone();
    old["spec"]["timeZone"] = json!("UTC");
    let changed = admit(&app, VALIDATE_PATH, &review("UPDATE", object, old)).await;
    assert_eq!(changed["allowed"], false);
    // Other rules still apply on update.
    let mut bad = cronjob("zone");
    bad["spec"]["startingDeadlineSeconds"] = json!(-5);
    let r = admit(&app, VALIDATE_PATH, &review("UPDATE", bad, cronjob("zone"))).await;
    assert_eq!(r["allowed"], false);
}

#[tokio::test]
async fn dry_run_is_answered_the_same() {
    let app = app();
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        for object in [cronjob("dry"), {
            let mut o = cronjob("dry");
            o["spec"]["schedule"] = json!("bogus");
            o
        }] {
            let wet = create(object.clone());
            let mut dry = wet.clone();
            dry["request"]["dryRun"] = json!(true);
            assert_eq!(admit(&app, path, &wet).await, admit(&app, path, &dry).await);
        }
    }
}

#[tokio::test]
async fn delete_and_other_kinds_are_allowed_untouched() {
    let app = app();
    let mut bad = cronjob("gone");
    bad["spec"]["schedule"] = json!("nonsense");
    let delete = review("DELETE", Value::Null, bad.clone());
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        let r = admit(&app, path, &delete).await;
        assert_eq!(r["allowed"], true);
        assert!(r.get("patch").is_none());
    }
    let mut pod =
        create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}));
    pod["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        let r = admit(&app, path, &pod).await;
        assert_eq!(r["allowed"], true);
        assert!(r.get("patch").is_none());
    }
    // The status subresource is not ours to judge either.
    let mut status = create(bad);
    status["request"]["subResource"] = json!("status");
    assert_eq!(admit(&app, VALIDATE_PATH, &status).await["allowed"], true);
}

/// `review` with `key` set to `value`, as bytes.
fn with(mut review: Value, key: &str, value: Value) -> Vec<u8> {
    review[key] = value;
    review.to_string().into_bytes()
}

/// `review` without `key`, as bytes.
fn without(mut review: Value, key: &str) -> Vec<u8> {
    if let Some(fields) = review.as_object_mut() {
        fields.remove(key);
    }
    review.to_string().into_bytes()
}

#[tokio::test]
async fn garbage_is_a_bad_request() {
    let app = app();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("not JSON", b"{not json".to_vec(), "not JSON"),
        ("empty", Vec::new(), "not JSON"),
        ("binary", vec![0xff, 0x00, 0x9c], "not JSON"),
        ("array", b"[1,2]".to_vec(), "AdmissionReview"),
        (
            "wrong kind",
            with(envelope(json!({})), "kind", json!("Pod")),
            "AdmissionReview",
        ),
        (
            "v1beta1",
            with(
                envelope(json!({})),
                "apiVersion",
                json!("admission.k8s.io/v1beta1"),
            ),
            "AdmissionReview",
        ),
        (
            "no request",
            without(envelope(Value::Null), "request"),
            "no request",
        ),
        (
            "null request",
            envelope(Value::Null).to_string().into_bytes(),
            "no request",
        ),
        (
            "request not an object",
            envelope(json!("hi")).to_string().into_bytes(),
            "malformed",
        ),
        (
            "request missing fields",
            envelope(json!({"uid": "u"})).to_string().into_bytes(),
            "malformed",
        ),
    ];
    for path in [MUTATE_PATH, VALIDATE_PATH] {
        for (case, body, reason) in &cases {
            let (status, body) = post_raw(&app, path, body.clone()).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{case}");
            let answer: Value = serde_json::from_slice(&body).expect("JSON error body");
            let error = answer["error"].as_str().expect("error text");
            assert!(error.contains(reason), "{case}: {error}");
        }
    }
    // Wrong method and unknown path are plain HTTP errors.
    let request = Request::get(VALIDATE_PATH)
        .body(Body::empty())
        .expect("request");
    let r = app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn oversized_body_is_413_and_counted() {
    let metrics = WebhookMetrics::new(&mut Default::default());
    let app = router(metrics.clone());
    // With a Content-Length: refused before reading.
    let mut big = create(cronjob("big"));
    big["request"]["object"]["metadata"]["annotations"] = json!({"x": "y".repeat(MAX_BODY_BYTES)});
    let body = big.to_string().into_bytes();
    let request = Request::post(VALIDATE_PATH)
        .header("content-length", body.len())
        .body(Body::from(body))
        .expect("request");
    let r = app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body = r.into_body().collect().await.expect("body").to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("larger than"));
    // Streamed without a length: refused once the limit is crossed.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..4).map(|_| Ok(vec![b' '; 1024 * 1024])).collect();
    let request = Request::post(MUTATE_PATH)
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .expect("request");
    let r = app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body = r.into_body().collect().await.expect("body").to_bytes();
    assert!(
        String::from_utf8_lossy(&body).contains("larger than"),
        "{body:?}"
    );
    assert_eq!(metrics.rejected_count("too_large"), 2);
    // Just under the limit is read (and then judged).
    let mut fits = create(cronjob("fits"));
    fits["request"]["object"]["metadata"]["annotations"] =
        json!({"x": "y".repeat(MAX_BODY_BYTES - 4096)});
    let r = admit(&app, VALIDATE_PATH, &fits).await;
    assert_eq!(r["allowed"], true);
    let (status, _) = post_raw(&app, VALIDATE_PATH, b"{not json".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(metrics.rejected_count("malformed"), 1);
}

/// A body that trickles in is cut off: 408, counted as slow, well before the API server's
/// own timeout.
#[tokio::test]
async fn a_slow_body_is_408_and_counted() {
    let metrics = WebhookMetrics::new(&mut Default::default());
    let app = router(metrics.clone());
    let review = create(cronjob("slow")).to_string().into_bytes();
    let length = review.len();
    let trickle = futures::stream::unfold(0usize, |sent| async move {
        if sent >= 64 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        Some((Ok::<_, std::io::Error>(vec![b' ']), sent + 1))
    });
    let request = Request::post(VALIDATE_PATH)
        .header("content-length", length)
        .body(Body::from_stream(trickle))
        .expect("request");
    let started = std::time::Instant::now();
    let r = app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::REQUEST_TIMEOUT);
    assert!(
        started.elapsed() < kronjob::webhook::server::REQUEST_TIMEOUT,
        "{:?}",
        started.elapsed()
    );
    assert_eq!(metrics.rejected_count("slow"), 1);
}

#[tokio::test]
async fn undecodable_object_is_denied_with_the_uid() {
    let app = app();
    for object in [
        json!("just a string"),
        json!([1, 2, 3]),
        json!({"metadata": {"name": 5}, "spec": {}}),
        json!({"metadata": "nope"}),
    ] {
        for path in [MUTATE_PATH, VALIDATE_PATH] {
            let r = admit(&app, path, &create(object.clone())).await;
            assert_eq!(r["uid"], UID, "{object}");
            assert_eq!(r["allowed"], false, "{object}");
            assert_eq!(r["status"]["code"], 400);
            let message = r["status"]["message"].as_str().expect("message");
            assert!(message.contains("object"), "{message}");
        }
    }
    // A CREATE without any object.
    let r = admit(&app, VALIDATE_PATH, &create(Value::Null)).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(r["uid"], UID);
}

#[tokio::test]
async fn wrongly_typed_fields_are_reported_not_crashed_on() {
    let mut object = cronjob("types");
    object["spec"]["schedule"] = json!(5);
    object["spec"]["timeZone"] = json!(["UTC"]);
    object["spec"]["concurrencyPolicy"] = json!(1);
    let r = admit(&app(), VALIDATE_PATH, &create(object.clone())).await;
    assert_eq!(r["allowed"], false);
    let message = r["status"]["message"].as_str().expect("message");
    assert!(
        message.contains("spec.schedule: Invalid value: 5: must be a string"),
        "{message}"
    );
    assert!(
        message.contains("spec.concurrencyPolicy: Unsupported value: 1"),
        "{message}"
    );
    // Mutation leaves them alone and only adds the missing defaults.
    let r = admit(&app(), MUTATE_PATH, &create(object.clone())).await;
    assert_eq!(apply_patch(&object, &r)["spec"]["concurrencyPolicy"], 1);
}

#[tokio::test]
async fn requests_are_measured_by_path_and_result() {
    let mut registry = prometheus_client::registry::Registry::default();
    let app = router(WebhookMetrics::new(&mut registry));
    admit(&app, MUTATE_PATH, &create(cronjob("m"))).await;
    let mut bad = cronjob("v");
    bad["spec"]["schedule"] = json!("x");
    admit(&app, VALIDATE_PATH, &create(bad)).await;
    admit(&app, VALIDATE_PATH, &create(cronjob("v"))).await;
    post_raw(&app, VALIDATE_PATH, b"nope".to_vec()).await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    for (path, result) in [
        (MUTATE_PATH, "patched"),
        (VALIDATE_PATH, "denied"),
        (VALIDATE_PATH, "allowed"),
        (VALIDATE_PATH, "bad_request"),
    ] {
        let line = format!(
            "kronjob_webhook_request_duration_seconds_count{{path=\"{path}\",result=\"{result}\"}} 1"
        );
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn healthz_answers() {
    let r = app()
        .oneshot(
            Request::get("/healthz")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn serves_over_verified_tls_and_drains_on_shutdown() {
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("serve");
    pki.write_leaf(&dir, "localhost");
    let (addr, stop, server) = tls_support::serve_dir(&dir, Duration::from_millis(100)).await;
    let client = tls_support::Client::new(&pki.ca_pem);
    let body = create(cronjob("tls")).to_string();
    let (status, answer) = client
        .post(addr, "localhost", VALIDATE_PATH, body.clone())
        .await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&answer).expect("JSON");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["uid"], UID);

    // A client that does not trust our CA refuses the server.
    let stranger = tls_support::Client::new(&tls_support::Pki::new().ca_pem);
    assert!(stranger.try_connect(addr, "localhost").await.is_err());
    // Neither does a client that expects another name.
    assert!(client.try_connect(addr, "elsewhere.example").await.is_err());

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("server stops")
        .expect("task")
        .expect("clean shutdown");
    let _ = std::fs::remove_dir_all(dir);
}

/// Several schedules and the failure policy over real TLS: every invalid combination is
/// denied naming its field, the valid ones are allowed.
#[tokio::test]
async fn schedules_and_failure_policy_over_tls_name_the_field_of_each_invalid_combination() {
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("schedules");
    pki.write_leaf(&dir, "localhost");
    let (addr, stop, server) = tls_support::serve_dir(&dir, Duration::from_millis(100)).await;
    let client = tls_support::Client::new(&pki.ca_pem);
    fn schedules(items: Value) -> Value {
        let mut o = cronjob("multi");
        o["spec"].as_object_mut().expect("spec").remove("schedule");
        o["spec"]["schedules"] = items;
        o
    }
    let mut both = schedules(json!(["*/2 * * * *"]));
    both["spec"]["schedule"] = json!("0 * * * *");
    let mut neither = cronjob("multi");
    neither["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("schedule");
    let mut policy = schedules(json!(["*/2 * * * *", "*/3 * * * *"]));
    policy["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": -1});
    let mut fine = schedules(json!(["*/2 * * * *", "*/3 * * * *", "H 3 * * SUN"]));
    fine["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": 3});
    // (object, the causes' fields; none: allowed)
    let cases: Vec<(Value, &[&str])> = vec![
        (fine, &[]),
        (schedules(json!(["@every 2h"])), &[]),
        (both, &["spec.schedules"]),
        (neither, &["spec.schedule"]),
        (schedules(json!([])), &["spec.schedules"]),
        (schedules(json!(vec!["0 * * * *"; 17])), &["spec.schedules"]),
        (
            schedules(json!(["@every 2h", "0 * * * *"])),
            &["spec.schedules"],
        ),
        (
            schedules(json!(["0 * * * *", "61 * * * *", "", "TZ=UTC 0 * * * *"])),
            &[
                "spec.schedules[2]",
                "spec.schedules[3]",
                "spec.schedules[1]",
            ],
        ),
        (schedules(json!("0 * * * *")), &["spec.schedules"]),
        (
            policy,
            &["spec.failurePolicy.suspendAfterConsecutiveFailures"],
        ),
    ];
    for (object, want) in cases {
        let body = create(object.clone()).to_string();
        let (status, answer) = client.post(addr, "localhost", VALIDATE_PATH, body).await;
        assert_eq!(status, 200);
        let answer: Value = serde_json::from_slice(&answer).expect("JSON");
        let response = &answer["response"];
        assert_eq!(response["allowed"], want.is_empty(), "{object}: {response}");
        let fields: Vec<&str> = response["status"]["details"]["causes"]
            .as_array()
            .map(|causes| causes.iter().filter_map(|c| c["field"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(fields, want, "{}", response["status"]["message"]);
    }
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("server stops")
        .expect("task")
        .expect("clean shutdown");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_new_certificate_in_the_directory_is_served_without_restart() {
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("reload");
    let first = pki.write_leaf(&dir, "localhost");
    let (addr, stop, server) = tls_support::serve_dir(&dir, Duration::from_millis(50)).await;
    let client = tls_support::Client::new(&pki.ca_pem);
    assert_eq!(client.peer_leaf(addr).await, first);

    // A broken pair is ignored: the old certificate stays.
    std::fs::write(
        dir.join("tls.key"),
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .expect("write");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(client.peer_leaf(addr).await, first);

    let second = pki.write_leaf(&dir, "localhost");
    assert_ne!(first, second);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if client.peer_leaf(addr).await == second {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "new certificate never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Still answering reviews with the new certificate.
    let (status, _) = client
        .post(
            addr,
            "localhost",
            MUTATE_PATH,
            create(cronjob("r")).to_string(),
        )
        .await;
    assert_eq!(status, 200);
    stop.cancel();
    server.await.expect("task").expect("clean shutdown");
    let _ = std::fs::remove_dir_all(dir);
}

// The Job template, judged by the API server: a dry-run create of a batch/v1 CronJob carrying
// it, so kronjob refuses what batch/v1 refuses.

use std::sync::{Arc, Mutex};

use kronjob::webhook::router_with_dry_run;
use kronjob::workload::dry_run::{PROBE_NAME_PREFIX, PROBE_SCHEDULE};
use kronjob_apisim::{ApiSim, CostModel, Fault, Invalid, Resource};

/// batch/v1 CronJobs, where the template check dry-runs.
fn batch_cronjobs() -> Resource {
    Resource::new("batch", "v1", "cronjobs", true)
}

/// The API server's CronJob validation, for two rules the CRD schema and the local rules do
/// not have: an environment variable name may not contain `=`, and an `Indexed` template needs
/// `completions` (a Job gets them by defaulting, a CronJob's template does not). Records the
/// CronJobs it sees.
fn template_validator(sim: &ApiSim) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    sim.set_validator(
        &batch_cronjobs(),
        Arc::new(move |cronjob: &Value| {
            keep.lock().expect("lock").push(cronjob.clone());
            let spec = &cronjob["spec"]["jobTemplate"]["spec"];
            if spec["completionMode"] == "Indexed" && spec["completions"].is_null() {
                return Err(Invalid::field(
                    "spec.jobTemplate.spec.completions",
                    "FieldValueRequired",
                    "Required value: when completion mode is Indexed",
                ));
            }
            match spec
                .pointer("/template/spec/containers/0/env/0/name")
                .and_then(Value::as_str)
            {
                Some(name) if name.contains('=') => Err(Invalid::field(
                    "spec.jobTemplate.spec.template.spec.containers[0].env[0].name",
                    "FieldValueInvalid",
                    format!("Invalid value: {name:?}: a valid environment variable name must consist only of printable ASCII characters other than '='"),
                )),
                _ => Ok(()),
            }
        }),
    );
    seen
}

fn with_env_name(mut object: Value, name: &str) -> Value {
    object["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": name, "value": "1"}]);
    object
}

/// A CronJob as a CREATE review carries it: no UID yet.
fn new_cronjob(name: &str) -> Value {
    let mut object = cronjob(name);
    object["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("uid");
    object
}

fn metrics_text(registry: &prometheus_client::registry::Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
    text
}

#[tokio::test]
async fn a_template_the_api_server_refuses_is_denied_with_the_cronjob_field_path() {
    let sim = ApiSim::new(CostModel::free());
    let seen = template_validator(&sim);
    let mut registry = prometheus_client::registry::Registry::default();
    let app = router_with_dry_run(WebhookMetrics::new(&mut registry), Arc::new(sim.client()));

    let bad = with_env_name(new_cronjob("hello"), "MY=VAR");
    let response = admit(&app, VALIDATE_PATH, &create(bad)).await;
    assert_eq!(response["uid"], UID);
    assert_eq!(response["allowed"], false, "{response}");
    let status = &response["status"];
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["code"], 400);
    let path = "spec.jobTemplate.spec.template.spec.containers[0].env[0].name";
    assert_eq!(
        status["message"],
        format!(
            "CronJob.batch.kronjob.dev \"hello\" is invalid: {path}: Invalid value: \"MY=VAR\": \
             a valid environment variable name must consist only of printable ASCII characters other than '='"
        )
    );
    let causes = status["details"]["causes"].as_array().expect("causes");
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0]["field"], path);
    assert_eq!(causes[0]["reason"], "FieldValueInvalid");
    assert_eq!(status["details"]["kind"], "CronJob");

    // Exactly one request: a dry-run create of a batch/v1 CronJob carrying the template, in
    // the CronJob's namespace; nothing stored.
    let requests = sim.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].key(), "create cronjobs (dry run)");
    assert!(requests[0].dry_run);
    assert_eq!(requests[0].namespace.as_deref(), Some(NS));
    assert!(sim.list(&batch_cronjobs(), None).is_empty());
    let probe = seen.lock().expect("lock")[0].clone();
    let name = probe["metadata"]["name"]
        .as_str()
        .expect("a generated name");
    assert!(name.starts_with(PROBE_NAME_PREFIX), "{name}");
    assert_eq!(probe["spec"]["schedule"], PROBE_SCHEDULE);
    assert_eq!(
        probe["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"],
        "MY=VAR"
    );

    // A template valid as a Job only after Job defaulting is refused, as batch/v1 does.
    let mut indexed = new_cronjob("indexed");
    indexed["spec"]["jobTemplate"]["spec"]["completionMode"] = json!("Indexed");
    let response = admit(&app, VALIDATE_PATH, &create(indexed)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let causes = response["status"]["details"]["causes"]
        .as_array()
        .expect("causes");
    assert_eq!(causes[0]["field"], "spec.jobTemplate.spec.completions");

    // A valid template is allowed after its dry run.
    let response = admit(&app, VALIDATE_PATH, &create(new_cronjob("fine"))).await;
    assert_eq!(response["allowed"], true, "{response}");
    let text = metrics_text(&registry);
    for (result, n) in [("invalid", 2), ("valid", 1)] {
        let line = format!("kronjob_webhook_dry_run_total{{result=\"{result}\"}} {n}");
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn the_local_rules_answer_first_and_only_a_new_template_is_dry_run() {
    let sim = ApiSim::new(CostModel::free());
    let seen = template_validator(&sim);
    let app = router_with_dry_run(
        WebhookMetrics::new(&mut Default::default()),
        Arc::new(sim.client()),
    );
    // Refused by the local rules: no request.
    let mut bad = with_env_name(new_cronjob("hello"), "MY=VAR");
    bad["spec"]["schedule"] = json!("61 * * * *");
    let response = admit(&app, VALIDATE_PATH, &create(bad.clone())).await;
    assert_eq!(response["allowed"], false);
    let causes = response["status"]["details"]["causes"]
        .as_array()
        .expect("causes");
    assert_eq!(causes.len(), 1, "the local rules' answer only");
    assert_eq!(causes[0]["field"], "spec.schedule");
    // Defaulting never asks.
    admit(&app, MUTATE_PATH, &create(new_cronjob("hello"))).await;
    // An update that leaves the template alone is not judged again (an invalid template
    // stored earlier can still be suspended).
    let stored = with_env_name(cronjob("hello"), "MY=VAR");
    let mut suspended = stored.clone();
    suspended["spec"]["suspend"] = json!(true);
    let response = admit(
        &app,
        VALIDATE_PATH,
        &review("UPDATE", suspended, stored.clone()),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(sim.requests().is_empty(), "{:?}", sim.requests());

    // An update that changes it is judged: the new template is the one dry-run.
    let fixed = with_env_name(cronjob("hello"), "MY_VAR");
    let response = admit(&app, VALIDATE_PATH, &review("UPDATE", fixed, stored)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(sim.requests().len(), 1);
    let probe = seen.lock().expect("lock")[0].clone();
    assert_eq!(
        probe["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"],
        "MY_VAR"
    );
}

#[tokio::test]
async fn a_dry_run_without_verdict_allows() {
    let sim = ApiSim::new(CostModel::free());
    template_validator(&sim);
    let mut registry = prometheus_client::registry::Registry::default();
    let app = router_with_dry_run(WebhookMetrics::new(&mut registry), Arc::new(sim.client()));
    let bad = with_env_name(new_cronjob("hello"), "MY=VAR");
    for fault in [
        Fault::internal_error(),
        Fault::new(403, "Forbidden").message("exceeded quota: compute-resources"),
        Fault::new(429, "TooManyRequests"),
        Fault::new(400, "BadRequest")
            .message("admission webhook \"other.example.com\" denied the request"),
    ] {
        sim.fail_next(fault.clone().method("POST").path("/cronjobs"));
        let response = admit(&app, VALIDATE_PATH, &create(bad.clone())).await;
        assert_eq!(response["allowed"], true, "{fault:?}: {response}");
    }
    let text = metrics_text(&registry);
    assert!(
        text.contains("kronjob_webhook_dry_run_total{result=\"error\"} 4"),
        "{text}"
    );
}

#[tokio::test]
async fn a_dry_run_that_does_not_answer_allows_within_the_webhook_timeout() {
    // An API server that accepts the request and never answers.
    let (service, _handle) = tower_test::mock::pair::<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >();
    let client = kube::Client::new(service, "default");
    let mut registry = prometheus_client::registry::Registry::default();
    let app = router_with_dry_run(WebhookMetrics::new(&mut registry), Arc::new(client));
    let started = std::time::Instant::now();
    let response = admit(&app, VALIDATE_PATH, &create(new_cronjob("hello"))).await;
    let waited = started.elapsed();
    assert_eq!(response["allowed"], true, "{response}");
    assert!(waited >= Duration::from_secs(2), "{waited:?}");
    assert!(
        waited < kronjob::webhook::server::REQUEST_TIMEOUT,
        "answered before the webhook's own timeout: {waited:?}"
    );
    assert!(
        metrics_text(&registry).contains("kronjob_webhook_dry_run_total{result=\"timeout\"} 1")
    );
}

// A workload template (`spec.workloadTemplate`), judged by the API server: its kind must be one
// the install creates (`--workload-kinds`) and that its author may create themselves (a
// SubjectAccessReview, never assumed), and the object it makes is dry-run as its kind.

use kronjob::controller::workloads::AllowedKinds;
use kronjob::webhook::router_with_api;
use support::access::Grants;

const WORKLOAD_KINDS: &str =
    "jobs.batch,rayjobs.ray.io,clusterthings.example.com,gadgets.absent.example.com";

fn rayjobs() -> Resource {
    Resource::new("ray.io", "v1", "rayjobs", true)
}

/// A simulated API server serving RayJobs (whose `spec.entrypoint` must be a string, as the
/// CRD's schema would say) and a cluster-scoped kind; no Gadgets.
fn workload_sim() -> ApiSim {
    let sim = ApiSim::new(CostModel::free());
    let crd = |group: &str, kind: &str, plural: &str, scope: &str| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": scope,
                "names": {"kind": kind, "plural": plural},
                "versions": [{"name": "v1", "served": true, "storage": true}]}
        })
    };
    sim.insert_as(
        &Resource::crds(),
        crd("ray.io", "RayJob", "rayjobs", "Namespaced"),
    );
    sim.insert_as(
        &Resource::crds(),
        crd("example.com", "ClusterThing", "clusterthings", "Cluster"),
    );
    sim.set_validator(
        &rayjobs(),
        Arc::new(|object: &Value| match &object["spec"]["entrypoint"] {
            Value::String(_) => Ok(()),
            other => Err(Invalid::field(
                "spec.entrypoint",
                "FieldValueTypeInvalid",
                format!("Invalid value: {other}: spec.entrypoint in body must be of type string: \"{}\"", if other.is_null() { "null" } else { "integer" }),
            )
            // The probe's own name is not the template's: left out of the refusal.
            .and("metadata.name", "FieldValueInvalid", "Invalid value: a policy on names")),
        }),
    );
    sim
}

/// A CronJob `name` running `kind` of `api_version` with `spec` (a completion rule for a kind
/// kronjob has no rule for).
fn workload_cronjob(name: &str, api_version: &str, kind: &str, spec: Value) -> Value {
    let mut object = new_cronjob(name);
    let spec_map = object["spec"].as_object_mut().expect("spec");
    spec_map.remove("jobTemplate");
    spec_map.insert(
        "workloadTemplate".into(),
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"labels": {"team": "a"}}, "spec": spec}),
    );
    let group = api_version.split('/').next().unwrap_or_default();
    if kronjob::workload::kinds::known(group, kind).is_none() {
        object["spec"]["completion"] =
            json!({"succeeded": "self.status.done == true", "failed": "false"});
    }
    object
}

fn ray(name: &str, entrypoint: Value) -> Value {
    workload_cronjob(
        name,
        "ray.io/v1",
        "RayJob",
        json!({"entrypoint": entrypoint}),
    )
}

/// The review of `operation` by `user` (in group `system:authenticated`).
fn review_by(user: &str, operation: &str, object: Value, old: Value) -> Value {
    let mut review = review(operation, object, old);
    review["request"]["userInfo"] =
        json!({"username": user, "uid": format!("uid-{user}"), "groups": ["system:authenticated"]});
    review
}

fn workload_app(api: Arc<Grants>, kinds: &str) -> (Router, prometheus_client::registry::Registry) {
    let mut registry = prometheus_client::registry::Registry::default();
    let allowed: AllowedKinds = kinds.parse().expect("kinds");
    let app = router_with_api(WebhookMetrics::new(&mut registry), api, 50, allowed);
    (app, registry)
}

/// The fields of a denial's causes, and its message.
fn refusal(response: &Value) -> (Vec<String>, String) {
    let fields = response["status"]["details"]["causes"]
        .as_array()
        .map(|causes| {
            causes
                .iter()
                .filter_map(|c| c["field"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let message = response["status"]["message"].as_str().unwrap_or_default();
    (fields, message.to_string())
}

/// What, by whom, the object, allowed, the causes' fields, a part of the message, requests sent
/// to the simulator so far, access reviews asked so far.
type JudgedBy<'a> = (
    &'a str,
    &'a str,
    Value,
    bool,
    &'a [&'a str],
    &'a str,
    usize,
    usize,
);

/// By whom, the object, allowed, the causes' fields, a part of the message, of a warning.
type OverTls<'a> = (&'a str, Value, bool, &'a [&'a str], &'a str, &'a str);

#[tokio::test]
async fn a_workload_is_judged_by_its_kind_its_authors_access_and_its_own_dry_run() {
    let sim = workload_sim();
    let api = Arc::new(Grants::new(
        sim.client(),
        &[
            ("alice", "rayjobs.ray.io", NS),
            ("alice", "clusterthings.example.com", NS),
            ("alice", "gadgets.absent.example.com", NS),
        ],
    ));
    let (app, registry) = workload_app(api.clone(), WORKLOAD_KINDS);
    let gadget = workload_cronjob("g", "absent.example.com/v1", "Gadget", json!({"size": 1}));
    let jobset = workload_cronjob("js", "jobset.x-k8s.io/v1alpha2", "JobSet", json!({}));
    let cluster = workload_cronjob("c", "example.com/v1", "ClusterThing", json!({}));
    let listed = WORKLOAD_KINDS.parse::<AllowedKinds>().expect("kinds");
    let not_created = format!(
        "spec.workloadTemplate.kind: Forbidden: this install of kronjob does not create jobsets.jobset.x-k8s.io (--workload-kinds is {listed})"
    );
    let cases: Vec<JudgedBy> = vec![
        (
            "valid",
            "alice",
            ray("r1", json!("python x.py")),
            true,
            &[],
            "",
            2,
            1,
        ),
        (
            "a user who may not create RayJobs",
            "bob",
            ray("r2", json!("python x.py")),
            false,
            &["spec.workloadTemplate"],
            "spec.workloadTemplate: Forbidden: User \"bob\" may not create rayjobs.ray.io in namespace \"ns\"",
            2,
            2,
        ),
        (
            "a spec the kind refuses",
            "alice",
            ray("r3", json!(7)),
            false,
            &["spec.workloadTemplate.spec.entrypoint"],
            "CronJob.batch.kronjob.dev \"r3\" is invalid: spec.workloadTemplate.spec.entrypoint: Invalid value: 7: spec.entrypoint in body must be of type string: \"integer\"",
            3,
            2,
        ),
        (
            "a kind of a group the install does not create",
            "alice",
            jobset,
            false,
            &["spec.workloadTemplate.kind"],
            &not_created,
            3,
            2,
        ),
        (
            "a cluster-scoped kind",
            "alice",
            cluster,
            false,
            &["spec.workloadTemplate.kind"],
            "clusterthings.example.com is cluster-scoped",
            4,
            2,
        ),
        (
            "a kind not installed, by whom may create it",
            "alice",
            gadget.clone(),
            true,
            &[],
            "",
            5,
            3,
        ),
        (
            "a kind not installed, by whom may not",
            "bob",
            gadget,
            false,
            &["spec.workloadTemplate"],
            "User \"bob\" may not create gadgets.absent.example.com",
            5,
            4,
        ),
    ];
    for (what, user, object, allowed, fields, message, sent, asked) in cases {
        let response = admit(
            &app,
            VALIDATE_PATH,
            &review_by(user, "CREATE", object, Value::Null),
        )
        .await;
        assert_eq!(response["uid"], UID);
        assert_eq!(response["allowed"], allowed, "{what}: {response}");
        let (got_fields, got_message) = refusal(&response);
        assert_eq!(got_fields, fields, "{what}: {got_message}");
        assert!(got_message.contains(message), "{what}: {got_message}");
        assert_eq!(sim.requests().len(), sent, "{what}: {:?}", sim.requests());
        assert_eq!(api.asked().len(), asked, "{what}");
    }
    // The one accepted while its kind is not installed says why it waits.
    let warnings = |response: &Value| response["warnings"].clone();
    let gadget = workload_cronjob("g2", "absent.example.com/v1", "Gadget", json!({"size": 2}));
    let response = admit(
        &app,
        VALIDATE_PATH,
        &review_by("alice", "CREATE", gadget, Value::Null),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        warnings(&response),
        json!([format!(
            "spec.workloadTemplate: the API server serves no kind Gadget in absent.example.com/v1: the CronJob waits (Ready=False, {}) until its CRD is installed",
            kronjob::controller::cronjob::status::reason::WORKLOAD_KIND_NOT_FOUND
        )])
    );
    assert!(
        warnings(
            &admit(
                &app,
                VALIDATE_PATH,
                &review_by("alice", "CREATE", ray("r4", json!("x")), Value::Null)
            )
            .await
        )
        .is_null()
    );
    // The access review asked: the whole user, create, the kind's resource, the namespace.
    let first = serde_json::to_value(&api.asked()[0]).expect("json");
    assert_eq!(
        first,
        json!({"user": "alice", "uid": "uid-alice", "groups": ["system:authenticated"],
            "resourceAttributes": {"group": "ray.io", "version": "v1", "resource": "rayjobs",
                "verb": "create", "namespace": NS}})
    );
    // The dry runs: the object the template makes, as its kind, in the CronJob's namespace.
    let dry_runs: Vec<_> = sim.requests().into_iter().filter(|r| r.dry_run).collect();
    assert_eq!(dry_runs.len(), 3, "{dry_runs:?}");
    assert!(
        dry_runs
            .iter()
            .all(|r| r.key() == "create rayjobs (dry run)" && r.namespace.as_deref() == Some(NS))
    );
    assert!(sim.list(&rayjobs(), None).is_empty(), "nothing stored");
    let text = metrics_text(&registry);
    for line in [
        "kronjob_webhook_access_reviews_total{result=\"allowed\"} 2",
        "kronjob_webhook_access_reviews_total{result=\"denied\"} 2",
        "kronjob_webhook_dry_run_total{result=\"invalid\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn a_workload_is_never_allowed_when_its_authors_access_cannot_be_checked() {
    let sim = workload_sim();
    let mut grants = Grants::new(sim.client(), &[("alice", "rayjobs.ray.io", NS)]);
    grants.failing = true;
    let (app, registry) = workload_app(Arc::new(grants), WORKLOAD_KINDS);
    for name in ["r1", "r2"] {
        let object = ray(name, json!("python x.py"));
        let response = admit(
            &app,
            VALIDATE_PATH,
            &review_by("alice", "CREATE", object, Value::Null),
        )
        .await;
        assert_eq!(response["allowed"], false, "{response}");
        assert_eq!(response["status"]["code"], 503);
        let (fields, message) = refusal(&response);
        assert_eq!(fields, ["spec.workloadTemplate"]);
        assert!(
            message.contains(
                "could not check that User \"alice\" may create rayjobs.ray.io in namespace \"ns\""
            ) && message.contains("retry"),
            "{message}"
        );
    }
    // No dry run of a CronJob whose author is not known to be allowed.
    assert!(
        sim.requests().iter().all(|r| !r.dry_run),
        "{:?}",
        sim.requests()
    );
    assert!(
        metrics_text(&registry)
            .contains("kronjob_webhook_access_reviews_total{result=\"unchecked\"} 2")
    );
    // Nor when the kind cannot be looked up; nor for a review naming nobody.
    sim.fail_next(Fault::internal_error().path("/apis/ray.io/v1").times(10));
    let api = Arc::new(Grants::new(
        sim.client(),
        &[("alice", "rayjobs.ray.io", NS)],
    ));
    let (app, _) = workload_app(api.clone(), WORKLOAD_KINDS);
    let response = admit(
        &app,
        VALIDATE_PATH,
        &review_by("alice", "CREATE", ray("r3", json!("x")), Value::Null),
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        refusal(&response)
            .1
            .contains("could not look up ray.io/v1 RayJob"),
        "{response}"
    );
    let mut nobody = review("CREATE", ray("r4", json!("x")), Value::Null);
    nobody["request"]["userInfo"] = json!({});
    let (app, _) = workload_app(
        Arc::new(Grants::new(workload_sim().client(), &[])),
        WORKLOAD_KINDS,
    );
    let response = admit(&app, VALIDATE_PATH, &nobody).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(refusal(&response).1.contains("names no user"), "{response}");
}

#[tokio::test]
async fn an_unchanged_workload_template_is_not_judged_again_and_a_changed_one_is() {
    let sim = workload_sim();
    let api = Arc::new(Grants::new(
        sim.client(),
        &[("alice", "rayjobs.ray.io", NS)],
    ));
    let (app, _) = workload_app(api.clone(), WORKLOAD_KINDS);
    // Stored earlier by alice; bob may only suspend it.
    let stored = {
        let mut o = ray("r", json!("python x.py"));
        o["metadata"]["uid"] = json!("0b1c1c6e-4f0b-4bde-8f3e-6a1d8b9e2c10");
        o
    };
    let mut suspended = stored.clone();
    suspended["spec"]["suspend"] = json!(true);
    let response = admit(
        &app,
        VALIDATE_PATH,
        &review_by("bob", "UPDATE", suspended, stored.clone()),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(sim.requests().is_empty() && api.asked().is_empty());
    // Changing the template is judged as bob's.
    let mut changed = stored.clone();
    changed["spec"]["workloadTemplate"]["spec"]["entrypoint"] = json!("python y.py");
    let response = admit(
        &app,
        VALIDATE_PATH,
        &review_by("bob", "UPDATE", changed.clone(), stored.clone()),
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        refusal(&response)
            .1
            .contains("User \"bob\" may not create rayjobs.ray.io")
    );
    let response = admit(
        &app,
        VALIDATE_PATH,
        &review_by("alice", "UPDATE", changed, stored.clone()),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    // From a Job template to a workload: judged.
    let job = with_env_name(cronjob("r"), "A");
    let response = admit(
        &app,
        VALIDATE_PATH,
        &review_by("bob", "UPDATE", stored, job),
    )
    .await;
    assert_eq!(response["allowed"], false, "{response}");
}

#[tokio::test]
async fn a_job_template_is_refused_where_the_install_creates_no_jobs() {
    let sim = ApiSim::new(CostModel::free());
    let api = Arc::new(Grants::new(sim.client(), &[]));
    let (app, _) = workload_app(api, "rayjobs.ray.io");
    let response = admit(&app, VALIDATE_PATH, &create(new_cronjob("hello"))).await;
    assert_eq!(response["allowed"], false, "{response}");
    let (fields, message) = refusal(&response);
    assert_eq!(fields, ["spec.jobTemplate"]);
    assert!(
        message.ends_with("spec.jobTemplate: Forbidden: this install of kronjob does not create jobs.batch (--workload-kinds is rayjobs.ray.io)"),
        "{message}"
    );
    assert!(sim.requests().is_empty(), "refused before any dry run");
}

/// Over real TLS, as the API server calls it: a kind the install does not create, a user the
/// access review refuses, a kind not installed (allowed, with a warning) and a spec the kind
/// refuses, each answered with the CronJob's own field.
#[tokio::test]
async fn workload_cronjobs_over_tls_are_refused_or_warned_about_on_their_own_fields() {
    let pki = tls_support::Pki::new();
    let dir = tls_support::temp_dir("workloads");
    pki.write_leaf(&dir, "localhost");
    let sim = workload_sim();
    let api = Arc::new(Grants::new(
        sim.client(),
        &[
            ("alice", "rayjobs.ray.io", NS),
            ("alice", "gadgets.absent.example.com", NS),
        ],
    ));
    let mut env = kronjob::webhook::Env::local();
    env.api = Some(api.clone());
    env.workload_kinds = WORKLOAD_KINDS.parse().expect("kinds");
    let (addr, stop, server) =
        tls_support::serve_dir_with(&dir, Duration::from_millis(100), env).await;
    let client = tls_support::Client::new(&pki.ca_pem);
    let jobset = workload_cronjob("js", "jobset.x-k8s.io/v1alpha2", "JobSet", json!({}));
    let gadget = workload_cronjob("g", "absent.example.com/v1", "Gadget", json!({}));
    let cases: Vec<OverTls> = vec![
        (
            "alice",
            jobset,
            false,
            &["spec.workloadTemplate.kind"],
            "does not create jobsets.jobset.x-k8s.io",
            "",
        ),
        (
            "bob",
            ray("r1", json!("x")),
            false,
            &["spec.workloadTemplate"],
            "User \"bob\" may not create rayjobs.ray.io in namespace \"ns\"",
            "",
        ),
        ("alice", gadget, true, &[], "", "WorkloadKindNotFound"),
        (
            "alice",
            ray("r2", json!(null)),
            false,
            &["spec.workloadTemplate.spec.entrypoint"],
            "spec.workloadTemplate.spec.entrypoint: Invalid value",
            "",
        ),
        ("alice", ray("r3", json!("x")), true, &[], "", ""),
    ];
    for (user, object, allowed, fields, message, warning) in cases {
        let body = review_by(user, "CREATE", object, Value::Null).to_string();
        let (status, answer) = client.post(addr, "localhost", VALIDATE_PATH, body).await;
        assert_eq!(status, 200);
        let answer: Value = serde_json::from_slice(&answer).expect("JSON");
        let response = &answer["response"];
        assert_eq!(response["uid"], UID);
        assert_eq!(response["allowed"], allowed, "{user}: {response}");
        let (got_fields, got_message) = refusal(response);
        assert_eq!(got_fields, fields, "{got_message}");
        assert!(got_message.contains(message), "{got_message}");
        let warnings = response["warnings"].to_string();
        assert_eq!(
            !warning.is_empty(),
            response.get("warnings").is_some_and(|w| !w.is_null()),
            "{warnings}"
        );
        assert!(warnings.contains(warning), "{warnings}");
    }
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(15), server)
        .await
        .expect("server stops")
        .expect("task")
        .expect("clean shutdown");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_workload_template_that_cannot_be_judged_is_refused() {
    let sim = workload_sim();
    let api = Arc::new(Grants::new(
        sim.client(),
        &[("alice", "rayjobs.ray.io", NS)],
    ));
    let (app, _) = workload_app(api.clone(), WORKLOAD_KINDS);
    // No namespace in the request nor in the object: whose namespace would alice create in?
    let mut object = ray("r", json!("x"));
    object["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("namespace");
    let mut nowhere = review_by("alice", "CREATE", object, Value::Null);
    nowhere["request"]
        .as_object_mut()
        .expect("request")
        .remove("namespace");
    let response = admit(&app, VALIDATE_PATH, &nowhere).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        refusal(&response).1.contains("names no namespace"),
        "{response}"
    );
    assert!(api.asked().is_empty() && sim.requests().is_empty());
    // A Job template in the same request is left to the local rules, as before.
    let mut job = new_cronjob("j");
    job["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("namespace");
    let mut review = create(job);
    review["request"]
        .as_object_mut()
        .expect("request")
        .remove("namespace");
    let response = admit(&app, VALIDATE_PATH, &review).await;
    assert_eq!(response["allowed"], true, "{response}");
}
