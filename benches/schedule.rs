//! Schedule engine benchmarks: parse, next, and slots for a 10-year-old `* * * * *`; a slot
//! checked against a full Calendar, and the next allowed slot over a year of excluded days.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::tz::TimeZone;
use kronjob::schedule::exclusions::{
    Days, Exclusions, Grid, Source, Window, excluded, next_allowed,
};
use kronjob::schedule::{Schedule, SlotQuery, slots, time_zone};

#[path = "../tests/support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
use fixtures::t as ts;

fn bench(c: &mut Criterion) {
    c.bench_function("parse */15 9-17 * * MON-FRI", |b| {
        b.iter(|| Schedule::parse(black_box("*/15 9-17 * * MON-FRI"), "ns/name"))
    });
    c.bench_function("parse H H * * *", |b| {
        b.iter(|| Schedule::parse(black_box("H H * * *"), "ns/name"))
    });

    let every5 = Schedule::parse("*/5 * * * *", "").expect("parse");
    let daily = Schedule::parse("30 2 * * *", "").expect("parse");
    let ny = time_zone(Some("America/New_York")).expect("zone");
    let t = ts("2024-03-09T12:00:00Z");
    c.bench_function("next */5 * * * * UTC", |b| {
        b.iter(|| every5.next_after(black_box(t), &TimeZone::UTC))
    });
    c.bench_function("next 30 2 * * * New_York (DST gap)", |b| {
        b.iter(|| daily.next_after(black_box(t), &ny))
    });
    let twice = Schedule::parse("0,30 2 * * *", "").expect("parse");
    c.bench_function("next 0,30 2 * * * New_York (DST gap)", |b| {
        b.iter(|| twice.next_after(black_box(t), &ny))
    });
    let repeated = Schedule::parse("0,30 1 * * *", "").expect("parse");
    let second_pass = ts("2024-11-03T06:10:00Z");
    c.bench_function(
        "next 0,30 1 * * * New_York (repeated hour, second pass)",
        |b| b.iter(|| repeated.next_after(black_box(second_pass), &ny)),
    );
    let hourly = Schedule::parse("0 * * * *", "").expect("parse");
    c.bench_function("next 0 * * * * New_York", |b| {
        b.iter(|| hourly.next_after(black_box(t), &ny))
    });

    let minutely = Schedule::parse("* * * * *", "").expect("parse");
    let q = SlotQuery {
        schedule: &minutely,
        tz: &TimeZone::UTC,
        last_schedule_time: None,
        creation_timestamp: ts("2016-01-01T00:00:00Z"),
        starting_deadline_seconds: None,
        now: ts("2026-01-01T00:00:30Z"),
    };
    c.bench_function("slots * * * * * created 10 years ago", |b| {
        b.iter(|| slots(black_box(&q)))
    });
    let q_ny = SlotQuery { tz: &ny, ..q };
    c.bench_function("slots * * * * * created 10 years ago, New_York", |b| {
        b.iter(|| slots(black_box(&q_ny)))
    });

    // A full Calendar: 366 dates (every day of 2026), 100 ranges, 100 yearly days.
    let dates: Vec<String> = (0..366)
        .filter_map(|i| {
            jiff::civil::date(2026, 1, 1)
                .checked_add(jiff::Span::new().days(i))
                .ok()
                .map(|d| d.to_string())
        })
        .collect();
    let ranges: Vec<(String, String)> = (0..100)
        .map(|y| (format!("{}-07-01", 2030 + y), format!("{}-07-31", 2030 + y)))
        .collect();
    let yearly: Vec<String> = (1..=12)
        .flat_map(|m| (1..=9).map(move |d| format!("{m:02}-{d:02}")))
        .take(100)
        .collect();
    let full = Days::of(
        &dates,
        ranges.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        &yearly,
    );
    let calendar = Exclusions::none().with(Source::Calendar("full".into()), full);
    let window = Window::default();
    c.bench_function("excluded? one slot, full Calendar, New_York", |b| {
        b.iter(|| excluded(black_box(t), &calendar, &ny))
    });
    c.bench_function(
        "next allowed * * * * * over a fully excluded 2026, New_York",
        |b| {
            b.iter(|| {
                next_allowed(
                    Grid::Cron(&minutely),
                    black_box(ts("2026-01-01T05:00:00Z")),
                    &calendar,
                    &window,
                    &ny,
                )
            })
        },
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
