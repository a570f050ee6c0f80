//! Schedules of several expressions: merged slots (one per instant, whatever matches it), each
//! expression with its own DST rule, missed runs over the merged slots, the period, and the
//! errors of a list.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::*;
use crate::testing::fixtures::t;

fn zone(name: &str) -> TimeZone {
    time_zone(Some(name)).expect("zone")
}

fn list(exprs: &[&str]) -> Schedule {
    Schedule::parse_each(exprs, "ns/cj").expect("parses")
}

/// The first `n` slots after `from`, RFC 3339 in UTC.
fn walk(schedule: &Schedule, tz: &TimeZone, from: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = t(from);
    while out.len() < n {
        let Some(next) = schedule.next_after(at, tz) else {
            break;
        };
        out.push(next.to_string());
        at = next;
    }
    out
}

#[test]
fn merged_slots_are_the_union_with_one_slot_per_instant() {
    // (what, expressions, zone, from, the slots after it)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, &'a str, &'a [&'a str]);
    let cases: &[Case] = &[
        (
            "every 2 and every 3 minutes: minute 6 once",
            &["*/2 * * * *", "*/3 * * * *"],
            "UTC",
            "2024-01-01T10:00:00Z",
            &[
                "2024-01-01T10:02:00Z",
                "2024-01-01T10:03:00Z",
                "2024-01-01T10:04:00Z",
                "2024-01-01T10:06:00Z",
                "2024-01-01T10:08:00Z",
                "2024-01-01T10:09:00Z",
                "2024-01-01T10:10:00Z",
                "2024-01-01T10:12:00Z",
            ],
        ),
        (
            "the same expression twice is the expression",
            &["0 * * * *", "0 * * * *"],
            "UTC",
            "2024-01-01T10:00:00Z",
            &["2024-01-01T11:00:00Z", "2024-01-01T12:00:00Z"],
        ),
        (
            "weekdays at 9, weekends at 10",
            &["0 9 * * MON-FRI", "0 10 * * SAT,SUN"],
            "UTC",
            "2024-01-05T12:00:00Z",
            &[
                "2024-01-06T10:00:00Z",
                "2024-01-07T10:00:00Z",
                "2024-01-08T09:00:00Z",
            ],
        ),
        (
            "spring forward: the skipped 02:30 runs at the jump, which */30 also matches: once",
            &["30 2 * * *", "*/30 * * * *"],
            "America/New_York",
            "2024-03-10T06:00:00Z",
            &[
                "2024-03-10T06:30:00Z",
                "2024-03-10T07:00:00Z",
                "2024-03-10T07:30:00Z",
            ],
        ),
        (
            "fall back: the fixed 01:30 runs once, the hourly one in both 01:00s",
            &["30 1 * * *", "0 * * * *"],
            "America/New_York",
            "2024-11-03T04:30:00Z",
            &[
                "2024-11-03T05:00:00Z",
                "2024-11-03T05:30:00Z",
                "2024-11-03T06:00:00Z",
                "2024-11-03T07:00:00Z",
            ],
        ),
        (
            "an expression that never fires leaves the others",
            &["0 0 30 2 *", "0 12 * * *"],
            "UTC",
            "2024-01-01T00:00:00Z",
            &["2024-01-01T12:00:00Z", "2024-01-02T12:00:00Z"],
        ),
    ];
    for (what, exprs, tz, from, want) in cases {
        let got = walk(&list(exprs), &zone(tz), from, want.len());
        assert_eq!(got, *want, "{what}");
    }
}

