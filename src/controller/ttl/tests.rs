//! Reconcile tests against a mocked API server (controller-rs `ApiServerVerifier` style): every
//! request is checked for method, path and body, and the verifier fails if an expected call
//! never comes or an unexpected one does.

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::*;
use crate::clock::FixedClock;
use crate::controller::MAX_REQUEUE;
use crate::testing::api_script::{Expect, Script, mock_client};

const NOW: &str = "2024-03-10T12:00:00Z";

use crate::testing::fixtures::t as ts;

struct Harness {
    ctx: Arc<Context>,
    clock: Arc<FixedClock>,
    registry: Registry,
    script: Option<Script>,
}

impl Harness {
    fn new(scope: TtlScope) -> Self {
        Self::with_shard(scope, Default::default())
    }

    fn with_shard(scope: TtlScope, shard: ShardView) -> Self {
        let (client, script) = mock_client();
        let clock = Arc::new(FixedClock::new(ts(NOW)));
        let mut registry = Registry::default();
        let metrics = TtlMetrics::new(&mut registry);
        let shared = Shared {
            client,
            clock: clock.clone(),
            scope: Default::default(),
            instance: None,
            gate: Default::default(),
            shard,
            tasks: Default::default(),
            records: Default::default(),
        };
        let ctx = Arc::new(Context::new(&shared, metrics, scope));
        Self {
            ctx,
            clock,
            registry,
            script: Some(script),
        }
    }

    /// Start serving `script`; call once.
    fn expect(&mut self, script: Vec<Expect>) -> JoinHandle<()> {
        self.script
            .take()
            .expect("expect() called once")
            .run(script)
    }

    /// Drop the client and wait for the verdict; the metrics text.
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

fn job(value: Value) -> SlimJob {
    serde_json::from_value(value).expect("job JSON")
}

fn pod_json(uid: &str, ttl: &str, finished: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "name", "namespace": "ns", "uid": uid,
                     "annotations": {ANNOTATION_TTL: ttl}},
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
async fn an_expired_scheduled_job_waits_for_the_status_that_records_its_slot() {
    let mut h = Harness::new(TtlScope::Owned);
    h.clock.set(ts("2024-03-10T12:00:03Z"));
    let stored = Arc::new(std::sync::Mutex::new(None));
    let answer = Arc::clone(&stored);
    h.ctx.records.install(Box::new(move |ns, name, uid| {
        assert_eq!((ns, name, uid), ("ns", "cron", "cron-uid"));
        Ok(Some(*answer.lock().expect("lock")))
    }));
    let mut value = job_json("uid", 0, "2024-03-10T11:59:00Z");
    value["metadata"]["annotations"] =
        json!({crate::api::ANNOTATION_SCHEDULED_AT: "2024-03-10T11:58:00Z"});
    // The status write that records 11:58 has not landed: no request, a look again soon.
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH).ok(value.clone()),
        Expect::delete(JOB_PATH).body(foreground("uid")),
    ]);
    let cached = Arc::new(job(value));
    let action = reconcile::<SlimJob>(Arc::clone(&cached), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::requeue(RECORD_RECHECK));
    *stored.lock().expect("lock") = Some(ts("2024-03-10T11:57:00Z"));
    let action = reconcile::<SlimJob>(Arc::clone(&cached), h.ctx.clone()).await;
    assert_eq!(
        action.expect("reconcile"),
        Action::requeue(RECORD_RECHECK),
        "an earlier slot recorded is not this one"
    );
    // Recorded: read fresh, deleted.
    *stored.lock().expect("lock") = Some(ts("2024-03-10T11:58:00Z"));
    let action = reconcile::<SlimJob>(cached, h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn expired_job_is_read_fresh_then_deleted_foreground_with_the_fresh_uid() {
    let mut h = Harness::new(TtlScope::Owned);
    // Expired 3 s ago; the fresh copy is a re-created Job of the same name, also expired.
    h.clock.set(ts("2024-03-10T12:00:03Z"));
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH).ok(job_json("fresh-uid", 60, "2024-03-10T11:59:00Z")),
        Expect::delete(JOB_PATH).body(foreground("fresh-uid")),
    ]);
    let cached = job(job_json("cached-uid", 60, "2024-03-10T11:59:00Z"));
    let action = reconcile::<SlimJob>(Arc::new(cached), h.ctx.clone()).await;
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

