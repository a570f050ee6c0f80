#![no_main]
//! The schedule language and its maths: `Schedule::parse` and `parse_each` (cron, `H`,
//! descriptors, `@every`, `TZ=` prefixes), `time_zone`, then what the controller asks of a
//! parsed schedule: the next slots, the most recent one, the period, and the missed-run search
//! (`slots`).
//!
//! Input: a header line `<now> <zone> <key> [<created> [<last> [<deadline>]]]` (instants as Unix
//! seconds or RFC 3339, `-` for "not given"; `key` is the `namespace/name` that `H` hashes),
//! then one expression per line (one line: `spec.schedule`; several: `spec.schedules`).

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use kronjob::controller::cache::job::At;
use kronjob::schedule::{
    ListError, ParseError, Schedule, SlotError, SlotQuery, scheduled_at, slots, time_zone,
};
use kronjob_fuzz::{default_now, header_and_rest, instant, words};
use libfuzzer_sys::fuzz_target;

/// Slots followed forward from now in each run.
const STEPS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Some((header, rest)) = header_and_rest(data) else {
        return;
    };
    let mut header = words(header);
    let mut word = || header.next().flatten();
    let now = word().and_then(instant).unwrap_or_else(default_now);
    let zone = word();
    let key = word().unwrap_or_default();
    let created = word().and_then(instant);
    let last = word().and_then(instant);
    let deadline = word().and_then(|d| d.parse::<i64>().ok());
    let exprs: Vec<&str> = rest.split('\n').collect();

    for expr in &exprs {
        parses_alike(expr, key);
    }
    let tz = zone_of(zone);
    let Some(schedule) = parse_list(&exprs, key) else {
        return;
    };
    follows(&schedule, &tz, now);
    if let Some(created) = created {
        missed(&schedule, &tz, now, created, last, deadline);
    }
});

/// One expression: `parse` and `parse_each` of one agree; what parses keeps its text, and does
/// not depend on the key unless it uses `H`; what does not parse says why.
fn parses_alike(expr: &str, key: &str) {
    let parsed = Schedule::parse(expr, key);
    match (&parsed, Schedule::parse_each(&[expr], key)) {
        (Ok(one), Ok(each)) => assert_eq!(one, &each, "{expr:?}"),
        (
            Err(one),
            Err(ListError::Expr {
                index: 0, error, ..
            }),
        ) => {
            assert_eq!(one, &error, "{expr:?}")
        }
        (one, each) => panic!("parse and parse_each disagree on {expr:?}: {one:?}, {each:?}"),
    }
    if expr.starts_with("TZ=") || expr.starts_with("CRON_TZ=") {
        assert!(
            matches!(parsed, Err(ParseError::TimeZonePrefix(_))),
            "{expr:?}: {parsed:?}"
        );
    }
    match parsed {
        Ok(schedule) => {
            assert_eq!(schedule.as_str(), expr);
            assert_eq!(schedule.to_string(), expr);
            assert_eq!(schedule.len(), 1);
            if !schedule.uses_hash() {
                assert_eq!(
                    Schedule::parse(expr, "another/key").as_ref(),
                    Ok(&schedule),
                    "{expr:?} has no H, yet depends on the key"
                );
            }
            if let Some(seconds) = schedule.every_seconds() {
                assert!(seconds >= 1, "{expr:?}: @every of {seconds} s");
            }
        }
        Err(e) => assert!(!e.to_string().is_empty(), "{expr:?}: {e:?} has no message"),
    }
}

/// Several expressions: remembered or not, the same schedule (or the same error).
fn parse_list(exprs: &[&str], key: &str) -> Option<Schedule> {
    let each = Schedule::parse_each(exprs, key);
    let owned: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
    assert_eq!(Schedule::parse_each_memo(&owned, key), each, "{exprs:?}");
    if let Err(e) = &each {
        assert!(
            e.index().is_none_or(|i| i < exprs.len()),
            "{exprs:?}: {e:?}"
        );
        assert!(!e.to_string().is_empty());
    }
    let schedule = each.ok()?;
    assert_eq!(schedule.len(), exprs.len());
    Some(schedule)
}

/// The zone named (UTC when none): a zone that loads has exactly that name.
fn zone_of(zone: Option<&str>) -> TimeZone {
    match time_zone(zone) {
        Ok(tz) => {
            if let Some(name) = zone {
                assert_eq!(tz.iana_name(), Some(name));
            }
            tz
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            TimeZone::UTC
        }
    }
}