#[test]
fn the_last_slot_is_the_latest_of_each_expressions_last_slot() {
    let tz = TimeZone::UTC;
    let s = list(&["0 9 * * *", "0 17 * * *"]);
    let cases = [
        ("2024-01-02T08:00:00Z", Some("2024-01-01T17:00:00Z")),
        ("2024-01-02T09:00:00Z", Some("2024-01-02T09:00:00Z")),
        ("2024-01-02T16:59:59Z", Some("2024-01-02T09:00:00Z")),
    ];
    for (at, want) in cases {
        let got = s.prev_at_or_before(t(at), &tz).map(|x| x.to_string());
        assert_eq!(got.as_deref(), want, "at {at}");
    }
    // Walking forward from the last slot gives the next one: the two searches agree.
    let dst = list(&["30 2 * * *", "*/30 * * * *"]);
    let ny = zone("America/New_York");
    let mut at = t("2024-03-09T12:00:00Z");
    for _ in 0..200 {
        let next = dst.next_after(at, &ny).expect("fires");
        assert_eq!(dst.prev_at_or_before(next, &ny), Some(next), "{next}");
        at = next;
    }
}

#[test]
fn missed_runs_count_the_merged_slots_within_the_deadline() {
    let tz = TimeZone::UTC;
    // (what, expressions, lastScheduleTime, deadline, now, due, missed, next)
    type Case<'a> = (
        &'a str,
        &'a [&'a str],
        &'a str,
        Option<i64>,
        &'a str,
        Option<&'a str>,
        u64,
        &'a str,
    );
    let cases: &[Case] = &[
        (
            "every 2 and 3 minutes, 12 minutes down: 8 slots, the latest runs",
            &["*/2 * * * *", "*/3 * * * *"],
            "2024-01-01T10:00:00Z",
            None,
            "2024-01-01T10:12:30Z",
            Some("2024-01-01T10:12:00Z"),
            8,
            "2024-01-01T10:14:00Z",
        ),
        (
            "the deadline narrows the window to 10:08:59-10:12:30",
            &["*/2 * * * *", "*/3 * * * *"],
            "2024-01-01T10:00:00Z",
            Some(211),
            "2024-01-01T10:12:30Z",
            Some("2024-01-01T10:12:00Z"),
            3,
            "2024-01-01T10:14:00Z",
        ),
        (
            "the missed 17:00 of yesterday runs the next morning",
            &["0 9 * * *", "0 17 * * *"],
            "2024-01-01T09:00:00Z",
            None,
            "2024-01-02T08:00:00Z",
            Some("2024-01-01T17:00:00Z"),
            1,
            "2024-01-02T09:00:00Z",
        ),
        (
            "but not past its deadline",
            &["0 9 * * *", "0 17 * * *"],
            "2024-01-01T09:00:00Z",
            Some(3600),
            "2024-01-02T08:00:00Z",
            None,
            0,
            "2024-01-02T09:00:00Z",
        ),
    ];
    for (what, exprs, last, deadline, now, due, missed, next) in cases {
        let schedule = list(exprs);
        let got = slots(&SlotQuery {
            schedule: &schedule,
            tz: &tz,
            last_schedule_time: Some(t(last)),
            creation_timestamp: t("2024-01-01T00:00:00Z"),
            starting_deadline_seconds: *deadline,
            now: t(now),
        })
        .expect("slots");
        assert_eq!(
            got.due.map(|d| d.to_string()).as_deref(),
            *due,
            "{what}: due"
        );
        assert_eq!(got.missed, *missed, "{what}: missed");
        assert_eq!(got.next, Some(t(next)), "{what}: next");
    }
}

#[test]
fn more_than_a_hundred_missed_merged_slots_still_run_the_latest() {
    let schedule = list(&["* * * * *", "*/5 * * * *"]);
    let got = slots(&SlotQuery {
        schedule: &schedule,
        tz: &TimeZone::UTC,
        last_schedule_time: Some(t("2024-01-01T00:00:00Z")),
        creation_timestamp: t("2024-01-01T00:00:00Z"),
        starting_deadline_seconds: None,
        now: t("2024-01-03T00:00:30Z"),
    })
    .expect("slots");
    assert_eq!(got.due, Some(t("2024-01-03T00:00:00Z")));
    assert!(got.missed > 100, "{}", got.missed);
}

