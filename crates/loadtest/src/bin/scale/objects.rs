//! The objects the run creates, and the namespaces and CRD it needs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{
    CronJob as BatchCronJob, CronJobSpec as BatchCronJobSpec, Job, JobSpec, JobTemplateSpec,
};
use k8s_openapi::api::core::v1::{Container, Namespace, PodSpec, PodTemplateSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::Serialize;

use kronjob::api::{CronJob, CronJobSpec};

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

/// A kronjob CronJob as the mutating webhook leaves it: with its shard bucket label (the tool
/// creates CronJobs without the webhook).
pub fn kronjob_cronjob(ns: &str, name: String) -> CronJob {
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
            job_template: Some(template()),
            workload_template: None,
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

/// The Job kronjob makes for CronJob `i` in `ns` at `slot`, built by kronjob's own code.
pub fn kronjob_job(ns: &str, i: usize, slot: Timestamp) -> Job {
    let mut cj = kronjob_cronjob(ns, cronjob_name(i));
    cj.metadata.namespace = Some(ns.to_string());
    cj.metadata.uid = Some(format!("00000000-0000-4000-8000-{i:012}"));
    kronjob::workload::for_slot(&cj, slot, &jiff::tz::TimeZone::UTC, None)
        .and_then(kronjob::workload::NewWorkload::into_job)
        .unwrap_or_else(|| bare_job(i))
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
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(&std::fs::read_to_string(path)?)?;
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
