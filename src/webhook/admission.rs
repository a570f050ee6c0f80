//! From request bytes to an `AdmissionReview` answer: decoding, dispatch to the pure defaulting
//! and validation functions of [`crate::api`], and the shape of the answers. No I/O: [`admit`]
//! decides with the local rules; a CronJob they allow whose template is new then goes to
//! [`super::judge`], which asks the API server ([`TemplateCheck`]).

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{DynamicObject, Status};
use serde::Deserialize;
use serde_json::Value;

use super::metrics::Outcome;
use crate::api::defaults::default_patch;
use crate::api::validation::{self, FieldError, invalid_message};
use crate::api::{CronJob, GROUP, VERSION, WorkloadTemplate};

/// Largest accepted request body: 3 MiB (the API server's own request limit is 3 MiB; a
/// CronJob is limited to about 1.5 MiB by etcd).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Which webhook a request was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The mutating (defaulting) webhook.
    Mutate,
    /// The validating webhook.
    Validate,
}

impl Endpoint {
    /// The URL path the endpoint is served at.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Mutate => MUTATE_PATH,
            Endpoint::Validate => VALIDATE_PATH,
        }
    }
}

/// Path of the mutating webhook.
pub const MUTATE_PATH: &str = "/mutate-batch-kronjob-dev-v1-cronjob";
/// Path of the validating webhook.
pub const VALIDATE_PATH: &str = "/validate-batch-kronjob-dev-v1-cronjob";

/// The request body is not an admission review: answered with HTTP 400 and this reason.
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    /// The body exceeds [`MAX_BODY_BYTES`].
    #[error("request body larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    /// The body could not be read.
    #[error("could not read the request body: {0}")]
    Read(String),
    /// The body is not JSON.
    #[error("request body is not JSON")]
    NotJson(#[source] serde_json::Error),
    /// JSON, but not `admission.k8s.io/v1` `AdmissionReview`.
    #[error(
        "expected an admission.k8s.io/v1 AdmissionReview, got apiVersion {api_version:?} kind {kind:?}"
    )]
    WrongKind {
        /// The `apiVersion` sent.
        api_version: String,
        /// The `kind` sent.
        kind: String,
    },
    /// An `AdmissionReview` without `request`.
    #[error("AdmissionReview has no request")]
    MissingRequest,
    /// The `request` does not have the shape of an `AdmissionRequest`.
    #[error("malformed AdmissionReview request")]
    Malformed(#[source] serde_json::Error),
}

/// The answer to a well-formed review: the review to send back and how it ended.
#[derive(Debug)]
pub struct Answer {
    /// The `AdmissionReview` holding the response.
    pub review: AdmissionReview<DynamicObject>,
    /// Allowed, patched or denied (or error when the webhook failed).
    pub outcome: Outcome,
    /// Allowed by the local rules, with a template the API server has not judged yet.
    pub template: Option<TemplateCheck>,
}

/// A CronJob whose template is to be judged by the API server before it is allowed.
#[derive(Debug)]
pub struct TemplateCheck {
    /// The response to the review, allowed so far.
    pub response: AdmissionResponse,
    /// The CronJob's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its template.
    pub template: Template,
    /// Who creates or changes it (the request's `userInfo`).
    pub user: UserInfo,
}

/// A CronJob's template: what it runs.
#[derive(Debug)]
pub enum Template {
    /// `spec.jobTemplate`.
    Job(Box<JobTemplateSpec>),
    /// `spec.workloadTemplate`.
    Workload(Box<WorkloadTemplate>),
}

/// The denial for a template the API server refused with `refused` (422): its causes, on
/// the CronJob's fields (already), in the shape of [`invalid_status`]; a refusal without causes
/// is reported on `field` (the template's).
pub fn template_status(name: &str, refused: &Status, field: &str) -> Status {
    let mut causes: Vec<StatusCause> = refused
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    if causes.is_empty() {
        causes.push(StatusCause {
            reason: "FieldValueInvalid".to_string(),
            message: refused.message.clone(),
            field: field.to_string(),
        });
    }
    let mut rendered: Vec<String> = Vec::with_capacity(causes.len());
    for cause in &causes {
        let line = format!("{}: {}", cause.field, cause.message);
        if !rendered.contains(&line) {
            rendered.push(line);
        }
    }
    let list = match rendered.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let message = format!(
        "{} {name:?} is invalid: {list}",
        validation::qualified_kind()
    );
    let details = StatusDetails {
        name: name.to_string(),
        group: GROUP.to_string(),
        kind: "CronJob".to_string(),
        causes,
        uid: String::new(),
        retry_after_seconds: 0,
    };
    Status::failure(&message, "Invalid")
        .with_code(400)
        .with_details(details)
}

