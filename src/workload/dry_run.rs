//! The Job template checked exactly as upstream checks a batch/v1 CronJob's, without
//! re-implementing its rules: a server-side dry run (`dryRun=All`) of a batch/v1 CronJob that
//! carries the template. The API server's own CronJob validation judges it, so kronjob accepts
//! the templates batch/v1 accepts and refuses the ones it refuses, naming the same fields. (A
//! dry run of the Job the template makes would judge it after Job defaulting, which a CronJob's
//! template never gets: an `Indexed` template without `completions` passes as a Job and is
//! refused as a CronJob's.) Used by the admission webhook (before a CronJob is stored) and by
//! the reconciler (once per generation, when the webhook is off).
//!
//! A workload template (`spec.workloadTemplate`) is judged the same way by its own kind: a dry
//! run of the object it makes ([`crate::workload::build::probe_object`]), whose refusal names
//! the workload's fields (`spec.x`), read as the CronJob's (`spec.workloadTemplate.spec.x`,
//! [`workload_field`]). Used by the admission webhook.
//!
//! Only an answer of 422 (Invalid) naming fields of the template says the template is
//! invalid. A dry run goes through the API server's admission (quotas, other webhooks and
//! policies on batch/v1 CronJobs): any other failure, a refusal of something else, or no answer
//! within [`DRY_RUN_TIMEOUT`], says nothing about the template.

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::{
    CronJob as BatchCronJob, CronJobSpec as BatchCronJobSpec, JobTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::core::Status;
use kube::{Api, Client};

/// Longest wait for a dry run's answer (well within the webhook's own 4 s).
pub const DRY_RUN_TIMEOUT: Duration = Duration::from_millis(2500);

/// The name prefix of the dry-run CronJob (the API server adds five characters; the name never
/// collides with a stored CronJob, since nothing is stored).
pub const PROBE_NAME_PREFIX: &str = "kronjob-template-check-";

/// The dry-run CronJob's schedule: any valid one (only the template is judged).
pub const PROBE_SCHEDULE: &str = "0 0 1 1 *";

/// Where the template lies in a CronJob, and where the errors worth a verdict are.
pub const TEMPLATE_FIELD: &str = "spec.jobTemplate";

/// Where a workload template lies in a CronJob.
pub const WORKLOAD_FIELD: &str = "spec.workloadTemplate";

/// The CronJob's field for `field` of a workload its template makes: the spec and the labels
/// and annotations come from the template (`spec.x` is `spec.workloadTemplate.spec.x`); the
/// rest (the name, kind, status) is not the template's: `None`.
pub fn workload_field(field: &str) -> Option<String> {
    let under = |prefix: &str| {
        field
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    ["spec", "metadata.labels", "metadata.annotations"]
        .into_iter()
        .any(under)
        .then(|| format!("{WORKLOAD_FIELD}.{field}"))
}

/// What a dry run said about the template.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The API server would store a batch/v1 CronJob with this template.
    Valid,
    /// The API server refused the template as invalid (422): its `Status`, with the causes
    /// under `spec.jobTemplate` only.
    Invalid(Box<Status>),
    /// No verdict: the dry run timed out or failed otherwise (quota, another webhook or policy,
    /// permissions, an unavailable API server, a refusal of something but the template).
    Unknown(Unknown),
}

/// Why a dry run gave no verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Unknown {
    /// No answer within [`DRY_RUN_TIMEOUT`].
    Timeout,
    /// Another failure, as text.
    Failed(String),
}

