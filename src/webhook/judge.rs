//! What the API server says of a CronJob the local rules allowed, when its template is new
//! ([`TemplateCheck`]), through [`Budgeted`]:
//!
//! - a **Job template** is dry-run in a batch/v1 CronJob: refused with batch/v1's field errors;
//! - a **workload template** is judged in this order: its kind must be among
//!   `--workload-kinds` (else refused on `spec.workloadTemplate.kind`, before any request when
//!   no kind of its group is); the kind is looked up (a cluster-scoped kind is refused); its
//!   author (the request's user) must be allowed to create the kind in the namespace
//!   themselves (a `SubjectAccessReview`; refused when not, and when it cannot be asked or is
//!   not answered: never allowed on doubt); a kind that is not installed is then allowed with a
//!   warning (the CronJob waits, `Ready=False` `WorkloadKindNotFound`); else the object it
//!   makes is dry-run as its kind, and refused with the kind's field errors on
//!   `spec.workloadTemplate.…`.
//!
//! A dry run without verdict (limited, timeout, another webhook, quota, an unavailable API
//! server) allows, as it does for Jobs.

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::api::{ApiResource, GroupVersionKind};
use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails};
use tokio::time::Instant;

use super::access;
use super::admission::{Answer, Template, TemplateCheck, denied, invalid_status, template_status};
use super::dry_run::{Budgeted, Probe};
use crate::api::validation::{ErrorKind, FieldError, qualified_kind};
use crate::api::{GROUP, WorkloadTemplate};
use crate::workload::allowed::AllowedKinds;
use crate::workload::dry_run::{TEMPLATE_FIELD, WORKLOAD_FIELD};
use crate::workload::{Verdict, WorkloadType, build};

/// The field a kind not allowed is refused on.
pub const KIND_FIELD: &str = "spec.workloadTemplate.kind";
/// The `Ready` reason of a CronJob whose kind is not installed (the reconciler's).
const KIND_NOT_FOUND: &str = "WorkloadKindNotFound";

/// The checks that ask the API server: its requests on their budget, and the kinds the
/// manager may create (`--workload-kinds`).
#[derive(Debug)]
pub struct Judge {
    /// The API server, behind caches and limits.
    pub api: Budgeted,
    /// `--workload-kinds`.
    pub allowed: AllowedKinds,
}

impl Judge {
    /// The answer to a review [`super::admission::admit`] allowed, once the API server judged
    /// its template (when it has a new one), all requests ending by `until`; the dry run's
    /// verdict, when one was made.
    pub async fn judge(&self, mut answer: Answer, until: Instant) -> (Answer, Option<Verdict>) {
        let Some(check) = answer.template.take() else {
            return (answer, None);
        };
        match &check.template {
            Template::Job(template) => {
                if !self.allowed.allows("jobs", "batch") {
                    let message = self.allowed.refusal("jobs.batch");
                    let error = forbidden_field("spec.jobTemplate", message);
                    return (deny(check, &[error]), None);
                }
                let verdict = self
                    .api
                    .dry_run(&check.namespace, Probe::Job(template), until)
                    .await;
                let answer = match &verdict {
                    Verdict::Invalid(refused) => {
                        let status = template_status(&check.name, refused, TEMPLATE_FIELD);
                        denied(check.response, status)
                    }
                    _ => allowed(check, None),
                };
                (answer, Some(verdict))
            }
            Template::Workload(template) => {
                let template = template.clone();
                self.workload(check, &template, until).await
            }
        }
    }

    async fn workload(
        &self,
        check: TemplateCheck,
        template: &WorkloadTemplate,
        until: Instant,
    ) -> (Answer, Option<Verdict>) {
        let type_ = WorkloadType {
            api_version: template.api_version.clone(),
            kind: template.kind.clone(),
        };
        let guessed = guess(&type_);
        if !self.allowed.allows_group(&guessed.group) {
            let message = self.allowed.refusal(&access::resource_name(&guessed));
            return (deny(check, &[forbidden_field(KIND_FIELD, message)]), None);
        }
        let served = match self.api.served(&type_, until).await {
            Ok(served) => served,
            Err(why) => {
                let message = format!(
                    "could not look up {} {} ({why}); retry shortly",
                    type_.api_version, type_.kind
                );
                return (unavailable(check, &message), None);
            }
        };
        let resource = match &served {
            Some(served) if !served.namespaced => {
                let error = FieldError::invalid(
                    KIND_FIELD,
                    template.kind.clone().into(),
                    format!(
                        "{} is cluster-scoped: a CronJob runs namespaced kinds only",
                        access::resource_name(&served.resource)
                    ),
                );
                return (deny(check, &[error]), None);
            }
            Some(served) => served.resource.clone(),
            None => guessed,
        };
        if !self.allowed.allows(&resource.plural, &resource.group) {
            let mut message = self.allowed.refusal(&access::resource_name(&resource));
            if served.is_none() {
                message.push_str(&format!(
                    "; {} is not installed, so its resource is taken to be {}",
                    template.kind, resource.plural
                ));
            }
            return (deny(check, &[forbidden_field(KIND_FIELD, message)]), None);
        }
        if let Some(refusal) = self.author_may_not_create(&check, &resource, until).await {
            return (refusal, None);
        }
        if served.is_none() {
            let warning = format!(
                "{WORKLOAD_FIELD}: the API server serves no kind {} in {}: the CronJob waits (Ready=False, {}) until its CRD is installed",
                type_.kind, type_.api_version, KIND_NOT_FOUND
            );
            return (allowed(check, Some(warning)), None);
        }
        let label =
            Some(check.name.as_str()).filter(|n| n.ends_with(|c: char| c.is_ascii_alphanumeric()));
        let object = build::probe_object(template, label.unwrap_or_default());
        let probe = Probe::Workload {
            template,
            object: &object,
            resource: &resource,
        };
        let verdict = self.api.dry_run(&check.namespace, probe, until).await;
        let answer = match &verdict {
            Verdict::Invalid(refused) => {
                let status = template_status(&check.name, refused, WORKLOAD_FIELD);
                denied(check.response, status)
            }
            _ => allowed(check, None),
        };
        (answer, Some(verdict))
    }

