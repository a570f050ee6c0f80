//! The manager's client reads Jobs in protobuf: on the real API server, every get, list, watch
//! and create through it must read as the same Jobs read through JSON.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::CronJob;
use kronjob::client::ClientOptions;
use kronjob::controller::cache::SlimJob;
use kronjob::controller::cache::protobuf::{MEDIA_TYPE, object_to_json};
use kronjob::controller::slim_jobs::SlimJobsLayer;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::client::DynBody;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tower::layer::util::Stack;
use tower::util::{MapRequestLayer, MapResponseLayer};

use crate::harness::{Ctx, Env, apply};
use crate::observe::cronjob;

crate::cases!(
    protobuf: jobs_read_in_protobuf_read_as_they_do_in_json,
    a_job_created_in_protobuf_is_the_job_created_in_json
);

/// The media type a request or an answer says it carries.
fn content_type(headers: &http::HeaderMap) -> String {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn encoded(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("encodes")
}

/// The events of `events` up to the first whose Job is Complete, encoded.
async fn until_complete(
    mut events: futures::stream::BoxStream<'static, kube::Result<WatchEvent<SlimJob>>>,
) -> Vec<Value> {
    let mut seen = Vec::new();
    while let Some(event) = events.try_next().await.expect("a watch event") {
        let value = encoded(&event);
        let complete = value["object"]["status"]["conditions"]
            .as_array()
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True")
            });
        seen.push(value);
        if complete {
            break;
        }
    }
    seen
}

async fn jobs_read_in_protobuf_read_as_they_do_in_json(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let owner = apply(
        &env.api::<CronJob>(),
        cronjob("owner", "0 0 1 1 *", json!({"suspend": true})),
    )
    .await;
    let options = ClientOptions {
        kubeconfig: Some(env.kubeconfig.clone()),
        context: None,
    };
    // What the server answered, as the layer saw it: the media type of every answer.
    let answered = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = {
        let answered = Arc::clone(&answered);
        MapResponseLayer::new(move |r: http::Response<Box<DynBody>>| {
            answered
                .lock()
                .expect("lock")
                .push(content_type(r.headers()));
            r
        })
    };
    let client = kronjob::client::client_with_layer(&options, &Stack::new(record, SlimJobsLayer))
        .await
        .expect("the controllers' client");
    let ours: Api<SlimJob> = Api::namespaced(client, &env.namespace);
    let theirs: Api<SlimJob> = env.api();

    let job: Job = serde_json::from_value(json!({
        "metadata": {
            "name": "owner-29000000",
            "labels": {"batch.kronjob.dev/cronjob": "owner", "team": "a"},
            "annotations": {
                "batch.kronjob.dev/scheduled-at": "2026-11-27T12:00:00Z",
                "note": "not kept"
            },
            "ownerReferences": [owner.controller_owner_ref(&()).expect("an owner reference")]
        },
        "spec": {
            "ttlSecondsAfterFinished": 600,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}]
            }}
        }
    }))
    .expect("a Job");
    let created = ours
        .create(&PostParams::default(), &SlimJob(job))
        .await
        .expect("create through the protobuf client");
    assert_eq!(created, theirs.get("owner-29000000").await.expect("get"));
    assert!(created.0.metadata.uid.is_some());

    // Watch from here on both clients while the Job controller runs the Job and it finishes:
    // both see the same events.
    let since = theirs
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("a list version");
    let params = WatchParams::default().timeout(60);
    let watch_ours = ours.watch(&params, &since).await.expect("watch").boxed();
    let watch_theirs = theirs.watch(&params, &since).await.expect("watch").boxed();
    env.finish_pods("owner-29000000", "Succeeded").await;
    let (a, b) = tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::join(until_complete(watch_ours), until_complete(watch_theirs)),
    )
    .await
    .expect("both watches saw the Job finish");
    assert_eq!(a, b);
    assert!(a.len() >= 2, "{a:?}");

    let got = ours.get("owner-29000000").await.expect("get");
    assert_eq!(got, theirs.get("owner-29000000").await.expect("get"));
    assert!(got.0.status.and_then(|s| s.completion_time).is_some());
    let selector = ListParams::default().labels("batch.kronjob.dev/cronjob");
    let (listed_ours, listed_theirs) = (
        ours.list(&selector).await.expect("list"),
        theirs.list(&selector).await.expect("list"),
    );
    assert_eq!(listed_ours.items, listed_theirs.items);
    assert_eq!(listed_ours.items.len(), 1);

    // Every answer to the layered client so far (a create, a watch, a get and a list) was
    // protobuf: the real server took the layer's Accept.
    {
        let answered = answered.lock().expect("lock");
        assert_eq!(
            answered.len(),
            4,
            "a create, a watch, a get, a list: {answered:?}"
        );
        assert!(
            answered.iter().all(|m| m.starts_with(MEDIA_TYPE)),
            "{answered:?}"
        );
    }

    // An error reads as the same Status.
    let missing = ours.get("missing").await.expect_err("no such Job");
    let expected = theirs.get("missing").await.expect_err("no such Job");
    assert_eq!(missing.to_string(), expected.to_string());

    // The server did answer in protobuf, and its bytes read as its JSON does.
    let url = format!(
        "{}/owner-29000000",
        Job::url_path(&(), Some(&env.namespace))
    );
    let request = http::Request::get(url)
        .header(http::header::ACCEPT, MEDIA_TYPE)
        .body(Vec::new())
        .expect("a request");
    let response = env
        .client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("get in protobuf");
    let content_type = response.headers()[http::header::CONTENT_TYPE]
        .to_str()
        .expect("ASCII")
        .to_string();
    assert_eq!(content_type, MEDIA_TYPE);
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("the body")
        .to_bytes();
    let read: SlimJob =
        serde_json::from_slice(&object_to_json(&body).expect("reads")).expect("a slim Job");
    assert_eq!(read, theirs.get("owner-29000000").await.expect("get"));
    assert_eq!(read.name_any(), "owner-29000000");
    env.cleanup().await;
}

