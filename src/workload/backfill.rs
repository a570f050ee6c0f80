//! Backfill: running the past slots of a range that never ran, each as the Job its slot's
//! schedule would have made (same name, same scheduled-time annotation). Pure: the request,
//! the record of slots that did not run, and which slots of a range a backfill runs. Shared by
//! the controller (which runs them) and `kubectl kronjob backfill` (which shows them).
//!
//! A slot runs once. A Job that exists records its slot, but Jobs go (history limits, TTL), so
//! Job existence alone cannot say a slot never ran. The CronJob's status says which slots did
//! not run ([`MissedSlots`] in `status.missed`): the controller adds the slots it passed over
//! when it runs the next one; the slots up to the CronJob's creation never ran (unless it was
//! migrated from batch/v1, whose past kronjob does not know). A backfill runs only slots that
//! record names, oldest first, and removes them from it as their Jobs are created. What the
//! record forgets (more than [`MAX_MISSED_RANGES`] ranges) counts as run: a forgotten slot is
//! never run by a backfill, never run twice.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

pub use crate::api::backfill::{MAX_PARALLEL, Request};
use crate::api::{ANNOTATION_BACKFILL, CronJob, CronJobStatus, MissedSlots};
use crate::schedule::exclusions::{Exclusions, Skip, Verdict, verdict};
use crate::schedule::{self, Schedule};

/// Most slots in one backfill's range: a longer range is refused (and the controller's work
/// per reconcile stays bounded).
pub const MAX_SLOTS: usize = 1000;
/// Most ranges `status.missed` keeps; the oldest is forgotten first.
pub const MAX_MISSED_RANGES: usize = 20;
/// The annotation `kubectl kronjob migrate` leaves on a CronJob migrated from batch/v1.
pub const MIGRATED_FROM: &str = "batch.kronjob.dev/migrated-from";

/// The backfill request on `cj`, if any: its annotation's value.
pub fn requested(cj: &CronJob) -> Option<&str> {
    cj.metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_BACKFILL)
        .map(String::as_str)
}

/// A range of slots that did not run: strictly after `after` (from the beginning when `None`)
/// and strictly before `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The range starts after this time; `None`: from the beginning.
    pub after: Option<Timestamp>,
    /// The range ends before this time.
    pub before: Timestamp,
}

impl Gap {
    /// Whether `slot` is in the range.
    pub fn contains(&self, slot: Timestamp) -> bool {
        self.after.is_none_or(|a| slot > a) && slot < self.before
    }

    fn is_empty(&self) -> bool {
        self.after.is_some_and(|a| a >= self.before)
    }
}

/// The slots `cj` knows did not run: `status.missed`, or, before anything was recorded there,
/// the slots up to its creation (none for a CronJob migrated from batch/v1).
pub fn missed(cj: &CronJob) -> Vec<Gap> {
    missed_of(&cj.metadata, cj.status.as_ref())
}

/// [`missed`] of the CronJob with `metadata` and `status`.
pub fn missed_of(metadata: &ObjectMeta, status: Option<&CronJobStatus>) -> Vec<Gap> {
    if let Some(list) = status.and_then(|s| s.missed.as_ref()) {
        return list
            .iter()
            .map(|m| Gap {
                after: m.after.as_ref().map(|t| t.0),
                before: m.before.0,
            })
            .collect();
    }
    let migrated = metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIGRATED_FROM));
    match metadata.creation_timestamp.as_ref() {
        // A slot at the creation second never runs either (the schedule starts after it).
        Some(created) if !migrated => vec![Gap {
            after: None,
            before: created
                .0
                .checked_add(SignedDuration::from_secs(1))
                .unwrap_or(Timestamp::MAX),
        }],
        _ => Vec::new(),
    }
}

/// `gaps` as `status.missed` holds them.
pub fn to_status(gaps: &[Gap]) -> Vec<MissedSlots> {
    gaps.iter()
        .map(|g| MissedSlots {
            after: g.after.map(Time),
            before: Time(g.before),
        })
        .collect()
}

/// Whether any of `gaps` holds `slot`.
pub fn contains(gaps: &[Gap], slot: Timestamp) -> bool {
    gaps.iter().any(|g| g.contains(slot))
}

/// `gaps` with `gap` added: sorted, overlapping ranges merged, at most [`MAX_MISSED_RANGES`]
/// (the oldest forgotten: its slots count as run).
pub fn add(gaps: &[Gap], gap: Gap) -> Vec<Gap> {
    let mut all: Vec<Gap> = gaps.iter().copied().chain([gap]).collect();
    all.retain(|g| !g.is_empty());
    all.sort_by_key(|g| (g.after.is_some(), g.after, g.before));
    let mut merged: Vec<Gap> = Vec::with_capacity(all.len());
    for g in all {
        match merged.last_mut() {
            // Open ranges: (a, b) and (c, d) with c < b share the instants between.
            Some(last) if g.after.is_none_or(|c| c < last.before) => {
                last.before = last.before.max(g.before);
            }
            _ => merged.push(g),
        }
    }
    let excess = merged.len().saturating_sub(MAX_MISSED_RANGES);
    merged.drain(..excess);
    merged
}

