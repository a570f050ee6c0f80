//! The objects the run creates, and the namespaces and CRDs it needs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{
    CronJob as BatchCronJob, CronJobSpec as BatchCronJobSpec, Job, JobSpec, JobTemplateSpec,
};
use k8s_openapi::api::core::v1::{Container, Namespace, PodSpec, PodTemplateSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresourceStatus, CustomResourceSubresources,
    CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde::Serialize;

use kronjob::api::{CronJob, CronJobSpec, WorkloadMetadata, WorkloadTemplate};
use kronjob::workload::NewWorkload;
use kronjob::workload::kinds::{self, Row};

use crate::BoxError;

/// The image of the Jobs' container (never pulled: there is no kubelet).
const IMAGE: &str = "busybox:1.36";

fn labels() -> BTreeMap<String, String> {
    [("app.kubernetes.io/part-of".to_string(), "scale".to_string())].into()
}

/// The Job every controller makes here: one container, never restarted.
fn job_spec() -> JobSpec {
    JobSpec {
        backoff_limit: Some(0),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                restart_policy: Some("Never".into()),
                containers: vec![Container {
                    name: "work".into(),
                    image: Some(IMAGE.into()),
                    command: Some(vec!["sh".into(), "-c".into(), "sleep 30".into()]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        },
        ..JobSpec::default()
    }
}

fn template() -> JobTemplateSpec {
    JobTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels()),
            ..ObjectMeta::default()
        }),
        spec: Some(job_spec()),
    }
}

// ---------------------------------------------------------------------------------------------
// The kinds the CronJobs run
// ---------------------------------------------------------------------------------------------

/// The kind `--workload-kind` names: `job` (batch/v1), or a kind of kronjob's table by its
/// kind (`jobset`, any case) or as `--workload-kinds` names it (`jobsets.jobset.x-k8s.io`).
pub fn parse_kind(name: &str) -> Result<&'static Row, String> {
    kinds::KINDS
        .iter()
        .find(|r| r.kind.eq_ignore_ascii_case(name))
        .or_else(|| {
            let (plural, group) = name.split_once('.')?;
            kinds::by_resource(plural, group)
        })
        .ok_or_else(|| {
            format!("{name}: not a kind kronjob knows (job, jobset, rayjob, jobsets.jobset.x-k8s.io, ...)")
        })
}

/// Whether `kind` is batch/v1 Job.
pub fn is_job(kind: &Row) -> bool {
    let job = kinds::job();
    (kind.group, kind.kind) == (job.group, job.kind)
}

/// `kind` as the API names it.
pub fn resource(kind: &Row) -> ApiResource {
    ApiResource {
        group: kind.group.into(),
        version: kind.version.into(),
        api_version: format!("{}/{}", kind.group, kind.version),
        kind: kind.kind.into(),
        plural: kind.plural.into(),
    }
}

/// `RESOURCE.GROUP`, as `--workload-kinds` and a CRD's name write it.
pub fn resource_name(kind: &Row) -> String {
    format!("{}.{}", kind.plural, kind.group)
}

/// kronjob's `--workload-kinds` for a run of `kinds`: Jobs and each other kind, once; `None`
/// when they are all Jobs (the default, which every build understands).
pub fn workload_kinds_flag(kinds: &[&Row]) -> Option<String> {
    if kinds.iter().all(|k| is_job(k)) {
        return None;
    }
    let mut names = vec![resource_name(kinds::job())];
    for name in kinds.iter().map(|k| resource_name(k)) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Some(format!("--workload-kinds={}", names.join(",")))
}

