//! Mock-API tests: the exact requests of one reconcile, in order, and nothing else.

use std::time::Duration;

use http::StatusCode;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::*;
use crate::api::{ConcurrencyPolicy, CronJob};
use crate::clock::FixedClock;
use crate::controller::index::owner_index;
use crate::testing::api_script::{Expect, Script, mock_client};
use crate::testing::fixtures::{CronJobFixture, JobFixture, cronjob, job, t};

const NOW: &str = "2016-05-19T10:01:00Z";
const SLOT_JOB: &str = "cj-24394200";
const JOBS: &str = "/apis/batch/v1/namespaces/ns/jobs";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";
const STATUS: &str = "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/cj/status";

fn context(jobs: Vec<k8s_openapi::api::batch::v1::Job>) -> (Arc<Context>, Script) {
    let (client, script) = mock_client();
    let (index, mut writer) = owner_index();
    writer.apply_watcher_event(&watcher::Event::Init);
    for j in jobs {
        writer.apply_watcher_event(&watcher::Event::InitApply(j));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let ctx = Context::new(
        client,
        Arc::new(FixedClock::new(t(NOW))),
        ReconcilerMetrics::new(&mut Default::default()),
        PlanConfig::default(),
        index,
        None,
    );
    (Arc::new(ctx), script)
}

/// An Event on the CronJob with this reason and type.
fn event(reason: &'static str, type_: &'static str) -> Expect {
    Expect::post(EVENTS).check(move |b| {
        assert_eq!(b["reason"], reason);
        assert_eq!(b["type"], type_);
        assert_eq!(b["reportingController"], "kronjob");
        assert_eq!(b["regarding"]["name"], "cj");
    })
}

/// The status write, with assertions on the status sent.
fn status_patch(check: impl Fn(&Value) + Send + 'static) -> Expect {
    Expect::patch(STATUS).answer(move |body| {
        check(&body["status"]);
        let mut cj = serde_json::to_value(cronjob("0 * * * *")).expect("json");
        cj["status"] = body["status"].clone();
        (StatusCode::OK, cj)
    })
}

async fn reconciled(cj: CronJob, ctx: Arc<Context>) -> Result<Action, Error> {
    tokio::time::timeout(Duration::from_secs(2), reconcile(Arc::new(cj), ctx))
        .await
        .expect("reconcile finishes")
}

async fn verdict(server: tokio::task::JoinHandle<()>) {
    server.await.expect("requests as scripted");
}

#[tokio::test]
async fn creates_the_due_job_then_writes_status_once() {
    let (ctx, script) = context(vec![]);
    let server = script.run(vec![
        Expect::post(JOBS).check(|b| {
            assert_eq!(b["metadata"]["name"], SLOT_JOB);
            assert_eq!(b["metadata"]["labels"]["team"], "a");
            assert_eq!(b["metadata"]["labels"]["batch.kronjob.dev/cronjob"], "cj");
            assert_eq!(
                b["metadata"]["annotations"]["batch.kronjob.dev/scheduled-at"],
                "2016-05-19T10:00:00Z"
            );
            let owner = &b["metadata"]["ownerReferences"][0];
            assert_eq!(owner["apiVersion"], "batch.kronjob.dev/v1");
            assert_eq!(owner["kind"], "CronJob");
            assert_eq!(owner["uid"], "cj-uid");
            assert_eq!(owner["controller"], true);
            assert_eq!(owner["blockOwnerDeletion"], true);
        }),
        event("SuccessfulCreate", "Normal"),
        status_patch(|s| {
            assert_eq!(s["active"][0]["name"], SLOT_JOB);
            assert_eq!(s["active"][0]["uid"], format!("{SLOT_JOB}-uid"));
            assert_eq!(s["activeCount"], 1);
            assert_eq!(s["lastScheduleTime"], "2016-05-19T10:00:00Z");
            assert_eq!(s["nextScheduleTime"], "2016-05-19T11:00:00Z");
            assert_eq!(s["conditions"][0]["reason"], "Scheduled");
            assert!(s["lastSuccessfulTime"].is_null());
        }),
    ]);
    let action = reconciled(cronjob("0 * * * *"), ctx.clone())
        .await
        .expect("reconcile");
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(59 * 60) + plan::NEXT_SCHEDULE_DELTA)
    );
    drop(ctx.clone());
    verdict(server).await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register(
        "skew_seconds",
        "skew",
        ctx.metrics.job_creation_skew.clone(),
    );
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
    // From the clock (10:01:00) to the slot (10:00:00), measured when the create returned.
    assert!(out.contains("skew_seconds_sum 60.0"), "{out}");
    assert!(out.contains("skew_seconds_count 1"), "{out}");
}

