//! The failure policy and several schedules through the real CronJob controller against the
//! simulated API server, under paused time, counting every write:
//!
//! - the scheduled Job that fails for the N-th time in a row costs one spec patch (the
//!   suspension) and the one status write a finished Job costs anyway, plus its two Events;
//!   no slot runs after it; a resume resets the count and runs the missed slot;
//! - two schedules that both match an instant make one Job.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use kronjob::api::CronJob;
use kronjob_apisim::{ApiSim, CostModel, Resource};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::fixtures::t;
use support::sim::{
    TokioClock, cronjob_json, cronjobs, record_calls, run_cronjob_controller, sim_clock, writes,
};

const NS: &str = "policy";
/// The clock starts half a minute after the 10:00 slot, whose Job runs.
const START: &str = "2024-01-01T10:00:30Z";
/// The Job of the 10:00 slot (minutes since the epoch).
const JOB: &str = "cj-28401720";

/// `* * * * *` with `suspendAfterConsecutiveFailures: 3`: two scheduled Jobs failed already,
/// the 10:00 slot's Job runs.
fn seed(sim: &ApiSim) -> Value {
    let mut cj = cronjob_json(
        NS,
        "cj",
        "* * * * *",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T10:00:00Z"),
    );
    cj["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": 3});
    let cj = sim.insert(cj);
    let uid = cj["metadata"]["uid"].as_str().expect("uid").to_string();
    sim.insert(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": JOB, "namespace": NS,
            "labels": {"batch.kronjob.dev/cronjob": "cj"},
            "annotations": {"batch.kronjob.dev/scheduled-at": "2024-01-01T10:00:00Z"},
            "ownerReferences": [{
                "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob", "name": "cj",
                "uid": uid, "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
        "status": {"active": 1, "startTime": "2024-01-01T10:00:01Z"}
    }));
    let job = sim.get(&Resource::jobs(), Some(NS), JOB).expect("the Job");
    let mut status = json!({
        "lastScheduleTime": "2024-01-01T10:00:00Z",
        "consecutiveFailures": 2,
        "active": [{"apiVersion": "batch/v1", "kind": "Job", "name": JOB, "namespace": NS,
                    "uid": job["metadata"]["uid"]}],
        "activeCount": 1,
    });
    status["conditions"] = json!([{
        "type": "Ready", "status": "True", "reason": "Scheduled", "message": "",
        "observedGeneration": cj["metadata"]["generation"],
        "lastTransitionTime": "2024-01-01T09:00:00Z"
    }]);
    let mut stored = cj.clone();
    stored["status"] = status;
    sim.insert(stored)
}

fn count(counts: &std::collections::BTreeMap<String, usize>, key: &str) -> usize {
    counts.get(key).copied().unwrap_or(0)
}

fn stored(sim: &ApiSim) -> Value {
    sim.get(&cronjobs(), Some(NS), "cj").expect("the CronJob")
}

#[tokio::test(start_paused = true)]
async fn the_third_failure_in_a_row_costs_one_spec_patch_and_the_status_write() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim);
    let mut running = run_cronjob_controller(&sim, clock, 4);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(5)).await;
    record_calls(&sim);
    sim.clear_requests();

    // 10:00:35: the running Job fails (the third scheduled failure in a row).
    assert!(sim.finish_job(NS, JOB, false));
    // Through 10:02:05: the 10:01 and 10:02 slots pass.
    tokio::time::sleep(Duration::from_secs(90)).await;
    let counts = writes(&sim);
    record_calls(&sim);
    assert_eq!(count(&counts, "patch cronjobs"), 1, "{counts:?}");
    assert_eq!(count(&counts, "patch cronjobs/status"), 1, "{counts:?}");
    assert_eq!(count(&counts, "create events"), 2, "{counts:?}");
    assert_eq!(
        counts.values().sum::<usize>(),
        4,
        "nothing else, no Job: {counts:?}"
    );
    let cj = stored(&sim);
    assert_eq!(cj["spec"]["suspend"], true);
    let status = &cj["status"];
    assert_eq!(status["consecutiveFailures"], 3, "{status}");
    assert!(status["nextScheduleTime"].is_null(), "{status}");
    assert_eq!(
        status["observedGeneration"], cj["metadata"]["generation"],
        "the status describes the suspended spec"
    );
    let ready = &status["conditions"][0];
    assert_eq!(ready["reason"], "SuspendedAfterFailures", "{ready}");
    assert_eq!(
        ready["message"],
        format!(
            "3 scheduled Jobs failed in a row, the last {JOB}: suspended by failurePolicy.suspendAfterConsecutiveFailures (3); resume to schedule again"
        )
    );
    let reasons: Vec<String> = sim
        .list(
            &Resource::new("events.k8s.io", "v1", "events", true),
            Some(NS),
        )
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap_or(""),
                e["reason"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(
        reasons.contains(&"Warning SuspendedAfterFailures".to_string()),
        "{reasons:?}"
    );
    assert_eq!(running.metrics.suspended_after_failures.get(), 1);

    // A resume resets the count and runs the most recent missed slot (10:02), once.
    sim.clear_requests();
    let api: Api<CronJob> = Api::namespaced(sim.client(), NS);
    api.patch(
        "cj",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .expect("resume");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let counts = writes(&sim);
    record_calls(&sim);
    assert_eq!(count(&counts, "create jobs"), 1, "{counts:?}");
    let jobs = sim.list(&Resource::jobs(), Some(NS));
    let names: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"cj-28401722"), "{names:?}");
    let status = &stored(&sim)["status"];
    assert!(status["consecutiveFailures"].is_null(), "reset: {status}");
    assert_eq!(status["conditions"][0]["reason"], "Scheduled", "{status}");
    assert_eq!(running.metrics.suspended_after_failures.get(), 1);
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn two_schedules_matching_one_minute_make_one_job() {
    let clock = TokioClock::new(t("2024-01-01T10:00:30Z"));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    let mut cj = cronjob_json(
        NS,
        "multi",
        "unused",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T10:00:00Z"),
    );
    let spec = cj["spec"].as_object_mut().expect("spec");
    spec.remove("schedule");
    spec.insert("schedules".into(), json!(["*/2 * * * *", "*/3 * * * *"]));
    sim.insert(cj);
    let running = run_cronjob_controller(&sim, clock, 4);
    // Through 10:12:10.
    tokio::time::sleep(Duration::from_secs(12 * 60 - 20)).await;
    record_calls(&sim);
    let mut minutes: Vec<i64> = sim
        .list(&Resource::jobs(), Some(NS))
        .iter()
        .filter_map(|j| {
            j["metadata"]["name"]
                .as_str()?
                .strip_prefix("multi-")?
                .parse()
                .ok()
        })
        .map(|m: i64| m - 28_401_720)
        .collect();
    minutes.sort_unstable();
    assert_eq!(
        minutes,
        [2, 3, 4, 6, 8, 9, 10, 12],
        "one Job per merged slot"
    );
    let counts = writes(&sim);
    assert_eq!(count(&counts, "create jobs"), 8, "{counts:?}");
    let status = &stored_named(&sim, "multi")["status"];
    assert_eq!(status["schedule"], "*/2 * * * * (+1)");
    assert_eq!(status["nextScheduleTime"], "2024-01-01T10:14:00Z");
    running.shut_down().await;
}

fn stored_named(sim: &ApiSim, name: &str) -> Value {
    sim.get(&cronjobs(), Some(NS), name).expect("the CronJob")
}