/// `gaps` without the slots of `[from, through]` (they ran).
pub fn subtract(gaps: &[Gap], from: Timestamp, through: Timestamp) -> Vec<Gap> {
    let mut out = Vec::with_capacity(gaps.len() + 1);
    for g in gaps {
        if !(g.after.is_none_or(|a| a < through) && from < g.before) {
            out.push(*g);
            continue;
        }
        let left = Gap {
            after: g.after,
            before: g.before.min(from),
        };
        let right = Gap {
            after: Some(g.after.map_or(through, |a| a.max(through))),
            before: g.before,
        };
        for part in [left, right] {
            if !part.is_empty() && part.after.is_none_or(|a| a < part.before) {
                out.push(part);
            }
        }
    }
    out.retain(|g| !g.is_empty());
    out
}

/// The schedule's slots within `[from, to]`, oldest first; `Err` with the count so far when
/// there are more than `limit`.
pub fn slots_between(
    schedule: &Schedule,
    tz: &TimeZone,
    from: Timestamp,
    to: Timestamp,
    limit: usize,
) -> Result<Vec<Timestamp>, usize> {
    let mut out = Vec::new();
    // Just before `from`; the first instant of all has nothing before it, and is no slot.
    let mut at = from
        .checked_sub(SignedDuration::from_nanos(1))
        .unwrap_or(from);
    while let Some(next) = schedule.next_after(at, tz) {
        if next > to {
            break;
        }
        if out.len() == limit {
            return Err(out.len() + 1);
        }
        out.push(next);
        at = next;
    }
    Ok(out)
}

/// The schedule and time zone of `cj`, as the controller reads them (`H` hashed on
/// `namespace/name`); `Err` says why it has none, or that `@every` (whose slots hang off the
/// last run) cannot be backfilled.
pub fn schedule_of(cj: &CronJob) -> Result<(Schedule, TimeZone), String> {
    let tz = schedule::time_zone(cj.spec.time_zone.as_deref()).map_err(|e| e.to_string())?;
    let exprs = cj.spec.schedule_exprs().map_err(|e| e.to_string())?;
    let key = format!(
        "{}/{}",
        cj.metadata.namespace.as_deref().unwrap_or_default(),
        cj.metadata.name.as_deref().unwrap_or_default()
    );
    let schedule = Schedule::parse_each(exprs, &key).map_err(|e| e.to_string())?;
    if schedule.every_seconds().is_some() {
        return Err(
            "an @every schedule cannot be backfilled: its slots depend on its last run".into(),
        );
    }
    Ok((schedule, tz))
}

/// What a backfill does with one slot of its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotState {
    /// Not known to have run, and no Job: the backfill runs it.
    Run,
    /// Its Job exists (created by the schedule, or by this backfill).
    JobExists,
    /// Not recorded as missed: it ran (or may have), and is not run again.
    AlreadyRan,
    /// A calendar excludes its day: never run, as the schedule never runs it.
    Excluded(Skip),
    /// Before `notBefore` or after `notAfter`: never run.
    OutsideWindow,
}

impl SlotState {
    /// What `--dry-run` prints.
    pub fn describe(&self) -> String {
        match self {
            SlotState::Run => "run".into(),
            SlotState::JobExists => "skip: its Job exists".into(),
            SlotState::AlreadyRan => "skip: already ran".into(),
            SlotState::Excluded(skip) => format!("skip: {} excludes {}", skip.source, skip.date),
            SlotState::OutsideWindow => "skip: outside notBefore/notAfter".into(),
        }
    }
}

/// The slots of `request`'s range up to `now`, oldest first, each with what the backfill does
/// with it: `gaps` are the slots known not to have run ([`missed`], less what the backfill
/// already ran), `exists` whether a slot's Job exists; a slot `exclusions` (the CronJob's
/// calendars, resolved) or its window rule out never runs, as the schedule never runs it.
/// `Err` when the range holds more than [`MAX_SLOTS`] slots, or `cj` has no schedule a backfill
/// can walk.
pub fn plan_slots(
    cj: &CronJob,
    request: &Request,
    gaps: &[Gap],
    exclusions: &Exclusions,
    now: Timestamp,
    exists: impl Fn(Timestamp) -> bool,
) -> Result<Vec<(Timestamp, SlotState)>, String> {
    let (schedule, tz) = schedule_of(cj)?;
    let to = request.to.min(now);
    let slots = slots_between(&schedule, &tz, request.from, to, MAX_SLOTS).map_err(|_| {
        format!("the range holds more than {MAX_SLOTS} slots: backfill a shorter one")
    })?;
    let window = cj.spec.window();
    Ok(slots
        .into_iter()
        .map(|s| {
            let state = if let Verdict::Excluded(skip) = verdict(s, exclusions, &window, &tz) {
                SlotState::Excluded(skip)
            } else if !window.contains(s) {
                SlotState::OutsideWindow
            } else if exists(s) {
                SlotState::JobExists
            } else if contains(gaps, s) {
                SlotState::Run
            } else {
                SlotState::AlreadyRan
            };
            (s, state)
        })
        .collect())
}

#[cfg(test)]
mod tests;
