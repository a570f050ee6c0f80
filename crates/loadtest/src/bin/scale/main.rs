//! Scale and sizing on a real control plane: a load tool, not part of the product binary.
//!
//! ```sh
//! export KUBEBUILDER_ASSETS=$PWD/.envtest/1.34
//! cargo build --release --bin kronjob
//! cargo run --release -p kronjob-loadtest --bin scale -- --cronjobs 1000 --upstream --json /tmp/scale.json
//! ```
//!
//! In one run, on one etcd + kube-apiserver started from `KUBEBUILDER_ASSETS` (etcd's data on
//! /dev/shm), it measures:
//!
//! 1. the bare-create floor: N Job creates from one client with `--in-flight` requests in
//!    flight (total time, creates/s, per-create p50/p99), in a scratch namespace;
//! 2. kronjob: N CronJobs on `* * * * *` (their Jobs never finish: there is no kubelet), run by
//!    `kronjob run` at its defaults for `--slots` slots: per slot the Job-creation skew (from
//!    creationTimestamp, 1 s resolution, and from the arrival of the Job's first watch event),
//!    missing and duplicate Jobs, when the first status write and the first Event arrived
//!    compared with the last create, the manager's resident memory and CPU time; the start-up
//!    time from process start to every CronJob reconciled (its first status write); and the
//!    API server's request counters over the phase;
//! 3. the floors again once kronjob has stopped, the server holding the run's CronJobs and Jobs
//!    (`--no-floor-after` skips them): kronjob's Jobs observed at a watch as the slots' are (the
//!    closest comparison for the last slot: a server holding more objects creates slower), then
//!    bare creates;
//! 4. with `--upstream`, the same for N batch/v1 CronJobs run by kube-controller-manager's
//!    CronJob controller alone, tuned (50 workers, QPS and burst 1000), after kronjob's
//!    objects are deleted.
//!
//! It prints markdown tables (and JSON with `--json FILE`). `--sizes` also measures, with a
//! counting allocator, the heap bytes each cache of the manager spends per CronJob and per Job,
//! on the objects of the run. `--manager-env K=V` and `--wrapper CMD` run the manager under a
//! different allocator setting or a heap profiler.
//!
//! `--create-after-start` starts kronjob first and creates the CronJobs once it is ready, just
//! after a minute boundary: no slot falls due during a start-up, so runs whose start-ups
//! differ (one manager, `--replicas`) keep the same Jobs; the start-up at scale is then not
//! measured.
//!
//! `--replicas N` runs N kronjob processes with `--sharding`, named `kronjob-0` .. by `POD_NAME`,
//! each on its own metrics and health ports: the report adds, per replica, the RSS after each
//! slot, the peak RSS (VmHWM), the CPU time and the `kronjob_shard_cronjobs` gauge at the end,
//! and the largest replica peak, also as a share of `--single-peak-mib` (a single manager's peak
//! from an earlier run). Skew, missing and duplicate Jobs count every replica's Jobs; the
//! start-up runs from the first replica's start; the phase's RSS and CPU are the replicas' sums.
//!
//! The manager serves its metrics over plain HTTP here (`--metrics-secure=false`, unless a
//! `--manager-arg` sets it) so that the tool can read them.

#![allow(missing_docs)]

mod sizes;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{
    CronJob as BatchCronJob, CronJobSpec as BatchCronJobSpec, Job, JobSpec, JobTemplateSpec,
};
use k8s_openapi::api::core::v1::{
    Container, Event as CoreEvent, Namespace, PodSpec, PodTemplateSpec,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kronjob_envtest::{Assets, ControlPlane, Options, Proc, free_port};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use serde::Serialize;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use kronjob::api::{ANNOTATION_SCHEDULED_AT, CronJob, CronJobSpec};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// The annotation upstream's CronJob controller puts on its Jobs.
const UPSTREAM_SCHEDULED_AT: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// How often the controller process's memory and CPU are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

#[derive(Parser, Debug, Clone)]
#[command(name = "scale", about = "kronjob at scale on a real API server")]
struct Args {
    /// CronJobs per controller (and bare Job creates for the floor).
    #[arg(long, default_value_t = 1000)]
    cronjobs: usize,
    /// Slots to measure, one minute apart.
    #[arg(long, default_value_t = 3)]
    slots: u32,
    /// The `kronjob` binary to run (build it with `cargo build --release`).
    #[arg(long, default_value = "target/release/kronjob")]
    kronjob: PathBuf,
    /// Extra flags for `kronjob run` (repeatable; none: the defaults).
    #[arg(long = "manager-arg", allow_hyphen_values = true)]
    manager_args: Vec<String>,
    /// Environment for the manager, `KEY=VALUE` (repeatable), e.g. `MALLOC_ARENA_MAX=2`.
    #[arg(long = "manager-env")]
    manager_env: Vec<String>,
    /// Run the manager under this command (split on spaces), e.g. `heaptrack -o /tmp/h`.
    #[arg(long)]
    wrapper: Option<String>,
    /// kronjob processes to run; above 1, with `--sharding`, each named by `POD_NAME`
    /// (`kronjob-0`, `kronjob-1`, ..).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    replicas: usize,
    /// A single manager's peak RSS (VmHWM), MiB, from an earlier run: the largest replica peak
    /// is also reported as a share of it.
    #[arg(long)]
    single_peak_mib: Option<f64>,
    /// Requests in flight for the floor and for creating the CronJobs.
    #[arg(long, default_value_t = 32)]
    in_flight: usize,
    /// Also run upstream's CronJob controller (kube-controller-manager, tuned) on N batch/v1
    /// CronJobs, after kronjob.
    #[arg(long)]
    upstream: bool,
    /// Skip kronjob (with --upstream: measure upstream only).
    #[arg(long)]
    no_kronjob: bool,
    /// Skip the second floor measurement.
    #[arg(long)]
    no_floor_after: bool,
    /// Also measure the floor with watches open on its namespace's Jobs (repeatable):
    /// `meta` (metadata only, as this tool watches a controller's Jobs), `full` (whole objects,
    /// as a controller's cache does) or `meta+full`; each in a namespace of its own.
    #[arg(long = "floor-watch", value_parser = ["meta", "full", "meta+full"])]
    floor_watch: Vec<String>,
    /// Measure the heap bytes per cached CronJob and Job on the run's objects.
    #[arg(long)]
    sizes: bool,
    /// Image of the Jobs' container.
    #[arg(long, default_value = "busybox:1.36")]
    image: String,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Keep the control plane's folder (logs, etcd) after the run.
    #[arg(long)]
    keep: bool,
    /// Start kronjob first and create its CronJobs once it is ready, just after a minute
    /// boundary: no slot falls due during the start-up, so every run keeps exactly the
    /// measured slots' Jobs (for comparing memory between runs whose start-ups differ, e.g.
    /// one manager and `--replicas`); the start-up at scale is then not measured.
    #[arg(long)]
    create_after_start: bool,
    /// Create the kronjob CronJobs without their shard label (as with the webhook off): the
    /// manager, or with `--replicas` the replica owning each, labels them at start.
    #[arg(long)]
    unlabelled: bool,
}

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

/// Nearest-rank percentile of an ascending slice.
fn rank<T: Copy>(sorted: &[T], percent: usize) -> Option<T> {
    let n = sorted.len();
    let r = (percent.min(100) * n).div_ceil(100).max(1);
    sorted.get(r - 1).copied()
}

/// p50, p99 and max of a set of seconds, and the shape below the median (p1, p10, p25).
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Spread {
    p50: f64,
    p99: f64,
    max: f64,
    /// p1, p10 and p25: a burst that starts late shows here, a slow one in every rank.
    low: [f64; 3],
}

impl Spread {
    fn of(mut values: Vec<f64>) -> Option<Spread> {
        values.sort_by(f64::total_cmp);
        Some(Spread {
            p50: rank(&values, 50)?,
            p99: rank(&values, 99)?,
            max: *values.last()?,
            low: [rank(&values, 1)?, rank(&values, 10)?, rank(&values, 25)?],
        })
    }

    fn show_low(s: Option<Spread>) -> String {
        s.map_or("-".into(), |s| {
            format!("{:.2} / {:.2} / {:.2}", s.low[0], s.low[1], s.low[2])
        })
    }

    fn show(s: Option<Spread>, digits: usize) -> String {
        s.map_or("-".into(), |s| {
            format!("{:.d$} / {:.d$} / {:.d$}", s.p50, s.p99, s.max, d = digits)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Process sampling
// ---------------------------------------------------------------------------------------------

/// Memory and CPU of a process, from /proc.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct ProcSample {
    rss_mib: f64,
    hwm_mib: f64,
    cpu_s: f64,
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn proc_sample(pid: u32, ticks: f64) -> Option<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<f64>().ok()
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(ProcSample {
        rss_mib: kib("VmRSS:")? / 1024.0,
        hwm_mib: kib("VmHWM:")? / 1024.0,
        cpu_s: (utime + stime) / ticks,
    })
}

/// The sum of several processes' samples (the replicas of a phase).
fn total<'a>(samples: impl IntoIterator<Item = &'a ProcSample>) -> ProcSample {
    samples
        .into_iter()
        .fold(ProcSample::default(), |sum, s| ProcSample {
            rss_mib: sum.rss_mib + s.rss_mib,
            hwm_mib: sum.hwm_mib + s.hwm_mib,
            cpu_s: sum.cpu_s + s.cpu_s,
        })
}

/// The process `root` or, when it runs the program through a wrapper, its descendant whose
/// command name is `comm`.
fn find_process(root: u32, comm: &str) -> u32 {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 2..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return root;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if name.trim() != comm {
            continue;
        }
        let mut p = pid;
        for _ in 0..8 {
            if p == root {
                return pid;
            }
            match parent_of(p) {
                Some(pp) if pp > 1 => p = pp,
                _ => break,
            }
        }
    }
    root
}

/// Samples a process every [`SAMPLE_EVERY`]; keeps the largest RSS seen.
#[derive(Debug, Clone)]
struct Sampler {
    pid: u32,
    ticks: f64,
    peak_rss: Arc<Mutex<f64>>,
    last: Arc<Mutex<ProcSample>>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let s = Sampler {
            pid,
            ticks: clock_ticks(),
            peak_rss: Arc::default(),
            last: Arc::default(),
        };
        let bg = s.clone();
        tokio::spawn(async move {
            loop {
                if let Some(now) = proc_sample(bg.pid, bg.ticks) {
                    let mut peak = bg.peak_rss.lock().unwrap_or_else(|e| e.into_inner());
                    *peak = peak.max(now.rss_mib);
                    *bg.last.lock().unwrap_or_else(|e| e.into_inner()) = now;
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        });
        s
    }

    /// Now (falls back to the last sample once the process is gone).
    fn now(&self) -> ProcSample {
        proc_sample(self.pid, self.ticks)
            .unwrap_or_else(|| *self.last.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The largest RSS seen: the larger of the samples and `end`'s VmHWM.
    fn peak_mib(&self, end: &ProcSample) -> f64 {
        let peak = *self.peak_rss.lock().unwrap_or_else(|e| e.into_inner());
        peak.max(end.hwm_mib)
    }
}

// ---------------------------------------------------------------------------------------------
// Watching what the controllers do
// ---------------------------------------------------------------------------------------------

/// One object as a watch showed it.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    /// The controlling owner's name (Jobs).
    owner: Option<String>,
    /// The slot a Job was created for.
    scheduled: Option<Timestamp>,
    created: Option<Timestamp>,
    arrived: Timestamp,
}

/// Everything the watches saw, in arrival order.
#[derive(Debug, Default)]
struct Log {
    /// Jobs, first sighting each.
    jobs: Vec<Seen>,
    /// CronJob modifications (a new resourceVersion) after the initial list.
    cronjob_writes: Vec<Seen>,
    /// Events: each new one and each change of one (a repeat).
    events: Vec<Seen>,
}

type SharedLog = Arc<Mutex<Log>>;

fn lock(log: &SharedLog) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

/// The slot of a Job: kronjob's or upstream's scheduled-time annotation, else its name's
/// minutes suffix.
fn scheduled_of(meta: &ObjectMeta) -> Option<Timestamp> {
    let annotations = meta.annotations.as_ref();
    for key in [ANNOTATION_SCHEDULED_AT, UPSTREAM_SCHEDULED_AT] {
        if let Some(t) = annotations
            .and_then(|a| a.get(key))
            .and_then(|s| s.parse().ok())
        {
            return Some(t);
        }
    }
    let (_, minutes) = meta.name.as_deref()?.rsplit_once('-')?;
    Timestamp::from_second(minutes.parse::<i64>().ok()?.checked_mul(60)?).ok()
}

fn seen(meta: &ObjectMeta) -> Seen {
    Seen {
        name: meta.name.clone().unwrap_or_default(),
        owner: meta
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|r| r.controller == Some(true)))
            .map(|r| r.name.clone()),
        scheduled: scheduled_of(meta),
        created: meta.creation_timestamp.as_ref().map(|t| t.0),
        arrived: Timestamp::now(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    Jobs,
    CronJobWrites,
    Events,
}

/// A metadata-only view of `K` in `ns`.
fn meta_api<K>(client: &kube::Client, ns: &str) -> Api<PartialObjectMeta<K>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(client.clone(), ns)
}

/// Watch the metadata of `api`'s objects into `log`; returns once the initial list is done
/// (the watch goes on in the background until the task is aborted).
async fn watch_into<K>(
    api: Api<PartialObjectMeta<K>>,
    log: SharedLog,
    feed: Feed,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let mut versions: HashMap<String, String> = HashMap::new();
        let mut stream = watcher(api, watcher::Config::default().page_size(5000)).boxed();
        while let Some(event) = stream.next().await {
            let object: PartialObjectMeta<K> = match event {
                Ok(watcher::Event::Apply(o)) => o,
                Ok(watcher::Event::InitApply(o)) => {
                    let name = o.metadata.name.clone().unwrap_or_default();
                    versions.insert(
                        name,
                        o.metadata.resource_version.clone().unwrap_or_default(),
                    );
                    continue;
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("watch {feed:?}: {e}");
                    continue;
                }
            };
            let meta = &object.metadata;
            let name = meta.name.clone().unwrap_or_default();
            let rv = meta.resource_version.clone().unwrap_or_default();
            let previous = versions.insert(name, rv.clone());
            let mut log = lock(&log);
            match feed {
                Feed::Jobs if previous.is_none() => log.jobs.push(seen(meta)),
                // A repeated Event is a PATCH of the first one (its series count).
                Feed::Events if previous.as_ref() != Some(&rv) => log.events.push(seen(meta)),
                Feed::CronJobWrites if previous.is_some_and(|p| p != rv) => {
                    log.cronjob_writes.push(seen(meta));
                }
                _ => {}
            }
        }
    });
    let _ = ready_rx.await;
    task
}

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

fn labels() -> BTreeMap<String, String> {
    [("app.kubernetes.io/part-of".to_string(), "scale".to_string())].into()
}

/// The Job every controller makes here: one container, never restarted.
fn job_spec(image: &str) -> JobSpec {
    JobSpec {
        backoff_limit: Some(0),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                restart_policy: Some("Never".into()),
                containers: vec![Container {
                    name: "work".into(),
                    image: Some(image.into()),
                    command: Some(vec!["sh".into(), "-c".into(), "sleep 30".into()]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        },
        ..JobSpec::default()
    }
}

fn template(image: &str) -> JobTemplateSpec {
    JobTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels()),
            ..ObjectMeta::default()
        }),
        spec: Some(job_spec(image)),
    }
}

