//! Mock-API tests: the exact requests of a reconcile and its background work, and nothing else.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use http::StatusCode;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::api::{ConcurrencyPolicy, CronJob};
use crate::clock::FixedClock;
use crate::controller::cache::{CachedCronJob, SlimJob};
use crate::controller::owner_index::owner_index;
use crate::testing::api_script::{Expect, Script, mock_client};
use crate::testing::fixtures::{CronJobFixture, JobFixture, cronjob, job, t};
use crate::workload::WorkloadType;

const NOW: &str = "2016-05-19T10:01:00Z";
const SLOT_JOB: &str = "cj-24394200";
const JOBS: &str = "/apis/batch/v1/namespaces/ns/jobs";
/// Where the template check dry-runs a batch/v1 CronJob carrying the template.
const BATCH_CRONJOBS: &str = "/apis/batch/v1/namespaces/ns/cronjobs";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";
const CRONJOB: &str = "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/cj";
const STATUS: &str = "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/cj/status";

/// A context on a mocked API with its background workers running.
struct Harness {
    ctx: Arc<Context>,
    requests: UnboundedReceiver<super::writer::Key>,
    background: crate::task::TaskSet<crate::task::TaskError>,
}

impl Harness {
    fn new(jobs: Vec<k8s_openapi::api::batch::v1::Job>) -> (Self, Script) {
        Self::build(jobs, PlanConfig::default(), Default::default())
    }

    /// The same with the clock at `now`.
    fn at(now: jiff::Timestamp, jobs: Vec<k8s_openapi::api::batch::v1::Job>) -> (Self, Script) {
        Self::build_at(now, jobs, PlanConfig::default(), Default::default())
    }

    fn with_config(
        jobs: Vec<k8s_openapi::api::batch::v1::Job>,
        config: PlanConfig,
    ) -> (Self, Script) {
        Self::build(jobs, config, Default::default())
    }

    fn with_shard(
        jobs: Vec<k8s_openapi::api::batch::v1::Job>,
        shard: crate::controller::shard::ShardView,
    ) -> (Self, Script) {
        Self::build(jobs, PlanConfig::default(), shard)
    }

    fn build(
        jobs: Vec<k8s_openapi::api::batch::v1::Job>,
        config: PlanConfig,
        shard: crate::controller::shard::ShardView,
    ) -> (Self, Script) {
        Self::build_at(t(NOW), jobs, config, shard)
    }

    fn build_at(
        now: jiff::Timestamp,
        jobs: Vec<k8s_openapi::api::batch::v1::Job>,
        config: PlanConfig,
        shard: crate::controller::shard::ShardView,
    ) -> (Self, Script) {
        let (client, script) = mock_client();
        let (index, mut writer) = owner_index();
        writer.apply_watcher_event(&watcher::Event::Init);
        for j in jobs {
            writer.apply_watcher_event(&watcher::Event::InitApply(SlimJob(j)));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let shared = crate::controller::Shared {
            client,
            clock: Arc::new(FixedClock::new(now)),
            scope: Default::default(),
            instance: None,
            gate: Default::default(),
            shard,
            tasks: Default::default(),
            records: Default::default(),
        };
        let metrics = ReconcilerMetrics::new(&mut Default::default());
        let (ctx, background, requests) = Context::new(
            &shared,
            metrics,
            config,
            index,
            crate::controller::workloads::AllowedKinds::default(),
        );
        let mut workers = crate::task::TaskSet::new(&shared.tasks, CancellationToken::new());
        background.spawn(&mut workers);
        let harness = Self {
            ctx: Arc::new(ctx),
            requests,
            background: workers,
        };
        (harness, script)
    }

    async fn reconcile(&self, cj: CronJob) -> Result<Action, Error> {
        tokio::time::timeout(
            Duration::from_secs(2),
            reconcile(cached(&cj), self.ctx.clone()),
        )
        .await
        .expect("reconcile finishes")
    }

    /// Stop the background workers, then wait for the script's verdict.
    async fn verdict(self, server: tokio::task::JoinHandle<()>) -> Arc<Context> {
        // Let queued background work reach the mock before stopping.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.background.stop().cancel();
        self.background
            .supervise()
            .await
            .expect("background workers");
        server.await.expect("requests as scripted");
        self.ctx
    }
}

/// What the CronJob cache would hold of `cj`.
fn cached(cj: &CronJob) -> Arc<CachedCronJob> {
    Arc::new(CachedCronJob::of(cj).expect("cached"))
}

/// The dry-run create that checks the template of a generation not checked yet (a batch/v1
/// CronJob carrying it); answered as the API server does for a valid one.
fn dry_run() -> Expect {
    Expect::post(BATCH_CRONJOBS)
        .query("&dryRun=All")
        .check(|b| {
            assert_eq!(
                b["metadata"]["generateName"],
                crate::workload::dry_run::PROBE_NAME_PREFIX
            );
            assert_eq!(
                b["spec"]["schedule"],
                crate::workload::dry_run::PROBE_SCHEDULE
            );
            assert_eq!(
                b["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"],
                "busybox"
            );
        })
}

/// An Event on the CronJob with this reason and type, sent by a background worker.
fn event(reason: &'static str, type_: &'static str) -> Expect {
    Expect::post(EVENTS)
        .check(move |b| {
            assert_eq!(b["reason"], reason);
            assert_eq!(b["type"], type_);
            assert_eq!(b["reportingController"], "kronjob");
            assert_eq!(b["regarding"]["name"], "cj");
        })
        .unordered()
}

/// The status write: conditional on the resourceVersion it was planned from; answered with
/// the CronJob at resourceVersion `2`.
fn status_patch(check: impl Fn(&Value) + Send + 'static) -> Expect {
    Expect::patch(STATUS)
        .answer(move |body| {
            assert_eq!(
                body["metadata"]["resourceVersion"], "1",
                "conditional write"
            );
            check(&body["status"]);
            let mut cj = serde_json::to_value(cronjob("0 * * * *")).expect("json");
            cj["status"] = body["status"].clone();
            cj["metadata"]["resourceVersion"] = json!("2");
            (StatusCode::OK, cj)
        })
        .unordered()
}

mod upstream;

#[tokio::test]
async fn the_slot_job_is_created_first_then_event_and_one_status_write() {
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        dry_run(),
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
    // The reconcile returns once the Job is created: the Event and the status go later.
    let action = h.reconcile(cronjob("0 * * * *")).await.expect("reconcile");
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(59 * 60) + plan::NEXT_SCHEDULE_DELTA)
    );
    let ctx = h.verdict(server).await;
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
    assert_eq!(ctx.metrics.jobs_created.get(), 1);
}

