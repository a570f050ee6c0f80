//! Reconcile tests against a mocked API server (controller-rs `ApiServerVerifier` style): every
//! request is checked for method, path and body, and the verifier fails if an expected call
//! never comes or an unexpected one does.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::*;
use crate::clock::FixedClock;

type ApiHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

const NOW: &str = "2024-03-10T12:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

/// One expected request and the reply the API server would have given.
#[derive(Debug)]
struct Expect {
    method: Method,
    /// Exact path, or a prefix when it ends with `*`.
    path: &'static str,
    /// Exact JSON body, or `None` for no body.
    body: Option<Value>,
    /// Only these keys must match (for bodies with generated fields, such as Events).
    body_includes: Option<Value>,
    status: StatusCode,
    reply: Value,
}

impl Expect {
    fn get(path: &'static str, reply: Value) -> Self {
        Self {
            method: Method::GET,
            path,
            body: None,
            body_includes: None,
            status: StatusCode::OK,
            reply,
        }
    }

    fn delete(path: &'static str, body: Value) -> Self {
        Self {
            method: Method::DELETE,
            path,
            body: Some(body),
            body_includes: None,
            // What the API server answers for a Foreground delete: the object, now terminating.
            status: StatusCode::OK,
            reply: json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}),
        }
    }

    fn fails(mut self, status: StatusCode, reason: &str) -> Self {
        self.status = status;
        self.reply = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("mock {reason}"), "reason": reason, "code": status.as_u16(),
        });
        self
    }
}

/// Serve `script` in order, then assert that no other request arrives before every client is
/// dropped. Times out if an expected call never comes.
fn verifier(mut handle: ApiHandle, script: Vec<Expect>) -> JoinHandle<()> {
    tokio::spawn(async move {
        for expect in script {
            let (request, send) =
                tokio::time::timeout(Duration::from_secs(1), handle.next_request())
                    .await
                    .unwrap_or_else(|_| {
                        panic!("timed out waiting for {} {}", expect.method, expect.path)
                    })
                    .unwrap_or_else(|| {
                        panic!("client dropped before {} {}", expect.method, expect.path)
                    });
            assert_eq!(request.method(), expect.method, "method");
            match expect.path.strip_suffix('*') {
                Some(prefix) => assert!(
                    request.uri().path().starts_with(prefix),
                    "path {}",
                    request.uri()
                ),
                None => assert_eq!(request.uri().path(), expect.path, "path"),
            }
            assert_eq!(request.uri().query().unwrap_or(""), "", "query");
            let bytes = request.into_body().collect_bytes().await.expect("body");
            match (&expect.body, &expect.body_includes) {
                (Some(want), _) => {
                    let got: Value = serde_json::from_slice(&bytes).expect("JSON body");
                    assert_eq!(&got, want, "body of {} {}", expect.method, expect.path);
                }
                (None, Some(want)) => {
                    let got: Value = serde_json::from_slice(&bytes).expect("JSON body");
                    assert_json_diff::assert_json_include!(actual: got, expected: want.clone());
                }
                (None, None) => assert!(bytes.is_empty(), "unexpected body"),
            }
            let response = Response::builder()
                .status(expect.status)
                .body(Body::from(
                    serde_json::to_vec(&expect.reply).expect("reply JSON"),
                ))
                .expect("response");
            send.send_response(response);
        }
        let extra = tokio::time::timeout(Duration::from_secs(1), handle.next_request())
            .await
            .expect("the client must be dropped after the scenario");
        if let Some((request, _)) = extra {
            panic!("unexpected request {} {}", request.method(), request.uri());
        }
    })
}

struct Harness {
    ctx: Arc<Context>,
    clock: Arc<FixedClock>,
    registry: Registry,
    handle: Option<ApiHandle>,
}

impl Harness {
    fn new(scope: TtlScope) -> Self {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let clock = Arc::new(FixedClock::new(ts(NOW)));
        let mut registry = Registry::default();
        let metrics = TtlMetrics::new(&mut registry);
        let ctx = Arc::new(Context::new(client, clock.clone(), metrics, scope));
        Self {
            ctx,
            clock,
            registry,
            handle: Some(handle),
        }
    }

