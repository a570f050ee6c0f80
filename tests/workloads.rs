//! The request economy of CronJobs of another kind than Job, against the simulated API server:
//! the same as Jobs' per slot (one create of the kind, one status write, one Event), the kind
//! looked up and its watch started once for all the CronJobs naming it, nothing for a kind no
//! CronJob names.

#[path = "support/mod.rs"]
mod support;

use std::time::Duration;

use kronjob_apisim::{ApiSim, CostModel, Resource};
use serde_json::{Value, json};
use support::fixtures::t;
use support::sim::{
    TokioClock, cronjob_json, record_calls, run_cronjob_controller_with, sim_clock, writes,
};

const CRONJOBS: usize = 50;
const START: &str = "2024-01-01T10:00:30Z";

/// The CRD of JobSet (its real group, version, kind and plural).
fn jobset_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "jobsets.jobset.x-k8s.io"},
        "spec": {"group": "jobset.x-k8s.io", "scope": "Namespaced",
            "names": {"kind": "JobSet", "plural": "jobsets", "singular": "jobset", "listKind": "JobSetList"},
            "versions": [{"name": "v1alpha2", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

fn jobsets() -> Resource {
    Resource::new("jobset.x-k8s.io", "v1alpha2", "jobsets", true)
}

/// A CronJob of JobSets `load/name`.
fn jobset_cronjob(name: &str) -> Value {
    let mut cj = cronjob_json(
        "load",
        name,
        "* * * * *",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T10:00:00Z"),
    );
    let spec = cj["spec"].as_object_mut().expect("spec");
    spec.remove("jobTemplate");
    spec.insert(
        "workloadTemplate".into(),
        json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": []}}),
    );
    cj
}

fn count(counts: &std::collections::BTreeMap<String, usize>, key: &str) -> usize {
    counts.get(key).copied().unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn a_slot_of_jobsets_costs_what_a_slot_of_jobs_costs() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    sim.insert(jobset_crd());
    for i in 0..CRONJOBS {
        sim.insert(jobset_cronjob(&format!("cj-{i:04}")));
    }
    let kinds = "jobs.batch,jobsets.jobset.x-k8s.io".parse().expect("kinds");
    let mut running = run_cronjob_controller_with(&sim, clock, 16, kinds);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let startup: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| {
            r.path.starts_with("/apis/jobset.x-k8s.io") || r.resource == "selfsubjectaccessreviews"
        })
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    record_calls(&sim);
    sim.clear_requests();
    // One look-up and one watch of JobSets for all fifty CronJobs.
    let lookups = startup
        .iter()
        .filter(|r| r.as_str() == "GET /apis/jobset.x-k8s.io/v1alpha2")
        .count();
    assert_eq!(lookups, 1, "{startup:#?}");
    let lists = startup
        .iter()
        .filter(|r| r.starts_with("GET /apis/jobset.x-k8s.io/v1alpha2/jobsets"))
        .count();
    assert!(
        (1..=2).contains(&lists),
        "one list, and its watch: {startup:#?}"
    );

    // Through the 10:01 slot, and 25 s past it.
    tokio::time::sleep(Duration::from_secs(50)).await;
    let counts = writes(&sim);
    record_calls(&sim);
    assert_eq!(count(&counts, "create jobsets"), CRONJOBS, "{counts:?}");
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
    assert_eq!(
        sim.list(&jobsets(), Some("load")).len(),
        CRONJOBS,
        "one JobSet each"
    );
    assert!(
        sim.list(&Resource::jobs(), Some("load")).is_empty(),
        "no Job"
    );
    running.shut_down().await;
}

#[tokio::test(start_paused = true)]
async fn a_kind_no_cronjob_names_is_never_looked_up_or_watched() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    sim.insert(jobset_crd());
    sim.insert(cronjob_json(
        "load",
        "jobs",
        "* * * * *",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T10:00:00Z"),
    ));
    let kinds = "jobs.batch,jobsets.jobset.x-k8s.io".parse().expect("kinds");
    let mut running = run_cronjob_controller_with(&sim, clock, 4, kinds);
    (&mut running.synced).await.expect("caches synced");
    tokio::time::sleep(Duration::from_secs(50)).await;
    let touched: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("jobset"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    record_calls(&sim);
    assert!(touched.is_empty(), "{touched:?}");
    running.shut_down().await;
}