#[tokio::test]
async fn already_exists_and_owned_is_adopted() {
    let (ctx, script) = context(vec![]);
    let existing = serde_json::to_value(job(SLOT_JOB).scheduled()).expect("json");
    let server = script.run(vec![
        Expect::post(JOBS).fails(StatusCode::CONFLICT, "AlreadyExists"),
        Expect::get(&format!("{JOBS}/{SLOT_JOB}")).ok(existing),
        status_patch(|s| {
            assert_eq!(s["active"][0]["uid"], format!("{SLOT_JOB}-uid"));
            assert_eq!(s["lastScheduleTime"], "2016-05-19T10:00:00Z");
        }),
    ]);
    reconciled(cronjob("0 * * * *"), ctx)
        .await
        .expect("reconcile");
    verdict(server).await;
}

#[tokio::test]
async fn already_exists_not_owned_warns_and_keeps_active() {
    let (ctx, script) = context(vec![]);
    let stranger = serde_json::to_value(job(SLOT_JOB).owned_by("someone-else")).expect("json");
    let server = script.run(vec![
        Expect::post(JOBS).fails(StatusCode::CONFLICT, "AlreadyExists"),
        Expect::get(&format!("{JOBS}/{SLOT_JOB}")).ok(stranger),
        event("FailedCreate", "Warning"),
        status_patch(|s| {
            assert_eq!(s["active"], json!([]));
            assert!(s["lastScheduleTime"].is_null());
        }),
    ]);
    reconciled(cronjob("0 * * * *"), ctx)
        .await
        .expect("reconcile");
    verdict(server).await;
}

#[tokio::test]
async fn replace_deletes_active_in_background_then_creates() {
    let running = job("cj-24394140").scheduled();
    let cj = cronjob("0 * * * *")
        .policy(ConcurrencyPolicy::Replace)
        .last_scheduled("2016-05-19T09:00:00Z")
        .running(&[&running]);
    let (ctx, script) = context(vec![running]);
    let server = script.run(vec![
        Expect::delete(&format!("{JOBS}/cj-24394140")).check(|b| {
            assert_eq!(b["propagationPolicy"], "Background");
            assert_eq!(b["preconditions"]["uid"], "cj-24394140-uid");
        }),
        event("SuccessfulDelete", "Normal"),
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], SLOT_JOB)),
        event("SuccessfulCreate", "Normal"),
        status_patch(|s| {
            assert_eq!(s["activeCount"], 1);
            assert_eq!(s["active"][0]["uid"], format!("{SLOT_JOB}-uid"));
        }),
    ]);
    reconciled(cj, ctx).await.expect("reconcile");
    verdict(server).await;
}

#[tokio::test]
async fn history_beyond_limit_is_deleted_and_status_written_once() {
    let cj = cronjob("0 * * * *")
        .history(1, 1)
        .last_scheduled("2016-05-19T10:00:00Z");
    let old = job("cj-old")
        .started_at("2016-05-19T08:00:05Z")
        .complete_at("2016-05-19T08:00:05Z");
    let new = job("cj-new")
        .started_at("2016-05-19T09:00:05Z")
        .complete_at("2016-05-19T09:00:05Z");
    let (ctx, script) = context(vec![old, new]);
    let server = script.run(vec![
        Expect::delete(&format!("{JOBS}/cj-old"))
            .check(|b| assert_eq!(b["propagationPolicy"], "Background")),
        event("SuccessfulDelete", "Normal"),
        status_patch(|s| assert_eq!(s["lastSuccessfulTime"], "2016-05-19T09:00:05Z")),
    ]);
    reconciled(cj, ctx).await.expect("reconcile");
    verdict(server).await;
}

#[tokio::test]
async fn no_request_when_nothing_changed() {
    let cj = cronjob("0 * * * *").last_scheduled("2016-05-19T10:00:00Z");
    let settled = plan::plan(&cj, &[], t(NOW), &PlanConfig::default());
    let cj = cj.status(settled.status);
    let (ctx, script) = context(vec![]);
    let server = script.run(vec![]);
    reconciled(cj, ctx).await.expect("reconcile");
    verdict(server).await;
}

#[tokio::test]
async fn a_failed_create_is_retried_with_a_growing_backoff() {
    let (ctx, script) = context(vec![]);
    let server = script.run(vec![
        Expect::post(JOBS).fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        event("FailedCreate", "Warning"),
        // The status still gets written (conditions, nextScheduleTime) but not the slot.
        status_patch(|s| assert!(s["lastScheduleTime"].is_null())),
    ]);
    let cj = Arc::new(cronjob("0 * * * *"));
    let err = reconciled((*cj).clone(), ctx.clone())
        .await
        .expect_err("error");
    verdict(server).await;
    assert_eq!(err.category(), "api_server");
    let key = ObjectRef::from_obj(cj.as_ref());
    let first = error_policy(cj.clone(), &err, ctx.clone());
    let second = error_policy(cj.clone(), &err, ctx.clone());
    assert_ne!(first, Action::await_change());
    assert_eq!(ctx.failures.get(&key), 2, "two failures in a row");
    assert_ne!(first, second);
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
