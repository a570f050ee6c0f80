//! The CronJob reconciler on a real API server: the README's commands, Jobs on time with
//! their status, completion and history, manual runs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kronjob::api::{ANNOTATION_SCHEDULED_AT, ANNOTATION_TRIGGER, CronJob};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness::{Ctx, Env, wait_for};

crate::cases!(
    cronjob:
    readme_install_commands_and_kubectl_get_output,
    creates_job_within_65s,
    completion_sets_last_success_and_trims_history,
    trigger_runs_now_with_the_default_ttl,
    the_log_says_when_it_leads_and_each_controller_started,
);

/// A CronJob on `* * * * *` keeping `history` successful Jobs.
pub fn every_minute(name: &str, history: i32) -> Value {
    json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": history,
            "jobTemplate": { "spec": {
                "backoffLimit": 0,
                "template": { "spec": {
                    "restartPolicy": "Never",
                    "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["true"] }]
                }}
            }}
        }
    })
}

/// A CronJob on `* * * * *` whose Jobs start no Pod (`suspend: true`), keeping every Job.
pub fn quiet_every_minute(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 100,
            "failedJobsHistoryLimit": 100,
            "jobTemplate": { "spec": {
                "suspend": true,
                "template": { "spec": {
                    "restartPolicy": "Never",
                    "containers": [{ "name": "c", "image": "busybox:1.36" }]
                }}
            }}
        }
    })
}

/// Create the CronJob `manifest` in the Env's namespace.
pub async fn create(env: &Env, manifest: Value) -> CronJob {
    let cj: CronJob = serde_json::from_value(manifest).expect("CronJob manifest");
    env.api::<CronJob>()
        .create(&PostParams::default(), &cj)
        .await
        .expect("create CronJob")
}

/// The README's install commands, as written: `kubectl apply -f crd/` and `-k crd/`, the
/// samples with `-f` and `-k`; every sample gets `status.nextScheduleTime` from the running
/// operator, and `kubectl get kcj` prints the README's header with NEXT SCHEDULE a future time
/// and the README's SCHEDULE for each sample (one with several schedules).
pub async fn readme_install_commands_and_kubectl_get_output(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let mut manager = env.manager(&["--install-crd"]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let ns = env.namespace.as_str();
    env.kubectl_ok(&["apply", "-f", "crd/"]);
    env.kubectl_ok(&["apply", "-k", "crd/"]);
    let created = env.kubectl_ok(&["apply", "-n", ns, "-f", "config/samples/"]);
    env.kubectl_ok(&["apply", "-n", ns, "-k", "config/samples/"]);
    let names: Vec<String> = created
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter_map(|object| object.rsplit('/').next())
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 2, "{created}");
    let api = env.api::<CronJob>();
    for name in &names {
        wait_for(Duration::from_secs(30), "status.nextScheduleTime", || {
            let api = api.clone();
            async move {
                api.get_status(name)
                    .await
                    .ok()?
                    .status?
                    .next_schedule_time
                    .map(|_| ())
            }
        })
        .await;
    }
    let table = env.kubectl_ok(&["get", "kcj", "-n", ns]);
    let readme = std::fs::read_to_string(crate::tools::root().join("README.md")).expect("README");
    assert_eq!(header(&table), header(&readme), "README header vs\n{table}");
    let next_column = table
        .lines()
        .next()
        .and_then(|h| h.find("NEXT SCHEDULE"))
        .expect("NEXT SCHEDULE column");
    // A slot reached while kubectl reads is rewritten a moment later: allow it a few seconds.
    let now = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(10);
    for row in table.lines().skip(1) {
        let cell = row
            .get(next_column..)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_default();
        let next: jiff::Timestamp = cell
            .parse()
            .unwrap_or_else(|e| panic!("NEXT SCHEDULE {cell:?} is not a time ({e}):\n{table}"));
        assert!(
            next > now,
            "NEXT SCHEDULE {next} is not in the future (10 s allowed):\n{table}"
        );
    }
    assert!(!table.contains("<invalid>"), "{table}");
    let readme_rows = schedule_column(&readme);
    for (name, schedule) in schedule_column(&table) {
        let shown = readme_rows.iter().find(|(n, _)| *n == name);
        assert_eq!(
            shown.map(|(_, s)| s.as_str()),
            Some(schedule.as_str()),
            "SCHEDULE of {name}: README vs\n{table}"
        );
    }
    drop(manager);
    env.cleanup().await;
}