#[tokio::test]
async fn sharded_a_cronjob_another_replica_schedules_is_left_alone() {
    use crate::controller::shard::{Assignment, ShardView};
    let members = ["kronjob-a", "kronjob-b"].map(String::from);
    let owner = Assignment::new("", members.clone())
        .owner("ns/cj")
        .expect("an owner")
        .to_string();
    let other = members.iter().find(|m| **m != owner).expect("two");
    for me in [other.as_str(), "not-yet-a-member"] {
        let (_publish, view) =
            tokio::sync::watch::channel(Arc::new(Assignment::new(me, members.clone())));
        let shard = ShardView::sharded(view, Default::default());
        let (h, script) = Harness::with_shard(vec![], shard);
        let server = script.run(vec![]);
        let action = h.reconcile(cronjob("0 * * * *")).await.expect("reconcile");
        assert_eq!(action, Action::await_change(), "{me}");
        assert_eq!(
            h.ctx.metrics.reconciles.get(),
            0,
            "not counted as a reconcile"
        );
        h.verdict(server).await;
    }
}

#[tokio::test]
async fn a_standby_reconciles_nothing_until_it_leads_then_runs_the_due_slot() {
    use crate::controller::shard::ShardView;
    let (leads, leading) = tokio::sync::watch::channel(false);
    let shard = ShardView::solo(Default::default()).led_by(leading);
    let (h, script) = Harness::with_shard(vec![], shard);
    let server = script.run(vec![
        dry_run(),
        Expect::post(JOBS),
        event("SuccessfulCreate", "Normal"),
        status_patch(|_| {}),
    ]);
    let action = h.reconcile(cronjob("0 * * * *")).await.expect("standby");
    assert_eq!(action, Action::await_change(), "a standby only watches");
    assert_eq!(h.ctx.metrics.reconciles.get(), 0);
    leads.send_replace(true);
    h.reconcile(cronjob("0 * * * *")).await.expect("leading");
    h.verdict(server).await;
}

#[tokio::test]
async fn a_second_reconcile_on_a_stale_cache_makes_no_request() {
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        dry_run(),
        Expect::post(JOBS),
        event("SuccessfulCreate", "Normal"),
        status_patch(|_| {}),
    ]);
    let cached = cronjob("0 * * * *");
    h.reconcile(cached.clone()).await.expect("first");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The cache still holds the CronJob as it was, and the Job's watch event has not come:
    // the reconcile sees the Job it created and the status it wrote, and does nothing.
    h.reconcile(cached).await.expect("second");
    h.verdict(server).await;
}

#[tokio::test]
async fn already_exists_and_owned_is_adopted() {
    let (h, script) = Harness::new(vec![]);
    let existing = serde_json::to_value(job(SLOT_JOB).scheduled()).expect("json");
    let server = script.run(vec![
        dry_run(),
        Expect::post(JOBS).fails(StatusCode::CONFLICT, "AlreadyExists"),
        Expect::get(&format!("{JOBS}/{SLOT_JOB}")).ok(existing),
        status_patch(|s| {
            assert_eq!(s["active"][0]["uid"], format!("{SLOT_JOB}-uid"));
            assert_eq!(s["lastScheduleTime"], "2016-05-19T10:00:00Z");
        }),
    ]);
    h.reconcile(cronjob("0 * * * *")).await.expect("reconcile");
    h.verdict(server).await;
}

