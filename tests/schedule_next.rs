//! next_after: calendars, time zones and DST; time zone loading; job names and annotations.

use jiff::tz::TimeZone;
use kronjob::schedule::{Schedule, ZoneError, scheduled_at, time_zone};

#[path = "support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
use fixtures::t as ts;

fn tz(name: &str) -> TimeZone {
    time_zone(Some(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn next_n(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(expr, "ns/name").unwrap_or_else(|e| panic!("{expr}: {e}"));
    let zone = tz(zone);
    let mut t = ts(from);
    let mut out = Vec::new();
    for _ in 0..n {
        t = s
            .next_after(t, &zone)
            .unwrap_or_else(|| panic!("{expr} fires"));
        out.push(t.to_string());
    }
    out
}

#[test]
fn leap_years_and_month_ends() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "0 0 29 2 *",
            "2024-03-01T00:00:00Z",
            &["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"],
        ),
        // 2100 is not a leap year
        (
            "0 0 29 2 *",
            "2096-03-01T00:00:00Z",
            &["2104-02-29T00:00:00Z"],
        ),
        (
            "0 0 29 2 *",
            "2000-01-01T00:00:00Z",
            &["2000-02-29T00:00:00Z", "2004-02-29T00:00:00Z"],
        ),
        (
            "0 0 31 * *",
            "2024-01-31T00:00:01Z",
            &[
                "2024-03-31T00:00:00Z",
                "2024-05-31T00:00:00Z",
                "2024-07-31T00:00:00Z",
                "2024-08-31T00:00:00Z",
            ],
        ),
        (
            "0 0 30 * *",
            "2024-01-30T01:00:00Z",
            &["2024-03-30T00:00:00Z", "2024-04-30T00:00:00Z"],
        ),
        (
            "0 0 28-31 2 *",
            "2024-01-01T00:00:00Z",
            &[
                "2024-02-28T00:00:00Z",
                "2024-02-29T00:00:00Z",
                "2025-02-28T00:00:00Z",
            ],
        ),
        (
            "59 23 31 12 *",
            "2024-06-01T00:00:00Z",
            &["2024-12-31T23:59:00Z", "2025-12-31T23:59:00Z"],
        ),
        (
            "0 0 1 1 *",
            "2024-12-31T23:59:59Z",
            &["2025-01-01T00:00:00Z"],
        ),
    ];
    for (expr, from, want) in cases {
        assert_eq!(
            next_n(expr, "UTC", from, want.len()),
            *want,
            "{expr} from {from}"
        );
    }
}

#[test]
fn never_firing_schedules_return_none_at_once() {
    for expr in ["0 0 30 2 *", "59 23 31 2 *", "0 0 31 4 *", "0 0 30,31 2 *"] {
        let s = Schedule::parse(expr, "").expect(expr);
        let start = std::time::Instant::now();
        assert_eq!(
            s.next_after(ts("2024-01-01T00:00:00Z"), &TimeZone::UTC),
            None,
            "{expr}"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_millis(5),
            "{expr} searched"
        );
    }
}

#[test]
fn subsecond_instants_are_strictly_before_the_next_slot() {
    let s = Schedule::parse("* * * * *", "").expect("parse");
    let next = |t| s.next_after(ts(t), &TimeZone::UTC).expect("fires");
    assert_eq!(next("2024-01-15T10:00:00Z"), ts("2024-01-15T10:01:00Z"));
    assert_eq!(next("2024-01-15T10:00:00.5Z"), ts("2024-01-15T10:01:00Z"));
    assert_eq!(next("2024-01-15T09:59:59.999Z"), ts("2024-01-15T10:00:00Z"));
}

#[test]
fn zones_without_dst() {
    // Asia/Kolkata is UTC+05:30 all year.
    assert_eq!(
        next_n("30 2 * * *", "Asia/Kolkata", "2024-03-10T00:00:00Z", 3),
        [
            "2024-03-10T21:00:00Z",
            "2024-03-11T21:00:00Z",
            "2024-03-12T21:00:00Z"
        ]
    );
    assert_eq!(
        next_n("0 * * * *", "Asia/Kolkata", "2024-11-03T05:00:00Z", 2),
        ["2024-11-03T05:30:00Z", "2024-11-03T06:30:00Z"]
    );
    assert_eq!(
        next_n("0 9 * * MON", "Asia/Kolkata", "2024-01-01T00:00:00Z", 1),
        ["2024-01-01T03:30:00Z"]
    );
}

