//! What sending a created Job in protobuf costs the manager: the JSON kube writes for it, and
//! on top of that reading that JSON back and writing it as protobuf (the controllers' client
//! layer). The API server saves more than this per create (it decodes protobuf for a fraction
//! of JSON's cost); this is the manager's side of the trade.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::tz::TimeZone;

#[path = "../tests/support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

fn bench(c: &mut Criterion) {
    let cj = fixtures::cronjob("* * * * *");
    let slot = "2026-11-27T12:00:00Z".parse().expect("a time");
    let job = kronjob::job::for_slot(&cj, slot, &TimeZone::UTC, Some(300)).expect("a Job");
    let json = serde_json::to_vec(&job).expect("JSON");
    c.bench_function("a created Job as JSON (what kube writes)", |b| {
        b.iter(|| black_box(serde_json::to_vec(black_box(&job))))
    });
    c.bench_function("that JSON as protobuf (what the layer adds)", |b| {
        b.iter(|| {
            let value: serde_json::Value = serde_json::from_slice(black_box(&json)).expect("JSON");
            black_box(kronjob::proto::job(&value))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