/// A sharded view of replica `me` among `members`.
fn sharded(me: &str, members: &[&str]) -> ShardView {
    let assignment = shard::Assignment::new(me, members.iter().map(|m| m.to_string()));
    let (_publish, view) = tokio::sync::watch::channel(Arc::new(assignment));
    ShardView::sharded(view, Default::default())
}

#[tokio::test]
async fn sharded_an_expired_job_is_deleted_by_the_replica_of_its_cronjob_only() {
    let members = ["kronjob-a", "kronjob-b"];
    let owner = shard::Assignment::new("", members.map(String::from))
        .owner("ns/cron")
        .expect("an owner")
        .to_string();
    let other = members.into_iter().find(|m| *m != owner).expect("two");
    let expired = || job(job_json("u", 0, NOW));

    // Not ours: no request, looked at again later (in case the owner dies).
    let mut h = Harness::with_shard(TtlScope::Owned, sharded(other, &members));
    let verifier = h.expect(vec![]);
    let action = reconcile::<SlimJob>(Arc::new(expired()), h.ctx.clone()).await;
    assert_eq!(
        action.expect("reconcile"),
        Action::requeue(NOT_OURS_RECHECK)
    );
    h.finish(verifier).await;

    // Ours: deleted as without sharding.
    let mut h = Harness::with_shard(TtlScope::Owned, sharded(&owner, &members));
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH).ok(job_json("u", 0, NOW)),
        Expect::delete(JOB_PATH).body(foreground("u")),
    ]);
    let action = reconcile::<SlimJob>(Arc::new(expired()), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn a_standby_deletes_nothing_until_it_leads() {
    let (leads, leading) = tokio::sync::watch::channel(false);
    let view = shard::ShardView::solo(Default::default()).led_by(leading);
    let expired = || job(job_json("u", 0, NOW));
    let mut h = Harness::with_shard(TtlScope::Owned, view.clone());
    let verifier = h.expect(vec![]);
    let action = reconcile::<SlimJob>(Arc::new(expired()), h.ctx.clone()).await;
    assert_eq!(
        action.expect("reconcile"),
        Action::requeue(NOT_OURS_RECHECK),
        "looked at again, in case it leads by then"
    );
    h.finish(verifier).await;
    leads.send_replace(true);
    let mut h = Harness::with_shard(TtlScope::Owned, view);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH).ok(job_json("u", 0, NOW)),
        Expect::delete(JOB_PATH).body(foreground("u")),
    ]);
    let action = reconcile::<SlimJob>(Arc::new(expired()), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn zero_ttl_deletes_as_soon_as_finished() {
    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH).ok(job_json("u", 0, NOW)),
        Expect::delete(JOB_PATH).body(foreground("u")),
    ]);
    let action = reconcile::<SlimJob>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn raised_ttl_on_the_fresh_copy_requeues_for_the_new_remaining_time_without_delete() {
    let mut h = Harness::new(TtlScope::Owned);
    // Cache: TTL 60 s, finished 2 min ago. Server: the user raised it to 1 h.
    let verifier = h.expect(vec![Expect::get(JOB_PATH).ok(job_json(
        "u",
        3600,
        "2024-03-10T11:58:00Z",
    ))]);
    let cached = job(job_json("u", 60, "2024-03-10T11:58:00Z"));
    let action = reconcile::<SlimJob>(Arc::new(cached), h.ctx.clone()).await;
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
    let action = reconcile::<SlimJob>(Arc::new(cached), h.ctx.clone()).await;
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
    let action = reconcile::<SlimJob>(Arc::new(cached), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::requeue(MAX_REQUEUE));
    h.finish(verifier).await;
}

