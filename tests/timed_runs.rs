//! Runs asked for at a later time (`kubectl kronjob trigger --at` / `--in`) against the
//! simulated API server, under paused time: no Job before its time, one create at it and one
//! rewrite of the request; the request lives in the CronJob, so a manager that restarts before
//! the time still runs it at its time, and one that dies between the create and the rewrite
//! creates nothing twice. The CronJob is suspended: a run asked for runs all the same.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use kronjob::api::ANNOTATION_TRIGGER;
use kronjob::workload::manual_name;
use kronjob_apisim::{ApiSim, CostModel};
use serde_json::Value;
use support::fixtures::t;
use support::sim::{
    TokioClock, created_jobs, cronjob_json, cronjobs, record_calls, sim_clock, synced_controller,
};

const NS: &str = "timed";
const START: &str = "2024-01-01T09:59:30Z";
const T1: &str = "2024-01-01T10:01:00Z";
const T2: &str = "2024-01-01T10:03:00Z";

fn seed(sim: &ApiSim) {
    let mut cj = cronjob_json(NS, "cj", "0 0 1 1 *", "2024-01-01T09:00:00Z", None);
    cj["spec"]["suspend"] = true.into();
    cj["metadata"]["annotations"] = serde_json::json!({ANNOTATION_TRIGGER: format!("{T2},{T1}")});
    sim.insert(cj);
}

fn request(sim: &ApiSim) -> Value {
    let cj = sim.get(&cronjobs(), Some(NS), "cj").expect("the CronJob");
    cj["metadata"]["annotations"][ANNOTATION_TRIGGER].clone()
}

/// Writes to the CronJob itself (not its status): the request's rewrites.
fn request_patches(sim: &ApiSim) -> usize {
    sim.requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.resource == "cronjobs" && r.status == 200)
        .count()
}

fn create_attempts(sim: &ApiSim) -> usize {
    sim.counts().get("create jobs").copied().unwrap_or(0)
}

/// Sleep (paused time) until the clock reads `at`.
async fn until(clock: &TokioClock, at: &str) {
    use kronjob::clock::Clock;
    let left = t(at).duration_since(clock.now());
    tokio::time::sleep(Duration::try_from(left).unwrap_or_default()).await;
}

async fn until_held(hold: &kronjob_apisim::Hold) {
    for _ in 0..600 {
        if hold.waiting() > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no request was held");
}

#[tokio::test(start_paused = true)]
async fn a_run_at_a_later_time_runs_at_it_once_across_restarts() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim);
    let (job1, job2) = (manual_name("cj", t(T1)), manual_name("cj", t(T2)));
    let running = synced_controller(&sim, &clock).await;
    until(&clock, "2024-01-01T10:00:59Z").await;
    assert!(created_jobs(&sim).is_empty(), "nothing before its time");
    assert_eq!(request_patches(&sim), 0);
    // At 10:01 the first runs; the request keeps the second.
    until(&clock, "2024-01-01T10:01:02Z").await;
    assert_eq!(created_jobs(&sim), std::slice::from_ref(&job1));
    assert_eq!(create_attempts(&sim), 1);
    assert_eq!(request(&sim), T2);
    assert_eq!(request_patches(&sim), 1, "one rewrite");
    // The manager restarts before the second's time: nothing runs early, nothing again.
    running.task.abort();
    let _ = running.task.await;
    let again = synced_controller(&sim, &clock).await;
    until(&clock, "2024-01-01T10:02:59Z").await;
    assert_eq!(created_jobs(&sim), std::slice::from_ref(&job1));
    assert_eq!(create_attempts(&sim), 1);
    // At 10:03 the second is created, and the manager dies before the request is rewritten.
    let hold = sim.hold("PATCH", "/cronjobs/cj");
    until(&clock, "2024-01-01T10:03:00Z").await;
    until_held(&hold).await;
    assert_eq!(created_jobs(&sim), [job1.clone(), job2.clone()]);
    again.task.abort();
    let _ = again.task.await;
    hold.fail();
    assert_eq!(request(&sim), T2, "the rewrite was lost");
    // The next manager finds its Job: it only removes the request.
    let third = synced_controller(&sim, &clock).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(created_jobs(&sim), [job1, job2]);
    assert_eq!(create_attempts(&sim), 2, "no create tried twice");
    assert_eq!(request(&sim), Value::Null, "removed");
    assert_eq!(request_patches(&sim), 2);
    record_calls(&sim);
    third.shut_down().await;
}