// America/New_York 2024: 2024-03-10 02:00 EST -> 03:00 EDT (07:00Z);
// 2024-11-03 02:00 EDT -> 01:00 EST (06:00Z).
#[test]
fn new_york_spring_forward() {
    // fixed time inside the gap: once, at the first instant after the jump (03:00 EDT)
    assert_eq!(
        next_n("30 2 * * *", "America/New_York", "2024-03-09T12:00:00Z", 2),
        ["2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z"]
    );
    assert_eq!(
        next_n("0 2 * * *", "America/New_York", "2024-03-09T12:00:00Z", 2),
        ["2024-03-10T07:00:00Z", "2024-03-11T06:00:00Z"]
    );
    // fixed time outside the gap is untouched
    assert_eq!(
        next_n("30 3 * * *", "America/New_York", "2024-03-09T12:00:00Z", 2),
        ["2024-03-10T07:30:00Z", "2024-03-11T07:30:00Z"]
    );
    // interval jobs follow elapsed time: 02:xx does not exist
    assert_eq!(
        next_n(
            "*/30 * * * *",
            "America/New_York",
            "2024-03-10T06:15:00Z",
            3
        ),
        [
            "2024-03-10T06:30:00Z",
            "2024-03-10T07:00:00Z",
            "2024-03-10T07:30:00Z"
        ]
    );
    assert_eq!(
        next_n("30 * * * *", "America/New_York", "2024-03-10T06:15:00Z", 2),
        ["2024-03-10T06:30:00Z", "2024-03-10T07:30:00Z"]
    );
}

#[test]
fn new_york_fall_back() {
    // fixed time in the repeated hour: once, at the first occurrence (EDT)
    assert_eq!(
        next_n("30 1 * * *", "America/New_York", "2024-11-02T12:00:00Z", 2),
        ["2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"]
    );
    // hourly: every real hour, both 01:00s
    assert_eq!(
        next_n("0 * * * *", "America/New_York", "2024-11-03T04:30:00Z", 3),
        [
            "2024-11-03T05:00:00Z",
            "2024-11-03T06:00:00Z",
            "2024-11-03T07:00:00Z"
        ]
    );
    assert_eq!(
        next_n(
            "*/20 1 * * *",
            "America/New_York",
            "2024-11-03T04:59:00Z",
            6
        ),
        [
            "2024-11-03T05:00:00Z",
            "2024-11-03T05:20:00Z",
            "2024-11-03T05:40:00Z",
            "2024-11-03T06:00:00Z",
            "2024-11-03T06:20:00Z",
            "2024-11-03T06:40:00Z"
        ]
    );
    // started inside the second 01:xx: a fixed job does not run again that day
    assert_eq!(
        next_n("45 1 * * *", "America/New_York", "2024-11-03T06:10:00Z", 1),
        ["2024-11-04T06:45:00Z"]
    );
}

// Europe/Berlin 2024: 2024-03-31 02:00 CET -> 03:00 CEST (01:00Z);
// 2024-10-27 03:00 CEST -> 02:00 CET (01:00Z).
#[test]
fn berlin() {
    assert_eq!(
        next_n("30 2 * * *", "Europe/Berlin", "2024-03-30T12:00:00Z", 2),
        ["2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"]
    );
    assert_eq!(
        next_n("30 2 * * *", "Europe/Berlin", "2024-10-26T12:00:00Z", 2),
        ["2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"]
    );
    assert_eq!(
        next_n("*/30 2 * * *", "Europe/Berlin", "2024-10-26T23:59:00Z", 5),
        [
            "2024-10-27T00:00:00Z",
            "2024-10-27T00:30:00Z",
            "2024-10-27T01:00:00Z",
            "2024-10-27T01:30:00Z",
            "2024-10-28T01:00:00Z"
        ]
    );
    assert_eq!(
        next_n("0 * * * *", "Europe/Berlin", "2024-03-31T00:30:00Z", 2),
        ["2024-03-31T01:00:00Z", "2024-03-31T02:00:00Z"]
    );
}

