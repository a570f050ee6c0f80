//! The decision step: from a CronJob, its Jobs and the time, what to do. Pure: no API calls,
//! no clock; every upstream rule that does not need the API lives here, in three named steps:
//!
//! 1. [`active`]: which Jobs are running (drop finished and vanished ones, adopt running ones);
//! 2. [`history`]: the last success and failure, and the finished Jobs beyond the limits;
//!    [`failures`]: scheduled Jobs that failed in a row, and the failure policy's suspension;
//! 3. [`scheduling`]: the time zone, the schedules, suspension, the due slot and the
//!    concurrency policy;
//!    [`queue`]: the Enqueue policy's queue of slots waiting for the running Job;
//! 4. [`manual`]: a run asked for with `kubectl kronjob trigger`;
//! 5. [`backfill`]: the past slots of a range that never ran (`kubectl kronjob backfill`);
//!
//! and [`template`], what the status records of the Job template's check (a refusal by the
//! API server stops scheduling until the spec changes).
//! [`plan`] composes them into a [`Plan`]; the Jobs themselves are built by [`crate::job`].

pub mod active;
pub mod backfill;
pub mod failures;
pub mod history;
pub mod manual;
pub mod queue;
pub mod scheduling;
pub mod template;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::events::EventType;

pub use scheduling::{MAX_MISSED, NEXT_SCHEDULE_DELTA, Readiness, requeue_for};
pub use template::{TemplateCheck, recorded_template_check, refuse_template};

use super::status::{self, CONDITION_READY};
use crate::api::{CronJob, CronJobStatus};
use crate::job;

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
    /// The API server refuses the Job the template makes.
    pub const INVALID_JOB_TEMPLATE: &str = "InvalidJobTemplate";
    /// The failure policy suspended the CronJob (Warning).
    pub const SUSPENDED_AFTER_FAILURES: &str = "SuspendedAfterFailures";
    /// Enqueue: a slot fell due with the queue full, one was dropped (Warning).
    pub const QUEUE_FULL: &str = "QueueFull";
    /// The policy is no longer Enqueue: the queued slots were dropped (Warning).
    pub const QUEUE_CLEARED: &str = "QueueCleared";
    /// A calendar excludes the day of the due slot: no Job (Normal, once per slot).
    pub const SLOT_SKIPPED: &str = "SlotSkipped";
    /// A Calendar named in `spec.calendars` does not exist (Warning, once per change).
    pub const CALENDAR_NOT_FOUND: &str = "CalendarNotFound";
}

/// What the controller knows of a CronJob's slots beyond the copy it plans from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Records {
    /// The latest slot this process ran for the CronJob (created its Job, or found it), whether
    /// or not a status carrying it has been written: a write that lags, conflicts or coalesces
    /// never lets the slot run again, even once its Job is deleted.
    pub ran: Option<Timestamp>,
    /// `status.lastScheduleTime` as the API server stores it, without the statuses this
    /// process has yet to write. A scheduled Job whose slot is later is the only durable record
    /// that its slot ran: it is not deleted until a status carries the slot.
    /// A queued slot still in that status (see [`recorded_through`]) has not run yet.
    pub stored: Option<Timestamp>,
    /// The latest queued slot this process started (created its Job, or found it), whether or
    /// not a status without it in `status.queued` has been written: a stale read never starts
    /// it again.
    pub dequeued: Option<Timestamp>,
    /// The slots `[from, through]` a backfill of this process ran (their Jobs created, or
    /// found), whether or not a status without them in `status.missed` has been written.
    pub backfilled: Option<(Timestamp, Timestamp)>,
}

impl Records {
    /// Nothing known beyond `cj`: its status is what the API server stores.
    pub fn of(cj: &CronJob) -> Self {
        Self {
            ran: None,
            stored: cj.status.as_ref().and_then(recorded_through),
            dequeued: None,
            backfilled: None,
        }
    }
}

/// The latest slot `status` records as run, for deciding whether a scheduled Job is the only
/// record of its slot ([`job::slot_recorded`]): `lastScheduleTime`, but just before the oldest
/// queued slot (a queued slot is older than `lastScheduleTime` and has not run: the Job of a
/// slot that started from the queue is its only record until a status without it is stored).
pub fn recorded_through(status: &CronJobStatus) -> Option<Timestamp> {
    let last = status.last_schedule_time.as_ref()?.0;
    let oldest = status.queued.iter().map(|t| t.0).min();
    Some(match oldest {
        Some(q) if q <= last => last.min(q - jiff::SignedDuration::from_nanos(1)),
        _ => last,
    })
}

/// `status.lastScheduleTime` of `cj`.
pub fn last_schedule_time(cj: &CronJob) -> Option<Timestamp> {
    cj.status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(|t| t.0)
}

