//! Cost of answering one AdmissionReview: the pure decision ([`admit`]) and the full router
//! (body reading, layers, serialisation), without TLS or sockets.

use axum::body::Body;
use axum::http::Request;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt;
use kronjob::webhook::admission::{Endpoint, MUTATE_PATH, VALIDATE_PATH, admit};
use kronjob::webhook::{WebhookMetrics, router};
use serde_json::{Value, json};
use tower::ServiceExt;

#[path = "../tests/support/admission.rs"]
#[allow(dead_code)]
mod admission;

fn review(schedule: &str) -> Vec<u8> {
    let object = json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "schedule": schedule,
            "timeZone": "America/New_York",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox", "command": ["date"]}]
            }}}}
        }
    });
    admission::review("CREATE", object, Value::Null)
        .to_string()
        .into_bytes()
}

fn bench(c: &mut Criterion) {
    let valid = review("H/10 9-17 * * MON-FRI");
    let invalid = review("61 * * * *");
    c.bench_function("admit/mutate", |b| {
        b.iter(|| admit(Endpoint::Mutate, std::hint::black_box(&valid)))
    });
    c.bench_function("admit/validate_valid", |b| {
        b.iter(|| admit(Endpoint::Validate, std::hint::black_box(&valid)))
    });
    c.bench_function("admit/validate_invalid", |b| {
        b.iter(|| admit(Endpoint::Validate, std::hint::black_box(&invalid)))
    });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let app = router(WebhookMetrics::new(&mut Default::default()));
    for (name, path) in [
        ("router/mutate", MUTATE_PATH),
        ("router/validate", VALIDATE_PATH),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let request = Request::post(path)
                        .body(Body::from(valid.clone()))
                        .expect("request");
                    let response = app.clone().oneshot(request).await.expect("infallible");
                    response.into_body().collect().await.expect("body")
                })
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
