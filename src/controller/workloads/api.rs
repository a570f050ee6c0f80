//! The requests kronjob makes of a workload, whatever its kind: create, read, and the guarded
//! delete. Jobs go through their typed API, decoded slim ([`SlimJob`]); any other kind through
//! the dynamic API of its resource, read through its kind's rule.

use std::sync::Arc;

use kube::api::{DynamicObject, PostParams, PropagationPolicy};
use kube::core::ApiResource;
use kube::{Api, Client};

use crate::controller::cache::SlimJob;
use crate::workload::kinds::{self, Row};
use crate::workload::{Deletion, NewWorkload, Workload, WorkloadType, delete_guarded};

/// A workload kind as the API server serves it.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Its apiVersion and kind.
    pub type_: Arc<WorkloadType>,
    /// Its resource (plural, group, version), from discovery.
    pub resource: ApiResource,
    /// Its row of the table of kinds, if kronjob knows it.
    pub row: Option<&'static Row>,
}

impl PartialEq for Resolved {
    fn eq(&self, other: &Self) -> bool {
        self.type_ == other.type_ && self.resource == other.resource
    }
}

impl Resolved {
    /// batch/v1 Job.
    pub fn job() -> Self {
        let type_ = WorkloadType::job();
        Resolved {
            resource: ApiResource {
                group: "batch".into(),
                version: "v1".into(),
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                plural: "jobs".into(),
            },
            row: Some(kinds::job()),
            type_,
        }
    }

    /// `resource.group`: how RBAC and `--workload-kinds` name it.
    pub fn name(&self) -> String {
        format!("{}.{}", self.resource.plural, self.resource.group)
    }
}

/// The API of one workload kind in one namespace.
#[derive(Debug, Clone)]
pub enum WorkloadApi {
    /// batch/v1 Jobs.
    Jobs(Api<SlimJob>),
    /// Any other kind, with its row (if kronjob knows it).
    Objects(Api<DynamicObject>, Option<&'static Row>),
}

impl WorkloadApi {
    /// The API of `kind` in `namespace`.
    pub fn new(client: Client, namespace: &str, kind: &Resolved) -> Self {
        if kind.type_.is_job() {
            WorkloadApi::Jobs(Api::namespaced(client, namespace))
        } else {
            WorkloadApi::Objects(
                Api::namespaced_with(client, namespace, &kind.resource),
                kind.row,
            )
        }
    }

    /// Create `workload`; the API server's answer, read as a workload.
    pub async fn create(&self, workload: NewWorkload) -> Result<Workload, kube::Error> {
        let params = PostParams::default();
        match (self, workload) {
            (WorkloadApi::Jobs(api), NewWorkload::Job(job)) => {
                // Sent as the Job the plan built; the answer is decoded slim (no pod template,
                // no managedFields).
                let created = api.create(&params, &SlimJob(*job)).await?;
                Ok(Workload::of_job(&created.0))
            }
            (WorkloadApi::Objects(api, row), NewWorkload::Object(object)) => {
                let created = api.create(&params, &object).await?;
                Ok(Workload::of_object(&created, *row))
            }
            _ => Err(kube::Error::Service(
                "a workload sent to the API of another kind".into(),
            )),
        }
    }

    /// Read `name`, if it exists.
    pub async fn get_opt(&self, name: &str) -> Result<Option<Workload>, kube::Error> {
        Ok(match self {
            WorkloadApi::Jobs(api) => api.get_opt(name).await?.map(|j| Workload::of_job(&j.0)),
            WorkloadApi::Objects(api, row) => api
                .get_opt(name)
                .await?
                .map(|o| Workload::of_object(&o, *row)),
        })
    }

    /// Delete `name` while its UID is `uid` (see [`delete_guarded`]).
    pub async fn delete(
        &self,
        name: &str,
        uid: Option<&str>,
        propagation: PropagationPolicy,
    ) -> Result<Deletion, kube::Error> {
        match self {
            WorkloadApi::Jobs(api) => delete_guarded(api, name, uid, propagation).await,
            WorkloadApi::Objects(api, _) => delete_guarded(api, name, uid, propagation).await,
        }
    }
}