/// (NAME, SCHEDULE) of each row of the first `kubectl get kcj` table in `text` (the README's
/// lines start with `# `): SCHEDULE may hold spaces, so it is cut by the header's columns.
fn schedule_column(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.strip_prefix("# ").unwrap_or(l))
        .skip_while(|l| !(l.starts_with("NAME ") && l.contains(" SCHEDULE ")))
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("```"))
        .collect();
    let Some((head, rows)) = lines.split_first() else {
        return Vec::new();
    };
    let (from, to) = (
        head.find("SCHEDULE").expect("SCHEDULE"),
        head.find("TIMEZONE").expect("TIMEZONE"),
    );
    rows.iter()
        .map(|row| {
            let name = row.split_whitespace().next().unwrap_or_default();
            let cell = row.get(from..to).unwrap_or_default().trim();
            (name.to_string(), cell.to_string())
        })
        .collect()
}

/// The words of the first line in `text` that reads like the header of `kubectl get kcj`.
fn header(text: &str) -> Option<Vec<&str>> {
    text.lines()
        .map(|l| {
            l.trim_start_matches("# ")
                .split_whitespace()
                .collect::<Vec<_>>()
        })
        .find(|words| words.first() == Some(&"NAME") && words.contains(&"SCHEDULE"))
}

/// A CronJob on `* * * * *` gets a Job within 65 s, named `<cronjob>-<unix minutes>`, owned by
/// the CronJob, and the CronJob's status lists it as active.
pub async fn creates_job_within_65s(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    // The container reads its slot's time with the downward API, as the README shows.
    let mut manifest = every_minute("every-minute", 3);
    manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"] = json!([{
        "name": "SCHEDULED_AT",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['batch.kronjob.dev/scheduled-at']"}}
    }]);
    create(&env, manifest).await;
    let job = wait_for(Duration::from_secs(65), "a Job", || async {
        env.jobs_of("every-minute").await.into_iter().next()
    })
    .await;
    let name = job.name_any();
    assert!(name.starts_with("every-minute-"), "{name}");
    let owner = &job.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(owner.kind, "CronJob");
    assert_eq!(owner.controller, Some(true));
    let slot = job.annotations().get(ANNOTATION_SCHEDULED_AT).cloned();
    assert!(slot.is_some(), "{:?}", job.metadata.annotations);
    // The Job controller's Pod carries the same time.
    let pods: Api<Pod> = env.api();
    let selector = format!("batch.kubernetes.io/job-name={name}");
    let pod = wait_for(Duration::from_secs(30), "the Job's Pod", || async {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        list.items.into_iter().next()
    })
    .await;
    assert_eq!(
        pod.annotations().get(ANNOTATION_SCHEDULED_AT),
        slot.as_ref()
    );
    let cronjobs = env.api::<CronJob>();
    wait_for(Duration::from_secs(15), "status.active", || async {
        let status = cronjobs.get("every-minute").await.ok()?.status?;
        (status
            .active
            .iter()
            .any(|r| r.name.as_deref() == Some(name.as_str()))
            && status.last_schedule_time.is_some())
        .then_some(())
    })
    .await;
    env.cleanup().await;
}

/// A Job whose Pod succeeds is finished by the Job controller; the CronJob's
/// `lastSuccessfulTime` is set, and with `successfulJobsHistoryLimit: 0` the finished Job is
/// deleted, without the slot running again.
pub async fn completion_sets_last_success_and_trims_history(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    create(&env, every_minute("trimmed", 0)).await;
    let job = wait_for(Duration::from_secs(65), "a Job", || async {
        env.jobs_of("trimmed").await.into_iter().next()
    })
    .await;
    let name = job.name_any();
    // Not `finish_job`: with a history limit of 0 the finished Job is gone at once.
    env.finish_pods(&name, "Succeeded").await;
    let cronjobs = env.api::<CronJob>();
    wait_for(Duration::from_secs(30), "lastSuccessfulTime", || async {
        cronjobs
            .get("trimmed")
            .await
            .ok()?
            .status?
            .last_successful_time
            .map(|_| ())
    })
    .await;
    wait_for(Duration::from_secs(30), "history trimmed", || async {
        let left = env.jobs_of("trimmed").await;
        (!left.iter().any(|j| j.name_any() == name)).then_some(())
    })
    .await;
    // The deleted slot is not re-run: no Job with the same name comes back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = env.jobs_of("trimmed").await;
    assert!(
        !again.iter().any(|j| j.name_any() == name),
        "slot {name} ran twice"
    );
    env.cleanup().await;
}

