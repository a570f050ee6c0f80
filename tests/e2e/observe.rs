//! What the scheduling cases set up and read back: CronJob manifests on a schedule of their
//! choice, a status written as an earlier manager would have left it, the Job of a slot, the
//! CronJob's status and its Events.

// A toolbox for the cases: not every case uses every tool.
#![allow(dead_code)]

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kronjob::api::{ANNOTATION_SCHEDULED_AT, CronJob, CronJobStatus};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::{Env, at_second, wait_for};

/// How late a Job may be created after its slot and still count as on time: creation
/// timestamps have whole seconds, and the machine is shared (the README's claim is far
/// tighter; the skew metric measures it).
pub const ON_TIME: i64 = 5;

/// The time of the minute `minute` (minutes since the epoch).
pub fn at_minute(minute: i64) -> Timestamp {
    Timestamp::from_second(minute * 60).expect("a minute within jiff's range")
}

/// The minute (since the epoch) `t` falls in.
pub fn minute_of(t: Timestamp) -> i64 {
    t.as_second().div_euclid(60)
}

/// A CronJob on `schedule` whose Jobs fail on their first failed Pod, with `spec` merged into
/// its spec.
pub fn cronjob(name: &str, schedule: &str, spec: Value) -> Value {
    let mut manifest = json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": schedule,
            "jobTemplate": { "spec": {
                "backoffLimit": 0,
                "template": { "spec": {
                    "restartPolicy": "Never",
                    "containers": [{ "name": "c", "image": "busybox:1.36", "command": ["true"] }]
                }}
            }}
        }
    });
    if let Value::Object(fields) = spec {
        for (key, value) in fields {
            manifest["spec"][key] = value;
        }
    }
    manifest
}

/// A schedule whose minutes are `minutes` (any integers, taken modulo 60) of every hour.
pub fn minutes_of_every_hour(minutes: &[i64]) -> String {
    let list: Vec<String> = minutes
        .iter()
        .map(|m| m.rem_euclid(60).to_string())
        .collect();
    format!("{} * * * *", list.join(","))
}

/// Leave the rest of a minute for what follows: past second 45, wait for the next minute's
/// second 1, so a CronJob created now has its first slot at least 15 s away.
pub async fn not_at_the_end_of_a_minute() {
    if Timestamp::now().as_second().rem_euclid(60) > 45 {
        at_second(1).await;
    }
}

/// The CronJob `name`'s status (empty when it has none).
pub async fn status(env: &Env, name: &str) -> CronJobStatus {
    env.api::<CronJob>()
        .get_status(name)
        .await
        .unwrap_or_else(|e| panic!("read CronJob {name}: {e}"))
        .status
        .unwrap_or_default()
}

/// Poll the CronJob's status until `probe` accepts it; panic naming `what` after `limit`.
pub async fn wait_status<T>(
    env: &Env,
    name: &str,
    limit: Duration,
    what: &str,
    probe: impl Fn(&CronJobStatus) -> Option<T>,
) -> T {
    let api = env.api::<CronJob>();
    let what = format!("CronJob {name}: {what}");
    let probe = &probe;
    wait_for(limit, &what, || {
        let api = api.clone();
        async move {
            let status = api.get_status(name).await.ok()?.status?;
            probe(&status)
        }
    })
    .await
}

/// Write `status.lastScheduleTime` through the status subresource, as a manager that ran the
/// slot `at` would have.
pub async fn set_last_schedule_time(env: &Env, name: &str, at: Timestamp) {
    let patch = json!({ "status": { "lastScheduleTime": Time(at) } });
    env.api::<CronJob>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("write the status of CronJob {name}: {e}"));
}

/// The name of the Job of `cronjob` for the slot at minute `slot`.
pub fn job_name(cronjob: &str, slot: i64) -> String {
    format!("{cronjob}-{slot}")
}

/// Wait up to `limit` for the Job of `cronjob`'s slot `slot`.
pub async fn job_of_slot(env: &Env, cronjob: &str, slot: i64, limit: Duration) -> Job {
    job_named(env, &job_name(cronjob, slot), limit).await
}

/// Wait up to `limit` for the Job `name`.
pub async fn job_named(env: &Env, name: &str, limit: Duration) -> Job {
    let jobs = env.api::<Job>();
    let what = format!("Job {name}");
    wait_for(limit, &what, || {
        let jobs = jobs.clone();
        async move { jobs.get_opt(name).await.ok()? }
    })
    .await
}

