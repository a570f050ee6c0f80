//! The TTL-after-finished controller on a real API server: a Job controlled by a kronjob
//! CronJob, finished by the Job controller when its Pod succeeds, is deleted once its
//! `ttlSecondsAfterFinished` expires.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{CronJob, LABEL_CRONJOB};
use kube::api::PostParams;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::harness::{Ctx, Env};

crate::cases!(
    ttl:
    finished_owned_job_disappears,
);

/// A suspended CronJob and a Job it controls with `ttlSecondsAfterFinished: 5`: once the Pod
/// succeeds and the Job is Complete, the Job is gone within 7 s.
pub async fn finished_owned_job_disappears(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&["--ttl-jobs", "owned"]);
    let cronjob = crate::cronjob::create(
        &env,
        json!({
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
        }),
    )
    .await;
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
                "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}],
            }},
        },
    }))
    .expect("Job JSON");
    job.metadata.owner_references = Some(vec![owner]);
    let jobs = env.api::<Job>();
    let job = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("create Job");
    let (name, uid) = (job.name_any(), job.uid().expect("uid"));
    env.finish_pods(&name, "Succeeded").await;
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(jobs.clone(), &name, conditions::is_job_completed()),
    )
    .await
    .expect("the Job controller completes the Job")
    .expect("watching the Job");
    tokio::time::timeout(
        Duration::from_secs(7),
        await_condition(jobs.clone(), &name, conditions::is_deleted(&uid)),
    )
    .await
    .expect("the TTL controller deletes the Job within 7 s of its completion")
    .expect("watching the Job");
    let _ = env.api::<CronJob>();
    env.cleanup().await;
}
