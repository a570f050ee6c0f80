//! The request economy of the CronJob controller, measured against the simulated API server
//! with the measured cost model, under paused time (minutes run in milliseconds):
//!
//! - per CronJob per slot: 1 Job POST, at most 1 status write, 1 Event; the reconciles our own
//!   writes cause are no-ops;
//! - nothing at all in a minute where nothing is due;
//! - a finishing Job costs one status write and one Event more;
//! - the Job template check costs one dry-run create per CronJob generation, when it is first
//!   seen: none per slot, none after a restart (the status records the check);
//! - a restart with nothing changed writes nothing: every CronJob is reconciled, no status;
//! - the same at 10,000 CronJobs: one Job POST, one status write, one Event each, per slot.
//!
//! and the per-CronJob series the controller's cache feeds at scrape time.

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use kronjob_apisim::{ApiSim, CostModel};
use support::fixtures::t;
use support::sim::{
    TokioClock, cronjob_json, record_calls, run_cronjob_controller, sim_clock, writes,
};

const CRONJOBS: usize = 200;
/// Reconciles the controller runs at once.
const WORKERS: u16 = 16;
/// The clock starts half a minute before the 10:01 slot.
const START: &str = "2024-01-01T10:00:30Z";

fn seed(sim: &ApiSim, schedule: &str) {
    for i in 0..CRONJOBS {
        sim.insert(cronjob_json(
            "load",
            &format!("cj-{i:04}"),
            schedule,
            "2024-01-01T09:00:00Z",
            Some("2024-01-01T10:00:00Z"),
        ));
    }
}

/// Run until the controller has settled after its start (first status writes), then clear the
/// request log; returns the controller.
async fn settled(sim: &ApiSim, clock: Arc<TokioClock>) -> support::sim::Running {
    let mut running = run_cronjob_controller(sim, clock, WORKERS);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(5)).await;
    record_calls(sim);
    sim.clear_requests();
    running
}

/// Every minute, Jobs that succeed in 10 s: settled, then run through the 10:01 slot and the
/// completions (the clock reads 10:01:25 when it returns).
async fn one_slot_whose_jobs_succeed() -> (ApiSim, support::sim::Running) {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    sim.set_job_duration(Some(Duration::from_secs(10)));
    seed(&sim, "* * * * *");
    let running = settled(&sim, clock).await;
    tokio::time::sleep(Duration::from_secs(50)).await;
    (sim, running)
}

fn count(counts: &std::collections::BTreeMap<String, usize>, key: &str) -> usize {
    counts.get(key).copied().unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn one_slot_costs_one_post_one_status_write_and_one_event_per_cronjob() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim, "* * * * *");
    let running = settled(&sim, clock).await;
    let reconciles_before = running.metrics.reconciles.get();

    // Through the 10:01 slot, and 25 s past it.
    tokio::time::sleep(Duration::from_secs(50)).await;
    let counts = writes(&sim);
    let reconciles = running.metrics.reconciles.get() - reconciles_before;
    record_calls(&sim);
    println!("one slot, {CRONJOBS} CronJobs: {counts:?}, {reconciles} reconciles");
    assert_eq!(count(&counts, "create jobs"), CRONJOBS, "{counts:?}");
    assert_eq!(
        count(&counts, "patch cronjobs/status"),
        CRONJOBS,
        "{counts:?}"
    );
    assert_eq!(count(&counts, "create events"), CRONJOBS, "{counts:?}");
    assert_eq!(
        counts.values().sum::<usize>(),
        3 * CRONJOBS,
        "nothing else: {counts:?}"
    );
    // One reconcile at the slot; our own Job and status writes may add at most one each.
    assert!(
        reconciles <= 2 * CRONJOBS as u64,
        "{reconciles} reconciles for {CRONJOBS} CronJobs"
    );
    // Every Job is there, once.
    let jobs = sim.list(&kronjob_apisim::Resource::jobs(), Some("load"));
    assert_eq!(jobs.len(), CRONJOBS);
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn the_template_is_dry_run_once_per_generation_not_per_slot_nor_per_restart() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim, "* * * * *");
    let dry_runs = |sim: &ApiSim| sim.requests().iter().filter(|r| r.dry_run).count();
    let mut running = run_cronjob_controller(&sim, clock.clone(), WORKERS);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(5)).await;
    record_calls(&sim);
    // The CronJobs share one template in one namespace: one dry run per reconcile in flight
    // before the first answer, then its remembered verdict (not one per CronJob).
    assert_eq!(
        dry_runs(&sim),
        usize::from(WORKERS),
        "one template judged, not one per CronJob"
    );
    running.shut_down().await;
    sim.clear_requests();

    // A restart (10:00:35), then the 10:01 slot.
    let mut running = run_cronjob_controller(&sim, clock, WORKERS);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(50)).await;
    record_calls(&sim);
    assert_eq!(
        dry_runs(&sim),
        0,
        "the status says the template was checked"
    );
    let counts = writes(&sim);
    assert_eq!(count(&counts, "create jobs"), CRONJOBS, "{counts:?}");
    assert_eq!(
        sim.list(&kronjob_apisim::Resource::jobs(), Some("load"))
            .len(),
        CRONJOBS
    );
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn a_minute_with_nothing_due_costs_no_write() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    // Every five minutes: 10:00 ran; 10:01-10:04 have nothing due.
    seed(&sim, "*/5 * * * *");
    let running = settled(&sim, clock).await;
    tokio::time::sleep(Duration::from_secs(4 * 60)).await;
    let counts = writes(&sim);
    record_calls(&sim);
    assert!(counts.is_empty(), "writes in quiet minutes: {counts:?}");
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_that_finishes_costs_one_status_write_and_one_event_more() {
    let (sim, running) = one_slot_whose_jobs_succeed().await;
    let counts = writes(&sim);
    record_calls(&sim);
    println!("one slot with completion: {counts:?}");
    assert_eq!(count(&counts, "create jobs"), CRONJOBS, "{counts:?}");
    assert_eq!(
        count(&counts, "patch cronjobs/status"),
        2 * CRONJOBS,
        "{counts:?}"
    );
    assert_eq!(count(&counts, "create events"), 2 * CRONJOBS, "{counts:?}");
    running.shut_down().await;
}

