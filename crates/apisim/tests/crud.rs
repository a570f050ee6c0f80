//! Create, get, list, update, patch and delete through `kube::Api`, with the API server's errors.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{api_error, job, job_json, mp, pp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kronjob_apisim::{ApiSim, CostModel, Fault, Invalid, Resource};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::wait::{await_condition, conditions::is_crd_established};
use serde_json::{Value, json};

/// A free simulation without the Job controller: these tests count resourceVersions.
fn setup() -> (ApiSim, Api<Job>) {
    let sim = ApiSim::new(CostModel::free()).with_job_controller(false);
    let jobs = Api::namespaced(sim.client(), "default");
    (sim, jobs)
}

fn rv(job: &Job) -> u64 {
    job.metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn round_trip_create_get_list_replace_patch_delete() {
    let (sim, jobs) = setup();
    let created = jobs.create(&pp(), &job("a")).await.unwrap();
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert_eq!(meta.generation, Some(1));
    assert_eq!(meta.uid.as_ref().unwrap().len(), 36);
    let stamp = serde_json::to_value(&meta.creation_timestamp).unwrap();
    let stamp = stamp.as_str().unwrap();
    assert!(stamp.ends_with('Z') && !stamp.contains('.'), "{stamp}");

    let got = jobs.get("a").await.unwrap();
    assert_eq!(got.metadata, created.metadata);
    let list = jobs.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.metadata.resource_version.as_deref(),
        Some(sim.resource_version().to_string().as_str())
    );

    // Labels are metadata: no generation bump.
    let mut changed = got.clone();
    changed.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    let replaced = jobs.replace("a", &pp(), &changed).await.unwrap();
    assert!(rv(&replaced) > rv(&created));
    assert_eq!(replaced.metadata.generation, Some(1));
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    // A spec change bumps the generation.
    let patch = json!({"spec": {"parallelism": 3}});
    let patched = jobs.patch("a", &mp(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(patched.spec.as_ref().unwrap().parallelism, Some(3));
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(patched.metadata.labels, changed.metadata.labels);

    // A write that changes nothing keeps the resourceVersion.
    let again = jobs.patch("a", &mp(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(rv(&again), rv(&patched));

    // JSON patch, with a failing `test` op first.
    let failing: json_patch_ops::Ops = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/parallelism", "value": 9},
        {"op": "replace", "path": "/spec/parallelism", "value": 4}]))
    .unwrap();
    let status = api_error(jobs.patch("a", &mp(), &Patch::<()>::Json(failing)).await);
    assert_eq!(status.code, 422);
    let ops: json_patch_ops::Ops =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/parallelism", "value": 4}]))
            .unwrap();
    let patched = jobs
        .patch("a", &mp(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(patched.spec.as_ref().unwrap().parallelism, Some(4));

    let deleted = jobs.delete("a", &DeleteParams::background()).await.unwrap();
    let deleted = deleted.left().unwrap();
    assert!(rv(&deleted) > rv(&patched));
    assert!(jobs.get_opt("a").await.unwrap().is_none());
    assert!(sim.get(&Resource::jobs(), Some("default"), "a").is_none());
}

/// `kube::api::Patch::Json` takes the json-patch crate's type.
mod json_patch_ops {
    pub type Ops = json_patch::Patch;
}

#[tokio::test]
async fn already_exists_and_not_found_are_api_errors() {
    let (_sim, jobs) = setup();
    jobs.create(&pp(), &job("a")).await.unwrap();
    let status = api_error(jobs.create(&pp(), &job("a")).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    assert_eq!(status.message, "jobs.batch \"a\" already exists");
    let details = status.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("a", "batch", "jobs")
    );

    let status = api_error(jobs.get("missing").await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    assert_eq!(status.message, "jobs.batch \"missing\" not found");
    let status = api_error(jobs.delete("missing", &DeleteParams::default()).await);
    assert_eq!(status.code, 404);
    let status = api_error(jobs.replace("missing", &pp(), &job("missing")).await);
    assert_eq!(status.code, 404);
}

#[tokio::test]
async fn stale_resource_version_conflicts_on_update_and_merge_patch() {
    let (_sim, jobs) = setup();
    let old = jobs.create(&pp(), &job("a")).await.unwrap();
    let patch = json!({"metadata": {"annotations": {"x": "1"}}});
    let fresh = jobs.patch("a", &mp(), &Patch::Merge(&patch)).await.unwrap();

    let status = api_error(jobs.replace("a", &pp(), &old).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Operation cannot be fulfilled on jobs.batch \"a\": the object has been modified; \
         please apply your changes to the latest version and try again"
    );

    let stale = json!({"metadata": {"resourceVersion": old.metadata.resource_version, "labels": {"a": "b"}}});
    let status = api_error(jobs.patch("a", &mp(), &Patch::Merge(&stale)).await);
    assert_eq!(status.code, 409);
    let current = json!({"metadata": {"resourceVersion": fresh.metadata.resource_version, "labels": {"a": "b"}}});
    jobs.patch("a", &mp(), &Patch::Merge(&current))
        .await
        .unwrap();

    // A uid in the body is a precondition too (the object was deleted and recreated).
    let mut other = fresh.clone();
    other.metadata.resource_version = None;
    other.metadata.uid = Some("other".into());
    let status = api_error(jobs.replace("a", &pp(), &other).await);
    assert_eq!(status.code, 409);
    assert!(
        status
            .message
            .contains("Precondition failed: UID in precondition: other")
    );

    // Without a resourceVersion, an update is unconditional.
    let mut blind = old.clone();
    blind.metadata.resource_version = None;
    jobs.replace("a", &pp(), &blind).await.unwrap();
}

#[tokio::test]
async fn delete_preconditions() {
    let (_sim, jobs) = setup();
    let created = jobs.create(&pp(), &job("a")).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let status = api_error(jobs.delete("a", &wrong).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.ends_with(&format!(
            "Precondition failed: UID in precondition: other, UID in object meta: {uid}"
        )),
        "{}",
        status.message
    );
    let stale_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1234".into()),
        }),
        ..DeleteParams::default()
    };
    assert_eq!(api_error(jobs.delete("a", &stale_rv).await).code, 409);
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    jobs.delete("a", &right).await.unwrap();
    assert!(jobs.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn status_subresource_is_isolated() {
    let (_sim, jobs) = setup();
    let mut with_status = job_json("a", json!({}));
    with_status["status"] = json!({"active": 5});
    let created: Job = jobs
        .create(&pp(), &serde_json::from_value(with_status).unwrap())
        .await
        .unwrap();
    assert!(created.status.is_none(), "create drops status");

    // A status write changes only status.
    let patch = json!({"spec": {"parallelism": 7}, "metadata": {"labels": {"x": "y"}}, "status": {"active": 1}});
    let after = jobs
        .patch_status("a", &mp(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(after.status.as_ref().unwrap().active, Some(1));
    assert_eq!(
        after.spec.as_ref().unwrap().parallelism,
        created.spec.as_ref().unwrap().parallelism
    );
    assert!(!after.metadata.labels.unwrap_or_default().contains_key("x"));
    assert_eq!(after.metadata.generation, Some(1));

    // A main-resource write keeps the stored status, and bumps the generation on spec changes.
    let patch = json!({"spec": {"parallelism": 2}, "status": {"active": 9}});
    let after = jobs.patch("a", &mp(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(after.status.as_ref().unwrap().active, Some(1));
    assert_eq!(after.metadata.generation, Some(2));

    // PUT on /status.
    let mut desired = after.clone();
    desired.status.as_mut().unwrap().active = Some(3);
    desired.spec.as_mut().unwrap().parallelism = Some(5);
    let put = jobs.replace_status("a", &pp(), &desired).await.unwrap();
    assert_eq!(put.status.as_ref().unwrap().active, Some(3));
    assert_eq!(put.spec.as_ref().unwrap().parallelism, Some(2));
    assert_eq!(
        jobs.get_status("a")
            .await
            .unwrap()
            .metadata
            .resource_version,
        put.metadata.resource_version
    );

    // Leases have no status subresource: a status path is 404.
    let leases: Api<Lease> = Api::namespaced(jobs.clone().into_client(), "default");
    let lease: Lease = serde_json::from_value(
        json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
    )
    .unwrap();
    leases.create(&pp(), &lease).await.unwrap();
    assert_eq!(api_error(leases.get_status("l").await).code, 404);
}

#[tokio::test]
async fn label_and_field_selectors_on_list() {
    let (sim, jobs) = setup();
    for (name, labels) in [
        ("a", json!({"app": "web"})),
        ("b", json!({"app": "api", "skip": "1"})),
        ("c", json!({"app": "db"})),
        ("d", json!({})),
    ] {
        sim.insert(job_json(name, labels));
    }
    let names = |list: kube::core::ObjectList<Job>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|j| j.metadata.name.unwrap())
            .collect()
    };
    let cases = [
        ("app", vec!["a", "b", "c"]),
        ("!app", vec!["d"]),
        ("app=web", vec!["a"]),
        ("app==web", vec!["a"]),
        ("app!=web", vec!["b", "c", "d"]),
        ("app in (web,api)", vec!["a", "b"]),
        ("app notin (web, api)", vec!["c", "d"]),
        ("app in (web,api),!skip", vec!["a"]),
    ];
    for (selector, want) in cases {
        let got = names(
            jobs.list(&ListParams::default().labels(selector))
                .await
                .unwrap(),
        );
        assert_eq!(got, want, "{selector}");
    }
    let got = names(
        jobs.list(&ListParams::default().fields("metadata.name=c"))
            .await
            .unwrap(),
    );
    assert_eq!(got, vec!["c"]);
    let got = names(
        jobs.list(&ListParams::default().fields("metadata.name!=c,metadata.namespace=default"))
            .await
            .unwrap(),
    );
    assert_eq!(got, vec!["a", "b", "d"]);
    let status = api_error(
        jobs.list(&ListParams::default().labels("app in (web"))
            .await,
    );
    assert_eq!(status.code, 400);
    let all: Api<Job> = Api::all(sim.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        4
    );
    let other: Api<Job> = Api::namespaced(sim.client(), "other");
    assert!(
        other
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn dry_run_stores_nothing_and_runs_the_validator() {
    let (sim, jobs) = setup();
    sim.set_validator(
        &Resource::jobs(),
        Arc::new(
            |job: &Value| match job.pointer("/spec/parallelism").and_then(Value::as_i64) {
                Some(p) if p > 5 => Err(Invalid::field(
                    "spec.parallelism",
                    "FieldValueInvalid",
                    format!("Invalid value: {p}: must be at most 5"),
                )),
                _ => Ok(()),
            },
        ),
    );
    let dry = PostParams {
        dry_run: true,
        ..pp()
    };
    let answered = jobs.create(&dry, &job("a")).await.unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("a"));
    assert!(answered.metadata.uid.is_some());
    assert!(sim.list(&Resource::jobs(), None).is_empty());
    assert_eq!(sim.resource_version(), 0);

    let mut big = job("b");
    big.spec.as_mut().unwrap().parallelism = Some(9);
    for params in [dry.clone(), PostParams::default()] {
        let status = api_error(jobs.create(&params, &big).await);
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            status.message,
            "Job.batch \"b\" is invalid: spec.parallelism: Invalid value: 9: must be at most 5"
        );
        let cause = &status.details.unwrap().causes[0];
        assert_eq!(
            (cause.field.as_str(), cause.reason.as_str()),
            ("spec.parallelism", "FieldValueInvalid")
        );
    }
    // Updates are validated too.
    jobs.create(&pp(), &job("c")).await.unwrap();
    let patch = json!({"spec": {"parallelism": 6}});
    assert_eq!(
        api_error(jobs.patch("c", &mp(), &Patch::Merge(&patch)).await).code,
        422
    );

    let records = sim.requests();
    assert_eq!(records.iter().filter(|r| r.dry_run).count(), 2);
    assert!(
        records
            .iter()
            .all(|r| r.verb != "create" || r.resource == "jobs")
    );
    let counts = sim.counts();
    assert_eq!(counts["create jobs"], 2);
    assert_eq!(
        counts["create jobs (dry run)"], 2,
        "dry runs are counted apart"
    );
}

#[tokio::test]
async fn fail_next_answers_429_with_retry_after() {
    let (sim, jobs) = setup();
    sim.fail_next(
        Fault::too_many_requests(3)
            .method("POST")
            .path("/jobs")
            .times(2),
    );
    jobs.list(&ListParams::default()).await.unwrap();
    let status = api_error(jobs.create(&pp(), &job("a")).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert_eq!(status.details.unwrap().retry_after_seconds, 3);

    let request = http::Request::post("/apis/batch/v1/namespaces/default/jobs")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&job("a")).unwrap(),
        ))
        .unwrap();
    let response = sim.client().send(request).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "3");

    jobs.create(&pp(), &job("a")).await.unwrap();
    let statuses: Vec<u16> = sim.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![200, 429, 429, 201]);
}

#[tokio::test]
async fn a_hold_keeps_matching_requests_until_released_or_loses_them() {
    let (sim, jobs) = setup();
    let hold = sim.hold("POST", "/jobs");
    let create = tokio::spawn({
        let jobs = jobs.clone();
        async move { jobs.create(&pp(), &job("a")).await }
    });
    while hold.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Other requests go by; the held create has not touched the store.
    assert!(jobs.get_opt("a").await.unwrap().is_none());
    hold.release();
    create.await.unwrap().unwrap();
    assert_eq!(hold.waiting(), 0);
    assert!(jobs.get_opt("a").await.unwrap().is_some());

    // A lost request fails as a broken connection and never lands; later ones go through.
    let lost = sim.hold("POST", "/jobs");
    let create = tokio::spawn({
        let jobs = jobs.clone();
        async move { jobs.create(&pp(), &job("b")).await }
    });
    while lost.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    lost.fail();
    assert!(create.await.unwrap().is_err());
    assert!(jobs.get_opt("b").await.unwrap().is_none());
    jobs.create(&pp(), &job("b")).await.unwrap();
}

#[tokio::test]
async fn apply_creates_then_merges_and_crds_become_established() {
    let (sim, jobs) = setup();
    let params = PatchParams::apply("test").force();
    let first = jobs
        .patch(
            "a",
            &params,
            &Patch::Apply(job_json("a", json!({"v": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(first.metadata.labels.unwrap()["v"], "1");
    let second = jobs
        .patch(
            "a",
            &params,
            &Patch::Apply(job_json("a", json!({"v": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(second.metadata.labels.unwrap()["v"], "2");
    assert_eq!(second.metadata.uid, first.metadata.uid);
    assert_eq!(sim.counts()["patch jobs"], 2);

    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "cronjobs.batch.kronjob.dev"},
        "spec": {"group": "batch.kronjob.dev", "scope": "Namespaced",
            "names": {"plural": "cronjobs", "singular": "cronjob", "kind": "CronJob"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}}]},
    });
    crds.patch("cronjobs.batch.kronjob.dev", &params, &Patch::Apply(&crd))
        .await
        .unwrap();
    let established = await_condition(crds, "cronjobs.batch.kronjob.dev", is_crd_established());
    tokio::time::timeout(Duration::from_secs(5), established)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn job_controller_starts_and_completes_jobs() {
    let (sim, jobs) = setup();
    let sim = sim.with_job_controller(true);
    let t0 = jiff::Timestamp::from_second(1_750_000_000).unwrap();
    let start = tokio::time::Instant::now();
    let sim = sim.with_clock(Arc::new(move || {
        t0 + jiff::SignedDuration::try_from(start.elapsed()).unwrap()
    }));
    sim.set_job_duration(Some(Duration::from_secs(30)));
    jobs.create(&pp(), &job("a")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let running = jobs.get("a").await.unwrap().status.unwrap();
    assert_eq!(running.active, Some(1));
    assert_eq!(
        serde_json::to_value(&running.start_time).unwrap(),
        "2025-06-15T15:06:40Z"
    );
    assert!(running.conditions.is_none());

    tokio::time::sleep(Duration::from_secs(30)).await;
    let done = jobs.get("a").await.unwrap().status.unwrap();
    assert_eq!(done.succeeded, Some(1));
    assert_eq!(done.active, None);
    assert_eq!(
        serde_json::to_value(&done.completion_time).unwrap(),
        "2025-06-15T15:07:10Z"
    );
    let conditions: Vec<(String, String)> = done
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conditions,
        [
            ("SuccessCriteriaMet".into(), "True".into()),
            ("Complete".into(), "True".into())
        ]
    );

    sim.set_job_duration(None);
    jobs.create(&pp(), &job("b")).await.unwrap();
    assert!(sim.finish_job("default", "b", false));
    assert!(
        !sim.finish_job("default", "b", true),
        "a finished job stays finished"
    );
    let failed = jobs.get("b").await.unwrap().status.unwrap();
    assert_eq!(failed.failed, Some(1));
    let types: Vec<String> = failed
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(types, ["FailureTarget", "Failed"]);
}

#[tokio::test]
async fn seeding_generate_name_counts_and_down() {
    let (sim, jobs) = setup();
    let seeded = sim.insert(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader", "namespace": "kube-system"}, "spec": {"holderIdentity": "x"}}));
    assert_eq!(seeded["metadata"]["resourceVersion"], "1");
    let leases: Api<Lease> = Api::namespaced(sim.client(), "kube-system");
    let mut lease = leases.get("leader").await.unwrap();
    lease.spec.as_mut().unwrap().holder_identity = Some("y".into());
    leases.replace("leader", &pp(), &lease).await.unwrap();
    assert_eq!(
        sim.get(&Resource::leases(), Some("kube-system"), "leader")
            .unwrap()["spec"]["holderIdentity"],
        "y"
    );

    let mut generated = job("ignored");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("run-".into());
    let created = jobs.create(&pp(), &generated).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("run-") && name.len() == 9, "{name}");

    jobs.patch_status(
        &name,
        &mp(),
        &Patch::Merge(json!({"status": {"active": 1}})),
    )
    .await
    .unwrap();
    jobs.delete(&name, &DeleteParams::default()).await.unwrap();
    let counts = sim.counts();
    for key in [
        "get leases",
        "update leases",
        "create jobs",
        "patch jobs/status",
        "delete jobs",
    ] {
        assert_eq!(counts.get(key), Some(&1), "{key}: {counts:?}");
    }
    let delete = sim
        .requests()
        .into_iter()
        .find(|r| r.verb == "delete")
        .unwrap();
    assert_eq!(
        (
            delete.group.as_str(),
            delete.namespace.as_deref(),
            delete.name.as_deref()
        ),
        ("batch", Some("default"), Some(name.as_str()))
    );

    sim.set_down(true);
    assert!(matches!(jobs.get("x").await, Err(kube::Error::Service(_))));
    assert_eq!(sim.requests().last().unwrap().status, 0);
    sim.set_down(false);
    assert_eq!(api_error(jobs.get("x").await).code, 404);
    sim.clear_requests();
    assert!(sim.requests().is_empty());
    assert!(
        sim.remove(&Resource::leases(), Some("kube-system"), "leader")
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_lose_no_update() {
    let (sim, jobs) = setup();
    jobs.create(&pp(), &job("a")).await.unwrap();
    let writers: Vec<_> = (0..50)
        .map(|i| {
            let jobs = jobs.clone();
            let patch = Patch::Merge(json!({"metadata": {"annotations": {format!("k{i}"): "v"}}}));
            tokio::spawn(async move { jobs.patch("a", &mp(), &patch).await.unwrap() })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let annotations = jobs.get("a").await.unwrap().metadata.annotations.unwrap();
    assert_eq!(annotations.len(), 50);
    assert_eq!(sim.resource_version(), 51);
}
