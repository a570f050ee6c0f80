//! Heap bytes per cached object, measured with a counting allocator on real objects (the
//! run's CronJobs and Jobs, listed from the API server): what each cache of the manager holds,
//! next to the whole objects it no longer keeps.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher::Event;
use serde::Serialize;
use stats_alloc::Region;

use kronjob::api::CronJob;
use kronjob::controller::cache::{CachedCronJob, SlimJob};
use kronjob::controller::index;
use kronjob::job as jobs;

use super::{BoxError, GLOBAL};

/// The annotation `kubectl apply` leaves (the manager drops it from cached CronJobs).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One measured representation.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    what: String,
    objects: usize,
    /// Requested heap bytes per object (what the program asked for).
    bytes_per_object: f64,
    /// Heap blocks per object (glibc adds ~8-16 bytes to each, and rounds to 16).
    blocks_per_object: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    rows: Vec<Row>,
}

impl Sizes {
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| heap per object (requested bytes, counting allocator) | objects | bytes/object | blocks/object | with glibc's ~16 B/block |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {:.1} | {:.0} |",
                r.what,
                r.objects,
                r.bytes_per_object,
                r.blocks_per_object,
                r.bytes_per_object + 16.0 * r.blocks_per_object
            );
        }
        out
    }
}

/// Live bytes and blocks that `build` leaves allocated (what it returns, kept alive until the
/// numbers are taken).
fn live<T>(build: impl FnOnce() -> T) -> (T, f64, f64) {
    let region = Region::new(GLOBAL);
    let value = build();
    let s = region.change();
    // A realloc is counted in bytes_allocated or bytes_deallocated already (and again in
    // bytes_reallocated).
    let bytes = s.bytes_allocated as f64 - s.bytes_deallocated as f64;
    let blocks = s.allocations as f64 - s.deallocations as f64;
    (value, bytes, blocks)
}

fn row(rows: &mut Vec<Row>, what: &str, objects: usize, bytes: f64, blocks: f64) {
    let n = objects.max(1) as f64;
    rows.push(Row {
        what: what.into(),
        objects,
        bytes_per_object: bytes / n,
        blocks_per_object: blocks / n,
    });
}

/// Every item of a list, each as its JSON text (paged by 500, as a watcher lists).
async fn list_items(client: &kube::Client, path: &str) -> Result<Vec<String>, BoxError> {
    let mut items = Vec::new();
    let mut token = String::new();
    loop {
        let url = format!("{path}?limit=500&continue={token}");
        let text = client
            .request_text(http::Request::get(url).body(Vec::new())?)
            .await?;
        let page: serde_json::Value = serde_json::from_str(&text)?;
        for item in page["items"].as_array().into_iter().flatten() {
            items.push(item.to_string());
        }
        match page["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = t.to_string(),
            _ => break,
        }
    }
    Ok(items)
}

/// The objects, in a vector of exactly their number (no growth slack in the figures).
fn parse<T: serde::de::DeserializeOwned>(texts: &[String]) -> Vec<T> {
    let mut out = Vec::with_capacity(texts.len());
    out.extend(texts.iter().filter_map(|t| serde_json::from_str(t).ok()));
    out
}

