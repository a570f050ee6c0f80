//! Step 5: a backfill (`kubectl kronjob backfill`), asked for with the CronJob's
//! [`ANNOTATION_BACKFILL`]. Each reconcile walks the request's range (at most
//! [`backfill::MAX_SLOTS`] slots) and creates, oldest first, the Jobs of the slots that never ran
//! ([`backfill::plan_slots`]) while fewer than `parallel` of the backfill's Jobs are unfinished.
//! Each created Job removes its slot, and every slot of the range before it, from
//! `status.missed`; this process remembers that until the status write lands
//! ([`Records::backfilled`]). Once no slot of the range is left to run, the request is removed
//! (only if unchanged) with one `BackfillDone` Event.
//!
//! Backfill Jobs run beside the schedule: they are not in `status.active` (the concurrency
//! policy of scheduled slots ignores them), do not move `lastScheduleTime`, and do not count
//! for the failure policy; while their backfill runs the history limits neither count nor
//! delete them. A suspended CronJob still backfills: the request is explicit.

use jiff::Timestamp;
use kube::runtime::events::EventType;

use super::scheduling::Calendars;
use super::{Action, PlanConfig, Records, event};
use crate::api::{ANNOTATION_BACKFILL, BackfillProgress, CronJob, CronJobStatus};
use crate::workload::backfill::{self, Gap, Request, SlotState};
use crate::workload::{self as jobs};
use crate::workload::{NewWorkload, Workload};

/// Event reason once every slot of a backfill's range ran.
pub const BACKFILL_DONE: &str = "BackfillDone";
/// Event reason of a backfill request that cannot run (Warning); it is removed.
pub const INVALID_BACKFILL: &str = "InvalidBackfill";

/// What a reconcile does for the backfill on the CronJob.
#[derive(Debug, Clone, PartialEq)]
pub enum Backfill {
    /// Create these Jobs, oldest slot first (none while `parallel` of its Jobs run).
    Run {
        /// The annotation's value.
        request: String,
        /// The start of the range: a created slot records `[from, slot]` as run.
        from: Timestamp,
        /// The slots and their Jobs.
        creates: Vec<(Timestamp, Box<NewWorkload>)>,
    },
    /// Every slot of the range ran: remove the request, then say so.
    Done {
        /// The annotation's value.
        request: String,
        /// The `BackfillDone` note.
        note: String,
    },
    /// The request cannot run: remove it; the Warning says why.
    Invalid {
        /// The annotation's value.
        request: String,
        /// The Warning Event.
        warning: Action,
    },
}

impl Backfill {
    /// The annotation's value this step acts on.
    pub fn request(&self) -> &str {
        match self {
            Backfill::Run { request, .. }
            | Backfill::Done { request, .. }
            | Backfill::Invalid { request, .. } => request,
        }
    }
}

/// The slots `status` (of `cj`) knows did not run, less what this process ran for a backfill
/// and has yet to see stored.
pub fn gaps(cj: &CronJob, records: Records) -> Vec<Gap> {
    let gaps = backfill::missed(cj);
    match records.backfilled {
        Some((from, through)) => backfill::subtract(&gaps, from, through),
        None => gaps,
    }
}

/// Record in `status` that the scheduler passed over the slots strictly between `last` (the
/// latest slot that ran; the creation time before any) and `due` (the slot it acts on now), if
/// the schedule names any: `gaps` is what the status knew.
pub fn record_passed_over(
    cj: &CronJob,
    gaps: &mut Vec<Gap>,
    last: Timestamp,
    due: Timestamp,
    status: &mut CronJobStatus,
) {
    let Ok((schedule, tz)) = super::scheduling::inputs(cj) else {
        return;
    };
    if schedule.every_seconds().is_some() {
        return;
    }
    if schedule.next_after(last, &tz).is_some_and(|s| s < due) {
        let added = backfill::add(
            gaps,
            Gap {
                after: Some(last),
                before: due,
            },
        );
        if added != *gaps {
            *gaps = added;
            status.missed = Some(backfill::to_status(gaps));
        }
    }
}

/// The backfill step for `cj`, its `owned` Jobs and the slots known not to have run (`gaps`,
/// see [`gaps`]); it sets `status.backfill` (and `status.missed` once done).
pub fn step(
    cj: &CronJob,
    owned: &[&Workload],
    gaps: &[Gap],
    calendars: &Calendars,
    now: Timestamp,
    cfg: &PlanConfig,
    status: &mut CronJobStatus,
) -> Option<Backfill> {
    let Some(value) = backfill::requested(cj) else {
        status.backfill = None;
        return None;
    };
    if cj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let request = value.to_string();
    let parsed = match Request::parse(value) {
        Ok(parsed) => parsed,
        Err(why) => return Some(invalid(request, why)),
    };
    let Calendars::Found(exclusions) = calendars else {
        // A Calendar it names is missing: no slot runs, backfilled or scheduled, until it
        // exists (the `CalendarNotFound` condition says which); the request waits.
        return None;
    };
    let exists = |slot| has_job(cj, owned, slot, |_| true);
    let slots = match backfill::plan_slots(cj, &parsed, gaps, exclusions, now, exists) {
        Ok(slots) => slots,
        Err(why) => return Some(invalid(request, why)),
    };
    let progress = status
        .backfill
        .take()
        .filter(|p| p.request == request)
        .unwrap_or(BackfillProgress {
            request: request.clone(),
            created: 0,
        });
    let pending: Vec<Timestamp> = slots
        .iter()
        .filter(|(_, state)| *state == SlotState::Run)
        .map(|(slot, _)| *slot)
        .collect();
    if pending.is_empty() {
        let to = parsed.to.min(now);
        let rest = backfill::subtract(gaps, parsed.from, to);
        if rest != gaps {
            status.missed = Some(backfill::to_status(&rest));
        }
        let note = done_note(cj, owned, &parsed, to, &slots, progress.created);
        status.backfill = Some(progress);
        return Some(Backfill::Done { request, note });
    }
    let creates = creates(cj, owned, parsed.parallel, pending, cfg)?;
    // Gaps as they stand, so each create can take its slots out of them.
    status.missed = Some(backfill::to_status(gaps));
    status.backfill = Some(progress);
    Some(Backfill::Run {
        request,
        from: parsed.from,
        creates,
    })
}

