//! The API server the webhook's checks ask, for tests: dry runs and discovery from a real client
//! (the simulator's), access reviews answered from a table of grants, as RBAC would.

use std::sync::Mutex;

use futures::future::BoxFuture;
use k8s_openapi::api::authorization::v1::SubjectAccessReviewSpec;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use kronjob::webhook::api::{AdmissionApi, Served};
use kronjob::workload::{TemplateDryRun, Verdict, WorkloadType};
use kube::api::{ApiResource, DynamicObject};

/// `client`'s dry runs and discovery; access reviews allowed exactly for `grants`.
pub struct Grants {
    /// The API server of everything but access reviews.
    pub client: kube::Client,
    /// Who may create what: `(user, "plural.group", namespace)`.
    pub grants: Vec<(String, String, String)>,
    /// Answer every access review with an error instead.
    pub failing: bool,
    /// Every access review asked, in order.
    pub asked: Mutex<Vec<SubjectAccessReviewSpec>>,
}

impl Grants {
    /// `client`, where `grants` (`(user, "plural.group", namespace)`) may create.
    pub fn new(client: kube::Client, grants: &[(&str, &str, &str)]) -> Self {
        Grants {
            client,
            grants: grants
                .iter()
                .map(|(u, r, n)| (u.to_string(), r.to_string(), n.to_string()))
                .collect(),
            failing: false,
            asked: Mutex::new(Vec::new()),
        }
    }

    /// The access reviews asked so far.
    pub fn asked(&self) -> Vec<SubjectAccessReviewSpec> {
        self.asked.lock().expect("lock").clone()
    }
}

impl TemplateDryRun for Grants {
    fn dry_run<'a>(
        &'a self,
        namespace: &'a str,
        template: &'a JobTemplateSpec,
    ) -> BoxFuture<'a, Verdict> {
        self.client.dry_run(namespace, template)
    }
}

impl AdmissionApi for Grants {
    fn dry_run_workload<'a>(
        &'a self,
        namespace: &'a str,
        resource: &'a ApiResource,
        object: &'a DynamicObject,
    ) -> BoxFuture<'a, Verdict> {
        self.client.dry_run_workload(namespace, resource, object)
    }

    fn discover<'a>(
        &'a self,
        type_: &'a WorkloadType,
    ) -> BoxFuture<'a, Result<Option<Served>, kube::Error>> {
        self.client.discover(type_)
    }

    fn review<'a>(
        &'a self,
        spec: &'a SubjectAccessReviewSpec,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        self.asked.lock().expect("lock").push(spec.clone());
        let answer = if self.failing {
            Err(kube::Error::Service("connection refused".into()))
        } else {
            let attributes = spec.resource_attributes.clone().unwrap_or_default();
            let user = spec.user.clone().unwrap_or_default();
            let resource = format!(
                "{}.{}",
                attributes.resource.unwrap_or_default(),
                attributes.group.unwrap_or_default()
            );
            let namespace = attributes.namespace.unwrap_or_default();
            let create = attributes.verb.as_deref() == Some("create");
            Ok(create
                && self
                    .grants
                    .iter()
                    .any(|g| g.0 == user && g.1 == resource && g.2 == namespace))
        };
        Box::pin(async move { answer })
    }
}
