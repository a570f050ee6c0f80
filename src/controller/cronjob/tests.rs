//! Mock-API tests (tower-test, controller-rs `ApiServerVerifier` style): exact requests of a
//! reconcile, each expected call with a timeout so a missing call fails instead of hanging.

use std::collections::BTreeMap;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use k8s_openapi::api::batch::v1::{JobSpec, JobTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::client::Body;
use serde_json::{Value, json};

use super::*;
use crate::api::{ConcurrencyPolicy, CronJobSpec, CronJobStatus};
use crate::clock::FixedClock;
use crate::controller::index::owner_index;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

fn t(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}
const NOW: &str = "2016-05-19T10:01:00Z";
const SLOT_JOB: &str = "cj-24394200";

fn cronjob() -> CronJob {
    let mut cj = CronJob::new(
        "cj",
        CronJobSpec {
            schedule: "0 * * * *".into(),
            time_zone: None,
            starting_deadline_seconds: None,
            concurrency_policy: ConcurrencyPolicy::Allow,
            suspend: Some(false),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(BTreeMap::from([("team".into(), "a".into())])),
                    ..Default::default()
                }),
                spec: Some(JobSpec::default()),
            },
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(1),
        },
    );
    cj.metadata.namespace = Some("ns".into());
    cj.metadata.uid = Some("cj-uid".into());
    cj.metadata.generation = Some(1);
    cj.metadata.creation_timestamp = Some(Time(t("2016-05-19T09:59:00Z")));
    cj
}

fn job(name: &str, uid: &str, owner_uid: &str) -> Job {
    let mut j =
        plan::job_from_template(&cronjob(), name.into(), ("k", "v".into()), None).expect("job");
    j.metadata.uid = Some(uid.into());
    if let Some(refs) = j.metadata.owner_references.as_mut() {
        refs[0].uid = owner_uid.into();
    }
    j
}

struct Verifier(Handle);

impl Verifier {
    async fn next(
        &mut self,
    ) -> (
        Request<Body>,
        tower_test::mock::SendResponse<Response<Body>>,
    ) {
        tokio::time::timeout(Duration::from_secs(1), self.0.next_request())
            .await
            .expect("timed out waiting for an API call")
            .expect("service dropped")
    }

    async fn expect(
        &mut self,
        method: &str,
        path: &str,
    ) -> (Value, tower_test::mock::SendResponse<Response<Body>>) {
        let (req, send) = self.next().await;
        assert_eq!(req.method().as_str(), method, "method of {}", req.uri());
        assert_eq!(req.uri().path(), path);
        let bytes = req.into_body().collect_bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("json body")
        };
        (body, send)
    }

    /// An Event on the CronJob with this reason.
    async fn expect_event(&mut self, reason: &str, type_: &str) {
        let (body, send) = self
            .expect("POST", "/apis/events.k8s.io/v1/namespaces/ns/events")
            .await;
        assert_eq!(body["reason"], reason);
        assert_eq!(body["type"], type_);
        assert_eq!(body["reportingController"], "kronjob");
        assert_eq!(body["regarding"]["name"], "cj");
        respond(send, StatusCode::CREATED, &body);
    }

    /// The one status write; returns the status sent.
    async fn expect_status_patch(&mut self) -> Value {
        let (body, send) = self
            .expect(
                "PATCH",
                "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/cj/status",
            )
            .await;
        let mut cj = serde_json::to_value(cronjob()).expect("json");
        cj["status"] = body["status"].clone();
        respond(send, StatusCode::OK, &cj);
        body["status"].clone()
    }

    async fn expect_nothing_more(&mut self) {
        let more = tokio::time::timeout(Duration::from_millis(100), self.0.next_request()).await;
        if let Ok(Some((req, _))) = more {
            panic!("unexpected call {} {}", req.method(), req.uri());
        }
    }
}

fn respond(send: tower_test::mock::SendResponse<Response<Body>>, code: StatusCode, body: &Value) {
    let bytes = serde_json::to_vec(body).expect("json");
    send.send_response(
        Response::builder()
            .status(code)
            .body(Body::from(bytes))
            .expect("response"),
    );
}

