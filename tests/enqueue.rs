//! `concurrencyPolicy: Enqueue` against the simulated API server, under paused time: the queue
//! is written once per change (one status write a slot while a Job runs), exactly one Job is
//! created per slot that runs, a full queue drops its oldest slot with an Event, and a process
//! that dies between a queued slot's Job and the status write that dequeues it neither loses
//! the slot nor runs it twice (nor deletes its Job before a stored status records it).

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use kronjob_apisim::{ApiSim, CostModel, Resource};
use serde_json::Value;
use support::fixtures::t;
use support::sim::{
    TokioClock, created_jobs, cronjob_json, cronjobs, record_calls, sim_clock, synced_controller,
};

const NS: &str = "enqueue";
/// 30 s before the 10:00 slot; 09:59 recorded.
const START: &str = "2024-01-01T09:59:30Z";
const STATUS: &str = "/cronjobs/cj/status";
/// Jobs of the 10:00 .. 10:04 slots (minutes since the epoch).
const J1000: &str = "cj-28401720";
const J1002: &str = "cj-28401722";
const J1003: &str = "cj-28401723";
const J1004: &str = "cj-28401724";

/// `* * * * *`, Enqueue with two slots at most (DropOldest), no history kept.
fn seed(sim: &ApiSim) {
    let mut cj = cronjob_json(
        NS,
        "cj",
        "* * * * *",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T09:59:00Z"),
    );
    cj["spec"]["concurrencyPolicy"] = "Enqueue".into();
    cj["spec"]["queue"] = serde_json::json!({"maxQueued": 2});
    cj["spec"]["successfulJobsHistoryLimit"] = 0.into();
    sim.insert(cj);
}

fn status_writes(sim: &ApiSim) -> usize {
    sim.requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.resource == "cronjobs/status" && r.status == 200)
        .count()
}

fn status(sim: &ApiSim) -> Value {
    let cj = sim.get(&cronjobs(), Some(NS), "cj").expect("the CronJob");
    cj["status"].clone()
}

/// `status.queued` as the API server stores it.
fn queued(sim: &ApiSim) -> Vec<String> {
    status(sim)["queued"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn job_exists(sim: &ApiSim, name: &str) -> bool {
    sim.get(&Resource::jobs(), Some(NS), name).is_some()
}

/// The Events' reasons and notes about the CronJob.
fn events(sim: &ApiSim) -> Vec<(String, String)> {
    let events = Resource::new("events.k8s.io", "v1", "events", true);
    sim.list(&events, Some(NS))
        .into_iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (text("reason"), text("note"))
        })
        .collect()
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
async fn queued_slots_are_written_once_per_change_and_run_once_across_a_restart() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim);
    let running = synced_controller(&sim, &clock).await;
    // 10:00:30: the 10:00 Job runs.
    tokio::time::sleep(Duration::from_secs(55)).await;
    assert_eq!(created_jobs(&sim), [J1000]);
    // Each slot while it runs: queued, one status write, no Job.
    let want = [
        vec!["2024-01-01T10:01:00Z"],
        vec!["2024-01-01T10:01:00Z", "2024-01-01T10:02:00Z"],
        vec!["2024-01-01T10:02:00Z", "2024-01-01T10:03:00Z"],
    ];
    for queue in want {
        let writes = status_writes(&sim);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(queued(&sim), queue);
        assert_eq!(status(&sim)["queuedCount"], queue.len());
        assert_eq!(status_writes(&sim) - writes, 1, "one write for {queue:?}");
        assert_eq!(created_jobs(&sim), [J1000]);
    }
    let full: Vec<_> = events(&sim)
        .into_iter()
        .filter(|(reason, _)| reason == "QueueFull")
        .collect();
    assert_eq!(full.len(), 1, "{full:?}");
    assert!(full[0].1.contains("2024-01-01T10:01:00Z"), "{full:?}");
    assert_eq!(
        status(&sim)["lastScheduleTime"],
        "2024-01-01T10:03:00Z",
        "the slot that found the queue full is recorded"
    );
    // 10:03:30: the 10:00 Job finishes; the oldest queued slot starts, once. Its status write
    // waits.
    let hold = sim.hold("PATCH", STATUS);
    assert!(sim.finish_job(NS, J1000, true));
    until_held(&hold).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(created_jobs(&sim), [J1000, J1002]);
    // It finishes at once; the next queued slot starts (this process knows it dequeued
    // 10:02). No history is kept, but the stored status still queues 10:02: its Job stays.
    assert!(sim.finish_job(NS, J1002, true));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(created_jobs(&sim), [J1000, J1002, J1003]);
    assert!(job_exists(&sim, J1002), "deleted while its slot is queued");
    // The process dies: the write that dequeues both is lost with it.
    running.task.abort();
    let _ = running.task.await;
    hold.fail();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        queued(&sim),
        ["2024-01-01T10:02:00Z", "2024-01-01T10:03:00Z"],
        "the write landed after all"
    );
    // A new process finds both slots' Jobs: it runs neither again, empties the queue, and
    // only then deletes the finished Job.
    let again = synced_controller(&sim, &clock).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(created_jobs(&sim), [J1000, J1002, J1003]);
    assert!(queued(&sim).is_empty(), "{:?}", status(&sim));
    assert!(!job_exists(&sim, J1002), "history 0: gone once recorded");
    // 10:04: nothing waits and the 10:03 Job is done: the slot runs on time, once.
    assert!(sim.finish_job(NS, J1003, true));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(created_jobs(&sim), [J1000, J1002, J1003, J1004]);
    record_calls(&sim);
    again.shut_down().await;
}