#[test]
fn the_period_is_the_shortest_gap_of_the_expressions() {
    let tz = TimeZone::UTC;
    let cases: &[(&[&str], &str, i64)] = &[
        (&["*/2 * * * *", "*/3 * * * *"], "2024-01-01T10:03:00Z", 120),
        (&["0 9 * * *", "0 * * * *"], "2024-01-01T09:00:00Z", 3600),
        (
            &["0 9 * * MON-FRI", "0 10 * * SAT,SUN"],
            "2024-01-05T09:00:00Z",
            86_400,
        ),
        (&["0 9 * * 1-5"], "2024-01-05T09:00:00Z", 3 * 86_400),
        (&["@every 90m"], "2024-01-01T01:30:00Z", 5400),
    ];
    for (exprs, next, want) in cases {
        let got = list(exprs).period_at(t(next), &tz).map(|d| d.as_secs());
        assert_eq!(got, Some(*want), "{exprs:?} at {next}");
    }
}

#[test]
fn h_hashes_the_same_key_in_every_expression() {
    let both = list(&["H 9 * * *", "H 17 * * *"]);
    let morning = Schedule::parse("H 9 * * *", "ns/cj").expect("parses");
    let first: Timestamp = morning
        .next_after(t("2024-01-01T00:00:00Z"), &TimeZone::UTC)
        .expect("fires");
    let minute = first.to_zoned(TimeZone::UTC).minute();
    let slots = walk(&both, &TimeZone::UTC, "2024-01-01T00:00:00Z", 2);
    assert_eq!(
        slots,
        [
            format!("2024-01-01T09:{minute:02}:00Z"),
            format!("2024-01-01T17:{minute:02}:00Z")
        ]
    );
    assert!(both.uses_hash());
}

#[test]
fn a_list_parses_each_expression_and_says_which_one_failed() {
    let err = |exprs: &[&str]| Schedule::parse_each(exprs, "ns/cj").expect_err("refused");
    assert_eq!(err(&[]), ListError::Empty);
    let bad = err(&["0 * * * *", "61 * * * *"]);
    assert_eq!(bad.index(), Some(1));
    assert_eq!(
        bad.to_string(),
        "\"61 * * * *\": end of range (61) above maximum (59): 61"
    );
    let every = err(&["0 * * * *", "@every 90m"]);
    assert_eq!(every.index(), Some(1));
    assert!(matches!(every, ListError::EveryCombined { .. }), "{every}");
    // One expression is exactly `parse`: `@every` alone is fine.
    let one = Schedule::parse_each(&["@every 90m"], "").expect("parses");
    assert_eq!(one, Schedule::parse("@every 90m", "").expect("parses"));
    assert_eq!(one.every_seconds(), Some(5400));
    let two = list(&["*/2 * * * *", "*/3 * * * *"]);
    assert_eq!(two.len(), 2);
    assert_eq!(two.every_seconds(), None);
    assert_eq!(two.describe(), "[\"*/2 * * * *\", \"*/3 * * * *\"]");
    assert_eq!(
        Schedule::parse("0 0 30 2 *", "")
            .expect("parses")
            .describe(),
        "\"0 0 30 2 *\""
    );
}

#[test]
fn remembered_schedules_equal_parsed_ones_and_h_keeps_its_key() {
    let plain = vec!["*/5 * * * *".to_string()];
    let hashed = vec!["H H * * *".to_string()];
    for key in ["ns/a", "ns/b", "other/c"] {
        for exprs in [&plain, &hashed] {
            assert_eq!(
                Schedule::parse_each_memo(exprs, key).expect("parses"),
                Schedule::parse_each(exprs, key).expect("parses"),
                "{exprs:?} for {key}"
            );
        }
    }
    // Asked again, still each key's own H values.
    let a = Schedule::parse_each_memo(&hashed, "ns/a").expect("parses");
    let b = Schedule::parse_each_memo(&hashed, "ns/b").expect("parses");
    assert_eq!(a, Schedule::parse_each(&hashed, "ns/a").expect("parses"));
    assert_eq!(b, Schedule::parse_each(&hashed, "ns/b").expect("parses"));
    // Errors are errors every time.
    let bad = vec!["61 * * * *".to_string()];
    assert!(Schedule::parse_each_memo(&bad, "ns/a").is_err());
    assert!(Schedule::parse_each_memo(&bad, "ns/a").is_err());
}