/// A CRD serving `kind` as its project's does (group, version, kind, plural; namespaced; a
/// status subresource) with any spec and status: no controller runs here, so only the API's
/// shape and the objects' size matter.
pub fn workload_crd(kind: &Row) -> CustomResourceDefinition {
    let free = || JSONSchemaProps {
        type_: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..JSONSchemaProps::default()
    };
    // The API server wants this of a group under k8s.io or kubernetes.io.
    let protected = kind.group.ends_with(".k8s.io") || kind.group.ends_with(".kubernetes.io");
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(resource_name(kind)),
            annotations: protected.then(|| {
                [(
                    "api-approved.kubernetes.io".to_string(),
                    "unapproved, experimental-only".to_string(),
                )]
                .into()
            }),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: kind.group.into(),
            scope: "Namespaced".into(),
            names: CustomResourceDefinitionNames {
                kind: kind.kind.into(),
                plural: kind.plural.into(),
                singular: Some(kind.kind.to_ascii_lowercase()),
                list_kind: Some(format!("{}List", kind.kind)),
                ..CustomResourceDefinitionNames::default()
            },
            versions: vec![CustomResourceDefinitionVersion {
                name: kind.version.into(),
                served: true,
                storage: true,
                subresources: Some(CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    ..CustomResourceSubresources::default()
                }),
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(JSONSchemaProps {
                        type_: Some("object".into()),
                        properties: Some(
                            [("spec".into(), free()), ("status".into(), free())].into(),
                        ),
                        ..JSONSchemaProps::default()
                    }),
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    }
}

/// The workload template of a kind other than Job: a JobSet's spec with one replicated Job of
/// the template every controller here runs (any kind gets it: with no controller, only its
/// size matters).
fn workload_template(kind: &Row) -> WorkloadTemplate {
    WorkloadTemplate {
        api_version: resource(kind).api_version,
        kind: kind.kind.into(),
        metadata: Some(WorkloadMetadata {
            labels: Some(labels()),
            annotations: None,
        }),
        spec: Some(serde_json::json!({
            "replicatedJobs": [{"name": "work", "replicas": 1, "template": template()}],
        })),
    }
}

// ---------------------------------------------------------------------------------------------
// The objects
// ---------------------------------------------------------------------------------------------

fn meta(name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

/// The name of CronJob `i`.
pub fn cronjob_name(i: usize) -> String {
    format!("cj-{i:05}")
}

/// A kronjob CronJob running `kind`, as the mutating webhook leaves it: with its shard bucket
/// label (the tool creates CronJobs without the webhook).
pub fn kronjob_cronjob(ns: &str, name: String, kind: &Row) -> CronJob {
    let bucket = kronjob::api::shard::bucket(ns, &name);
    let mut cj = CronJob::new(
        &name,
        CronJobSpec {
            schedule: Some("* * * * *".into()),
            schedules: None,
            time_zone: None,
            starting_deadline_seconds: None,
            concurrency_policy: Default::default(),
            queue: None,
            suspend: None,
            job_template: is_job(kind).then(template),
            workload_template: (!is_job(kind)).then(|| workload_template(kind)),
            completion: None,
            successful_jobs_history_limit: None,
            failed_jobs_history_limit: None,
            failure_policy: None,
            exclusions: None,
            calendars: None,
            not_before: None,
            not_after: None,
        },
    );
    let mut labels = labels();
    labels.insert(
        kronjob::api::shard::LABEL_SHARD.to_string(),
        kronjob::api::shard::label_value(bucket),
    );
    cj.metadata.labels = Some(labels);
    cj
}

pub fn upstream_cronjob(name: String) -> BatchCronJob {
    BatchCronJob {
        metadata: meta(name),
        spec: Some(BatchCronJobSpec {
            schedule: "* * * * *".into(),
            job_template: template(),
            ..BatchCronJobSpec::default()
        }),
        status: None,
    }
}

/// A bare Job (no owner, no annotation) of the template every controller here runs.
pub fn bare_job(i: usize) -> Job {
    Job {
        metadata: meta(format!("bare-{i:05}")),
        spec: Some(job_spec()),
        status: None,
    }
}

/// The run kronjob makes for CronJob `i` (of `kind`) in `ns` at `slot`, built by its own code.
fn kronjob_run(ns: &str, i: usize, slot: Timestamp, kind: &Row) -> Option<NewWorkload> {
    let mut cj = kronjob_cronjob(ns, cronjob_name(i), kind);
    cj.metadata.namespace = Some(ns.to_string());
    cj.metadata.uid = Some(format!("00000000-0000-4000-8000-{i:012}"));
    kronjob::workload::for_slot(&cj, slot, &jiff::tz::TimeZone::UTC, None)
}

/// The Job kronjob makes for CronJob `i` in `ns` at `slot`, built by kronjob's own code.
pub fn kronjob_job(ns: &str, i: usize, slot: Timestamp) -> Job {
    kronjob_run(ns, i, slot, kinds::job())
        .and_then(NewWorkload::into_job)
        .unwrap_or_else(|| bare_job(i))
}

/// The run of `kind` (not a Job) kronjob makes for CronJob `i` in `ns` at `slot`, built by
/// kronjob's own code; an object with the CronJob's name alone if kronjob builds none.
pub fn kronjob_object(ns: &str, i: usize, slot: Timestamp, kind: &Row) -> DynamicObject {
    kronjob_run(ns, i, slot, kind)
        .and_then(|run| run.as_object().cloned())
        .unwrap_or_else(|| DynamicObject::new(&cronjob_name(i), &resource(kind)))
}

/// Create `n` objects made by `make(i)` with `in_flight` requests in flight; the time each
/// create took, seconds.
pub async fn create_all<K>(
    api: &Api<K>,
    n: usize,
    in_flight: usize,
    make: impl Fn(usize) -> K,
) -> Result<Vec<f64>, BoxError>
where
    K: kube::Resource + Clone + std::fmt::Debug + Serialize + serde::de::DeserializeOwned,
{
    let pp = PostParams::default();
    futures::stream::iter((0..n).map(make))
        .map(|object| {
            let pp = &pp;
            async move {
                let started = Instant::now();
                api.create(pp, &object).await?;
                Ok::<f64, kube::Error>(started.elapsed().as_secs_f64())
            }
        })
        .buffer_unordered(in_flight.max(1))
        .try_collect()
        .await
        .map_err(Into::into)
}

pub async fn create_namespace(client: &kube::Client, name: &str) -> Result<(), BoxError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: meta(name.into()),
        ..Namespace::default()
    };
    api.create(&PostParams::default(), &ns).await?;
    Ok(())
}

