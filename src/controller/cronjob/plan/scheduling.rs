//! Step 3: scheduling. Is the CronJob able to schedule (time zone, schedule, suspension,
//! deletion), which slot is due, and what the concurrency policy makes of it (upstream
//! `syncCronJob`). The missed-run maths itself is [`crate::schedule::slots`].

use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;

use super::{Action, PlanConfig, event, events};
use crate::api::{ConcurrencyPolicy, CronJob, ScheduleFieldsError};
use crate::controller::MAX_REQUEUE;
use crate::controller::cronjob::status::reason;
use crate::schedule::exclusions::{self, Exclusions, Grid, Next, Skip, Verdict, Window};
use crate::schedule::{self, ListError, Schedule, SlotError, SlotQuery, Slots};
use crate::workload::{NewWorkload, Workload};

/// Padding added to every requeue so the next slot is due when we wake. Upstream pads 100 ms;
/// waking early is harmless here (the reconcile finds nothing due yet, requeues for the rest
/// and makes no request), so a small pad that covers the timer's granularity is enough, and
/// every Job is created 80 ms sooner.
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(20);
/// Slots missed beyond this give a `TooManyMissedTimes` warning.
pub const MAX_MISSED: u64 = 100;

/// The `Ready` condition to record, and the Warning Event for a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Whether the CronJob schedules Jobs.
    pub ready: bool,
    /// Condition reason, see [`reason`].
    pub reason: &'static str,
    /// Condition message.
    pub message: String,
    /// Event reason of the warning this problem deserves, if any.
    pub warning: Option<&'static str>,
}

impl Readiness {
    pub(super) fn not_ready(
        reason: &'static str,
        message: String,
        warning: Option<&'static str>,
    ) -> Self {
        Self {
            ready: false,
            reason,
            message,
            warning,
        }
    }
}

/// What to do with the due slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Run {
    /// Its Job already exists (created before a lost status write): record the slot only.
    AlreadyCreated,
    /// Forbid, with a Job still running: skip it (it stays due until it runs or expires).
    Skip,
    /// Enqueue, with a Job still running or slots waiting: queue it (see [`super::queue`]).
    Enqueue,
    /// Create its Job, after deleting the running ones (Replace).
    Create {
        /// The workload to create.
        job: Box<NewWorkload>,
        /// Running Jobs to delete first.
        replace: Vec<ObjectReference>,
    },
}

/// The due slot and what to do with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Due {
    /// The scheduled time.
    pub slot: Timestamp,
    /// What to do.
    pub run: Run,
}

/// The scheduling decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduling {
    /// The `Ready` condition.
    pub readiness: Readiness,
    /// `status.nextScheduleTime`.
    pub next: Option<Timestamp>,
    /// When to look again; `None` waits for a change.
    pub requeue_after: Option<Duration>,
    /// The slot to act on now, if any.
    pub due: Option<Due>,
    /// `MissSchedule`, `TooManyMissedTimes` and `JobAlreadyActive` events.
    pub events: Vec<Action>,
    /// The due slot, when a calendar excludes its day: no Job, and why.
    pub skipped: Option<(Timestamp, Skip)>,
}

impl Scheduling {
    fn idle(readiness: Readiness) -> Self {
        Self {
            readiness,
            next: None,
            requeue_after: None,
            due: None,
            events: Vec::new(),
            skipped: None,
        }
    }
}

/// The calendars a CronJob's slots are checked against, as the manager found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calendars {
    /// Every one named exists: the days of `spec.exclusions` and of each.
    Found(Exclusions),
    /// These named Calendars do not exist: no slot runs (a holiday calendar exists to prevent
    /// harm, so a missing one fails closed).
    Missing(Vec<String>),
}

impl Calendars {
    /// The days of `cj`'s `spec.exclusions` and of the Calendars it names, each looked up
    /// with `lookup` (the spec of the Calendar of that name, if it exists).
    pub fn resolve(
        cj: &CronJob,
        lookup: impl Fn(&str) -> Option<std::sync::Arc<crate::api::Calendar>>,
    ) -> Self {
        let mut found = Exclusions::none();
        if let Some(inline) = &cj.spec.exclusions {
            found = found.with(exclusions::Source::Inline, inline.days());
        }
        let mut missing = Vec::new();
        for name in cj.spec.calendars.iter().flatten() {
            match lookup(name) {
                Some(cal) => {
                    found = found.with(exclusions::Source::Calendar(name.clone()), cal.spec.days());
                }
                None => missing.push(name.clone()),
            }
        }
        if missing.is_empty() {
            Calendars::Found(found)
        } else {
            Calendars::Missing(missing)
        }
    }

