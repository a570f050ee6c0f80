//! How kronjob tells that a run finished, and whether it succeeded, from the object's JSON: the
//! forms a kind's rule takes ([`Rule`]), and their evaluation ([`Rule::state`]). A rule that
//! reads a field the object does not have says "not yet", never an error. Pure.

use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use super::read::{Finish, Outcome};

/// A path into an object's JSON, field by field.
pub type Path = &'static [&'static str];

/// How a kind says that a run finished and whether it succeeded.
#[derive(Debug, Clone)]
pub enum Rule {
    /// Condition `succeeded` True: succeeded; condition `failed` True: failed; dated by that
    /// condition's `lastTransitionTime` (batch/v1 Job, JobSet, TrainJob, the training-operator's
    /// jobs).
    Conditions {
        /// The condition type that says it succeeded.
        succeeded: &'static str,
        /// The condition type that says it failed.
        failed: &'static str,
    },
    /// One condition: True succeeded, False failed, Unknown or absent still running (Tekton's
    /// `Succeeded`); dated by its `lastTransitionTime`.
    Condition(&'static str),
    /// A field: one of `succeeded` succeeded, one of `failed` failed, anything else (or no
    /// value) still running (Argo's `status.phase`, Spark's `status.applicationState.state`,
    /// Volcano's `status.state.phase`).
    Field {
        /// Where the value is.
        path: Path,
        /// The values that say it succeeded.
        succeeded: &'static [&'static str],
        /// The values that say it failed.
        failed: &'static [&'static str],
    },
    /// Finished once `finished` holds one of `done`; then succeeded only if `outcome` holds one
    /// of `succeeded`, else failed (RayJob: `jobDeploymentStatus` Complete or Failed, success
    /// only with `jobStatus` SUCCEEDED).
    Then {
        /// The field that says it finished.
        finished: Path,
        /// The values that say so.
        done: &'static [&'static str],
        /// The field that says how.
        outcome: Path,
        /// The values that say it succeeded.
        succeeded: &'static [&'static str],
    },
    /// CEL expressions over `self`, from a CronJob's `spec.completion`.
    Cel(Arc<super::cel::Completion>),
}

/// What a kind's rule reads of a workload: when it started, whether, how and when it finished,
/// and when it completed (what dates a success, when the kind records it apart).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// When it started.
    pub started: Option<Timestamp>,
    /// Whether, how and when it finished.
    pub finish: Option<Finish>,
    /// When it completed, if its kind records it apart from the finish.
    pub completed: Option<Timestamp>,
}

/// Where a kind records times, besides a finishing condition's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct Times {
    /// When a run started.
    pub started: &'static [Path],
    /// When a run finished, tried in order after the finishing condition's time.
    pub finished: &'static [Path],
    /// When a run completed, kept apart: it dates a success (a Job's `completionTime`).
    pub completed: Option<Path>,
}

/// The times a CEL rule's kind is dated by: the usual fields, then the newest condition that is
/// True.
pub const USUAL_TIMES: Times = Times {
    started: &[&["status", "startTime"], &["status", "startedAt"]],
    finished: &[
        &["status", "completionTime"],
        &["status", "finishedAt"],
        &["status", "endTime"],
        &["status", "terminationTime"],
        &["status", "completedAt"],
    ],
    completed: None,
};

impl Rule {
    /// What the rule reads of `object` (the whole object's JSON: `status` and, for CEL, the
    /// rest), with the kind's `times`.
    pub fn state(&self, object: &Value, times: &Times) -> State {
        let (outcome, condition_time) = match self {
            Rule::Conditions { succeeded, failed } => {
                // The first of the two that is True, in the order the conditions are listed
                // (upstream's `IsJobFinished`).
                let finishing = conditions(object).find_map(|c| {
                    let outcome = match c.get("type").and_then(Value::as_str) {
                        Some(t) if t == *succeeded => Outcome::Complete,
                        Some(t) if t == *failed => Outcome::Failed,
                        _ => return None,
                    };
                    status_is(c, "True").then(|| (outcome, transition_time(c)))
                });
                match finishing {
                    Some((outcome, at)) => (Some(outcome), at),
                    None => (None, None),
                }
            }
            Rule::Condition(type_) => match condition(object, type_) {
                Some(c) if status_is(c, "True") => (Some(Outcome::Complete), transition_time(c)),
                Some(c) if status_is(c, "False") => (Some(Outcome::Failed), transition_time(c)),
                _ => (None, None),
            },
            Rule::Field {
                path,
                succeeded,
                failed,
            } => {
                let value = text(object, path);
                let outcome = if value.is_some_and(|v| succeeded.contains(&v)) {
                    Some(Outcome::Complete)
                } else if value.is_some_and(|v| failed.contains(&v)) {
                    Some(Outcome::Failed)
                } else {
                    None
                };
                (outcome, None)
            }
            Rule::Then {
                finished,
                done,
                outcome,
                succeeded,
            } => {
                let finished = text(object, finished).is_some_and(|v| done.contains(&v));
                let ok = text(object, outcome).is_some_and(|v| succeeded.contains(&v));
                let outcome = match (finished, ok) {
                    (false, _) => None,
                    (true, true) => Some(Outcome::Complete),
                    (true, false) => Some(Outcome::Failed),
                };
                (outcome, None)
            }
            Rule::Cel(completion) => (completion.outcome(object), newest_true_condition(object)),
        };
        let completed = times.completed.and_then(|path| time(object, path));
        let finish = outcome.map(|outcome| Finish {
            outcome,
            at: condition_time
                .or_else(|| times.finished.iter().find_map(|path| time(object, path)))
                .or(match outcome {
                    Outcome::Complete => completed,
                    Outcome::Failed => None,
                }),
        });
        State {
            started: times.started.iter().find_map(|path| time(object, path)),
            finish,
            completed,
        }
    }
}

/// The value at `path` in `object`, if there is one.
pub fn at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object, |value, field| value.get(field))
}

/// The text at `path`, if it is text.
fn text<'a>(object: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(object, path)?.as_str()
}

/// The time (RFC 3339) at `path`, if it is one.
pub fn time(object: &Value, path: &[&str]) -> Option<Timestamp> {
    text(object, path)?.parse().ok()
}

/// The entries of `status.conditions`.
fn conditions(object: &Value) -> impl Iterator<Item = &Value> {
    at(object, &["status", "conditions"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The condition of `type_` in `status.conditions`.
fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    conditions(object).find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn status_is(condition: &Value, status: &str) -> bool {
    condition.get("status").and_then(Value::as_str) == Some(status)
}

fn transition_time(condition: &Value) -> Option<Timestamp> {
    time(condition, &["lastTransitionTime"])
}

/// The latest `lastTransitionTime` of a condition whose status is True.
fn newest_true_condition(object: &Value) -> Option<Timestamp> {
    conditions(object)
        .filter(|c| status_is(c, "True"))
        .filter_map(transition_time)
        .max()
}
