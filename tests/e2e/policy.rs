//! `concurrencyPolicy` with Jobs that really run: a Job's Pods stay Pending (no kubelet), so it
//! runs until a case finishes its Pods. Allow runs the next slot beside it; Forbid skips the
//! next slot while it runs and runs that slot once it ends (upstream: the skipped slot is still
//! the most recent one due); Replace deletes it (background propagation, as upstream) and runs
//! the new slot. `status.active` lists the running Jobs all along.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kronjob::api::CronJob;
use kube::ResourceExt;
use kube::api::ListParams;
use serde_json::json;

use crate::cronjob::create;
use crate::harness::{Ctx, Env, wait_for};
use crate::observe::{
    active_names, at_minute, cronjob, job_name, job_on_time, minute_of, not_at_the_end_of_a_minute,
    slots_of, status, wait_event, wait_status,
};

crate::cases!(
    policy:
    allow_runs_the_next_slot_beside_a_running_job,
    forbid_skips_a_slot_while_a_job_runs,
    replace_deletes_the_running_job_for_the_next_slot,
);

const SOON: Duration = Duration::from_secs(20);

/// A CronJob on `* * * * *` with `policy`, and the first slot it runs.
async fn start(env: &Env, name: &str, policy: &str) -> (CronJob, i64) {
    not_at_the_end_of_a_minute().await;
    let spec = json!({"concurrencyPolicy": policy});
    let cj = create(env, cronjob(name, "* * * * *", spec)).await;
    let created = cj.creation_timestamp().expect("creationTimestamp").0;
    (cj, minute_of(created) + 1)
}

/// Wait until `status.active` names exactly `jobs`, in that order, with `activeCount` equal.
async fn active_becomes(env: &Env, cronjob: &str, jobs: &[String]) {
    let what = format!("status.active {jobs:?}");
    wait_status(env, cronjob, SOON, &what, |s| {
        (active_names(s) == jobs && s.active_count as usize == jobs.len()).then_some(())
    })
    .await;
}