    /// `cj`'s own exclusions, and every Calendar it names missing (nothing looked up).
    pub fn inline(cj: &CronJob) -> Self {
        Self::resolve(cj, |_| None)
    }
}

/// Requeue delay for waking at `next` (+100 ms), clamped to [`MAX_REQUEUE`].
pub fn requeue_for(next: Timestamp, now: Timestamp) -> Duration {
    let d = Duration::try_from(next.duration_since(now)).unwrap_or(Duration::ZERO);
    (d + NEXT_SCHEDULE_DELTA).min(MAX_REQUEUE)
}

/// The CronJob's zone and parsed schedule, or why it cannot schedule.
pub fn inputs(cj: &CronJob) -> Result<(Schedule, TimeZone), Readiness> {
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    inputs_of(
        cj.spec.schedule_exprs(),
        cj.spec.time_zone.as_deref(),
        namespace,
        name,
    )
}

/// [`inputs`] from the fields it reads: the schedule expressions (or why the spec names none)
/// and zone of the CronJob `namespace/name`.
pub fn inputs_of(
    exprs: Result<&[String], ScheduleFieldsError>,
    time_zone: Option<&str>,
    namespace: &str,
    name: &str,
) -> Result<(Schedule, TimeZone), Readiness> {
    let tz = schedule::time_zone(time_zone).map_err(|e| {
        Readiness::not_ready(
            reason::UNKNOWN_TIME_ZONE,
            format!("invalid timeZone: {:?}: {e}", time_zone.unwrap_or_default()),
            Some(events::UNKNOWN_TIME_ZONE),
        )
    })?;
    let key = format!("{namespace}/{name}");
    let invalid = |message: String| {
        Readiness::not_ready(
            reason::INVALID_SCHEDULE,
            message,
            Some(events::INVALID_SCHEDULE),
        )
    };
    let exprs = exprs.map_err(|e| invalid(format!("invalid schedule: {e}")))?;
    let sched = Schedule::parse_each_memo(exprs, &key)
        .map_err(|e| invalid(format!("invalid schedule: {}", list_error(exprs, &e))))?;
    Ok((sched, tz))
}

/// What is wrong with the schedule expressions, naming the field of the one at fault:
/// `"61 * * * *" : end of range ...` for `spec.schedule`, `spec.schedules[1] "61 * * * *" : ...`
/// for one of several.
fn list_error(exprs: &[String], e: &ListError) -> String {
    match e {
        ListError::Expr { expr, error, .. } if exprs.len() == 1 => format!("{expr:?} : {error}"),
        ListError::Expr { index, expr, error } => {
            format!("spec.schedules[{index}] {expr:?} : {error}")
        }
        ListError::EveryCombined { index, expr } => format!(
            "spec.schedules[{index}] {expr:?} : @every cannot be combined with other schedules"
        ),
        ListError::Empty => e.to_string(),
    }
}

/// The `Ready` condition of a CronJob whose Job template the API server refuses: `message` is
/// the API server's (see [`super::template`]).
pub fn invalid_template(message: &str) -> Readiness {
    Readiness::not_ready(
        reason::INVALID_JOB_TEMPLATE,
        message.to_string(),
        Some(events::INVALID_JOB_TEMPLATE),
    )
}

/// The `Ready` condition of a CronJob whose workload cannot be created (its kind is not
/// installed, not allowed, not granted, or cannot be run as named): `reason` is the
/// condition's and the Warning Event's ([`crate::controller::cronjob::status::reason`]).
pub fn workload_problem(reason: &'static str, message: String) -> Readiness {
    Readiness::not_ready(reason, message, Some(reason))
}

/// The `Ready` condition of a CronJob suspended by `spec.suspend` (see
/// [`super::failures::suspended`] for one the failure policy suspended).
pub fn suspended() -> Readiness {
    Readiness::not_ready(
        reason::SUSPENDED,
        "spec.suspend is true: no new Jobs are created".into(),
        None,
    )
}

/// The CronJob's next slot after `now`, if it schedules at all (not suspended, valid).
pub fn next_run(cj: &CronJob, now: Timestamp) -> Option<Timestamp> {
    if cj.spec.is_suspended() || cj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let (schedule, tz) = inputs(cj).ok()?;
    match schedule.every_seconds() {
        // `@every` slots hang off the last run; the status's next time says where.
        Some(_) => cj
            .status
            .as_ref()
            .and_then(|s| s.next_schedule_time.as_ref())
            .map(|t| t.0)
            .filter(|t| *t > now),
        None => schedule.next_after(now, &tz),
    }
}