#[tokio::test]
async fn get_not_found_is_success_without_delete() {
    let mut h = Harness::new(TtlScope::Owned);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH)
            .ok(json!({}))
            .fails(StatusCode::NOT_FOUND, "NotFound"),
    ]);
    let action = reconcile::<SlimJob>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn fresh_copy_being_deleted_is_left_alone() {
    let mut h = Harness::new(TtlScope::Owned);
    let mut fresh = job_json("u", 0, NOW);
    fresh["metadata"]["deletionTimestamp"] = json!(NOW);
    let verifier = h.expect(vec![Expect::get(JOB_PATH).ok(fresh)]);
    let action = reconcile::<SlimJob>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
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
            Expect::get(JOB_PATH).ok(job_json("u", 0, NOW)),
            Expect::delete(JOB_PATH)
                .body(foreground("u"))
                .fails(status, reason),
        ]);
        let action =
            reconcile::<SlimJob>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
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
        Expect::get(JOB_PATH).ok(job_json("u", 0, NOW)),
        Expect::delete(JOB_PATH)
            .body(foreground("u"))
            .fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
    ]);
    let cached = job(job_json("u", 0, NOW));
    let error = reconcile::<SlimJob>(Arc::new(cached.clone()), h.ctx.clone())
        .await
        .expect_err("500 is an error");
    assert!(matches!(error, Error::Delete { .. }), "{error:?}");
    assert_eq!(error.category(), "delete");
    let delays: Vec<Duration> = (0..8)
        .map(|_| retry_delay(&cached, &error, &h.ctx))
        .collect();
    for (i, d) in delays.iter().enumerate() {
        let base = [1, 2, 4, 8, 16, 32, 64, 128][i] as f64;
        let s = d.as_secs_f64();
        assert!(s >= base && s <= base * 2.0, "attempt {}: {s} s", i + 1);
    }
    let metrics = h.finish(verifier).await;
    assert!(
        metrics.contains(r#"kronjob_ttl_errors_total{kind="job",category="delete"} 8"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_successful_reconcile_resets_the_backoff() {
    let h = Harness::new(TtlScope::Owned);
    let cached = job(job_json("u", 100, NOW));
    let key = failure_key(&cached);
    assert_eq!(h.ctx.failures.record(&key), 1);
    assert_eq!(h.ctx.failures.record(&key), 2);
    reconcile::<SlimJob>(Arc::new(cached), h.ctx.clone())
        .await
        .expect("waiting is success");
    assert_eq!(h.ctx.failures.record(&key), 1);
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
    let error = reconcile::<SlimJob>(Arc::new(job(value)), h.ctx.clone())
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
    let action = reconcile::<SlimJob>(Arc::new(job(foreign.clone())), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;

    let mut h = Harness::new(TtlScope::All);
    let verifier = h.expect(vec![
        Expect::get(JOB_PATH).ok(foreign.clone()),
        Expect::delete(JOB_PATH).body(foreground("u")),
    ]);
    let action = reconcile::<SlimJob>(Arc::new(job(foreign)), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn fresh_copy_no_longer_owned_is_not_deleted() {
    let mut h = Harness::new(TtlScope::Owned);
    let mut fresh = job_json("u", 0, NOW);
    fresh["metadata"]["ownerReferences"] = json!([]);
    let verifier = h.expect(vec![Expect::get(JOB_PATH).ok(fresh)]);
    let action = reconcile::<SlimJob>(Arc::new(job(job_json("u", 0, NOW))), h.ctx.clone()).await;
    assert_eq!(action.expect("reconcile"), Action::await_change());
    h.finish(verifier).await;
}

#[tokio::test]
async fn expired_pod_is_read_fresh_then_deleted_background_with_the_fresh_uid() {
    let mut h = Harness::new(TtlScope::Off);
    h.clock.set(ts("2024-03-10T12:00:10Z"));
    let verifier = h.expect(vec![
        Expect::get(POD_PATH).ok(pod_json("fresh-uid", "10", "2024-03-10T11:59:50Z")),
        Expect::delete(POD_PATH).body(
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
    let verifier = h.expect(vec![Expect::get(POD_PATH).ok(pod_json(
        "u",
        "600",
        "2024-03-10T11:59:00Z",
    ))]);
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
    let reply = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                       "metadata": {"name": "name.1", "namespace": "ns"}, "eventTime": null});
    let event = Expect::post("/apis/events.k8s.io/v1/namespaces/ns/events")
        .body_includes(json!({
            "type": "Warning",
            "reason": "InvalidTTLAnnotation",
            "action": "TTLAfterFinished",
            "reportingController": "kronjob",
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "name", "uid": "u"},
        }))
        .reply(StatusCode::CREATED, reply.clone());
    // The Recorder itself folds a repeat into the first Event's series (a PATCH of it).
    let repeat = Expect::patch("/apis/events.k8s.io/v1/namespaces/ns/events/name.*")
        .body_includes(json!({"series": {"count": 2}}))
        .ok(reply);
    let verifier = h.expect(vec![event, repeat]);
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
fn cached_pods_are_slimmed_without_changing_the_decision() {
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
    let owned = <SlimJob as TtlObject>::watch_config(TtlScope::Owned);
    assert_eq!(owned.label_selector.as_deref(), Some(LABEL_CRONJOB));
    assert_eq!(owned.field_selector, None);
    let all = <SlimJob as TtlObject>::watch_config(TtlScope::All);
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
    let shared = Shared {
        client: Client::new(service, "default"),
        clock: Arc::new(FixedClock::new(ts(NOW))),
        scope: Default::default(),
        instance: None,
        gate: Default::default(),
        shard: Default::default(),
        tasks: Default::default(),
        records: Default::default(),
    };
    let result = tokio::time::timeout(
        Duration::from_secs(1),
        run(
            shared,
            args,
            TtlMetrics::new(&mut registry),
            None,
            None,
            || {},
            CancellationToken::new(),
        ),
    )
    .await
    .expect("returns without waiting for shutdown");
    assert!(result.is_ok(), "disabled is not a failure: {result:?}");
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

/// The controllers' shared parts for `client`, watching namespace `ns`.
fn shared_in_ns(client: Client, clock: Arc<dyn Clock>) -> Shared {
    Shared {
        client,
        clock,
        scope: crate::controller::Scope {
            namespaces: vec!["ns".into()],
            selector: None,
        },
        instance: None,
        gate: Default::default(),
        shard: Default::default(),
        tasks: Default::default(),
        records: Default::default(),
    }
}

type ApiHandle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Reply = tower_test::mock::SendResponse<Response<Body>>;

/// The next request to the mocked API (within 2 s).
async fn next_request(handle: &mut ApiHandle, seen: &[String]) -> (Request<Body>, Reply) {
    tokio::time::timeout(Duration::from_secs(2), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("timed out; requests so far: {seen:?}"))
        .expect("client alive")
}

fn respond(send: Reply, reply: &Value) {
    send.send_response(
        Response::builder()
            .body(Body::from(serde_json::to_vec(reply).expect("JSON")))
            .expect("response"),
    );
}

/// Cancel `stop` and expect `controller` to return `Ok` soon.
async fn stops(stop: CancellationToken, controller: JoinHandle<Result<(), TaskError>>) {
    stop.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), controller)
        .await
        .expect("run returns after shutdown")
        .expect("run does not panic");
    assert!(result.is_ok(), "asked to stop: {result:?}");
}

/// With the owner index's tap instead of a watch: no Job list or watch of its own, a running
/// Job is not handed over, the expired one is read fresh and deleted.
#[tokio::test]
async fn with_the_index_tap_no_job_watch_is_made_and_only_candidates_are_handed_over() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let metrics = TtlMetrics::new(&mut Registry::default());
    let stop = CancellationToken::new();
    let args = TtlArgs {
        ttl_jobs: TtlScope::Owned,
        ttl_pods: false,
    };
    let clock: Arc<dyn Clock> = Arc::new(FixedClock::new(ts(NOW)));
    let shared = shared_in_ns(Client::new(service, "default"), Arc::clone(&clock));
    let (tap, tapped) = job_tap(clock);
    let (synced, listed) = tokio::sync::oneshot::channel();
    let ready = move || {
        let _ = synced.send(());
    };
    let controller = tokio::spawn(run(
        shared,
        args,
        metrics,
        Some(tapped),
        None,
        ready,
        stop.clone(),
    ));
    // The index's first list: an expired Job and a running one (never handed over: were it,
    // its reconcile would read it fresh, a request the mock refuses).
    let mut running = job_json("r", 0, NOW);
    running["metadata"]["name"] = json!("running");
    running["status"] = json!({"startTime": NOW});
    tap.forward(&watcher::Event::Init);
    tap.forward(&watcher::Event::InitApply(job(running)));
    tap.forward(&watcher::Event::InitApply(job(job_json("u", 0, NOW))));
    tap.forward(&watcher::Event::InitDone);
    tokio::time::timeout(Duration::from_secs(2), listed)
        .await
        .expect("synced once the tap listed")
        .expect("ready called");
    let mut seen = Vec::new();
    while !seen.contains(&"DELETE".to_owned()) {
        let (request, send) = next_request(&mut handle, &seen).await;
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let reply = match (method.as_str(), path.as_str()) {
            ("GET", JOB_PATH) => {
                seen.push("GET".to_owned());
                job_json("u", 0, NOW)
            }
            ("DELETE", JOB_PATH) => {
                seen.push("DELETE".to_owned());
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})
            }
            _ => panic!("unexpected request {method} {path}; so far {seen:?}"),
        };
        respond(send, &reply);
    }
    assert_eq!(seen, ["GET", "DELETE"]);
    stops(stop, controller).await;
}

/// The whole pipeline through [`run`]: the list and watch carry the label selector, an expired
/// owned Job from the initial list is read fresh and deleted, an unowned one is not touched, and
/// `run` returns on shutdown.
#[tokio::test]
async fn run_lists_with_the_selector_deletes_the_expired_job_and_stops_on_shutdown() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let mut registry = Registry::default();
    let metrics = TtlMetrics::new(&mut registry);
    let stop = CancellationToken::new();
    let args = TtlArgs {
        ttl_jobs: TtlScope::Owned,
        ttl_pods: false,
    };
    let shared = shared_in_ns(
        Client::new(service, "default"),
        Arc::new(FixedClock::new(ts(NOW))),
    );
    let (synced, mut listed) = tokio::sync::oneshot::channel();
    let ready = move || {
        let _ = synced.send(());
    };
    let controller = tokio::spawn(run(shared, args, metrics, None, None, ready, stop.clone()));
    assert!(listed.try_recv().is_err(), "not synced before the list");

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
        let (request, send) = next_request(&mut handle, &seen).await;
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
        respond(send, &reply);
    }
    assert_eq!(&seen[..1], ["LIST"], "{seen:?}");
    tokio::time::timeout(Duration::from_secs(2), listed)
        .await
        .expect("synced once listed")
        .expect("ready called");
    assert_eq!(
        seen.iter().filter(|s| *s == "GET").count(),
        1,
        "only the owned Job is read fresh: {seen:?}"
    );

    stops(stop, controller).await;
    drop(held_watches);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    assert!(
        text.contains(r#"kronjob_ttl_deletions_total{kind="job"} 1"#),
        "{text}"
    );
}