/// Jobs gone in seconds (no history kept, each done a second after its creation) cost what
/// they cost before a Job that is the only record of its slot had to wait for the status that
/// records it: per CronJob, the Job POST, two status writes (the slot, the finish), three Events
/// (created, completed, deleted) and the history delete; one Job each.
#[tokio::test(start_paused = true)]
async fn a_job_gone_in_a_second_costs_no_more_writes() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    sim.set_job_duration(Some(Duration::from_secs(1)));
    for i in 0..CRONJOBS {
        let mut cj = cronjob_json(
            "load",
            &format!("cj-{i:04}"),
            "* * * * *",
            "2024-01-01T09:00:00Z",
            Some("2024-01-01T10:00:00Z"),
        );
        cj["spec"]["successfulJobsHistoryLimit"] = 0.into();
        cj["spec"]["failedJobsHistoryLimit"] = 0.into();
        sim.insert(cj);
    }
    let running = settled(&sim, clock).await;
    tokio::time::sleep(Duration::from_secs(50)).await;
    let counts = writes(&sim);
    record_calls(&sim);
    println!("one slot, Jobs gone in a second: {counts:?}");
    assert_eq!(count(&counts, "create jobs"), CRONJOBS, "{counts:?}");
    assert_eq!(count(&counts, "delete jobs"), CRONJOBS, "{counts:?}");
    assert_eq!(
        count(&counts, "patch cronjobs/status"),
        2 * CRONJOBS,
        "{counts:?}"
    );
    assert_eq!(count(&counts, "create events"), 3 * CRONJOBS, "{counts:?}");
    assert_eq!(counts.values().sum::<usize>(), 7 * CRONJOBS, "{counts:?}");
    assert!(
        sim.list(&kronjob_apisim::Resource::jobs(), Some("load"))
            .is_empty()
    );
    running.shut_down().await;
}