// Australia/Lord_Howe moves its clocks by 30 minutes.
// 2024-04-07 02:00 (+11:00) -> 01:30 (+10:30) at 2024-04-06T15:00Z;
// 2024-10-06 02:00 (+10:30) -> 02:30 (+11:00) at 2024-10-05T15:30Z.
#[test]
fn lord_howe_half_hour_dst() {
    // repeated 01:30-02:00: fixed job once, at the first occurrence
    assert_eq!(
        next_n(
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2024-04-06T12:00:00Z",
            2
        ),
        ["2024-04-06T14:45:00Z", "2024-04-07T15:15:00Z"]
    );
    // interval job in both occurrences
    assert_eq!(
        next_n(
            "*/15 * * * *",
            "Australia/Lord_Howe",
            "2024-04-06T14:20:00Z",
            5
        ),
        [
            "2024-04-06T14:30:00Z",
            "2024-04-06T14:45:00Z",
            "2024-04-06T15:00:00Z",
            "2024-04-06T15:15:00Z",
            "2024-04-06T15:30:00Z"
        ]
    );
    // skipped 02:00-02:30: fixed job at the first instant after the jump (02:30 +11:00)
    assert_eq!(
        next_n(
            "15 2 * * *",
            "Australia/Lord_Howe",
            "2024-10-05T12:00:00Z",
            2
        ),
        ["2024-10-05T15:30:00Z", "2024-10-06T15:15:00Z"]
    );
    // interval job: 02:00 and 02:15 do not exist
    assert_eq!(
        next_n(
            "*/15 * * * *",
            "Australia/Lord_Howe",
            "2024-10-05T15:20:00Z",
            2
        ),
        ["2024-10-05T15:30:00Z", "2024-10-05T15:45:00Z"]
    );
}