#[test]
fn only_objects_that_can_expire_are_cached() {
    let now = Timestamp::from_second(1_700_000_000).expect("time");
    let job = |value: Value| -> SlimJob { serde_json::from_value(value).expect("job") };
    let finished =
        json!({"type": "Complete", "status": "True", "lastTransitionTime": "2023-11-14T22:00:00Z"});
    let running = job(
        json!({"metadata": {"name": "a"}, "spec": {"ttlSecondsAfterFinished": 60, "template": {}}}),
    );
    let no_ttl = job(json!({"metadata": {"name": "b"}, "spec": {"template": {}},
        "status": {"conditions": [finished.clone()]}}));
    let expiring = job(
        json!({"metadata": {"name": "c"}, "spec": {"ttlSecondsAfterFinished": 60, "template": {}},
        "status": {"conditions": [finished.clone()]}}),
    );
    let deleting = job(
        json!({"metadata": {"name": "d", "deletionTimestamp": "2023-11-14T22:00:00Z"},
        "spec": {"ttlSecondsAfterFinished": 60, "template": {}}, "status": {"conditions": [finished]}}),
    );
    let keep = |event: watcher::Event<SlimJob>| worth_keeping(&Ok(event), now);
    assert!(!keep(watcher::Event::Apply(running.clone())), "running");
    assert!(!keep(watcher::Event::InitApply(no_ttl)), "no TTL");
    assert!(!keep(watcher::Event::Apply(deleting)), "being deleted");
    assert!(
        keep(watcher::Event::Apply(expiring.clone())),
        "finished with a TTL"
    );
    assert!(
        keep(watcher::Event::InitApply(expiring)),
        "finished with a TTL, relisted"
    );
    assert!(keep(watcher::Event::Delete(running)), "deletions always");
    assert!(keep(watcher::Event::Init) && keep(watcher::Event::InitDone));
}

