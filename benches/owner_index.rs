//! Reconcile-observe cost (owner-index lookup + plan) with 10 vs 100,000 unrelated Jobs in the
//! cache: the lookup must not grow with the cache.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use kronjob::controller::cache::SlimJob;
use kronjob::controller::cronjob::plan::{PlanConfig, plan};
use kronjob::controller::owner_index::owner_index;
use kube::runtime::watcher::Event;

#[path = "../tests/support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;
use fixtures::{CronJobFixture, JobFixture, cronjob, job};

fn bench(c: &mut Criterion) {
    let cj = cronjob("*/5 * * * *")
        .zone("Europe/Paris")
        .created_at("2024-01-01T00:00:00Z")
        .last_scheduled("2024-01-01T10:00:00Z");
    let now: Timestamp = "2024-01-01T10:02:00Z".parse().expect("ts");
    let cfg = PlanConfig::default();
    for unrelated in [10usize, 100_000] {
        let (index, mut writer) = owner_index();
        writer.apply_watcher_event(&Event::Init);
        for i in 0..unrelated {
            // Unrelated Jobs, spread over 1,000 other CronJobs.
            let owner = format!("owner-{}-uid", i % 1000);
            writer.apply_watcher_event(&Event::InitApply(SlimJob(
                job(&format!("other-{i}")).owned_by(&owner),
            )));
        }
        for i in 0..3 {
            let mine = job(&format!("cj-{i}")).scheduled();
            writer.apply_watcher_event(&Event::InitApply(SlimJob(mine)));
        }
        writer.apply_watcher_event(&Event::InitDone);
        let uid = cj.metadata.uid.clone().expect("uid");
        c.bench_function(&format!("observe+plan, {unrelated} unrelated jobs"), |b| {
            b.iter(|| {
                let jobs = index.workloads_of(black_box(&uid));
                black_box(plan(black_box(&cj), &jobs, now, &cfg))
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
