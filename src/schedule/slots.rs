//! Missed-run computation (upstream `mostRecentScheduleTime`).

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::{Schedule, floor_second};

/// Slots counted exactly; above this `missed` only promises "more than 100".
const COUNT_LIMIT: u64 = 101;

/// Inputs of the missed-run computation.
#[derive(Debug, Clone, Copy)]
pub struct SlotQuery<'a> {
    /// The parsed schedule.
    pub schedule: &'a Schedule,
    /// The CronJob's zone (see [`super::time_zone`]).
    pub tz: &'a TimeZone,
    /// `status.lastScheduleTime`.
    pub last_schedule_time: Option<Timestamp>,
    /// `metadata.creationTimestamp`, the anchor when nothing ran yet.
    pub creation_timestamp: Timestamp,
    /// `spec.startingDeadlineSeconds` (must be >= 0).
    pub starting_deadline_seconds: Option<i64>,
    /// The current time.
    pub now: Timestamp,
}

/// Result of the missed-run computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    /// The most recent slot `<= now` that has not run yet and is still within the starting
    /// deadline: the one Job to create now. Older missed slots are never run (no backfill).
    pub due: Option<Timestamp>,
    /// Slots in `(anchor, now]`, where anchor is lastScheduleTime (else creationTimestamp),
    /// narrowed to `now - startingDeadlineSeconds`. Exact up to 100; any value above 100 means
    /// "more than 100" (the reconciler then emits `TooManyMissedTimes`, yet `due` still runs).
    pub missed: u64,
    /// When to look again: the first slot strictly after `now`, or after the anchor when the
    /// anchor is ahead of the clock (the clock went back; the slots up to the anchor have run).
    pub next: Option<Timestamp>,
}

/// Why slots could not be computed.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum SlotError {
    /// The schedule can never fire, e.g. `0 0 30 2 *` (upstream: `InvalidSchedule`).
    #[error("schedule {0} never fires")]
    NeverFires(String),
    /// `startingDeadlineSeconds` is negative.
    #[error("startingDeadlineSeconds must be >= 0, got {0}")]
    NegativeDeadline(i64),
}

/// Compute which slot is due now, how many were missed and when the next one is.
///
/// Semantics follow upstream `mostRecentScheduleTime`: the anchor is lastScheduleTime, else
/// creationTimestamp; with startingDeadlineSeconds it is raised to `now - deadline`, so a
/// slot older than the deadline is never due; only the most recent missed slot runs.
/// Unlike upstream the count is exact (upstream estimates it from the gap between two slots
/// and can miss the most recent slot of irregular schedules such as `30 10,11,12 * * 1-5`),
/// and the cost does not grow with the outage: at most 101 slots are visited.
///
/// `@every d`: slots are `anchor + k*d` (anchor rounded down to the second), anchored on
/// lastScheduleTime, else creationTimestamp, as upstream. Deliberate fix of upstream's S7b
/// quirk: the deadline only filters slots, it never moves the grid, so a slot still within
/// its deadline is due even when `deadline < d`.
pub fn slots(q: &SlotQuery) -> Result<Slots, SlotError> {
    if let Some(d) = q.starting_deadline_seconds
        && d < 0
    {
        return Err(SlotError::NegativeDeadline(d));
    }
    if !q.schedule.ever_fires() {
        return Err(SlotError::NeverFires(q.schedule.describe()));
    }
    let anchor = q.last_schedule_time.unwrap_or(q.creation_timestamp);
    let window_start = match q.starting_deadline_seconds {
        Some(d) => {
            let limit = q
                .now
                .checked_sub(SignedDuration::from_secs(d))
                .unwrap_or(Timestamp::MIN);
            anchor.max(limit)
        }
        None => anchor,
    };
    match q.schedule.every_seconds() {
        Some(d) => Ok(every_slots(floor_second(anchor), d, window_start, q.now)),
        None => cron_slots(q, window_start),
    }
}

fn cron_slots(q: &SlotQuery, window_start: Timestamp) -> Result<Slots, SlotError> {
    let never = || SlotError::NeverFires(q.schedule.describe());
    // `window_start` is at least the anchor, and at most `now` unless the anchor is ahead.
    let next = q.schedule.next_after(q.now.max(window_start), q.tz);
    if next.is_none() {
        return Err(never());
    }
    if window_start >= q.now {
        return Ok(Slots {
            due: None,
            missed: 0,
            next,
        });
    }
    let Some(first) = q.schedule.next_after(window_start, q.tz) else {
        return Err(never());
    };
    if first > q.now {
        return Ok(Slots {
            due: None,
            missed: 0,
            next,
        });
    }
    // Most recent slot <= now, found backwards: no walk over the outage.
    let due = q
        .schedule
        .prev_at_or_before(q.now, q.tz)
        .filter(|t| *t > window_start)
        .unwrap_or(first);
    // Count (window_start, now], stopping at 101.
    let mut missed = 1;
    let mut t = first;
    while missed < COUNT_LIMIT {
        match q.schedule.next_after(t, q.tz) {
            Some(n) if n <= q.now => {
                missed += 1;
                t = n;
            }
            _ => break,
        }
    }
    Ok(Slots {
        due: Some(due),
        missed,
        next,
    })
}

fn every_slots(base: Timestamp, d: i64, window_start: Timestamp, now: Timestamp) -> Slots {
    let base_s = base.as_second();
    let now_s = floor_second(now).as_second();
    let at = |k: i64| {
        k.checked_mul(d)
            .and_then(|o| o.checked_add(base_s))
            .and_then(|s| Timestamp::from_second(s).ok())
    };
    // Index of the last slot <= now (0 means none yet: slot 0 is the anchor itself).
    let k_due = if now_s < base_s {
        0
    } else {
        (now_s - base_s) / d
    };
    let next = at(k_due + 1);
    if k_due == 0 {
        return Slots {
            due: None,
            missed: 0,
            next,
        };
    }
    // First slot index strictly after window_start.
    let ws = window_start.as_second();
    let k_min = if ws < base_s {
        1
    } else {
        (ws - base_s).div_euclid(d) + 1
    };
    if k_min > k_due {
        return Slots {
            due: None,
            missed: 0,
            next,
        };
    }
    let missed = u64::try_from(k_due - k_min + 1).unwrap_or(u64::MAX);
    Slots {
        due: at(k_due),
        missed,
        next,
    }
}
