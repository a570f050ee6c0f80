//! The manager's client retries what the API server asks to be retried, briefly: 429 from API
//! Priority and Fairness after its `Retry-After`, 503 and 504 with a short backoff, at most
//! four times, so a caller learns of an outage within seconds; other errors are not retried.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::client::{MAX_RETRIES, Observer, observed, with_retries};
use kronjob_apisim::{ApiSim, CostModel, Fault};
use kube::Api;
use kube::api::ListParams;
use kube::client::ClientBuilder;
use tokio::time::Instant;

fn jobs(sim: &ApiSim) -> Api<Job> {
    let client = with_retries(ClientBuilder::new(sim.service(), "default"));
    Api::namespaced(client, "default")
}

fn statuses(sim: &ApiSim) -> Vec<u16> {
    sim.requests().iter().map(|r| r.status).collect()
}

#[tokio::test(start_paused = true)]
async fn a_429_is_retried_after_the_servers_retry_after() {
    let sim = ApiSim::new(CostModel::free());
    sim.fail_next(Fault::too_many_requests(3).method("GET"));
    let started = Instant::now();
    jobs(&sim)
        .list(&ListParams::default())
        .await
        .expect("retried");
    let waited = started.elapsed();
    assert_eq!(statuses(&sim), vec![429, 200]);
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_server_is_tried_five_times_within_seconds_then_the_caller_sees_it() {
    let sim = ApiSim::new(CostModel::free());
    sim.fail_next(Fault::new(503, "ServiceUnavailable").times(100));
    let started = Instant::now();
    let error = jobs(&sim).list(&ListParams::default()).await;
    assert!(error.is_err(), "{error:?}");
    let tries = usize::try_from(MAX_RETRIES).expect("small") + 1;
    assert_eq!(statuses(&sim), vec![503; tries]);
    // 100 ms doubling up to 2 s, jittered: well under 10 s in all.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn other_errors_are_not_retried() {
    let sim = ApiSim::new(CostModel::free());
    sim.fail_next(Fault::internal_error());
    assert!(jobs(&sim).list(&ListParams::default()).await.is_err());
    assert_eq!(statuses(&sim), vec![500]);
}

#[tokio::test(start_paused = true)]
async fn throttling_is_counted_with_the_time_waited_and_each_requests_duration() {
    let sim = ApiSim::new(CostModel::free());
    sim.fail_next(Fault::too_many_requests(2).method("GET").times(2));
    let observer = Observer::default();
    let client = observed(
        ClientBuilder::new(sim.service(), "default"),
        Some(&observer),
    );
    let jobs: Api<Job> = Api::namespaced(client, "default");
    jobs.list(&ListParams::default()).await.expect("retried");
    let mut registry = prometheus_client::registry::Registry::default();
    observer.register(&mut registry);
    let text = kronjob::metrics::Metrics::new(registry)
        .encode()
        .expect("encode");
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} in {text}"))
    };
    assert_eq!(value("kronjob_api_throttled_total"), 2.0);
    // Two waits of the server's Retry-After (2 s each, longer than the backoff).
    assert_eq!(value("kronjob_api_retry_wait_seconds_total"), 4.0);
    assert_eq!(
        value("kronjob_api_request_duration_seconds_count{method=\"GET\"}"),
        1.0,
        "one request as the caller sees it"
    );
    assert_eq!(
        value("kronjob_api_request_duration_seconds_bucket{le=\"2.5\",method=\"GET\"}"),
        0.0,
        "the waits count in its duration: {text}"
    );
    // The simulated API sends no Date: no offset is exported.
    assert!(!text.contains("kronjob_clock_offset_seconds"), "{text}");
}
