//! Fixed-time schedules on the wall clock.
//!
//! A fixed-time schedule names wall-clock times (`0,30 2 * * *`: 02:00 and 02:30 of every
//! day). Each such time runs once, at the first instant at which the zone's clock shows that
//! time or a later one:
//!
//! - a time that exists once runs at that instant;
//! - a time of a repeated range runs on the first pass only;
//! - a time skipped by a forward jump runs at the jump, the first instant after the gap.
//!
//! As a map from wall-clock times to instants this is
//! `first(w) = min { t : clock(t) >= w }`, which never decreases as `w` grows; several times
//! that map to the same instant run once. So the slot after an instant `a` is `first(w)` for
//! the first matching `w` the clock has not yet reached by `a`, and the slot at or before `a`
//! is `first(w)` for the last one it has reached. The matching wall-clock times come from
//! croner evaluated in UTC, a civil timeline without clock changes.

use croner::Cron;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};

use super::floor_second;

/// The first slot strictly after `after`.
pub(super) fn next_after(engine: &Cron, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    let reached = reached(after, tz);
    let from = reached.to_zoned(TimeZone::UTC).ok()?;
    let wall = engine.find_next_occurrence(&from, false).ok()?.datetime();
    first_instant(wall, tz)
}

/// The last slot at or before `at`.
pub(super) fn prev_at_or_before(engine: &Cron, at: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    let reached = reached(at, tz);
    let from = reached.to_zoned(TimeZone::UTC).ok()?;
    let wall = engine
        .find_previous_occurrence(&from, true)
        .ok()?
        .datetime();
    first_instant(wall, tz)
}

/// The latest whole-second wall-clock time the clock has shown at or before `at`: the local
/// time of `at`, except on the second pass of a repeated range, where the clock already showed
/// every time up to the end of the range just before it was set back.
fn reached(at: Timestamp, tz: &TimeZone) -> DateTime {
    let at = floor_second(at);
    let local = tz.to_datetime(at);
    let AmbiguousOffset::Fold { before, after } = tz.to_ambiguous_timestamp(local).offset() else {
        return local;
    };
    if after.to_timestamp(local).ok() != Some(at) {
        // First pass.
        return local;
    }
    // The transition that started this pass: the latest one at or before `at` that moved the
    // offset from `before` to `after`.
    let second = SignedDuration::from_secs(1);
    let start = tz
        .preceding(at.checked_add(second).unwrap_or(at))
        .take(4)
        .filter(|tr| tr.offset() == after)
        .map(|tr| tr.timestamp())
        .find(|t| {
            t.checked_sub(second)
                .is_ok_and(|just_before| tz.to_offset(just_before) == before)
        });
    start
        .and_then(|t| before.to_datetime(t).checked_sub(second).ok())
        .map_or(local, |end| end.max(local))
}

/// The first instant at which the clock shows `wall` or a later time.
fn first_instant(wall: DateTime, tz: &TimeZone) -> Option<Timestamp> {
    match tz.to_ambiguous_timestamp(wall).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(wall).ok(),
        // The first pass of a repeated range is on the earlier offset.
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(wall).ok(),
        AmbiguousOffset::Gap { before, after } => {
            // Read with the new offset, `wall` lies before the jump; with the old one, after
            // it. The jump is the first transition in between to the new offset.
            let early = after.to_timestamp(wall).ok()?;
            let late = before.to_timestamp(wall).ok()?;
            let jump = tz
                .following(early)
                .take(4)
                .find(|tr| tr.offset() == after)
                .map(|tr| tr.timestamp());
            Some(jump.map_or(late, |t| t.min(late)))
        }
    }
}