impl Verdict {
    /// Every [`label`](Verdict::label), so counters can start at zero for each.
    pub const LABELS: [&'static str; 4] = ["valid", "invalid", "timeout", "error"];

    /// The verdict of a dry-run create's result: a 422 naming fields of the template is
    /// invalid, success valid, the rest unknown.
    pub fn of<T>(result: Result<T, kube::Error>) -> Self {
        let e = match result {
            Ok(_) => return Verdict::Valid,
            Err(e) => e,
        };
        match invalid(&e).and_then(template_causes) {
            Some(status) => Verdict::Invalid(Box::new(status)),
            None => Verdict::Unknown(Unknown::Failed(crate::telemetry::error_chain(&e))),
        }
    }

    /// The verdict of a dry-run create of a workload (of any kind but Job): a 422 naming fields
    /// of the template is invalid, with those causes on the CronJob's fields
    /// ([`workload_field`]); success valid; the rest unknown.
    pub fn of_workload<T>(result: Result<T, kube::Error>) -> Self {
        let e = match result {
            Ok(_) => return Verdict::Valid,
            Err(e) => e,
        };
        match invalid(&e).and_then(workload_causes) {
            Some(status) => Verdict::Invalid(Box::new(status)),
            None => Verdict::Unknown(Unknown::Failed(crate::telemetry::error_chain(&e))),
        }
    }

    /// The metric label: `valid`, `invalid`, `timeout` or `error`.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid(_) => "invalid",
            Verdict::Unknown(Unknown::Timeout) => "timeout",
            Verdict::Unknown(Unknown::Failed(_)) => "error",
        }
    }
}

/// `status` with only its causes under `spec.jobTemplate`; `None` when it names none (a policy
/// or webhook refusing batch/v1 CronJobs, not the template).
fn template_causes(status: &Status) -> Option<Status> {
    let mut status = status.clone();
    let details = status.details.as_mut()?;
    details
        .causes
        .retain(|c| c.field == TEMPLATE_FIELD || c.field.starts_with("spec.jobTemplate."));
    (!details.causes.is_empty()).then_some(status)
}

/// `status` with only its causes on fields of the workload's template, each renamed to the
/// CronJob's field ([`workload_field`]); `None` when it names none.
pub fn workload_causes(status: &Status) -> Option<Status> {
    let mut status = status.clone();
    let details = status.details.as_mut()?;
    let causes = std::mem::take(&mut details.causes);
    details.causes = causes
        .into_iter()
        .filter_map(|mut cause| {
            cause.field = workload_field(&cause.field)?;
            Some(cause)
        })
        .collect();
    (!details.causes.is_empty()).then_some(status)
}

/// The API server's refusal as invalid (422), if `error` is one: what a dry run calls
/// [`Verdict::Invalid`] when it names the template, and what a real create of a Job from an
/// invalid template gets.
pub fn invalid(error: &kube::Error) -> Option<&Status> {
    match error {
        kube::Error::Api(status) if status.code == 422 => Some(status),
        _ => None,
    }
}

/// The message of a refusal, without the refused object's name (a Job's changes with every
/// slot, a dry run's is generated): `invalid Job template: spec.jobTemplate.spec.completions:
/// Required value: ...`.
pub fn refusal_message(status: &Status) -> String {
    let detail = status
        .message
        .split_once(" is invalid: ")
        .map_or(status.message.as_str(), |(_, rest)| rest);
    format!("invalid Job template: {detail}")
}

/// The batch/v1 CronJob a template is judged in: a generated name, [`PROBE_SCHEDULE`], and the
/// template as it is (its metadata included).
pub fn probe(template: &JobTemplateSpec) -> BatchCronJob {
    BatchCronJob {
        metadata: ObjectMeta {
            generate_name: Some(PROBE_NAME_PREFIX.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(BatchCronJobSpec {
            schedule: PROBE_SCHEDULE.to_string(),
            job_template: template.clone(),
            ..BatchCronJobSpec::default()
        }),
        status: None,
    }
}

/// Something that has the API server judge a Job template; the API client in production, a
/// fake in tests.
pub trait TemplateDryRun: Send + Sync {
    /// Dry-run the create of a batch/v1 CronJob carrying `template` in `namespace`, giving up
    /// after [`DRY_RUN_TIMEOUT`].
    fn dry_run<'a>(
        &'a self,
        namespace: &'a str,
        template: &'a JobTemplateSpec,
    ) -> BoxFuture<'a, Verdict>;
}

impl TemplateDryRun for Client {
    fn dry_run<'a>(
        &'a self,
        namespace: &'a str,
        template: &'a JobTemplateSpec,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(dry_run(self, namespace, template, DRY_RUN_TIMEOUT))
    }
}

