//! The runs of CronJobs as the commands read them, whatever their kind: Jobs through the batch
//! API, any other kind through its resource (found by discovery), each read through its
//! kind's rule, or the CronJob's own completion rule.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{DynamicObject, GroupVersionKind, ListParams};
use kube::core::ApiResource;
use kube::{Api, Client};

use super::CliError;
use super::cluster::Scope;
use crate::api::{CronJob, LABEL_CRONJOB};
use crate::workload::cel::Completion;
use crate::workload::{Workload, WorkloadType, controller_uid, kinds};

/// The kind `cj` runs (a Job for a CronJob that names none: its status says why).
pub fn type_of(cj: &CronJob) -> WorkloadType {
    crate::workload::type_of(&cj.spec).unwrap_or_else(|| WorkloadType::job().as_ref().clone())
}

/// One run: the object as the API server sent it (for `-o json|yaml`), and as the commands
/// read it.
#[derive(Debug, Clone)]
pub struct Run {
    /// The object's JSON.
    pub object: serde_json::Value,
    /// It, read through its kind's rule.
    pub workload: Workload,
}

/// A kind as the API server serves it.
#[derive(Debug, Clone)]
pub struct Served {
    /// Its apiVersion and kind.
    pub type_: WorkloadType,
    /// Its resource; `None` for Job (the typed API).
    resource: Option<ApiResource>,
}

impl Served {
    /// How kubectl names one of it: `job.batch/NAME`, `jobset.jobset.x-k8s.io/NAME`.
    pub fn name_of(&self, name: &str) -> String {
        let kind = self.type_.kind.to_ascii_lowercase();
        match self.type_.group() {
            "" => format!("{kind}/{name}"),
            group => format!("{kind}.{group}/{name}"),
        }
    }

    /// `type_`, looked up on the API server (a Job needs no look-up).
    pub async fn find(client: &Client, type_: &WorkloadType) -> Result<Self, CliError> {
        if type_.is_job() {
            return Ok(Served {
                type_: type_.clone(),
                resource: None,
            });
        }
        let gvk = GroupVersionKind::gvk(type_.group(), type_.version(), &type_.kind);
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((resource, _)) => Ok(Served {
                type_: type_.clone(),
                resource: Some(resource),
            }),
            Err(kube::Error::Api(s)) if s.code == 404 => Err(not_served(type_)),
            Err(kube::Error::Discovery(_)) => Err(not_served(type_)),
            Err(e) => Err(CliError::Api(e)),
        }
    }

    /// Its objects in `scope` that carry the CronJob label (`selector` narrows it to one
    /// CronJob), each read through its kind's rule; a kind without a rule is judged by
    /// `completion` of the owning CronJob's UID.
    pub async fn list(
        &self,
        client: &Client,
        scope: &Scope,
        selector: &str,
        completion: &HashMap<String, Arc<Completion>>,
    ) -> Result<Vec<Run>, CliError> {
        let params = ListParams::default().labels(selector);
        let Some(resource) = &self.resource else {
            let jobs = scope.api::<Job>(client).list(&params).await?.items;
            return Ok(jobs
                .iter()
                .map(|job| Run {
                    object: serde_json::to_value(job).unwrap_or_default(),
                    workload: Workload::of_job(job),
                })
                .collect());
        };
        let row = kinds::known(self.type_.group(), &self.type_.kind);
        let objects = scope.dynamic(client, resource).list(&params).await?.items;
        Ok(objects
            .iter()
            .map(|object| {
                let mut workload = Workload::of_object(object, row);
                let rule = controller_uid(&workload.metadata).and_then(|uid| completion.get(uid));
                if let Some(rule) = rule {
                    workload.judge(rule);
                }
                Run {
                    object: serde_json::to_value(object).unwrap_or_default(),
                    workload,
                }
            })
            .collect())
    }

    /// Whether its object `name` exists in `namespace`.
    pub async fn exists(
        &self,
        client: &Client,
        namespace: &str,
        name: &str,
    ) -> Result<bool, CliError> {
        Ok(match &self.resource {
            None => Api::<Job>::namespaced(client.clone(), namespace)
                .get_opt(name)
                .await?
                .is_some(),
            Some(resource) => {
                Api::<DynamicObject>::namespaced_with(client.clone(), namespace, resource)
                    .get_opt(name)
                    .await?
                    .is_some()
            }
        })
    }
}

fn not_served(type_: &WorkloadType) -> CliError {
    CliError::Failed(format!(
        "the API server serves no kind {} in {}: is its CRD installed?",
        type_.kind, type_.api_version
    ))
}

/// The completion rules of `cronjobs`, compiled, by UID (a rule that does not compile is
/// left out: its CronJob's runs read as running, and its status says why).
pub fn completions(cronjobs: &[CronJob]) -> HashMap<String, Arc<Completion>> {
    cronjobs
        .iter()
        .filter_map(|cj| {
            let rule = cj.spec.completion.as_ref()?;
            let compiled = Completion::compile(&rule.succeeded, &rule.failed).ok()?;
            Some((cj.metadata.uid.clone()?, Arc::new(compiled)))
        })
        .collect()
}

/// The runs of `cj` in `namespace`: the objects of its kind that it controls.
pub async fn runs_of(
    client: &Client,
    namespace: &str,
    cj: &CronJob,
) -> Result<(Served, Vec<Run>), CliError> {
    let served = Served::find(client, &type_of(cj)).await?;
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    let uid = cj.metadata.uid.as_deref().unwrap_or_default();
    let scope = Scope::Namespace(namespace.to_string());
    let selector = format!("{LABEL_CRONJOB}={name}");
    let runs = served
        .list(
            client,
            &scope,
            &selector,
            &completions(std::slice::from_ref(cj)),
        )
        .await?
        .into_iter()
        .filter(|r| crate::workload::controlled_by(&r.workload.metadata, uid))
        .collect();
    Ok((served, runs))
}

/// The runs of every CronJob of `cronjobs` in `scope`: each kind they name listed once; a kind
/// the API server does not serve has none.
pub async fn runs_in(
    client: &Client,
    scope: &Scope,
    cronjobs: &[CronJob],
) -> Result<Vec<Run>, CliError> {
    let mut types: Vec<WorkloadType> = cronjobs.iter().map(type_of).collect();
    types.sort();
    types.dedup();
    let completion = completions(cronjobs);
    let mut runs = Vec::new();
    for type_ in types {
        match Served::find(client, &type_).await {
            Ok(served) => runs.extend(
                served
                    .list(client, scope, LABEL_CRONJOB, &completion)
                    .await?,
            ),
            Err(CliError::Failed(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(runs)
}
