//! Leader handover: two managers, the leader dies, the other creates the due Jobs within 20 s,
//! with no duplicate and no missed slot; then a graceful stop exits 0.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::api::CronJob;
use kube::api::{Api, ListParams, Patch, PatchParams};

use crate::harness::{Env, Manager, wait_crd_established, wait_for};

fn every_minute(name: &str) -> CronJob {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 100,
            "failedJobsHistoryLimit": 100,
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox:1.36", "args": ["true"]}],
                "restartPolicy": "Never"
            }}}}
        }
    }))
    .expect("cronjob")
}

/// Minutes since the epoch of the Jobs of `cronjob`, from their names.
async fn slots(jobs: &Api<Job>, cronjob: &str) -> Vec<i64> {
    let list = jobs
        .list(&ListParams::default().labels(&format!("batch.kronjob.dev/cronjob={cronjob}")))
        .await
        .expect("list jobs");
    let mut minutes: Vec<i64> = list
        .items
        .iter()
        .filter_map(|j| j.metadata.name.as_deref())
        .filter_map(|n| n.rsplit('-').next()?.parse().ok())
        .collect();
    minutes.sort_unstable();
    minutes
}

#[tokio::test]
#[ignore = "needs a cluster: KRONJOB_E2E=1 just e2e"]
async fn leader_handover_keeps_every_slot_exactly_once() {
    let env = Env::new().await;
    let lease = [
        "--leader-elect",
        "--leader-election-namespace",
        env.namespace.as_str(),
        "--leader-election-id",
        "kronjob-e2e-leader",
    ];
    let mut first = Manager::spawn(&env, &lease);
    wait_crd_established(&env.client).await;
    let cronjobs: Api<CronJob> = Api::namespaced(env.client.clone(), &env.namespace);
    cronjobs
        .patch(
            "every-minute",
            &PatchParams::apply("kronjob-e2e"),
            &Patch::Apply(every_minute("every-minute")),
        )
        .await
        .expect("apply cronjob");
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), &env.namespace);
    wait_for(Duration::from_secs(75), || {
        let jobs = jobs.clone();
        async move { !slots(&jobs, "every-minute").await.is_empty() }
    })
    .await
    .expect("the first leader creates a Job within 75 s");

    let mut second = Manager::spawn(&env, &lease);
    tokio::time::sleep(Duration::from_secs(3)).await;
    first.kill();
    let killed_at = jiff::Timestamp::now();
    let before = slots(&jobs, "every-minute").await;
    let last = *before.last().expect("a slot");

    // The next slot after the kill must appear within 20 s of being due.
    let next_slot_secs = (last + 1) * 60;
    let due_in = (next_slot_secs - killed_at.as_second()).max(0) as u64;
    wait_for(Duration::from_secs(due_in + 20), || {
        let jobs = jobs.clone();
        async move { slots(&jobs, "every-minute").await.contains(&(last + 1)) }
    })
    .await
    .expect("the new leader creates the next Job within 20 s of its slot");

    let after = slots(&jobs, "every-minute").await;
    let unique: BTreeSet<i64> = after.iter().copied().collect();
    assert_eq!(unique.len(), after.len(), "no duplicate slot: {after:?}");
    let (lo, hi) = (after[0], after[after.len() - 1]);
    assert_eq!(
        (hi - lo + 1) as usize,
        after.len(),
        "no missed slot between {lo} and {hi}: {after:?}"
    );

    assert_eq!(second.terminate(), Some(0), "graceful stop exits 0");
    env.cleanup().await;
}
