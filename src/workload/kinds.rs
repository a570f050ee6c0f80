//! The table of workload kinds kronjob knows: for each, its API group, kind and resource name,
//! the rule that says when a run finished and whether it succeeded, where it records the
//! times, and where it keeps a TTL after finishing. Everything kronjob knows of a kind lives
//! here; any other kind works with the CronJob's own `spec.completion` rule (CEL). Pure.
//!
//! | kind | finished (succeeded / failed) |
//! |---|---|
//! | batch/v1 Job | condition `Complete` / `Failed` True |
//! | JobSet | condition `Completed` / `Failed` True |
//! | RayJob | `jobDeploymentStatus` Complete or Failed; succeeded only with `jobStatus` SUCCEEDED |
//! | PipelineRun, TaskRun | condition `Succeeded` True / False (Unknown: running) |
//! | Workflow | `phase` Succeeded / Failed or Error |
//! | TrainJob | condition `Complete` / `Failed` True |
//! | PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, JAXJob | condition `Succeeded` / `Failed` True |
//! | SparkApplication | `applicationState.state` COMPLETED / FAILED or SUBMISSION_FAILED |
//! | Volcano Job | `state.phase` Completed / Failed, Terminated or Aborted |

use super::rule::{Path, Rule, Times};

/// One kind kronjob knows.
#[derive(Debug, Clone)]
pub struct Row {
    /// The API group.
    pub group: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The resource name (plural), as RBAC and `--workload-kinds` name it.
    pub plural: &'static str,
    /// The version its documentation uses (for examples; any served version works).
    pub version: &'static str,
    /// When a run finished and whether it succeeded.
    pub rule: Rule,
    /// Where it records when a run started and finished.
    pub times: Times,
    /// Its own TTL after finishing (seconds), in the spec: kronjob writes the manager's default
    /// there when the template sets none, and deletes the workload when it expires. A kind
    /// without one gets the annotation `batch.kronjob.dev/ttl-seconds-after-finished`.
    pub ttl: Option<Path>,
}

const START_TIME: &[Path] = &[&["status", "startTime"]];
const COMPLETION_TIME: &[Path] = &[&["status", "completionTime"]];

/// The kinds kronjob knows, batch/v1 Job first.
pub const KINDS: &[Row] = &[
    Row {
        group: "batch",
        kind: "Job",
        plural: "jobs",
        version: "v1",
        rule: Rule::Conditions {
            succeeded: "Complete",
            failed: "Failed",
        },
        times: Times {
            started: START_TIME,
            finished: &[],
            completed: Some(&["status", "completionTime"]),
        },
        ttl: Some(&["spec", "ttlSecondsAfterFinished"]),
    },
    Row {
        group: "jobset.x-k8s.io",
        kind: "JobSet",
        plural: "jobsets",
        version: "v1alpha2",
        rule: Rule::Conditions {
            succeeded: "Completed",
            failed: "Failed",
        },
        times: Times {
            started: &[],
            finished: &[],
            completed: None,
        },
        ttl: Some(&["spec", "ttlSecondsAfterFinished"]),
    },
    Row {
        group: "ray.io",
        kind: "RayJob",
        plural: "rayjobs",
        version: "v1",
        rule: Rule::Then {
            finished: &["status", "jobDeploymentStatus"],
            done: &["Complete", "Failed"],
            outcome: &["status", "jobStatus"],
            succeeded: &["SUCCEEDED"],
        },
        times: Times {
            started: START_TIME,
            finished: &[&["status", "endTime"]],
            completed: None,
        },
        // Its own TTL works only with `shutdownAfterJobFinishes` (KubeRay refuses it
        // otherwise): kronjob's default goes in the annotation.
        ttl: None,
    },
    tekton("PipelineRun", "pipelineruns"),
    tekton("TaskRun", "taskruns"),
    Row {
        group: "argoproj.io",
        kind: "Workflow",
        plural: "workflows",
        version: "v1alpha1",
        rule: Rule::Field {
            path: &["status", "phase"],
            succeeded: &["Succeeded"],
            failed: &["Failed", "Error"],
        },
        times: Times {
            started: &[&["status", "startedAt"]],
            finished: &[&["status", "finishedAt"]],
            completed: None,
        },
        ttl: Some(&["spec", "ttlStrategy", "secondsAfterCompletion"]),
    },
    Row {
        group: "trainer.kubeflow.org",
        kind: "TrainJob",
        plural: "trainjobs",
        version: "v1alpha1",
        rule: Rule::Conditions {
            succeeded: "Complete",
            failed: "Failed",
        },
        times: Times {
            started: &[],
            finished: &[],
            completed: None,
        },
        ttl: None,
    },
    training_operator("PyTorchJob", "pytorchjobs"),
    training_operator("TFJob", "tfjobs"),
    training_operator("MPIJob", "mpijobs"),
    training_operator("XGBoostJob", "xgboostjobs"),
    training_operator("PaddleJob", "paddlejobs"),
    training_operator("JAXJob", "jaxjobs"),
    Row {
        group: "sparkoperator.k8s.io",
        kind: "SparkApplication",
        plural: "sparkapplications",
        version: "v1beta2",
        rule: Rule::Field {
            path: &["status", "applicationState", "state"],
            succeeded: &["COMPLETED"],
            failed: &["FAILED", "SUBMISSION_FAILED"],
        },
        times: Times {
            started: &[&["status", "submissionTime"]],
            finished: &[&["status", "terminationTime"]],
            completed: None,
        },
        ttl: Some(&["spec", "timeToLiveSeconds"]),
    },
    Row {
        group: "batch.volcano.sh",
        kind: "Job",
        plural: "jobs",
        version: "v1alpha1",
        rule: Rule::Field {
            path: &["status", "state", "phase"],
            succeeded: &["Completed"],
            failed: &["Failed", "Terminated", "Aborted"],
        },
        times: Times {
            started: &[],
            finished: &[&["status", "state", "lastTransitionTime"]],
            completed: None,
        },
        ttl: Some(&["spec", "ttlSecondsAfterFinished"]),
    },
];

const fn tekton(kind: &'static str, plural: &'static str) -> Row {
    Row {
        group: "tekton.dev",
        kind,
        plural,
        version: "v1",
        rule: Rule::Condition("Succeeded"),
        times: Times {
            started: START_TIME,
            finished: COMPLETION_TIME,
            completed: None,
        },
        ttl: None,
    }
}

const fn training_operator(kind: &'static str, plural: &'static str) -> Row {
    Row {
        group: "kubeflow.org",
        kind,
        plural,
        version: "v1",
        rule: Rule::Conditions {
            succeeded: "Succeeded",
            failed: "Failed",
        },
        times: Times {
            started: START_TIME,
            finished: COMPLETION_TIME,
            completed: None,
        },
        ttl: Some(&["spec", "runPolicy", "ttlSecondsAfterFinished"]),
    }
}

/// The row of `kind` in `group`, if kronjob knows it.
pub fn known(group: &str, kind: &str) -> Option<&'static Row> {
    KINDS.iter().find(|r| r.group == group && r.kind == kind)
}

/// The row of batch/v1 Job.
pub fn job() -> &'static Row {
    &KINDS[0]
}

/// The row of a resource named `plural.group` (as `--workload-kinds` names it).
pub fn by_resource(plural: &str, group: &str) -> Option<&'static Row> {
    KINDS
        .iter()
        .find(|r| r.group == group && r.plural == plural)
}

#[cfg(test)]
mod tests;
