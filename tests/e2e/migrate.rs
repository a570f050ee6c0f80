//! `kubectl kronjob migrate` between batch/v1 CronJobs run by the real upstream controller and
//! kronjob CronJobs run by a kronjob manager: `--apply` hands the schedule over between two
//! slots and `--revert --apply` hands it back, with exactly one Job per slot and the status
//! carried both ways; `--all` without `--apply` prints the README's plan and changes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob as BatchCronJob, Job};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kronjob::api::CronJob;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

use jiff::Timestamp;

use crate::harness::{Ctx, Env, wait_for};
use crate::observe::{
    ON_TIME, at_minute, finished_job, job_of_slot, minute_of, not_at_the_end_of_a_minute, slots,
    wait_status,
};

crate::cases!(
    migrate:
    apply_and_revert_hand_each_slot_to_one_controller,
    all_dry_run_prints_the_plan_and_changes_nothing,
);

const SOON: Duration = Duration::from_secs(30);

/// A batch/v1 CronJob on `schedule` whose Jobs fail on their first failed Pod.
fn batch_cronjob(name: &str, schedule: &str) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": schedule,
            "successfulJobsHistoryLimit": 10,
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

/// The controller of a Job: (apiVersion, kind, uid).
fn controller_of(job: &Job) -> Option<(String, String, String)> {
    job.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.api_version.clone(), o.kind.clone(), o.uid.clone()))
}

/// Wait for the Job of `name`'s slot `slot`, created on time (the upstream controller and
/// kronjob both name it `<name>-<minutes>`), and check who controls it.
async fn slot_run_by(env: &Env, name: &str, slot: i64, api_version: &str, uid: &str) -> Job {
    let until = at_minute(slot)
        .duration_since(jiff::Timestamp::now())
        .as_secs()
        .max(0) as u64;
    let job = job_of_slot(env, name, slot, Duration::from_secs(until + 20)).await;
    let late = job
        .creation_timestamp()
        .expect("creationTimestamp")
        .0
        .as_second()
        - slot * 60;
    assert!(
        (0..=ON_TIME).contains(&late),
        "{} created {late} s after its slot",
        job.name_any()
    );
    let controller = controller_of(&job);
    let want = (
        api_version.to_string(),
        "CronJob".to_string(),
        uid.to_string(),
    );
    assert_eq!(
        controller,
        Some(want),
        "the controller of {}",
        job.name_any()
    );
    job
}

/// What a case reads of a batch/v1 CronJob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Original {
    last_schedule: Option<Timestamp>,
    last_success: Option<Timestamp>,
    suspended: bool,
}

/// The batch/v1 CronJob `name` as it is now.
async fn original(api: &Api<BatchCronJob>, name: &str) -> Original {
    let cj = api.get(name).await.expect("the batch/v1 CronJob");
    let status = cj.status.unwrap_or_default();
    Original {
        last_schedule: status.last_schedule_time.as_ref().map(|t| t.0),
        last_success: status.last_successful_time.as_ref().map(|t| t.0),
        suspended: cj.spec.and_then(|s| s.suspend).unwrap_or(false),
    }
}