/// How soon to look again while a finished Job waits for the status that records its slot
/// before the history limits delete it.
pub const HELD_RECHECK: Duration = Duration::from_secs(1);

/// How soon to look again while a backfill runs (its Jobs' changes bring a reconcile sooner).
pub const BACKFILL_RECHECK: Duration = Duration::from_secs(10);

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

/// Work that can wait for the slot's creates, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Delete a finished Job beyond the history limits (background propagation, UID
    /// precondition).
    DeleteJob {
        /// Job name.
        name: String,
        /// Job UID.
        uid: Option<String>,
        /// Why (always [`DeleteReason::History`] here; Replace deletes are part of [`Run`]).
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

/// An Event action.
pub(crate) fn event(type_: EventType, reason: &'static str, note: String) -> Action {
    Action::Event {
        type_,
        reason,
        note,
    }
}

/// The due slot's run (or the oldest queued slot's): urgent, done before anything else.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The scheduled time.
    pub slot: Timestamp,
    /// The slot waited in `status.queued`: its Job leaves the queue once created.
    pub queued: bool,
    /// Running Jobs to delete first (Replace), as listed in `status.active`.
    pub replace: Vec<ObjectReference>,
    /// The Job to create.
    pub job: Box<Job>,
}

/// The outcome of [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The slot's run, if one is due: replace deletes, then the create.
    pub run: Option<Run>,
    /// Work that can wait, in order: active-list events, history deletes, scheduling events.
    pub actions: Vec<Action>,
    /// The manual runs asked for (now or at a later time), after the slot's run.
    pub manual: Option<manual::Manual>,
    /// The failure policy's suspension: `spec.suspend: true` before anything else, and the
    /// status only once the API server accepted it.
    pub suspend: Option<failures::Suspension>,
    /// The status as of before the run: apply records the slot and the new Job (and drops
    /// replaced ones) only once the API server has accepted them, so a run that fails leaves
    /// the slot due.
    pub status: CronJobStatus,
    /// When to look again; `None` waits for a change (suspended, invalid spec, never fires).
    pub requeue_after: Option<Duration>,
    /// Queued slots dropped (full, missed, cleared), for the metric.
    pub dropped: Vec<queue::Dropped>,
    /// The backfill asked for, after the manual run.
    pub backfill: Option<backfill::Backfill>,
}

impl Plan {
    /// The Jobs this plan creates: the slot's, then a manual run's, then a backfill's.
    pub fn creates(&self) -> impl Iterator<Item = &Job> {
        let manual = self.manual.iter().flat_map(|m| m.jobs.iter());
        let backfill = self.backfill.iter().flat_map(|b| match b {
            backfill::Backfill::Run { creates, .. } => creates.as_slice(),
            _ => &[],
        });
        self.run
            .iter()
            .map(|r| r.job.as_ref())
            .chain(manual)
            .chain(backfill.map(|(_, job)| job.as_ref()))
    }

    /// The Jobs this plan deletes, by name: Replace deletes first, then history.
    pub fn deletes(&self) -> impl Iterator<Item = (&str, DeleteReason)> {
        let replaced = self.run.iter().flat_map(|r| {
            r.replace
                .iter()
                .map(|j| (j.name.as_deref().unwrap_or_default(), DeleteReason::Replace))
        });
        let history = self.actions.iter().filter_map(|a| match a {
            Action::DeleteJob { name, reason, .. } => Some((name.as_str(), *reason)),
            _ => None,
        });
        replaced.chain(history)
    }

    /// The slot the plan runs, if any.
    pub fn scheduled(&self) -> Option<Timestamp> {
        self.run.as_ref().map(|r| r.slot)
    }

    /// The (type, reason) of every planned event.
    pub fn events(&self) -> impl Iterator<Item = (EventType, &'static str)> {
        self.actions.iter().filter_map(|a| match a {
            Action::Event { type_, reason, .. } => Some((*type_, *reason)),
            _ => None,
        })
    }
}

/// The Jobs `cj` controls (by UID) in its namespace, sorted by name. A controller reference
/// from another namespace is no ownership (the garbage collector ignores it too).
pub fn owned<'a>(cj: &CronJob, jobs: &'a [Arc<Job>]) -> Vec<&'a Job> {
    let Some(uid) = cj.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
        return Vec::new();
    };
    let mut owned: Vec<&Job> = jobs
        .iter()
        .map(|j| j.as_ref())
        .filter(|j| job::controlled_by(j, uid) && j.metadata.namespace == cj.metadata.namespace)
        .collect();
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    owned
}