/// Answer one admission review given as bytes.
pub fn admit(endpoint: Endpoint, body: &[u8]) -> Result<Answer, BadRequest> {
    if body.len() > MAX_BODY_BYTES {
        return Err(BadRequest::TooLarge);
    }
    let mut value: Value = serde_json::from_slice(body).map_err(BadRequest::NotJson)?;
    let field = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let api_version = field(&value, "apiVersion").unwrap_or_default();
    let kind = field(&value, "kind").unwrap_or_default();
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(BadRequest::WrongKind { api_version, kind });
    }
    // The objects are taken out before the typed decode: a review whose object does not decode
    // is still answered (denied) with its uid.
    let Some(request) = value.get_mut("request").filter(|r| !r.is_null()) else {
        return Err(BadRequest::MissingRequest);
    };
    let (object, old_object) = match request.as_object_mut() {
        Some(map) => (
            map.remove("object").filter(|o| !o.is_null()),
            map.remove("oldObject").filter(|o| !o.is_null()),
        ),
        None => (None, None),
    };
    let review =
        AdmissionReview::<DynamicObject>::deserialize(&value).map_err(BadRequest::Malformed)?;
    let request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| BadRequest::MissingRequest)?;
    Ok(answer(
        endpoint,
        &request,
        object.as_ref(),
        old_object.as_ref(),
    ))
}

fn allowed(request: &AdmissionRequest<DynamicObject>) -> Answer {
    Answer {
        review: AdmissionResponse::from(request).into_review(),
        outcome: Outcome::allowed,
        template: None,
    }
}

/// The answer denying the review of `response` with `status`.
pub fn denied(response: AdmissionResponse, status: Status) -> Answer {
    let mut response = response.deny(&status.message);
    response.result = status;
    Answer {
        review: response.into_review(),
        outcome: Outcome::denied,
        template: None,
    }
}

/// Whether the object has the shape of a Kubernetes object (`metadata` an `ObjectMeta`).
fn decode_check(object: &Value, what: &str) -> Result<(), String> {
    if !object.is_object() {
        return Err(format!("{what} is not a JSON object"));
    }
    DynamicObject::deserialize(object)
        .map(|_| ())
        .map_err(|e| format!("{what} cannot be decoded: {e}"))
}

