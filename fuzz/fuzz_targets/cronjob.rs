#![no_main]
//! A CronJob and its Jobs as the API server sends them: decoded by the typed API and by the
//! controller's cache decoders (`CachedCronJob`, `SlimJob`), then planned (`plan`) at a few
//! instants, with what else the controller reads from a CronJob (its schedule and zone, the
//! manual runs and backfill it asks for, the slots it missed).
//!
//! Input: a CronJob as JSON, or a JSON list of a CronJob and its Jobs.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::validation::{Operation, validate};
use kronjob::api::{CronJob, trigger};
use kronjob::controller::MAX_REQUEUE;
use kronjob::controller::cache::{CachedCronJob, SlimJob};
use kronjob::controller::cronjob::plan::scheduling::{inputs, next_run};
use kronjob::controller::cronjob::plan::{PlanConfig, plan};
use kronjob::workload::{Workload, backfill};
use kronjob_fuzz::default_now;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // Decoded from JSON as the API server writes it (each key once: the typed API takes the
    // last of duplicate keys, the cache refuses them, and no API server sends any).
    let (object, jobs) = match &value {
        Value::Array(items) => match items.split_first() {
            Some((first, rest)) => (first.to_string(), rest),
            None => return,
        },
        object => (object.to_string(), &[][..]),
    };
    let Some(cj) = cached_like_typed(&object) else {
        return;
    };
    let jobs: Vec<Arc<Workload>> = jobs
        .iter()
        .filter_map(|job| slim_like_typed(&job.to_string()))
        .map(|job| Arc::new(Workload::from(job)))
        .collect();
    admitted_is_schedulable(&object, &cj);
    for now in instants(&cj) {
        let planned = plan(&cj, &jobs, now, &PlanConfig::default());
        assert!(planned.requeue_after.is_none_or(|d| d <= MAX_REQUEUE));
        let _ = next_run(&cj, now);
        let asked = trigger::requests_of(&cj, now);
        assert!(asked.times.len() <= trigger::MAX_PENDING);
    }
    let _ = backfill::missed(&cj);
    let _ = backfill::schedule_of(&cj);
});

/// What decodes encodes, and its encoding decodes back to the same encoding when every time in
/// it is one RFC 3339 can write (k8s-openapi writes a time before the year 0 as `-YYYY-…`,
/// which does not read back; no API server sends one).
fn stable<T: Serialize + DeserializeOwned>(value: &T) {
    let text = serde_json::to_string(value).expect("what decodes encodes");
    let encoded: Value = serde_json::from_str(&text).expect("an encoding is JSON");
    if written_before_year_zero(&encoded) {
        return;
    }
    let back: T = serde_json::from_str(&text).expect("what encodes decodes");
    let again = serde_json::to_string(&back).expect("encodes");
    assert_eq!(again, text);
}

fn written_before_year_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.starts_with('-') && s.contains('T') && s.ends_with('Z'),
        Value::Array(items) => items.iter().any(written_before_year_zero),
        Value::Object(fields) => fields.values().any(written_before_year_zero),
        _ => false,
    }
}

/// The CronJob, when the typed API decodes it: the cache decodes it too, and gives back the
/// same spec and status, and the metadata the controllers read.
fn cached_like_typed(text: &str) -> Option<CronJob> {
    let typed = serde_json::from_str::<CronJob>(text).ok()?;
    stable(&typed);
    let cached: CachedCronJob =
        serde_json::from_str(text).expect("the cache decodes a CronJob the API decodes");
    let whole = cached.to_cronjob().expect("the cached template decodes");
    assert_eq!(whole.spec, typed.spec);
    assert_eq!(
        whole.status, typed.status,
        "the cached status is not the status read"
    );
    let (a, b) = (&whole.metadata, &typed.metadata);
    assert_eq!(
        (
            &a.name,
            &a.namespace,
            &a.uid,
            &a.resource_version,
            &a.generation
        ),
        (
            &b.name,
            &b.namespace,
            &b.uid,
            &b.resource_version,
            &b.generation
        )
    );
    assert_eq!(
        (&a.creation_timestamp, &a.deletion_timestamp),
        (&b.creation_timestamp, &b.deletion_timestamp)
    );
    let _ = (cached.recorded_through(), cached.last_schedule_time());
    Some(typed)
}

/// A Job, when the typed API decodes it: the cache's slim decoder decodes it too, keeping its
/// identity.
fn slim_like_typed(text: &str) -> Option<Job> {
    let typed = serde_json::from_str::<Job>(text).ok()?;
    stable(&typed);
    let slim: SlimJob =
        serde_json::from_str(text).expect("the cache decodes a Job the API decodes");
    assert_eq!(slim.0.metadata.name, typed.metadata.name);
    assert_eq!(slim.0.metadata.uid, typed.metadata.uid);
    Some(slim.0)
}

/// What the webhook admits, the controller can schedule: its schedule parses and its zone loads.
fn admitted_is_schedulable(text: &str, cj: &CronJob) {
    let Ok(object) = serde_json::from_str::<Value>(text) else {
        return;
    };
    if validate(&object, None, Operation::Create).is_empty()
        && let Err(readiness) = inputs(cj)
    {
        panic!("admitted, yet not schedulable: {}", readiness.message);
    }
}

/// The instants to plan at: the default now, an hour after the creation and a minute after the
/// last slot.
fn instants(cj: &CronJob) -> Vec<Timestamp> {
    let created = cj.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let last = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(|t| t.0);
    let mut at = vec![default_now()];
    at.extend(created.and_then(|t| t.checked_add(SignedDuration::from_mins(61)).ok()));
    at.extend(last.and_then(|t| t.checked_add(SignedDuration::from_secs(61)).ok()));
    at
}
