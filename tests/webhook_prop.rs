//! Property: whatever is posted to the webhook, it never panics and always answers with a
//! well-formed HTTP response: 200 with an `AdmissionReview` holding a `response`, or 400 with
//! a JSON error.

use std::sync::LazyLock;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kronjob::webhook::admission::{MUTATE_PATH, VALIDATE_PATH};
use kronjob::webhook::{WebhookMetrics, router};
use proptest::prelude::*;
use serde_json::Value;
use tower::ServiceExt;

#[path = "support/admission.rs"]
mod admission;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
});
static METRICS: LazyLock<WebhookMetrics> =
    LazyLock::new(|| WebhookMetrics::new(&mut Default::default()));

fn app() -> Router {
    router(METRICS.clone())
}

fn post(path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    RUNTIME.block_on(async {
        let request = Request::post(path).body(Body::from(body)).expect("request");
        let response = app().oneshot(request).await.expect("infallible");
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, bytes.to_vec())
    })
}

fn check_well_formed(status: StatusCode, body: &[u8]) -> Result<(), TestCaseError> {
    let answer: Value = serde_json::from_slice(body)
        .map_err(|e| TestCaseError::fail(format!("answer is not JSON: {e}")))?;
    match status {
        StatusCode::OK => {
            prop_assert_eq!(&answer["kind"], "AdmissionReview");
            prop_assert!(answer["response"]["allowed"].is_boolean(), "{}", answer);
        }
        StatusCode::BAD_REQUEST => prop_assert!(answer["error"].is_string(), "{}", answer),
        other => prop_assert!(false, "unexpected status {other}: {answer}"),
    }
    Ok(())
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("*/5 * * * *"),
            Just("61 * * * *"),
            Just("@every 1h"),
            Just("Europe/Paris"),
            Just("Local"),
            Just("H H(0-3) * * *"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("spec".to_string()),
                    Just("metadata".to_string()),
                    Just("name".to_string()),
                    Just("schedule".to_string()),
                    Just("timeZone".to_string()),
                    Just("jobTemplate".to_string()),
                    Just("concurrencyPolicy".to_string()),
                    "[a-zA-Z]{1,8}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_get_a_well_formed_answer(body in prop::collection::vec(any::<u8>(), 0..512)) {
        for path in [MUTATE_PATH, VALIDATE_PATH] {
            let (status, answer) = post(path, body.clone());
            check_well_formed(status, &answer)?;
        }
    }

    #[test]
    fn arbitrary_json_gets_a_well_formed_answer(value in arb_json()) {
        for path in [MUTATE_PATH, VALIDATE_PATH] {
            let (status, answer) = post(path, value.to_string().into_bytes());
            check_well_formed(status, &answer)?;
        }
    }

    #[test]
    fn arbitrary_objects_in_a_valid_review_are_answered_with_the_uid(
        object in arb_json(),
        spec in arb_json(),
        old in arb_json(),
        update in any::<bool>(),
    ) {
        let mut object = object;
        if let Some(map) = object.as_object_mut() {
            map.insert("spec".into(), spec);
        }
        let review = admission::review(if update { "UPDATE" } else { "CREATE" }, object, old);
        for path in [MUTATE_PATH, VALIDATE_PATH] {
            let (status, answer) = post(path, review.to_string().into_bytes());
            prop_assert_eq!(status, StatusCode::OK);
            check_well_formed(status, &answer)?;
            let answer: Value = serde_json::from_slice(&answer).expect("checked");
            prop_assert_eq!(&answer["response"]["uid"], admission::REVIEW_UID);
        }
    }
}
