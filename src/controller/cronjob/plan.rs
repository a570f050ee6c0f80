//! The decision step: from a CronJob, its Jobs and the time, what to do. Pure: no API calls,
//! no clock; every upstream rule that does not need the API lives here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use kube::runtime::events::EventType;

use super::status::{self, CONDITION_READY, Finished, reason};
use crate::api::{
    ANNOTATION_INSTANTIATE, ANNOTATION_SCHEDULED_AT, ConcurrencyPolicy, CronJob, CronJobStatus,
    LABEL_CRONJOB,
};
use crate::controller::index::controller_uid;
use crate::schedule::{self, Schedule, SlotError, SlotQuery};

/// Padding added to every requeue so the next slot is surely due when we wake (NTP skew).
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);
/// Longest requeue: kube-runtime's scheduler clamps (and its timer wheel cannot hold) more.
pub const MAX_REQUEUE: Duration = Duration::from_secs(180 * 24 * 3600);
/// Slots missed beyond this give a `TooManyMissedTimes` warning.
pub const MAX_MISSED: u64 = 100;

/// Event reasons, as upstream.
pub mod events {
    /// A Job was created.
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    /// An active Job finished.
    pub const SAW_COMPLETED_JOB: &str = "SawCompletedJob";
    /// An active Job no longer exists.
    pub const MISSING_JOB: &str = "MissingJob";
    /// An owned, running Job we did not create (and that is not a manual run).
    pub const UNEXPECTED_JOB: &str = "UnexpectedJob";
    /// A Job was deleted (history or Replace).
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    /// Deleting a Job failed.
    pub const FAILED_DELETE: &str = "FailedDelete";
    /// Creating a Job failed (including a same-named Job we do not own).
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// Forbid: a slot was skipped because a Job is still active.
    pub const JOB_ALREADY_ACTIVE: &str = "JobAlreadyActive";
    /// A slot passed its startingDeadlineSeconds without a Job.
    pub const MISS_SCHEDULE: &str = "MissSchedule";
    /// More than 100 slots were missed; the latest still runs.
    pub const TOO_MANY_MISSED_TIMES: &str = "TooManyMissedTimes";
    /// The schedule does not parse or never fires.
    pub const INVALID_SCHEDULE: &str = "InvalidSchedule";
    /// The time zone is unknown.
    pub const UNKNOWN_TIME_ZONE: &str = "UnknownTimeZone";
}

/// Manager settings the plan depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanConfig {
    /// `ttlSecondsAfterFinished` for Jobs whose template sets none (`--default-job-ttl`).
    pub default_job_ttl: Option<i32>,
}

/// Why a Job is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Beyond successfulJobsHistoryLimit / failedJobsHistoryLimit.
    History,
    /// concurrencyPolicy Replace, before creating the new Job.
    Replace,
}

/// One step for the apply stage, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this Job; on success apply adds it to `status.active`.
    CreateJob(Box<Job>),
    /// Delete a Job (background propagation, UID precondition).
    DeleteJob {
        /// Job name.
        name: String,
        /// Job UID.
        uid: Option<String>,
        /// Why.
        reason: DeleteReason,
    },
    /// Publish an Event on the CronJob.
    Event {
        /// Normal or Warning.
        type_: EventType,
        /// Upstream reason, see [`events`].
        reason: &'static str,
        /// Human-readable note.
        note: String,
    },
}

/// The outcome of [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Steps, in order: active-list events, history deletes, then scheduling.
    pub actions: Vec<Action>,
    /// The status to write, assuming every action succeeds (created Jobs are added to
    /// `active` by apply, which knows their UID).
    pub status: CronJobStatus,
    /// When to look again; `None` waits for a change (suspended, invalid spec, never fires).
    pub requeue_after: Option<Duration>,
    /// The slot a `CreateJob` is for, if any.
    pub scheduled: Option<Timestamp>,
}

impl Plan {
    /// The Jobs this plan creates.
    pub fn creates(&self) -> impl Iterator<Item = &Job> {
        self.actions.iter().filter_map(|a| match a {
            Action::CreateJob(j) => Some(j.as_ref()),
            _ => None,
        })
    }

    /// The Jobs this plan deletes, by name.
    pub fn deletes(&self) -> impl Iterator<Item = (&str, DeleteReason)> {
        self.actions.iter().filter_map(|a| match a {
            Action::DeleteJob { name, reason, .. } => Some((name.as_str(), *reason)),
            _ => None,
        })
    }

