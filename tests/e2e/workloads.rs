//! Any workload kind on the real API server: CRDs with the real group, version, kind and plural
//! of JobSet, RayJob, PipelineRun, Workflow, TrainJob and SparkApplication (written here: their
//! controllers cannot run, so each case sets status as that controller would, as the other
//! cases finish Jobs), and a kind known only through `spec.completion`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kronjob::api::CronJob;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions::is_crd_established};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::harness::{Ctx, Env, apply, wait_for};

crate::cases!(
    workloads:
    every_kind_runs_its_slot_and_finishes_by_its_rule,
    policies_history_failures_and_ttls_hold_for_any_kind,
    a_kind_installed_late_starts_by_itself_and_one_removed_or_not_allowed_is_reported,
    a_restart_backfill_and_manual_runs_make_one_object_per_run,
    the_webhook_judges_a_workload_by_its_authors_access_and_its_kinds_schema,
);

/// A kind the tests serve with a CRD of their own: (group, version, kind, plural).
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

impl Kind {
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    pub fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.into(),
            version: self.version.into(),
            api_version: self.api_version(),
            kind: self.kind.into(),
            plural: self.plural.into(),
        }
    }

    /// `--workload-kinds`'s name of it.
    pub fn name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    pub fn api(&self, env: &Env) -> Api<DynamicObject> {
        Api::namespaced_with(env.client.clone(), &env.namespace, &self.resource())
    }
}

pub const JOBSET: Kind = Kind {
    group: "jobset.x-k8s.io",
    version: "v1alpha2",
    kind: "JobSet",
    plural: "jobsets",
};
pub const RAYJOB: Kind = Kind {
    group: "ray.io",
    version: "v1",
    kind: "RayJob",
    plural: "rayjobs",
};
pub const PIPELINERUN: Kind = Kind {
    group: "tekton.dev",
    version: "v1",
    kind: "PipelineRun",
    plural: "pipelineruns",
};
pub const WORKFLOW: Kind = Kind {
    group: "argoproj.io",
    version: "v1alpha1",
    kind: "Workflow",
    plural: "workflows",
};
pub const TRAINJOB: Kind = Kind {
    group: "trainer.kubeflow.org",
    version: "v1alpha1",
    kind: "TrainJob",
    plural: "trainjobs",
};
pub const SPARK: Kind = Kind {
    group: "sparkoperator.k8s.io",
    version: "v1beta2",
    kind: "SparkApplication",
    plural: "sparkapplications",
};
/// A kind no rule of kronjob's knows: its CronJobs say when a run finished (`spec.completion`).
pub const WIDGET: Kind = Kind {
    group: "e2e.kronjob.dev",
    version: "v1",
    kind: "Widget",
    plural: "widgets",
};

/// The kinds of the real projects, and the one known only through `spec.completion`.
pub const KINDS: [Kind; 7] = [
    JOBSET,
    RAYJOB,
    PIPELINERUN,
    WORKFLOW,
    TRAINJOB,
    SPARK,
    WIDGET,
];