fn status_error(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": reason})
}

fn context(jobs: Vec<Job>) -> (Arc<Context>, Verifier) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(svc, "default");
    let (index, mut writer) = owner_index();
    writer.apply_watcher_event(&watcher::Event::Init);
    for j in jobs {
        writer.apply_watcher_event(&watcher::Event::InitApply(j));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let ctx = Context::new(
        client,
        Arc::new(FixedClock::new(t(NOW))),
        ReconcilerMetrics::unregistered(),
        PlanConfig::default(),
        index,
    );
    (Arc::new(ctx), Verifier(handle))
}

async fn finish(task: tokio::task::JoinHandle<Result<Action, Error>>) -> Result<Action, Error> {
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .expect("reconcile did not finish")
        .expect("join")
}

#[tokio::test]
async fn creates_the_due_job_then_writes_status_once() {
    let (ctx, mut api) = context(vec![]);
    let task = tokio::spawn(reconcile(Arc::new(cronjob()), ctx.clone()));
    let (body, send) = api
        .expect("POST", "/apis/batch/v1/namespaces/ns/jobs")
        .await;
    assert_eq!(body["metadata"]["name"], SLOT_JOB);
    assert_eq!(body["metadata"]["labels"]["team"], "a");
    assert_eq!(
        body["metadata"]["labels"]["batch.kronjob.dev/cronjob"],
        "cj"
    );
    assert_eq!(
        body["metadata"]["annotations"]["batch.kronjob.dev/scheduled-at"],
        "2016-05-19T10:00:00Z"
    );
    let owner = &body["metadata"]["ownerReferences"][0];
    assert_eq!(owner["apiVersion"], "batch.kronjob.dev/v1");
    assert_eq!(owner["kind"], "CronJob");
    assert_eq!(owner["uid"], "cj-uid");
    assert_eq!(owner["controller"], true);
    assert_eq!(owner["blockOwnerDeletion"], true);
    let mut created = body.clone();
    created["metadata"]["uid"] = json!("new-uid");
    created["metadata"]["creationTimestamp"] = json!("2016-05-19T10:00:02Z");
    respond(send, StatusCode::CREATED, &created);
    api.expect_event("SuccessfulCreate", "Normal").await;
    let status = api.expect_status_patch().await;
    assert_eq!(status["active"][0]["name"], SLOT_JOB);
    assert_eq!(status["active"][0]["uid"], "new-uid");
    assert_eq!(status["activeCount"], 1);
    assert_eq!(status["lastScheduleTime"], "2016-05-19T10:00:00Z");
    assert_eq!(status["nextScheduleTime"], "2016-05-19T11:00:00Z");
    assert_eq!(status["conditions"][0]["reason"], "Scheduled");
    assert!(status["lastSuccessfulTime"].is_null());
    let action = finish(task).await.expect("reconcile");
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(59 * 60) + plan::NEXT_SCHEDULE_DELTA)
    );
    api.expect_nothing_more().await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register(
        "skew_seconds",
        "skew",
        ctx.metrics.job_creation_skew.clone(),
    );
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
    // From the clock (10:01:00) to the slot (10:00:00), not from the whole-second
    // creationTimestamp the API server returned (10:00:02).
    assert!(out.contains("skew_seconds_sum 60.0"), "{out}");
    assert!(out.contains("skew_seconds_count 1"), "{out}");
}

#[tokio::test]
async fn already_exists_and_owned_is_adopted() {
    let (ctx, mut api) = context(vec![]);
    let task = tokio::spawn(reconcile(Arc::new(cronjob()), ctx));
    let (_, send) = api
        .expect("POST", "/apis/batch/v1/namespaces/ns/jobs")
        .await;
    respond(
        send,
        StatusCode::CONFLICT,
        &status_error(409, "AlreadyExists"),
    );
    let (_, send) = api
        .expect(
            "GET",
            &format!("/apis/batch/v1/namespaces/ns/jobs/{SLOT_JOB}"),
        )
        .await;
    respond(
        send,
        StatusCode::OK,
        &serde_json::to_value(job(SLOT_JOB, "old-uid", "cj-uid")).expect("json"),
    );
    let status = api.expect_status_patch().await;
    assert_eq!(status["active"][0]["uid"], "old-uid");
    assert_eq!(status["lastScheduleTime"], "2016-05-19T10:00:00Z");
    finish(task).await.expect("reconcile");
    api.expect_nothing_more().await;
}