/// After the 10:01 slot, whose Jobs succeed in 10 s, each CronJob's series show the slot, the
/// success and the 10:02 slot; they leave with the controller.
#[tokio::test(start_paused = true)]
async fn the_per_cronjob_series_follow_the_status_and_leave_with_the_controller() {
    let (sim, running) = one_slot_whose_jobs_succeed().await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(running.metrics.cronjobs.clone()));
    let scrape = |registry: &prometheus_client::registry::Registry| {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).expect("encode");
        out
    };
    let out = scrape(&registry);
    let of = |name: &str| {
        let prefix = format!("{name}{{namespace=\"load\",cronjob=\"cj-0007\"}} ");
        out.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|v| v.parse::<i64>().expect("integer"))
    };
    let seconds = |s: &str| t(s).as_second();
    assert_eq!(
        of("kronjob_cronjob_last_schedule_time_seconds"),
        Some(seconds("2024-01-01T10:01:00Z")),
        "{out}"
    );
    assert_eq!(
        of("kronjob_cronjob_next_schedule_time_seconds"),
        Some(seconds("2024-01-01T10:02:00Z"))
    );
    let success = of("kronjob_cronjob_last_successful_time_seconds").expect("a success");
    assert!(
        (seconds("2024-01-01T10:01:10Z")..seconds("2024-01-01T10:01:20Z")).contains(&success),
        "{success}"
    );
    assert_eq!(of("kronjob_cronjob_period_seconds"), Some(60));
    assert_eq!(of("kronjob_cronjob_active_jobs"), Some(0));
    assert_eq!(of("kronjob_cronjob_suspended"), Some(0));
    let rows = out
        .lines()
        .filter(|l| l.starts_with("kronjob_cronjob_suspended{"))
        .count();
    assert_eq!(rows, CRONJOBS);
    assert_eq!(running.metrics.jobs_created.get(), CRONJOBS as u64);
    record_calls(&sim);
    let metrics = running.metrics.clone();
    running.shut_down().await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(metrics.cronjobs.clone()));
    let out = scrape(&registry);
    assert!(!out.contains("cronjob=\""), "{out}");
}

/// The API server refuses connections for 70 s, across the 10:01 slot. When it answers again,
/// every CronJob is reconciled within 5 s, the missed 10:01 slot runs within 10 s, the 10:02 and
/// 10:03 slots run on time, and no slot gets two Jobs.
#[tokio::test(start_paused = true)]
async fn after_an_api_outage_the_missed_slot_runs_at_once_and_the_next_ones_on_time() {
    const N: usize = 50;
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    for i in 0..N {
        sim.insert(cronjob_json(
            "load",
            &format!("cj-{i:04}"),
            "* * * * *",
            "2024-01-01T09:00:00Z",
            Some("2024-01-01T10:00:00Z"),
        ));
    }
    let running = settled(&sim, clock.clone()).await;
    // 10:00:35 now. Down from 10:00:45 to 10:01:55.
    tokio::time::sleep(Duration::from_secs(10)).await;
    sim.set_down(true);
    tokio::time::sleep(Duration::from_secs(70)).await;
    sim.set_down(false);
    let back = clock_now(&clock);
    assert!(
        back.duration_since(t("2024-01-01T10:01:55Z"))
            .as_secs_f64()
            .abs()
            < 0.1
    );
    // Until 10:03:30.
    tokio::time::sleep(Duration::from_secs(95)).await;
    let requests = sim.requests();
    record_calls(&sim);
    let created = |name: &str| -> Vec<jiff::Timestamp> {
        requests
            .iter()
            .filter(|r| r.verb == "create" && r.resource == "jobs" && r.status == 201 && !r.dry_run)
            .filter(|r| r.name.as_deref() == Some(name))
            .map(|r| r.at)
            .collect()
    };
    let minute = |at: &str| t(at).as_second() / 60;
    let (mut missed_max, mut first_max, mut next_max) = (0.0f64, 0.0f64, 0.0f64);
    for i in 0..N {
        let cj = format!("cj-{i:04}");
        // Reconciled after the return: its first request (any) within 5 s.
        let first = requests
            .iter()
            .filter(|r| r.status != 0 && r.at >= back)
            .filter(|r| r.name.as_deref().is_some_and(|n| n.starts_with(&cj)))
            .map(|r| r.at)
            .min()
            .unwrap_or_else(|| panic!("{cj} never reconciled after the outage"));
        first_max = first_max.max(first.duration_since(back).as_secs_f64());
        // The missed slot (10:01) ran once, within 10 s of the return.
        let missed = created(&format!("{cj}-{}", minute("2024-01-01T10:01:00Z")));
        assert_eq!(missed.len(), 1, "{cj}: 10:01 ran {} times", missed.len());
        missed_max = missed_max.max(missed[0].duration_since(back).as_secs_f64());
        // The next slots, on time and once.
        for slot in ["2024-01-01T10:02:00Z", "2024-01-01T10:03:00Z"] {
            let runs = created(&format!("{cj}-{}", minute(slot)));
            assert_eq!(runs.len(), 1, "{cj}: {slot} ran {} times", runs.len());
            next_max = next_max.max(runs[0].duration_since(t(slot)).as_secs_f64());
        }
    }
    println!(
        "outage of 70 s, {N} CronJobs: all reconciled within {first_max:.2} s of the return, \
         missed slot created within {missed_max:.2} s, next slots' worst skew {next_max:.2} s"
    );
    assert!(
        first_max <= 5.0,
        "reconciled {first_max} s after the return"
    );
    assert!(
        missed_max <= 10.0,
        "missed slot {missed_max} s after the return"
    );
    assert!(next_max <= 1.0, "next slots' skew {next_max} s");
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_with_nothing_changed_reconciles_every_cronjob_and_writes_nothing() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim, "* * * * *");
    let running = settled(&sim, clock.clone()).await;
    running.shut_down().await;
    sim.clear_requests();
    // Restarted at 10:00:35; 10 s after its caches listed it is still before the 10:01 slot.
    let mut running = run_cronjob_controller(&sim, clock.clone(), WORKERS);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(clock_now(&clock) < t("2024-01-01T10:01:00Z"));
    let reconciles = running.metrics.reconciles.get();
    let counts = writes(&sim);
    record_calls(&sim);
    assert!(
        reconciles >= CRONJOBS as u64,
        "{reconciles} reconciles for {CRONJOBS} CronJobs"
    );
    assert!(counts.is_empty(), "writes at a restart: {counts:?}");
    running.shut_down().await;
}