/// The CRD of `kind`: namespaced, any spec and status kept, a status subresource.
pub fn crd(kind: &Kind) -> Value {
    // The API server wants this of a group under k8s.io, as the real project's CRD has it.
    let protected = kind.group.ends_with(".k8s.io") || kind.group.ends_with(".kubernetes.io");
    let annotations = if protected {
        json!({"api-approved.kubernetes.io": "unapproved, experimental-only"})
    } else {
        json!({})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{}.{}", kind.plural, kind.group),
            "annotations": annotations,
        },
        "spec": {
            "group": kind.group,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "plural": kind.plural,
                "singular": kind.kind.to_ascii_lowercase(),
                "listKind": format!("{}List", kind.kind),
            },
            "versions": [{
                "name": kind.version,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
}

/// Install the CRD of each of `kinds` (again is fine) and wait until each is Established.
pub async fn install(client: &Client, kinds: &[Kind]) {
    for kind in kinds {
        install_crd(client, crd(kind)).await;
    }
}

/// Install the CRD `body` (again is fine) and wait until it is Established.
pub async fn install_crd(client: &Client, body: Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let object: CustomResourceDefinition = serde_json::from_value(body).expect("a CRD");
    crds.patch(
        &name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("install the CRD {name}: {e}"));
    let established = await_condition(crds.clone(), &name, is_crd_established());
    tokio::time::timeout(Duration::from_secs(60), established)
        .await
        .unwrap_or_else(|_| panic!("{name} Established within 60 s"))
        .expect("the CRD's watch");
}

/// A CronJob on `* * * * *` running `kind` with `spec`, keeping one finished run of each
/// outcome; with `completion` for a kind without a rule (the Widget's `status.result`).
pub fn cronjob(name: &str, kind: &Kind, spec: Value) -> Value {
    let mut cj = json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 1,
            "workloadTemplate": {
                "apiVersion": kind.api_version(),
                "kind": kind.kind,
                "metadata": {"labels": {"team": "e2e"}},
                "spec": spec,
            },
        },
    });
    if kronjob::workload::kinds::known(kind.group, kind.kind).is_none() {
        cj["spec"]["completion"] = json!({
            "succeeded": "self.status.result == 'ok'",
            "failed": "self.status.result == 'broken'",
        });
    }
    cj
}

/// The status that kind's controller writes when a run succeeds (`ok`) or fails, at `at`.
pub fn finished(kind: &Kind, ok: bool, at: &str) -> Value {
    let condition = |type_: &str, status: &str| json!({"type": type_, "status": status, "reason": "E2e", "message": "", "lastTransitionTime": at});
    match kind.kind {
        "JobSet" => {
            json!({"conditions": [condition(if ok { "Completed" } else { "Failed" }, "True")]})
        }
        "RayJob" => json!({
            "jobDeploymentStatus": "Complete",
            "jobStatus": if ok { "SUCCEEDED" } else { "FAILED" },
            "endTime": at,
        }),
        "PipelineRun" => json!({
            "conditions": [condition("Succeeded", if ok { "True" } else { "False" })],
            "completionTime": at,
        }),
        "Workflow" => json!({"phase": if ok { "Succeeded" } else { "Error" }, "finishedAt": at}),
        "TrainJob" => {
            json!({"conditions": [condition(if ok { "Complete" } else { "Failed" }, "True")]})
        }
        "SparkApplication" => json!({
            "applicationState": {"state": if ok { "COMPLETED" } else { "SUBMISSION_FAILED" }},
            "terminationTime": at,
        }),
        _ => json!({"result": if ok { "ok" } else { "broken" }, "completionTime": at}),
    }
}

/// The status of a run still going, as that kind's controller writes it.
pub fn running(kind: &Kind) -> Value {
    match kind.kind {
        "JobSet" => json!({"conditions": []}),
        "RayJob" => json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}),
        "PipelineRun" => {
            json!({"conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running"}]})
        }
        "Workflow" => json!({"phase": "Running"}),
        "TrainJob" => json!({"conditions": [{"type": "Created", "status": "True"}]}),
        "SparkApplication" => json!({"applicationState": {"state": "RUNNING"}}),
        _ => json!({"result": "pending"}),
    }
}

/// Set the status of the workload `name` of `kind`, as its controller would.
pub async fn set_status(env: &Env, kind: &Kind, name: &str, status: Value) {
    kind.api(env)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("set the status of {} {name}: {e}", kind.kind));
}

/// The workloads of `kind` the CronJob `cronjob` runs (by label), by name.
pub async fn workloads_of(env: &Env, kind: &Kind, cronjob: &str) -> Vec<DynamicObject> {
    let mut items = kind
        .api(env)
        .list(&ListParams::default().labels(&format!("batch.kronjob.dev/cronjob={cronjob}")))
        .await
        .unwrap_or_else(|e| panic!("list {}: {e}", kind.plural))
        .items;
    items.sort_by_key(|o| o.name_any());
    items
}