    /// Start verifying `script`; call once.
    fn expect(&mut self, script: Vec<Expect>) -> JoinHandle<()> {
        verifier(self.handle.take().expect("expect() called once"), script)
    }

    /// Drop the client and wait for the verifier's verdict.
    async fn finish(self, verifier: JoinHandle<()>) -> String {
        let Self { ctx, registry, .. } = self;
        drop(ctx);
        tokio::time::timeout(Duration::from_secs(5), verifier)
            .await
            .expect("verifier finishes")
            .expect("verifier passed");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        text
    }
}

const JOB_PATH: &str = "/apis/batch/v1/namespaces/ns/jobs/name";
const POD_PATH: &str = "/api/v1/namespaces/ns/pods/name";

/// A kronjob-owned Job named `ns/name` that completed at `finished` with `ttl`.
fn job_json(uid: &str, ttl: i32, finished: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": "name", "namespace": "ns", "uid": uid, "resourceVersion": "1",
            "labels": {LABEL_CRONJOB: "cron"},
            "ownerReferences": [{"apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
                                 "name": "cron", "uid": "cron-uid", "controller": true}],
        },
        "spec": {"ttlSecondsAfterFinished": ttl, "template": {}},
        "status": {"conditions": [{"type": "Complete", "status": "True",
                                    "lastTransitionTime": finished}]},
    })
}

fn job(value: Value) -> Job {
    serde_json::from_value(value).expect("job JSON")
}

fn pod_json(uid: &str, ttl: &str, finished: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "name", "namespace": "ns", "uid": uid,
                     "annotations": {ANNOTATION_POD_TTL: ttl}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [{
            "name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "finishedAt": finished}}}]},
    })
}

fn pod(value: Value) -> Pod {
    serde_json::from_value(value).expect("pod JSON")
}

fn foreground(uid: &str) -> Value {
    json!({"propagationPolicy": "Foreground", "preconditions": {"uid": uid}})
}

#[tokio::test]
async fn expired_job_is_read_fresh_then_deleted_foreground_with_the_fresh_uid() {
    let mut h = Harness::new(TtlScope::Owned);
    // Expired 3 s ago; the fresh copy is a re-created Job of the same name, also expired.
    h.clock.set(ts("2024-03-10T12:00:03Z"));
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH, job_json("fresh-uid", 60, "2024-03-10T11:59:00Z")),
        Expect::delete(JOB_PATH, foreground("fresh-uid")),
    ]);
    let cached = job(job_json("cached-uid", 60, "2024-03-10T11:59:00Z"));
    let action = reconcile::<Job>(Arc::new(cached), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    let metrics = h.finish(verifier).await;
    assert!(
        metrics.contains(r#"kronjob_ttl_deletions_total{kind="job"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"kronjob_ttl_deletion_delay_seconds_sum{kind="job"} 3.0"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"kronjob_ttl_deletion_delay_seconds_bucket{le="3.2",kind="job"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"kronjob_ttl_deletion_delay_seconds_bucket{le="1.6",kind="job"} 0"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn zero_ttl_deletes_as_soon_as_finished() {
    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH, job_json("u", 0, NOW)),
        Expect::delete(JOB_PATH, foreground("u")),
    ]);
    let action = reconcile::<Job>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn raised_ttl_on_the_fresh_copy_requeues_for_the_new_remaining_time_without_delete() {
    let mut h = Harness::new(TtlScope::Owned);
    // Cache: TTL 60 s, finished 2 min ago. Server: the user raised it to 1 h.
    let verifier = h.expect(vec![Expect::get(
        JOB_PATH,
        job_json("u", 3600, "2024-03-10T11:58:00Z"),
    )]);
    let cached = job(job_json("u", 60, "2024-03-10T11:58:00Z"));
    let action = reconcile::<Job>(Arc::new(cached), h.ctx.clone()).await;
    assert_eq!(
        action.expect("reconcile"),
        Action::requeue(Duration::from_secs(3600 - 120))
    );
    let metrics = h.finish(verifier).await;
    assert!(
        metrics.contains("kronjob_ttl_deletions_total{kind=\"job\"} 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn not_expired_in_the_cache_means_no_api_call_and_an_exact_requeue() {
    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![]);
    let cached = job(job_json("u", 100, "2024-03-10T11:59:50Z"));
    let action = reconcile::<Job>(Arc::new(cached), h.ctx.clone()).await;
    assert_eq!(
        action.expect("reconcile"),
        Action::requeue(Duration::from_secs(90))
    );
    h.finish(verifier).await;
}

#[tokio::test]
async fn a_very_long_ttl_is_requeued_at_most_half_a_year_ahead() {
    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![]);
    let cached = job(job_json("u", i32::MAX, NOW));
    let action = reconcile::<Job>(Arc::new(cached), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::requeue(MAX_REQUEUE));
    h.finish(verifier).await;
}