fn answer(
    endpoint: Endpoint,
    request: &AdmissionRequest<DynamicObject>,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Answer {
    let ours = request.kind.group == GROUP
        && request.kind.version == VERSION
        && request.kind.kind == "CronJob"
        && request
            .sub_resource
            .as_deref()
            .unwrap_or_default()
            .is_empty();
    let op = match request.operation {
        Operation::Create => validation::Operation::Create,
        Operation::Update => validation::Operation::Update,
        Operation::Delete | Operation::Connect => return allowed(request),
    };
    if !ours {
        return allowed(request);
    }
    let response = AdmissionResponse::from(request);
    let Some(object) = object else {
        return denied(response, bad_request("the request has no object"));
    };
    if let Err(reason) = decode_check(object, "object") {
        return denied(response, bad_request(&reason));
    }
    if let Some(old) = old_object
        && let Err(reason) = decode_check(old, "oldObject")
    {
        return denied(response, bad_request(&reason));
    }
    match endpoint {
        Endpoint::Mutate => {
            let patch = default_patch(object);
            if patch.0.is_empty() {
                return Answer {
                    review: response.into_review(),
                    outcome: Outcome::allowed,
                    template: None,
                };
            }
            match response.clone().with_patch(patch) {
                Ok(patched) => Answer {
                    review: patched.into_review(),
                    outcome: Outcome::patched,
                    template: None,
                },
                Err(e) => {
                    let mut status = Status::failure(
                        &format!("internal error: cannot serialise the defaulting patch: {e}"),
                        "InternalError",
                    )
                    .with_code(500);
                    status.details = None;
                    let mut answer = denied(response, status);
                    answer.outcome = Outcome::error;
                    answer
                }
            }
        }
        Endpoint::Validate => {
            let errors = validation::validate(object, old_object, op);
            let name = object_name(object, request);
            if errors.is_empty() {
                return match template_check(request, object, old_object, &name, &response) {
                    Ok(template) => Answer {
                        review: response.into_review(),
                        outcome: Outcome::allowed,
                        template,
                    },
                    Err(reason) => denied(response, bad_request(&reason)),
                };
            }
            denied(response, invalid_status(&name, &errors))
        }
    }
}

/// What [`super::judge`] needs, when the template is new: on create, or on an update that
/// changes `spec.jobTemplate` or `spec.workloadTemplate` (an unchanged template is not judged
/// again, so an object stored before can still be suspended or have its finalizers removed).
/// A new workload template that cannot be judged (no namespace, an object that does not decode
/// as a CronJob) is an error: its author's access is never assumed.
fn template_check(
    request: &AdmissionRequest<DynamicObject>,
    object: &Value,
    old_object: Option<&Value>,
    name: &str,
    response: &AdmissionResponse,
) -> Result<Option<TemplateCheck>, String> {
    let templates = |o: &Value| {
        (
            o.pointer("/spec/jobTemplate").cloned(),
            o.pointer("/spec/workloadTemplate").cloned(),
        )
    };
    if old_object.is_some_and(|old| templates(old) == templates(object)) {
        return Ok(None);
    }
    let workload = object.pointer("/spec/workloadTemplate").is_some();
    let unjudged = |why: String| if workload { Err(why) } else { Ok(None) };
    let cronjob: CronJob = match serde_json::from_value(object.clone()) {
        Ok(cronjob) => cronjob,
        Err(e) => return unjudged(format!("the workload template cannot be checked: {e}")),
    };
    let template = match (cronjob.spec.job_template, cronjob.spec.workload_template) {
        (Some(job), _) => Template::Job(Box::new(job)),
        (None, Some(workload)) => Template::Workload(Box::new(workload)),
        (None, None) => return Ok(None),
    };
    let namespace = request
        .namespace
        .clone()
        .or_else(|| cronjob.metadata.namespace.clone())
        .filter(|ns| !ns.is_empty());
    let Some(namespace) = namespace else {
        return unjudged(
            "the workload template cannot be checked: the request names no namespace".into(),
        );
    };
    Ok(Some(TemplateCheck {
        response: response.clone(),
        name: name.to_string(),
        namespace,
        template,
        user: request.user_info.clone(),
    }))
}

fn bad_request(reason: &str) -> Status {
    Status::failure(reason, "BadRequest").with_code(400)
}

fn object_name(object: &Value, request: &AdmissionRequest<DynamicObject>) -> String {
    let meta = |key: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    meta("name")
        .or_else(|| meta("generateName"))
        .unwrap_or_else(|| request.name.clone())
}

/// The `Status` the API server would return for these field errors: code 400, reason
/// `Invalid`, the aggregate message, and one cause per error.
pub fn invalid_status(name: &str, errors: &[FieldError]) -> Status {
    let details = StatusDetails {
        name: name.to_string(),
        group: GROUP.to_string(),
        kind: "CronJob".to_string(),
        causes: errors
            .iter()
            .map(|e| StatusCause {
                reason: e.cause_reason().to_string(),
                message: e.body(),
                field: e.path.clone(),
            })
            .collect(),
        uid: String::new(),
        retry_after_seconds: 0,
    };
    Status::failure(&invalid_message(name, errors), "Invalid")
        .with_code(400)
        .with_details(details)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_without_causes_is_reported_on_the_template() {
        let refused = Status::failure(
            "CronJob.batch \"kronjob-template-check-x7k2p\" is invalid: something",
            "Invalid",
        )
        .with_code(422);
        let status = template_status("x", &refused, crate::workload::dry_run::TEMPLATE_FIELD);
        assert_eq!(status.code, 400);
        assert_eq!(status.reason, "Invalid");
        let causes = status.details.expect("details").causes;
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.jobTemplate");
        assert_eq!(
            status.message,
            "CronJob.batch.kronjob.dev \"x\" is invalid: spec.jobTemplate: CronJob.batch \"kronjob-template-check-x7k2p\" is invalid: something"
        );
    }
}