/// Wait until the CronJob `name` has `count` workloads of `kind`; those.
pub async fn wait_workloads(
    env: &Env,
    kind: &Kind,
    name: &str,
    count: usize,
    limit: Duration,
) -> Vec<DynamicObject> {
    wait_for(
        limit,
        &format!("{count} {} of {name}", kind.plural),
        || async {
            let items = workloads_of(env, kind, name).await;
            (items.len() >= count).then_some(items)
        },
    )
    .await
}

/// The `--workload-kinds` flag naming Jobs and every kind of `kinds`.
pub fn kinds_flag(kinds: &[Kind]) -> String {
    let names: Vec<String> = std::iter::once("jobs.batch".to_string())
        .chain(kinds.iter().map(Kind::name))
        .collect();
    format!("--workload-kinds={}", names.join(","))
}

/// (a) One CronJob per kind: each slot's workload is created with its owner reference, labels
/// and the slot's time; finished by its kind's rule (a success and a failure each, RayJob's
/// Complete with FAILED a failure), the CronJob's `lastSuccessfulTime` and `lastFailureTime`
/// are the runs' times, `status.active` names each running object's kind, and Events name the
/// kind.
pub async fn every_kind_runs_its_slot_and_finishes_by_its_rule(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    install(&env.client, &KINDS).await;
    let cronjobs = env.api::<CronJob>();
    for kind in &KINDS {
        let name = format!("run-{}", kind.kind.to_ascii_lowercase());
        apply(&cronjobs, cronjob(&name, kind, json!({"x": 1}))).await;
    }
    let mut manager = env.manager(&[&kinds_flag(&KINDS)]);
    manager.wait_ready(Duration::from_secs(60)).await;
    // The first slot: one running workload each, listed in status.active with its kind.
    let mut first = BTreeMap::new();
    for kind in &KINDS {
        let name = format!("run-{}", kind.kind.to_ascii_lowercase());
        let made = wait_workloads(&env, kind, &name, 1, Duration::from_secs(75)).await;
        let object = &made[0];
        let owner = object
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .unwrap_or_else(|| panic!("{}: no controller owner", kind.kind));
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("CronJob", name.as_str())
        );
        assert_eq!(
            object.labels()["team"],
            "e2e",
            "{}: the template's labels",
            kind.kind
        );
        let scheduled = object.annotations()["batch.kronjob.dev/scheduled-at"].clone();
        assert!(
            object.name_any().ends_with(&format!(
                "-{}",
                scheduled
                    .parse::<jiff::Timestamp>()
                    .expect("a time")
                    .as_second()
                    / 60
            )),
            "{}: named after its slot",
            kind.kind
        );
        assert_eq!(
            object.data["spec"]["x"], 1,
            "{}: the template's spec",
            kind.kind
        );
        set_status(&env, kind, &object.name_any(), running(kind)).await;
        let active = wait_for(Duration::from_secs(30), "status.active", || async {
            let status = cronjobs.get_status(&name).await.ok()?.status?;
            status.active.first().cloned()
        })
        .await;
        assert_eq!(
            (active.kind.as_deref(), active.api_version.as_deref()),
            (Some(kind.kind), Some(kind.api_version().as_str())),
            "status.active names the kind"
        );
        first.insert(name, object.name_any());
    }
    // Each finishes by its rule: the Widgets and JobSets succeed, the rest fail.
    let at = "2026-01-01T00:00:00Z";
    for kind in &KINDS {
        let name = format!("run-{}", kind.kind.to_ascii_lowercase());
        let ok = matches!(kind.kind, "Widget" | "JobSet" | "Workflow");
        set_status(&env, kind, &first[&name], finished(kind, ok, at)).await;
        let status = wait_for(
            Duration::from_secs(30),
            &format!("{name} sees its run finish"),
            || async {
                let status = cronjobs.get_status(&name).await.ok()?.status?;
                let seen = if ok {
                    status.last_successful_time.clone()
                } else {
                    status.last_failure_time.clone()
                };
                seen.is_some().then_some(status)
            },
        )
        .await;
        let seen = if ok {
            status.last_successful_time
        } else {
            status.last_failure_time
        };
        assert_eq!(
            seen.map(|t| t.0.to_string()).as_deref(),
            Some(at),
            "{name}: dated by the run"
        );
        assert!(
            status
                .active
                .iter()
                .all(|a| a.name.as_deref() != Some(&first[&name])),
            "{name}: a finished run leaves status.active"
        );
    }
    // The Events name the kind.
    let events: Api<Event> = env.api();
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("Events")
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .collect();
    for kind in &KINDS {
        let wanted = format!("Created {} ", kind.kind);
        assert!(
            notes.iter().any(|n| n.starts_with(&wanted)),
            "no Event {wanted:?} in {notes:?}"
        );
    }
    drop(manager);
    let _ = cronjobs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    env.cleanup().await;
}