    /// The refusal of a CronJob whose author may not create `resource` in its namespace, or
    /// whose access could not be checked; `None` when they may.
    async fn author_may_not_create(
        &self,
        check: &TemplateCheck,
        resource: &ApiResource,
        until: Instant,
    ) -> Option<Answer> {
        let user: &UserInfo = &check.user;
        if !access::names_someone(user) {
            let message = "the request names no user to check the access of".to_string();
            let error = forbidden_field(WORKLOAD_FIELD, message);
            return Some(denied(
                check.response.clone(),
                invalid_status(&check.name, &[error]),
            ));
        }
        let spec = access::review_spec(user, resource, &check.namespace);
        match self.api.may_create(&spec, until).await {
            Ok(true) => None,
            Ok(false) => {
                let message = access::forbidden(user, resource, &check.namespace);
                let error = forbidden_field(WORKLOAD_FIELD, message);
                Some(denied(
                    check.response.clone(),
                    invalid_status(&check.name, &[error]),
                ))
            }
            Err(why) => {
                let message = access::unchecked(user, resource, &check.namespace, &why.to_string());
                Some(denied(
                    check.response.clone(),
                    unavailable_status(&check.name, &message),
                ))
            }
        }
    }
}

/// The resource of `type_` as kube guesses it from the kind (for a kind that is not served,
/// and before it is looked up).
fn guess(type_: &WorkloadType) -> ApiResource {
    let gvk = GroupVersionKind::gvk(type_.group(), type_.version(), &type_.kind);
    if type_.kind.len() < 2 {
        // kube's guess indexes the kind's second-to-last letter.
        return ApiResource::from_gvk_with_plural(
            &gvk,
            &format!("{}s", type_.kind.to_ascii_lowercase()),
        );
    }
    ApiResource::from_gvk(&gvk)
}

fn forbidden_field(path: &str, detail: String) -> FieldError {
    FieldError {
        path: path.to_string(),
        kind: ErrorKind::Forbidden,
        value: None,
        detail,
    }
}

fn deny(check: TemplateCheck, errors: &[FieldError]) -> Answer {
    let status = invalid_status(&check.name, errors);
    denied(check.response, status)
}

fn allowed(check: TemplateCheck, warning: Option<String>) -> Answer {
    let mut response = check.response;
    if let Some(warning) = warning {
        response.warnings.get_or_insert_with(Vec::new).push(warning);
    }
    Answer {
        review: response.into_review(),
        outcome: super::metrics::Outcome::allowed,
        template: None,
    }
}

fn unavailable(check: TemplateCheck, message: &str) -> Answer {
    let status = unavailable_status(&check.name, message);
    denied(check.response, status)
}

/// The refusal of a CronJob whose checks could not be made: 503, on `spec.workloadTemplate`,
/// saying to retry.
pub fn unavailable_status(name: &str, message: &str) -> Status {
    let details = StatusDetails {
        name: name.to_string(),
        group: GROUP.to_string(),
        kind: "CronJob".to_string(),
        causes: vec![StatusCause {
            reason: "FieldValueForbidden".to_string(),
            message: format!("Forbidden: {message}"),
            field: WORKLOAD_FIELD.to_string(),
        }],
        uid: String::new(),
        retry_after_seconds: 0,
    };
    let message = format!(
        "{} {name:?} is forbidden: {WORKLOAD_FIELD}: {message}",
        qualified_kind()
    );
    Status::failure(&message, "ServiceUnavailable")
        .with_code(503)
        .with_details(details)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_not_served_is_taken_to_have_kubes_plural_and_any_kind_is_guessed_without_panic() {
        let guessed = |api_version: &str, kind: &str| {
            let type_ = WorkloadType {
                api_version: api_version.into(),
                kind: kind.into(),
            };
            access::resource_name(&guess(&type_))
        };
        let cases = [
            ("ray.io/v1", "RayJob", "rayjobs.ray.io"),
            ("argoproj.io/v1alpha1", "Workflow", "workflows.argoproj.io"),
            ("example.com/v1", "Policy", "policies.example.com"),
            ("example.com/v1", "Batch", "batches.example.com"),
            ("example.com/v1", "Y", "ys.example.com"),
            ("example.com/v1", "", "s.example.com"),
            ("v1", "Thing", "things"),
        ];
        for (api_version, kind, want) in cases {
            assert_eq!(guessed(api_version, kind), want, "{api_version} {kind}");
        }
    }
}
