//! What the controller's caches hold per object, counted by an allocator that counts: 10,000
//! CronJobs in the CronJob cache and 40,000 Jobs in the owner index, decoded from the JSON the
//! API server sends (managedFields, last-applied annotation, pod template and all), each within
//! its bound. The figures are printed.

use std::alloc::System;

use kronjob::controller::cache::{CachedCronJob, SlimJob};
use kronjob::controller::owner_index;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CRONJOBS: usize = 10_000;
const JOBS_PER_CRONJOB: usize = 4;

/// Heap bytes a CronJob may take in the cache: its metadata, scalars, status with four running
/// Jobs, the store's key and map slot (the template is shared).
const CRONJOB_BOUND: f64 = 1_600.0;
/// The same for a CronJob running another kind than Job: one entry more, naming the kind.
const OTHER_KIND_BOUND: f64 = CRONJOB_BOUND + 64.0;
/// Heap bytes a Job may take in the owner index.
const JOB_BOUND: f64 = 310.0;

fn managed_fields(manager: &str) -> Value {
    json!([{"manager": manager, "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:team": {}}},
                         "f:spec": {"f:template": {"f:spec": {"f:containers": {
                             "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}}])
}

fn template() -> Value {
    json!({"metadata": {"labels": {"team": "a"}},
           "spec": {"backoffLimit": 0, "template": {"spec": {
               "restartPolicy": "Never",
               "containers": [{"name": "c", "image": "busybox:1.36",
                               "command": ["sh", "-c", "echo hello; sleep 5"],
                               "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}})
}

/// CronJob `i`, running four objects of `kind` (`apiVersion`, `kind`).
fn cronjob(i: usize, (api_version, kind): (&str, &str)) -> String {
    let name = format!("cj-{i:05}");
    let active: Vec<Value> = (0..JOBS_PER_CRONJOB)
        .map(|n| {
            json!({"apiVersion": api_version, "kind": kind, "namespace": "load",
                   "name": format!("{name}-2946{n:04}"),
                   "uid": format!("8c1b3a52-0000-4000-8000-{i:08}{n:04}")})
        })
        .collect();
    json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "load", "uid": format!("5f0d2b6e-0000-4000-8000-{i:012}"),
                     "resourceVersion": "123456", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "load"},
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"batch.kronjob.dev/v1\"}"},
                     "managedFields": managed_fields("kubectl")},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "suspend": false,
                 "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                 "jobTemplate": template()},
        "status": {"active": active, "activeCount": JOBS_PER_CRONJOB,
                   "lastScheduleTime": "2026-01-01T00:03:00Z",
                   "nextScheduleTime": "2026-01-01T00:04:00Z", "observedGeneration": 1,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Scheduled",
                                   "message": "schedule \"* * * * *\" in time zone UTC",
                                   "observedGeneration": 1,
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    })
    .to_string()
}

fn job(i: usize, n: usize) -> String {
    let cronjob = format!("cj-{i:05}");
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("{cronjob}-2946{n:04}"), "namespace": "load",
                     "uid": format!("8c1b3a52-0000-4000-8000-{i:08}{n:04}"),
                     "resourceVersion": "123456", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"batch.kronjob.dev/cronjob": cronjob, "team": "a",
                                "batch.kubernetes.io/controller-uid": "x", "controller-uid": "x",
                                "batch.kubernetes.io/job-name": "j", "job-name": "j"},
                     "annotations": {"batch.kronjob.dev/scheduled-at": "2026-01-01T00:03:00Z",
                                     "batch.kubernetes.io/job-tracking": ""},
                     "ownerReferences": [{"apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
                                          "name": cronjob, "uid": format!("5f0d2b6e-0000-4000-8000-{i:012}"),
                                          "controller": true, "blockOwnerDeletion": true}],
                     "finalizers": ["batch.kubernetes.io/job-tracking"],
                     "managedFields": managed_fields("kube-controller-manager")},
        "spec": template()["spec"].clone(),
        "status": {"active": 1, "startTime": "2026-01-01T00:03:01Z", "ready": 0,
                   "terminating": 0, "uncountedTerminatedPods": {}}
    })
    .to_string()
}

/// Live heap bytes per object that `build` leaves allocated (kept until measured).
fn per_object<T>(objects: usize, build: impl FnOnce() -> T) -> (T, f64) {
    let region = Region::new(GLOBAL);
    let kept = build();
    let change = region.change();
    let live = change.bytes_allocated as f64 - change.bytes_deallocated as f64;
    (kept, live / objects as f64)
}

const JOB: (&str, &str) = ("batch/v1", "Job");
const JOBSET: (&str, &str) = ("jobset.x-k8s.io/v1alpha2", "JobSet");

/// Heap bytes per CronJob of the CronJob cache holding every CronJob, each running four
/// objects of `kind`.
fn per_cached_cronjob(kind: (&str, &str)) -> f64 {
    let texts: Vec<String> = (0..CRONJOBS).map(|i| cronjob(i, kind)).collect();
    let ((reader, _writer), per_cronjob) = per_object(CRONJOBS, || {
        let (reader, mut writer) = reflector::store::<CachedCronJob>();
        writer.apply_watcher_event(&Event::Init);
        for text in &texts {
            let cached: CachedCronJob = serde_json::from_str(text).expect("a CronJob");
            writer.apply_watcher_event(&Event::InitApply(cached));
        }
        writer.apply_watcher_event(&Event::InitDone);
        (reader, writer)
    });
    assert_eq!(reader.len(), CRONJOBS);
    per_cronjob
}

#[test]
fn the_caches_hold_a_few_hundred_bytes_per_job_and_a_few_kilobytes_per_cronjob() {
    let per_cronjob = per_cached_cronjob(JOB);
    // A CronJob running another kind costs what one running Jobs does, and its kind.
    let per_jobset_cronjob = per_cached_cronjob(JOBSET);
    let jobs = CRONJOBS * JOBS_PER_CRONJOB;
    let texts: Vec<String> = (0..CRONJOBS)
        .flat_map(|i| (0..JOBS_PER_CRONJOB).map(move |n| job(i, n)))
        .collect();
    let (index, per_job) = per_object(jobs, || {
        let (reader, mut writer) = owner_index::owner_index();
        writer.apply_watcher_event(&Event::Init);
        for text in &texts {
            let slim: SlimJob = serde_json::from_str(text).expect("a Job");
            writer.apply_watcher_event(&Event::InitApply(slim));
        }
        writer.apply_watcher_event(&Event::InitDone);
        (reader, writer)
    });
    assert_eq!(index.0.len(), jobs);
    let uid = "5f0d2b6e-0000-4000-8000-000000000007";
    assert_eq!(index.0.workloads_of(uid).len(), JOBS_PER_CRONJOB);
    println!(
        "heap per cached CronJob: {per_cronjob:.0} B (on the wire: {} B), running JobSets \
         {per_jobset_cronjob:.0} B; per cached Job: {per_job:.0} B (on the wire: {} B)",
        cronjob(7, JOB).len(),
        job(7, 0).len()
    );
    assert!(
        per_cronjob <= CRONJOB_BOUND,
        "{per_cronjob:.0} B per CronJob"
    );
    assert!(
        per_jobset_cronjob <= OTHER_KIND_BOUND,
        "{per_jobset_cronjob:.0} B per CronJob running JobSets"
    );
    assert!(per_job <= JOB_BOUND, "{per_job:.0} B per Job");
}