/// A `request` that cannot run, for `why`: it is removed, with an `InvalidBackfill` Warning.
fn invalid(request: String, why: String) -> Backfill {
    let warning = event(
        EventType::Warning,
        INVALID_BACKFILL,
        format!("Annotation {ANNOTATION_BACKFILL} {request:?}: {why}; removed"),
    );
    Backfill::Invalid { request, warning }
}

/// Whether one of the `owned` Jobs named for `slot` (a scheduled slot's name: a backfill's Job
/// has it too) is `such`.
fn has_job(
    cj: &CronJob,
    owned: &[&Workload],
    slot: Timestamp,
    such: impl Fn(&Workload) -> bool,
) -> bool {
    let name = jobs::scheduled_name(cj.metadata.name.as_deref().unwrap_or_default(), slot);
    owned
        .iter()
        .any(|j| j.metadata.name.as_deref() == Some(name.as_str()) && such(j))
}

/// The `BackfillDone` note of the range `[parsed.from, to]` whose `slots` are all done: how
/// many Jobs it created (the count the status kept, `counted`, or the backfill's Jobs of the
/// range that exist when more: a count lost to a conflicting status write), how many slots had
/// run already, and how many calendars or the window ruled out.
fn done_note(
    cj: &CronJob,
    owned: &[&Workload],
    parsed: &Request,
    to: Timestamp,
    slots: &[(Timestamp, SlotState)],
    counted: i32,
) -> String {
    let present = slots
        .iter()
        .filter(|(slot, _)| has_job(cj, owned, *slot, |w| jobs::backfilled(&w.metadata)))
        .count();
    let created = usize::try_from(counted.max(0)).unwrap_or(0).max(present);
    let ruled_out = slots
        .iter()
        .filter(|(_, state)| matches!(state, SlotState::Excluded(_) | SlotState::OutsideWindow))
        .count();
    let ran = slots.len().saturating_sub(created + ruled_out);
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut note = format!(
        "Backfill of {} to {} done: {} created, {} already run",
        parsed.from,
        to,
        plural(created, "Job", "Jobs"),
        plural(ran, "slot", "slots"),
    );
    if ruled_out > 0 {
        note.push_str(&format!(
            ", {} ruled out by calendars or the window",
            plural(ruled_out, "slot", "slots")
        ));
    }
    note
}

/// The Jobs to create now for the `pending` slots, oldest first: as many as leave at most
/// `parallel` of the backfill's Jobs unfinished. `None` when the schedule has no time zone to
/// name the slots in (the request is left as it is).
fn creates(
    cj: &CronJob,
    owned: &[&Workload],
    parallel: u32,
    pending: Vec<Timestamp>,
    cfg: &PlanConfig,
) -> Option<Vec<(Timestamp, Box<NewWorkload>)>> {
    let running = owned
        .iter()
        .filter(|j| {
            jobs::backfilled(&j.metadata)
                && j.outcome().is_none()
                && j.metadata.deletion_timestamp.is_none()
        })
        .count();
    let room = usize::try_from(parallel)
        .unwrap_or(1)
        .saturating_sub(running);
    let tz = backfill::schedule_of(cj).map(|(_, tz)| tz).ok()?;
    let creates = pending
        .into_iter()
        .take(room)
        .filter_map(|slot| {
            let job = jobs::for_backfill(cj, slot, &tz, cfg.default_job_ttl)?;
            Some((slot, Box::new(job)))
        })
        .collect();
    Some(creates)
}

/// Record in `status` that the backfill from `from` created (or found) the Job of `slot`: the
/// slots of `[from, slot]` ran. `created`: a new Job, counted.
pub fn record_created(status: &mut CronJobStatus, from: Timestamp, slot: Timestamp, created: bool) {
    let gaps: Vec<Gap> = status
        .missed
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|m| Gap {
            after: m.after.as_ref().map(|t| t.0),
            before: m.before.0,
        })
        .collect();
    status.missed = Some(backfill::to_status(&backfill::subtract(&gaps, from, slot)));
    if created && let Some(progress) = status.backfill.as_mut() {
        progress.created = progress.created.saturating_add(1);
    }
}

#[cfg(test)]
mod tests;
