//! The Job template checked exactly as the API server checks it, without re-implementing its
//! rules: a server-side dry run (`dryRun=All`) of the Job the template makes. Used by the
//! admission webhook (before a CronJob is stored) and by the reconciler (once per generation,
//! when the webhook is off).
//!
//! Only an answer of 422 (Invalid) says the template is invalid. A dry run goes through the
//! API server's admission (quotas, other webhooks): any other failure, or no answer within
//! [`DRY_RUN_TIMEOUT`], says nothing about the template.

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use kube::api::PostParams;
use kube::core::Status;
use kube::{Api, Client};

/// Longest wait for a dry run's answer (well within the webhook's own 4 s).
pub const DRY_RUN_TIMEOUT: Duration = Duration::from_millis(2500);

/// What a dry run said about the template.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The API server would create the Job.
    Valid,
    /// The API server refused the Job as invalid (422): its `Status`, causes included.
    Invalid(Box<Status>),
    /// No verdict: the dry run timed out or failed otherwise (quota, another webhook,
    /// permissions, an unavailable API server).
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

    /// The verdict of a create's result: 422 is invalid, success valid, the rest unknown.
    pub fn of<T>(result: Result<T, kube::Error>) -> Self {
        match result {
            Ok(_) => Verdict::Valid,
            Err(e) => match invalid(&e) {
                Some(status) => Verdict::Invalid(Box::new(status.clone())),
                None => Verdict::Unknown(Unknown::Failed(crate::telemetry::error_chain(&e))),
            },
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

/// The API server's refusal of a Job as invalid (422), if `error` is one: what a dry run calls
/// [`Verdict::Invalid`], and what a real create of a Job from an invalid template gets.
pub fn invalid(error: &kube::Error) -> Option<&Status> {
    match error {
        kube::Error::Api(status) if status.code == 422 => Some(status),
        _ => None,
    }
}

/// The message of a refusal, without the Job's name (it changes with every slot): `invalid Job
/// template: spec.template.spec.containers[0].image: Required value`.
pub fn refusal_message(status: &Status) -> String {
    let detail = status
        .message
        .split_once(" is invalid: ")
        .map_or(status.message.as_str(), |(_, rest)| rest);
    format!("invalid Job template: {detail}")
}

/// Something that dry-runs the create of a Job; the API client in production, a fake in tests.
pub trait JobDryRun: Send + Sync {
    /// Dry-run the create of `job` in `namespace`, giving up after [`DRY_RUN_TIMEOUT`].
    fn dry_run<'a>(&'a self, namespace: &'a str, job: &'a Job) -> BoxFuture<'a, Verdict>;
}

impl JobDryRun for Client {
    fn dry_run<'a>(&'a self, namespace: &'a str, job: &'a Job) -> BoxFuture<'a, Verdict> {
        Box::pin(dry_run(self, namespace, job, DRY_RUN_TIMEOUT))
    }
}

/// `POST .../jobs?dryRun=All` of `job`, within `timeout`.
pub async fn dry_run(client: &Client, namespace: &str, job: &Job, timeout: Duration) -> Verdict {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match tokio::time::timeout(timeout, api.create(&params, job)).await {
        Ok(result) => Verdict::of(result),
        Err(_) => Verdict::Unknown(Unknown::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::api_script::{Expect, mock_client};
    use http::StatusCode;
    use serde_json::json;

    fn job() -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "cj-1", "namespace": "ns"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}
        }))
        .expect("job")
    }

    #[tokio::test]
    async fn only_422_is_invalid() {
        let invalid = json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422,
            "reason": "Invalid", "message": "Job.batch \"cj-1\" is invalid: spec.template.spec.containers[0].image: Required value",
            "details": {"name": "cj-1", "group": "batch", "kind": "Job", "causes": [
                {"reason": "FieldValueRequired", "message": "Required value",
                 "field": "spec.template.spec.containers[0].image"}]}
        });
        let (client, script) = mock_client();
        let path = "/apis/batch/v1/namespaces/ns/jobs";
        let server = script.run(vec![
            Expect::post(path)
                .query("&dryRun=All")
                .reply(StatusCode::UNPROCESSABLE_ENTITY, invalid),
            Expect::post(path).query("&dryRun=All"),
            Expect::post(path)
                .query("&dryRun=All")
                .fails(StatusCode::FORBIDDEN, "Forbidden"),
            Expect::post(path)
                .query("&dryRun=All")
                .fails(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests"),
            Expect::post(path)
                .query("&dryRun=All")
                .fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        ]);
        let job = job();
        match client.dry_run("ns", &job).await {
            Verdict::Invalid(status) => {
                let causes = status.details.expect("details").causes;
                assert_eq!(causes[0].field, "spec.template.spec.containers[0].image");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(client.dry_run("ns", &job).await, Verdict::Valid);
        for _ in 0..3 {
            let verdict = client.dry_run("ns", &job).await;
            assert_eq!(verdict.label(), "error", "{verdict:?}");
        }
        server.await.expect("requests as scripted");
    }

    #[tokio::test(start_paused = true)]
    async fn no_answer_is_a_timeout() {
        let (client, _script) = mock_client();
        let verdict = dry_run(&client, "ns", &job(), Duration::from_secs(2)).await;
        assert_eq!(verdict, Verdict::Unknown(Unknown::Timeout));
        assert_eq!(verdict.label(), "timeout");
        for label in [Verdict::Valid.label(), verdict.label(), "invalid", "error"] {
            assert!(Verdict::LABELS.contains(&label), "{label}");
        }
    }
}