/// Fixed-time schedules (minute and hour made of single values, ranges and lists only) run
/// every matching wall-clock time once, at the first instant the clock shows it or a later
/// time: times skipped by a jump run at the jump, times that fall on the same instant run
/// once, a repeated range runs only on its first pass.
#[test]
fn fixed_time_lists_and_ranges_across_dst() {
    let cases: &[(&str, &str, &str, &[&str])] = &[
        // America/New_York, spring forward: 02:00-03:00 EST does not exist on 2024-03-10.
        (
            "0,30 2 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &[
                "2024-03-10T07:00:00Z",
                "2024-03-11T06:00:00Z",
                "2024-03-11T06:30:00Z",
            ],
        ),
        (
            "15,45 2 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &[
                "2024-03-10T07:00:00Z",
                "2024-03-11T06:15:00Z",
                "2024-03-11T06:45:00Z",
            ],
        ),
        // 02:00 (skipped) and 03:00 fall on the same instant: one run
        (
            "0 1-3 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &[
                "2024-03-10T06:00:00Z",
                "2024-03-10T07:00:00Z",
                "2024-03-11T05:00:00Z",
                "2024-03-11T06:00:00Z",
            ],
        ),
        (
            "30 1-2 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &[
                "2024-03-10T06:30:00Z",
                "2024-03-10T07:00:00Z",
                "2024-03-11T05:30:00Z",
                "2024-03-11T06:30:00Z",
            ],
        ),
        // America/New_York, fall back: 01:00-02:00 happens twice on 2024-11-03.
        (
            "0,30 1 * * *",
            "America/New_York",
            "2024-11-02T12:00:00Z",
            &[
                "2024-11-03T05:00:00Z",
                "2024-11-03T05:30:00Z",
                "2024-11-04T06:00:00Z",
                "2024-11-04T06:30:00Z",
            ],
        ),
        (
            "0 0-3 * * *",
            "America/New_York",
            "2024-11-03T03:00:00Z",
            &[
                "2024-11-03T04:00:00Z",
                "2024-11-03T05:00:00Z",
                "2024-11-03T07:00:00Z",
                "2024-11-03T08:00:00Z",
                "2024-11-04T05:00:00Z",
            ],
        ),
        // starting on the second pass: nothing more that day
        (
            "0,30 1 * * *",
            "America/New_York",
            "2024-11-03T06:10:00Z",
            &["2024-11-04T06:00:00Z", "2024-11-04T06:30:00Z"],
        ),
        (
            "15,45 1 * * *",
            "America/New_York",
            "2024-11-03T05:20:00Z",
            &["2024-11-03T05:45:00Z", "2024-11-04T06:15:00Z"],
        ),
        // Europe/Berlin: 2024-03-31 02:00 -> 03:00, 2024-10-27 03:00 -> 02:00.
        (
            "0,30 2 * * *",
            "Europe/Berlin",
            "2024-03-30T12:00:00Z",
            &[
                "2024-03-31T01:00:00Z",
                "2024-04-01T00:00:00Z",
                "2024-04-01T00:30:00Z",
            ],
        ),
        // eleven skipped times, one run
        (
            "10-20 2 * * *",
            "Europe/Berlin",
            "2024-03-30T12:00:00Z",
            &[
                "2024-03-31T01:00:00Z",
                "2024-04-01T00:10:00Z",
                "2024-04-01T00:11:00Z",
            ],
        ),
        (
            "0,30 2 * * *",
            "Europe/Berlin",
            "2024-10-26T12:00:00Z",
            &[
                "2024-10-27T00:00:00Z",
                "2024-10-27T00:30:00Z",
                "2024-10-28T01:00:00Z",
                "2024-10-28T01:30:00Z",
            ],
        ),
        (
            "30 1-3 * * *",
            "Europe/Berlin",
            "2024-10-26T22:00:00Z",
            &[
                "2024-10-26T23:30:00Z",
                "2024-10-27T00:30:00Z",
                "2024-10-27T02:30:00Z",
                "2024-10-28T00:30:00Z",
            ],
        ),
        // Australia/Lord_Howe: 02:00-02:30 skipped on 2024-10-06, 01:30-02:00 repeated on
        // 2024-04-07.
        (
            "0,15,45 2 * * *",
            "Australia/Lord_Howe",
            "2024-10-05T12:00:00Z",
            &[
                "2024-10-05T15:30:00Z",
                "2024-10-05T15:45:00Z",
                "2024-10-06T15:00:00Z",
            ],
        ),
        (
            "30,45 1 * * *",
            "Australia/Lord_Howe",
            "2024-04-06T12:00:00Z",
            &[
                "2024-04-06T14:30:00Z",
                "2024-04-06T14:45:00Z",
                "2024-04-07T15:00:00Z",
                "2024-04-07T15:15:00Z",
            ],
        ),
        // Australia/Sydney: 2024-10-06 02:00 -> 03:00 (at 2024-10-05T16:00Z),
        // 2024-04-07 03:00 -> 02:00 (at 2024-04-06T16:00Z).
        (
            "0,30 2 * * *",
            "Australia/Sydney",
            "2024-10-05T12:00:00Z",
            &[
                "2024-10-05T16:00:00Z",
                "2024-10-06T15:00:00Z",
                "2024-10-06T15:30:00Z",
            ],
        ),
        (
            "0 1-4 * * *",
            "Australia/Sydney",
            "2024-10-05T12:00:00Z",
            &[
                "2024-10-05T15:00:00Z",
                "2024-10-05T16:00:00Z",
                "2024-10-05T17:00:00Z",
                "2024-10-06T14:00:00Z",
            ],
        ),
        (
            "0,30 2 * * *",
            "Australia/Sydney",
            "2024-04-06T12:00:00Z",
            &[
                "2024-04-06T15:00:00Z",
                "2024-04-06T15:30:00Z",
                "2024-04-07T16:00:00Z",
                "2024-04-07T16:30:00Z",
            ],
        ),
        // America/Santiago changes at midnight: 2024-09-08 00:00 -> 01:00 (at 04:00Z),
        // 2024-04-07 00:00 -> 2024-04-06 23:00 (at 03:00Z).
        (
            "@daily",
            "America/Santiago",
            "2024-09-06T12:00:00Z",
            &["2024-09-07T04:00:00Z", "2024-09-08T04:00:00Z"],
        ),
        (
            "0,30 0,23 * * *",
            "America/Santiago",
            "2024-09-07T12:00:00Z",
            &[
                "2024-09-08T03:00:00Z",
                "2024-09-08T03:30:00Z",
                "2024-09-08T04:00:00Z",
                "2024-09-09T02:00:00Z",
                "2024-09-09T02:30:00Z",
            ],
        ),
        (
            "0,30 0,23 * * *",
            "America/Santiago",
            "2024-04-06T12:00:00Z",
            &[
                "2024-04-07T02:00:00Z",
                "2024-04-07T02:30:00Z",
                "2024-04-07T04:00:00Z",
                "2024-04-07T04:30:00Z",
                "2024-04-08T03:00:00Z",
            ],
        ),
    ];
    for (expr, zone, from, want) in cases {
        assert_eq!(
            next_n(expr, zone, from, want.len()),
            *want,
            "{expr} in {zone} from {from}"
        );
    }
}