/// A control plane whose kube-controller-manager also runs the upstream `cronjob` controller,
/// with the CRD established, and a namespace on it.
async fn plane_with_the_cronjob_controller(ctx: &Ctx) -> (kronjob_envtest::ControlPlane, Env) {
    let mut controllers: Vec<String> = kronjob_envtest::DEFAULT_CONTROLLERS
        .iter()
        .map(|c| c.to_string())
        .collect();
    controllers.push("cronjob".into());
    let options = kronjob_envtest::Options {
        controllers,
        ..Default::default()
    };
    let plane = ctx.own_control_plane(options).await;
    let env = Env::on(ctx, plane.kubeconfig()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let crd = "cronjobs.batch.kronjob.dev";
    let established = await_condition(crds, crd, conditions::is_crd_established());
    tokio::time::timeout(SOON, established)
        .await
        .expect("the CRD is established")
        .expect("watching the CRD");
    (plane, env)
}

/// Finish the Job of `slot` (its Pod succeeds) and wait for the Job controller.
async fn succeed(env: &Env, job: &Job) {
    env.finish_pods(&job.name_any(), "Succeeded").await;
    finished_job(env, &job.name_any()).await;
}

/// A batch/v1 CronJob on `* * * * *` runs one slot under the upstream controller (its Pod
/// succeeds); `migrate --apply` hands it to the kronjob manager, which runs the next slot on
/// time with the original's status; `migrate --revert --apply` hands it back, and the upstream
/// controller runs the slot after. Each slot has exactly one Job, created by the controller
/// that held the CronJob then.
pub async fn apply_and_revert_hand_each_slot_to_one_controller(ctx: Ctx) {
    let (plane, env) = plane_with_the_cronjob_controller(&ctx).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(SOON).await;
    let originals: Api<BatchCronJob> = env.api();
    not_at_the_end_of_a_minute().await;
    let manifest: BatchCronJob =
        serde_json::from_value(batch_cronjob("mig", "* * * * *")).expect("batch/v1 CronJob");
    let created = originals
        .create(&PostParams::default(), &manifest)
        .await
        .expect("create the batch/v1 CronJob");
    let original_uid = created.uid().expect("uid");
    let first = minute_of(created.creation_timestamp().expect("creationTimestamp").0) + 1;

    // Slot 1: the upstream controller.
    let job = slot_run_by(&env, "mig", first, "batch/v1", &original_uid).await;
    succeed(&env, &job).await;
    let before = wait_for(
        SOON,
        "the upstream controller records the success",
        || async {
            let now = original(&originals, "mig").await;
            now.last_success.is_some().then_some(now)
        },
    )
    .await;
    assert_eq!(before.last_schedule, Some(at_minute(first)));

    // Slot 2: kronjob.
    let kron_uid = migrate(&env, &original_uid, before).await;
    let job = slot_run_by(&env, "mig", first + 1, "batch.kronjob.dev/v1", &kron_uid).await;
    succeed(&env, &job).await;
    let kron = wait_status(&env, "mig", SOON, "kronjob records the success", |s| {
        let succeeded = s.last_successful_time.as_ref().map(|t| t.0);
        (succeeded > before.last_success && s.active.is_empty()).then(|| s.clone())
    })
    .await;
    let scheduled = kron.last_schedule_time.as_ref().map(|t| t.0);
    assert_eq!(scheduled, Some(at_minute(first + 1)));
    let still = original(&originals, "mig").await;
    assert_eq!(
        still,
        Original {
            suspended: true,
            ..before
        },
        "the original stood still"
    );

    // Slot 3: the upstream controller again.
    let handed_back = Original {
        last_schedule: scheduled,
        last_success: kron.last_successful_time.as_ref().map(|t| t.0),
        suspended: false,
    };
    revert(&env, &kron_uid, handed_back).await;
    slot_run_by(&env, "mig", first + 2, "batch/v1", &original_uid).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let jobs = env
        .api::<Job>()
        .list(&ListParams::default())
        .await
        .expect("Jobs");
    let runs = slots(&jobs.items);
    assert_eq!(runs, vec![first, first + 1, first + 2], "one Job per slot");
    let kept = jobs
        .items
        .iter()
        .find(|j| crate::harness::slot_of(j) == Some(first + 1))
        .expect("slot 2's Job");
    assert_eq!(
        controller_of(kept),
        None,
        "the revert orphans kronjob's Jobs"
    );
    let after = original(&originals, "mig").await;
    assert_eq!(after.last_schedule, Some(at_minute(first + 2)));
    drop(manager);
    env.cleanup().await;
    drop(plane);
}

/// `migrate mig --apply`: migrated, the original suspended, the kronjob CronJob resumed with
/// the migration's annotations and the original's status `before`; its UID.
async fn migrate(env: &Env, original_uid: &str, before: Original) -> String {
    let ns = env.namespace.as_str();
    let out = env.plugin_ok(&["migrate", "mig", "-n", ns, "--apply"]);
    let done = format!("cronjob.batch/mig -n {ns}: migrated");
    assert_eq!(out.lines().next(), Some(done.as_str()), "{out}");
    let now = original(&env.api(), "mig").await;
    assert!(now.suspended, "the original is suspended");
    let kron = env
        .api::<CronJob>()
        .get("mig")
        .await
        .expect("the kronjob CronJob");
    assert_eq!(kron.spec.suspend, Some(false), "resumed");
    let annotation = |key: &str| kron.annotations().get(key).cloned().unwrap_or_default();
    let record = [
        annotation("batch.kronjob.dev/migrated-from"),
        annotation("batch.kronjob.dev/migrated-from-uid"),
        annotation("batch.kronjob.dev/migration"),
    ];
    assert_eq!(record, ["batch/v1", original_uid, "complete"]);
    let status = kron.status.clone().unwrap_or_default();
    let carried = (
        status.last_schedule_time.as_ref().map(|t| t.0),
        status.last_successful_time.as_ref().map(|t| t.0),
    );
    let want = (before.last_schedule, before.last_success);
    assert_eq!(carried, want, "the original's status carried over");
    kron.uid().expect("uid")
}

/// `migrate mig --revert --apply`: reverted, the original resumed with the kronjob CronJob's
/// status (`want`), the kronjob CronJob (`kron_uid`) deleted.
async fn revert(env: &Env, kron_uid: &str, want: Original) {
    let ns = env.namespace.as_str();
    let out = env.plugin_ok(&["migrate", "mig", "-n", ns, "--revert", "--apply"]);
    let done = format!("cronjob.batch/mig -n {ns}: reverted");
    assert_eq!(out.lines().next(), Some(done.as_str()), "{out}");
    let now = original(&env.api(), "mig").await;
    assert_eq!(now, want, "the status carried back, the original resumed");
    let gone = await_condition(
        env.api::<CronJob>(),
        "mig",
        conditions::is_deleted(kron_uid),
    );
    tokio::time::timeout(SOON, gone)
        .await
        .expect("the kronjob CronJob is deleted")
        .expect("watching it");
}

/// The README's example of `migrate` for `cj` in `ns`: the plan's lines and the line on
/// stderr.
fn readme_plan(ns: &str) -> (Vec<String>, String) {
    let readme = std::fs::read_to_string(crate::tools::root().join("README.md")).expect("README");
    let mut example: Vec<String> = readme
        .lines()
        .skip_while(|l| *l != "$ kubectl kronjob migrate cj -n ns")
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .map(|l| l.replace(" -n ns:", &format!(" -n {ns}:")))
        .collect();
    let dry_run = example.pop().expect("the README's example");
    (example, dry_run)
}

/// The batch/v1 CronJobs' names and resourceVersions.
async fn versions(api: &Api<BatchCronJob>) -> BTreeMap<String, String> {
    let list = api.list(&ListParams::default()).await.expect("list");
    list.items
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap_or_default()))
        .collect()
}

