//! End-to-end: a finished Job controlled by a kronjob CronJob is deleted by the TTL controller.
//! Needs a cluster with the CRD installed and the manager running (`--ttl-jobs=owned`); the
//! lead's harness runs it only with `KRONJOB_E2E=1`.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{CronJob, LABEL_CRONJOB};
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Resource, ResourceExt};
use serde_json::json;

/// Create a suspended kronjob CronJob and a Job it controls that finishes at once with
/// `ttlSecondsAfterFinished: 5`; wait until the Job is Complete, then assert that it is gone
/// (deleted, Foreground, so its Pods first) within 7 s of being seen Complete.
pub async fn finished_owned_job_disappears(client: kube::Client, ns: &str) {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(client, ns);

    // Suspended (and yearly), so that only our hand-made Job exists.
    let cronjob: CronJob = serde_json::from_value(json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {"name": "ttl-e2e"},
        "spec": {
            "schedule": "0 0 1 1 *",
            "suspend": true,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}],
            }}}},
        },
    }))
    .expect("CronJob JSON");
    let cronjob = cronjobs
        .create(&PostParams::default(), &cronjob)
        .await
        .expect("create CronJob");
    let owner = cronjob
        .controller_owner_ref(&())
        .expect("a created CronJob has a name and uid");

    let mut job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "ttl-e2e-1", "labels": {LABEL_CRONJOB: "ttl-e2e"}},
        "spec": {
            "ttlSecondsAfterFinished": 5,
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}],
            }},
        },
    }))
    .expect("Job JSON");
    job.metadata.owner_references = Some(vec![owner]);
    let job = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("create Job");
    let name = job.name_any();
    let uid = job.uid().expect("a created Job has a uid");

    tokio::time::timeout(
        Duration::from_secs(180),
        await_condition(jobs.clone(), &name, conditions::is_job_completed()),
    )
    .await
    .expect("the Job completes within 3 minutes")
    .expect("watching the Job");

    tokio::time::timeout(
        Duration::from_secs(7),
        await_condition(jobs.clone(), &name, conditions::is_deleted(&uid)),
    )
    .await
    .expect("the TTL controller deletes the Job within 7 s of its completion")
    .expect("watching the Job");

    cronjobs
        .delete("ttl-e2e", &Default::default())
        .await
        .expect("delete CronJob");
}