#[tokio::test]
async fn already_exists_not_owned_warns_and_records_no_slot() {
    let (h, script) = Harness::new(vec![]);
    let stranger = serde_json::to_value(job(SLOT_JOB).owned_by("someone-else")).expect("json");
    let server = script.run(vec![
        dry_run(),
        Expect::post(JOBS).fails(StatusCode::CONFLICT, "AlreadyExists"),
        Expect::get(&format!("{JOBS}/{SLOT_JOB}")).ok(stranger),
        event("FailedCreate", "Warning"),
        status_patch(|s| {
            assert!(s["active"].is_null(), "no Job runs: no active list");
            assert!(s["lastScheduleTime"].is_null());
        }),
    ]);
    h.reconcile(cronjob("0 * * * *")).await.expect("reconcile");
    h.verdict(server).await;
}

#[tokio::test]
async fn replace_deletes_the_running_job_then_creates() {
    let running = job("cj-24394140").scheduled();
    let cj = cronjob("0 * * * *")
        .policy(ConcurrencyPolicy::Replace)
        .last_scheduled("2016-05-19T09:00:00Z")
        .running(&[&running]);
    let (h, script) = Harness::new(vec![running]);
    let server = script.run(vec![
        dry_run(),
        Expect::delete(&format!("{JOBS}/cj-24394140")).check(|b| {
            assert_eq!(b["propagationPolicy"], "Background");
            assert_eq!(b["preconditions"]["uid"], "cj-24394140-uid");
        }),
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], SLOT_JOB)),
        event("SuccessfulDelete", "Normal"),
        event("SuccessfulCreate", "Normal"),
        status_patch(|s| {
            assert_eq!(s["activeCount"], 1);
            assert_eq!(s["active"][0]["uid"], format!("{SLOT_JOB}-uid"));
            assert_eq!(s["lastScheduleTime"], "2016-05-19T10:00:00Z");
        }),
    ]);
    h.reconcile(cj).await.expect("reconcile");
    let ctx = h.verdict(server).await;
    assert_eq!(ctx.metrics.deleted(metrics::DELETED_REPLACE).get(), 1);
    assert_eq!(ctx.metrics.deleted(metrics::DELETED_HISTORY).get(), 0);
    assert_eq!(ctx.metrics.jobs_created.get(), 1);
}

/// Issue: a failed delete of the active Job under Replace recorded the slot and emptied
/// `active` although no new Job existed. The slot must stay due and the old Job listed.
#[tokio::test]
async fn replace_whose_delete_fails_keeps_the_slot_due_and_the_old_job_listed() {
    let running = job("cj-24394140").scheduled();
    let cj = cronjob("0 * * * *")
        .policy(ConcurrencyPolicy::Replace)
        .last_scheduled("2016-05-19T09:00:00Z")
        .running(&[&running]);
    let (h, script) = Harness::new(vec![running]);
    let server = script.run(vec![
        dry_run(),
        Expect::delete(&format!("{JOBS}/cj-24394140"))
            .fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        event("FailedDelete", "Warning"),
        status_patch(|s| {
            assert_eq!(
                s["lastScheduleTime"], "2016-05-19T09:00:00Z",
                "slot not recorded"
            );
            assert_eq!(
                s["active"][0]["name"], "cj-24394140",
                "old Job still listed"
            );
            assert_eq!(s["activeCount"], 1);
        }),
    ]);
    let err = h.reconcile(cj).await.expect_err("the run failed");
    assert_eq!(err.category(), "api_server");
    let ctx = h.verdict(server).await;
    assert_eq!(ctx.metrics.deleted(metrics::DELETED_REPLACE).get(), 0);
    assert_eq!(ctx.metrics.jobs_created.get(), 0);
}

/// Issue: status was merge-patched with no precondition, so a stale reconcile could clear
/// newer status. The write carries the resourceVersion; on a conflict the writer reads the
/// CronJob fresh and asks for a new reconcile, which plans from the fresh copy.
#[tokio::test]
async fn a_conflicting_status_write_is_not_forced_but_read_fresh_and_replanned() {
    let cj = cronjob("0 * * * *").last_scheduled("2016-05-19T10:00:00Z");
    let mut fresh = serde_json::to_value(&cj).expect("json");
    fresh["metadata"]["resourceVersion"] = json!("7");
    fresh["status"]["lastSuccessfulTime"] = json!("2016-05-19T10:00:30Z");
    let (mut h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        dry_run(),
        Expect::patch(STATUS)
            .check(|b| assert_eq!(b["metadata"]["resourceVersion"], "1"))
            .fails(StatusCode::CONFLICT, "Conflict"),
        Expect::get(CRONJOB).ok(fresh),
    ]);
    h.reconcile(cj.clone()).await.expect("reconcile");
    let again = tokio::time::timeout(Duration::from_secs(2), h.requests.next())
        .await
        .expect("a new reconcile is asked for")
        .expect("channel open");
    assert_eq!(again, ObjectRef::from_obj(cached(&cj).as_ref()));
    // The replanning sees the fresh copy through the stale cache, newer status included.
    let view = h.ctx.status.view(cached(&cj)).cronjob;
    assert_eq!(view.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(
        view.status_fields()
            .and_then(|s| s.last_successful_time.as_ref())
            .map(|t| t.0),
        Some(t("2016-05-19T10:00:30Z"))
    );
    h.verdict(server).await;
}