fn meta(name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

/// A kronjob CronJob as the mutating webhook leaves it: with its shard bucket label (the tool
/// creates CronJobs without the webhook; `--unlabelled` leaves it out, and the replicas of a
/// `--replicas` run label them first).
fn kronjob_cronjob(ns: &str, name: String, image: &str, labelled: bool) -> CronJob {
    let bucket = kronjob::api::shard::bucket(ns, &name);
    let mut cj = CronJob::new(
        &name,
        CronJobSpec {
            schedule: Some("* * * * *".into()),
            schedules: None,
            time_zone: None,
            starting_deadline_seconds: None,
            concurrency_policy: Default::default(),
            suspend: None,
            job_template: template(image),
            successful_jobs_history_limit: None,
            failed_jobs_history_limit: None,
            failure_policy: None,
        },
    );
    let mut labels = labels();
    if labelled {
        labels.insert(
            kronjob::api::shard::LABEL_SHARD.to_string(),
            kronjob::api::shard::label_value(bucket),
        );
    }
    cj.metadata.labels = Some(labels);
    cj
}

fn upstream_cronjob(name: String, image: &str) -> BatchCronJob {
    BatchCronJob {
        metadata: meta(name),
        spec: Some(BatchCronJobSpec {
            schedule: "* * * * *".into(),
            job_template: template(image),
            ..BatchCronJobSpec::default()
        }),
        status: None,
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Create `n` objects made by `make(i)` with `in_flight` requests in flight; the time each
/// create took, seconds.
async fn create_all<K>(
    api: &Api<K>,
    n: usize,
    in_flight: usize,
    make: impl Fn(usize) -> K,
) -> Result<Vec<f64>, BoxError>
where
    K: kube::Resource + Clone + std::fmt::Debug + Serialize + serde::de::DeserializeOwned,
{
    let pp = PostParams::default();
    futures::stream::iter((0..n).map(make))
        .map(|object| {
            let pp = &pp;
            async move {
                let started = Instant::now();
                api.create(pp, &object).await?;
                Ok::<f64, kube::Error>(started.elapsed().as_secs_f64())
            }
        })
        .buffer_unordered(in_flight.max(1))
        .try_collect()
        .await
        .map_err(Into::into)
}

async fn create_namespace(client: &kube::Client, name: &str) -> Result<(), BoxError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: meta(name.into()),
        ..Namespace::default()
    };
    api.create(&PostParams::default(), &ns).await?;
    Ok(())
}

/// Delete the namespaces and wait until they are gone (their objects deleted).
async fn delete_namespaces(client: &kube::Client, names: &[String]) -> Result<f64, BoxError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let started = Instant::now();
    for name in names {
        let _ = api.delete(name, &DeleteParams::background()).await;
    }
    for name in names {
        while api.get_opt(name).await?.is_some() {
            if started.elapsed() > Duration::from_secs(900) {
                return Err(format!("namespace {name} still there after 15 min").into());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

async fn install_crd(client: &kube::Client) -> Result<(), BoxError> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crd/cronjobs.batch.kronjob.dev.yaml");
    let crd: CustomResourceDefinition = serde_yaml_ng::from_str(&std::fs::read_to_string(path)?)?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply("scale").force(),
        &Patch::Apply(&crd),
    )
    .await?;
    let established = kube::runtime::wait::await_condition(
        api,
        &name,
        kube::runtime::wait::conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(60), established).await??;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The API server's request counters
// ---------------------------------------------------------------------------------------------

/// `apiserver_request_total` summed by verb, group, resource, subresource and dry run.
async fn request_counts(client: &kube::Client) -> BTreeMap<String, f64> {
    let Ok(request) = http::Request::get("/metrics").body(Vec::new()) else {
        return BTreeMap::new();
    };
    let text = client.request_text(request).await.unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let label = |key: &str| -> String {
            let pat = format!("{key}=\"");
            labels
                .split_once(&pat)
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(v, _)| v.to_string())
                .unwrap_or_default()
        };
        let (group, resource, sub) = (label("group"), label("resource"), label("subresource"));
        let mut key = format!(
            "{} {}",
            label("verb"),
            if group.is_empty() { "core" } else { &group }
        );
        write!(key, "/{resource}").ok();
        if !sub.is_empty() {
            write!(key, "/{sub}").ok();
        }
        if !label("dry_run").is_empty() {
            key.push_str(" (dry run)");
        }
        *out.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// The API server's own time for Job creates so far (`apiserver_request_duration_seconds` of
/// POST batch/v1 jobs, dry runs excluded): seconds summed, and how many.
async fn create_time(client: &kube::Client) -> Option<(f64, f64)> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let text = client.request_text(request).await.ok()?;
    Some(create_time_in(&text))
}

/// [`create_time`] read from the API server's metrics text.
fn create_time_in(text: &str) -> (f64, f64) {
    let (mut sum, mut count) = (0.0, 0.0);
    for line in text.lines() {
        let Some((name, rest)) = line.split_once('{') else {
            continue;
        };
        let into = match name {
            "apiserver_request_duration_seconds_sum" => &mut sum,
            "apiserver_request_duration_seconds_count" => &mut count,
            _ => continue,
        };
        let Some((labels, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        let ours = [
            "verb=\"POST\"",
            "group=\"batch\"",
            "resource=\"jobs\"",
            "dry_run=\"\"",
        ]
        .iter()
        .all(|l| labels.contains(l));
        if ours {
            *into += value.parse::<f64>().unwrap_or(0.0);
        }
    }
    (sum, count)
}

/// The mean server-side time of the creates between two [`create_time`]s, milliseconds.
fn mean_ms(before: Option<(f64, f64)>, after: Option<(f64, f64)>) -> Option<f64> {
    let ((s0, c0), (s1, c1)) = (before?, after?);
    (c1 > c0).then(|| (s1 - s0) / (c1 - c0) * 1e3)
}

fn diff(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d >= 1.0).then(|| (k.clone(), d.round() as u64))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The floor
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
struct Floor {
    /// The watches open on the floor's Jobs (empty: none).
    watch: String,
    /// The Jobs were the ones kronjob makes (else bare Jobs).
    as_kronjob: bool,
    /// The creates were sent and answered in protobuf (else JSON).
    protobuf: bool,
    creates: usize,
    in_flight: usize,
    seconds: f64,
    per_second: f64,
    /// Per create, seconds.
    latency: Option<Spread>,
    /// Arrival at the `meta` watch after the first create was sent, seconds.
    arrived: Option<Spread>,
    /// The API server's mean time per create (its request duration), milliseconds.
    server_ms: Option<f64>,
    /// When the creates began (UTC time of day).
    at: String,
}

async fn floor(client: &kube::Client, ns: &str, args: &Args) -> Result<Floor, BoxError> {
    floor_watched(client, client, ns, args, "", false).await
}

/// Lock `m`, poisoned or not.
fn guard<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `Some(true)` for the end of a watch's initial list, `Some(false)` for an object seen after
/// it, `None` for anything else.
fn mark<K>(e: Result<watcher::Event<K>, watcher::Error>) -> Option<bool> {
    match e {
        Ok(watcher::Event::InitDone) => Some(true),
        Ok(watcher::Event::Apply(_)) => Some(false),
        _ => None,
    }
}

/// The floor with watches open on the namespace's Jobs (`watch`: `meta`, `full`, both joined
/// by `+`, or empty for none), each draining its events until the creates are done.
/// With `as_kronjob`, the Jobs are the ones kronjob makes for its CronJobs' slots (built by
/// the same code: labels, annotation, owner reference), else bare Jobs of the same template.
/// The creates go through `creates` (kronjob's protobuf layer or not), the rest through
/// `client`.
async fn floor_watched(
    creates: &kube::Client,
    client: &kube::Client,
    ns: &str,
    args: &Args,
    watch: &str,
    as_kronjob: bool,
) -> Result<Floor, BoxError> {
    create_namespace(client, ns).await?;
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let creating: Api<Job> = Api::namespaced(creates.clone(), ns);
    let protobuf = !std::ptr::eq(creates, client);
    // Arrivals (seconds after `started`) of the objects a `meta` watch saw.
    let arrivals: Arc<Mutex<Vec<f64>>> = Arc::default();
    let started = Arc::new(Mutex::new(Instant::now()));
    let mut watches = Vec::new();
    for kind in watch.split('+').filter(|k| !k.is_empty()) {
        let (ready, seen) = tokio::sync::oneshot::channel();
        let (arrivals, started) = (arrivals.clone(), started.clone());
        // `Some(true)` for the end of the initial list, `Some(false)` for a new object.
        let drain = |stream: futures::stream::BoxStream<'static, Option<bool>>, record: bool| {
            tokio::spawn(async move {
                let mut stream = stream;
                let mut ready = Some(ready);
                while let Some(event) = stream.next().await {
                    match event {
                        Some(true) => {
                            if let Some(tx) = ready.take() {
                                let _ = tx.send(());
                            }
                        }
                        Some(false) if record => {
                            let at = guard(&started).elapsed().as_secs_f64();
                            guard(&arrivals).push(at);
                        }
                        _ => {}
                    }
                }
            })
        };
        watches.push(match kind {
            "meta" => drain(
                watcher(meta_api::<Job>(client, ns), watcher::Config::default())
                    .map(mark)
                    .boxed(),
                true,
            ),
            _ => drain(
                watcher(api.clone(), watcher::Config::default())
                    .map(mark)
                    .boxed(),
                false,
            ),
        });
        let _ = seen.await;
    }
    let what = if as_kronjob { "kronjob-made" } else { "bare" };
    let how = if protobuf { " (protobuf)" } else { "" };
    eprintln!("floor: {} {what} Job creates{how} in {ns}", args.cronjobs);
    let server_before = create_time(client).await;
    let at = time_of_day(Timestamp::now());
    *guard(&started) = Instant::now();
    let slot = next_minute(Timestamp::now());
    let latencies = create_all(&creating, args.cronjobs, args.in_flight, |i| {
        let bare = || Job {
            metadata: meta(format!("bare-{i:05}")),
            spec: Some(job_spec(&args.image)),
            status: None,
        };
        if !as_kronjob {
            return bare();
        }
        let mut cj = kronjob_cronjob(ns, format!("cj-{i:05}"), &args.image, true);
        cj.metadata.namespace = Some(ns.to_string());
        cj.metadata.uid = Some(format!("00000000-0000-4000-8000-{i:012}"));
        kronjob::job::for_slot(&cj, slot, &jiff::tz::TimeZone::UTC, None).unwrap_or_else(bare)
    })
    .await?;
    let seconds = guard(&started).elapsed().as_secs_f64();
    let limit = Instant::now() + Duration::from_secs(10);
    while !watch.is_empty() && guard(&arrivals).len() < args.cronjobs && Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for w in watches {
        w.abort();
    }
    let arrived = Spread::of(std::mem::take(&mut *guard(&arrivals)));
    let server_ms = mean_ms(server_before, create_time(client).await);
    Ok(Floor {
        watch: watch.to_string(),
        as_kronjob,
        protobuf,
        creates: args.cronjobs,
        in_flight: args.in_flight,
        seconds,
        per_second: args.cronjobs as f64 / seconds,
        latency: Spread::of(latencies),
        arrived,
        server_ms,
        at,
    })
}

// ---------------------------------------------------------------------------------------------
// A controller phase
// ---------------------------------------------------------------------------------------------

/// One measured slot.
#[derive(Debug, Clone, Serialize)]
struct Slot {
    slot: Timestamp,
    jobs: usize,
    missing: usize,
    duplicates: usize,
    /// creationTimestamp - slot, seconds (1 s resolution).
    skew_created: Option<Spread>,
    /// Arrival of the Job's first watch event - slot, seconds.
    skew_arrived: Option<Spread>,
    /// Seconds after the slot: the first status write (a CronJob's new resourceVersion) seen.
    first_status_write: Option<f64>,
    status_writes: usize,
    /// Seconds after the slot: the first Event seen.
    first_event: Option<f64>,
    events: usize,
    /// Status writes and Events that arrived before the slot's last Job (interleaved with the
    /// creates).
    status_writes_during_creates: usize,
    events_during_creates: usize,
    /// The manager 55 s after the slot (with replicas, their sum).
    process: ProcSample,
    /// The manager's own skew histogram over the slot: the bucket bounds holding p50 and p99,
    /// and the count, if it exports one.
    histogram: Option<(f64, f64, u64)>,
    /// The API server's mean time per Job create over the slot, milliseconds.
    server_create_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct Phase {
    controller: String,
    cronjobs: usize,
    create_cronjobs_s: f64,
    /// Process start to every CronJob's first status write, seconds.
    startup_s: Option<f64>,
    /// Process start to /readyz answering 200, seconds.
    ready_s: Option<f64>,
    at_startup: ProcSample,
    slots: Vec<Slot>,
    /// The peak RSS (with replicas, the sum of their peaks).
    peak_rss_mib: f64,
    end: ProcSample,
    /// CPU seconds from process start to the end of the last slot (with replicas, their sum).
    cpu_s: f64,
    /// Each process of the phase.
    replicas: Vec<Replica>,
    /// With more than one replica: the largest replica peak RSS, MiB ...
    max_replica_peak_mib: Option<f64>,
    /// ... and its share of `--single-peak-mib`.
    max_replica_peak_of_single: Option<f64>,
    jobs_at_end: usize,
    /// The API server's CPU seconds over the phase (controller start to end).
    apiserver_cpu_s: f64,
    /// The API server's request counters over the phase.
    requests: BTreeMap<String, u64>,
    /// The API server's mean time per Job create over the phase, milliseconds.
    server_create_ms: Option<f64>,
}

/// One controller process of a phase (a kronjob replica).
#[derive(Debug, Clone, Serialize)]
struct Replica {
    name: String,
    /// 55 s after each slot.
    slots: Vec<ProcSample>,
    /// The largest RSS: VmHWM (or a larger sample).
    peak_rss_mib: f64,
    /// At the end of the last slot.
    end: ProcSample,
    /// CPU seconds from process start to the end of the last slot.
    cpu_s: f64,
    /// `kronjob_shard_cronjobs` at the end: the CronJobs it schedules.
    shard_cronjobs: Option<f64>,
    /// `kronjob_shard_members` at the end: the replicas it sees.
    shard_members: Option<f64>,
}

/// Which controller a phase runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Kronjob,
    Upstream,
}

/// A started controller process and what it answers on.
#[derive(Debug)]
struct Controller {
    /// Its name in messages and reports (and, for a kronjob replica, its identity).
    name: String,
    proc: Proc,
    pid: u32,
    health: Option<u16>,
    metrics: Option<u16>,
}

/// The name of kronjob replica `replica` of `replicas`: `kronjob` alone, else `kronjob-<i>`.
fn replica_name(replica: usize, replicas: usize) -> String {
    if replicas > 1 {
        format!("kronjob-{replica}")
    } else {
        "kronjob".into()
    }
}

/// Whether `argv` sets `flag` (alone or as `flag=value`).
fn has_flag(argv: &[String], flag: &str) -> bool {
    argv.iter()
        .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
}

/// Start kronjob replica `replica` (of `--replicas`): above one, with `--sharding` and its
/// name as `POD_NAME`; each on its own ports and log.
fn start_kronjob(
    args: &Args,
    plane: &ControlPlane,
    replica: usize,
) -> Result<Controller, BoxError> {
    let name = replica_name(replica, args.replicas);
    let (health, metrics) = (free_port()?, free_port()?);
    let mut argv: Vec<String> = match &args.wrapper {
        Some(w) => w.split_whitespace().map(String::from).collect(),
        None => Vec::new(),
    };
    argv.push(args.kronjob.display().to_string());
    argv.extend(
        [
            "run",
            "--metrics-addr",
            &format!("127.0.0.1:{metrics}"),
            "--health-addr",
            &format!("127.0.0.1:{health}"),
            "--log-format",
            "json",
        ]
        .map(String::from),
    );
    if !has_flag(&args.manager_args, "--metrics-secure") {
        argv.push("--metrics-secure=false".into());
    }
    if args.replicas > 1 && !has_flag(&args.manager_args, "--sharding") {
        argv.push("--sharding".into());
    }
    argv.extend(args.manager_args.iter().cloned());
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env("KUBECONFIG", plane.kubeconfig())
        .env("NO_COLOR", "1");
    for kv in &args.manager_env {
        if let Some((k, v)) = kv.split_once('=') {
            command.env(k, v);
        }
    }
    if args.replicas > 1 {
        command.env("POD_NAME", &name);
    }
    let log = plane.dir().join(format!("{name}.log"));
    let proc = Proc::spawn(&name, command, &log)?;
    let pid = proc.pid();
    Ok(Controller {
        name,
        proc,
        pid,
        health: Some(health),
        metrics: Some(metrics),
    })
}

fn start_upstream(assets: &Assets, plane: &ControlPlane) -> Result<Controller, BoxError> {
    let kubeconfig = plane.kubeconfig().display().to_string();
    let args: Vec<String> = vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--controllers=cronjob-controller".into(),
        "--concurrent-cron-job-syncs=50".into(),
        "--kube-api-qps=1000".into(),
        "--kube-api-burst=1000".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", free_port()?),
        "--leader-elect=false".into(),
    ];
    let proc = Proc::start(
        "kube-controller-manager (cronjob)",
        &assets.binary("kube-controller-manager"),
        &args,
        &plane.dir().join("upstream-cronjob.log"),
    )?;
    let pid = proc.pid();
    Ok(Controller {
        name: "kube-controller-manager".into(),
        proc,
        pid,
        health: None,
        metrics: None,
    })
}

async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut body = Vec::new();
    stream.read_to_end(&mut body).await.ok()?;
    let text = String::from_utf8_lossy(&body).into_owned();
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, text))
}