/// Wait for the Job of `cronjob`'s slot `slot` (from now until `ON_TIME` s after the slot, plus
/// a margin for the wait itself) and check it is a scheduled run of `cj`: created on time,
/// controlled by it, labelled and annotated with its slot.
pub async fn job_on_time(env: &Env, cj: &CronJob, slot: i64) -> Job {
    let name = cj.name_any();
    let until = at_minute(slot)
        .duration_since(Timestamp::now())
        .as_secs()
        .max(0) as u64;
    let job = job_of_slot(env, &name, slot, Duration::from_secs(until + 15)).await;
    let created = job.creation_timestamp().expect("creationTimestamp").0;
    let late = created.as_second() - slot * 60;
    assert!(
        (0..=ON_TIME).contains(&late),
        "Job {} created {late} s after its slot {}",
        job.name_any(),
        at_minute(slot)
    );
    let owner = job
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .unwrap_or_else(|| panic!("Job {} has no controller", job.name_any()));
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str()
        ),
        ("batch.kronjob.dev/v1", "CronJob", name.as_str())
    );
    assert_eq!(Some(owner.uid.as_str()), cj.metadata.uid.as_deref());
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(
        job.labels().get("batch.kronjob.dev/cronjob"),
        Some(&name),
        "label of {}",
        job.name_any()
    );
    assert_eq!(
        job.annotations()
            .get(ANNOTATION_SCHEDULED_AT)
            .map(String::as_str),
        Some(at_minute(slot).to_string().as_str()),
        "annotation {ANNOTATION_SCHEDULED_AT} of {}",
        job.name_any()
    );
    job
}

/// The slots (minutes) of Jobs named `<cronjob>-<minutes>`, sorted.
pub fn slots(jobs: &[Job]) -> Vec<i64> {
    let mut slots: Vec<i64> = jobs.iter().filter_map(crate::harness::slot_of).collect();
    slots.sort_unstable();
    slots
}

/// The slots of the Jobs of `cronjob` that exist now.
pub async fn slots_of(env: &Env, cronjob: &str) -> Vec<i64> {
    slots(&env.jobs_of(cronjob).await)
}

/// The names in `status.active`.
pub fn active_names(status: &CronJobStatus) -> Vec<String> {
    status
        .active
        .iter()
        .filter_map(|r| r.name.clone())
        .collect()
}

/// An Event as a case looks at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The reason.
    pub reason: String,
    /// The note.
    pub note: String,
    /// Who reported it.
    pub controller: String,
}

/// The Events (events.k8s.io/v1) about the CronJob `name`, oldest first.
pub async fn events(env: &Env, name: &str) -> Vec<Seen> {
    let list = env
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .expect("list Events");
    let mut about: Vec<&Event> = list
        .items
        .iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("CronJob") && r.name.as_deref() == Some(name)
            })
        })
        .collect();
    about.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    about
        .into_iter()
        .map(|e| Seen {
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            note: e.note.clone().unwrap_or_default(),
            controller: e.reporting_controller.clone().unwrap_or_default(),
        })
        .collect()
}

/// Wait for an Event about the CronJob `name` with `reason` whose note contains `note`; on a
/// timeout, the panic lists the Events there are.
pub async fn wait_event(env: &Env, name: &str, reason: &str, note: &str, limit: Duration) -> Seen {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let seen = events(env, name).await;
        if let Some(event) = seen
            .iter()
            .find(|e| e.reason == reason && e.note.contains(note))
        {
            return event.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no Event {reason} {note:?} about CronJob {name} within {limit:?}; there are:\n{}",
            seen.iter()
                .map(|e| format!("  {} {} {:?}", e.type_, e.reason, e.note))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Wait until the Job controller finished the Job `name` and return it as it is then.
pub async fn finished_job(env: &Env, name: &str) -> Job {
    env.wait_job_finished(name, Duration::from_secs(60)).await;
    env.api::<Job>()
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("read Job {name}: {e}"))
}

/// When the Job finished with `condition` (`Complete` or `Failed`): the condition's
/// `lastTransitionTime`.
pub fn finished_at(job: &Job, condition: &str) -> Timestamp {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == condition && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .unwrap_or_else(|| panic!("Job {} has no {condition}=True", job.name_any()))
        .0
}

/// Sleep until `at` (at once when it has passed).
pub async fn sleep_until(at: Timestamp) {
    let wait = at.duration_since(Timestamp::now());
    if let Ok(wait) = Duration::try_from(wait) {
        tokio::time::sleep(wait).await;
    }
}