/// With `--ttl-pods`, [`run`] lists and watches the Pods of the namespace too, only those that
/// finished (the field selector), beside the Jobs, and reports its caches listed. The calls
/// are recorded for the RBAC check (the Pod grants exist for this flag only).
#[tokio::test]
async fn with_ttl_pods_run_lists_and_watches_finished_pods_beside_the_jobs() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let mut registry = Registry::default();
    let stop = CancellationToken::new();
    let shared = shared_in_ns(
        Client::new(service, "default"),
        Arc::new(FixedClock::new(ts(NOW))),
    );
    let args = TtlArgs {
        ttl_jobs: TtlScope::Owned,
        ttl_pods: true,
    };
    let (synced, mut listed) = tokio::sync::oneshot::channel();
    let ready = move || {
        let _ = synced.send(());
    };
    let controller = tokio::spawn(run(
        shared,
        args,
        TtlMetrics::new(&mut registry),
        None,
        None,
        ready,
        stop.clone(),
    ));
    let empty = |kind: &str| json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "10"}, "items": []});
    let mut seen = std::collections::BTreeSet::new();
    let mut held_watches = Vec::new();
    while seen.len() < 4 {
        let (request, send) = tokio::time::timeout(Duration::from_secs(2), handle.next_request())
            .await
            .unwrap_or_else(|_| panic!("timed out; requests so far: {seen:?}"))
            .expect("client alive");
        let (path, query) = (
            request.uri().path().to_owned(),
            request.uri().query().unwrap_or("").to_owned(),
        );
        crate::testing::api_script::record_call(
            request.method().as_str(),
            &format!("{path}?{query}"),
        );
        let watch = query.contains("watch=true");
        let reply = match path.as_str() {
            "/api/v1/namespaces/ns/pods" => {
                assert!(query.contains("fieldSelector=status.phase"), "{query}");
                empty("PodList")
            }
            "/apis/batch/v1/namespaces/ns/jobs" => empty("JobList"),
            other => panic!("unexpected request {other}?{query}"),
        };
        seen.insert((path, watch));
        if watch {
            held_watches.push(send);
            continue;
        }
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&reply).expect("JSON")))
                .expect("response"),
        );
    }
    tokio::time::timeout(Duration::from_secs(2), &mut listed)
        .await
        .expect("synced once both listed")
        .expect("ready called");
    stops(stop, controller).await;
    drop(held_watches);
}