/// A wildcard, `?`, step or `H` in the minute or hour field makes an interval schedule: it
/// runs at every real instant whose local time matches, even when it names one time only.
#[test]
fn interval_schedules_follow_elapsed_time() {
    let cases: &[(&str, &str, &str, &[&str])] = &[
        // 02:xx does not exist on 2024-03-10
        (
            "*/30 2 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &["2024-03-11T06:00:00Z", "2024-03-11T06:30:00Z"],
        ),
        (
            "0/30 2 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &["2024-03-11T06:00:00Z"],
        ),
        // one value, but written with a step or H: still an interval schedule
        (
            "30 2/24 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &["2024-03-11T06:30:00Z"],
        ),
        (
            "H(30-30) 2 * * *",
            "America/New_York",
            "2024-03-09T12:00:00Z",
            &["2024-03-11T06:30:00Z"],
        ),
        (
            "H(30-30) 1 * * *",
            "America/New_York",
            "2024-11-02T12:00:00Z",
            &["2024-11-03T05:30:00Z", "2024-11-03T06:30:00Z"],
        ),
        (
            "0 * * * *",
            "America/New_York",
            "2024-03-10T05:30:00Z",
            &["2024-03-10T06:00:00Z", "2024-03-10T07:00:00Z"],
        ),
        (
            "0,30 ? * * *",
            "Europe/Berlin",
            "2024-10-27T00:10:00Z",
            &[
                "2024-10-27T00:30:00Z",
                "2024-10-27T01:00:00Z",
                "2024-10-27T01:30:00Z",
            ],
        ),
    ];
    for (expr, zone, from, want) in cases {
        assert_eq!(
            next_n(expr, zone, from, want.len()),
            *want,
            "{expr} in {zone} from {from}"
        );
    }
    // H/15 picks its offset from the hash: whatever it is, 02:xx is skipped on 2024-03-10
    // and both passes of 01:xx run on 2024-11-03.
    let spring = next_n(
        "H/15 2 * * *",
        "America/New_York",
        "2024-03-09T12:00:00Z",
        1,
    );
    assert!(spring[0].starts_with("2024-03-11T06:"), "{spring:?}");
    let fall = next_n(
        "H/15 1 * * *",
        "America/New_York",
        "2024-11-03T04:00:00Z",
        8,
    );
    assert!(
        fall[..4].iter().all(|t| t.starts_with("2024-11-03T05:")),
        "{fall:?}"
    );
    assert!(
        fall[4..].iter().all(|t| t.starts_with("2024-11-03T06:")),
        "{fall:?}"
    );
}

