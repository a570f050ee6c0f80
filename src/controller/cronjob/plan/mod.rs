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
//! [`plan`] composes them into a [`Plan`]; the Jobs themselves are built by [`crate::workload`].

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
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::events::EventType;

pub use scheduling::{MAX_MISSED, NEXT_SCHEDULE_DELTA, Readiness, requeue_for};
pub use template::{TemplateCheck, recorded_template_check, refuse_template};

use super::status::{self, CONDITION_READY};
use crate::api::{CronJob, CronJobStatus};
use crate::workload;
use crate::workload::{NewWorkload, Workload, WorkloadType};

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
/// record of its slot ([`workload::slot_recorded`]): `lastScheduleTime`, but just before the oldest
/// queued slot (a queued slot is older than `lastScheduleTime` and has not run: the Job of a
/// slot that started from the queue is its only record until a status without it is stored).
pub fn recorded_through(status: &CronJobStatus) -> Option<Timestamp> {
    let last = status.last_schedule_time.as_ref()?.0;
    let oldest = status.queued.iter().map(|t| t.0).min();
    Some(match oldest {
        Some(q) if q <= last => last.min(
            q.checked_sub(jiff::SignedDuration::from_nanos(1))
                .unwrap_or(Timestamp::MIN),
        ),
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
        /// Its kind.
        type_: Arc<WorkloadType>,
        /// Its name.
        name: String,
        /// Its UID.
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
    /// The workload to create.
    pub job: Box<NewWorkload>,
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
    /// The workloads this plan creates: the slot's, then a manual run's, then a backfill's.
    pub fn creates(&self) -> impl Iterator<Item = &NewWorkload> {
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
pub fn owned<'a>(cj: &CronJob, jobs: &'a [Arc<Workload>]) -> Vec<&'a Workload> {
    let Some(uid) = cj.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
        return Vec::new();
    };
    let mut owned: Vec<&Workload> = jobs
        .iter()
        .map(|j| j.as_ref())
        .filter(|j| {
            workload::controlled_by(&j.metadata, uid)
                && j.metadata.namespace == cj.metadata.namespace
        })
        .collect();
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    owned
}

/// Decide what to do for `cj` given its Jobs at `now`, with the template check its status
/// records ([`recorded_template_check`]).
pub fn plan(cj: &CronJob, jobs: &[Arc<Workload>], now: Timestamp, cfg: &PlanConfig) -> Plan {
    plan_recorded(cj, jobs, Records::of(cj), now, cfg)
}

/// [`plan`] with what the controller knows of the CronJob's slots beyond `cj`, the calendars
/// taken as inline only ([`scheduling::Calendars::inline`]).
pub fn plan_recorded(
    cj: &CronJob,
    jobs: &[Arc<Workload>],
    records: Records,
    now: Timestamp,
    cfg: &PlanConfig,
) -> Plan {
    let recorded = recorded_template_check(cj);
    let calendars = scheduling::Calendars::inline(cj);
    let blocked = recorded.invalid().map(scheduling::invalid_template);
    plan_calendars(cj, jobs, records, now, cfg, blocked.as_ref(), &calendars)
}

/// Whether the planned status says the CronJob schedules Jobs.
pub fn schedules(plan: &Plan) -> bool {
    status::ready_of(&plan.status).is_some_and(|(ready, _)| ready == "True")
}

/// The plan, every input given: what the controller knows beyond `cj` (`records`),
/// what keeps the CronJob from creating workloads at all (`blocked`: its `Ready=False`
/// condition, such as a template the API server refuses, reason `InvalidJobTemplate`
/// ([`scheduling::invalid_template`]), or a workload kind the manager cannot create), and the
/// calendars `cj` names,
/// as found ([`scheduling::Calendars`]): a due slot whose day a calendar excludes creates no
/// Job; the first time it is seen, it is recorded in `status.lastSkippedTime` with a Normal
/// Event `SlotSkipped`.
///
/// The steps of the module doc, in order; each records its part of the status and queues its
/// actions (active-list events, history deletes, scheduling events, queue events, a manual
/// run's warning).
pub fn plan_calendars(
    cj: &CronJob,
    jobs: &[Arc<Workload>],
    records: Records,
    now: Timestamp,
    cfg: &PlanConfig,
    blocked: Option<&Readiness>,
    calendars: &scheduling::Calendars,
) -> Plan {
    let given = Given {
        cj,
        owned: owned(cj, jobs),
        old: cj.status.clone().unwrap_or_default(),
        records,
        now,
        cfg,
        blocked,
        calendars,
    };
    let mut status = given.old.clone();
    // 1. The running Jobs.
    let scheduled = scheduled_jobs(&given.owned);
    let running = active::reconcile(&given.old.active, &scheduled);
    let mut actions = running.events;
    let active = running.active;
    // 2. The history and the failures.
    let history = record_history(&given, &scheduled, &mut status, &mut actions);
    let (tally, suspend) = tally_failures(&given, &history.added);
    // 3. Scheduling, the passed-over slots and the queue.
    let waiting = queue::waiting(cj, &given.owned, records.dequeued);
    let decided = decide(
        &given,
        &history,
        &active,
        !waiting.is_empty(),
        &tally,
        suspend.is_some(),
    );
    let ready = decided.readiness.ready;
    let scheduled_requeue = decided.requeue_after;
    let due = record_decision(&given, decided, &mut status, &mut actions);
    let gaps = record_gaps(&given, history.last_scheduled, due.as_ref(), &mut status);
    let (run, enqueue) = due.map_or((None, None), |due| take_due(due, &mut status));
    let queued = step_queue(
        &given,
        waiting,
        enqueue,
        !active.is_empty(),
        ready && run.is_none(),
    );
    actions.extend(queued.events);
    status.set_queued(queued.queued.iter().map(|s| Time(*s)).collect());
    let run = queued.run.or(run);
    // 4. A manual run.
    let (manual, warning) = manual::requested(cj, &given.owned, now, cfg);
    actions.extend(warning);
    // 5. A backfill.
    let backfill = backfill::step(cj, &given.owned, &gaps, calendars, now, cfg, &mut status);
    let requeue_after = requeue(
        scheduled_requeue,
        history.held,
        manual.as_ref(),
        backfill.as_ref(),
        now,
    );
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
        dropped: queued.dropped,
        backfill,
    }
}

