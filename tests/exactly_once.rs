//! A slot runs once, whatever comes between its Job's create and the status write that records
//! it: the real CronJob controller against the simulated API server, under paused time, with
//! the status write held back (it lags), refused (a conflict), or lost with the process (a
//! restart), and the slot's Job deleted meanwhile. In every case exactly one Job is created per
//! slot, and the status ends up recording the slot.

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use kronjob::api::CronJob;
use kronjob_apisim::{ApiSim, CostModel, Fault, Resource};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::fixtures::t;
use support::sim::{
    Running, TokioClock, created_jobs, cronjob_json, cronjobs, record_calls, sim_clock,
    synced_controller,
};

const NS: &str = "once";
/// 25 s after the 10:00 slot, which the status records: 30 s once the controller runs.
const START: &str = "2024-01-01T10:00:25Z";
/// The Job of the 10:01 slot (minutes since the epoch).
const JOB_1001: &str = "cj-28401721";
const SLOT_1001: &str = "2024-01-01T10:01:00Z";
const STATUS: &str = "/cronjobs/cj/status";

/// `* * * * *`, its 10:00 slot recorded, no history kept: a finished Job is deleted at once.
fn seed(sim: &ApiSim) {
    let mut cj = cronjob_json(
        NS,
        "cj",
        "* * * * *",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T10:00:00Z"),
    );
    cj["spec"]["successfulJobsHistoryLimit"] = 0.into();
    cj["spec"]["failedJobsHistoryLimit"] = 0.into();
    sim.insert(cj);
}

/// A simulated API server, seeded, and the controller running on it with its caches synced.
async fn start() -> (ApiSim, std::sync::Arc<TokioClock>, Running) {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim);
    let running = synced_controller(&sim, &clock).await;
    (sim, clock, running)
}

fn counts(sim: &ApiSim) -> BTreeMap<String, usize> {
    sim.counts()
}

fn count(sim: &ApiSim, key: &str) -> usize {
    counts(sim).get(key).copied().unwrap_or(0)
}

/// The answers to the status writes, in order.
fn status_writes(sim: &ApiSim) -> Vec<u16> {
    sim.requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.resource == "cronjobs/status")
        .map(|r| r.status)
        .collect()
}

fn last_schedule_time(sim: &ApiSim) -> Value {
    let cj = sim.get(&cronjobs(), Some(NS), "cj").expect("the CronJob");
    cj["status"]["lastScheduleTime"].clone()
}

fn job_exists(sim: &ApiSim, name: &str) -> bool {
    sim.get(&Resource::jobs(), Some(NS), name).is_some()
}

/// Sleep (paused time) until `hold` holds a request.
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
async fn a_status_write_that_lags_never_lets_a_deleted_job_run_its_slot_again() {
    let (sim, _clock, running) = start().await;
    let hold = sim.hold("PATCH", STATUS);
    // 10:01: the slot's Job is created; its status write waits.
    tokio::time::sleep(Duration::from_secs(31)).await;
    until_held(&hold).await;
    assert_eq!(created_jobs(&sim), [JOB_1001]);
    // Meanwhile a user labels the CronJob (the cache moves past the version the waiting write
    // was planned on) and deletes the Job; the deletion reaches the controller, which plans
    // again from the cache: neither the status nor the Jobs say the slot ran.
    let api: Api<CronJob> = Api::namespaced(sim.client(), NS);
    let label = json!({"metadata": {"labels": {"team": "b"}}});
    api.patch("cj", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("labelled");
    sim.remove(&Resource::jobs(), Some(NS), JOB_1001)
        .expect("the Job");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        created_jobs(&sim),
        [JOB_1001],
        "the slot ran again: {:?}",
        counts(&sim)
    );
    // The waiting write is refused (the label moved the version) and written again.
    hold.release();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(last_schedule_time(&sim), SLOT_1001);
    assert_eq!(status_writes(&sim)[1], 409, "{:?}", status_writes(&sim));
    // The next slot runs, once.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(created_jobs(&sim), [JOB_1001, "cj-28401722"]);
    record_calls(&sim);
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn a_status_write_refused_with_a_conflict_never_lets_a_deleted_job_run_its_slot_again() {
    let (sim, _clock, running) = start().await;
    let hold = sim.hold("PATCH", STATUS);
    tokio::time::sleep(Duration::from_secs(31)).await;
    until_held(&hold).await;
    assert_eq!(created_jobs(&sim), [JOB_1001]);
    sim.remove(&Resource::jobs(), Some(NS), JOB_1001)
        .expect("the Job");
    // The deletion reaches the controller; the Job is gone from its cache.
    tokio::time::sleep(Duration::from_secs(5)).await;
    // The held write is refused: someone else wrote the CronJob meanwhile. The writer drops
    // it, reads the CronJob fresh (without the slot) and plans again, with the Job gone.
    sim.fail_next(
        Fault::new(409, "Conflict")
            .method("PATCH")
            .path(STATUS)
            .message("the object has been modified"),
    );
    hold.release();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        created_jobs(&sim),
        [JOB_1001],
        "the slot ran again: {:?}",
        counts(&sim)
    );
    assert_eq!(last_schedule_time(&sim), SLOT_1001);
    // Status writes: the first reconcile's, the refused one, and the slot's record again
    // (without the deleted Job): the conflict cost one write, its own.
    assert_eq!(status_writes(&sim), [200, 409, 200]);
    record_calls(&sim);
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_before_the_status_write_neither_loses_the_slot_nor_runs_it_twice() {
    let (sim, clock, running) = start().await;
    let hold = sim.hold("PATCH", STATUS);
    tokio::time::sleep(Duration::from_secs(31)).await;
    until_held(&hold).await;
    assert_eq!(created_jobs(&sim), [JOB_1001]);
    // The Job finishes at once. No history is kept, but it is the only record that the
    // 10:01 slot ran until the status says so: it stays.
    assert!(sim.finish_job(NS, JOB_1001, true));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        job_exists(&sim, JOB_1001),
        "deleted before its slot was recorded"
    );
    assert_eq!(count(&sim, "delete jobs"), 0);
    // The process dies: its status write is lost with it.
    running.task.abort();
    let _ = running.task.await;
    hold.fail();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        last_schedule_time(&sim) != SLOT_1001,
        "the write landed after all"
    );
    // A new process finds the Job, records its slot, and only then deletes it.
    let again = synced_controller(&sim, &clock).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(last_schedule_time(&sim), SLOT_1001);
    assert!(
        !job_exists(&sim, JOB_1001),
        "history 0: the Job goes once recorded"
    );
    assert_eq!(
        created_jobs(&sim),
        [JOB_1001],
        "the slot ran again: {:?}",
        counts(&sim)
    );
    // The next slot runs, once.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(created_jobs(&sim), [JOB_1001, "cj-28401722"]);
    record_calls(&sim);
    again.shut_down().await;
}
