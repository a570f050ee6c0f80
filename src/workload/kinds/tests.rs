//! Each kind's rule over statuses as its project documents them.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::testing::fixtures::{JobFixture, job, t};
use crate::workload::Workload;
use crate::workload::cel::Completion;
use crate::workload::read::{Finish, Outcome};
use crate::workload::rule::{State, USUAL_TIMES};

const AT: &str = "2026-11-29T10:00:00Z";
const LATER: &str = "2026-11-29T10:05:00Z";

fn ok(at: Option<&str>) -> Option<Finish> {
    Some(Finish {
        outcome: Outcome::Complete,
        at: at.map(t),
    })
}

fn failed(at: Option<&str>) -> Option<Finish> {
    Some(Finish {
        outcome: Outcome::Failed,
        at: at.map(t),
    })
}

fn condition(type_: &str, status: &str) -> Value {
    json!({"type": type_, "status": status, "lastTransitionTime": AT})
}

fn with_conditions(conditions: Vec<Value>) -> Value {
    json!({"status": {"conditions": conditions}})
}

/// (what the project documents, the object, the finish the rule reads).
type Case = (&'static str, Value, Option<Finish>);

fn check(group: &str, kind: &str, cases: Vec<Case>) {
    let row = known(group, kind).unwrap_or_else(|| panic!("{group} {kind} is in the table"));
    for (name, object, want) in cases {
        let state = row.rule.state(&object, &row.times);
        assert_eq!(state.finish, want, "{kind}: {name}");
    }
}

fn with_job_conditions(conditions: &[(&str, Option<&str>)]) -> k8s_openapi::api::batch::v1::Job {
    use k8s_openapi::api::batch::v1::JobCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let mut job = job("conditions");
    job.status.get_or_insert_default().conditions = Some(
        conditions
            .iter()
            .map(|(type_, at)| JobCondition {
                type_: (*type_).into(),
                status: "True".into(),
                last_transition_time: at.map(|at| Time(t(at))),
                ..Default::default()
            })
            .collect(),
    );
    job
}

/// The table's Job row reads what the typed reading of a Job ([`Workload::of_job`], what the
/// caches use) reads.
#[test]
fn a_job_reads_as_its_typed_definition_says() {
    let jobs = [
        job("running").started_at(AT),
        job("done").started_at(AT).complete_at(LATER),
        job("failed").failed_at(LATER),
        with_job_conditions(&[
            ("SuccessCriteriaMet", Some(AT)),
            ("FailureTarget", Some(AT)),
        ])
        .completion_time(AT),
        with_job_conditions(&[("Complete", None)]).completion_time(AT),
        with_job_conditions(&[("Failed", None)]).completion_time(AT),
    ];
    for job in jobs {
        let object = serde_json::to_value(&job).expect("json");
        let typed = Workload::of_job(&job);
        let row = super::job();
        let read = row.rule.state(&object, &row.times);
        let want = State {
            started: typed.started,
            finish: typed.finish,
            completed: typed.completed,
        };
        assert_eq!(read, want, "{:?}", job.metadata.name);
    }
}

#[test]
fn jobset() {
    check(
        "jobset.x-k8s.io",
        "JobSet",
        vec![
            ("no status yet", json!({}), None),
            (
                "suspended (Kueue) is running",
                with_conditions(vec![condition("Suspended", "True")]),
                None,
            ),
            (
                "Completed",
                with_conditions(vec![condition("Completed", "True")]),
                ok(Some(AT)),
            ),
            (
                "Failed",
                with_conditions(vec![condition("Failed", "True")]),
                failed(Some(AT)),
            ),
            (
                "Completed=False is not finished",
                with_conditions(vec![condition("Completed", "False")]),
                None,
            ),
        ],
    );
}

#[test]
fn rayjob() {
    let ray = |deployment: &str, job: &str| json!({"status": {"jobDeploymentStatus": deployment, "jobStatus": job, "endTime": LATER}});
    check(
        "ray.io",
        "RayJob",
        vec![
            ("no status yet", json!({}), None),
            ("running", ray("Running", "RUNNING"), None),
            ("suspended", ray("Suspended", ""), None),
            (
                "Complete with SUCCEEDED",
                ray("Complete", "SUCCEEDED"),
                ok(Some(LATER)),
            ),
            (
                "Complete with FAILED is a failure",
                ray("Complete", "FAILED"),
                failed(Some(LATER)),
            ),
            (
                "Complete with STOPPED is a failure",
                ray("Complete", "STOPPED"),
                failed(Some(LATER)),
            ),
            (
                "Failed",
                json!({"status": {"jobDeploymentStatus": "Failed"}}),
                failed(None),
            ),
        ],
    );
}

#[test]
fn tekton_runs() {
    let succeeded = |status: &str, reason: &str| {
        json!({"status": {
            "conditions": [{"type": "Succeeded", "status": status, "reason": reason, "lastTransitionTime": AT}],
            "completionTime": LATER,
        }})
    };
    for kind in ["PipelineRun", "TaskRun"] {
        check(
            "tekton.dev",
            kind,
            vec![
                ("no status yet", json!({}), None),
                ("Unknown is running", succeeded("Unknown", "Running"), None),
                ("True", succeeded("True", "Succeeded"), ok(Some(AT))),
                (
                    "True with skipped tasks",
                    succeeded("True", "Completed"),
                    ok(Some(AT)),
                ),
                (
                    "False: timed out",
                    succeeded("False", "PipelineRunTimeout"),
                    failed(Some(AT)),
                ),
                (
                    "False: cancelled",
                    succeeded("False", "Cancelled"),
                    failed(Some(AT)),
                ),
            ],
        );
    }
}

#[test]
fn argo_workflow() {
    let phase = |phase: &str| json!({"status": {"phase": phase, "finishedAt": LATER}});
    check(
        "argoproj.io",
        "Workflow",
        vec![
            ("pending", phase("Pending"), None),
            ("running", phase("Running"), None),
            ("succeeded", phase("Succeeded"), ok(Some(LATER))),
            ("failed", phase("Failed"), failed(Some(LATER))),
            ("error", phase("Error"), failed(Some(LATER))),
        ],
    );
}

#[test]
fn trainjob_and_the_training_operator() {
    check(
        "trainer.kubeflow.org",
        "TrainJob",
        vec![
            (
                "created",
                with_conditions(vec![condition("Created", "True")]),
                None,
            ),
            (
                "Complete",
                with_conditions(vec![condition("Complete", "True")]),
                ok(Some(AT)),
            ),
            (
                "Failed",
                with_conditions(vec![condition("Failed", "True")]),
                failed(Some(AT)),
            ),
        ],
    );
    for kind in [
        "PyTorchJob",
        "TFJob",
        "MPIJob",
        "XGBoostJob",
        "PaddleJob",
        "JAXJob",
    ] {
        check(
            "kubeflow.org",
            kind,
            vec![
                (
                    "running",
                    with_conditions(vec![
                        condition("Created", "True"),
                        condition("Running", "True"),
                    ]),
                    None,
                ),
                (
                    "restarting",
                    with_conditions(vec![condition("Restarting", "True")]),
                    None,
                ),
                (
                    "succeeded",
                    with_conditions(vec![
                        condition("Running", "False"),
                        condition("Succeeded", "True"),
                    ]),
                    ok(Some(AT)),
                ),
                (
                    "failed",
                    with_conditions(vec![condition("Failed", "True")]),
                    failed(Some(AT)),
                ),
            ],
        );
    }
}

#[test]
fn spark_application() {
    let state = |state: &str| json!({"status": {"applicationState": {"state": state}, "terminationTime": LATER}});
    check(
        "sparkoperator.k8s.io",
        "SparkApplication",
        vec![
            ("submitted", state("SUBMITTED"), None),
            ("running", state("RUNNING"), None),
            ("succeeding is not done yet", state("SUCCEEDING"), None),
            ("pending a rerun", state("PENDING_RERUN"), None),
            ("completed", state("COMPLETED"), ok(Some(LATER))),
            ("failed", state("FAILED"), failed(Some(LATER))),
            (
                "submission failed",
                state("SUBMISSION_FAILED"),
                failed(Some(LATER)),
            ),
        ],
    );
}

#[test]
fn volcano_job() {
    let phase =
        |phase: &str| json!({"status": {"state": {"phase": phase, "lastTransitionTime": AT}}});
    check(
        "batch.volcano.sh",
        "Job",
        vec![
            ("pending", phase("Pending"), None),
            ("running", phase("Running"), None),
            ("completing", phase("Completing"), None),
            ("completed", phase("Completed"), ok(Some(AT))),
            ("failed", phase("Failed"), failed(Some(AT))),
            ("terminated", phase("Terminated"), failed(Some(AT))),
            ("aborted", phase("Aborted"), failed(Some(AT))),
        ],
    );
}

#[test]
fn a_cel_rule_on_a_missing_field_is_not_yet() {
    let completion = Completion::compile(
        "self.status.result == 'ok'",
        "self.status.result == 'error'",
    )
    .expect("valid");
    let rule = Rule::Cel(Arc::new(completion));
    let state = |object: Value| rule.state(&object, &USUAL_TIMES).finish;
    assert_eq!(state(json!({})), None, "no status");
    assert_eq!(
        state(json!({"status": {"other": 1}})),
        None,
        "no such field"
    );
    assert_eq!(
        state(json!({"status": {"result": "ok", "completionTime": LATER}})),
        ok(Some(LATER))
    );
    assert_eq!(
        state(json!({"status": {"result": "error",
            "conditions": [condition("Ready", "False"), condition("Done", "True")]}})),
        failed(Some(AT)),
        "dated by the newest condition that is True"
    );
    assert_eq!(
        state(json!({"status": {"result": "error"}})),
        failed(None),
        "no time recorded"
    );
}

#[test]
fn rows_are_found_by_kind_and_by_resource() {
    assert_eq!(known("batch", "Job").map(|r| r.plural), Some("jobs"));
    assert_eq!(
        known("batch.volcano.sh", "Job").map(|r| r.version),
        Some("v1alpha1"),
        "a kind of the same name in another group is another row"
    );
    assert_eq!(
        by_resource("rayjobs", "ray.io").map(|r| r.kind),
        Some("RayJob")
    );
    assert!(known("example.com", "Thing").is_none());
    let mut seen = std::collections::HashSet::new();
    for row in KINDS {
        assert!(
            seen.insert((row.group, row.kind)),
            "{} {} twice",
            row.group,
            row.kind
        );
        assert!(
            seen.insert((row.group, row.plural)),
            "{} {} twice",
            row.group,
            row.plural
        );
    }
}