/// What one plan starts from: the CronJob, the Jobs it controls, its status as read, what the
/// controller knows beyond it, the time, the settings, the template check and the calendars.
struct Given<'a> {
    cj: &'a CronJob,
    owned: Vec<&'a Workload>,
    old: CronJobStatus,
    records: Records,
    now: Timestamp,
    cfg: &'a PlanConfig,
    blocked: Option<&'a Readiness>,
    calendars: &'a scheduling::Calendars,
}

/// Which of the `owned` Jobs are the schedule's: a backfill's Jobs run beside it, not in
/// `status.active`, not a record of the latest slot, not counted by the failure policy (see
/// [`backfill`]).
fn scheduled_jobs<'a>(owned: &[&'a Workload]) -> Vec<&'a Workload> {
    owned
        .iter()
        .copied()
        .filter(|j| !workload::backfilled(&j.metadata))
        .collect()
}

/// What the history step found: the latest slot that ran, the scheduled Jobs whose slot the
/// status never recorded, and whether finished Jobs beyond the limits wait for a status that
/// records their slot.
struct History<'a> {
    last_scheduled: Option<Timestamp>,
    added: Vec<&'a Workload>,
    held: bool,
}

/// Step 2: the latest slot that ran (from the status, what this process ran and the
/// `scheduled` Jobs) and the last finished times go in `status`; the finished Jobs beyond the
/// history limits are deleted, or held while only they record their slot. While a backfill
/// runs, its Jobs are kept (and not counted).
fn record_history<'a>(
    given: &Given<'a>,
    scheduled: &[&'a Workload],
    status: &mut CronJobStatus,
    actions: &mut Vec<Action>,
) -> History<'a> {
    let cj = given.cj;
    let old_last = given.old.last_schedule_time.as_ref().map(|t| t.0);
    let (last_scheduled, added) =
        history::last_scheduled(old_last, given.records.ran, scheduled, given.now);
    status.last_schedule_time = last_scheduled.map(Time);
    history::record_last_finished(&given.owned, status);
    let backfilling = crate::workload::backfill::requested(cj).is_some();
    let trimmed = history::trim(
        if backfilling {
            scheduled
        } else {
            given.owned.as_slice()
        },
        cj.spec.successful_history_limit(),
        cj.spec.failed_history_limit(),
        given.records.stored,
    );
    actions.extend(trimmed.deletes);
    History {
        last_scheduled,
        added,
        held: trimmed.held > 0,
    }
}

