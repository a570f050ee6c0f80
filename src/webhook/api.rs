//! What the webhook asks the API server, beyond its local rules: dry runs of Job templates and
//! of workloads, how a workload kind is served (discovery), and whether a user may create it
//! (`SubjectAccessReview`). The API client in production, a fake in tests; always behind
//! [`super::dry_run::Budgeted`] (cache, rate limit, concurrency).

use futures::future::BoxFuture;
use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};

use crate::workload::dry_run::{DRY_RUN_TIMEOUT, dry_run_object};
pub use crate::workload::served::Served;
use crate::workload::{TemplateDryRun, Verdict, WorkloadType};

/// The API server, as the webhook's checks ask it.
pub trait AdmissionApi: TemplateDryRun {
    /// Dry-run the create of `object` (a workload of `resource`) in `namespace`, giving up after
    /// [`DRY_RUN_TIMEOUT`].
    fn dry_run_workload<'a>(
        &'a self,
        namespace: &'a str,
        resource: &'a ApiResource,
        object: &'a DynamicObject,
    ) -> BoxFuture<'a, Verdict>;

    /// How `type_` is served; `None` when the API server serves no such kind (its CRD is not
    /// installed).
    fn discover<'a>(
        &'a self,
        type_: &'a WorkloadType,
    ) -> BoxFuture<'a, Result<Option<Served>, kube::Error>>;

    /// Whether the API server's authorizer allows the access `spec` describes.
    fn review<'a>(
        &'a self,
        spec: &'a SubjectAccessReviewSpec,
    ) -> BoxFuture<'a, Result<bool, kube::Error>>;
}

impl AdmissionApi for Client {
    fn dry_run_workload<'a>(
        &'a self,
        namespace: &'a str,
        resource: &'a ApiResource,
        object: &'a DynamicObject,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(dry_run_object(
            self,
            namespace,
            resource,
            object,
            DRY_RUN_TIMEOUT,
        ))
    }

    fn discover<'a>(
        &'a self,
        type_: &'a WorkloadType,
    ) -> BoxFuture<'a, Result<Option<Served>, kube::Error>> {
        Box::pin(crate::workload::served::discover(self, type_))
    }

    fn review<'a>(
        &'a self,
        spec: &'a SubjectAccessReviewSpec,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: spec.clone(),
                ..SubjectAccessReview::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(self.clone());
            let answer = api.create(&PostParams::default(), &review).await?;
            Ok(answer.status.is_some_and(|s| s.allowed))
        })
    }
}