/// What the decision is about: the CronJob, the Jobs it controls and those still running.
#[derive(Debug, Clone)]
pub struct Seen<'a> {
    /// The CronJob.
    pub cj: &'a CronJob,
    /// The latest slot that ran, from every record of it (the status, what this process ran,
    /// the Jobs): it anchors the missed-run search.
    pub last_scheduled: Option<Timestamp>,
    /// The Jobs it controls.
    pub owned: &'a [&'a Workload],
    /// Its running Jobs (the reconciled `status.active`).
    pub active: &'a [ObjectReference],
    /// Whether queued slots wait (Enqueue): a due slot queues behind them.
    pub queue_waiting: bool,
    /// What keeps it from creating workloads, if anything (the API server refuses its
    /// template, the manager cannot create its kind): no slot runs.
    pub blocked: Option<&'a Readiness>,
    /// The `Ready` condition of the CronJob if it is suspended, by `spec.suspend` or by the
    /// failure policy now ([`super::failures`]); `None` when it is not.
    pub suspended: Option<Readiness>,
    /// The calendars its slots are checked against.
    pub calendars: &'a Calendars,
    /// The latest slot skipped for a calendar (`status.lastSkippedTime`): the missed-run search
    /// starts after it.
    pub last_skipped: Option<Timestamp>,
}

/// Decide for what was `seen` at `now`, in steps:
///
/// 1. `Seen::schedulable`: can the CronJob schedule at all (deletion, time zone, schedule,
///    suspension, Job template, calendars)?
/// 2. `search_anchor` and `due_slots`: where the missed-run search starts, and which slot
///    is due and which comes next;
/// 3. `scheduled`, `next_allowed` and `wake_at`: the `Ready` condition, the next slot
///    the calendars and the window allow, and when to look again;
/// 4. `Seen::act_on_due`: what the due slot comes to (a run, a skip for a calendar, a
///    warning for a slot the deadline hid);
/// 5. `finish_if_window_ended`: whether the active window has nothing left to run.
pub fn decide(seen: Seen<'_>, now: Timestamp, cfg: &PlanConfig) -> Scheduling {
    let cj = seen.cj;
    let (sched, tz, excluded) = match seen.schedulable() {
        Ok(inputs) => inputs,
        Err(readiness) => return Scheduling::idle(readiness),
    };
    let window = cj.spec.window();
    let anchor = search_anchor(seen.last_scheduled, seen.last_skipped, &window, &sched);
    let creation = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
    let query = SlotQuery {
        schedule: &sched,
        tz: &tz,
        last_schedule_time: anchor,
        creation_timestamp: creation,
        starting_deadline_seconds: cj.spec.starting_deadline_seconds,
        now,
    };
    let slots = match due_slots(&query) {
        Ok(slots) => slots,
        Err(readiness) => return Scheduling::idle(readiness),
    };
    let grid = Grid::of(&sched, anchor.unwrap_or(creation));
    let allowed = next_allowed(grid, slots.next, excluded, &window, &tz);
    let mut decided = Scheduling {
        readiness: scheduled(&sched, &tz, &allowed),
        next: match allowed {
            Next::At(t) => Some(t),
            Next::WindowEnded | Next::GaveUp => None,
        },
        requeue_after: wake_at(slots.next, &window, grid, &tz).map(|n| requeue_for(n, now)),
        due: None,
        events: Vec::new(),
        skipped: None,
    };
    seen.act_on_due(&mut decided, &query, &slots, excluded, &window, cfg);
    finish_if_window_ended(&mut decided, &allowed, &window, now);
    decided
}

impl<'a> Seen<'a> {
    /// The schedule, zone and calendar days the CronJob schedules with, or the `Ready`
    /// condition saying why it does not schedule at all: it is being deleted, its time zone or
    /// schedule is invalid, it is suspended, the API server refuses its Job template, or a
    /// Calendar it names is missing (checked in that order).
    fn schedulable(&self) -> Result<(Schedule, TimeZone, &'a Exclusions), Readiness> {
        if self.cj.metadata.deletion_timestamp.is_some() {
            return Err(Readiness::not_ready(
                reason::TERMINATING,
                "the CronJob is being deleted".into(),
                None,
            ));
        }
        let (sched, tz) = inputs(self.cj)?;
        if let Some(readiness) = self.suspended.clone() {
            return Err(readiness);
        }
        if let Some(blocked) = self.blocked {
            return Err(blocked.clone());
        }
        match self.calendars {
            Calendars::Found(found) => Ok((sched, tz, found)),
            Calendars::Missing(names) => Err(calendar_not_found(names)),
        }
    }
}