/// Step 2, failures: the scheduled Jobs that failed in a row, counting those whose slot was
/// never recorded (`added`: they never joined `status.active` on their own), and whether the
/// failure policy suspends the CronJob now.
fn tally_failures(
    given: &Given<'_>,
    added: &[&Workload],
) -> (failures::Tally, Option<failures::Suspension>) {
    let mut tally = failures::tally(given.cj, &given.old, &given.owned);
    for job in added {
        failures::record_unlisted(&mut tally, &given.old, job);
    }
    let suspension = failures::suspension(given.cj, &tally);
    (tally, suspension)
}

/// Step 3: the scheduling decision for what steps 1 and 2 found: the latest slot that ran, the
/// `active` Jobs, whether queued slots wait, and the suspension (`spec.suspend`, or the failure
/// policy's now, `suspending`).
fn decide(
    given: &Given<'_>,
    history: &History<'_>,
    active: &[ObjectReference],
    queue_waiting: bool,
    tally: &failures::Tally,
    suspending: bool,
) -> scheduling::Scheduling {
    let cj = given.cj;
    let seen = scheduling::Seen {
        cj,
        last_scheduled: history.last_scheduled,
        owned: &given.owned,
        active,
        queue_waiting,
        blocked: given.blocked,
        suspended: (cj.spec.is_suspended() || suspending)
            .then(|| failures::suspended(cj, tally, &given.owned)),
        calendars: given.calendars,
        last_skipped: given.old.last_skipped_time.as_ref().map(|t| t.0),
    };
    scheduling::decide(seen, given.now, given.cfg)
}

/// Step 3, recorded: the `Ready` condition (a Warning Event once per problem), the next slot,
/// the scheduling events and a skipped slot go in `status` and `actions`; what is left to act
/// on is the due slot, returned.
fn record_decision(
    given: &Given<'_>,
    decided: scheduling::Scheduling,
    status: &mut CronJobStatus,
    actions: &mut Vec<Action>,
) -> Option<scheduling::Due> {
    let cj = given.cj;
    actions.extend(set_ready(
        status,
        &given.old,
        decided.readiness,
        cj,
        given.now,
    ));
    status.next_schedule_time = decided.next.map(Time);
    actions.extend(decided.events);
    actions.extend(record_skipped(cj, decided.skipped, status));
    decided.due
}

/// A due slot a calendar excludes (`skipped`): recorded in `status.lastSkippedTime` with a
/// Normal Event `SlotSkipped` the first time it is seen, nothing after.
fn record_skipped(
    cj: &CronJob,
    skipped: Option<(Timestamp, crate::schedule::exclusions::Skip)>,
    status: &mut CronJobStatus,
) -> Option<Action> {
    let (slot, skip) = skipped?;
    if status
        .last_skipped_time
        .as_ref()
        .is_some_and(|t| t.0 >= slot)
    {
        return None;
    }
    status.last_skipped_time = Some(Time(slot));
    let tz = scheduling::inputs(cj)
        .map(|(_, tz)| tz)
        .unwrap_or(jiff::tz::TimeZone::UTC);
    Some(event(
        EventType::Normal,
        events::SLOT_SKIPPED,
        format!(
            "Skipped the slot at {}: {} excludes {}",
            crate::schedule::scheduled_at(slot, &tz),
            skip.source,
            skip.date
        ),
    ))
}