/// `migrate --all` without `--apply`: for the CronJob of the README's example (applied with
/// kubectl, so it has kubectl's last-applied annotation, and with the example's status) it
/// prints the README's plan word for word; for a plain one the same steps without the
/// annotation and status lines; `Dry run: ...` on stderr; `-o json` says the same as data;
/// nothing changes.
pub async fn all_dry_run_prints_the_plan_and_changes_nothing(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let ns = env.namespace.clone();
    let manifest = ctx.logs.join(format!("cj-{ns}.json"));
    let json = batch_cronjob("cj", "0 * * * *").to_string();
    std::fs::write(&manifest, json).expect("write manifest");
    env.kubectl_ok(&["apply", "-n", &ns, "-f", &manifest.display().to_string()]);
    let originals: Api<BatchCronJob> = env.api();
    let status = json!({"status": {
        "lastScheduleTime": "2016-05-19T09:00:00Z",
        "lastSuccessfulTime": "2016-05-19T09:00:12Z",
    }});
    let (patch, params) = (Patch::Merge(&status), PatchParams::default());
    let written = originals.patch_status("cj", &params, &patch).await;
    written.expect("write the example's status");
    let other: BatchCronJob =
        serde_json::from_value(batch_cronjob("other", "0 * * * *")).expect("batch/v1 CronJob");
    let made = originals.create(&PostParams::default(), &other).await;
    made.expect("create other");
    let before = versions(&originals).await;

    let out = env.plugin(&["migrate", "--all", "-n", &ns]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let (plan, dry_run) = readme_plan(&ns);
    assert_eq!(stderr.trim_end(), dry_run, "stderr");
    let lines: Vec<&str> = stdout.lines().collect();
    let (cj_plan, other_plan) = lines.split_at(plan.len().min(lines.len()));
    assert_eq!(cj_plan, plan, "the README's plan for cj:\n{stdout}");
    let expected: Vec<String> = plan
        .iter()
        .filter(|l| !l.contains("last-applied-configuration") && !l.contains("copy status."))
        .map(|l| l.replace("/cj", "/other"))
        .collect();
    assert_eq!(other_plan, expected, "the plan for other:\n{stdout}");

    let out = env.plugin_ok(&["migrate", "--all", "-n", &ns, "-o", "json"]);
    let report: Value = serde_json::from_str(&out).expect("-o json");
    assert_eq!(report["dryRun"], json!(true));
    let items = report["items"].as_array().expect("items");
    let summary: Vec<(&str, &str)> = items
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap_or_default(),
                i["action"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(summary, [("cj", "migrate"), ("other", "migrate")], "{out}");
    let clean = |i: &Value| i["error"].is_null() && i["namespace"] == json!(ns);
    assert!(items.iter().all(clean), "{out}");
    assert_eq!(items[0]["cronjob"]["spec"]["suspend"], json!(true), "{out}");

    let kronjobs = env
        .api::<CronJob>()
        .list(&ListParams::default())
        .await
        .expect("list");
    assert!(
        kronjobs.items.is_empty(),
        "a dry run created {:?}",
        kronjobs.items
    );
    assert_eq!(
        before,
        versions(&originals).await,
        "a dry run changed a batch/v1 CronJob"
    );
    env.cleanup().await;
}
