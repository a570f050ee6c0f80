//! End-to-end scenarios of the CronJob reconciler. The lead's harness provides the cluster, the
//! running manager and a fresh namespace, and calls each `pub async fn` with them.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kronjob::api::{CronJob, LABEL_CRONJOB};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// A CronJob on `* * * * *`; with `suspend_jobs` its Jobs start no Pod.
fn cronjob(name: &str, history: i32, suspend_jobs: bool) -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": history,
            "jobTemplate": { "spec": {
                "suspend": suspend_jobs,
                "template": { "spec": {
                    "restartPolicy": "Never",
                    "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["true"] }]
                }}
            }}
        }
    }))
    .expect("CronJob manifest")
}

async fn jobs_of(client: &Client, ns: &str, name: &str) -> Vec<Job> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    jobs.list(&ListParams::default().labels(&format!("{LABEL_CRONJOB}={name}")))
        .await
        .expect("list jobs")
        .items
}

async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A CronJob on `* * * * *` gets a Job within 65 s, named `<cronjob>-<unix minutes>`, owned by
/// the CronJob, and the CronJob's status lists it as active.
pub async fn creates_job_within_65s(client: Client, ns: &str) {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    cronjobs
        .create(&PostParams::default(), &cronjob("every-minute", 3, true))
        .await
        .expect("create CronJob");
    let job = wait_for("a Job", Duration::from_secs(65), || async {
        jobs_of(&client, ns, "every-minute")
            .await
            .into_iter()
            .next()
    })
    .await;
    let name = job.metadata.name.clone().unwrap_or_default();
    assert!(name.starts_with("every-minute-"), "{name}");
    let owner = &job.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(owner.kind, "CronJob");
    assert_eq!(owner.controller, Some(true));
    wait_for("status.active", Duration::from_secs(15), || async {
        let cj = cronjobs.get("every-minute").await.ok()?;
        let status = cj.status?;
        (status
            .active
            .iter()
            .any(|r| r.name.as_deref() == Some(name.as_str()))
            && status.last_schedule_time.is_some())
        .then_some(())
    })
    .await;
}

/// A Job that completes sets `lastSuccessfulTime`, and with
/// `successfulJobsHistoryLimit: 0` the finished Job is deleted, without the slot running again.
pub async fn completion_sets_last_success_and_trims_history(client: Client, ns: &str) {
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    cronjobs
        .create(&PostParams::default(), &cronjob("trimmed", 0, false))
        .await
        .expect("create CronJob");
    let job = wait_for("a Job", Duration::from_secs(65), || async {
        jobs_of(&client, ns, "trimmed").await.into_iter().next()
    })
    .await;
    // The Job really runs (`true`) and the Job controller marks it Complete.
    let name = job.metadata.name.clone().unwrap_or_default();
    wait_for("lastSuccessfulTime", Duration::from_secs(180), || async {
        let cj = cronjobs.get("trimmed").await.ok()?;
        cj.status?.last_successful_time.map(|_| ())
    })
    .await;
    wait_for("history trimmed", Duration::from_secs(30), || async {
        let left = jobs_of(&client, ns, "trimmed").await;
        (!left
            .iter()
            .any(|j| j.metadata.name.as_deref() == Some(name.as_str())))
        .then_some(())
    })
    .await;
    // The deleted slot is not re-run: no Job with the same name comes back within 5 s.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = jobs_of(&client, ns, "trimmed").await;
    assert!(
        !again
            .iter()
            .any(|j| j.metadata.name.as_deref() == Some(name.as_str())),
        "slot {name} ran twice"
    );
}

/// `kubectl kronjob trigger` on a CronJob with the longest valid name (52 characters): the
/// manager creates the manual run, named within the 63 characters a Job may have, with the
/// manager's `--default-job-ttl`, and removes the request. The CronJob is suspended, so only
/// the manual run exists.
pub async fn trigger_runs_now_with_the_default_ttl(client: Client, ns: &str) {
    let name = "a".repeat(52);
    let mut cj = cronjob(&name, 3, true);
    cj.spec.suspend = Some(true);
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), ns);
    cronjobs
        .create(&PostParams::default(), &cj)
        .await
        .expect("create CronJob");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-kronjob"))
        .args(["trigger", &name, "-n", ns, "--wait", "30s"])
        .output()
        .expect("run kubectl-kronjob");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let jobs = jobs_of(&client, ns, &name).await;
    assert_eq!(jobs.len(), 1, "one manual run");
    let job = &jobs[0];
    let job_name = job.metadata.name.clone().unwrap_or_default();
    assert_eq!(stdout.trim(), format!("job.batch/{job_name} created"));
    assert!(job_name.len() <= 63, "{job_name}");
    let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
    assert_eq!(ttl, Some(3600), "the manager's --default-job-ttl");
    wait_for("the request removed", Duration::from_secs(15), || async {
        let cj = cronjobs.get(&name).await.ok()?;
        (!cj.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(kronjob::api::ANNOTATION_TRIGGER))
        .then_some(())
    })
    .await;
}