    /// The (type, reason) of every planned event.
    pub fn events(&self) -> impl Iterator<Item = (EventType, &'static str)> {
        self.actions.iter().filter_map(|a| match a {
            Action::Event { type_, reason, .. } => Some((*type_, *reason)),
            _ => None,
        })
    }
}

/// Whether a Job carries the marks of kronjob (a scheduled run or `kronjob trigger`).
fn created_by_kronjob(job: &Job) -> bool {
    job.metadata.annotations.as_ref().is_some_and(|a| {
        a.contains_key(ANNOTATION_SCHEDULED_AT)
            || a.get(ANNOTATION_INSTANTIATE).map(String::as_str) == Some("manual")
    })
}

fn event(type_: EventType, reason: &'static str, note: String) -> Action {
    Action::Event {
        type_,
        reason,
        note,
    }
}

/// Build a Job from the CronJob's template: labels and annotations of
/// `jobTemplate.metadata` plus [`LABEL_CRONJOB`] and `extra_annotation`, a controller owner
/// reference (`blockOwnerDeletion: true`), the template's spec, and `default_ttl` when the
/// template sets no `ttlSecondsAfterFinished`. `None` when the CronJob has no name or UID
/// (never the case for an object read from the API).
pub fn job_from_template(
    cj: &CronJob,
    name: String,
    extra_annotation: (&str, String),
    default_ttl: Option<i32>,
) -> Option<Job> {
    let mut owner = cj.controller_owner_ref(&())?;
    owner.block_owner_deletion = Some(true);
    let template = &cj.spec.job_template;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = meta.labels.unwrap_or_default();
    labels.insert(LABEL_CRONJOB.to_string(), cj.metadata.name.clone()?);
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(extra_annotation.0.to_string(), extra_annotation.1);
    let mut spec = template.spec.clone().unwrap_or_default();
    if spec.ttl_seconds_after_finished.is_none() {
        spec.ttl_seconds_after_finished = default_ttl;
    }
    Some(Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: cj.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The Job for the slot `scheduled`: named `<cronjob>-<unix minutes>`, annotated with the
/// scheduled time in the CronJob's zone.
pub fn job_for_slot(
    cj: &CronJob,
    scheduled: Timestamp,
    tz: &TimeZone,
    cfg: &PlanConfig,
) -> Option<Job> {
    let name = schedule::job_name(cj.metadata.name.as_deref()?, scheduled);
    job_from_template(
        cj,
        name,
        (
            ANNOTATION_SCHEDULED_AT,
            schedule::scheduled_at(scheduled, tz),
        ),
        cfg.default_job_ttl,
    )
}

/// Requeue delay for waking at `next` (+100 ms), clamped to [`MAX_REQUEUE`].
pub fn requeue_for(next: Timestamp, now: Timestamp) -> Duration {
    let d = next.duration_since(now);
    let d = Duration::try_from(d).unwrap_or(Duration::ZERO);
    (d + NEXT_SCHEDULE_DELTA).min(MAX_REQUEUE)
}

/// Order for history trimming: oldest first by `status.startTime`, Jobs without one last
/// (newest), ties by name.
fn history_key(job: &Job) -> (bool, Option<Timestamp>, String) {
    let start = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    (
        start.is_none(),
        start,
        job.metadata.name.clone().unwrap_or_default(),
    )
}

/// Decide what to do for `cj` given its Jobs at `now`.
pub fn plan(cj: &CronJob, jobs: &[Arc<Job>], now: Timestamp, cfg: &PlanConfig) -> Plan {
    let old = cj.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let mut actions = Vec::new();
    let uid = cj.metadata.uid.as_deref().unwrap_or_default();
    let mut owned: Vec<&Job> = jobs
        .iter()
        .map(|j| j.as_ref())
        .filter(|j| !uid.is_empty() && controller_uid(j) == Some(uid))
        .collect();
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let by_uid = |u: &Option<String>| {
        owned
            .iter()
            .copied()
            .find(|j| u.is_some() && j.metadata.uid == *u)
    };

    // Active list: drop finished and vanished Jobs, adopt running owned ones.
    let mut active = Vec::new();
    for r in &old.active {
        let name = r.name.clone().unwrap_or_default();
        match by_uid(&r.uid) {
            None => actions.push(event(
                EventType::Normal,
                events::MISSING_JOB,
                format!("Active job went missing: {name}"),
            )),
            Some(job) => match status::finished(job) {
                Some(how) => actions.push(event(
                    EventType::Normal,
                    events::SAW_COMPLETED_JOB,
                    format!("Saw completed job: {name}, condition: {how:?}"),
                )),
                None => active.push(status::job_ref(job)),
            },
        }
    }
    for job in &owned {
        let listed = active
            .iter()
            .any(|r| r.uid.is_some() && r.uid == job.metadata.uid);
        if listed || status::finished(job).is_some() {
            continue;
        }
        if !created_by_kronjob(job) {
            actions.push(event(
                EventType::Warning,
                events::UNEXPECTED_JOB,
                format!(
                    "Saw a job that the controller did not create or forgot: {}",
                    job.metadata.name.as_deref().unwrap_or_default()
                ),
            ));
        }
        active.push(status::job_ref(job));
    }

    // Last success and failure: over every owned Job, manual runs included; never lowered.
    for job in &owned {
        let (Some(how), Some(at)) = (status::finished(job), status::finished_at(job)) else {
            continue;
        };
        let slot = match how {
            Finished::Complete => &mut status.last_successful_time,
            Finished::Failed => &mut status.last_failure_time,
        };
        if slot.as_ref().is_none_or(|t| t.0 < at) {
            *slot = Some(Time(at));
        }
    }

    // History: oldest finished Jobs beyond the limits.
    for (how, limit) in [
        (Finished::Complete, cj.spec.successful_history_limit()),
        (Finished::Failed, cj.spec.failed_history_limit()),
    ] {
        let mut done: Vec<&Job> = owned
            .iter()
            .copied()
            .filter(|j| status::finished(j) == Some(how) && j.metadata.deletion_timestamp.is_none())
            .collect();
        let keep = usize::try_from(limit.max(0)).unwrap_or(0);
        if done.len() <= keep {
            continue;
        }
        done.sort_by_key(|j| history_key(j));
        let excess = done.len() - keep;
        for job in done.into_iter().take(excess) {
            actions.push(Action::DeleteJob {
                name: job.metadata.name.clone().unwrap_or_default(),
                uid: job.metadata.uid.clone(),
                reason: DeleteReason::History,
            });
        }
    }

    let generation = cj.metadata.generation;
    let mut requeue_after = None;
    let mut scheduled = None;
    let ready = |status: &mut CronJobStatus,
                 actions: &mut Vec<Action>,
                 ok: bool,
                 why: &'static str,
                 message: String,
                 warning: Option<&'static str>| {
        if let Some(ev) = warning {
            // Warn once per distinct problem, not on every reconcile it persists.
            let same = old
                .conditions
                .iter()
                .any(|c| c.type_ == CONDITION_READY && c.reason == why && c.message == message);
            if !same {
                actions.push(event(EventType::Warning, ev, message.clone()));
            }
        }
        status::set_condition(
            &mut status.conditions,
            CONDITION_READY,
            ok,
            why,
            message,
            generation,
            now,
        );
    };

    let name = cj.metadata.name.clone().unwrap_or_default();
    let namespace = cj.metadata.namespace.clone().unwrap_or_default();
    if cj.metadata.deletion_timestamp.is_some() {
        status.next_schedule_time = None;
        ready(
            &mut status,
            &mut actions,
            false,
            reason::TERMINATING,
            "the CronJob is being deleted".into(),
            None,
        );
    } else {
        match schedule_inputs(cj, &namespace, &name) {
            Err((why, ev, message)) => {
                status.next_schedule_time = None;
                ready(&mut status, &mut actions, false, why, message, Some(ev));
            }
            Ok((sched, tz)) if cj.spec.is_suspended() => {
                let _ = (sched, tz);
                status.next_schedule_time = None;
                ready(
                    &mut status,
                    &mut actions,
                    false,
                    reason::SUSPENDED,
                    "spec.suspend is true: no new Jobs are created".into(),
                    None,
                );
            }
            Ok((sched, tz)) => {
                let query = SlotQuery {
                    schedule: &sched,
                    tz: &tz,
                    last_schedule_time: old.last_schedule_time.as_ref().map(|t| t.0),
                    creation_timestamp: cj
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map_or(now, |t| t.0),
                    starting_deadline_seconds: cj.spec.starting_deadline_seconds,
                    now,
                };
                match schedule::slots(&query) {
                    Err(e) => {
                        let (why, ev) = match e {
                            SlotError::NeverFires(_) => {
                                (reason::INVALID_SCHEDULE, events::INVALID_SCHEDULE)
                            }
                            SlotError::NegativeDeadline(_) => {
                                (reason::INVALID_SPEC, events::INVALID_SCHEDULE)
                            }
                        };
                        status.next_schedule_time = None;
                        ready(
                            &mut status,
                            &mut actions,
                            false,
                            why,
                            format!("invalid schedule: {:?} : {e}", cj.spec.schedule),
                            Some(ev),
                        );
                    }
                    Ok(slots) => {
                        status.next_schedule_time = slots.next.map(Time);
                        requeue_after = slots.next.map(|n| requeue_for(n, now));
                        ready(
                            &mut status,
                            &mut actions,
                            true,
                            reason::SCHEDULED,
                            format!(
                                "schedule {:?} in time zone {}",
                                cj.spec.schedule,
                                tz.iana_name().unwrap_or("UTC")
                            ),
                            None,
                        );
                        match slots.due {
                            Some(due) => {
                                scheduled = schedule_slot(
                                    cj,
                                    &owned,
                                    &mut active,
                                    &mut status,
                                    &mut actions,
                                    due,
                                    slots.missed,
                                    &tz,
                                    cfg,
                                );
                            }
                            None if cj.spec.starting_deadline_seconds.is_some() => {
                                let unbounded = SlotQuery {
                                    starting_deadline_seconds: None,
                                    ..query
                                };
                                if let Ok(s) = schedule::slots(&unbounded)
                                    && let Some(missed) = s.due
                                {
                                    actions.push(event(
                                        EventType::Warning,
                                        events::MISS_SCHEDULE,
                                        format!(
                                            "Missed scheduled time to start a job: {}",
                                            schedule::scheduled_at(missed, &tz)
                                        ),
                                    ));
                                }
                            }
                            None => {}
                        }
                    }
                }
            }
        }
    }

    status.active = active;
    status.active_count = i32::try_from(status.active.len()).unwrap_or(i32::MAX);
    status.observed_generation = generation;
    Plan {
        actions,
        status,
        requeue_after,
        scheduled,
    }
}

type SpecProblem = (&'static str, &'static str, String);

fn schedule_inputs(
    cj: &CronJob,
    namespace: &str,
    name: &str,
) -> Result<(Schedule, TimeZone), SpecProblem> {
    let tz = schedule::time_zone(cj.spec.time_zone.as_deref()).map_err(|e| {
        (
            reason::UNKNOWN_TIME_ZONE,
            events::UNKNOWN_TIME_ZONE,
            format!(
                "invalid timeZone: {:?}: {e}",
                cj.spec.time_zone.as_deref().unwrap_or_default()
            ),
        )
    })?;
    let sched =
        Schedule::parse(&cj.spec.schedule, &format!("{namespace}/{name}")).map_err(|e| {
            (
                reason::INVALID_SCHEDULE,
                events::INVALID_SCHEDULE,
                format!("invalid schedule: {:?} : {e}", cj.spec.schedule),
            )
        })?;
    Ok((sched, tz))
}

/// The slot `due` is due: apply concurrency policy and plan the Job. Returns the slot when a
/// Job is to be created.
#[allow(clippy::too_many_arguments)]
fn schedule_slot(
    cj: &CronJob,
    owned: &[&Job],
    active: &mut Vec<k8s_openapi::api::core::v1::ObjectReference>,
    status: &mut CronJobStatus,
    actions: &mut Vec<Action>,
    due: Timestamp,
    missed: u64,
    tz: &TimeZone,
    cfg: &PlanConfig,
) -> Option<Timestamp> {
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    let job_name = schedule::job_name(name, due);
    // Already processed (e.g. created before a restart that lost the status write): the Job
    // is ours and in the cache; record the slot, create nothing.
    if owned
        .iter()
        .any(|j| j.metadata.name.as_deref() == Some(job_name.as_str()))
    {
        status.last_schedule_time = Some(Time(due));
        return None;
    }
    if missed > MAX_MISSED {
        actions.push(event(
            EventType::Warning,
            events::TOO_MANY_MISSED_TIMES,
            "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
        ));
    }
    match cj.spec.concurrency_policy {
        ConcurrencyPolicy::Forbid if !active.is_empty() => {
            actions.push(event(
                EventType::Normal,
                events::JOB_ALREADY_ACTIVE,
                "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
            ));
            return None;
        }
        ConcurrencyPolicy::Replace => {
            for r in active.drain(..) {
                actions.push(Action::DeleteJob {
                    name: r.name.unwrap_or_default(),
                    uid: r.uid,
                    reason: DeleteReason::Replace,
                });
            }
        }
        _ => {}
    }
    let job = job_for_slot(cj, due, tz, cfg)?;
    actions.push(Action::CreateJob(Box::new(job)));
    status.last_schedule_time = Some(Time(due));
    Some(due)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