/// Whether croner searches at `t` (it stops at the years 1 and 5000); a slot is at most eight
/// years after the one before (29 February, across a century that has none).
fn searchable(t: Timestamp) -> bool {
    let year = t.to_zoned(TimeZone::UTC).year();
    (2..4990).contains(&year)
}

/// The slots after `now` rise strictly, each matches the expression on the wall clock of a
/// zone without transitions, reads back from its scheduled-time annotation, and has a positive
/// period; the most recent slot at or before `now` has no slot between it and `now`.
fn follows(schedule: &Schedule, tz: &TimeZone, now: Timestamp) {
    let cron = schedule.every_seconds().is_none();
    let fixed = tz.to_fixed_offset().is_ok();
    let what = schedule.describe();
    let mut after = now;
    for _ in 0..STEPS {
        let Some(next) = schedule.next_after(after, tz) else {
            assert!(
                !(schedule.ever_fires() && searchable(after)),
                "{what} fires, yet has no slot after {after}"
            );
            break;
        };
        assert!(next > after, "{what}: slot {next} is not after {after}");
        if cron {
            if fixed {
                assert!(
                    schedule.matches_civil(tz.to_datetime(next)),
                    "{what}: slot {next} does not match in {tz:?}"
                );
            }
            let text = scheduled_at(next, tz);
            // RFC 3339 offsets have whole minutes, as Go writes them; older local mean times
            // (Paris before 1911: +00:09:21) do not, and cannot read back exactly.
            if tz.to_offset(next).seconds() % 60 == 0 {
                assert_eq!(text.parse::<Timestamp>().ok(), Some(next), "{what}: {text}");
            }
            assert_eq!(At::new(&text).text(), text);
        }
        if let Some(period) = schedule.period_at(next, tz) {
            assert!(period > SignedDuration::ZERO, "{what}: period {period:?}");
        }
        after = next;
    }
    if let Some(prev) = schedule.prev_at_or_before(now, tz) {
        assert!(
            prev <= now,
            "{what}: most recent slot {prev} is after {now}"
        );
        if let Some(next) = schedule.next_after(prev, tz) {
            assert!(
                next > now,
                "{what}: {next} lies between the most recent slot {prev} and {now}"
            );
        }
    }
}

/// The missed-run search: the due slot is the most recent one at or before `now`, after the
/// anchor and within the deadline; the next one is after both.
fn missed(
    schedule: &Schedule,
    tz: &TimeZone,
    now: Timestamp,
    created: Timestamp,
    last: Option<Timestamp>,
    deadline: Option<i64>,
) {
    let what = schedule.describe();
    let query = SlotQuery {
        schedule,
        tz,
        last_schedule_time: last,
        creation_timestamp: created,
        starting_deadline_seconds: deadline,
        now,
    };
    let found = match slots(&query) {
        Ok(found) => found,
        Err(SlotError::NegativeDeadline(d)) => {
            assert!(d < 0 && deadline == Some(d));
            return;
        }
        Err(SlotError::NeverFires(_)) => {
            assert!(deadline.is_none_or(|d| d >= 0));
            return;
        }
    };
    assert!(deadline.is_none_or(|d| d >= 0));
    let anchor = last.unwrap_or(created);
    if let Some(next) = found.next {
        assert!(
            next > now && next > anchor,
            "{what}: next {next}, now {now}"
        );
    }
    let Some(due) = found.due else {
        assert_eq!(found.missed, 0, "{what}: missed without a due slot");
        return;
    };
    assert!(found.missed >= 1, "{what}: a due slot {due} not counted");
    assert!(
        due <= now && due > anchor,
        "{what}: due {due}, anchor {anchor}, now {now}"
    );
    if let Some(d) = deadline
        && let Ok(limit) = now.checked_sub(SignedDuration::from_secs(d))
    {
        assert!(due >= limit, "{what}: due {due} is past its deadline {d} s");
    }
    if schedule.every_seconds().is_none() {
        assert!(found.missed <= 101, "{what}: missed {}", found.missed);
        if let Some(after) = schedule.next_after(due, tz) {
            assert!(after > now, "{what}: {after} is due rather than {due}");
        }
    }
}
