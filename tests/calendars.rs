//! Calendars against the simulated API server, under paused time: a slot whose day a Calendar
//! excludes writes one Event and creates no Job (other CronJobs run as usual), and an edit of a
//! Calendar re-plans exactly the CronJobs that name it: one reconcile, one status write, none
//! for the others.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use kronjob_apisim::{ApiSim, CostModel, Resource};
use serde_json::{Value, json};
use support::fixtures::t;
use support::sim::{
    TokioClock, created_jobs, cronjob_json, cronjobs, record_calls, sim_clock, synced_controller,
};

const NS: &str = "calendars";
/// 30 s before the 10:00 slot of 1 January 2024.
const START: &str = "2024-01-01T09:59:30Z";

fn calendar_resource() -> Resource {
    Resource::new("batch.kronjob.dev", "v1", "calendars", false)
}

fn calendar(sim: &ApiSim, name: &str, dates: &[&str]) {
    sim.insert_as(
        &calendar_resource(),
        json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "Calendar",
               "metadata": {"name": name}, "spec": {"dates": dates}}),
    );
}

/// Hourly CronJobs: `closed` names the Calendar `holidays` (1 January excluded), `open` names
/// `other` (another day), `plain` names none.
fn seed(sim: &ApiSim) {
    calendar(sim, "holidays", &["2024-01-01"]);
    calendar(sim, "other", &["2023-12-25"]);
    for (name, calendars) in [
        ("closed", json!(["holidays"])),
        ("open", json!(["other"])),
        ("plain", Value::Null),
    ] {
        let mut cj = cronjob_json(
            NS,
            name,
            "0 * * * *",
            "2024-01-01T09:00:00Z",
            Some("2024-01-01T09:00:00Z"),
        );
        if !calendars.is_null() {
            cj["spec"]["calendars"] = calendars;
        }
        sim.insert(cj);
    }
}

fn status(sim: &ApiSim, name: &str) -> Value {
    sim.get(&cronjobs(), Some(NS), name).expect("the CronJob")["status"].clone()
}

fn events(sim: &ApiSim, reason: &str) -> Vec<String> {
    let events = Resource::new("events.k8s.io", "v1", "events", true);
    sim.list(&events, Some(NS))
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["note"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Status writes per CronJob since the log was cleared.
fn status_writes(sim: &ApiSim, name: &str) -> usize {
    sim.requests()
        .into_iter()
        .filter(|r| {
            r.verb == "patch"
                && r.resource == "cronjobs/status"
                && r.name.as_deref() == Some(name)
                && r.status == 200
        })
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_skipped_slot_writes_one_event_and_a_calendar_edit_replans_only_its_cronjobs() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim);
    let running = synced_controller(&sim, &clock).await;
    assert_eq!(
        status(&sim, "closed")["nextScheduleTime"],
        "2024-01-02T00:00:00Z",
        "the excluded day's slots are not next"
    );
    // 10:00:30: the open and plain CronJobs run; the closed one skips its slot.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let mut jobs = created_jobs(&sim);
    jobs.sort();
    assert_eq!(jobs, ["open-28401720", "plain-28401720"]);
    assert_eq!(
        events(&sim, "SlotSkipped"),
        ["Skipped the slot at 2024-01-01T10:00:00Z: Calendar holidays excludes 2024-01-01"]
    );
    let closed = status(&sim, "closed");
    assert_eq!(closed["lastSkippedTime"], "2024-01-01T10:00:00Z");
    assert_eq!(closed["lastScheduleTime"], "2024-01-01T09:00:00Z");
    assert_eq!(
        running
            .metrics
            .slots_skipped
            .get_or_create(&kronjob::controller::cronjob::metrics::SkipLabels {
                reason: "calendar"
            })
            .get(),
        1
    );
    // Half an hour on: still one Event for the one slot.
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    assert_eq!(events(&sim, "SlotSkipped").len(), 1);

    // 10:30:30: the holiday is moved to tomorrow. Only `closed` is re-planned: its next slot
    // is 11:00 now; nothing is asked of the others.
    sim.clear_requests();
    let reconciles = running.metrics.reconciles.get();
    calendar(&sim, "holidays", &["2024-01-02"]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        running.metrics.reconciles.get() - reconciles,
        1,
        "one reconcile"
    );
    assert_eq!(status_writes(&sim, "closed"), 1);
    assert_eq!(
        status_writes(&sim, "open") + status_writes(&sim, "plain"),
        0
    );
    assert_eq!(
        status(&sim, "closed")["nextScheduleTime"],
        "2024-01-01T11:00:00Z"
    );
    // 11:00: all three run.
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    let mut jobs = created_jobs(&sim);
    jobs.sort();
    assert_eq!(jobs, ["closed-28401780", "open-28401780", "plain-28401780"]);
    // The Calendar is deleted: no slot of `closed` runs; one Warning.
    sim.remove(&calendar_resource(), None, "holidays");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(events(&sim, "CalendarNotFound").len(), 1);
    let ready = status(&sim, "closed")["conditions"][0].clone();
    assert_eq!(ready["reason"], "CalendarNotFound", "{ready}");
    tokio::time::sleep(Duration::from_secs(60 * 60)).await;
    assert!(
        !created_jobs(&sim).contains(&"closed-28401840".to_string()),
        "no slot runs while the Calendar is missing"
    );
    assert_eq!(events(&sim, "CalendarNotFound").len(), 1, "once per change");
    record_calls(&sim);
    running.shut_down().await;
}