#[tokio::test]
async fn get_not_found_is_success_without_delete() {
    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH, json!({})).fails(StatusCode::NOT_FOUND, "NotFound"),
    ]);
    let action = reconcile::<Job>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn fresh_copy_being_deleted_is_left_alone() {
    let mut h = Harness::new(TtlScope::Owned);
    let mut fresh = job_json("u", 0, NOW);
    fresh["metadata"]["deletionTimestamp"] = json!(NOW);
    let verifier = h.expect(vec![Expect::get(JOB_PATH, fresh)]);
    let action = reconcile::<Job>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn delete_uid_conflict_and_not_found_are_success() {
    for (status, reason) in [
        (StatusCode::CONFLICT, "Conflict"),
        (StatusCode::NOT_FOUND, "NotFound"),
    ] {
        let mut h = Harness::new(TtlScope::Owned);
        let verifier = h.expect(vec![
            Expect::get(JOB_PATH, job_json("u", 0, NOW)),
            Expect::delete(JOB_PATH, foreground("u")).fails(status, reason),
        ]);
        let action = reconcile::<Job>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
        assert_eq!(
            action.expect("reconcile"),
            Action::await_change(),
            "{reason}"
        );
        let metrics = h.finish(verifier).await;
        assert!(
            metrics.contains("kronjob_ttl_deletions_total{kind=\"job\"} 0"),
            "{metrics}"
        );
    }
}

#[tokio::test]
async fn delete_server_error_is_retried_with_growing_backoff_and_counted() {
    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH, job_json("u", 0, NOW)),
        Expect::delete(JOB_PATH, foreground("u"))
            .fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
    ]);
    let cached = job(job_json("u", 0, NOW));
    let error = reconcile::<Job>(Arc::new(cached.clone()), h.ctx.clone())
        .await
        .expect_err("500 is an error");
    assert!(matches!(error, Error::Delete { .. }), "{error:?}");
    assert_eq!(error.category(), "delete");
    let delays: Vec<Duration> = (0..8)
        .map(|_| retry_delay(&cached, &error, &h.ctx))
        .collect();
    for (i, d) in delays.iter().enumerate() {
        let base = [5, 10, 20, 40, 80, 160, 250, 250][i] as f64;
        let s = d.as_secs_f64();
        assert!(s >= base && s <= base * 1.2, "attempt {}: {s} s", i + 1);
        assert!(s <= 300.0, "attempt {}: {s} s", i + 1);
    }
    let metrics = h.finish(verifier).await;
    assert!(
        metrics.contains(r#"kronjob_ttl_errors_total{kind="job",category="delete"} 8"#),
        "{metrics}"
    );
}

#[test]
fn backoff_is_5s_to_5min_with_jitter() {
    assert_eq!(backoff_delay(1, 0.0), Duration::from_secs(5));
    assert_eq!(backoff_delay(1, 0.5), Duration::from_millis(5500));
    assert_eq!(backoff_delay(2, 0.0), Duration::from_secs(10));
    assert_eq!(backoff_delay(7, 0.0), Duration::from_secs(250));
    assert_eq!(backoff_delay(u32::MAX, 1.0), Duration::from_secs(300));
    assert_eq!(backoff_delay(0, 0.0), Duration::from_secs(5));
}