/// Where the missed-run search starts: after the latest slot that ran or was skipped for a
/// calendar (skipped slots are done with, as run ones are); a window that has not begun
/// starts it at its start (cron schedules: `@every` slots keep their anchor).
fn search_anchor(
    last_scheduled: Option<Timestamp>,
    last_skipped: Option<Timestamp>,
    window: &Window,
    sched: &Schedule,
) -> Option<Timestamp> {
    let mut anchor = last_scheduled.max(last_skipped);
    if let (Some(b), None) = (window.not_before, sched.every_seconds()) {
        // Just before it (a slot at `notBefore` runs); the first instant has nothing before it.
        let before = b
            .checked_sub(jiff::SignedDuration::from_nanos(1))
            .unwrap_or(b);
        anchor = Some(anchor.map_or(before, |a| a.max(before)));
    }
    anchor
}

/// The due slot, the missed count and the next slot of `query`, or the `Ready` condition of
/// a schedule that never fires or a negative starting deadline.
fn due_slots(query: &SlotQuery<'_>) -> Result<Slots, Readiness> {
    schedule::slots(query).map_err(|e| {
        let why = match e {
            SlotError::NeverFires(_) => reason::INVALID_SCHEDULE,
            SlotError::NegativeDeadline(_) => reason::INVALID_SPEC,
        };
        Readiness::not_ready(
            why,
            format!("invalid schedule: {} : {e}", query.schedule.describe()),
            Some(events::INVALID_SCHEDULE),
        )
    })
}

/// The next slot that may run, from the schedule's next one (`raw`): inside the window and on
/// no day the calendars exclude; none when the schedule has no next slot.
fn next_allowed(
    grid: Grid<'_>,
    raw: Option<Timestamp>,
    excluded: &Exclusions,
    window: &Window,
    tz: &TimeZone,
) -> Next {
    raw.map_or(Next::WindowEnded, |raw| {
        exclusions::next_allowed(grid, raw, excluded, window, tz)
    })
}

/// The `Ready` condition of a CronJob that schedules: its schedules and zone, and whether the
/// search for a slot the calendars allow gave up.
fn scheduled(sched: &Schedule, tz: &TimeZone, allowed: &Next) -> Readiness {
    let mut message = format!(
        "{} {} in time zone {}",
        if sched.len() > 1 {
            "schedules"
        } else {
            "schedule"
        },
        sched.describe(),
        tz.iana_name().unwrap_or("UTC")
    );
    if *allowed == Next::GaveUp {
        message.push_str(&format!(
            "; no slot the calendars allow within {} excluded stretches or 5 years",
            exclusions::MAX_EXCLUDED_SEARCH
        ));
    }
    Readiness {
        ready: true,
        reason: reason::SCHEDULED,
        message,
        warning: None,
    }
}

/// When to wake: at the schedule's next slot (`next`) inside the window, allowed or not (an
/// excluded one gets its Event at its time); before the window, at its first slot; after it,
/// never.
fn wake_at(
    next: Option<Timestamp>,
    window: &Window,
    grid: Grid<'_>,
    tz: &TimeZone,
) -> Option<Timestamp> {
    match (next, window.not_before) {
        (Some(raw), _) if window.contains(raw) => Some(raw),
        (Some(raw), Some(b)) if raw < b => grid.at_or_after(b, tz).filter(|s| window.contains(*s)),
        _ => None,
    }
}