/// A Job with a field of each kind the encoder writes: maps, lists of strings, numbers and
/// messages, int-or-strings of both types, quantities, booleans, empty objects, and messages
/// embedded inline (a volume's source, a probe's handler, a secret key's name).
fn rich_job(name: &str) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"app": "report", "tier": "batch"},
            "annotations": {"example.com/owner": "team-a", "empty": ""}
        },
        "spec": {
            "suspend": true,
            "backoffLimit": 0,
            "activeDeadlineSeconds": 600,
            "ttlSecondsAfterFinished": 3600,
            "completions": 3,
            "parallelism": 2,
            "completionMode": "Indexed",
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42, 255]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
            ]},
            "template": {
                "metadata": {"labels": {"app": "report"}, "annotations": {"sidecar": "off"}},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "reporter",
                    "containers": [{
                        "name": "main",
                        "image": "busybox:1.36",
                        "command": ["/bin/sh", "-c"],
                        "args": ["date; echo héllo ✓"],
                        "ports": [{"name": "http", "containerPort": 8080}],
                        "env": [
                            {"name": "MODE", "value": "full"},
                            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "t", "optional": true}}}
                        ],
                        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                        "readinessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 0},
                        "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
                    }],
                    "volumes": [
                        {"name": "data", "emptyDir": {}},
                        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "cfg", "configMap": {"name": "report-config", "items": [{"key": "a", "path": "a.conf"}], "defaultMode": 420}}
                    ],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}
                    ]}}},
                    "tolerations": [{"key": "batch", "operator": "Equal", "value": "true", "effect": "NoExecute", "tolerationSeconds": 30}],
                    "nodeSelector": {"pool": "batch"},
                    "securityContext": {}
                }
            }
        }
    })
}

/// What a create made of a Job, whatever its name or identity: its metadata, its spec and the
/// fields the server recorded as set by the create. Its status is the Job controller's, which
/// may have written it for one Job and not yet for the other.
fn comparable(job: &Value, name: &str) -> Value {
    let mut job = job.clone();
    job.as_object_mut().expect("a Job").remove("status");
    let uid = job["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let meta = job["metadata"].as_object_mut().expect("metadata");
    for key in ["name", "uid", "resourceVersion", "creationTimestamp"] {
        meta.remove(key);
    }
    // The fields the server recorded as set by the create (not by a status write).
    let managed = meta.remove("managedFields").expect("managed fields");
    let created = managed
        .as_array()
        .expect("a list")
        .iter()
        .find(|m| m.get("subresource").is_none())
        .expect("the create's entry");
    meta.insert("fieldsV1".into(), created["fieldsV1"].clone());
    let text = serde_json::to_string(&job).expect("JSON");
    serde_json::from_str(&text.replace(&uid, "UID").replace(name, "NAME")).expect("JSON")
}

async fn a_job_created_in_protobuf_is_the_job_created_in_json(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let options = ClientOptions {
        kubeconfig: Some(env.kubeconfig.clone()),
        context: None,
    };
    // The media type of every request body the layer sent.
    let sent = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = {
        let sent = Arc::clone(&sent);
        MapRequestLayer::new(move |r: http::Request<kube::client::Body>| {
            sent.lock().expect("lock").push(content_type(r.headers()));
            r
        })
    };
    let client = kronjob::client::client_with_layer(&options, &Stack::new(record, SlimJobsLayer))
        .await
        .expect("the controllers' client");
    let ours: Api<Job> = Api::namespaced(client.clone(), &env.namespace);
    let theirs: Api<Job> = env.api();

    let in_protobuf: Job = serde_json::from_value(rich_job("in-protobuf")).expect("a Job");
    let in_json: Job = serde_json::from_value(rich_job("in-json")).expect("a Job");
    ours.create(&PostParams::default(), &in_protobuf)
        .await
        .expect("create through the protobuf client");
    theirs
        .create(&PostParams::default(), &in_json)
        .await
        .expect("create in JSON");
    assert_eq!(
        sent.lock().expect("lock").as_slice(),
        [MEDIA_TYPE],
        "the create went in protobuf"
    );
    let a = encoded(&theirs.get("in-protobuf").await.expect("get"));
    let b = encoded(&theirs.get("in-json").await.expect("get"));
    assert_eq!(
        a["spec"]["template"]["spec"]["volumes"][0]["emptyDir"],
        json!({})
    );
    assert_eq!(
        a["spec"]["template"]["spec"]["containers"][0]["env"][1]["valueFrom"]["secretKeyRef"]["name"],
        "tok"
    );
    assert_json_diff::assert_json_eq!(comparable(&a, "in-protobuf"), comparable(&b, "in-json"));

    // A field the schema does not know goes as the JSON it was, and the server says what it
    // says of it in JSON (here: drops it with a warning).
    let mut newer = rich_job("newer");
    newer["spec"]["template"]["spec"]["containers"][0]["notAField"] = json!(true);
    let dynamic: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client,
        &env.namespace,
        &kube::discovery::ApiResource::erase::<Job>(&()),
    );
    let newer: kube::api::DynamicObject = serde_json::from_value(newer).expect("an object");
    dynamic
        .create(&PostParams::default(), &newer)
        .await
        .expect("create in JSON");
    assert_eq!(
        sent.lock().expect("lock").last().map(String::as_str),
        Some("application/json")
    );
    let got = encoded(&theirs.get("newer").await.expect("get"));
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox:1.36"
    );
    env.cleanup().await;
}