fn slim_cronjob(cj: &mut CronJob) {
    cj.metadata.managed_fields = None;
    if let Some(a) = cj.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

/// A Job as a compact record would keep it: what the reconciler and the TTL controller read.
#[allow(dead_code)]
#[derive(Debug)]
struct CompactJob {
    uid: [u8; 16],
    owner: u32,
    created: i64,
    finished: Option<(bool, i64)>,
    ttl: Option<i32>,
    deleting: bool,
}

fn uid_bytes(uid: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let hex: Vec<u8> = uid.bytes().filter(u8::is_ascii_hexdigit).collect();
    for (i, pair) in hex.chunks(2).take(16).enumerate() {
        let s = std::str::from_utf8(pair).unwrap_or("0");
        out[i] = u8::from_str_radix(s, 16).unwrap_or(0);
    }
    out
}

fn cronjob_rows(rows: &mut Vec<Row>, texts: &[String]) {
    let n = texts.len();
    let wire: usize = texts.iter().map(String::len).sum();
    row(rows, "CronJob: JSON on the wire", n, wire as f64, 0.0);
    let (full, b, k) = live(|| parse::<CronJob>(texts));
    row(
        rows,
        "CronJob: deserialized whole (a PATCH answer kept by the status writer)",
        n,
        b,
        k,
    );
    drop(full);
    let (slim, b, k) = live(|| {
        let mut v = parse::<CronJob>(texts);
        v.iter_mut().for_each(slim_cronjob);
        v
    });
    row(
        rows,
        "CronJob: slimmed as the manager caches it (no managedFields)",
        n,
        b,
        k,
    );
    let template: usize = slim
        .iter()
        .map(|cj| serde_json::to_string(&cj.spec.job_template).map_or(0, |s| s.len()))
        .sum();
    row(
        rows,
        "CronJob: its jobTemplate as JSON text",
        n,
        template as f64,
        0.0,
    );
    drop(slim);
    let (cached, b, k) = live(|| parse::<CachedCronJob>(texts));
    row(
        rows,
        "CronJob: decoded as the manager caches it (CachedCronJob, templates shared)",
        n,
        b,
        k,
    );
    let (store, b, k) = live(|| {
        let (reader, mut writer) = reflector::store::<CachedCronJob>();
        writer.apply_watcher_event(&Event::Init);
        for cj in &cached {
            writer.apply_watcher_event(&Event::InitApply(cj.clone()));
        }
        writer.apply_watcher_event(&Event::InitDone);
        (reader, writer)
    });
    row(
        rows,
        "CronJob: in the manager's reflector store (CachedCronJob, Arc, key, map)",
        n,
        b,
        k,
    );
    drop(store);
}

fn job_rows(rows: &mut Vec<Row>, texts: &[String]) {
    let n = texts.len();
    let wire: usize = texts.iter().map(String::len).sum();
    row(rows, "Job: JSON on the wire", n, wire as f64, 0.0);
    let (full, b, k) = live(|| parse::<Job>(texts));
    row(
        rows,
        "Job: deserialized whole (a watcher's list page holds 500 of these)",
        n,
        b,
        k,
    );
    drop(full);
    let (slim, b, k) = live(|| {
        let mut v = parse::<Job>(texts);
        v.iter_mut().for_each(jobs::slim);
        v
    });
    row(
        rows,
        "Job: after jobs::slim (no managedFields, no pod template)",
        n,
        b,
        k,
    );
    drop(slim);
    let (decoded, b, k) = live(|| parse::<SlimJob>(texts));
    row(
        rows,
        "Job: decoded slim as the manager reads it (SlimJob)",
        n,
        b,
        k,
    );
    let (indexed, b, k) = live(|| {
        let (reader, mut writer) = index::owner_index();
        writer.apply_watcher_event(&Event::Init);
        for job in &decoded {
            writer.apply_watcher_event(&Event::InitApply(job.clone()));
        }
        writer.apply_watcher_event(&Event::InitDone);
        (reader, writer)
    });
    row(
        rows,
        "Job: in the owner index (CachedJob, keys, owner lists)",
        n,
        b,
        k,
    );
    drop(indexed);
    drop(decoded);
    let (meta, b, k) = live(|| {
        let mut v = parse::<PartialObjectMeta<Job>>(texts);
        v.iter_mut().for_each(|m| m.metadata.managed_fields = None);
        v
    });
    row(
        rows,
        "Job: metadata only, no managedFields (a metadata watch)",
        n,
        b,
        k,
    );
    drop(meta);
    let jobs_full = parse::<Job>(texts);
    let (compact, b, k) = live(|| {
        let mut owners: HashMap<String, u32> = HashMap::new();
        let mut map: HashMap<ObjectRef<Job>, CompactJob> = HashMap::new();
        for job in &jobs_full {
            let next = u32::try_from(owners.len()).unwrap_or(u32::MAX);
            let owner = *owners
                .entry(jobs::controller_uid(job).unwrap_or_default().to_string())
                .or_insert(next);
            let finish = jobs::finish(job);
            map.insert(
                ObjectRef::from_obj(job),
                CompactJob {
                    uid: uid_bytes(job.metadata.uid.as_deref().unwrap_or_default()),
                    owner,
                    created: job
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map_or(0, |t| t.0.as_second()),
                    finished: finish.map(|f| {
                        (
                            f.outcome == jobs::Outcome::Complete,
                            f.at.map_or(0, |t| t.as_second()),
                        )
                    }),
                    ttl: job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished),
                    deleting: job.metadata.deletion_timestamp.is_some(),
                },
            );
        }
        (owners, map)
    });
    row(
        rows,
        "Job: a compact record keyed by ObjectRef (a design estimate)",
        n,
        b,
        k,
    );
    drop(compact);
    let (arcs, b, k) = live(|| {
        jobs_full
            .iter()
            .map(|j| Arc::new(j.clone()))
            .collect::<Vec<_>>()
    });
    row(
        rows,
        "Job: Arc<Job> whole (kube's reflector store before slimming)",
        n,
        b,
        k,
    );
    drop(arcs);
}

/// List the CronJobs and Jobs of `ns` and measure each representation.
pub async fn measure(client: &kube::Client, ns: &str) -> Result<Sizes, BoxError> {
    eprintln!("sizes: listing the CronJobs and Jobs of {ns}");
    let cronjobs = list_items(
        client,
        &format!("/apis/batch.kronjob.dev/v1/namespaces/{ns}/cronjobs"),
    )
    .await?;
    let jobs = list_items(client, &format!("/apis/batch/v1/namespaces/{ns}/jobs")).await?;
    let mut rows = Vec::new();
    for (what, size) in [
        (
            "size_of::<CronJob>() (inline, before any heap data)",
            std::mem::size_of::<CronJob>(),
        ),
        ("size_of::<Job>()", std::mem::size_of::<Job>()),
        (
            "size_of::<ObjectMeta>()",
            std::mem::size_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(),
        ),
        (
            "size_of::<JobStatus>()",
            std::mem::size_of::<k8s_openapi::api::batch::v1::JobStatus>(),
        ),
    ] {
        row(&mut rows, what, 1, size as f64, 0.0);
    }
    cronjob_rows(&mut rows, &cronjobs);
    job_rows(&mut rows, &jobs);
    Ok(Sizes { rows })
}