/// Delete the namespaces and wait until they are gone (their objects deleted); seconds taken.
pub async fn delete_namespaces(client: &kube::Client, names: &[String]) -> Result<f64, BoxError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    for name in names {
        let _ = api.delete(name, &DeleteParams::background()).await;
    }
    for name in names {
        while api.get_opt(name).await?.is_some() {
            if started.elapsed() > Duration::from_secs(900) {
                return Err(format!("namespace {name} still there after 15 min").into());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Apply kronjob's CRD from `crd/` and wait until it is established.
pub async fn install_crd(client: &kube::Client) -> Result<(), BoxError> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crd/cronjobs.batch.kronjob.dev.yaml");
    apply_crd(
        client,
        serde_yaml_ng::from_str(&std::fs::read_to_string(path)?)?,
    )
    .await
}

/// Apply `crd` and wait until it is established.
pub async fn apply_crd(
    client: &kube::Client,
    crd: CustomResourceDefinition,
) -> Result<(), BoxError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply("scale").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let established = kube::runtime::wait::await_condition(
        api,
        &name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(60), established).await??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(name: &str) -> &'static Row {
        parse_kind(name).expect("a kind kronjob knows")
    }

    #[test]
    fn kinds_are_named_by_their_kind_or_resource_and_allowed_once() {
        let jobset = kind("jobset");
        assert_eq!(
            (jobset.group, jobset.version, jobset.kind, jobset.plural),
            ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
        );
        assert_eq!(kind("JobSet").kind, "JobSet");
        assert_eq!(kind("jobsets.jobset.x-k8s.io").kind, "JobSet");
        // `job` is batch/v1's; Volcano's Job by its resource.
        assert!(is_job(kind("job")) && is_job(kind("jobs.batch")));
        let volcano = kind("jobs.batch.volcano.sh");
        assert_eq!(
            (volcano.group, is_job(volcano)),
            ("batch.volcano.sh", false)
        );
        assert!(parse_kind("widget").is_err());
        assert!(parse_kind("widgets.example.com").is_err());
        assert_eq!(workload_kinds_flag(&[kind("job")]), None);
        let both = Some("--workload-kinds=jobs.batch,jobsets.jobset.x-k8s.io".to_string());
        assert_eq!(workload_kinds_flag(&[kind("job"), jobset, jobset]), both);
        assert_eq!(workload_kinds_flag(&[jobset]), both);
    }

    #[test]
    fn a_workload_crd_serves_its_kind_with_any_spec_and_status() {
        let crd = serde_json::to_value(workload_crd(kind("jobset"))).expect("JSON");
        assert_eq!(crd["metadata"]["name"], "jobsets.jobset.x-k8s.io");
        assert_eq!(crd["metadata"].get("annotations"), None);
        let spec = &crd["spec"];
        assert_eq!(spec["group"], "jobset.x-k8s.io");
        assert_eq!(spec["scope"], "Namespaced");
        assert_eq!(
            spec["names"],
            json!({"kind": "JobSet", "plural": "jobsets", "singular": "jobset", "listKind": "JobSetList"})
        );
        let version = &spec["versions"][0];
        assert_eq!(
            (&version["name"], &version["served"], &version["storage"]),
            (&json!("v1alpha2"), &json!(true), &json!(true))
        );
        assert_eq!(version["subresources"], json!({"status": {}}));
        let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let schema = &version["schema"]["openAPIV3Schema"];
        assert_eq!(schema["properties"], json!({"spec": free, "status": free}));
        // A group under k8s.io needs the API server's approval annotation.
        let spark = workload_crd(kind("sparkapplication"));
        assert!(
            spark
                .metadata
                .annotations
                .is_some_and(|a| a.contains_key("api-approved.kubernetes.io"))
        );
    }

    #[test]
    fn a_cronjob_runs_its_kind_as_kronjob_reads_and_builds_it() {
        let slot: Timestamp = "2026-01-01T00:01:00Z".parse().expect("time");
        let cj = kronjob_cronjob("ns", cronjob_name(3), kind("jobset"));
        assert_eq!(cj.spec.job_template, None);
        let type_ = kronjob::workload::type_of(&cj.spec).expect("a kind");
        assert_eq!(
            (type_.api_version.as_str(), type_.kind.as_str()),
            ("jobset.x-k8s.io/v1alpha2", "JobSet")
        );
        // The slot's run as kronjob builds it: named for the slot, owned by the CronJob.
        let object = kronjob_object("ns", 3, slot, kind("jobset"));
        let types = object.types.clone().expect("apiVersion and kind");
        assert_eq!(types.kind, "JobSet");
        assert_eq!(
            object.metadata.name,
            Some(kronjob::workload::scheduled_name("cj-00003", slot))
        );
        assert_eq!(
            kronjob::workload::controller_uid(&object.metadata),
            Some("00000000-0000-4000-8000-000000000003")
        );
        let job = serde_json::to_value(template()).expect("JSON");
        assert_eq!(
            object.data["spec"]["replicatedJobs"],
            json!([{"name": "work", "replicas": 1, "template": job}])
        );
        let jobs = kronjob_cronjob("ns", cronjob_name(3), kind("job"));
        assert_eq!(jobs.spec.workload_template, None);
        assert_eq!(jobs.spec.job_template, Some(template()));
    }

    #[test]
    fn kronjobs_jobs_are_its_own_and_bare_jobs_have_no_owner() {
        let slot: Timestamp = "2026-01-01T00:01:00Z".parse().expect("time");
        let job = kronjob_job("ns", 7, slot);
        assert_eq!(
            kronjob::workload::ran_for(&job.metadata),
            kronjob::workload::Ran::Scheduled("2026-01-01T00:01:00Z")
        );
        assert_eq!(
            kronjob::workload::controller_uid(&job.metadata),
            Some("00000000-0000-4000-8000-000000000007")
        );
        let bare = bare_job(7);
        assert_eq!(bare.metadata.owner_references, None);
        let containers = |j: &Job| {
            j.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .map(|p| p.containers.clone())
        };
        assert_eq!(containers(&bare), containers(&job));
    }
}