#[tokio::test]
async fn history_beyond_the_limit_is_deleted_in_the_background() {
    let cj = cronjob("0 * * * *")
        .history(1, 1)
        .last_scheduled("2016-05-19T10:00:00Z");
    let old = job("cj-old")
        .started_at("2016-05-19T08:00:05Z")
        .complete_at("2016-05-19T08:00:05Z");
    let new = job("cj-new")
        .started_at("2016-05-19T09:00:05Z")
        .complete_at("2016-05-19T09:00:05Z");
    let (h, script) = Harness::new(vec![old, new]);
    let server = script.run(vec![
        dry_run(),
        Expect::delete(&format!("{JOBS}/cj-old"))
            .check(|b| assert_eq!(b["propagationPolicy"], "Background"))
            .unordered(),
        event("SuccessfulDelete", "Normal"),
        status_patch(|s| assert_eq!(s["lastSuccessfulTime"], "2016-05-19T09:00:05Z")),
    ]);
    h.reconcile(cj).await.expect("reconcile");
    let ctx = h.verdict(server).await;
    assert!(
        ctx.index
            .get(&WorkloadType::job(), "ns", "cj-old")
            .is_none(),
        "forgotten once deleted"
    );
    assert_eq!(ctx.metrics.deleted(metrics::DELETED_HISTORY).get(), 1);
}

/// The Job controller dates `completionTime` by when the success criteria were met and adds
/// `Complete` once no Pod terminates, which can be a second later: `lastSuccessfulTime` is the
/// `completionTime`, read through the owner index.
#[tokio::test]
async fn a_success_is_dated_by_completion_time_not_the_complete_condition() {
    let cj = cronjob("0 * * * *").last_scheduled("2016-05-19T10:00:00Z");
    let done = job("cj-done")
        .started_at("2016-05-19T09:00:00Z")
        .complete_at("2016-05-19T09:00:06Z")
        .completion_time("2016-05-19T09:00:05Z");
    let (h, script) = Harness::new(vec![done]);
    let server = script.run(vec![
        dry_run(),
        status_patch(|s| assert_eq!(s["lastSuccessfulTime"], "2016-05-19T09:00:05Z")),
    ]);
    h.reconcile(cj).await.expect("reconcile");
    h.verdict(server).await;
}

#[tokio::test]
async fn no_request_when_nothing_changed() {
    let cj = cronjob("0 * * * *").last_scheduled("2016-05-19T10:00:00Z");
    let settled = plan::plan(&cj, &[], t(NOW), &PlanConfig::default());
    let cj = cj.status(settled.status);
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![]);
    h.reconcile(cj).await.expect("reconcile");
    h.verdict(server).await;
}

#[tokio::test]
async fn a_failed_create_records_no_slot_and_retries_no_later_than_the_next_slot() {
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        dry_run(),
        Expect::post(JOBS).fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        event("FailedCreate", "Warning"),
        // The status still gets written (conditions, nextScheduleTime) but not the slot.
        status_patch(|s| assert!(s["lastScheduleTime"].is_null())),
    ]);
    let cj = cronjob("0 * * * *");
    let err = h.reconcile(cj.clone()).await.expect_err("error");
    let cj = cached(&cj);
    assert_eq!(err.category(), "api_server");
    let key = ObjectRef::from_obj(cj.as_ref());
    let first = error_policy(cj.clone(), &err, h.ctx.clone());
    assert_ne!(first, Action::await_change());
    assert_eq!(h.ctx.failures.get(&key), 1);
    // Long outage: the backoff would be minutes, but the next slot (11:00) is 59 min away at
    // most... and for an every-minute schedule, under a minute.
    for _ in 0..20 {
        h.ctx.failures.record(&key);
    }
    let every_minute = cached(&cronjob("* * * * *"));
    let capped = error_policy(every_minute, &err, h.ctx.clone());
    assert_eq!(
        capped,
        Action::requeue(Duration::from_secs(60) + plan::NEXT_SCHEDULE_DELTA),
        "never past the next slot (10:02:00, 60 s after the clock's 10:01:00)"
    );
    h.verdict(server).await;
}

#[tokio::test(start_paused = true)]
async fn a_create_held_by_the_api_server_does_not_push_the_next_slot_back() {
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        dry_run(),
        // etcd away: the API server answers the create 20 s later.
        Expect::post(JOBS).after(Duration::from_secs(20)),
        event("SuccessfulCreate", "Normal"),
        status_patch(|s| assert_eq!(s["lastScheduleTime"], "2016-05-19T10:00:00Z")),
    ]);
    let action = reconcile(cached(&cronjob("0 * * * *")), h.ctx.clone())
        .await
        .expect("reconcile");
    // Planned at 10:01:00 for 11:00:00; 20 s of it went by waiting.
    assert_eq!(
        action,
        Action::requeue(
            Duration::from_secs(59 * 60) + plan::NEXT_SCHEDULE_DELTA - Duration::from_secs(20)
        )
    );
    h.verdict(server).await;
}