/// `POST .../batch/v1/namespaces/NS/cronjobs?dryRun=All` of [`probe`]`(template)`, within
/// `timeout`.
pub async fn dry_run(
    client: &Client,
    namespace: &str,
    template: &JobTemplateSpec,
    timeout: Duration,
) -> Verdict {
    let api: Api<BatchCronJob> = Api::namespaced(client.clone(), namespace);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match tokio::time::timeout(timeout, api.create(&params, &probe(template))).await {
        Ok(result) => Verdict::of(result),
        Err(_) => Verdict::Unknown(Unknown::Timeout),
    }
}

/// `POST` of `object` to `resource` in `namespace` with `dryRun=All`, within `timeout`: the
/// kind's own judgement of a workload template ([`Verdict::of_workload`]).
pub async fn dry_run_object(
    client: &Client,
    namespace: &str,
    resource: &ApiResource,
    object: &DynamicObject,
    timeout: Duration,
) -> Verdict {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match tokio::time::timeout(timeout, api.create(&params, object)).await {
        Ok(result) => Verdict::of_workload(result),
        Err(_) => Verdict::Unknown(Unknown::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::api_script::{Expect, mock_client};
    use http::StatusCode;
    use serde_json::{Value, json};

    fn template() -> JobTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"labels": {"team": "a"}},
            "spec": {"completionMode": "Indexed", "template": {"spec": {"containers": [{"name": "c"}]}}}
        }))
        .expect("template")
    }

    fn refusal(fields: &[&str]) -> Value {
        let causes: Vec<Value> = fields
            .iter()
            .map(|f| json!({"reason": "FieldValueRequired", "message": "Required value", "field": f}))
            .collect();
        json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
            "reason": "Invalid",
            "message": "CronJob.batch \"kronjob-template-check-x7k2p\" is invalid: spec.jobTemplate.spec.completions: Required value",
            "details": {"name": "kronjob-template-check-x7k2p", "group": "batch", "kind": "CronJob", "causes": causes}
        })
    }

    #[test]
    fn the_probe_is_a_batch_v1_cronjob_carrying_the_template_as_it_is() {
        let probe = probe(&template());
        assert_eq!(probe.metadata.name, None);
        assert_eq!(
            probe.metadata.generate_name.as_deref(),
            Some(PROBE_NAME_PREFIX)
        );
        let spec = probe.spec.expect("spec");
        assert_eq!(spec.schedule, PROBE_SCHEDULE);
        assert!(crate::schedule::Schedule::parse(PROBE_SCHEDULE, "").is_ok());
        assert_eq!(spec.job_template, template());
        assert_eq!(spec.time_zone, None);
    }

    #[tokio::test]
    async fn only_a_422_naming_the_template_is_invalid() {
        let (client, script) = mock_client();
        let path = "/apis/batch/v1/namespaces/ns/cronjobs";
        let dry = |e: Expect| e.query("&dryRun=All");
        let server = script.run(vec![
            dry(Expect::post(path)).reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                refusal(&["spec.jobTemplate.spec.completions", "metadata.labels"]),
            ),
            dry(Expect::post(path)),
            // A policy on batch/v1 CronJobs refusing something but the template.
            dry(Expect::post(path)).reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                refusal(&["metadata.labels"]),
            ),
            dry(Expect::post(path)).fails(StatusCode::FORBIDDEN, "Forbidden"),
            dry(Expect::post(path)).fails(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests"),
            dry(Expect::post(path)).fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        ]);
        let template = template();
        match client.dry_run("ns", &template).await {
            Verdict::Invalid(status) => {
                let fields: Vec<&str> = status
                    .details
                    .as_ref()
                    .expect("details")
                    .causes
                    .iter()
                    .map(|c| c.field.as_str())
                    .collect();
                assert_eq!(fields, ["spec.jobTemplate.spec.completions"]);
                assert_eq!(
                    refusal_message(&status),
                    "invalid Job template: spec.jobTemplate.spec.completions: Required value"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(client.dry_run("ns", &template).await, Verdict::Valid);
        for _ in 0..4 {
            let verdict = client.dry_run("ns", &template).await;
            assert_eq!(verdict.label(), "error", "{verdict:?}");
        }
        server.await.expect("requests as scripted");
    }

    #[test]
    fn a_workloads_fields_are_read_as_the_cronjobs() {
        let cases = [
            ("spec", Some("spec.workloadTemplate.spec")),
            ("spec.replicas", Some("spec.workloadTemplate.spec.replicas")),
            (
                "spec.replicatedJobs[0].name",
                Some("spec.workloadTemplate.spec.replicatedJobs[0].name"),
            ),
            (
                "metadata.labels",
                Some("spec.workloadTemplate.metadata.labels"),
            ),
            (
                "metadata.labels[team]",
                Some("spec.workloadTemplate.metadata.labels[team]"),
            ),
            (
                "metadata.annotations",
                Some("spec.workloadTemplate.metadata.annotations"),
            ),
            // Not the template's: the probe's name, its kind, its status, nothing at all.
            ("metadata.name", None),
            ("metadata.generateName", None),
            ("metadata", None),
            ("kind", None),
            ("status.phase", None),
            ("specification", None),
            ("metadata.labelsx", None),
            ("", None),
            ("<nil>", None),
        ];
        for (field, want) in cases {
            assert_eq!(workload_field(field).as_deref(), want, "{field:?}");
        }
    }

    fn workload_refusal(fields: &[&str]) -> Value {
        let causes: Vec<Value> = fields
            .iter()
            .map(|f| json!({"reason": "FieldValueTypeInvalid", "message": format!("Invalid value: \"two\": {f} in body must be of type integer: \"string\""), "field": f}))
            .collect();
        json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
            "reason": "Invalid",
            "message": "RayJob.ray.io \"kronjob-template-check-x7k2p\" is invalid: spec.replicas: Invalid value",
            "details": {"name": "kronjob-template-check-x7k2p", "group": "ray.io", "kind": "RayJob", "causes": causes}
        })
    }

    #[tokio::test]
    async fn a_workload_is_dry_run_as_its_kind_and_refused_on_the_cronjobs_fields() {
        let (client, script) = mock_client();
        let path = "/apis/ray.io/v1/namespaces/ns/rayjobs";
        let dry = |e: Expect| e.query("&dryRun=All");
        let server = script.run(vec![
            dry(Expect::post(path)).reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                workload_refusal(&["spec.replicas", "metadata.name", "metadata.labels"]),
            ),
            dry(Expect::post(path)),
            // A refusal of nothing the template says (a policy on the name): no verdict.
            dry(Expect::post(path)).reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                workload_refusal(&["metadata.name"]),
            ),
            dry(Expect::post(path)).fails(StatusCode::FORBIDDEN, "Forbidden"),
            dry(Expect::post(path)).fails(StatusCode::NOT_FOUND, "NotFound"),
        ]);
        let resource = ApiResource {
            group: "ray.io".into(),
            version: "v1".into(),
            api_version: "ray.io/v1".into(),
            kind: "RayJob".into(),
            plural: "rayjobs".into(),
        };
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"generateName": PROBE_NAME_PREFIX},
            "spec": {"replicas": "two"}
        }))
        .expect("object");
        let run = || dry_run_object(&client, "ns", &resource, &object, DRY_RUN_TIMEOUT);
        match run().await {
            Verdict::Invalid(status) => {
                let causes = &status.details.as_ref().expect("details").causes;
                let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
                assert_eq!(
                    fields,
                    [
                        "spec.workloadTemplate.spec.replicas",
                        "spec.workloadTemplate.metadata.labels"
                    ]
                );
                assert_eq!(
                    causes[0].message,
                    "Invalid value: \"two\": spec.replicas in body must be of type integer: \"string\"",
                    "the API server's words"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(run().await, Verdict::Valid);
        for _ in 0..3 {
            let verdict = run().await;
            assert_eq!(verdict.label(), "error", "{verdict:?}");
        }
        server.await.expect("requests as scripted");
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_is_a_timeout() {
        let (client, _script) = mock_client();
        let verdict = dry_run(&client, "ns", &template(), Duration::from_secs(2)).await;
        assert_eq!(verdict, Verdict::Unknown(Unknown::Timeout));
        assert_eq!(verdict.label(), "timeout");
        for label in [Verdict::Valid.label(), verdict.label(), "invalid", "error"] {
            assert!(Verdict::LABELS.contains(&label), "{label}");
        }
    }
}
