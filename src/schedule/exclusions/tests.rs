use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn tz(name: &str) -> TimeZone {
    TimeZone::get(name).expect("zone")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn days(dates: &[&str], ranges: &[(&str, &str)], yearly: &[&str]) -> Days {
    Days::of(&strings(dates), ranges.iter().copied(), &strings(yearly))
}

fn cron(expr: &str) -> Schedule {
    Schedule::parse(expr, "ns/cj").expect("schedule")
}

#[test]
fn dates_parse_strictly() {
    for ok in ["2026-12-24", "2024-02-29", "0001-01-01"] {
        assert!(parse_date(ok).is_ok(), "{ok}");
    }
    for bad in [
        "2026-02-29",
        "2026-13-01",
        "2026-04-31",
        "2026-1-01",
        "26-01-01",
        "2026/01/01",
        "",
        "2026-01-01T00:00:00Z",
    ] {
        assert!(parse_date(bad).is_err(), "{bad}");
    }
    for ok in ["12-25", "02-29", "01-31"] {
        assert!(parse_yearly(ok).is_ok(), "{ok}");
    }
    for bad in [
        "02-30",
        "04-31",
        "13-01",
        "00-10",
        "1-01",
        "12-25-",
        "2026-12-25",
    ] {
        assert!(parse_yearly(bad).is_err(), "{bad}");
    }
}

/// Which slots a calendar excludes: the slot's local date decides, across DST days, on the
/// last day of a range, and for 29 February in leap years only.
#[test]
fn the_slots_local_date_decides() {
    let berlin = tz("Europe/Berlin");
    let ny = tz("America/New_York");
    let cal = Exclusions::none().with(
        Source::Calendar("holidays".into()),
        days(
            &["2026-03-29", "2026-11-01"],
            &[("2026-12-24", "2026-12-26")],
            &["02-29", "07-04"],
        ),
    );
    let inline = Exclusions::none().with(Source::Inline, days(&["2026-06-01"], &[], &[]));
    #[rustfmt::skip]
    let cases: &[(&str, &Exclusions, &TimeZone, &str, Option<&str>)] = &[
        // Berlin's spring-forward day: 00:30 UTC is 01:30 local on the 29th.
        ("dst day (spring), local date", &cal, &berlin, "2026-03-29T00:30:00Z", Some("2026-03-29")),
        ("the evening before, in UTC the 28th", &cal, &berlin, "2026-03-28T22:59:59Z", None),
        ("midnight local is the excluded day", &cal, &berlin, "2026-03-28T23:00:00Z", Some("2026-03-29")),
        ("after the DST day (CEST, +2)", &cal, &berlin, "2026-03-29T22:00:00Z", None),
        // New York's fall-back day: 05:30 UTC is 01:30 EST (second time) on 1 November.
        ("dst day (fall), repeated hour", &cal, &ny, "2026-11-01T05:30:00Z", Some("2026-11-01")),
        ("fall-back day ends at 05:00 UTC next day", &cal, &ny, "2026-11-02T04:59:00Z", Some("2026-11-01")),
        ("the day after", &cal, &ny, "2026-11-02T05:00:00Z", None),
        ("first day of the range", &cal, &berlin, "2026-12-23T23:00:00Z", Some("2026-12-24")),
        ("last day of the range, last minute", &cal, &berlin, "2026-12-26T22:59:00Z", Some("2026-12-26")),
        ("the day after the range", &cal, &berlin, "2026-12-26T23:00:00Z", None),
        ("02-29 in a leap year", &cal, &berlin, "2028-02-29T12:00:00Z", Some("2028-02-29")),
        ("02-28 in a common year is not 02-29", &cal, &berlin, "2027-02-28T12:00:00Z", None),
        ("03-01 in a common year is not 02-29", &cal, &berlin, "2027-03-01T12:00:00Z", None),
        ("yearly 07-04, any year", &cal, &ny, "2031-07-04T23:00:00Z", Some("2031-07-04")),
        ("yearly 07-04 ends at local midnight", &cal, &ny, "2031-07-05T04:00:00Z", None),
        ("inline", &inline, &berlin, "2026-06-01T08:00:00Z", Some("2026-06-01")),
        ("nothing excluded", &Exclusions::none(), &berlin, "2026-06-01T08:00:00Z", None),
    ];
    for (name, ex, zone, slot, want) in cases {
        let got = excluded(t(slot), ex, zone).map(|s| s.date.to_string());
        assert_eq!(got.as_deref(), *want, "{name}");
    }
    let skip = excluded(t("2026-06-01T08:00:00Z"), &inline, &berlin).expect("skip");
    assert_eq!(skip.source.to_string(), "spec.exclusions");
    let skip = excluded(t("2026-12-25T08:00:00Z"), &cal, &berlin).expect("skip");
    assert_eq!(skip.source.to_string(), "Calendar holidays");
}

#[test]
fn the_window_is_inclusive_at_both_ends() {
    let window = Window {
        not_before: Some(t("2026-01-01T10:00:00Z")),
        not_after: Some(t("2026-01-01T12:00:00Z")),
    };
    let none = Exclusions::none();
    #[rustfmt::skip]
    let cases = [
        ("2026-01-01T09:59:59Z", Verdict::OutsideWindow),
        ("2026-01-01T10:00:00Z", Verdict::Allowed),
        ("2026-01-01T12:00:00Z", Verdict::Allowed),
        ("2026-01-01T12:00:01Z", Verdict::OutsideWindow),
    ];
    for (slot, want) in cases {
        assert_eq!(
            verdict(t(slot), &none, &window, &TimeZone::UTC),
            want,
            "{slot}"
        );
    }
    assert!(window.ended_by(t("2026-01-01T12:00:01Z")));
    assert!(!window.ended_by(t("2026-01-01T12:00:00Z")));
}

/// The next slot that may run, over excluded days, ranges and the window's edges.
#[test]
fn next_allowed_steps_over_excluded_days_and_the_window() {
    let hourly = cron("0 * * * *");
    let minutely = cron("* * * * *");
    let berlin = tz("Europe/Berlin");
    let cal = Exclusions::none().with(
        Source::Calendar("c".into()),
        days(&["2026-12-23"], &[("2026-12-24", "2026-12-26")], &[]),
    );
    let open = Window::default();
    let nothing = Exclusions::none();
    let ends = |a: &str| Window {
        not_before: None,
        not_after: Some(t(a)),
    };
    let starts = |b: &str| Window {
        not_before: Some(t(b)),
        not_after: None,
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, &Schedule, &str, &Exclusions, Window, Next)> = vec![
        ("allowed first slot", &hourly, "2026-12-01T10:00:00Z", &cal, open,
            Next::At(t("2026-12-01T10:00:00Z"))),
        // 23 Dec (single) then 24-26 (range) in Berlin: the first slot of 27 Dec local.
        ("a day then a range", &minutely, "2026-12-22T23:00:00Z", &cal, open,
            Next::At(t("2026-12-26T23:00:00Z"))),
        ("before notBefore: the first slot at notBefore", &hourly, "2026-12-01T10:00:00Z",
            &nothing, starts("2026-12-01T15:00:00Z"), Next::At(t("2026-12-01T15:00:00Z"))),
        ("before notBefore between slots", &hourly, "2026-12-01T10:00:00Z",
            &nothing, starts("2026-12-01T15:00:01Z"), Next::At(t("2026-12-01T16:00:00Z"))),
        ("a slot exactly at notAfter", &hourly, "2026-12-01T10:00:00Z",
            &nothing, ends("2026-12-01T10:00:00Z"), Next::At(t("2026-12-01T10:00:00Z"))),
        ("after notAfter", &hourly, "2026-12-01T11:00:00Z",
            &nothing, ends("2026-12-01T10:59:59Z"), Next::WindowEnded),
        ("excluded up to notAfter", &minutely, "2026-12-23T08:00:00Z", &cal,
            ends("2026-12-26T12:00:00Z"), Next::WindowEnded),
    ];
    for (name, sched, first, ex, window, want) in cases {
        assert_eq!(
            next_allowed(Grid::Cron(sched), t(first), ex, &window, &berlin),
            want,
            "{name}"
        );
    }
}

#[test]
fn next_allowed_gives_up_on_an_everlasting_exclusion() {
    let yearly: Vec<String> = (1..=12)
        .flat_map(|m| (1..=31).map(move |d| format!("{m:02}-{d:02}")))
        .filter(|s| parse_yearly(s).is_ok())
        .collect();
    let every_day = Exclusions::none().with(Source::Inline, Days::of(&[], [], &yearly));
    let got = next_allowed(
        Grid::Cron(&cron("0 * * * *")),
        t("2026-01-01T00:00:00Z"),
        &every_day,
        &Window::default(),
        &TimeZone::UTC,
    );
    assert_eq!(got, Next::GaveUp);
}

#[test]
fn every_grid_keeps_its_anchor() {
    let grid = Grid::Every {
        base: t("2026-01-01T00:00:00Z"),
        seconds: 90,
    };
    let utc = TimeZone::UTC;
    #[rustfmt::skip]
    let cases = [
        ("2025-12-31T00:00:00Z", "2026-01-01T00:01:30Z"),
        ("2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z"),
        ("2026-01-01T00:01:30Z", "2026-01-01T00:01:30Z"),
        ("2026-01-01T00:01:30.5Z", "2026-01-01T00:03:00Z"),
        ("2026-01-01T00:01:31Z", "2026-01-01T00:03:00Z"),
    ];
    for (at, want) in cases {
        assert_eq!(grid.at_or_after(t(at), &utc), Some(t(want)), "{at}");
    }
    assert_eq!(
        grid.after(t("2026-01-01T00:01:30Z"), &utc),
        Some(t("2026-01-01T00:03:00Z"))
    );
    let skip_day = Exclusions::none().with(Source::Inline, days(&["2026-01-01"], &[], &[]));
    assert_eq!(
        next_allowed(
            grid,
            t("2026-01-01T00:01:30Z"),
            &skip_day,
            &Window::default(),
            &utc
        ),
        Next::At(t("2026-01-02T00:00:00Z"))
    );
}