#[tokio::test]
async fn a_recovered_watch_asks_for_every_failed_cronjob_at_once() {
    let (mut h, script) = Harness::new(vec![]);
    let server = script.run(vec![]);
    let a = ObjectRef::<CachedCronJob>::new("a").within("ns");
    let b = ObjectRef::<CachedCronJob>::new("b").within("ns");
    h.ctx.failures.record(&a);
    h.ctx.failures.record(&b);
    let mut watch = driver::recovery::<(), &str>(h.ctx.clone());
    watch(&Ok(()));
    watch(&Err("connection refused"));
    watch(&Err("connection refused"));
    assert!(
        h.requests.try_recv().is_err(),
        "nothing while the API server is away"
    );
    watch(&Ok(()));
    let mut asked = vec![
        h.requests.next().await.expect("a"),
        h.requests.next().await.expect("b"),
    ];
    asked.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(asked, [a, b]);
    watch(&Ok(()));
    assert!(h.requests.try_recv().is_err(), "only once per recovery");
    h.verdict(server).await;
}

/// A CronJob with nothing due at [`NOW`] and its status settled, asking for a manual run.
fn triggered(request: &str) -> CronJob {
    let cj = cronjob("0 * * * *").last_scheduled("2016-05-19T10:00:00Z");
    let settled = plan::plan(&cj, &[], t(NOW), &PlanConfig::default());
    let mut cj = cj.status(settled.status);
    cj.metadata
        .annotations
        .get_or_insert_default()
        .insert(crate::api::ANNOTATION_TRIGGER.into(), request.into());
    cj
}

/// The JSON patch that removes the request only while it is unchanged.
fn request_removed(request: &'static str) -> Expect {
    let path = "/metadata/annotations/batch.kronjob.dev~1trigger";
    Expect::patch(CRONJOB)
        .body(json!([
            {"op": "test", "path": path, "value": request},
            {"op": "remove", "path": path},
        ]))
        .ok(serde_json::to_value(cronjob("0 * * * *")).expect("json"))
}

#[tokio::test]
async fn a_manual_request_creates_its_job_with_the_default_ttl_then_removes_the_request() {
    const REQUEST: &str = "2016-05-19T10:00:30Z";
    let config = PlanConfig {
        default_job_ttl: Some(600),
    };
    let (h, script) = Harness::with_config(vec![], config);
    let server = script.run(vec![
        Expect::post(JOBS).check(|b| {
            assert_eq!(b["metadata"]["name"], "cj-mo7f54u");
            assert_eq!(
                b["metadata"]["annotations"]["batch.kronjob.dev/instantiate"],
                "manual"
            );
            assert_eq!(b["metadata"]["ownerReferences"][0]["uid"], "cj-uid");
            assert_eq!(b["spec"]["ttlSecondsAfterFinished"], 600);
        }),
        request_removed(REQUEST),
        event("SuccessfulCreate", "Normal"),
    ]);
    let action = h.reconcile(triggered(REQUEST)).await.expect("reconcile");
    assert_ne!(
        action,
        Action::await_change(),
        "still waits for the next slot"
    );
    let ctx = h.verdict(server).await;
    assert!(
        ctx.index
            .get(&WorkloadType::job(), "ns", "cj-mo7f54u")
            .is_some(),
        "known at once"
    );
}

#[tokio::test]
async fn a_manual_request_whose_job_exists_is_only_removed() {
    const REQUEST: &str = "2016-05-19T10:00:30Z";
    let (h, script) = Harness::new(vec![job("cj-mo7f54u").manual()]);
    let server = script.run(vec![
        request_removed(REQUEST),
        // The running manual run joins the active list, as any Job the CronJob controls.
        status_patch(|s| assert_eq!(s["active"][0]["name"], "cj-mo7f54u")),
    ]);
    h.reconcile(triggered(REQUEST)).await.expect("reconcile");
    h.verdict(server).await;
}

#[tokio::test]
async fn a_failed_manual_create_keeps_the_request_and_is_retried() {
    const REQUEST: &str = "2016-05-19T10:00:30Z";
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        Expect::post(JOBS).fails(StatusCode::FORBIDDEN, "Forbidden"),
        event("FailedCreate", "Warning"),
    ]);
    let err = h.reconcile(triggered(REQUEST)).await.expect_err("fails");
    assert_eq!(err.category(), "api_forbidden");
    h.verdict(server).await;
}

#[tokio::test]
async fn a_manual_run_the_api_refuses_as_invalid_warns_and_drops_the_request() {
    const REQUEST: &str = "2016-05-19T10:00:30Z";
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        Expect::post(JOBS).fails(StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
        request_removed(REQUEST),
        event("FailedCreate", "Warning"),
    ]);
    h.reconcile(triggered(REQUEST)).await.expect("not retried");
    h.verdict(server).await;
}

#[tokio::test]
async fn a_request_replaced_meanwhile_is_left_for_the_next_reconcile() {
    const REQUEST: &str = "2016-05-19T10:00:30Z";
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        Expect::post(JOBS),
        Expect::patch(CRONJOB).fails(StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
        event("SuccessfulCreate", "Normal"),
    ]);
    h.reconcile(triggered(REQUEST))
        .await
        .expect("a failed test op is no error");
    h.verdict(server).await;
}