#[test]
fn previous_slot_of_fixed_time_lists_across_dst() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "0,30 2 * * *",
            "America/New_York",
            "2024-03-10T07:00:00Z",
            "2024-03-10T07:00:00Z",
        ),
        (
            "0,30 2 * * *",
            "America/New_York",
            "2024-03-10T12:00:00Z",
            "2024-03-10T07:00:00Z",
        ),
        (
            "0,30 2 * * *",
            "America/New_York",
            "2024-03-10T06:59:59Z",
            "2024-03-09T07:30:00Z",
        ),
        // on the second pass of 01:00-02:00 the last run is still the first 01:30
        (
            "0,30 1 * * *",
            "America/New_York",
            "2024-11-03T06:45:00Z",
            "2024-11-03T05:30:00Z",
        ),
        (
            "0,30 1 * * *",
            "America/New_York",
            "2024-11-03T05:29:59Z",
            "2024-11-03T05:00:00Z",
        ),
        (
            "0,30 1 * * *",
            "America/New_York",
            "2024-11-04T06:00:00Z",
            "2024-11-04T06:00:00Z",
        ),
        (
            "30 1-3 * * *",
            "Europe/Berlin",
            "2024-10-27T01:45:00Z",
            "2024-10-27T00:30:00Z",
        ),
        (
            "30,45 1 * * *",
            "Australia/Lord_Howe",
            "2024-04-06T15:20:00Z",
            "2024-04-06T14:45:00Z",
        ),
        (
            "0,15,45 2 * * *",
            "Australia/Lord_Howe",
            "2024-10-05T15:40:00Z",
            "2024-10-05T15:30:00Z",
        ),
        (
            "0 1-4 * * *",
            "Australia/Sydney",
            "2024-10-05T16:59:59Z",
            "2024-10-05T16:00:00Z",
        ),
    ];
    for (expr, zone, at, want) in cases {
        let s = Schedule::parse(expr, "ns/name").unwrap_or_else(|e| panic!("{expr}: {e}"));
        let got = s.prev_at_or_before(ts(at), &tz(zone));
        assert_eq!(got, Some(ts(want)), "{expr} in {zone} at {at}");
    }
}

#[test]
fn time_zone_loading() {
    assert_eq!(time_zone(None).expect("utc"), TimeZone::UTC);
    assert_eq!(time_zone(Some("")), Err(ZoneError::Empty));
    for local in ["Local", "local", "LOCAL"] {
        assert!(
            matches!(time_zone(Some(local)), Err(ZoneError::Local(_))),
            "{local}"
        );
    }
    let err = time_zone(Some("Europe/Pariss")).expect_err("typo");
    assert_eq!(err.to_string(), "unknown time zone Europe/Pariss");
    assert!(
        time_zone(Some("europe/paris")).is_err(),
        "case-sensitive like Go"
    );
    assert!(time_zone(Some("bad timezone")).is_err());
    assert!(time_zone(Some("../etc/passwd")).is_err());
    for ok in [
        "UTC",
        "Etc/UTC",
        "America/New_York",
        "Asia/Kolkata",
        "Australia/Lord_Howe",
        "Europe/Berlin",
    ] {
        assert!(time_zone(Some(ok)).is_ok(), "{ok}");
    }
}

#[test]
fn scheduled_at_is_rfc3339_in_the_zone() {
    let t = ts("2024-03-10T07:00:00Z");
    assert_eq!(
        scheduled_at(t, &tz("America/New_York")),
        "2024-03-10T03:00:00-04:00"
    );
    assert_eq!(
        scheduled_at(ts("2024-03-10T06:59:00Z"), &tz("America/New_York")),
        "2024-03-10T01:59:00-05:00"
    );
    assert_eq!(scheduled_at(t, &TimeZone::UTC), "2024-03-10T07:00:00Z");
    assert_eq!(
        scheduled_at(t, &tz("Asia/Kolkata")),
        "2024-03-10T12:30:00+05:30"
    );
    // Go writes Z for any zero offset
    assert_eq!(
        scheduled_at(ts("2024-01-15T10:10:00Z"), &tz("Europe/London")),
        "2024-01-15T10:10:00Z"
    );
    // whole seconds only
    assert_eq!(
        scheduled_at(ts("2024-01-15T10:10:00.9Z"), &TimeZone::UTC),
        "2024-01-15T10:10:00Z"
    );
}