/// (b) The concurrency policies, history limits, the failure policy and TTLs, for workloads:
/// Forbid holds the next slot while its RayJob runs (`JobAlreadyActive`); Replace deletes the
/// running PipelineRun (background propagation) for the next; Enqueue queues the next slot
/// behind its TrainJob and runs it once that finishes; a Widget CronJob keeping one success
/// trims the older; a Workflow that fails suspends its CronJob; a finished JobSet goes when the
/// manager's default TTL, written in its own TTL field, expires.
pub async fn policies_history_failures_and_ttls_hold_for_any_kind(ctx: Ctx) {
    use crate::observe::wait_event;
    let env = Env::new(&ctx).await;
    install(&env.client, &KINDS).await;
    let cronjobs = env.api::<CronJob>();
    let with = |name: &str, kind: &Kind, edit: &dyn Fn(&mut Value)| {
        let mut cj = cronjob(name, kind, json!({"x": 1}));
        edit(&mut cj);
        cj
    };
    let objects = [
        with("forbid", &RAYJOB, &|cj| {
            cj["spec"]["concurrencyPolicy"] = json!("Forbid")
        }),
        with("replace", &PIPELINERUN, &|cj| {
            cj["spec"]["concurrencyPolicy"] = json!("Replace")
        }),
        with("enqueue", &TRAINJOB, &|cj| {
            cj["spec"]["concurrencyPolicy"] = json!("Enqueue")
        }),
        with("history", &WIDGET, &|cj| {
            // Kept by its own TTL well past the case: only the history limit deletes.
            cj["spec"]["workloadTemplate"]["metadata"]["annotations"] =
                json!({"batch.kronjob.dev/ttl-seconds-after-finished": "3600"});
        }),
        with("failing", &WORKFLOW, &|cj| {
            cj["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": 1});
        }),
        with("ttl", &JOBSET, &|_| {}),
    ];
    for object in objects {
        apply(&cronjobs, object).await;
    }
    let mut manager = env.manager(&[&kinds_flag(&KINDS), "--default-job-ttl=5s"]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let first = |kind: Kind, name: &'static str| {
        let env = &env;
        async move {
            let made = wait_workloads(env, &kind, name, 1, Duration::from_secs(75)).await;
            made[0].name_any()
        }
    };
    let forbid = first(RAYJOB, "forbid").await;
    let replace = first(PIPELINERUN, "replace").await;
    let enqueue = first(TRAINJOB, "enqueue").await;
    let history = first(WIDGET, "history").await;
    let failing = first(WORKFLOW, "failing").await;
    let ttl = first(JOBSET, "ttl").await;
    for (kind, name) in [
        (&RAYJOB, &forbid),
        (&PIPELINERUN, &replace),
        (&TRAINJOB, &enqueue),
    ] {
        set_status(&env, kind, name, running(kind)).await;
    }
    let now = jiff::Timestamp::now().to_string();
    set_status(&env, &WIDGET, &history, finished(&WIDGET, true, &now)).await;
    // The JobSet carries the default TTL in its own field, and goes once it expires.
    let jobset = JOBSET.api(&env).get(&ttl).await.expect("the JobSet");
    assert_eq!(jobset.data["spec"]["ttlSecondsAfterFinished"], 5);
    set_status(&env, &JOBSET, &ttl, finished(&JOBSET, true, &now)).await;
    wait_for(
        Duration::from_secs(30),
        "the JobSet deleted by its TTL",
        || async {
            JOBSET
                .api(&env)
                .get_opt(&ttl)
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    // A failed Workflow suspends its CronJob (suspendAfterConsecutiveFailures: 1).
    set_status(&env, &WORKFLOW, &failing, finished(&WORKFLOW, false, &now)).await;
    wait_for(Duration::from_secs(30), "failing suspended", || async {
        let cj = cronjobs.get("failing").await.ok()?;
        let ready = cj
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (cj.spec.suspend == Some(true) && ready.reason == "SuspendedAfterFailures").then_some(())
    })
    .await;
    // The next slot: Forbid holds, Replace replaces, Enqueue queues, history runs again.
    let until = Duration::from_secs(75);
    wait_event(&env, "forbid", "JobAlreadyActive", "", until).await;
    assert_eq!(
        workloads_of(&env, &RAYJOB, "forbid").await.len(),
        1,
        "Forbid held"
    );
    let replaced = wait_workloads(&env, &PIPELINERUN, "replace", 1, until).await;
    wait_for(
        Duration::from_secs(30),
        "the running PipelineRun replaced",
        || async {
            let items = workloads_of(&env, &PIPELINERUN, "replace").await;
            (items.len() == 1 && items[0].name_any() != replace).then_some(())
        },
    )
    .await;
    drop(replaced);
    wait_event(
        &env,
        "replace",
        "SuccessfulDelete",
        &format!("Deleted PipelineRun {replace}"),
        until,
    )
    .await;
    let queued = wait_for(until, "enqueue's next slot queued", || async {
        let status = cronjobs.get_status("enqueue").await.ok()?.status?;
        status.queued.first().map(|t| t.0)
    })
    .await;
    assert_eq!(
        workloads_of(&env, &TRAINJOB, "enqueue").await.len(),
        1,
        "queued, not run"
    );
    set_status(&env, &TRAINJOB, &enqueue, finished(&TRAINJOB, true, &now)).await;
    let dequeued = format!("enqueue-{}", queued.as_second() / 60);
    wait_for(
        Duration::from_secs(30),
        "the queued slot's TrainJob",
        || async {
            let items = workloads_of(&env, &TRAINJOB, "enqueue").await;
            items.iter().any(|o| o.name_any() == dequeued).then_some(())
        },
    )
    .await;
    let second = wait_for(until, "history's next Widget", || async {
        let items = workloads_of(&env, &WIDGET, "history").await;
        items
            .into_iter()
            .map(|o| o.name_any())
            .find(|n| *n != history)
    })
    .await;
    set_status(
        &env,
        &WIDGET,
        &second,
        finished(&WIDGET, true, &jiff::Timestamp::now().to_string()),
    )
    .await;
    wait_for(
        Duration::from_secs(30),
        "the older Widget trimmed",
        || async {
            let names: Vec<String> = workloads_of(&env, &WIDGET, "history")
                .await
                .into_iter()
                .map(|o| o.name_any())
                .collect();
            (names == [second.clone()]).then_some(())
        },
    )
    .await;
    drop(manager);
    let _ = cronjobs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    env.cleanup().await;
}

/// A kind whose CRD has a schema for its spec: `teeth`, a required integer of at least 1.
pub const SPROCKET: Kind = Kind {
    group: "e2e.kronjob.dev",
    version: "v1",
    kind: "Sprocket",
    plural: "sprockets",
};

/// A kind no CRD serves (the tests never install it).
pub const NOT_INSTALLED: Kind = Kind {
    group: "absent.e2e.kronjob.dev",
    version: "v1",
    kind: "Gadget",
    plural: "gadgets",
};

/// The `Ready` condition's (status, reason) of the CronJob `name`, once it has one.
async fn ready_of(env: &Env, name: &str) -> Option<(String, String, String)> {
    let status = env.api::<CronJob>().get_status(name).await.ok()?.status?;
    let ready = status.conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((ready.status, ready.reason, ready.message))
}

/// Wait until the CronJob `name` is `Ready` `status` with `reason`; its message.
async fn wait_ready_reason(
    env: &Env,
    name: &str,
    status: &str,
    reason: &str,
    limit: Duration,
) -> String {
    wait_for(
        limit,
        &format!("{name} Ready={status} {reason}"),
        || async {
            let (s, r, m) = ready_of(env, name).await?;
            (s == status && r == reason).then_some(m)
        },
    )
    .await
}

/// A kind installed by this case only (a CRD is cluster-wide).
const GADGET: Kind = Kind {
    group: "late.e2e.kronjob.dev",
    version: "v1",
    kind: "Gadget",
    plural: "gadgets",
};

/// (c) A CronJob naming a kind not installed yet reports `WorkloadKindNotFound` (a Warning
/// Event once) and starts by itself when the CRD appears; the CRD deleted, it reports it
/// again, and neither the manager nor a Job CronJob beside it is disturbed; a kind outside
/// `--workload-kinds` is `WorkloadKindNotAllowed` and never created.
pub async fn a_kind_installed_late_starts_by_itself_and_one_removed_or_not_allowed_is_reported(
    ctx: Ctx,
) {
    use crate::observe::wait_event;
    let env = Env::new(&ctx).await;
    install(&env.client, &[RAYJOB]).await;
    let cronjobs = env.api::<CronJob>();
    let mut late = cronjob("late", &GADGET, json!({}));
    late["spec"]["completion"] = json!({"succeeded": "self.status.done", "failed": "false"});
    apply(&cronjobs, late).await;
    apply(&cronjobs, cronjob("unlisted", &RAYJOB, json!({}))).await;
    apply(&cronjobs, crate::cronjob::quiet_every_minute("plain")).await;
    let mut manager = env.manager(&[&kinds_flag(&[GADGET])]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let soon = Duration::from_secs(30);
    let missing = wait_ready_reason(&env, "late", "False", "WorkloadKindNotFound", soon).await;
    assert!(
        missing.contains("Gadget") && missing.contains("late.e2e.kronjob.dev/v1"),
        "{missing}"
    );
    wait_event(
        &env,
        "late",
        "WorkloadKindNotFound",
        "install its CRD",
        soon,
    )
    .await;
    let refused =
        wait_ready_reason(&env, "unlisted", "False", "WorkloadKindNotAllowed", soon).await;
    assert!(refused.contains("rayjobs.ray.io"), "{refused}");
    // The CRD appears: the CronJob schedules within the look-up period, and runs its slot.
    install(&env.client, &[GADGET]).await;
    let installed = std::time::Instant::now();
    wait_ready_reason(&env, "late", "True", "Scheduled", Duration::from_secs(25)).await;
    println!(
        "e2e: kind found {:.1}s after its CRD was installed",
        installed.elapsed().as_secs_f64()
    );
    wait_workloads(&env, &GADGET, "late", 1, Duration::from_secs(75)).await;
    // The CRD deleted (its objects with it): reported again, nothing else disturbed.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.delete(
        &format!("{}.{}", GADGET.plural, GADGET.group),
        &DeleteParams::default(),
    )
    .await
    .expect("delete the CRD");
    wait_ready_reason(
        &env,
        "late",
        "False",
        "WorkloadKindNotFound",
        Duration::from_secs(60),
    )
    .await;
    let jobs_before = env.jobs_of("plain").await.len();
    wait_for(Duration::from_secs(75), "plain's next Job", || async {
        (env.jobs_of("plain").await.len() > jobs_before).then_some(())
    })
    .await;
    assert!(
        workloads_of(&env, &RAYJOB, "unlisted").await.is_empty(),
        "never created"
    );
    manager.wait_ready(Duration::from_secs(5)).await;
    drop(manager);
    let _ = cronjobs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    env.cleanup().await;
}

/// (d) A manager killed right after a slot's SparkApplication and started again creates
/// nothing more for that slot; `kubectl kronjob backfill` runs the slots before the CronJob's
/// creation as SparkApplications marked backfilled, and the repeat creates nothing;
/// `kubectl kronjob trigger` runs one now; `history` lists them with their kind.
pub async fn a_restart_backfill_and_manual_runs_make_one_object_per_run(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    install(&env.client, &[SPARK]).await;
    let cronjobs = env.api::<CronJob>();
    let mut object = cronjob("spark", &SPARK, json!({"type": "Scala"}));
    object["spec"]["successfulJobsHistoryLimit"] = json!(20);
    object["spec"]["failedJobsHistoryLimit"] = json!(20);
    let cj = apply(&cronjobs, object).await;
    let flag = kinds_flag(&[SPARK]);
    let mut manager = env.manager(&[&flag]);
    manager.wait_ready(Duration::from_secs(60)).await;
    // The first slot's object, then a crash and a restart at once.
    let first = wait_workloads(&env, &SPARK, "spark", 1, Duration::from_secs(75)).await;
    manager.kill();
    let mut manager = env.manager(&[&flag]);
    manager.wait_ready(Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let scheduled = |items: &[DynamicObject]| -> Vec<String> {
        items
            .iter()
            .filter(|o| {
                let a = o.annotations();
                a.contains_key("batch.kronjob.dev/scheduled-at")
                    && !a.contains_key("batch.kronjob.dev/backfilled")
            })
            .map(|o| o.name_any())
            .collect()
    };
    assert_eq!(
        scheduled(&workloads_of(&env, &SPARK, "spark").await),
        [first[0].name_any()],
        "one object for the slot across the restart"
    );
    // A backfill of the three minutes before the CronJob's creation.
    let created = cj.metadata.creation_timestamp.clone().expect("created").0;
    let last = jiff::Timestamp::from_second(created.as_second().div_euclid(60) * 60 - 60)
        .expect("a minute");
    let from = (last - jiff::SignedDuration::from_mins(2)).to_string();
    let to = last.to_string();
    let args = [
        "backfill",
        "spark",
        "-n",
        &env.namespace,
        "--from",
        &from,
        "--to",
        &to,
        "--parallel",
        "5",
        "--wait",
        "90s",
    ];
    let printed = env.plugin_ok(&args);
    let created_lines: Vec<&str> = printed
        .lines()
        .filter(|l| l.starts_with("sparkapplication.sparkoperator.k8s.io/spark-"))
        .filter(|l| l.ends_with(" created"))
        .collect();
    assert_eq!(created_lines.len(), 3, "{printed}");
    assert!(
        printed.contains("backfill done: 3 of 3 runs created"),
        "{printed}"
    );
    let backfilled: Vec<DynamicObject> = workloads_of(&env, &SPARK, "spark")
        .await
        .into_iter()
        .filter(|o| o.annotations().contains_key("batch.kronjob.dev/backfilled"))
        .collect();
    let names: Vec<String> = backfilled
        .iter()
        .map(|o| format!("{} {:?}", o.name_any(), o.annotations()))
        .collect();
    assert_eq!(backfilled.len(), 3, "three slots backfilled: {names:#?}");
    let again = env.plugin_ok(&args);
    assert!(again.contains("0 of 0 runs created"), "{again}");
    // A manual run.
    let triggered = env.plugin_ok(&["trigger", "spark", "-n", &env.namespace, "--wait", "60s"]);
    assert!(
        triggered
            .trim()
            .starts_with("sparkapplication.sparkoperator.k8s.io/spark-m")
            && triggered.trim().ends_with(" created"),
        "{triggered}"
    );
    // history names the kind of each run.
    let history = env.plugin_ok(&["history", "spark", "-n", &env.namespace]);
    let rows: Vec<&str> = history.lines().skip(1).collect();
    assert!(rows.len() >= 5, "{history}");
    assert!(
        history.lines().next().is_some_and(|h| h.contains("KIND")),
        "{history}"
    );
    assert!(
        rows.iter().all(|r| r.contains(" SparkApplication ")),
        "{history}"
    );
    drop(manager);
    let _ = cronjobs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    env.cleanup().await;
}

/// (e) The admission webhook, as the API server calls it, on CronJobs of workload kinds: a user
/// who may create kronjob CronJobs but not RayJobs is refused naming the kind and the verb, one
/// who may create both is not; a Sprocket its CRD's schema refuses is refused on
/// `spec.workloadTemplate.spec.teeth`; a Gadget, whose CRD is not installed, is accepted with a
/// warning (kubectl prints it).
pub async fn the_webhook_judges_a_workload_by_its_authors_access_and_its_kinds_schema(ctx: Ctx) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::PostParams;

    let env = Env::new(&ctx).await;
    install(&env.client, &[RAYJOB]).await;
    let mut strict = crd(&SPROCKET);
    strict["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = json!({
        "type": "object", "required": ["teeth"],
        "properties": {"teeth": {"type": "integer", "minimum": 1}},
    });
    install_crd(&env.client, strict).await;
    let webhook = crate::webhook::Webhook::start(
        &ctx,
        &env,
        &[&kinds_flag(&[RAYJOB, SPROCKET, NOT_INSTALLED])],
    )
    .await;
    // alice and bob may create kronjob CronJobs; bob RayJobs too.
    let pp = PostParams::default();
    let role = |name: &str, group: &str, resource: &str| -> Role {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "rules": [{"apiGroups": [group], "resources": [resource], "verbs": ["create"]}],
        }))
        .expect("a Role")
    };
    let binding = |name: &str, role: &str, users: &[&str]| -> RoleBinding {
        let subjects: Vec<Value> = users
            .iter()
            .map(|u| json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subjects,
        }))
        .expect("a RoleBinding")
    };
    let roles: Api<Role> = env.api();
    let bindings: Api<RoleBinding> = env.api();
    for (name, group, resource, users) in [
        (
            "cronjob-authors",
            "batch.kronjob.dev",
            "cronjobs",
            &["alice", "bob"][..],
        ),
        ("rayjob-authors", "ray.io", "rayjobs", &["bob"][..]),
    ] {
        roles
            .create(&pp, &role(name, group, resource))
            .await
            .expect("Role");
        bindings
            .create(&pp, &binding(name, name, users))
            .await
            .expect("RoleBinding");
    }
    // kubectl create, as `as` (the admin when empty): its exit status and output.
    let create = |name: &str, kind: &Kind, spec: Value, as_user: &str| {
        let object = cronjob(name, kind, spec);
        let file = ctx.logs.join(format!("{name}.json"));
        std::fs::write(&file, object.to_string()).expect("write the CronJob");
        let file = file.to_str().expect("utf-8 path").to_string();
        let mut args = vec!["create", "-n", &env.namespace, "-f", &file];
        let who = format!("--as={as_user}");
        if !as_user.is_empty() {
            args.push(&who);
        }
        let out = env.kubectl(&args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    // (a) Only an author who may create RayJobs themselves gets a CronJob that creates them.
    let (created, said) = create("by-alice", &RAYJOB, json!({"entrypoint": "x"}), "alice");
    assert!(!created, "{said}");
    assert!(
        said.contains("spec.workloadTemplate: Forbidden: User \"alice\" may not create rayjobs.ray.io in namespace"),
        "{said}"
    );
    let (created, said) = create("by-bob", &RAYJOB, json!({"entrypoint": "x"}), "bob");
    assert!(created, "{said}");
    // (b) The kind's own schema, through a dry run of the object the template makes.
    let (created, said) = create("bad-sprocket", &SPROCKET, json!({"teeth": "many"}), "");
    assert!(!created, "{said}");
    assert!(said.contains("spec.workloadTemplate.spec.teeth"), "{said}");
    let (created, said) = create("sprocket", &SPROCKET, json!({"teeth": 12}), "");
    assert!(created, "{said}");
    // (c) A kind not installed: accepted, with a warning.
    let (created, said) = create("gadget", &NOT_INSTALLED, json!({"size": 1}), "");
    assert!(created, "{said}");
    assert!(
        said.contains("Warning: spec.workloadTemplate: the API server serves no kind Gadget in absent.e2e.kronjob.dev/v1"),
        "{said}"
    );
    let cronjobs = env.api::<CronJob>();
    let names: Vec<String> = cronjobs
        .list(&ListParams::default())
        .await
        .expect("CronJobs")
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(names, ["by-bob", "gadget", "sprocket"]);
    webhook.uninstall().await;
    drop(webhook);
    let _ = cronjobs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    env.cleanup().await;
}