#[tokio::test]
async fn a_request_for_a_later_time_makes_no_request_and_looks_again_at_its_time() {
    // NOW is 10:01:00; the run is asked for 10:01:30, the next slot is 11:00.
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![]);
    let action = h
        .reconcile(triggered("2016-05-19T10:01:30Z"))
        .await
        .expect("reconcile");
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(30) + plan::NEXT_SCHEDULE_DELTA)
    );
    h.verdict(server).await;
}

#[tokio::test]
async fn a_due_request_with_another_to_come_creates_one_job_and_keeps_the_other() {
    const REQUEST: &str = "2016-05-19T10:00:30Z,2016-05-19T10:30:00Z";
    let path = "/metadata/annotations/batch.kronjob.dev~1trigger";
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], "cj-mo7f54u")),
        Expect::patch(CRONJOB)
            .body(json!([
                {"op": "test", "path": path, "value": REQUEST},
                {"op": "replace", "path": path, "value": "2016-05-19T10:30:00Z"},
            ]))
            .ok(serde_json::to_value(cronjob("0 * * * *")).expect("json")),
        event("SuccessfulCreate", "Normal"),
    ]);
    let action = h.reconcile(triggered(REQUEST)).await.expect("reconcile");
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(29 * 60) + plan::NEXT_SCHEDULE_DELTA),
        "looks again at 10:30"
    );
    h.verdict(server).await;
}

#[tokio::test]
async fn a_request_that_is_not_a_time_warns_once_and_is_removed() {
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        request_removed("now"),
        event("InvalidTrigger", "Warning"),
    ]);
    h.reconcile(triggered("now")).await.expect("reconcile");
    h.verdict(server).await;
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

/// The API server's answer to a Job without image, as it sends it (422 Invalid, one cause).
fn no_image(name: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 422,
        "reason": "Invalid",
        "message": format!("Job.batch {name:?} is invalid: spec.template.spec.containers[0].image: Required value"),
        "details": {"name": name, "group": "batch", "kind": "Job", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value",
             "field": "spec.template.spec.containers[0].image"}]}
    })
}

const REFUSED: &str =
    "invalid Job template: spec.template.spec.containers[0].image: Required value";

/// The dry run's refusal of a batch/v1 CronJob carrying a template without an image.
fn no_image_in_template() -> Value {
    let name = "kronjob-template-check-x7k2p";
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 422,
        "reason": "Invalid",
        "message": format!("CronJob.batch {name:?} is invalid: spec.jobTemplate.spec.template.spec.containers[0].image: Required value"),
        "details": {"name": name, "group": "batch", "kind": "CronJob", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value",
             "field": "spec.jobTemplate.spec.template.spec.containers[0].image"}]}
    })
}

const REFUSED_BY_DRY_RUN: &str =
    "invalid Job template: spec.jobTemplate.spec.template.spec.containers[0].image: Required value";

/// The one Warning of a refused template, with the API server's message.
fn refused_event(message: &'static str) -> Expect {
    Expect::post(EVENTS)
        .check(move |b| {
            assert_eq!(b["reason"], "InvalidJobTemplate");
            assert_eq!(b["type"], "Warning");
            assert_eq!(b["note"], message);
            assert_eq!(b["regarding"]["name"], "cj");
        })
        .unordered()
}

/// The status write on top of the CronJob at `rv`, answered with it at `rv + 1`.
fn status_patch_at(base: &CronJob, check: impl Fn(&Value) + Send + 'static) -> Expect {
    let base = base.clone();
    Expect::patch(STATUS)
        .answer(move |body| {
            let rv = base.metadata.resource_version.clone().unwrap_or_default();
            assert_eq!(body["metadata"]["resourceVersion"], rv.as_str());
            check(&body["status"]);
            let mut cj = serde_json::to_value(&base).expect("json");
            cj["status"] = body["status"].clone();
            let next = rv.parse::<u64>().expect("numeric resourceVersion") + 1;
            cj["metadata"]["resourceVersion"] = json!(next.to_string());
            (StatusCode::OK, cj)
        })
        .unordered()
}

fn without_image(mut cj: CronJob) -> CronJob {
    if let Some(spec) = cj.spec.job_template.as_mut().and_then(|t| t.spec.as_mut())
        && let Some(pod) = spec.template.spec.as_mut()
    {
        pod.containers[0].image = None;
    }
    cj
}