/// `kubectl kronjob trigger` on a CronJob with the longest valid name (52 characters): the
/// manager creates the manual run, named within the 63 characters a Job may have, with the
/// manager's `--default-job-ttl`, and removes the request. The CronJob is suspended, so only
/// the manual run exists.
pub async fn trigger_runs_now_with_the_default_ttl(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&["--default-job-ttl", "1h"]);
    let name = "a".repeat(52);
    let mut manifest = every_minute(&name, 3);
    manifest["spec"]["suspend"] = json!(true);
    create(&env, manifest).await;
    let stdout = env.plugin_ok(&["trigger", &name, "-n", &env.namespace, "--wait", "30s"]);
    let jobs = env.jobs_of(&name).await;
    assert_eq!(jobs.len(), 1, "one manual run");
    let job = &jobs[0];
    let job_name = job.name_any();
    assert_eq!(stdout.trim(), format!("job.batch/{job_name} created"));
    assert!(job_name.len() <= 63, "{job_name}");
    let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
    assert_eq!(ttl, Some(3600), "the manager's --default-job-ttl");
    let asked = job
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref()?.annotations.as_ref())
        .and_then(|a| {
            a.get(ANNOTATION_SCHEDULED_AT)?
                .parse::<jiff::Timestamp>()
                .ok()
        })
        .expect("the Pod template says when the run was asked for");
    let created = job.metadata.creation_timestamp.as_ref().expect("created").0;
    assert!(
        asked <= created && created.duration_since(asked).as_secs() < 30,
        "asked {asked}, created {created}"
    );
    let cronjobs = env.api::<CronJob>();
    wait_for(Duration::from_secs(15), "the request removed", || async {
        let cj = cronjobs.get(&name).await.ok()?;
        (!cj.annotations().contains_key(ANNOTATION_TRIGGER)).then_some(())
    })
    .await;
    env.cleanup().await;
}

/// A new user watching `kronjob run` can tell that scheduling runs: with `--leader-elect` the
/// log says that it waits for leadership, that the CronJob controller started with the
/// CronJobs it found and the TTL controller started (their caches fill while it stands by),
/// and when it leads.
pub async fn the_log_says_when_it_leads_and_each_controller_started(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    for name in ["first", "second"] {
        let mut manifest = every_minute(name, 1);
        manifest["spec"]["suspend"] = json!(true);
        create(&env, manifest).await;
    }
    let mut manager = env.manager(&[
        "--leader-elect",
        "--leader-election-namespace",
        &env.namespace,
        "--leader-election-id",
        "logs",
    ]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let log = wait_for(
        Duration::from_secs(30),
        "both controllers' start in the log",
        || {
            let log = manager.log();
            async move {
                (log.contains("CronJob controller started")
                    && log.contains("TTL-after-finished controller started"))
                .then_some(log)
            }
        },
    )
    .await;
    let position = |needle: &str| {
        log.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{log}"))
    };
    let waiting = position("waiting for leadership");
    let leading = position("leading: the controllers act");
    let cronjobs = position("CronJob controller started");
    let ttl = position("TTL-after-finished controller started");
    assert!(
        waiting < leading && waiting < cronjobs && waiting < ttl,
        "waiting for leadership comes first:\n{log}"
    );
    let started = log.lines().nth(cronjobs).unwrap_or_default();
    assert!(
        started.contains("cronjobs=2"),
        "the CronJobs it found: {started}"
    );
    drop(manager);
    env.cleanup().await;
}