#[tokio::test]
async fn already_exists_not_owned_warns_and_keeps_active() {
    let (ctx, mut api) = context(vec![]);
    let task = tokio::spawn(reconcile(Arc::new(cronjob()), ctx));
    let (_, send) = api
        .expect("POST", "/apis/batch/v1/namespaces/ns/jobs")
        .await;
    respond(
        send,
        StatusCode::CONFLICT,
        &status_error(409, "AlreadyExists"),
    );
    let (_, send) = api
        .expect(
            "GET",
            &format!("/apis/batch/v1/namespaces/ns/jobs/{SLOT_JOB}"),
        )
        .await;
    respond(
        send,
        StatusCode::OK,
        &serde_json::to_value(job(SLOT_JOB, "x", "someone-else")).expect("json"),
    );
    api.expect_event("FailedCreate", "Warning").await;
    let status = api.expect_status_patch().await;
    assert_eq!(status["active"], json!([]));
    assert!(status["lastScheduleTime"].is_null());
    finish(task).await.expect("reconcile");
    api.expect_nothing_more().await;
}

#[tokio::test]
async fn replace_deletes_active_in_background_then_creates() {
    let running = job("cj-24394140", "run-uid", "cj-uid");
    let mut cj = cronjob();
    cj.spec.concurrency_policy = ConcurrencyPolicy::Replace;
    cj.status = Some(CronJobStatus {
        active: vec![status::job_ref(&running)],
        active_count: 1,
        last_schedule_time: Some(Time(t("2016-05-19T09:00:00Z"))),
        ..Default::default()
    });
    let (ctx, mut api) = context(vec![running.clone()]);
    let task = tokio::spawn(reconcile(Arc::new(cj), ctx));
    let (body, send) = api
        .expect("DELETE", "/apis/batch/v1/namespaces/ns/jobs/cj-24394140")
        .await;
    assert_eq!(body["propagationPolicy"], "Background");
    assert_eq!(body["preconditions"]["uid"], "run-uid");
    respond(
        send,
        StatusCode::OK,
        &serde_json::to_value(&running).expect("json"),
    );
    api.expect_event("SuccessfulDelete", "Normal").await;
    let (body, send) = api
        .expect("POST", "/apis/batch/v1/namespaces/ns/jobs")
        .await;
    assert_eq!(body["metadata"]["name"], SLOT_JOB);
    let mut created = body.clone();
    created["metadata"]["uid"] = json!("new-uid");
    respond(send, StatusCode::CREATED, &created);
    api.expect_event("SuccessfulCreate", "Normal").await;
    let status = api.expect_status_patch().await;
    assert_eq!(status["activeCount"], 1);
    assert_eq!(status["active"][0]["uid"], "new-uid");
    finish(task).await.expect("reconcile");
    api.expect_nothing_more().await;
}