/// Watch `status.active` from now until `until` (a minute), sampling it; every sample must
/// satisfy `check`.
async fn active_throughout(
    env: &Env,
    cronjob: &str,
    until: jiff::Timestamp,
    mut check: impl FnMut(&[String]) -> Result<(), String>,
) {
    let mut samples = 0;
    while jiff::Timestamp::now() < until {
        let names = active_names(&status(env, cronjob).await);
        if let Err(why) = check(&names) {
            panic!("status.active {names:?}: {why}");
        }
        samples += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(samples > 0, "status.active was never sampled");
}

/// Allow: the first slot's Job still runs when the second slot comes; both run, both listed.
pub async fn allow_runs_the_next_slot_beside_a_running_job(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    let (cj, first) = start(&env, "allow", "Allow").await;
    let one = job_on_time(&env, &cj, first).await.name_any();
    active_becomes(&env, "allow", std::slice::from_ref(&one)).await;
    let two = job_on_time(&env, &cj, first + 1).await.name_any();
    active_becomes(&env, "allow", &[one.clone(), two.clone()]).await;
    let jobs = env.jobs_of("allow").await;
    assert!(
        jobs.iter().all(|j| j.metadata.deletion_timestamp.is_none()),
        "nothing is deleted"
    );
    assert_eq!(slots_of(&env, "allow").await, vec![first, first + 1]);
    // Once the Job controller has finished it, kronjob drops it from status.active within SOON.
    env.finish_job(&one, "Succeeded").await;
    active_becomes(&env, "allow", std::slice::from_ref(&two)).await;
    env.cleanup().await;
}

/// Forbid: while the first Job runs, the second slot passes without a Job
/// (`JobAlreadyActive`), `status.active` keeps listing the running Job and `lastScheduleTime`
/// stays at the first slot; once its Pod succeeds, the skipped slot runs.
pub async fn forbid_skips_a_slot_while_a_job_runs(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    let (cj, first) = start(&env, "forbid", "Forbid").await;
    let one = job_on_time(&env, &cj, first).await.name_any();
    active_becomes(&env, "forbid", std::slice::from_ref(&one)).await;
    let second = at_minute(first + 1);
    active_throughout(
        &env,
        "forbid",
        second + jiff::SignedDuration::from_secs(10),
        |names| {
            (names == std::slice::from_ref(&one))
                .then_some(())
                .ok_or_else(|| format!("only {one} runs"))
        },
    )
    .await;
    let skipped = wait_event(&env, "forbid", "JobAlreadyActive", "", SOON).await;
    assert_eq!(skipped.type_, "Normal");
    assert_eq!(slots_of(&env, "forbid").await, vec![first], "slot 2 ran");
    let held = status(&env, "forbid").await;
    assert_eq!(
        held.last_schedule_time.as_ref().map(|t| t.0),
        Some(at_minute(first))
    );
    assert_eq!(
        held.next_schedule_time.as_ref().map(|t| t.0),
        Some(at_minute(first + 2))
    );
    // Once the Job controller has finished it, the skipped slot runs within SOON.
    env.finish_job(&one, "Succeeded").await;
    let late = crate::observe::job_of_slot(&env, "forbid", first + 1, SOON).await;
    active_becomes(&env, "forbid", &[late.name_any()]).await;
    let after = status(&env, "forbid").await;
    assert_eq!(after.last_schedule_time.as_ref().map(|t| t.0), Some(second));
    assert!(after.last_successful_time.is_some(), "{after:?}");
    assert_eq!(slots_of(&env, "forbid").await, vec![first, first + 1]);
    env.cleanup().await;
}

/// Replace: at the second slot the running Job is deleted with background propagation (gone at
/// once, its Pods removed by the garbage collector after it) and the new slot's Job created;
/// `status.active` never goes empty, and once it names the new Job it never names the old one
/// again.
pub async fn replace_deletes_the_running_job_for_the_next_slot(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let _manager = env.manager(&[]);
    let (cj, first) = start(&env, "replace", "Replace").await;
    let one = job_on_time(&env, &cj, first).await;
    let one_name = one.name_any();
    let two_name = job_name("replace", first + 1);
    active_becomes(&env, "replace", std::slice::from_ref(&one_name)).await;
    let pods: kube::Api<Pod> = env.api();
    let selector = format!("batch.kubernetes.io/job-name={one_name}");
    wait_for(SOON, "the first Job's Pod", || async {
        let listed = pods.list(&ListParams::default().labels(&selector)).await;
        listed.ok().filter(|l| !l.items.is_empty()).map(|_| ())
    })
    .await;
    let lingered = tokio::spawn(lingers_while_deleted(env.api::<Job>(), one_name.clone()));
    let mut replaced = false;
    active_throughout(
        &env,
        "replace",
        at_minute(first + 1) + jiff::SignedDuration::from_secs(15),
        |names| {
            if names.is_empty() {
                return Err("a Job runs all along".into());
            }
            if names.len() > 1 {
                return Err("one Job at a time".into());
            }
            if replaced && names.contains(&one_name) {
                return Err(format!("{one_name} came back after {two_name}"));
            }
            replaced |= names.contains(&two_name);
            Ok(())
        },
    )
    .await;
    assert!(replaced, "status.active never named {two_name}");
    let two = job_on_time(&env, &cj, first + 1).await;
    assert_eq!(two.name_any(), two_name);
    let jobs: kube::Api<Job> = env.api();
    assert!(
        jobs.get_opt(&one_name).await.expect("get Job").is_none(),
        "{one_name} is gone"
    );
    let lingered = tokio::time::timeout(SOON, lingered)
        .await
        .expect("the watch of the replaced Job ends with its deletion")
        .expect("the watch task");
    assert!(
        !lingered,
        "{one_name} was kept while being deleted: foreground propagation, not background"
    );
    active_becomes(&env, "replace", std::slice::from_ref(&two_name)).await;
    wait_for(
        SOON,
        "the garbage collector deletes the first Job's Pods",
        || async {
            let listed = pods.list(&ListParams::default().labels(&selector)).await;
            listed.ok().filter(|l| l.items.is_empty()).map(|_| ())
        },
    )
    .await;
    let deleted = wait_event(&env, "replace", "SuccessfulDelete", &one_name, SOON).await;
    assert_eq!(deleted.note, format!("Deleted job {one_name}"));
    assert_eq!(slots_of(&env, "replace").await, vec![first + 1]);
    let after = status(&env, "replace").await;
    assert_eq!(
        after.last_schedule_time.as_ref().map(|t| t.0),
        Some(at_minute(first + 1))
    );
    env.cleanup().await;
}

/// Watch the Job `name` until it is deleted: whether it was ever seen being deleted yet still
/// there (a `deletionTimestamp` on a live object: foreground propagation waiting for its Pods,
/// or a finalizer), rather than removed at once as background propagation does.
async fn lingers_while_deleted(jobs: kube::Api<Job>, name: String) -> bool {
    use futures::TryStreamExt;
    use kube::runtime::watcher::{self, Event};
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = std::pin::pin!(watcher::watcher(jobs, config));
    let mut lingered = false;
    while let Ok(Some(event)) = stream.try_next().await {
        match event {
            Event::Apply(job) | Event::InitApply(job) => {
                lingered |= job.metadata.deletion_timestamp.is_some();
            }
            Event::Delete(_) => return lingered,
            Event::Init | Event::InitDone => {}
        }
    }
    lingered
}
