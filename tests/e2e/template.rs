//! A Job template the API server refuses: the webhook, called by the API server, denies the
//! CronJob with the field path under `spec.jobTemplate`; without the webhook the reconciler
//! reports the refusal in the `Ready` condition and creates no Job.

use std::time::Duration;

use kronjob::api::CronJob;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::harness::{Ctx, Env, wait_for};
use crate::webhook::Webhook;

crate::cases!(
    template:
    webhook_denies_with_the_field_path,
    reconciler_reports_the_refusal_and_creates_no_job,
);

/// An environment variable name with `=`: the CRD schema and kronjob's local rules take it, the
/// API server's Job validation does not (since 1.34 a name may hold any printable character but
/// `=`).
const FIELD: &str = "spec.template.spec.containers[0].env[0].name";

fn manifest(name: &str) -> Value {
    json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "c", "image": "busybox:1.36", "command": ["true"],
                    "env": [{ "name": "MY=VAR", "value": "1" }]
                }]
            }}}}
        }
    })
}

/// `kubectl apply` of the CronJob is refused by the webhook, naming the field.
pub async fn webhook_denies_with_the_field_path(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let webhook = Webhook::start(&ctx, &env, &[]).await;
    let cj: CronJob = serde_json::from_value(manifest("refused")).expect("CronJob");
    let err = env
        .api::<CronJob>()
        .create(&PostParams::default(), &cj)
        .await
        .expect_err("the webhook denies the CronJob");
    let kube::Error::Api(status) = err else {
        panic!("not an API answer: {err}");
    };
    let want = format!("spec.jobTemplate.{FIELD}");
    assert!(status.message.contains(&want), "{}", status.message);
    assert!(
        status.message.contains("admission webhook"),
        "{}",
        status.message
    );
    webhook.uninstall().await;
    env.cleanup().await;
}

/// With the webhook off, the reconciler reports the refusal and creates no Job.
pub async fn reconciler_reports_the_refusal_and_creates_no_job(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    let cj: CronJob = serde_json::from_value(manifest("refused")).expect("CronJob");
    let cronjobs = env.api::<CronJob>();
    cronjobs
        .create(&PostParams::default(), &cj)
        .await
        .expect("create CronJob (no webhook in front)");
    let message = wait_for(
        Duration::from_secs(30),
        "Ready=False InvalidJobTemplate",
        || async {
            let status = cronjobs.get_status("refused").await.ok()?.status?;
            let ready = status.conditions.into_iter().find(|c| c.type_ == "Ready")?;
            (ready.reason == "InvalidJobTemplate" && ready.status == "False")
                .then_some(ready.message)
        },
    )
    .await;
    assert!(message.contains(FIELD), "{message}");
    // Past the next slot: still no Job.
    tokio::time::sleep(Duration::from_secs(65)).await;
    let jobs = env.jobs_of("refused").await;
    assert!(jobs.is_empty(), "{jobs:?}");
    env.cleanup().await;
}