#[tokio::test]
async fn a_successful_reconcile_resets_the_backoff() {
    let h = Harness::new(TtlScope::Owned);
    let cached = job(job_json("u", 100, NOW));
    let key = failure_key(&cached);
    assert_eq!(h.ctx.record_failure(key.clone()), 1);
    assert_eq!(h.ctx.record_failure(key.clone()), 2);
    reconcile::<Job>(Arc::new(cached), h.ctx.clone())
        .await
        .expect("waiting is success");
    assert_eq!(h.ctx.record_failure(key), 1);
}

#[tokio::test]
async fn missing_finish_time_is_an_error_without_api_calls() {
    let mut h = Harness::new(TtlScope::All);
    let verifier = h.expect(vec![]);
    let mut value = job_json("u", 0, NOW);
    value["status"]["conditions"][0]
        .as_object_mut()
        .expect("condition")
        .remove("lastTransitionTime");
    let error = reconcile::<Job>(Arc::new(job(value)), h.ctx.clone())
        .await
        .expect_err("no finish time");
    assert_eq!(error.category(), "missing_finish_time");
    h.finish(verifier).await;
}

#[tokio::test]
async fn scope_owned_ignores_other_jobs_and_all_takes_them() {
    let mut foreign = job_json("u", 0, NOW);
    foreign["metadata"]["ownerReferences"][0]["apiVersion"] = json!("batch/v1");

    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![]);
    let action = reconcile::<Job>(Arc::new(job(foreign.clone())), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;

    let mut h = Harness::new(TtlScope::All);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH, foreign.clone()),
        Expect::delete(JOB_PATH, foreground("u")),
    ]);
    let action = reconcile::<Job>(Arc::new(job(foreign)), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn fresh_copy_no_longer_owned_is_not_deleted() {
    let mut h = Harness::new(TtlScope::Owned);
    let mut fresh = job_json("u", 0, NOW);
    fresh["metadata"]["ownerReferences"] = json!([]);
    let verifier = h.expect(vec![Expect::get(JOB_PATH, fresh)]);
    let action = reconcile::<Job>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn expired_pod_is_read_fresh_then_deleted_background_with_the_fresh_uid() {
    let mut h = Harness::new(TtlScope::Off);
    h.clock.set(ts("2024-03-10T12:00:10Z"));
    let verifier = h.expect(vec![
        Expect::get(
            POD_PATH,
            pod_json("fresh-uid", "10", "2024-03-10T11:59:50Z"),
        ),
        Expect::delete(
            POD_PATH,
            json!({"propagationPolicy": "Background", "preconditions": {"uid": "fresh-uid"}}),
        ),
    ]);
    let cached = pod(pod_json("cached-uid", "10", "2024-03-10T11:59:50Z"));
    let action = reconcile::<Pod>(Arc::new(cached), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    let metrics = h.finish(verifier).await;
    assert!(
        metrics.contains(r#"kronjob_ttl_deletions_total{kind="pod"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"kronjob_ttl_deletion_delay_seconds_sum{kind="pod"} 10.0"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn pod_with_a_fixed_annotation_on_the_server_is_not_deleted() {
    let mut h = Harness::new(TtlScope::Off);
    let verifier = h.expect(vec![Expect::get(
        POD_PATH,
        pod_json("u", "600", "2024-03-10T11:59:00Z"),
    )]);
    let cached = pod(pod_json("u", "0", "2024-03-10T11:59:00Z"));
    let action = reconcile::<Pod>(Arc::new(cached), h.ctx.clone()).await;
    assert_eq!(
        action.expect("reconcile"),
        Action::requeue(Duration::from_secs(540))
    );
    h.finish(verifier).await;
}

#[tokio::test]
async fn bad_pod_annotation_gets_one_warning_event_and_no_retry() {
    let mut h = Harness::new(TtlScope::Off);
    let event = || Expect {
        method: Method::POST,
        path: "/apis/events.k8s.io/v1/namespaces/ns/events",
        body: None,
        body_includes: Some(json!({
            "type": "Warning",
            "reason": "InvalidTTLAnnotation",
            "action": "TTLAfterFinished",
            "reportingController": "kronjob",
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "name", "uid": "u"},
        })),
        status: StatusCode::CREATED,
        reply: json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                      "metadata": {"name": "name.1", "namespace": "ns"}, "eventTime": null}),
    };
    // The Recorder itself folds a repeat into the first Event's series (a PATCH).
    let mut repeat = event();
    repeat.method = Method::PATCH;
    repeat.path = "/apis/events.k8s.io/v1/namespaces/ns/events/name.*";
    repeat.body_includes = Some(json!({"reason": "InvalidTTLAnnotation", "series": {"count": 2}}));
    repeat.status = StatusCode::OK;
    let verifier = h.expect(vec![event(), repeat]);
    let bad = pod(pod_json("u", "abc", "2024-03-10T11:59:00Z"));
    for round in 0..3 {
        let action = reconcile::<Pod>(Arc::new(bad.clone()), h.ctx.clone()).await;
        assert_eq!(
            action.expect("reconcile"),
            Action::await_change(),
            "round {round}"
        );
    }
    // Fixed, then broken again with the same value: warned again (the second expected POST).
    let fixed = pod(pod_json("u", "3600", "2024-03-10T11:59:00Z"));
    let action = reconcile::<Pod>(Arc::new(fixed), h.ctx.clone()).await;
    assert!(action.is_ok());
    let action = reconcile::<Pod>(Arc::new(bad.clone()), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    let metrics = h.finish(verifier).await;
    assert!(
        metrics.contains(r#"kronjob_ttl_errors_total{kind="pod",category="bad_annotation"} 2"#),
        "{metrics}"
    );
}

#[test]
fn cached_objects_are_slimmed() {
    let mut j = job(job_json("u", 0, NOW));
    j.metadata.managed_fields = Some(vec![Default::default()]);
    j.spec.as_mut().expect("spec").template = serde_json::from_value(
        json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    )
    .expect("template");
    j.slim();
    assert_eq!(j.metadata.managed_fields, None);
    assert_eq!(
        j.spec.as_ref().expect("spec").template,
        PodTemplateSpec::default()
    );
    assert_eq!(
        j.ttl_state(ts(NOW)),
        job(job_json("u", 0, NOW)).ttl_state(ts(NOW))
    );

    let mut p = pod(pod_json("u", "5", NOW));
    p.metadata.managed_fields = Some(vec![Default::default()]);
    p.metadata
        .annotations
        .as_mut()
        .expect("annotations")
        .insert(
            "kubectl.kubernetes.io/last-applied-configuration".into(),
            "{..}".into(),
        );
    let before = p.ttl_state(ts(NOW));
    p.slim();
    assert_eq!(p.metadata.managed_fields, None);
    assert_eq!(p.spec, Some(PodSpec::default()));
    assert_eq!(
        p.metadata.annotations.as_ref().map(|a| a.len()),
        Some(1),
        "only the TTL annotation stays"
    );
    assert_eq!(p.ttl_state(ts(NOW)), before);
}

#[test]
fn watches_select_only_what_is_needed() {
    let owned = <Job as TtlObject>::watch_config(TtlScope::Owned);
    assert_eq!(owned.label_selector.as_deref(), Some(LABEL_CRONJOB));
    assert_eq!(owned.field_selector, None);
    let all = <Job as TtlObject>::watch_config(TtlScope::All);
    assert_eq!(all.label_selector, None);
    let pods = <Pod as TtlObject>::watch_config(TtlScope::Off);
    assert_eq!(pods.field_selector.as_deref(), Some(POD_FIELD_SELECTOR));
}

#[tokio::test]
async fn run_returns_at_once_when_everything_is_off() {
    let (service, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let mut registry = Registry::default();
    let args = TtlArgs {
        ttl_jobs: TtlScope::Off,
        ttl_pods: false,
    };
    tokio::time::timeout(
        Duration::from_secs(1),
        run(
            Client::new(service, "default"),
            args,
            Arc::new(FixedClock::new(ts(NOW))),
            TtlMetrics::new(&mut registry),
            vec![],
            future::pending(),
        ),
    )
    .await
    .expect("returns without waiting for shutdown");
}

#[test]
fn args_default_to_owned_jobs_and_no_pods() {
    use clap::Parser;
    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        ttl: TtlArgs,
    }
    let cli = Cli::try_parse_from(["kronjob"]).expect("parse");
    assert_eq!(cli.ttl.ttl_jobs, TtlScope::Owned);
    assert!(!cli.ttl.ttl_pods);
    let cli = Cli::try_parse_from(["kronjob", "--ttl-jobs=all", "--ttl-pods"]).expect("parse");
    assert_eq!(cli.ttl.ttl_jobs, TtlScope::All);
    assert!(cli.ttl.ttl_pods);
    assert!(Cli::try_parse_from(["kronjob", "--ttl-jobs=some"]).is_err());
}

/// The whole pipeline through [`run`]: the list and watch carry the label selector, an expired
/// owned Job from the initial list is read fresh and deleted, an unowned one is not touched, and
/// `run` returns on shutdown.
#[tokio::test]
async fn run_lists_with_the_selector_deletes_the_expired_job_and_stops_on_shutdown() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let mut registry = Registry::default();
    let metrics = TtlMetrics::new(&mut registry);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let args = TtlArgs {
        ttl_jobs: TtlScope::Owned,
        ttl_pods: false,
    };
    let controller = tokio::spawn(run(
        Client::new(service, "default"),
        args,
        Arc::new(FixedClock::new(ts(NOW))),
        metrics,
        vec!["ns".into()],
        async move {
            let _ = stop_rx.await;
        },
    ));

    let mut unowned = job_json("other-uid", 0, NOW);
    unowned["metadata"]["name"] = json!("other");
    unowned["metadata"]["ownerReferences"] = json!([]);
    let list = json!({
        "apiVersion": "batch/v1", "kind": "JobList", "metadata": {"resourceVersion": "10"},
        "items": [job_json("u", 0, NOW), unowned],
    });
    let selector = "labelSelector=batch.kronjob.dev%2Fcronjob";
    let mut seen = Vec::new();
    let mut held_watches = Vec::new();
    while !seen.contains(&"DELETE".to_owned()) {
        let (request, send) = tokio::time::timeout(Duration::from_secs(2), handle.next_request())
            .await
            .unwrap_or_else(|_| panic!("timed out; requests so far: {seen:?}"))
            .expect("client alive");
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or("").to_owned();
        let body = request.into_body().collect_bytes().await.expect("body");
        let reply = match (method.as_str(), path.as_str()) {
            ("GET", "/apis/batch/v1/namespaces/ns/jobs") if query.contains("watch=true") => {
                assert!(query.contains(selector), "watch query {query}");
                // Hold the watch open until the end of the test.
                held_watches.push(send);
                seen.push("WATCH".to_owned());
                continue;
            }
            ("GET", "/apis/batch/v1/namespaces/ns/jobs") => {
                assert!(query.contains(selector), "list query {query}");
                seen.push("LIST".to_owned());
                list.clone()
            }
            ("GET", JOB_PATH) => {
                seen.push("GET".to_owned());
                job_json("u", 0, NOW)
            }
            ("DELETE", JOB_PATH) => {
                let got: Value = serde_json::from_slice(&body).expect("JSON body");
                assert_eq!(got, foreground("u"));
                seen.push("DELETE".to_owned());
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})
            }
            _ => panic!("unexpected request {method} {path}?{query}; so far {seen:?}"),
        };
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&reply).expect("JSON")))
                .expect("response"),
        );
    }
    assert_eq!(&seen[..1], ["LIST"], "{seen:?}");
    assert_eq!(
        seen.iter().filter(|s| *s == "GET").count(),
        1,
        "only the owned Job is read fresh: {seen:?}"
    );

    stop_tx.send(()).expect("controller listening");
    tokio::time::timeout(Duration::from_secs(5), controller)
        .await
        .expect("run returns after shutdown")
        .expect("run does not panic");
    drop(held_watches);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains(r#"kronjob_ttl_deletions_total{kind="job"} 1"#),
        "{text}"
    );
}