impl Seen<'_> {
    /// What the due slot comes to, recorded in `decided`: the concurrency policy's run (and its
    /// events) when the window and the calendars allow it, a skip when a calendar excludes its
    /// day, nothing outside the window; with no due slot, the `MissSchedule` warning for one
    /// the starting deadline hid ([`deadline_missed`]).
    fn act_on_due(
        &self,
        decided: &mut Scheduling,
        query: &SlotQuery<'_>,
        slots: &Slots,
        excluded: &Exclusions,
        window: &Window,
        cfg: &PlanConfig,
    ) {
        let tz = query.tz;
        match slots
            .due
            .map(|slot| (slot, exclusions::verdict(slot, excluded, window, tz)))
        {
            Some((slot, Verdict::Allowed)) => {
                let (run, events) = self.run_slot(slot, slots.missed, tz, cfg);
                decided.due = run.map(|run| Due { slot, run });
                decided.events.extend(events);
            }
            Some((slot, Verdict::Excluded(skip))) => decided.skipped = Some((slot, skip)),
            Some((_, Verdict::OutsideWindow)) => {}
            None if self.cj.spec.starting_deadline_seconds.is_some() => {
                decided
                    .events
                    .extend(deadline_missed(query, excluded, window));
            }
            None => {}
        }
    }
}

/// The `MissSchedule` warning for the slot the starting deadline hid from `query` (upstream
/// narrows it away silently), unless that slot was not to run anyway (outside the window or
/// on an excluded day).
fn deadline_missed(
    query: &SlotQuery<'_>,
    excluded: &Exclusions,
    window: &Window,
) -> Option<Action> {
    let unbounded = SlotQuery {
        starting_deadline_seconds: None,
        ..*query
    };
    let missed = schedule::slots(&unbounded).ok()?.due?;
    if exclusions::verdict(missed, excluded, window, query.tz) != Verdict::Allowed {
        return None;
    }
    Some(event(
        EventType::Warning,
        events::MISS_SCHEDULE,
        format!(
            "Missed scheduled time to start a job: {}",
            schedule::scheduled_at(missed, query.tz)
        ),
    ))
}

/// Whether the active window has nothing left to run: with no next slot allowed, a
/// `spec.notAfter` and no Job to create now, the CronJob is finished (its window ended, or the
/// calendars exclude every slot left in it) and waits for a change.
fn finish_if_window_ended(
    decided: &mut Scheduling,
    allowed: &Next,
    window: &Window,
    now: Timestamp,
) {
    let (Next::WindowEnded, Some(end), None) = (allowed, window.not_after, &decided.due) else {
        return;
    };
    let message = if end <= now {
        format!("the active window ended at {end} (spec.notAfter): no slot is left to run")
    } else {
        format!(
            "the calendars exclude every slot left before the active window ends at {end} (spec.notAfter)"
        )
    };
    decided.readiness = Readiness::not_ready(reason::FINISHED, message, None);
    decided.requeue_after = None;
}

/// The `Ready` condition of a CronJob naming Calendars that do not exist.
pub fn calendar_not_found(names: &[String]) -> Readiness {
    Readiness::not_ready(
        reason::CALENDAR_NOT_FOUND,
        format!(
            "Calendar {} not found (spec.calendars): no slot runs until it exists",
            names.join(", ")
        ),
        Some(events::CALENDAR_NOT_FOUND),
    )
}

impl Seen<'_> {
    /// The concurrency policy applied to the due `slot`, and the events it gives; no run when
    /// no Job can be built (a CronJob without name or UID, never the case for objects read
    /// from the API).
    fn run_slot(
        &self,
        slot: Timestamp,
        missed: u64,
        tz: &TimeZone,
        cfg: &PlanConfig,
    ) -> (Option<Run>, Vec<Action>) {
        let mut raised = Vec::new();
        let Some(job) = crate::workload::for_slot(self.cj, slot, tz, cfg.default_job_ttl) else {
            return (None, raised);
        };
        // Already processed (e.g. created before a restart that lost the status write): the
        // Job is ours and in the cache; record the slot, create nothing.
        if self
            .owned
            .iter()
            .any(|j| j.metadata.name == job.metadata().name)
        {
            return (Some(Run::AlreadyCreated), raised);
        }
        if missed > MAX_MISSED {
            raised.push(event(
                EventType::Warning,
                events::TOO_MANY_MISSED_TIMES,
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
            ));
        }
        let replace = match self.cj.spec.concurrency_policy {
            ConcurrencyPolicy::Forbid if !self.active.is_empty() => {
                raised.push(event(
                    EventType::Normal,
                    events::JOB_ALREADY_ACTIVE,
                    "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
                ));
                return (Some(Run::Skip), raised);
            }
            ConcurrencyPolicy::Enqueue if !self.active.is_empty() || self.queue_waiting => {
                return (Some(Run::Enqueue), raised);
            }
            ConcurrencyPolicy::Replace => self.active.to_vec(),
            _ => Vec::new(),
        };
        (
            Some(Run::Create {
                job: Box::new(job),
                replace,
            }),
            raised,
        )
    }
}
