//! Runs asked for at a later time on a real API server: `kubectl kronjob trigger --in` leaves a
//! run pending, shown by `list` and `history`; the manager creates its Job at its time and not
//! before, also when the manager is killed and another starts in between (the request lives
//! in the CronJob); a cancelled run never runs, and cancelling one that ran fails.

use std::time::Duration;

use jiff::Timestamp;
use kronjob::api::{ANNOTATION_SCHEDULED_AT, ANNOTATION_TRIGGER, CronJob};
use kronjob::workload::manual_name;
use kube::ResourceExt;
use serde_json::json;

use crate::cronjob::{create, every_minute};
use crate::harness::{Ctx, Env, wait_for};
use crate::plugin::parse_table;

crate::cases!(
    timed:
    a_run_in_45s_is_created_at_its_time_not_before_across_a_restart,
);

/// The time in `trigger --in`'s answer: `... runs at TIME: pending, ...`.
fn pending_time(stdout: &str) -> Timestamp {
    stdout
        .split("runs at ")
        .nth(1)
        .and_then(|rest| rest.split(": pending").next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no pending time in {stdout:?}"))
}

fn now() -> Timestamp {
    Timestamp::now()
}

pub async fn a_run_in_45s_is_created_at_its_time_not_before_across_a_restart(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let ns = env.namespace.clone();
    let mut first = env.manager(&["--default-job-ttl", "1h"]);
    first.wait_ready(Duration::from_secs(60)).await;
    // Suspended: only the runs asked for run, as `trigger` runs a suspended CronJob.
    let mut manifest = every_minute("timed", 3);
    manifest["spec"]["suspend"] = json!(true);
    create(&env, manifest).await;
    let out = env.plugin_ok(&["trigger", "timed", "-n", &ns, "--in", "45s"]);
    let at = pending_time(&out);
    let job = manual_name("timed", at);
    assert!(out.contains(&format!("job.batch/{job}")), "{out}");
    // A second run, cancelled: it never runs.
    let out = env.plugin_ok(&["trigger", "timed", "-n", &ns, "--in", "55s"]);
    let cancelled = pending_time(&out);
    assert!(out.contains(&format!("also pending: {at}")), "{out}");
    let out = env.plugin_ok(&[
        "trigger",
        "timed",
        "-n",
        &ns,
        "--cancel",
        "--at",
        &cancelled.to_string(),
    ]);
    assert!(out.contains("is cancelled"), "{out}");
    // Bad input: exit 2, nothing written.
    for bad in [vec!["--at", "tomorrow"], vec!["--in", "9000h"]] {
        let mut argv = vec!["trigger", "timed", "-n", ns.as_str()];
        argv.extend(bad);
        let refused = env.plugin(&argv);
        assert_eq!(refused.status.code(), Some(2), "{argv:?}: {refused:?}");
    }
    // Pending: in list and history.
    let (_, rows) = parse_table(&env.plugin_ok(&["list", "-n", &ns]));
    let pending = &rows[0]["PENDING"];
    assert!(pending.starts_with("in "), "PENDING {pending:?}");
    let history = env.plugin_ok(&["history", "timed", "-n", &ns]);
    let (_, rows) = parse_table(&history);
    assert_eq!(rows.len(), 1, "{history}");
    assert_eq!(rows[0]["NAME"], job, "{history}");
    assert_eq!(rows[0]["SCHEDULED"], at.to_string(), "{history}");
    assert_eq!(rows[0]["RESULT"], "Pending", "{history}");
    // The manager dies; another starts before the time.
    first.kill();
    let mut second = env.manager(&["--default-job-ttl", "1h"]);
    second.wait_ready(Duration::from_secs(60)).await;
    assert!(
        now() < at,
        "the restart took too long: the case proves nothing"
    );
    // Not before its time.
    while now() < at {
        assert!(env.jobs_of("timed").await.is_empty(), "a Job before {at}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let created = wait_for(Duration::from_secs(15), "the timed run's Job", || async {
        env.jobs_of("timed").await.into_iter().next()
    })
    .await;
    let seen = now();
    eprintln!(
        "e2e: timed run asked for {at}: created {}, seen by the test {:.2} s after its time",
        created
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        seen.duration_since(at).as_secs_f64()
    );
    assert_eq!(created.name_any(), job);
    let created_at = created
        .metadata
        .creation_timestamp
        .as_ref()
        .expect("created")
        .0;
    assert!(created_at >= at, "created {created_at}, asked for {at}");
    assert!(
        created_at.duration_since(at).as_secs() < 10,
        "created {created_at}, asked for {at}"
    );
    let spec = created.spec.as_ref().expect("spec");
    assert_eq!(
        spec.ttl_seconds_after_finished,
        Some(3600),
        "the manager's TTL"
    );
    let stamped = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_SCHEDULED_AT).cloned());
    assert_eq!(
        stamped,
        Some(at.to_string()),
        "the Pods carry the time asked for"
    );
    // The request goes; the cancelled run's time passes without a Job.
    let cronjobs = env.api::<CronJob>();
    wait_for(Duration::from_secs(15), "the request removed", || async {
        let cj = cronjobs.get("timed").await.ok()?;
        (!cj.annotations().contains_key(ANNOTATION_TRIGGER)).then_some(())
    })
    .await;
    while now() < cancelled + jiff::SignedDuration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let jobs: Vec<String> = env
        .jobs_of("timed")
        .await
        .iter()
        .map(|j| j.name_any())
        .collect();
    assert_eq!(
        jobs,
        std::slice::from_ref(&job),
        "the cancelled run never ran"
    );
    // Cancelling the run that ran fails and says so.
    let late = env.plugin(&[
        "trigger",
        "timed",
        "-n",
        &ns,
        "--cancel",
        "--at",
        &at.to_string(),
    ]);
    assert_eq!(late.status.code(), Some(1), "{late:?}");
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert!(
        stderr.contains(&format!("already ran: job.batch/{job}")),
        "{stderr}"
    );
    let history = env.plugin_ok(&["history", "timed", "-n", &ns]);
    assert!(!history.contains("Pending"), "{history}");
    drop(second);
    env.cleanup().await;
}