/// 10,000 CronJobs due every minute, with the measured cost model: after the first start (one
/// dry run and one status write each), the 10:01 slot costs one Job POST, one status write and
/// one Event per CronJob and nothing else, and every Job is there once.
#[tokio::test(start_paused = true)]
async fn ten_thousand_cronjobs_cost_one_post_one_status_write_and_one_event_each_per_slot() {
    const MANY: usize = 10_000;
    let clock = TokioClock::new(t("2024-01-01T10:00:00Z"));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    for i in 0..MANY {
        sim.insert(cronjob_json(
            "load",
            &format!("cj-{i:05}"),
            "* * * * *",
            "2024-01-01T09:00:00Z",
            Some("2024-01-01T10:00:00Z"),
        ));
    }
    let mut running = run_cronjob_controller(&sim, clock.clone(), 32);
    (&mut running.synced).await.expect("caches synced");
    // The first start: a dry run and a status write per CronJob, well before 10:01.
    tokio::time::sleep(Duration::from_secs(40)).await;
    let first = writes(&sim);
    assert_eq!(count(&first, "patch cronjobs/status"), MANY, "{first:?}");
    sim.clear_requests();
    let before = running.metrics.reconciles.get();
    // Through the 10:01 slot and 50 s past it.
    tokio::time::sleep(Duration::from_secs(70)).await;
    let counts = writes(&sim);
    let reconciles = running.metrics.reconciles.get() - before;
    let requests = sim.requests();
    let slot = t("2024-01-01T10:01:00Z");
    let mut skews: Vec<f64> = requests
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "jobs" && r.status == 201 && !r.dry_run)
        .map(|r| r.at.duration_since(slot).as_secs_f64())
        .collect();
    skews.sort_by(f64::total_cmp);
    let p99 = skews
        .get(skews.len() * 99 / 100)
        .copied()
        .unwrap_or_default();
    println!(
        "one slot, {MANY} CronJobs: {counts:?}, {reconciles} reconciles, create p99 {p99:.2} s \
         (virtual time, cost model)"
    );
    assert_eq!(count(&counts, "create jobs"), MANY, "{counts:?}");
    assert_eq!(count(&counts, "patch cronjobs/status"), MANY, "{counts:?}");
    assert_eq!(count(&counts, "create events"), MANY, "{counts:?}");
    assert_eq!(
        counts.values().sum::<usize>(),
        3 * MANY,
        "nothing else: {counts:?}"
    );
    assert!(reconciles <= 2 * MANY as u64, "{reconciles} reconciles");
    let jobs = sim.list(&kronjob_apisim::Resource::jobs(), Some("load"));
    assert_eq!(jobs.len(), MANY, "every Job once");
    running.shut_down().await;
}

fn clock_now(clock: &TokioClock) -> jiff::Timestamp {
    use kronjob::clock::Clock;
    clock.now()
}
