//! Schedule syntax: what is accepted (and what it means), what is rejected (and the message).

use jiff::Timestamp;
use jiff::tz::TimeZone;
use kronjob::schedule::{Field, ParseError, Schedule};

#[path = "support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
use fixtures::t as ts;

/// The first `n` slots after `from`, in UTC, as RFC 3339 strings.
fn next_n(expr: &str, from: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(expr, "ns/name").unwrap_or_else(|e| panic!("{expr}: {e}"));
    let mut t = ts(from);
    let mut out = Vec::new();
    for _ in 0..n {
        t = s.next_after(t, &TimeZone::UTC).expect("fires");
        out.push(t.to_string());
    }
    out
}

#[test]
fn rejected_with_robfig_messages() {
    let cases: &[(&str, &str)] = &[
        ("", "empty spec string"),
        (
            "* * * * * *",
            "expected exactly 5 fields, found 6: [* * * * * *]",
        ),
        (
            "0 0 * * 0 2024",
            "expected exactly 5 fields, found 6: [0 0 * * 0 2024]",
        ),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("61 * * * *", "end of range (61) above maximum (59): 61"),
        ("* 24 * * *", "end of range (24) above maximum (23): 24"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * 32 * *", "end of range (32) above maximum (31): 32"),
        ("* * * 0 *", "beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "end of range (13) above maximum (12): 13"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("* * * * 0-7", "end of range (7) above maximum (6): 0-7"),
        (
            "* * * * MON-SUN",
            "beginning of range (1) beyond end of range (0): MON-SUN",
        ),
        (
            "* * * * FRI-MON",
            "beginning of range (5) beyond end of range (1): FRI-MON",
        ),
        (
            "50-10 * * * *",
            "beginning of range (50) beyond end of range (10): 50-10",
        ),
        (
            "* * * NOV-FEB *",
            "beginning of range (11) beyond end of range (2): NOV-FEB",
        ),
        (
            "*/0 * * * *",
            "step of range should be a positive number: */0",
        ),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("*/-1 * * * *", "negative number (-1) not allowed: -1"),
        (
            "x * * * *",
            "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        (
            "-5 * * * *",
            "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax",
        ),
        (
            "99999999999999999999 * * * *",
            "failed to parse int from 99999999999999999999: strconv.Atoi: parsing \"99999999999999999999\": value out of range",
        ),
        // croner extensions Kubernetes does not have
        (
            "* * L * *",
            "failed to parse int from L: strconv.Atoi: parsing \"L\": invalid syntax",
        ),
        (
            "* * 15W * *",
            "failed to parse int from 15W: strconv.Atoi: parsing \"15W\": invalid syntax",
        ),
        (
            "* * LW * *",
            "failed to parse int from LW: strconv.Atoi: parsing \"LW\": invalid syntax",
        ),
        (
            "* * * * 5L",
            "failed to parse int from 5L: strconv.Atoi: parsing \"5L\": invalid syntax",
        ),
        (
            "* * * * 1#2",
            "failed to parse int from 1#2: strconv.Atoi: parsing \"1#2\": invalid syntax",
        ),
        (
            "* * * * +1",
            "failed to parse int from +1: strconv.Atoi: parsing \"+1\": invalid syntax",
        ),
        (
            "* * * * MON#1",
            "failed to parse int from MON#1: strconv.Atoi: parsing \"MON#1\": invalid syntax",
        ),
        (
            "* * * JANUARY *",
            "failed to parse int from JANUARY: strconv.Atoi: parsing \"JANUARY\": invalid syntax",
        ),
        // names belong to their field only
        (
            "* * * MON *",
            "failed to parse int from MON: strconv.Atoi: parsing \"MON\": invalid syntax",
        ),
        (
            "* * * * JAN",
            "failed to parse int from JAN: strconv.Atoi: parsing \"JAN\": invalid syntax",
        ),
        (",", "expected exactly 5 fields, found 1: [,]"),
        (", * * * *", "no values in minute field: ,"),
        // descriptors
        ("@reboot", "unrecognized descriptor: @reboot"),
        ("@Daily", "unrecognized descriptor: @Daily"),
        ("@every", "unrecognized descriptor: @every"),
        (
            "@every 1x",
            "failed to parse duration @every 1x: time: unknown unit \"x\" in duration \"1x\"",
        ),
        (
            "@every 10",
            "failed to parse duration @every 10: time: missing unit in duration \"10\"",
        ),
        (
            "@every ",
            "failed to parse duration @every : time: invalid duration \"\"",
        ),
        // H
        (
            "H(5-1) * * * *",
            "beginning of range (5) beyond end of range (1): H(5-1)",
        ),
        (
            "H(0-99) * * * *",
            "end of range (99) above maximum (59): H(0-99)",
        ),
        (
            "H/0 * * * *",
            "step of range should be a positive number: H/0",
        ),
        (
            "0 H(0-24) * * *",
            "end of range (24) above maximum (23): H(0-24)",
        ),
        (
            "0 0 H(0-5) * *",
            "beginning of range (0) below minimum (1): H(0-5)",
        ),
        ("Hx * * * *", "expected H, H(a-b), H/n or H(a-b)/n: Hx"),
        ("H(5) * * * *", "expected a range a-b inside H(...): H(5)"),
    ];
    let mut failures = Vec::new();
    for (expr, want) in cases {
        match Schedule::parse(expr, "ns/name") {
            Ok(_) => failures.push(format!("{expr:?}: accepted, want error {want:?}")),
            Err(e) if e.to_string() != *want => {
                failures.push(format!("{expr:?}: got {:?}, want {want:?}", e.to_string()))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn tz_prefixes_are_rejected() {
    for expr in [
        "TZ=UTC 0 * * * *",
        "CRON_TZ=Europe/Berlin 0 * * * *",
        "TZ=UTC @daily",
    ] {
        let err = Schedule::parse(expr, "").expect_err(expr);
        assert!(
            matches!(err, ParseError::TimeZonePrefix(_)),
            "{expr}: {err:?}"
        );
        assert!(err.to_string().contains("spec.timeZone"), "{err}");
    }
}

#[test]
fn errors_name_their_field() {
    let cases = [
        ("61 * * * *", Field::Minute),
        ("* 24 * * *", Field::Hour),
        ("* * 32 * *", Field::DayOfMonth),
        ("* * * 13 *", Field::Month),
        ("* * * * 7", Field::DayOfWeek),
        ("H(0-99) * * * *", Field::Minute),
    ];
    for (expr, field) in cases {
        let err = Schedule::parse(expr, "").expect_err(expr);
        assert_eq!(err.field(), Some(field), "{expr}");
    }
    assert_eq!(
        Schedule::parse("@reboot", "").expect_err("reboot").field(),
        None
    );
}

#[test]
fn accepted_forms_and_their_slots() {
    let from = "2024-01-15T10:00:00Z"; // a Monday
    let cases: &[(&str, &[&str])] = &[
        (
            "*/5 * * * *",
            &["2024-01-15T10:05:00Z", "2024-01-15T10:10:00Z"],
        ),
        (
            "1-10/3 * * * *",
            &[
                "2024-01-15T10:01:00Z",
                "2024-01-15T10:04:00Z",
                "2024-01-15T10:07:00Z",
                "2024-01-15T10:10:00Z",
                "2024-01-15T11:01:00Z",
            ],
        ),
        (
            "5/15 * * * *",
            &[
                "2024-01-15T10:05:00Z",
                "2024-01-15T10:20:00Z",
                "2024-01-15T10:35:00Z",
                "2024-01-15T10:50:00Z",
                "2024-01-15T11:05:00Z",
            ],
        ),
        (
            "0,30 9-10 * * *",
            &["2024-01-15T10:30:00Z", "2024-01-16T09:00:00Z"],
        ),
        (
            "1,,2 * * * *",
            &[
                "2024-01-15T10:01:00Z",
                "2024-01-15T10:02:00Z",
                "2024-01-15T11:01:00Z",
            ],
        ),
        (
            "? ? ? ? ?",
            &["2024-01-15T10:01:00Z", "2024-01-15T10:02:00Z"],
        ),
        ("0 0 * jan,JUL *", &["2024-01-16T00:00:00Z"]),
        (
            "0 0 1 feb-Mar *",
            &[
                "2024-02-01T00:00:00Z",
                "2024-03-01T00:00:00Z",
                "2025-02-01T00:00:00Z",
            ],
        ),
        (
            "0 12 * * sat,Sun",
            &[
                "2024-01-20T12:00:00Z",
                "2024-01-21T12:00:00Z",
                "2024-01-27T12:00:00Z",
            ],
        ),
        ("0 12 * * 0", &["2024-01-21T12:00:00Z"]),
        ("0 12 * * 6", &["2024-01-20T12:00:00Z"]),
        (
            "0 12 * * MON-FRI",
            &["2024-01-15T12:00:00Z", "2024-01-16T12:00:00Z"],
        ),
        (
            "0 12 * * 1-5/2",
            &[
                "2024-01-15T12:00:00Z",
                "2024-01-17T12:00:00Z",
                "2024-01-19T12:00:00Z",
                "2024-01-22T12:00:00Z",
            ],
        ),
        ("@yearly", &["2025-01-01T00:00:00Z"]),
        ("@annually", &["2025-01-01T00:00:00Z"]),
        (
            "@monthly",
            &["2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"],
        ),
        ("@weekly", &["2024-01-21T00:00:00Z", "2024-01-28T00:00:00Z"]),
        ("@daily", &["2024-01-16T00:00:00Z"]),
        ("@midnight", &["2024-01-16T00:00:00Z"]),
        ("@hourly", &["2024-01-15T11:00:00Z", "2024-01-15T12:00:00Z"]),
        ("  0   0 * * *  ", &["2024-01-16T00:00:00Z"]),
    ];
    for (expr, want) in cases {
        assert_eq!(next_n(expr, from, want.len()), *want, "{expr}");
    }
}

#[test]
fn every_durations_follow_go_and_robfig() {
    let cases: &[(&str, i64)] = &[
        ("@every 90s", 90),
        ("@every 1h30m", 5400),
        ("@every 1.5h", 5400),
        ("@every 2h45m30s", 9930),
        ("@every 500ms", 1),  // below one second -> one second
        ("@every 1500ms", 1), // sub-second part dropped
        ("@every 0s", 1),
        ("@every 1m0.9s", 60),
        ("@every 24h", 86_400),
    ];
    for (expr, secs) in cases {
        let s = Schedule::parse(expr, "").unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert_eq!(s.every_seconds(), Some(*secs), "{expr}");
        // next = after rounded down to the second + d
        let after = ts("2024-01-15T10:00:00.750Z");
        let want = ts("2024-01-15T10:00:00Z").as_second() + secs;
        assert_eq!(
            s.next_after(after, &TimeZone::UTC).map(|t| t.as_second()),
            Some(want),
            "{expr}"
        );
    }
}

#[test]
fn day_of_month_and_week_follow_the_star_bit_rule() {
    let from = "2023-12-31T12:00:00Z"; // 2024-01-01 is a Monday
    let cases: &[(&str, &[&str])] = &[
        // both restricted: OR
        (
            "0 0 1 * MON",
            &[
                "2024-01-01",
                "2024-01-08",
                "2024-01-15",
                "2024-01-22",
                "2024-01-29",
                "2024-02-01",
                "2024-02-05",
            ],
        ),
        (
            "0 0 13 * FRI",
            &["2024-01-05", "2024-01-12", "2024-01-13", "2024-01-19"],
        ),
        // `*` day of month: AND -> Mondays only
        ("0 0 * * MON", &["2024-01-01", "2024-01-08", "2024-01-15"]),
        ("0 0 ? * MON", &["2024-01-01", "2024-01-08", "2024-01-15"]),
        // `*/1` keeps the star bit (robfig: step 1 does not clear it)
        ("0 0 */1 * MON", &["2024-01-01", "2024-01-08", "2024-01-15"]),
        // `*/2` clears it: OR of odd days and Mondays
        (
            "0 0 */2 * MON",
            &[
                "2024-01-01",
                "2024-01-03",
                "2024-01-05",
                "2024-01-07",
                "2024-01-08",
                "2024-01-09",
            ],
        ),
        // an explicit full range has no star bit: OR -> every day
        (
            "0 0 1-31 * MON",
            &["2024-01-01", "2024-01-02", "2024-01-03"],
        ),
        // `*` day of week: AND -> day of month only
        ("0 0 15 * *", &["2024-01-15", "2024-02-15"]),
        ("0 0 15 * ?", &["2024-01-15", "2024-02-15"]),
        // day of week `*/2` (no star bit) with day of month 15: OR
        (
            "0 0 15 * */3",
            &[
                "2024-01-03",
                "2024-01-06",
                "2024-01-07",
                "2024-01-10",
                "2024-01-13",
                "2024-01-14",
                "2024-01-15",
            ],
        ),
    ];
    for (expr, days) in cases {
        let got: Vec<String> = next_n(expr, from, days.len())
            .into_iter()
            .map(|s| s[..10].to_string())
            .collect();
        assert_eq!(got, *days, "{expr}");
    }
}

#[test]
fn h_is_stable_across_machines() {
    // Pinned values from an independent FNV-1a 64 computation of
    // "default/backup" 0xff "minute" 0xff "0" (and "hour"): 13 and 7.
    let s = Schedule::parse("H H * * *", "default/backup").expect("parse");
    assert!(s.uses_hash());
    let next = s
        .next_after(ts("2024-01-15T00:00:00Z"), &TimeZone::UTC)
        .expect("fires");
    assert_eq!(next, ts("2024-01-15T07:13:00Z"));
    // H(10-20): 10 + hash % 11 = 12; H/15: offset hash % 15 = 13.
    let s = Schedule::parse("H(10-20) * * * *", "default/backup").expect("parse");
    assert_eq!(
        s.next_after(ts("2024-01-15T00:00:00Z"), &TimeZone::UTC),
        Some(ts("2024-01-15T00:12:00Z"))
    );
    let got = next_n_key("H/15 * * * *", "default/backup", "2024-01-15T00:00:00Z", 5);
    assert_eq!(got, ["00:13", "00:28", "00:43", "00:58", "01:13"]);
}

fn gap(a: Timestamp, b: Timestamp) -> i64 {
    b.as_second() - a.as_second()
}

fn next_n_key(expr: &str, key: &str, from: &str, n: usize) -> Vec<String> {
    let s = Schedule::parse(expr, key).expect("parse");
    let mut t = ts(from);
    (0..n)
        .map(|_| {
            t = s.next_after(t, &TimeZone::UTC).expect("fires");
            t.to_string()[11..16].to_string()
        })
        .collect()
}

#[test]
fn h_same_key_same_times_different_keys_spread() {
    let from = ts("2024-01-15T00:00:00Z");
    let a = Schedule::parse("H H * * *", "team-a/report").expect("parse");
    let b = Schedule::parse("H H * * *", "team-a/report").expect("parse");
    assert_eq!(a, b);
    assert_eq!(
        a.next_after(from, &TimeZone::UTC),
        b.next_after(from, &TimeZone::UTC)
    );

    let mut minutes = [0u32; 60];
    let mut hours = [0u32; 24];
    let mut same_minute_and_hour = 0;
    let n = 2400;
    for i in 0..n {
        let key = format!("ns-{}/job-{i}", i % 7);
        let s = Schedule::parse("H H * * *", &key).expect("parse");
        let t = s.next_after(from, &TimeZone::UTC).expect("fires");
        let dt = t.to_zoned(TimeZone::UTC).datetime();
        minutes[dt.minute() as usize] += 1;
        hours[dt.hour() as usize] += 1;
        if dt.minute() == dt.hour() {
            same_minute_and_hour += 1;
        }
    }
    // Expected 40 per minute and 100 per hour; allow wide but meaningful bounds.
    assert!(
        minutes.iter().all(|c| (15..=70).contains(c)),
        "minutes {minutes:?}"
    );
    assert!(
        hours.iter().all(|c| (50..=160).contains(c)),
        "hours {hours:?}"
    );
    // Salted per field: minute == hour should happen ~1/60 of the time, not always.
    assert!(same_minute_and_hour < n / 20, "{same_minute_and_hour}");
}

#[test]
fn h_ranges_steps_and_days() {
    for i in 0..500 {
        let key = format!("ns/{i}");
        let from = ts("2024-01-01T00:00:00Z");
        let s = Schedule::parse("H(10-20) H(2-4) H * *", &key).expect("parse");
        let dt = s
            .next_after(from, &TimeZone::UTC)
            .expect("fires")
            .to_zoned(TimeZone::UTC)
            .datetime();
        assert!((10..=20).contains(&dt.minute()), "{dt}");
        assert!((2..=4).contains(&dt.hour()), "{dt}");
        assert!(
            (1..=28).contains(&dt.day()),
            "day of month H stays within 1-28: {dt}"
        );

        let s = Schedule::parse("H/20 * * * *", &key).expect("parse");
        let t1 = s
            .next_after(ts("2023-12-31T23:59:30Z"), &TimeZone::UTC)
            .expect("fires");
        let t2 = s.next_after(t1, &TimeZone::UTC).expect("fires");
        let t3 = s.next_after(t2, &TimeZone::UTC).expect("fires");
        let t4 = s.next_after(t3, &TimeZone::UTC).expect("fires");
        let m1 = t1.to_zoned(TimeZone::UTC).minute();
        assert!(m1 < 20, "offset in [0, 20): {m1}");
        assert_eq!(gap(t1, t2), 1200);
        assert_eq!(gap(t2, t3), 1200);
        assert_eq!(gap(t3, t4), 1200);

        let s = Schedule::parse("0 0 * * H", &key).expect("parse");
        assert!(s.next_after(from, &TimeZone::UTC).is_some());
        let s = Schedule::parse("0 0 1 H(jan-mar) *", &key).expect("parse");
        let month = s
            .next_after(from, &TimeZone::UTC)
            .expect("fires")
            .to_zoned(TimeZone::UTC)
            .month();
        assert!((1..=3).contains(&month));
    }
}

#[test]
fn h_in_lists_picks_per_position() {
    // "H(0-29),H(30-59)": one value in each half hour.
    let s = Schedule::parse("H(0-29),H(30-59) * * * *", "ns/a").expect("parse");
    let t1 = s
        .next_after(ts("2024-01-01T00:00:00Z"), &TimeZone::UTC)
        .expect("fires");
    let t2 = s.next_after(t1, &TimeZone::UTC).expect("fires");
    let m1 = t1.to_zoned(TimeZone::UTC).minute();
    let m2 = t2.to_zoned(TimeZone::UTC).minute();
    assert!(m1 < 30 && (30..60).contains(&m2), "{m1} {m2}");
}

#[test]
fn parse_results_compare_and_display() {
    let s: Schedule = "*/5 * * * *".parse().expect("parse");
    assert_eq!(s.to_string(), "*/5 * * * *");
    assert_eq!(s.as_str(), "*/5 * * * *");
    assert!(!s.uses_hash());
    assert_eq!(s.every_seconds(), None);
    assert!(Schedule::parse("@daily", "").expect("daily").ever_fires());
    assert!(
        !Schedule::parse("0 0 30 2 *", "")
            .expect("feb 30")
            .ever_fires()
    );
    assert!(
        !Schedule::parse("0 0 31 4,6,9,11 *", "")
            .expect("31st of 30-day months")
            .ever_fires()
    );
    assert!(
        Schedule::parse("0 0 31 4,6,9,12 *", "")
            .expect("dec 31")
            .ever_fires()
    );
    // OR with a restricted day of week always fires
    assert!(
        Schedule::parse("0 0 30 2 MON", "")
            .expect("or")
            .ever_fires()
    );
}
