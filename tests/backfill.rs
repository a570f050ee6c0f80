//! A backfill against the simulated API server, under paused time: the real CronJob controller
//! creates one Job per missed slot of the range (one POST each), oldest first, never more than
//! `parallel` unfinished; a restart in the middle creates no Job twice; the request is removed
//! when done; and the same range again, its Jobs deleted, creates nothing.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use kronjob::api::{ANNOTATION_BACKFILL, CronJob};
use kronjob::workload::backfill::Request;
use kronjob::workload::scheduled_name;
use kronjob_apisim::{ApiSim, CostModel, Resource};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::fixtures::t;
use support::sim::{
    TokioClock, created_jobs, cronjob_json, cronjobs, record_calls, sim_clock, synced_controller,
};

const NS: &str = "backfill";
const START: &str = "2024-01-01T10:00:25Z";

/// `* * * * *`, suspended (the schedule adds no Jobs), created at 09:00; its status knows the
/// slots up to the creation and 09:31-09:35 did not run (the manager was down).
fn seed(sim: &ApiSim) {
    let mut cj = cronjob_json(
        NS,
        "cj",
        "* * * * *",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T10:00:00Z"),
    );
    cj["spec"]["suspend"] = true.into();
    cj["spec"]["successfulJobsHistoryLimit"] = 0.into();
    cj["status"]["missed"] = json!([
        {"before": "2024-01-01T09:00:01Z"},
        {"after": "2024-01-01T09:30:00Z", "before": "2024-01-01T09:36:00Z"},
    ]);
    sim.insert(cj);
}

/// The Job names of the range's missed slots, oldest first: 08:57-09:00 and 09:31-09:35.
fn missed_jobs() -> Vec<String> {
    let minutes = [
        "08:57", "08:58", "08:59", "09:00", "09:31", "09:32", "09:33", "09:34", "09:35",
    ];
    minutes
        .iter()
        .map(|hm| scheduled_name("cj", t(&format!("2024-01-01T{hm}:00Z"))))
        .collect()
}

async fn ask(sim: &ApiSim, parallel: u32) -> String {
    let request = Request::new(
        t("2024-01-01T08:57:00Z"),
        t("2024-01-01T09:50:00Z"),
        parallel,
    )
    .expect("request")
    .value();
    let api: Api<CronJob> = Api::namespaced(sim.client(), NS);
    let patch = json!({"metadata": {"annotations": {ANNOTATION_BACKFILL: request}}});
    api.patch("cj", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("asked");
    request
}

fn requested(sim: &ApiSim) -> Option<String> {
    let cj = sim.get(&cronjobs(), Some(NS), "cj").expect("the CronJob");
    cj["metadata"]["annotations"][ANNOTATION_BACKFILL]
        .as_str()
        .map(String::from)
}

fn posts(sim: &ApiSim) -> usize {
    sim.requests()
        .into_iter()
        .filter(|r| r.verb == "create" && r.resource == "jobs")
        .count()
}

/// The created Jobs not finished yet.
fn unfinished(sim: &ApiSim) -> Vec<String> {
    sim.list(&Resource::jobs(), Some(NS))
        .into_iter()
        .filter(|j| {
            !j["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["status"] == "True"))
        })
        .filter_map(|j| j["metadata"]["name"].as_str().map(String::from))
        .collect()
}

fn events_with(sim: &ApiSim, reason: &str) -> Vec<String> {
    sim.list(
        &Resource::new("events.k8s.io", "v1", "events", true),
        Some(NS),
    )
    .into_iter()
    .filter(|e| e["reason"] == reason)
    .filter_map(|e| e["note"].as_str().map(String::from))
    .collect()
}

#[tokio::test(start_paused = true)]
async fn one_post_per_missed_slot_parallel_at_most_a_restart_and_the_repeat_create_nothing_twice() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim);
    let running = synced_controller(&sim, &clock).await;
    let want = missed_jobs();
    ask(&sim, 2).await;
    let mut most = 0;
    let mut restarted = None;
    let mut running = Some(running);
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let open = unfinished(&sim);
        most = most.max(open.len());
        assert!(open.len() <= 2, "{open:?} unfinished at once");
        let created = created_jobs(&sim);
        assert_eq!(
            created,
            want[..created.len()],
            "oldest first, each slot's name"
        );
        if created.len() == want.len() && open.is_empty() {
            break;
        }
        // Halfway, the process dies with its status writes: a new one takes over.
        if created.len() >= 4 && restarted.is_none() {
            // Its last status write never lands: the Jobs are the only record of their slots.
            let hold = sim.hold("PATCH", "/cronjobs/cj/status");
            for name in &open {
                assert!(sim.finish_job(NS, name, true));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            if let Some(old) = running.take() {
                old.task.abort();
                let _ = old.task.await;
            }
            hold.fail();
            running = Some(synced_controller(&sim, &clock).await);
            restarted = Some(created.len());
            continue;
        }
        for name in open {
            assert!(sim.finish_job(NS, &name, true));
        }
    }
    assert!(restarted.is_some(), "the restart happened");
    assert_eq!(most, 2, "two at once");
    assert_eq!(created_jobs(&sim), want, "every missed slot, once");
    assert_eq!(
        posts(&sim),
        want.len(),
        "one POST per slot: {:?}",
        sim.counts()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(requested(&sim), None, "the request is removed when done");
    let done = events_with(&sim, "BackfillDone");
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(done[0].contains("9 Jobs created"), "{done:?}");

    // History 0: the finished Jobs are gone. The same range again creates nothing.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        sim.list(&Resource::jobs(), Some(NS)).is_empty(),
        "history 0 deleted them"
    );
    ask(&sim, 2).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(posts(&sim), want.len(), "the repeat created nothing");
    assert_eq!(requested(&sim), None);
    let done = events_with(&sim, "BackfillDone");
    assert!(
        done.iter()
            .any(|n| n.contains("0 Jobs created, 54 slots already run")),
        "{done:?}"
    );
    record_calls(&sim);
    if let Some(r) = running {
        r.shut_down().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_the_api_server_refuses_ends_the_request_with_a_warning() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim);
    let running = synced_controller(&sim, &clock).await;
    sim.set_validator(
        &Resource::jobs(),
        std::sync::Arc::new(|_: &serde_json::Value| {
            Err(kronjob_apisim::Invalid::field(
                "spec.template.spec.containers[0].image",
                "FieldValueRequired",
                "Required value",
            ))
        }),
    );
    ask(&sim, 3).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        posts(&sim),
        1,
        "one refused create, not retried: {:?}",
        sim.counts()
    );
    assert!(created_jobs(&sim).is_empty());
    assert_eq!(requested(&sim), None, "the request is removed");
    let failed = events_with(&sim, "FailedCreate");
    assert!(
        failed
            .iter()
            .any(|n| n.contains("(backfill)") && n.contains("Required value")),
        "{failed:?}"
    );
    record_calls(&sim);
    running.shut_down().await;
}
