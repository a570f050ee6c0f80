//! The manager's client retries what the API server asks to be retried, briefly: 429 from API
//! Priority and Fairness after its `Retry-After`, 503 and 504 with a short backoff, at most
//! four times, so a caller learns of an outage within seconds; other errors are not retried.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::client::{MAX_RETRIES, with_retries};
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