/// The slots known not to have run (for the backfill step), as `status.missed` records them:
/// recorded again when a backfill's write of them was lost (a conflict, a coalesced write:
/// `ran` is merged into lastScheduleTime the same way), and with the slots the scheduler passes
/// over to reach the `due` one added.
fn record_gaps(
    given: &Given<'_>,
    last_scheduled: Option<Timestamp>,
    due: Option<&scheduling::Due>,
    status: &mut CronJobStatus,
) -> Vec<workload::backfill::Gap> {
    let cj = given.cj;
    let mut gaps = backfill::gaps(cj, given.records);
    if given.records.backfilled.is_some() {
        let stored = crate::workload::backfill::missed(cj);
        if gaps != stored {
            status.missed = Some(crate::workload::backfill::to_status(&gaps));
        }
    }
    if let Some(due) = due {
        let created = cj.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(last) = last_scheduled.or(created) {
            backfill::record_passed_over(cj, &mut gaps, last, due.slot, status);
        }
    }
    gaps
}

/// What the queue step decides, with the run of the queued slot it starts, if any.
struct Queued {
    queued: Vec<Timestamp>,
    run: Option<Run>,
    events: Vec<Action>,
    dropped: Vec<queue::Dropped>,
}

/// Step 3, the queue: the slot the scheduling step queued (`enqueue`) joins the `waiting`
/// ones; the oldest starts when no Job is `active` and the CronJob `schedules` with no slot of
/// its own running now.
fn step_queue(
    given: &Given<'_>,
    waiting: Vec<Timestamp>,
    enqueue: Option<Timestamp>,
    active: bool,
    schedules: bool,
) -> Queued {
    let cj = given.cj;
    let tz = scheduling::inputs(cj).map(|(_, tz)| tz).ok();
    let step = queue::step(
        queue::Input {
            cj,
            waiting,
            enqueue,
            active,
            schedules,
            tz: tz.as_ref().unwrap_or(&jiff::tz::TimeZone::UTC),
        },
        given.now,
    );
    let run = match (step.start, tz.as_ref()) {
        (Some(slot), Some(tz)) => {
            workload::for_slot(cj, slot, tz, given.cfg.default_job_ttl).map(|job| Run {
                slot,
                queued: true,
                replace: Vec::new(),
                job: Box::new(job),
            })
        }
        _ => None,
    };
    Queued {
        queued: step.queued,
        run,
        events: step.events,
        dropped: step.dropped.iter().map(|(_, why)| *why).collect(),
    }
}

/// When to look again: as the scheduling step says, but sooner while finished Jobs are `held`
/// ([`HELD_RECHECK`]), when a manual run is asked for at a later time (suspended or not), and
/// while a backfill runs ([`BACKFILL_RECHECK`]: its Jobs' changes bring a reconcile sooner).
fn requeue(
    scheduled: Option<Duration>,
    held: bool,
    manual: Option<&manual::Manual>,
    backfill: Option<&backfill::Backfill>,
    now: Timestamp,
) -> Option<Duration> {
    let held = held.then_some(HELD_RECHECK);
    let manual = manual.and_then(|m| m.next).map(|at| requeue_for(at, now));
    let backfill =
        matches!(backfill, Some(backfill::Backfill::Run { .. })).then_some(BACKFILL_RECHECK);
    [scheduled, held, manual, backfill]
        .into_iter()
        .flatten()
        .min()
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