/// Decide what to do for `cj` given its Jobs at `now`, with the template check its status
/// records ([`recorded_template_check`]).
pub fn plan(cj: &CronJob, jobs: &[Arc<Job>], now: Timestamp, cfg: &PlanConfig) -> Plan {
    plan_recorded(cj, jobs, Records::of(cj), now, cfg)
}

/// [`plan`] with what the controller knows of the CronJob's slots beyond `cj`.
pub fn plan_recorded(
    cj: &CronJob,
    jobs: &[Arc<Job>],
    records: Records,
    now: Timestamp,
    cfg: &PlanConfig,
) -> Plan {
    let recorded = recorded_template_check(cj);
    plan_checked(cj, jobs, records, now, cfg, recorded.invalid())
}

/// Whether the planned status says the CronJob schedules Jobs.
pub fn schedules(plan: &Plan) -> bool {
    status::ready_of(&plan.status).is_some_and(|(ready, _)| ready == "True")
}

/// [`plan`] with the template check given: `invalid_template` (the API server's message) keeps
/// the CronJob from scheduling, with `Ready=False` reason `InvalidJobTemplate`.
pub fn plan_checked(
    cj: &CronJob,
    jobs: &[Arc<Job>],
    records: Records,
    now: Timestamp,
    cfg: &PlanConfig,
    invalid_template: Option<&str>,
) -> Plan {
    let calendars = scheduling::Calendars::inline(cj);
    plan_calendars(cj, jobs, records, now, cfg, invalid_template, &calendars)
}

/// [`plan_checked`] with the calendars `cj` names, as found ([`scheduling::Calendars`]): a due
/// slot whose day a calendar excludes creates no Job; the first time it is seen, it is recorded
/// in `status.lastSkippedTime` with a Normal Event `SlotSkipped`.
pub fn plan_calendars(
    cj: &CronJob,
    jobs: &[Arc<Job>],
    records: Records,
    now: Timestamp,
    cfg: &PlanConfig,
    invalid_template: Option<&str>,
    calendars: &scheduling::Calendars,
) -> Plan {
    let old = cj.status.clone().unwrap_or_default();
    let owned = owned(cj, jobs);
    let mut status = old.clone();

    // A backfill's Jobs run beside the schedule: not in `status.active`, not a record of the
    // latest slot, not counted by the failure policy (see [`backfill`]).
    let scheduled: Vec<&Job> = owned
        .iter()
        .copied()
        .filter(|j| !job::backfilled(j))
        .collect();
    let backfilling = crate::job::backfill::requested(cj).is_some();
    let running = active::reconcile(&old.active, &scheduled);
    let mut actions = running.events;
    let active = running.active;

    let old_last = old.last_schedule_time.as_ref().map(|t| t.0);
    let (last_scheduled, added) = history::last_scheduled(old_last, records.ran, &scheduled, now);
    status.last_schedule_time = last_scheduled.map(Time);
    history::record_last_finished(&owned, &mut status);
    let trimmed = history::trim(
        // While a backfill runs, its Jobs are kept (and not counted).
        if backfilling { &scheduled } else { &owned },
        cj.spec.successful_history_limit(),
        cj.spec.failed_history_limit(),
        records.stored,
    );
    let held = trimmed.held > 0;
    actions.extend(trimmed.deletes);
    let mut tally = failures::tally(cj, &old, &owned);
    for job in added {
        // Its slot was never recorded, so it never joined `status.active` on its own.
        failures::record_unlisted(&mut tally, &old, job);
    }
    let suspend = failures::suspension(cj, &tally);

    let waiting = queue::waiting(cj, &owned, records.dequeued);
    let seen = scheduling::Seen {
        cj,
        last_scheduled,
        owned: &owned,
        active: &active,
        queue_waiting: !waiting.is_empty(),
        invalid_template,
        suspended: (cj.spec.is_suspended() || suspend.is_some())
            .then(|| failures::suspended(cj, &tally, &owned)),
        calendars,
        last_skipped: old.last_skipped_time.as_ref().map(|t| t.0),
    };
    let mut decided = scheduling::decide(seen, now, cfg);
    if held {
        decided.requeue_after = Some(
            decided
                .requeue_after
                .map_or(HELD_RECHECK, |d| d.min(HELD_RECHECK)),
        );
    }
    let ready = decided.readiness.ready;
    actions.extend(set_ready(&mut status, &old, decided.readiness, cj, now));
    status.next_schedule_time = decided.next.map(Time);
    actions.extend(decided.events);
    if let Some((slot, skip)) = decided.skipped.take()
        && status.last_skipped_time.as_ref().is_none_or(|t| t.0 < slot)
    {
        status.last_skipped_time = Some(Time(slot));
        let tz = scheduling::inputs(cj)
            .map(|(_, tz)| tz)
            .unwrap_or(jiff::tz::TimeZone::UTC);
        actions.push(event(
            EventType::Normal,
            events::SLOT_SKIPPED,
            format!(
                "Skipped the slot at {}: {} excludes {}",
                crate::schedule::scheduled_at(slot, &tz),
                skip.source,
                skip.date
            ),
        ));
    }
    let mut gaps = backfill::gaps(cj, records);
    if records.backfilled.is_some() {
        // Slots a backfill ran whose status write was lost (a conflict, a coalesced write):
        // recorded again, as `ran` is merged into lastScheduleTime.
        let stored = crate::job::backfill::missed(cj);
        if gaps != stored {
            status.missed = Some(crate::job::backfill::to_status(&gaps));
        }
    }
    if let Some(due) = &decided.due {
        let created = cj.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(last) = last_scheduled.or(created) {
            backfill::record_passed_over(cj, &mut gaps, last, due.slot, &mut status);
        }
    }
    let (mut run, enqueue) = decided
        .due
        .map_or((None, None), |due| take_due(due, &mut status));
    let tz = scheduling::inputs(cj).map(|(_, tz)| tz).ok();
    let queued = queue::step(
        queue::Input {
            cj,
            waiting,
            enqueue,
            active: !active.is_empty(),
            schedules: ready && run.is_none(),
            tz: tz.as_ref().unwrap_or(&jiff::tz::TimeZone::UTC),
        },
        now,
    );
    actions.extend(queued.events);
    status.set_queued(queued.queued.iter().map(|s| Time(*s)).collect());
    if let (Some(slot), Some(tz)) = (queued.start, tz.as_ref())
        && let Some(job) = job::for_slot(cj, slot, tz, cfg.default_job_ttl)
    {
        run = Some(Run {
            slot,
            queued: true,
            replace: Vec::new(),
            job: Box::new(job),
        });
    }
    let dropped = queued.dropped.iter().map(|(_, why)| *why).collect();
    let (manual, warning) = manual::requested(cj, &owned, now, cfg);
    actions.extend(warning);
    let backfill = backfill::step(cj, &owned, &gaps, calendars, now, cfg, &mut status);
    let mut requeue_after = decided.requeue_after;
    if let Some(at) = manual.as_ref().and_then(|m| m.next) {
        // A run asked for at a later time: look again when it comes, suspended or not.
        let until = requeue_for(at, now);
        requeue_after = Some(requeue_after.map_or(until, |d| d.min(until)));
    }
    if let Some(backfill::Backfill::Run { .. }) = &backfill {
        // Its Jobs' changes bring a reconcile; look again in a while in any case.
        requeue_after = Some(requeue_after.map_or(BACKFILL_RECHECK, |d| d.min(BACKFILL_RECHECK)));
    }
    status.set_active(active);
    status.observed_generation = cj.metadata.generation;
    status.consecutive_failures = tally.count;
    status.schedule = Some(cj.spec.schedule_summary()).filter(|s| !s.is_empty());
    Plan {
        run,
        manual,
        suspend,
        actions,
        status,
        requeue_after,
        dropped,
        backfill,
    }
}