/// Issue: a template the API server refuses (webhook off) failed every slot with a 422. Its
/// generation is dry-run once: Ready=False InvalidJobTemplate with the API's message, one
/// Warning, no create and no requeue; the fixed spec (next generation) is checked and runs.
#[tokio::test]
async fn an_invalid_template_is_refused_once_per_generation_and_no_job_is_created() {
    let (h, script) = Harness::new(vec![]);
    let bad = without_image(cronjob("0 * * * *"));
    let mut fixed = cronjob("0 * * * *");
    fixed.metadata.generation = Some(2);
    fixed.metadata.resource_version = Some("3".into());
    let written = std::sync::Arc::new(std::sync::Mutex::new(Value::Null));
    let keep = written.clone();
    let server = script.run(vec![
        Expect::post(BATCH_CRONJOBS)
            .query("&dryRun=All")
            .check(|b| {
                let pod = &b["spec"]["jobTemplate"]["spec"]["template"]["spec"];
                assert!(pod["containers"][0]["image"].is_null());
            })
            .reply(StatusCode::UNPROCESSABLE_ENTITY, no_image_in_template()),
        refused_event(REFUSED_BY_DRY_RUN),
        status_patch_at(&bad, move |s| {
            let ready = &s["conditions"][0];
            assert_eq!(ready["type"], "Ready");
            assert_eq!(ready["status"], "False");
            assert_eq!(ready["reason"], "InvalidJobTemplate");
            assert_eq!(ready["message"], REFUSED_BY_DRY_RUN);
            assert_eq!(ready["observedGeneration"], 1);
            assert!(s["lastScheduleTime"].is_null());
            assert!(s["nextScheduleTime"].is_null());
            *keep.lock().expect("lock") = s.clone();
        }),
        // Generation 2: checked once, then the due slot runs.
        dry_run(),
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], SLOT_JOB)),
        event("SuccessfulCreate", "Normal"),
        status_patch_at(&fixed, |s| {
            assert_eq!(s["conditions"][0]["reason"], "Scheduled");
            assert_eq!(s["conditions"][0]["observedGeneration"], 2);
            assert_eq!(s["lastScheduleTime"], "2016-05-19T10:00:00Z");
        }),
    ]);
    let action = h.reconcile(bad.clone()).await.expect("reconcile");
    assert_eq!(
        action,
        Action::await_change(),
        "no requeue until the spec changes"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Again on the same generation (a Job event, a resync): no request at all.
    for _ in 0..3 {
        let action = h.reconcile(bad.clone()).await.expect("again");
        assert_eq!(action, Action::await_change());
    }
    let mut status = written.lock().expect("lock").clone();
    if let Some(fields) = status.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    let fixed = fixed.status(serde_json::from_value(status).expect("status"));
    let action = h.reconcile(fixed).await.expect("fixed");
    assert_ne!(action, Action::await_change());
    let ctx = h.verdict(server).await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("checks", "checks", ctx.metrics.template_dry_runs.clone());
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
    assert!(out.contains("checks_total{result=\"invalid\"} 1"), "{out}");
    assert!(out.contains("checks_total{result=\"valid\"} 1"), "{out}");
}

/// A dry run that says nothing about the template (the API server failing, a quota, another
/// webhook, a timeout) does not stop the slot.
#[tokio::test]
async fn a_dry_run_without_verdict_lets_the_slot_run() {
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        Expect::post(BATCH_CRONJOBS)
            .query("&dryRun=All")
            .fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], SLOT_JOB)),
        event("SuccessfulCreate", "Normal"),
        status_patch(|s| {
            assert_eq!(s["conditions"][0]["reason"], "Scheduled");
            assert_eq!(s["lastScheduleTime"], "2016-05-19T10:00:00Z");
        }),
    ]);
    h.reconcile(cronjob("0 * * * *")).await.expect("reconcile");
    h.verdict(server).await;
}

/// A generation checked before (its status says so, e.g. before a restart) is not dry-run
/// again; a create refused as invalid anyway is reported as InvalidJobTemplate (not
/// FailedCreate), once, and not retried.
#[tokio::test]
async fn a_create_refused_as_invalid_stops_the_generation_without_retries() {
    let checked = cronjob("0 * * * *").last_scheduled("2016-05-19T09:00:00Z");
    let earlier = t("2016-05-19T09:30:00Z");
    let settled = plan::plan(&checked, &[], earlier, &PlanConfig::default());
    assert_eq!(
        plan::recorded_template_check(&checked.clone().status(settled.status.clone())),
        plan::TemplateCheck::Passed
    );
    let bad = without_image(checked).status(settled.status);
    let (h, script) = Harness::new(vec![]);
    let server = script.run(vec![
        Expect::post(JOBS)
            .check(|b| assert_eq!(b["metadata"]["name"], SLOT_JOB))
            .reply(StatusCode::UNPROCESSABLE_ENTITY, no_image(SLOT_JOB)),
        refused_event(REFUSED),
        status_patch(|s| {
            assert_eq!(s["conditions"][0]["status"], "False");
            assert_eq!(s["conditions"][0]["reason"], "InvalidJobTemplate");
            assert_eq!(s["lastScheduleTime"], "2016-05-19T09:00:00Z");
            assert!(s["nextScheduleTime"].is_null());
        }),
    ]);
    let action = h.reconcile(bad.clone()).await.expect("not an error");
    assert_eq!(action, Action::await_change());
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.reconcile(bad).await.expect("again");
    let ctx = h.verdict(server).await;
    assert_eq!(ctx.failures.get(&ObjectRef::new("cj").within("ns")), 0);
}