/// The Prometheus text a controller serves on its metrics port; `None` without a port or an
/// answer.
async fn metrics_text(port: Option<u16>) -> Option<String> {
    let (code, text) = http_get(port?, "/metrics").await?;
    (code == 200).then_some(text)
}

/// `kronjob_job_creation_skew_seconds` buckets (cumulative counts by `le`) of a metrics text.
fn skew_buckets(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("kronjob_job_creation_skew_seconds_bucket{le=\""))
        .filter_map(|l| {
            let (le, rest) = l.split_once('"')?;
            let count = rest.rsplit(' ').next()?.parse().ok()?;
            Some((le.to_string(), count))
        })
        .collect()
}

/// The controllers' skew histograms, summed (cumulative buckets add up to cumulative buckets).
async fn skew_histogram(controllers: &[Controller]) -> BTreeMap<String, u64> {
    let mut sum = BTreeMap::new();
    for c in controllers {
        let text = metrics_text(c.metrics).await.unwrap_or_default();
        for (le, count) in skew_buckets(&text) {
            *sum.entry(le).or_insert(0) += count;
        }
    }
    sum
}

/// The value of metric `name` in a Prometheus text (summed over its label sets); `None` when
/// the text has no sample of it.
fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.rsplit_once('}')?.1,
                None => rest.strip_prefix(' ')?,
            };
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .reduce(|a, b| a + b)
}

