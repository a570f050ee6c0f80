#![no_main]
//! Calendars and the active window: a `Calendar` decoded as the controller's watch decodes it,
//! its days parsed (`Days`), the webhook's date checks (`days_errors`) and the CRD's rules on
//! it, then the search for the next slot a schedule may run (`next_allowed`) against a walk
//! over the slots one by one.
//!
//! Input: a header line `<first> <zone> <notBefore> <notAfter>` (instants as Unix seconds or
//! RFC 3339, `-` for "not given"), a line with the schedule, then the Calendar as JSON.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use kronjob::api::Calendar;
use kronjob::api::rules::calendar_rules;
use kronjob::api::validation::days_errors;
use kronjob::schedule::exclusions::{
    Exclusions, Grid, Next, SEARCH_HORIZON, Source, Verdict, Window, next_allowed, parse_date,
    parse_yearly, verdict,
};
use kronjob::schedule::{Schedule, time_zone};
use kronjob_fuzz::{default_now, header_and_rest, instant, words};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Slots walked one by one to check the search.
const WALK: usize = 200;

fuzz_target!(|data: &[u8]| {
    let Some((header, rest)) = header_and_rest(data) else {
        return;
    };
    let (expr, json) = rest.split_once('\n').unwrap_or((rest, ""));
    let mut header = words(header);
    let mut word = || header.next().flatten();
    let start = word().and_then(instant).unwrap_or_else(default_now);
    let tz = time_zone(word()).unwrap_or(TimeZone::UTC);
    let window = Window {
        not_before: word().and_then(instant),
        not_after: word().and_then(instant),
    };

    if let Ok(object) = serde_json::from_str::<Value>(json) {
        checks_name_their_entry(&object);
    }
    let calendar = decoded(json);
    let name = calendar
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| "holidays".into());
    let spec = &calendar.spec;
    dates_read_back(&spec.dates, &spec.yearly);
    for range in &spec.ranges {
        dates_read_back(&[range.from.clone(), range.to.clone()], &[]);
    }
    let days = spec.days();
    for date in spec.dates.iter().filter_map(|d| parse_date(d).ok()) {
        assert!(days.through(date).is_some_and(|end| end >= date), "{date}");
    }
    for range in &spec.ranges {
        if let (Ok(from), Ok(to)) = (parse_date(&range.from), parse_date(&range.to))
            && from <= to
        {
            assert!(days.through(from).is_some_and(|end| end >= to), "{range:?}");
        }
    }
    let exclusions = Exclusions::none().with(Source::Calendar(name), days);
    if let Ok(schedule) = Schedule::parse(expr, "ns/name") {
        searches(&schedule, start, &exclusions, &window, &tz);
    }
});

/// The Calendar as the watch decodes it (empty when it does not decode); what decodes encodes,
/// and decodes back the same.
fn decoded(json: &str) -> Calendar {
    let Ok(calendar) = serde_json::from_str::<Calendar>(json) else {
        return Calendar::new("holidays", Default::default());
    };
    let text = serde_json::to_string(&calendar).expect("a decoded Calendar encodes");
    let back: Calendar = serde_json::from_str(&text).expect("an encoded Calendar decodes");
    assert_eq!(back, calendar);
    calendar
}

/// The webhook's date checks report exactly the entries that are not real dates, each on its
/// own path; the CRD's rules evaluate on anything.
fn checks_name_their_entry(object: &Value) {
    let errors = days_errors(object, &["spec"]);
    let failed = |path: &str| errors.iter().any(|e| e.path == path);
    for e in &errors {
        assert!(
            e.path.starts_with("spec.dates[") || e.path.starts_with("spec.ranges["),
            "{e}"
        );
    }
    let date_ok = |v: &Value| v.as_str().is_some_and(|s| parse_date(s).is_ok());
    if let Some(dates) = object.pointer("/spec/dates").and_then(Value::as_array) {
        for (i, date) in dates.iter().enumerate() {
            assert_eq!(
                failed(&format!("spec.dates[{i}]")),
                !date_ok(date),
                "{date}"
            );
        }
    }
    if let Some(ranges) = object.pointer("/spec/ranges").and_then(Value::as_array) {
        for (i, range) in ranges.iter().enumerate() {
            for end in ["from", "to"] {
                let given = range.get(end).filter(|v| !v.is_null());
                let bad = given.is_some_and(|v| !date_ok(v));
                assert_eq!(failed(&format!("spec.ranges[{i}].{end}")), bad, "{range}");
            }
        }
    }
    for rule in calendar_rules() {
        for (path, value) in rule.locations(object) {
            assert!(!path.is_empty());
            let _ = rule.holds(value);
        }
    }
}

/// A date or yearly day that parses reads back as written (the formats are strict).
fn dates_read_back(dates: &[String], yearly: &[String]) {
    for text in dates {
        if let Ok(date) = parse_date(text) {
            assert_eq!(&date.to_string(), text);
        }
    }
    for text in yearly {
        if let Ok((month, day)) = parse_yearly(text) {
            assert_eq!(&format!("{month:02}-{day:02}"), text);
        }
    }
}

/// `next_allowed` finds the first slot at or after the first one that the window and the
/// calendar allow: a slot of the schedule, allowed, and no allowed slot before it.
fn searches(
    schedule: &Schedule,
    start: Timestamp,
    exclusions: &Exclusions,
    window: &Window,
    tz: &TimeZone,
) {
    let grid = Grid::of(schedule, start);
    let Some(first) = grid.at_or_after(start, tz) else {
        return;
    };
    assert!(first >= start, "{first} before {start}");
    let found = next_allowed(grid, first, exclusions, window, tz);
    if let Next::At(slot) = found {
        assert!(slot >= first, "{slot} before {first}");
        assert_eq!(verdict(slot, exclusions, window, tz), Verdict::Allowed);
        assert_eq!(grid.at_or_after(slot, tz), Some(slot), "{slot} is no slot");
    }
    let horizon = first.checked_add(SEARCH_HORIZON).unwrap_or(Timestamp::MAX);
    let mut slot = Some(first);
    for _ in 0..WALK {
        let Some(at) = slot.filter(|at| *at <= horizon) else {
            break;
        };
        if matches!(found, Next::At(allowed) if at >= allowed) {
            break;
        }
        assert_ne!(
            verdict(at, exclusions, window, tz),
            Verdict::Allowed,
            "{at} may run, yet the search found {found:?}"
        );
        slot = grid.after(at, tz);
    }
}
