//! Reconcile-observe cost (owner-index lookup + plan) with 10 vs 100,000 unrelated Jobs in the
//! cache: the lookup must not grow with the cache.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobSpec, JobTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kronjob::api::{ConcurrencyPolicy, CronJob, CronJobSpec};
use kronjob::controller::cronjob::plan::{PlanConfig, plan};
use kronjob::controller::index::owner_index;

fn cronjob() -> CronJob {
    let mut cj = CronJob::new(
        "cj",
        CronJobSpec {
            schedule: "*/5 * * * *".into(),
            time_zone: Some("Europe/Paris".into()),
            starting_deadline_seconds: None,
            concurrency_policy: ConcurrencyPolicy::Allow,
            suspend: Some(false),
            job_template: JobTemplateSpec {
                metadata: None,
                spec: Some(JobSpec::default()),
            },
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(1),
        },
    );
    cj.metadata.namespace = Some("ns".into());
    cj.metadata.uid = Some("mine".into());
    cj.metadata.creation_timestamp = Some(Time("2024-01-01T00:00:00Z".parse().expect("ts")));
    cj
}

fn job(name: String, owner: &str) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some("ns".into()),
            uid: Some(name),
            labels: Some(BTreeMap::from([(
                "batch.kronjob.dev/cronjob".to_string(),
                owner.to_string(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch.kronjob.dev/v1".into(),
                kind: "CronJob".into(),
                name: owner.into(),
                uid: owner.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let cj = cronjob();
    let now: Timestamp = "2024-01-01T10:02:00Z".parse().expect("ts");
    let cfg = PlanConfig::default();
    for unrelated in [10usize, 100_000] {
        let (index, mut writer) = owner_index();
        for i in 0..unrelated {
            // Unrelated Jobs, spread over 1,000 other CronJobs.
            writer.insert(job(format!("other-{i}"), &format!("owner-{}", i % 1000)));
        }
        for i in 0..3 {
            writer.insert(job(format!("cj-{i}"), "mine"));
        }
        c.bench_function(&format!("observe+plan, {unrelated} unrelated jobs"), |b| {
            b.iter(|| {
                let jobs = index.jobs_of(black_box("mine"));
                black_box(plan(black_box(&cj), &jobs, now, &cfg))
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
