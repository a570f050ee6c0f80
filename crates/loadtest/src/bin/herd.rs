//! Job-creation skew when many CronJobs are due at the same instant, through the real
//! reconciler, against the simulated API server with the cost measured on a real 1.34 API server
//! (16 creates in flight: p50 ~8 ms, p99 ~60 ms, at most ~1,800 writes/s). Real time: the
//! controller's CPU costs count.
//!
//! ```sh
//! cargo run --release -p kronjob-loadtest --bin herd -- --cronjobs 1000 --concurrency 16
//! ```
//!
//! It reports the time from the slot to the last Job create, the p50/p99/max skew per Job
//! (create answered minus scheduled time), the requests by verb, and the reconciles.

#![allow(missing_docs)]

#[path = "../../../../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use jiff::{SignedDuration, Timestamp};
use kronjob::clock::Clock;
use kronjob_apisim::{ApiSim, CostModel};
use support::sim::{cronjob_json, run_cronjob_controller, sim_clock, writes};

/// Flags of the herd benchmark.
#[derive(Parser, Debug)]
struct Args {
    /// CronJobs due at the same instant.
    #[arg(long, default_value_t = 1000)]
    cronjobs: usize,
    /// Reconciles in flight (`kronjob run --concurrency`).
    #[arg(long, default_value_t = 16)]
    concurrency: u16,
    /// Slots to measure, one minute apart.
    #[arg(long, default_value_t = 1)]
    slots: u32,
}

/// The wall clock shifted so that a minute boundary comes soon.
#[derive(Debug)]
struct Shifted(SignedDuration);

impl Clock for Shifted {
    fn now(&self) -> Timestamp {
        Timestamp::now()
            .saturating_add(self.0)
            .unwrap_or_else(|_| Timestamp::now())
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // The first slot comes 4 s after the controller starts.
    let real = Timestamp::now();
    let slot = Timestamp::from_second((real.as_second() / 60 + 10) * 60).expect("timestamp");
    let shift = slot.duration_since(real) - SignedDuration::from_secs(4);
    let clock: Arc<dyn Clock> = Arc::new(Shifted(shift));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(Arc::clone(&clock)));
    let previous = (slot - SignedDuration::from_secs(60)).to_string();
    for i in 0..args.cronjobs {
        sim.insert(cronjob_json(
            "herd",
            &format!("cj-{i:05}"),
            "* * * * *",
            "2024-01-01T00:00:00Z",
            Some(&previous),
        ));
    }
    let mut running = run_cronjob_controller(&sim, Arc::clone(&clock), args.concurrency);
    (&mut running.synced).await.expect("caches synced");
    // Let the start-up status writes finish, then measure from a clean log.
    while clock.now() < slot - SignedDuration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sim.clear_requests();
    let reconciles_before = running.metrics.reconciles.get();
    let origin = (tokio::time::Instant::now(), clock.now());
    let last = slot + SignedDuration::from_secs(60 * i64::from(args.slots - 1));
    while clock.now() < last + SignedDuration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let requests = sim.requests();
    let counts = writes(&sim);
    let reconciles = running.metrics.reconciles.get() - reconciles_before;
    running.shut_down().await;

    println!(
        "{} CronJobs due at once, {} slot(s), concurrency {}",
        args.cronjobs, args.slots, args.concurrency
    );
    for n in 0..args.slots {
        let at = slot + SignedDuration::from_secs(60 * i64::from(n));
        let minute = at.as_second() / 60;
        let mut skews: Vec<f64> = requests
            .iter()
            .filter(|r| r.verb == "create" && r.resource == "jobs" && r.status == 201 && !r.dry_run)
            .filter(|r| {
                r.name
                    .as_deref()
                    .is_some_and(|name| name.ends_with(&format!("-{minute}")))
            })
            .map(|r| {
                let answered = origin.1
                    + SignedDuration::try_from(r.finished - origin.0)
                        .unwrap_or(SignedDuration::ZERO);
                answered.duration_since(at).as_secs_f64()
            })
            .collect();
        skews.sort_by(f64::total_cmp);
        println!(
            "slot {at}: {} Jobs; skew p50 {:.3} s, p99 {:.3} s, max (last create) {:.3} s",
            skews.len(),
            percentile(&skews, 50.0),
            percentile(&skews, 99.0),
            skews.last().copied().unwrap_or(f64::NAN),
        );
    }
    println!("writes by verb: {counts:?}");
    println!("reconciles: {reconciles}");
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status
            .lines()
            .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
        {
            println!("{line} (this process: the simulated API server and the controller)");
        }
    }
}