/// What the due slot becomes: the Job to create, or the slot to queue; a slot whose Job
/// exists already, or that is queued, is recorded in `status` as scheduled.
fn take_due(due: scheduling::Due, status: &mut CronJobStatus) -> (Option<Run>, Option<Timestamp>) {
    match due.run {
        scheduling::Run::AlreadyCreated => {
            status.last_schedule_time = Some(Time(due.slot));
            (None, None)
        }
        scheduling::Run::Skip => (None, None),
        scheduling::Run::Enqueue => {
            status.last_schedule_time = Some(Time(due.slot));
            (None, Some(due.slot))
        }
        scheduling::Run::Create { job, replace } => {
            let run = Run {
                slot: due.slot,
                queued: false,
                replace,
                job,
            };
            (Some(run), None)
        }
    }
}

/// Record the `Ready` condition; a problem gets a Warning Event once, not on every reconcile it
/// persists (the condition remembers it).
pub(super) fn set_ready(
    status: &mut CronJobStatus,
    old: &CronJobStatus,
    readiness: Readiness,
    cj: &CronJob,
    now: Timestamp,
) -> Option<Action> {
    let warning = readiness.warning.and_then(|reason| {
        let same = old.conditions.iter().any(|c| {
            c.type_ == CONDITION_READY
                && c.reason == readiness.reason
                && c.message == readiness.message
        });
        (!same).then(|| event(EventType::Warning, reason, readiness.message.clone()))
    });
    status::set_condition(
        &mut status.conditions,
        CONDITION_READY,
        readiness.ready,
        readiness.reason,
        readiness.message,
        cj.metadata.generation,
        now,
    );
    warning
}

#[cfg(test)]
mod calendar_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;