/// From cumulative buckets (`le`, count) sorted by `le`: the bucket bounds that hold the
/// median and the 99th percentile, and the count.
fn histogram_bounds(buckets: &[(f64, u64)]) -> Option<(f64, f64, u64)> {
    let total = buckets.last()?.1;
    let bound = |percent: u64| -> f64 {
        let rank = (percent * total).div_ceil(100).max(1);
        buckets
            .iter()
            .find(|(_, c)| *c >= rank)
            .map_or(f64::INFINITY, |(le, _)| *le)
    };
    (total > 0).then(|| (bound(50), bound(99), total))
}

/// Stop a controller: SIGTERM to the program itself first when it runs under a wrapper (a
/// heap profiler writes its file when the program exits), then to the process we started.
fn stop(controller: &mut Controller) {
    if controller.pid != controller.proc.pid() {
        kronjob_envtest::process::signal(controller.pid, 15);
        let limit = Instant::now() + Duration::from_secs(60);
        while Path::new(&format!("/proc/{}", controller.pid)).exists() && Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    controller.proc.stop(Duration::from_secs(30));
}

/// Unless within 2 s after a minute boundary, wait for 1 s after the next one.
async fn after_minute_boundary() -> Result<(), BoxError> {
    let now = Timestamp::now();
    if now.as_second().rem_euclid(60) > 2 {
        sleep_until(next_minute(now).checked_add(SignedDuration::from_secs(1))?).await;
    }
    Ok(())
}

/// Sleep until `at` (wall clock).
async fn sleep_until(at: Timestamp) {
    let wait = at.duration_since(Timestamp::now());
    if let Ok(d) = Duration::try_from(wait) {
        tokio::time::sleep(d).await;
    }
}

fn next_minute(after: Timestamp) -> Timestamp {
    let s = after.as_second();
    Timestamp::from_second((s / 60 + 1) * 60).unwrap_or(after)
}

fn secs(d: SignedDuration) -> f64 {
    d.as_secs_f64()
}

/// Summarise one slot from what the watches saw.
fn summarise_slot(log: &Log, slot: Timestamp, names: &HashSet<String>) -> Slot {
    let jobs: Vec<&Seen> = log
        .jobs
        .iter()
        .filter(|j| j.scheduled == Some(slot))
        .collect();
    let mut per_owner: HashMap<&str, usize> = HashMap::new();
    for j in &jobs {
        *per_owner
            .entry(j.owner.as_deref().unwrap_or_default())
            .or_default() += 1;
    }
    let window = |s: &&Seen| s.arrived >= slot && secs(s.arrived.duration_since(slot)) < 60.0;
    let writes: Vec<&Seen> = log.cronjob_writes.iter().filter(window).collect();
    let events: Vec<&Seen> = log.events.iter().filter(window).collect();
    let after = |s: &Seen| secs(s.arrived.duration_since(slot));
    let last_job = jobs.iter().map(|j| j.arrived).max().unwrap_or(slot);
    let during = |list: &[&Seen]| list.iter().filter(|s| s.arrived <= last_job).count();
    Slot {
        status_writes_during_creates: during(&writes),
        events_during_creates: during(&events),
        slot,
        jobs: jobs.len(),
        missing: names
            .iter()
            .filter(|n| !per_owner.contains_key(n.as_str()))
            .count(),
        duplicates: per_owner.values().filter(|c| **c > 1).map(|c| c - 1).sum(),
        skew_created: Spread::of(
            jobs.iter()
                .filter_map(|j| j.created.map(|c| secs(c.duration_since(slot))))
                .collect(),
        ),
        skew_arrived: Spread::of(jobs.iter().map(|j| after(j)).collect()),
        first_status_write: writes.iter().map(|s| after(s)).reduce(f64::min),
        status_writes: writes.len(),
        first_event: events.iter().map(|s| after(s)).reduce(f64::min),
        events: events.len(),
        process: ProcSample::default(),
        histogram: None,
        server_create_ms: None,
    }
}

/// When every CronJob in `names` has had a status write after `start`: the last of those
/// first writes; `None` while some have not.
fn all_written(log: &Log, names: &HashSet<String>, start: Timestamp) -> Option<Timestamp> {
    if names.is_empty() {
        return Some(start);
    }
    let mut first: HashMap<&str, Timestamp> = HashMap::new();
    for w in log.cronjob_writes.iter().filter(|w| w.arrived >= start) {
        first.entry(w.name.as_str()).or_insert(w.arrived);
    }
    if !names.iter().all(|n| first.contains_key(n.as_str())) {
        return None;
    }
    first.into_values().max()
}

/// Wait for /readyz (every kronjob replica: the last of them is the phase's) and for every
/// CronJob's first status write after `start`.
async fn startup(
    log: &SharedLog,
    names: &HashSet<String>,
    controllers: &mut [Controller],
    start: Timestamp,
    which: Which,
) -> (Option<f64>, Option<f64>) {
    let mut ready_at: Vec<Option<f64>> = vec![None; controllers.len()];
    let limit = Instant::now() + Duration::from_secs(600);
    while Instant::now() < limit {
        if let Some(c) = controllers
            .iter_mut()
            .find_map(|c| c.proc.exited().is_some().then_some(c))
        {
            eprintln!("{} exited:\n{}", c.name, c.proc.log_tail(30));
            break;
        }
        for (c, at) in controllers.iter().zip(ready_at.iter_mut()) {
            if at.is_none()
                && let Some(port) = c.health
                && http_get(port, "/readyz")
                    .await
                    .is_some_and(|(code, _)| code == 200)
            {
                *at = Some(secs(Timestamp::now().duration_since(start)));
            }
        }
        if which == Which::Upstream {
            return (None, None);
        }
        let ready = all_ready(&ready_at);
        if ready.is_some()
            && let Some(last) = all_written(&lock(log), names, start)
        {
            return (ready, Some(secs(last.duration_since(start))));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (all_ready(&ready_at), None)
}

/// When the last of the controllers became ready; `None` while one is not.
fn all_ready(ready_at: &[Option<f64>]) -> Option<f64> {
    ready_at
        .iter()
        .copied()
        .collect::<Option<Vec<f64>>>()?
        .into_iter()
        .reduce(f64::max)
}

/// Create the CronJobs of `which` in `ns`; their names and how long creating them took.
async fn create_cronjobs(
    client: &kube::Client,
    ns: &str,
    which: Which,
    args: &Args,
) -> Result<(HashSet<String>, f64), BoxError> {
    let names: Vec<String> = (0..args.cronjobs).map(|i| format!("cj-{i:05}")).collect();
    let started = Instant::now();
    eprintln!("{which:?}: creating {} CronJobs in {ns}", args.cronjobs);
    let image = args.image.as_str();
    match which {
        Which::Kronjob => {
            let api: Api<CronJob> = Api::namespaced(client.clone(), ns);
            create_all(&api, names.len(), args.in_flight, |i| {
                kronjob_cronjob(ns, names[i].clone(), image, !args.unlabelled)
            })
            .await?;
        }
        Which::Upstream => {
            let api: Api<BatchCronJob> = Api::namespaced(client.clone(), ns);
            create_all(&api, names.len(), args.in_flight, |i| {
                upstream_cronjob(names[i].clone(), image)
            })
            .await?;
        }
    }
    Ok((names.into_iter().collect(), started.elapsed().as_secs_f64()))
}

/// Run one controller on N CronJobs for the slots; the controller is stopped at the end, the
/// objects are kept.
async fn phase(
    which: Which,
    ns: &str,
    args: &Args,
    assets: &Assets,
    plane: &mut ControlPlane,
) -> Result<Phase, BoxError> {
    let client = plane.client().await?;
    create_namespace(&client, ns).await?;
    // Create right after a minute boundary and start the controller at once: no slot falls
    // due before it starts, and its start-up has the rest of the minute. With
    // `--create-after-start`, the CronJobs are created once the controller is ready.
    let after_start = args.create_after_start && which == Which::Kronjob;
    let (names, create_s) = if after_start {
        (HashSet::new(), 0.0)
    } else {
        after_minute_boundary().await?;
        create_cronjobs(&client, ns, which, args).await?
    };
    let log: SharedLog = Arc::default();
    let mut watches = vec![
        watch_into(meta_api::<Job>(&client, ns), log.clone(), Feed::Jobs).await,
        watch_into(
            meta_api::<CoreEvent>(&client, ns),
            log.clone(),
            Feed::Events,
        )
        .await,
    ];
    watches.push(match which {
        Which::Kronjob => {
            watch_into(
                meta_api::<CronJob>(&client, ns),
                log.clone(),
                Feed::CronJobWrites,
            )
            .await
        }
        Which::Upstream => {
            let api = meta_api::<BatchCronJob>(&client, ns);
            watch_into(api, log.clone(), Feed::CronJobWrites).await
        }
    });
    let requests_before = request_counts(&client).await;
    let creates_before = create_time(&client).await;
    let apiserver_pid = plane.apiserver().map(|p| p.pid());
    let api_sampler = apiserver_pid.map(Sampler::start);
    let api_cpu_before = api_sampler.as_ref().map_or(0.0, |s| s.now().cpu_s);
    let start = Timestamp::now();
    let mut controllers = match which {
        Which::Kronjob => (0..args.replicas)
            .map(|i| start_kronjob(args, plane, i))
            .collect::<Result<Vec<_>, _>>()?,
        Which::Upstream => vec![start_upstream(assets, plane)?],
    };
    if args.wrapper.is_some() {
        tokio::time::sleep(Duration::from_secs(2)).await;
        for c in &mut controllers {
            c.pid = find_process(c.pid, "kronjob");
        }
    }
    let samplers: Vec<Sampler> = controllers.iter().map(|c| Sampler::start(c.pid)).collect();
    for c in &controllers {
        eprintln!("{which:?}: {} started (pid {}) at {start}", c.name, c.pid);
    }
    let (ready_s, startup_s) = startup(&log, &names, &mut controllers, start, which).await;
    let at_startup = total(&samples(&samplers));
    eprintln!("{which:?}: ready {ready_s:?} s, every CronJob reconciled {startup_s:?} s");
    let (names, create_s) = if after_start {
        after_minute_boundary().await?;
        let created_at = Timestamp::now();
        let (names, create_s) = create_cronjobs(&client, ns, which, args).await?;
        let (_, reconciled) = startup(&log, &names, &mut controllers, created_at, which).await;
        eprintln!("{which:?}: every CronJob reconciled {reconciled:?} s after the first create");
        (names, create_s)
    } else {
        (names, create_s)
    };
    let startup_s = startup_s.filter(|_| !after_start);
    let first = next_minute(Timestamp::now().checked_add(SignedDuration::from_secs(5))?);
    let mut slots = Vec::new();
    let mut per_replica: Vec<Vec<ProcSample>> = vec![Vec::new(); controllers.len()];
    let mut histogram = skew_histogram(&controllers).await;
    let mut creates_seen = create_time(&client).await;
    for i in 0..args.slots {
        let slot = first.checked_add(SignedDuration::from_mins(i64::from(i)))?;
        sleep_until(slot.checked_add(SignedDuration::from_secs(55))?).await;
        let mut s = summarise_slot(&lock(&log), slot, &names);
        let creates_now = create_time(&client).await;
        s.server_create_ms = mean_ms(creates_seen, creates_now);
        creates_seen = creates_now;
        let now = samples(&samplers);
        s.process = total(&now);
        for (replica, sample) in per_replica.iter_mut().zip(now) {
            replica.push(sample);
        }
        let now = skew_histogram(&controllers).await;
        let mut buckets: Vec<(f64, u64)> = now
            .iter()
            .map(|(le, c)| {
                let before = histogram.get(le).copied().unwrap_or(0).min(*c);
                (le.parse().unwrap_or(f64::INFINITY), c - before)
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        s.histogram = histogram_bounds(&buckets);
        histogram = now;
        eprintln!(
            "{which:?}: slot {slot}: {} Jobs, {} missing, skew(created) {}, RSS {:.1} MiB",
            s.jobs,
            s.missing,
            Spread::show(s.skew_created, 0),
            s.process.rss_mib
        );
        slots.push(s);
    }
    let replicas = replicas_at_end(&controllers, &samplers, per_replica).await;
    let end = total(replicas.iter().map(|r| &r.end));
    let requests = diff(&request_counts(&client).await, &requests_before);
    let server_create_ms = mean_ms(creates_before, create_time(&client).await);
    let apiserver_cpu_s = api_sampler.as_ref().map_or(0.0, |s| s.now().cpu_s) - api_cpu_before;
    for c in &mut controllers {
        stop(c);
    }
    for w in watches {
        w.abort();
    }
    let jobs_at_end = lock(&log).jobs.len();
    let max_replica_peak_mib = max_replica_peak(&replicas);
    Ok(Phase {
        controller: format!("{which:?}").to_lowercase(),
        cronjobs: args.cronjobs,
        create_cronjobs_s: create_s,
        startup_s,
        ready_s,
        at_startup,
        slots,
        peak_rss_mib: replicas.iter().map(|r| r.peak_rss_mib).sum(),
        end,
        cpu_s: end.cpu_s,
        max_replica_peak_mib,
        max_replica_peak_of_single: max_replica_peak_mib
            .zip(args.single_peak_mib.filter(|s| *s > 0.0))
            .map(|(peak, single)| peak / single),
        replicas,
        jobs_at_end,
        apiserver_cpu_s,
        requests,
        server_create_ms,
    })
}

/// Every sampler's process now.
fn samples(samplers: &[Sampler]) -> Vec<ProcSample> {
    samplers.iter().map(Sampler::now).collect()
}

/// Each controller's figures at the end of a phase (before it is stopped): its samples after
/// each slot (`per_slot`), peak RSS, CPU time and shard gauges.
async fn replicas_at_end(
    controllers: &[Controller],
    samplers: &[Sampler],
    per_slot: Vec<Vec<ProcSample>>,
) -> Vec<Replica> {
    let mut out = Vec::with_capacity(controllers.len());
    for ((c, sampler), slots) in controllers.iter().zip(samplers).zip(per_slot) {
        let end = sampler.now();
        let text = metrics_text(c.metrics).await.unwrap_or_default();
        out.push(Replica {
            name: c.name.clone(),
            slots,
            peak_rss_mib: sampler.peak_mib(&end),
            end,
            cpu_s: end.cpu_s,
            shard_cronjobs: metric_value(&text, "kronjob_shard_cronjobs"),
            shard_members: metric_value(&text, "kronjob_shard_members"),
        });
    }
    out
}

/// The largest replica peak RSS, when the phase ran more than one replica.
fn max_replica_peak(replicas: &[Replica]) -> Option<f64> {
    if replicas.len() < 2 {
        return None;
    }
    replicas.iter().map(|r| r.peak_rss_mib).reduce(f64::max)
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Serialize)]
struct Report {
    cronjobs: usize,
    slots: u32,
    /// kronjob processes (`--replicas`; above 1, sharded).
    replicas: usize,
    /// `--single-peak-mib`: a single manager's peak RSS, MiB.
    single_peak_mib: Option<f64>,
    load_before: String,
    load_after: String,
    floor_before: Option<Floor>,
    /// The floor with the Jobs kronjob makes.
    floor_kronjob: Option<Floor>,
    /// The floors with `--floor-watch` watches open.
    floor_watched: Vec<Floor>,
    floor_after: Option<Floor>,
    /// After the slots, the Jobs kronjob makes, watched as the slots' are.
    floor_kronjob_after: Option<Floor>,
    phases: Vec<Phase>,
    sizes: Option<sizes::Sizes>,
    /// etcd's snapshots and compactions over the run, from its log.
    etcd_housekeeping: Vec<String>,
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn floor_row(out: &mut String, what: &str, f: &Option<Floor>) {
    if let Some(f) = f {
        let _ = writeln!(
            out,
            "| {what} | {}: {} creates, {} in flight: {:.2} s ({:.0}/s); per create p50/p99/max {} ms{}{} |",
            f.at,
            f.creates,
            f.in_flight,
            f.seconds,
            f.per_second,
            f.latency.map_or("-".into(), |l| format!(
                "{:.1} / {:.1} / {:.1}",
                l.p50 * 1e3,
                l.p99 * 1e3,
                l.max * 1e3
            )),
            f.server_ms.map_or(String::new(), |ms| format!(
                " (mean {ms:.1} ms in the API server)"
            )),
            f.arrived.map_or(String::new(), |a| format!(
                "; arrival at the metadata watch p50/p99/max {:.2} / {:.2} / {:.2} s (p1/p10/p25 {})",
                a.p50,
                a.p99,
                a.max,
                Spread::show_low(Some(a)),
            )),
        );
    }
}

fn worst(p: &Phase, f: impl Fn(&Slot) -> Option<Spread>) -> Option<Spread> {
    p.slots.iter().filter_map(f).reduce(|a, b| Spread {
        p50: a.p50.max(b.p50),
        p99: a.p99.max(b.p99),
        max: a.max.max(b.max),
        low: [0, 1, 2].map(|i| a.low[i].max(b.low[i])),
    })
}

/// A p99 skew as a multiple of a floor, `-` when either is missing.
fn ratio(skew: Option<Spread>, floor: Option<f64>) -> String {
    match (skew, floor) {
        (Some(s), Some(f)) => format!("{:.2}x", s.p99 / f),
        _ => "-".into(),
    }
}

/// The watch-arrival skew of a phase's last slot.
fn last_slot(p: &Phase) -> Option<Spread> {
    p.slots.last().and_then(|s| s.skew_arrived)
}

/// A row of the summary table: its title and how a phase's cell is written.
type SummaryRow = (String, Box<dyn Fn(&Phase) -> String>);

/// Whether a phase of the report ran more than one replica.
fn sharded(r: &Report) -> bool {
    r.phases.iter().any(|p| p.replicas.len() > 1)
}

/// The largest replica peak RSS, and its share of a single manager's peak when known.
fn replica_peak_line(peak_mib: f64, single_mib: Option<f64>) -> String {
    match single_mib.filter(|s| *s > 0.0) {
        Some(single) => format!(
            "max replica peak {peak_mib:.1} MiB = {:.0}% of {single} MiB",
            peak_mib / single * 100.0
        ),
        None => format!("max replica peak {peak_mib:.1} MiB"),
    }
}

fn summary_table(out: &mut String, r: &Report) {
    let floor = r.floor_before.as_ref().map(|f| f.seconds);
    let floor_same = r
        .floor_kronjob
        .as_ref()
        .and_then(|f| f.arrived)
        .map(|a| a.p99);
    let floor_end = r
        .floor_kronjob_after
        .as_ref()
        .and_then(|f| f.arrived)
        .map(|a| a.p99);
    let sum = if sharded(r) {
        ", sum of the replicas"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "| | {} |",
        r.phases
            .iter()
            .map(|p| p.controller.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(r.phases.len()));
    let mut rows: Vec<SummaryRow> = vec![
        (
            "creating the CronJobs, s".into(),
            Box::new(|p| format!("{:.1}", p.create_cronjobs_s)),
        ),
        ("start: /readyz, s".into(), Box::new(|p| opt(p.ready_s, 1))),
        (
            "start: every CronJob reconciled (first status write), s".into(),
            Box::new(|p| opt(p.startup_s, 1)),
        ),
        (
            format!("RSS / CPU when every CronJob was reconciled, MiB / s{sum}"),
            Box::new(|p| match p.startup_s {
                Some(_) => format!("{:.0} / {:.1}", p.at_startup.rss_mib, p.at_startup.cpu_s),
                None => "-".into(),
            }),
        ),
        (
            "skew from creationTimestamp p50/p99/max, s (worst slot)".into(),
            Box::new(|p| Spread::show(worst(p, |s| s.skew_created), 0)),
        ),
        (
            "skew from watch arrival p50/p99/max, s (worst slot)".into(),
            Box::new(|p| Spread::show(worst(p, |s| s.skew_arrived), 2)),
        ),
        (
            "p99 skew (arrival) / floor time".into(),
            Box::new(move |p| ratio(worst(p, |s| s.skew_arrived), floor)),
        ),
        (
            "p99 skew (arrival) / floor p99 arrival (kronjob's Jobs, same watch)".into(),
            Box::new(move |p| ratio(worst(p, |s| s.skew_arrived), floor_same)),
        ),
        (
            "last slot's p99 skew (arrival) / floor p99 arrival after the slots (kronjob's Jobs, same watch)".into(),
            Box::new(move |p| ratio(last_slot(p), floor_end)),
        ),
        (
            "the API server's mean time per Job create (all slots), ms".into(),
            Box::new(|p| opt(p.server_create_ms, 1)),
        ),
        (
            "Jobs missing / duplicate (all slots)".into(),
            Box::new(|p| {
                format!(
                    "{} / {}",
                    p.slots.iter().map(|s| s.missing).sum::<usize>(),
                    p.slots.iter().map(|s| s.duplicates).sum::<usize>()
                )
            }),
        ),
        (
            "Jobs at the end".into(),
            Box::new(|p| p.jobs_at_end.to_string()),
        ),
        (
            format!("RSS after each slot, MiB{sum}"),
            Box::new(|p| {
                p.slots
                    .iter()
                    .map(|s| format!("{:.0}", s.process.rss_mib))
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
        ),
        (
            format!("RSS peak (VmHWM), MiB{sum}"),
            Box::new(|p| format!("{:.0}", p.peak_rss_mib)),
        ),
        (
            format!("CPU over the run, s{sum}"),
            Box::new(|p| format!("{:.1}", p.cpu_s)),
        ),
        (
            "API server CPU over the run, s".into(),
            Box::new(|p| format!("{:.1}", p.apiserver_cpu_s)),
        ),
    ];
    if sharded(r) {
        let single = r.single_peak_mib;
        rows.insert(
            0,
            (
                "replicas (--sharding)".into(),
                Box::new(|p| p.replicas.len().to_string()),
            ),
        );
        rows.push((
            "largest replica peak RSS (VmHWM)".into(),
            Box::new(move |p| {
                p.max_replica_peak_mib
                    .map_or("-".into(), |peak| replica_peak_line(peak, single))
            }),
        ));
    }
    for (what, f) in rows {
        let cells: Vec<String> = r.phases.iter().map(f.as_ref()).collect();
        let _ = writeln!(out, "| {what} | {} |", cells.join(" | "));
    }
}

fn slot_table(out: &mut String, r: &Report) {
    let sum = if sharded(r) { " (sum)" } else { "" };
    let _ = writeln!(
        out,
        "\n| controller | slot | Jobs | missing | dup | skew created p50/p99/max s | skew arrival p50/p99/max s | skew arrival p1/p10/p25 s | first status write s | status writes (before the last create) | first Event s | Events (before the last create) | RSS MiB{sum} | CPU s{sum} | manager's skew histogram | the API server's mean time per create, ms |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in &r.phases {
        for s in &p.slots {
            let hist = s.histogram.map_or("-".into(), |(p50, p99, n)| {
                format!("p50 <= {p50}, p99 <= {p99} ({n})")
            });
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.1} | {} | {} |",
                p.controller,
                s.slot.strftime("%H:%M"),
                s.jobs,
                s.missing,
                s.duplicates,
                Spread::show(s.skew_created, 0),
                Spread::show(s.skew_arrived, 2),
                Spread::show_low(s.skew_arrived),
                opt(s.first_status_write, 2),
                format_args!("{} ({})", s.status_writes, s.status_writes_during_creates),
                opt(s.first_event, 2),
                format_args!("{} ({})", s.events, s.events_during_creates),
                s.process.rss_mib,
                s.process.cpu_s,
                hist,
                opt(s.server_create_ms, 1),
            );
        }
    }
}

/// Per replica of a phase: RSS after each slot, peak RSS, CPU time and the shard gauges at the
/// end; then their sums.
fn replica_table(out: &mut String, controller: &str, replicas: &[Replica]) {
    let _ = writeln!(
        out,
        "\n| {controller} replica | RSS after each slot, MiB | RSS peak (VmHWM), MiB | CPU over the run, s | kronjob_shard_cronjobs at the end | kronjob_shard_members at the end |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    let slots = |rss: Vec<f64>| -> String {
        rss.iter()
            .map(|m| format!("{m:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for r in replicas {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {:.1} | {} | {} |",
            r.name,
            slots(r.slots.iter().map(|s| s.rss_mib).collect()),
            r.peak_rss_mib,
            r.cpu_s,
            opt(r.shard_cronjobs, 0),
            opt(r.shard_members, 0),
        );
    }
    let slot_count = replicas.iter().map(|r| r.slots.len()).max().unwrap_or(0);
    let slot_sums = (0..slot_count)
        .map(|i| {
            replicas
                .iter()
                .filter_map(|r| r.slots.get(i))
                .map(|s| s.rss_mib)
                .sum()
        })
        .collect();
    let shard_sum = replicas
        .iter()
        .map(|r| r.shard_cronjobs)
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.iter().sum());
    let _ = writeln!(
        out,
        "| sum | {} | {:.1} | {:.1} | {} | |",
        slots(slot_sums),
        replicas.iter().map(|r| r.peak_rss_mib).sum::<f64>(),
        replicas.iter().map(|r| r.cpu_s).sum::<f64>(),
        opt(shard_sum, 0),
    );
}

fn request_table(out: &mut String, r: &Report) {
    let keys: std::collections::BTreeSet<&String> =
        r.phases.iter().flat_map(|p| p.requests.keys()).collect();
    let _ = writeln!(
        out,
        "\n| API server requests over the run | {} |",
        r.phases
            .iter()
            .map(|p| p.controller.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(r.phases.len()));
    for k in keys {
        let cells: Vec<String> = r
            .phases
            .iter()
            .map(|p| p.requests.get(k).map_or("0".into(), u64::to_string))
            .collect();
        let _ = writeln!(out, "| {k} | {} |", cells.join(" | "));
    }
}

fn table(r: &Report) -> String {
    let mut out = String::new();
    let replicas = if r.replicas > 1 {
        format!(", {} kronjob replicas (--sharding)", r.replicas)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{} CronJobs on `* * * * *`, {} slots{replicas}; load average {} at the start, {} at the end\n",
        r.cronjobs, r.slots, r.load_before, r.load_after
    );
    let _ = writeln!(out, "| floor | |\n|---|---|");
    floor_row(&mut out, "before", &r.floor_before);
    floor_row(
        &mut out,
        "before, kronjob's Jobs, observed as the controller's are",
        &r.floor_kronjob,
    );
    for f in &r.floor_watched {
        let what = format!("with a `{}` Job watch open", f.watch);
        floor_row(&mut out, &what, &Some(f.clone()));
    }
    floor_row(
        &mut out,
        "after the slots (the server holding the run's objects), kronjob's Jobs, observed as the controller's are",
        &r.floor_kronjob_after,
    );
    floor_row(
        &mut out,
        "after the slots and the lines above, bare",
        &r.floor_after,
    );
    out.push('\n');
    if !r.phases.is_empty() {
        summary_table(&mut out, r);
        slot_table(&mut out, r);
        for p in r.phases.iter().filter(|p| p.replicas.len() > 1) {
            replica_table(&mut out, &p.controller, &p.replicas);
        }
        request_table(&mut out, r);
    }
    if let Some(s) = &r.sizes {
        out.push('\n');
        out.push_str(&s.table());
    }
    if !r.etcd_housekeeping.is_empty() {
        let _ = writeln!(
            out,
            "\netcd's housekeeping: {}",
            r.etcd_housekeeping.join("; ")
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

async fn run(args: Args) -> Result<Report, BoxError> {
    let assets =
        Assets::from_env()?.ok_or("set KUBEBUILDER_ASSETS to the control-plane binaries")?;
    if !args.no_kronjob && !args.kronjob.is_file() {
        return Err(format!(
            "{}: no such binary (cargo build --release)",
            args.kronjob.display()
        )
        .into());
    }
    let load_before = load();
    let options = Options {
        controllers: vec!["namespace-controller".into()],
        ..Options::default()
    };
    let mut plane = ControlPlane::start(&assets, options).await?;
    eprintln!("control plane in {}", plane.dir().display());
    let client = plane.client().await?;
    install_crd(&client).await?;
    let floor_before = Some(floor(&client, "scale-floor-before", &args).await?);
    let floor_kronjob = Some(
        floor_watched(
            &client,
            &client,
            "scale-floor-kronjob-jobs",
            &args,
            "meta",
            true,
        )
        .await?,
    );
    let kronjob_jobs = vec!["scale-floor-kronjob-jobs".to_string()];
    // Their Jobs carry kronjob's labels: gone before kronjob starts, or its caches would hold
    // them.
    let took = delete_namespaces(&client, &kronjob_jobs).await?;
    eprintln!("deleted {kronjob_jobs:?} in {took:.0} s");
    let mut floor_watched_all = Vec::new();
    let mut doomed = vec!["scale-floor-before".to_string()];
    for (i, watch) in args.floor_watch.iter().enumerate() {
        let ns = format!("scale-floor-watch-{i}");
        floor_watched_all.push(floor_watched(&client, &client, &ns, &args, watch, false).await?);
        doomed.push(ns);
    }
    let mut phases = Vec::new();
    let mut floor_after = None;
    let mut floor_kronjob_after = None;
    let mut sizes = None;
    if !args.no_kronjob {
        phases.push(phase(Which::Kronjob, "scale-kronjob", &args, &assets, &mut plane).await?);
        doomed.push("scale-kronjob".into());
        if args.sizes {
            sizes = Some(sizes::measure(&client, "scale-kronjob").await?);
        }
        if !args.no_floor_after {
            // kronjob's Jobs first: the server then holds what it held at the end of the
            // last slot, and the bare floor comes after with 10,000 more Jobs stored.
            let ns = "scale-floor-kronjob-jobs-after";
            floor_kronjob_after =
                Some(floor_watched(&client, &client, ns, &args, "meta", true).await?);
            doomed.push(ns.into());
            floor_after = Some(floor(&client, "scale-floor-after", &args).await?);
            doomed.push("scale-floor-after".into());
        }
    }
    if args.upstream {
        let took = delete_namespaces(&client, &doomed).await?;
        eprintln!("deleted {doomed:?} in {took:.0} s");
        phases.push(
            phase(
                Which::Upstream,
                "scale-upstream",
                &args,
                &assets,
                &mut plane,
            )
            .await?,
        );
    }
    let etcd_housekeeping = std::fs::read_to_string(plane.dir().join("etcd.log"))
        .map(|log| housekeeping(&log))
        .unwrap_or_default();
    if args.keep {
        // Not dropped: its folder stays (its processes end with this one).
        eprintln!("keeping {}", plane.dir().display());
        std::mem::forget(plane);
    }
    Ok(Report {
        cronjobs: args.cronjobs,
        slots: args.slots,
        replicas: args.replicas,
        single_peak_mib: args.single_peak_mib,
        load_before,
        load_after: load(),
        floor_before,
        floor_kronjob,
        floor_watched: floor_watched_all,
        floor_after,
        floor_kronjob_after,
        phases,
        sizes,
        etcd_housekeeping,
    })
}

/// `t` as `HH:MM:SS` in UTC.
fn time_of_day(t: Timestamp) -> String {
    t.strftime("%H:%M:%S").to_string()
}

/// etcd's snapshots and the ends of its compactions in its log, each with its time of day.
fn housekeeping(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let what = if line.contains("start to snapshot") {
                "snapshot".to_string()
            } else if let Some((_, took)) = line.split_once("finished scheduled compaction") {
                let took = took
                    .split_once("(took ")
                    .and_then(|(_, t)| t.strip_suffix(')'))
                    .unwrap_or("?");
                format!("compaction done (took {took})")
            } else {
                return None;
            };
            // "2026-11-27 15:50:37.577118 I | ..."
            let time = line.split(' ').nth(1)?.split('.').next()?;
            Some(format!("{time} {what}"))
        })
        .collect()
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let json = args.json.clone();
    match run(args).await {
        Ok(report) => {
            print!("{}", table(&report));
            if let Some(path) = json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => {
                        if let Err(e) = std::fs::write(&path, text) {
                            eprintln!("writing {}: {e}", path.display());
                        }
                    }
                    Err(e) => eprintln!("JSON: {e}"),
                }
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_and_spread() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Spread::of(v).expect("values");
        assert_eq!((s.p50, s.p99, s.max), (50.0, 99.0, 100.0));
        assert_eq!(s.low, [1.0, 10.0, 25.0]);
        assert!(Spread::of(Vec::new()).is_none());
        assert_eq!(rank(&[3.0], 99), Some(3.0));
    }

    #[test]
    fn slot_of_a_job_from_annotations_or_name() {
        let mut m = ObjectMeta {
            name: Some("cj-00001-29000000".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            scheduled_of(&m),
            Timestamp::from_second(29_000_000 * 60).ok()
        );
        m.annotations = Some(
            [(
                UPSTREAM_SCHEDULED_AT.to_string(),
                "2025-01-01T00:01:00Z".to_string(),
            )]
            .into(),
        );
        assert_eq!(scheduled_of(&m), "2025-01-01T00:01:00Z".parse().ok());
        m.name = Some("x".into());
        m.annotations = None;
        assert_eq!(scheduled_of(&m), None);
    }

    #[test]
    fn a_slot_counts_missing_and_duplicate_jobs_and_what_came_after() {
        let slot: Timestamp = "2025-01-01T00:01:00Z".parse().expect("ts");
        let at = |ms: i64| {
            slot.checked_add(SignedDuration::from_millis(ms))
                .expect("ts")
        };
        let job = |owner: &str, ms: i64| Seen {
            name: format!("{owner}-x"),
            owner: Some(owner.into()),
            scheduled: Some(slot),
            created: Some(at(ms / 1000 * 1000)),
            arrived: at(ms),
        };
        let log = Log {
            jobs: vec![job("a", 300), job("a", 1200), job("b", 2500)],
            cronjob_writes: vec![Seen {
                arrived: at(2600),
                ..job("a", 0)
            }],
            events: vec![Seen {
                arrived: at(-500),
                ..job("a", 0)
            }],
        };
        let names: HashSet<String> = ["a", "b", "c"].map(String::from).into();
        let s = summarise_slot(&log, slot, &names);
        assert_eq!((s.jobs, s.missing, s.duplicates), (3, 1, 1));
        let created = s.skew_created.expect("jobs");
        assert_eq!((created.p50, created.max), (1.0, 2.0));
        assert_eq!(s.skew_arrived.map(|a| a.max), Some(2.5));
        assert_eq!(s.first_status_write, Some(2.6));
        assert_eq!((s.events, s.first_event), (0, None));
        assert_eq!(s.status_writes_during_creates, 0);
    }

    #[test]
    fn request_counters_are_diffed_by_verb_and_resource() {
        let before: BTreeMap<String, f64> = [("POST batch/jobs".to_string(), 10.0)].into();
        let after: BTreeMap<String, f64> = [
            ("POST batch/jobs".to_string(), 1010.0),
            ("GET core/pods".to_string(), 0.0),
        ]
        .into();
        let d = diff(&after, &before);
        assert_eq!(d.get("POST batch/jobs"), Some(&1000));
        assert!(!d.contains_key("GET core/pods"));
    }

    #[test]
    fn histogram_bounds_hold_the_ranks() {
        let buckets = [
            (0.5, 10),
            (1.0, 90),
            (2.5, 99),
            (5.0, 100),
            (f64::INFINITY, 100),
        ];
        assert_eq!(histogram_bounds(&buckets), Some((1.0, 2.5, 100)));
        assert_eq!(histogram_bounds(&[(1.0, 0), (f64::INFINITY, 0)]), None);
    }

    fn replica(name: &str, rss: &[f64], peak: f64, cpu: f64, shard: Option<f64>) -> Replica {
        let slots: Vec<ProcSample> = rss
            .iter()
            .map(|&rss_mib| ProcSample {
                rss_mib,
                hwm_mib: peak,
                cpu_s: cpu,
            })
            .collect();
        Replica {
            name: name.into(),
            end: slots.last().copied().unwrap_or_default(),
            slots,
            peak_rss_mib: peak,
            cpu_s: cpu,
            shard_cronjobs: shard,
            shard_members: shard.map(|_| 2.0),
        }
    }

    #[test]
    fn a_floor_row_shows_the_watch_arrival_when_one_was_measured() {
        let spread = |p50, p99, max| {
            Some(Spread {
                p50,
                p99,
                max,
                low: [0.0; 3],
            })
        };
        let mut floor = Floor {
            watch: String::new(),
            as_kronjob: false,
            protobuf: false,
            creates: 10_000,
            in_flight: 32,
            seconds: 6.5,
            per_second: 1538.46,
            latency: spread(0.0171, 0.0556, 0.0759),
            arrived: None,
            server_ms: None,
            at: "15:50:01".into(),
        };
        let mut out = String::new();
        floor_row(&mut out, "before", &Some(floor.clone()));
        assert_eq!(
            out,
            "| before | 15:50:01: 10000 creates, 32 in flight: 6.50 s (1538/s); per create p50/p99/max 17.1 / 55.6 / 75.9 ms |\n"
        );
        floor.arrived = spread(3.45, 6.77, 6.81);
        let mut out = String::new();
        floor_row(&mut out, "watched", &Some(floor));
        assert!(out.ends_with(
            "75.9 ms; arrival at the metadata watch p50/p99/max 3.45 / 6.77 / 6.81 s (p1/p10/p25 0.00 / 0.00 / 0.00) |\n"
        ));
        let mut out = String::new();
        floor_row(&mut out, "none", &None);
        assert_eq!(out, "");
    }

    #[test]
    fn the_api_servers_create_time_counts_job_creates_only() {
        let text = r#"# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1",le="0.005"} 3
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 200.5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 10000
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="All",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 9
apiserver_request_duration_seconds_count{component="apiserver",dry_run="All",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 9
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="batch",resource="cronjobs",scope="resource",subresource="",verb="POST",version="v1"} 7
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="GET",version="v1"} 5
"#;
        assert_eq!(create_time_in(text), (200.5, 10000.0));
        assert_eq!(
            mean_ms(Some((100.0, 5000.0)), Some((200.5, 10000.0))),
            Some(20.1)
        );
        assert_eq!(mean_ms(Some((1.0, 1.0)), Some((1.0, 1.0))), None);
    }

    #[test]
    fn etcds_snapshots_and_compactions_are_read_from_its_log() {
        let log = "2026-11-27 15:48:03.023166 I | embed: snapshot count = 100000
2026-11-27 15:50:37.577118 I | etcdserver: start to snapshot (applied: 100006, lastsnap: 0)
2026-11-27 15:50:37.580439 I | etcdserver: saved snapshot at index 100006
2026-11-27 15:53:03.040709 I | mvcc: store.index: compact 160279
2026-11-27 15:53:05.111537 I | mvcc: finished scheduled compaction at 160279 (took 1.959097843s)
";
        assert_eq!(
            housekeeping(log),
            [
                "15:50:37 snapshot",
                "15:53:05 compaction done (took 1.959097843s)"
            ]
        );
        assert!(housekeeping("").is_empty());
    }

    #[test]
    fn only_the_end_of_the_list_and_new_objects_are_marked() {
        let job = || Job::default();
        assert_eq!(mark::<Job>(Ok(watcher::Event::InitDone)), Some(true));
        assert_eq!(mark(Ok(watcher::Event::Apply(job()))), Some(false));
        assert_eq!(mark(Ok(watcher::Event::InitApply(job()))), None);
        assert_eq!(mark(Ok(watcher::Event::Delete(job()))), None);
        assert_eq!(mark::<Job>(Ok(watcher::Event::Init)), None);
    }

    #[test]
    fn with_no_names_every_cronjob_was_written_at_the_start() {
        let start = Timestamp::from_second(1_800_000_000).expect("time");
        let log = Log::default();
        assert_eq!(all_written(&log, &HashSet::new(), start), Some(start));
        let names: HashSet<String> = ["cj-00000".to_string()].into();
        assert_eq!(all_written(&log, &names, start), None);
    }

    #[test]
    fn the_largest_replica_peak_against_a_single_manager() {
        assert_eq!(
            replica_peak_line(52.1, Some(126.0)),
            "max replica peak 52.1 MiB = 41% of 126 MiB"
        );
        assert_eq!(
            replica_peak_line(63.0, Some(125.5)),
            "max replica peak 63.0 MiB = 50% of 125.5 MiB"
        );
        assert_eq!(replica_peak_line(52.1, None), "max replica peak 52.1 MiB");
        assert_eq!(
            replica_peak_line(52.1, Some(0.0)),
            "max replica peak 52.1 MiB"
        );
        let two = [
            replica("kronjob-0", &[40.0], 52.1, 1.0, None),
            replica("kronjob-1", &[41.0], 49.0, 1.0, None),
        ];
        assert_eq!(max_replica_peak(&two), Some(52.1));
        assert_eq!(max_replica_peak(&two[..1]), None);
    }

    #[test]
    fn the_replica_table_has_a_row_each_and_their_sums() {
        let replicas = [
            replica("kronjob-0", &[40.2, 45.0], 52.1, 10.3, Some(4990.0)),
            replica("kronjob-1", &[38.0, 44.4], 50.0, 9.5, Some(5010.0)),
        ];
        let mut out = String::new();
        replica_table(&mut out, "kronjob", &replicas);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[1].starts_with("| kronjob replica | RSS after each slot"));
        assert_eq!(lines[3], "| kronjob-0 | 40, 45 | 52.1 | 10.3 | 4990 | 2 |");
        assert_eq!(lines[4], "| kronjob-1 | 38, 44 | 50.0 | 9.5 | 5010 | 2 |");
        assert_eq!(lines[5], "| sum | 78, 89 | 102.1 | 19.8 | 10000 | |");
        // A replica whose gauge could not be read leaves the sum unknown.
        let mut out = String::new();
        replica_table(
            &mut out,
            "kronjob",
            &[
                replica("kronjob-0", &[40.0], 52.0, 1.0, Some(1.0)),
                replica("kronjob-1", &[40.0], 52.0, 1.0, None),
            ],
        );
        assert!(
            out.lines()
                .any(|l| l == "| kronjob-1 | 40 | 52.0 | 1.0 | - | - |")
        );
        assert!(out.lines().any(|l| l == "| sum | 80 | 104.0 | 2.0 | - | |"));
    }

    #[test]
    fn gauges_and_skew_buckets_are_read_from_the_metrics_text() {
        let text = "HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\n\
            # HELP kronjob_shard_cronjobs CronJobs this replica schedules.\n\
            # TYPE kronjob_shard_cronjobs gauge\n\
            kronjob_shard_cronjobs 3334\n\
            kronjob_shard_cronjobs_total 7\n\
            kronjob_shard_members 3\n\
            kronjob_queue{name=\"a b\"} 2\n\
            kronjob_queue{name=\"c\"} 3 1700000000\n\
            kronjob_job_creation_skew_seconds_bucket{le=\"0.5\"} 10\n\
            kronjob_job_creation_skew_seconds_bucket{le=\"+Inf\"} 12\n\
            # EOF\n";
        assert_eq!(metric_value(text, "kronjob_shard_cronjobs"), Some(3334.0));
        assert_eq!(metric_value(text, "kronjob_shard_members"), Some(3.0));
        assert_eq!(metric_value(text, "kronjob_queue"), Some(5.0));
        assert_eq!(metric_value(text, "kronjob_shard"), None);
        assert_eq!(metric_value("", "kronjob_shard_cronjobs"), None);
        let buckets = skew_buckets(text);
        assert_eq!(buckets.get("0.5"), Some(&10));
        assert_eq!(buckets.get("+Inf"), Some(&12));
    }

    #[test]
    fn replicas_default_to_one_and_are_at_least_one() {
        let args = Args::try_parse_from(["scale"]).expect("defaults");
        assert_eq!((args.replicas, args.single_peak_mib), (1, None));
        let args = Args::try_parse_from(["scale", "--replicas", "3", "--single-peak-mib", "126"])
            .expect("flags");
        assert_eq!((args.replicas, args.single_peak_mib), (3, Some(126.0)));
        assert!(Args::try_parse_from(["scale", "--replicas", "0"]).is_err());
    }

    #[test]
    fn replicas_are_named_flags_found_and_samples_summed() {
        assert_eq!(replica_name(0, 1), "kronjob");
        assert_eq!(replica_name(2, 3), "kronjob-2");
        let argv = [
            "--sharding".to_string(),
            "--metrics-secure=true".to_string(),
        ];
        assert!(has_flag(&argv, "--sharding"));
        assert!(has_flag(&argv, "--metrics-secure"));
        assert!(!has_flag(&argv, "--metrics"));
        assert!(!has_flag(&argv, "--shard"));
        let a = ProcSample {
            rss_mib: 1.0,
            hwm_mib: 2.0,
            cpu_s: 3.0,
        };
        let sum = total(&[a, a]);
        assert_eq!((sum.rss_mib, sum.hwm_mib, sum.cpu_s), (2.0, 4.0, 6.0));
        assert_eq!(all_ready(&[Some(1.5), Some(2.5)]), Some(2.5));
        assert_eq!(all_ready(&[Some(1.5), None]), None);
    }

    #[test]
    fn proc_sample_reads_this_process() {
        let s = proc_sample(std::process::id(), clock_ticks()).expect("/proc");
        assert!(s.rss_mib > 0.0 && s.hwm_mib >= s.rss_mib);
    }
}