fn completed(name: &str, uid: &str, end: &str) -> Job {
    let mut j = job(name, uid, "cj-uid");
    j.status = Some(k8s_openapi::api::batch::v1::JobStatus {
        start_time: Some(Time(t(end))),
        completion_time: Some(Time(t(end))),
        conditions: Some(vec![k8s_openapi::api::batch::v1::JobCondition {
            type_: "Complete".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    j
}

#[tokio::test]
async fn history_beyond_limit_is_deleted_and_status_written_once() {
    let mut cj = cronjob();
    cj.spec.successful_jobs_history_limit = Some(1);
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T10:00:00Z"))),
        ..Default::default()
    });
    let old = completed("cj-old", "u-old", "2016-05-19T08:00:05Z");
    let new = completed("cj-new", "u-new", "2016-05-19T09:00:05Z");
    let (ctx, mut api) = context(vec![old, new]);
    let task = tokio::spawn(reconcile(Arc::new(cj), ctx));
    let (body, send) = api
        .expect("DELETE", "/apis/batch/v1/namespaces/ns/jobs/cj-old")
        .await;
    assert_eq!(body["propagationPolicy"], "Background");
    respond(
        send,
        StatusCode::OK,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    );
    api.expect_event("SuccessfulDelete", "Normal").await;
    let status = api.expect_status_patch().await;
    assert_eq!(status["lastSuccessfulTime"], "2016-05-19T09:00:05Z");
    finish(task).await.expect("reconcile");
    api.expect_nothing_more().await;
}

#[tokio::test]
async fn no_patch_when_nothing_changed() {
    let mut cj = cronjob();
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2016-05-19T10:00:00Z"))),
        ..Default::default()
    });
    let settled = plan::plan(&cj, &[], t(NOW), &PlanConfig::default());
    cj.status = Some(settled.status);
    let (ctx, mut api) = context(vec![]);
    let task = tokio::spawn(reconcile(Arc::new(cj), ctx));
    api.expect_nothing_more().await;
    finish(task).await.expect("reconcile");
}

#[tokio::test]
async fn transient_errors_back_off_and_reset() {
    let (ctx, mut api) = context(vec![]);
    let cj = Arc::new(cronjob());
    let task = tokio::spawn(reconcile(cj.clone(), ctx.clone()));
    let (_, send) = api
        .expect("POST", "/apis/batch/v1/namespaces/ns/jobs")
        .await;
    respond(
        send,
        StatusCode::INTERNAL_SERVER_ERROR,
        &status_error(500, "InternalError"),
    );
    api.expect_event("FailedCreate", "Warning").await;
    // The status still gets written (conditions, nextScheduleTime) but not lastScheduleTime.
    let status = api.expect_status_patch().await;
    assert!(status["lastScheduleTime"].is_null());
    let err = finish(task).await.expect_err("error");
    assert_eq!(err.category(), "api_server");
    let first = error_policy(cj.clone(), &err, ctx.clone());
    let second = error_policy(cj.clone(), &err, ctx.clone());
    assert_ne!(first, Action::await_change());
    assert_ne!(first, second, "backoff grows");
    assert_eq!(
        ctx.failures().get(&ObjectRef::from_obj(cj.as_ref())),
        Some(&2)
    );
}

#[test]
fn backoff_grows_with_jitter_and_caps() {
    assert!(backoff(0) >= Duration::from_secs(1) && backoff(0) < Duration::from_secs(2));
    assert!(backoff(3) >= Duration::from_secs(8) && backoff(3) < Duration::from_secs(16));
    assert!(backoff(30) <= Duration::from_secs(600));
}

#[test]
fn ttl_flag_parses_units() {
    assert_eq!(parse_ttl("30m"), Ok(1800));
    assert_eq!(parse_ttl("24h"), Ok(86400));
    assert_eq!(parse_ttl("3600s"), Ok(3600));
    assert!(parse_ttl("1.5s").is_err(), "TTLs are whole seconds");
    assert!(parse_ttl("1000000h").is_err(), "beyond i32 seconds");
    assert_eq!(parse_ttl("3600"), Ok(3600));
    assert!(parse_ttl("3x").is_err());
    assert!(parse_ttl("").is_err());
}

#[tokio::test]
async fn backoff_counters_of_deleted_cronjobs_are_forgotten() {
    let (ctx, _api) = context(vec![]);
    let kept = ObjectRef::<CronJob>::new("kept").within("ns");
    let gone = ObjectRef::<CronJob>::new("gone").within("ns");
    ctx.failures().insert(kept.clone(), 3);
    ctx.failures().insert(gone.clone(), 5);
    ctx.forget_gone(|r| r.name == "kept");
    assert_eq!(ctx.failures().get(&kept), Some(&3));
    assert!(!ctx.failures().contains_key(&gone));
}