/// The failure policy's suspension: the generation-guarded spec patch, then the status on top
/// of the patched CronJob (its resourceVersion the precondition, not the cached one); a
/// reconcile on the cache that still shows the CronJob from before the patch plans from the
/// patched CronJob and its written status, and makes no request.
#[tokio::test]
async fn the_failure_policys_suspension_writes_the_status_on_the_patched_version() {
    let failed = job("a").scheduled().failed_at("2016-05-19T10:00:30Z");
    let mut cj = cronjob("0 * * * *")
        .last_scheduled("2016-05-19T10:00:00Z")
        .suspend_after(1);
    cj.metadata.generation = Some(1);
    cj.status
        .get_or_insert_default()
        .set_active(vec![crate::workload::Workload::of_job(&failed).reference()]);
    let mut patched = serde_json::to_value(&cj).expect("json");
    patched["spec"]["suspend"] = json!(true);
    patched["metadata"]["generation"] = json!(2);
    patched["metadata"]["resourceVersion"] = json!("5");
    let answer = patched.clone();
    let (h, script) = Harness::new(vec![failed]);
    let server = script.run(vec![
        Expect::patch(CRONJOB).answer(move |body| {
            assert_eq!(
                *body,
                json!([
                    {"op": "test", "path": "/metadata/generation", "value": 1},
                    {"op": "add", "path": "/spec/suspend", "value": true}
                ])
            );
            (StatusCode::OK, answer.clone())
        }),
        event("SuspendedAfterFailures", "Warning"),
        event("SawCompletedJob", "Normal"),
        Expect::patch(STATUS)
            .answer(move |body| {
                assert_eq!(
                    body["metadata"]["resourceVersion"], "5",
                    "the patched version"
                );
                assert_eq!(body["status"]["consecutiveFailures"], 1);
                assert_eq!(body["status"]["observedGeneration"], 2);
                // As the API server applies a merge patch: a null removes the field.
                let mut written = patched.clone();
                json_patch::merge(&mut written["status"], &body["status"]);
                written["metadata"]["resourceVersion"] = json!("6");
                (StatusCode::OK, written)
            })
            .unordered(),
    ]);
    h.reconcile(cj.clone()).await.expect("suspends");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The watch has shown neither the patch nor the status write: views show the patched
    // CronJob with the status planned on it (written on top of it by now, or about to be).
    h.reconcile(cj.clone()).await.expect("nothing more");
    let view = h.ctx.status.view(cached(&cj)).cronjob;
    assert_eq!(view.spec.suspend, Some(true));
    let planned = view.status.clone().expect("status");
    assert_eq!(planned.others().consecutive_failures, 1);
    let ctx = h.verdict(server).await;
    let view = ctx.status.view(cached(&cj)).cronjob;
    assert_eq!(view.metadata.resource_version.as_deref(), Some("6"));
    assert_eq!(
        view.spec.suspend,
        Some(true),
        "the patched spec, not the cache's"
    );
    assert_eq!(view.status, Some(planned));
}

/// A template found valid is not judged again for another CronJob of the namespace with the
/// same template (a manager starting on thousands of CronJobs made from one template sends one
/// dry run, not one each); a CronJob with another template is judged.
#[tokio::test]
async fn a_template_found_valid_is_not_judged_again_for_the_next_cronjob() {
    let (h, script) = Harness::new(vec![]);
    let other_status = |name: &'static str| {
        Expect::patch(&format!(
            "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/{name}/status"
        ))
        .answer(move |body| {
            let mut cj = serde_json::to_value(cronjob("0 * * * *")).expect("json");
            cj["metadata"]["name"] = json!(name);
            cj["status"] = body["status"].clone();
            cj["metadata"]["resourceVersion"] = json!("2");
            (StatusCode::OK, cj)
        })
        .unordered()
    };
    let server = script.run(vec![
        dry_run(),
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], SLOT_JOB)),
        event("SuccessfulCreate", "Normal"),
        status_patch(|_| {}),
        // The same template: no dry run.
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], "same-24394200")),
        Expect::post(EVENTS).unordered(),
        other_status("same"),
        // Another template: judged.
        Expect::post(BATCH_CRONJOBS).query("&dryRun=All"),
        Expect::post(JOBS).check(|b| assert_eq!(b["metadata"]["name"], "other-24394200")),
        Expect::post(EVENTS).unordered(),
        other_status("other"),
    ]);
    let named = |name: &str, image: &str| {
        let mut cj = cronjob("0 * * * *");
        cj.metadata.name = Some(name.into());
        cj.metadata.uid = Some(format!("{name}-uid"));
        if let Some(c) = cj
            .spec
            .job_template
            .as_mut()
            .and_then(|t| t.spec.as_mut())
            .and_then(|s| s.template.spec.as_mut())
            .and_then(|p| p.containers.first_mut())
        {
            c.image = Some(image.into());
        }
        cj
    };
    // Each after the one before has sent its Event and status (the script's order).
    h.reconcile(cronjob("0 * * * *")).await.expect("first");
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.reconcile(named("same", "busybox"))
        .await
        .expect("same template");
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.reconcile(named("other", "alpine"))
        .await
        .expect("another template");
    h.verdict(server).await;
}
