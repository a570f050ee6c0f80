//! The cost model under paused time: the write throughput cap and the latency distributions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{job, pp};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kronjob_apisim::{ApiSim, CostModel};
use kube::api::Api;
use tokio::time::Instant;

/// Creates `n` Jobs with `in_flight` requests at once; answers the virtual time taken.
async fn create_jobs(sim: &ApiSim, n: usize, in_flight: usize) -> Duration {
    let jobs: Api<Job> = Api::namespaced(sim.client(), "default");
    let start = Instant::now();
    let results: Vec<_> = futures::stream::iter(0..n)
        .map(|i| {
            let jobs = jobs.clone();
            async move { jobs.create(&pp(), &job(&format!("j{i}"))).await }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    assert!(results.iter().all(Result::is_ok));
    start.elapsed()
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::test(start_paused = true)]
async fn the_write_cap_binds_at_1800_per_second() {
    // With enough requests in flight the leaky bucket is the bottleneck: the last write gets
    // its slot at 999 / 1800 s, then takes its own latency.
    let sim = ApiSim::new(CostModel::measured());
    let took = create_jobs(&sim, 1000, 64).await.as_secs_f64();
    println!("1000 creates, 64 in flight: {:.0} ms", took * 1000.0);
    let last_slot = 999.0 / 1800.0;
    assert!(took > last_slot && took < last_slot + 0.08, "{took}");
}

#[tokio::test(start_paused = true)]
async fn sixteen_in_flight_reproduce_the_measured_floor() {
    // Measured on the real server: 1,000 creates from one client with 16 in flight in 0.56 s.
    // Little's law: 16 in flight at a mean of ~8.8 ms is ~1,810/s, so the 1,800/s cap binds.
    let model = CostModel::measured();
    let bound = 1000.0 * model.write.mean().as_secs_f64() / 16.0;
    let sim = ApiSim::new(model);
    let took = create_jobs(&sim, 1000, 16).await.as_secs_f64();
    println!(
        "1000 creates, 16 in flight: {:.0} ms (Little's law bound {:.0} ms)",
        took * 1000.0,
        bound * 1000.0
    );
    assert!((0.52..0.66).contains(&took), "{took} s, measured 0.56 s");
}

#[tokio::test(start_paused = true)]
async fn latencies_seen_with_16_in_flight_match_p50_and_p99() {
    // As measured: per-create latency seen by a client with 16 creates in flight.
    let sim = ApiSim::new(CostModel::measured());
    create_jobs(&sim, 3000, 16).await;
    let jobs: Api<Job> = Api::namespaced(sim.client(), "default");
    for i in 0..3000 {
        jobs.get(&format!("j{i}")).await.unwrap();
    }
    let percentile = |verb: &str, p: usize| {
        let mut latencies: Vec<Duration> = sim
            .requests()
            .iter()
            .filter(|r| r.verb == verb)
            .map(|r| r.latency())
            .collect();
        latencies.sort();
        millis(latencies[latencies.len() * p / 100])
    };
    let (w50, w99, r50, r99) = (
        percentile("create", 50),
        percentile("create", 99),
        percentile("get", 50),
        percentile("get", 99),
    );
    println!("create p50 {w50:.1} ms p99 {w99:.1} ms; get p50 {r50:.1} ms p99 {r99:.1} ms");
    assert!((w50 - 7.6).abs() < 1.0, "create p50 {w50}");
    assert!((w99 - 60.0).abs() < 12.0, "create p99 {w99}");
    assert!((r50 - 2.0).abs() < 0.2, "get p50 {r50}");
    assert!((r99 - 15.0).abs() < 3.0, "get p99 {r99}");
}

#[tokio::test(start_paused = true)]
async fn the_free_model_costs_nothing_and_runs_are_reproducible() {
    let sim = ApiSim::new(CostModel::free());
    assert_eq!(create_jobs(&sim, 100, 4).await, Duration::ZERO);
    let latencies = || async {
        let sim = ApiSim::new(CostModel::measured());
        create_jobs(&sim, 50, 1).await;
        sim.requests()
            .iter()
            .map(|r| r.latency())
            .collect::<Vec<_>>()
    };
    assert_eq!(latencies().await, latencies().await);
}
