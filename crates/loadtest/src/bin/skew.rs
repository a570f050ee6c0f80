//! Job-creation skew against a live cluster where kronjob runs: a load and sizing tool, not
//! part of the product binary.
//!
//! ```sh
//! cargo run --release -p kronjob-loadtest --bin skew -- --cronjobs 500 --duration 10m
//! ```
//!
//! It creates N CronJobs (in a scratch namespace unless `--namespace` is given), watches the
//! Jobs the operator creates for them, and reports how late each Job appeared (job-creation
//! skew), duplicate Jobs for one slot, and slots that got no Job at all; then it cleans up.
//! It needs rights the manager does not have (creating and deleting namespaces and CronJobs):
//! run it with your own credentials.
//!
//! - a pure part ([`Observation`], [`report`], [`slots_between`]) turns what was seen into a
//!   [`Report`], unit-tested on tables;
//! - the I/O part ([`run_skew`]) creates the CronJobs, watches the Jobs and cleans up.

#![allow(missing_docs)]

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::time::Duration;

use futures::StreamExt;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{Container, Namespace, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Serialize, Serializer};
use tokio::sync::mpsc;

use kronjob::api::{ANNOTATION_SCHEDULED_AT, CronJob, CronJobSpec, LABEL_CRONJOB};
use kronjob::schedule::{ParseError, Schedule, ZoneError, time_zone};

/// Label put on every object a bench run creates; its value identifies the run.
pub const LABEL_BENCH_RUN: &str = "bench.kronjob.dev/run";

/// What the skew numbers include, printed with every report.
pub const SKEW_NOTE: &str = "skew = local arrival of the first watch event showing the Job - its scheduled time; \
     it includes watch latency and clock offset; the in-controller skew is the \
     kronjob_job_creation_skew_seconds metric";

/// Slots closer than this to the end of the run are not expected to have a Job yet.
const END_GRACE: SignedDuration = SignedDuration::from_secs(60);

/// How long to wait for the Job watch to list before giving up.
const WATCH_READY_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

/// Arguments of the skew tool.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "skew",
    about = "Measure kronjob's Job-creation skew on a live cluster"
)]
pub struct SkewArgs {
    /// How many CronJobs to create (named bench-skew-0000, bench-skew-0001, ...).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub cronjobs: u32,
    /// The schedule of every CronJob.
    #[arg(long, default_value = "* * * * *")]
    pub schedule: String,
    /// IANA time zone of every CronJob (default UTC).
    #[arg(long)]
    pub time_zone: Option<String>,
    /// How long to watch, e.g. 90s, 5m, 1h, 1h30m.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Namespace to create the CronJobs in (default: a new namespace
    /// kronjob-bench-YYYYMMDD-HHMMSS, deleted afterwards unless --keep).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Image of the Job's container, which runs `true`.
    #[arg(long, default_value = "busybox:1.36")]
    pub image: String,
    /// Keep the CronJobs (and the namespace) after the run.
    #[arg(long)]
    pub keep: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Parse `--duration` (`90s`, `5m`, `1h30m`, or seconds). Zero is refused: a run must last.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = kronjob::duration::parse_flag_duration(text)?;
    if d.is_zero() {
        return Err(format!("invalid duration {text:?}: must be positive"));
    }
    Ok(d)
}

// ---------------------------------------------------------------------------------------------
// Pure part
// ---------------------------------------------------------------------------------------------

/// One Job as the watch first showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// Name of the CronJob (the Job's `batch.kronjob.dev/cronjob` label).
    pub cronjob: String,
    /// The slot the Job was created for.
    pub scheduled: Timestamp,
    /// Local time at which the first watch event showing the Job arrived.
    pub arrived: Timestamp,
}

impl Observation {
    /// `arrived - scheduled` (negative if the local clock is behind the operator's).
    pub fn skew(&self) -> SignedDuration {
        self.arrived.duration_since(self.scheduled)
    }
}

/// Job-creation skew over all Jobs seen, by nearest rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SkewStats {
    /// Median.
    #[serde(rename = "p50_seconds", serialize_with = "as_seconds")]
    pub p50: SignedDuration,
    /// 99th percentile.
    #[serde(rename = "p99_seconds", serialize_with = "as_seconds")]
    pub p99: SignedDuration,
    /// Largest.
    #[serde(rename = "max_seconds", serialize_with = "as_seconds")]
    pub max: SignedDuration,
}

/// More than one Job for one (CronJob, slot).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Duplicate {
    /// The CronJob.
    pub cronjob: String,
    /// The slot.
    pub scheduled: Timestamp,
    /// How many Jobs were seen for it (at least 2).
    pub jobs: usize,
}

/// A slot of a CronJob's schedule for which no Job was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissedSlot {
    /// The CronJob.
    pub cronjob: String,
    /// The slot.
    pub scheduled: Timestamp,
}

/// What a live run was: filled in by [`run`], absent from [`report`]'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunInfo {
    /// Namespace the CronJobs lived in.
    pub namespace: String,
    /// How many CronJobs were created.
    pub cronjobs: u32,
    /// Their schedule.
    pub schedule: String,
    /// Their time zone (`None`: UTC).
    pub time_zone: Option<String>,
    /// When all CronJobs existed and the watch window began.
    pub start: Timestamp,
    /// When the watch window ended.
    pub end: Timestamp,
    /// Whether the window was cut short by Ctrl-C.
    pub interrupted: bool,
}

/// The result of a bench run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The run, when the report comes from [`run`].
    pub run: Option<RunInfo>,
    /// How many Jobs were seen.
    pub jobs_seen: usize,
    /// Job-creation skew, `None` when no Job was seen.
    pub skew: Option<SkewStats>,
    /// What the skew includes (see [`SKEW_NOTE`]).
    pub skew_note: &'static str,
    /// How many slots were expected to get a Job.
    pub expected_slots: usize,
    /// (CronJob, slot) pairs with more than one Job, in CronJob then slot order.
    pub duplicates: Vec<Duplicate>,
    /// Expected slots with no Job, in CronJob then slot order.
    pub missed: Vec<MissedSlot>,
}

fn as_seconds<S: Serializer>(d: &SignedDuration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Nearest-rank percentile of an ascending slice: the value at rank `ceil(percent / 100 * n)`
/// (at least rank 1); `None` when empty. `percent` above 100 is read as 100.
pub fn nearest_rank<T: Copy>(sorted: &[T], percent: u32) -> Option<T> {
    let n = sorted.len();
    let percent = usize::try_from(percent.min(100)).unwrap_or(100);
    let rank = percent.saturating_mul(n).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Summarise a run: skew over every observation, duplicates (more than one observation for
/// one (CronJob, slot)), and missed slots (every slot of `expected_slots`, keyed by CronJob,
/// with no observation). Observations for slots not in `expected_slots` count for skew and
/// duplicates only.
pub fn report(
    observations: &[Observation],
    expected_slots: &BTreeMap<String, Vec<Timestamp>>,
) -> Report {
    let mut skews: Vec<SignedDuration> = observations.iter().map(Observation::skew).collect();
    skews.sort_unstable();
    let skew = match (
        nearest_rank(&skews, 50),
        nearest_rank(&skews, 99),
        skews.last(),
    ) {
        (Some(p50), Some(p99), Some(&max)) => Some(SkewStats { p50, p99, max }),
        _ => None,
    };

    let mut per_slot: BTreeMap<(&str, Timestamp), usize> = BTreeMap::new();
    for o in observations {
        *per_slot
            .entry((o.cronjob.as_str(), o.scheduled))
            .or_default() += 1;
    }
    let duplicates = per_slot
        .iter()
        .filter(|(_, jobs)| **jobs > 1)
        .map(|((cronjob, scheduled), jobs)| Duplicate {
            cronjob: (*cronjob).to_string(),
            scheduled: *scheduled,
            jobs: *jobs,
        })
        .collect();

    let mut missed = Vec::new();
    for (cronjob, slots) in expected_slots {
        let mut slots = slots.clone();
        slots.sort_unstable();
        slots.dedup();
        for scheduled in slots {
            if !per_slot.contains_key(&(cronjob.as_str(), scheduled)) {
                missed.push(MissedSlot {
                    cronjob: cronjob.clone(),
                    scheduled,
                });
            }
        }
    }

    Report {
        run: None,
        jobs_seen: observations.len(),
        skew,
        skew_note: SKEW_NOTE,
        expected_slots: expected_slots.values().map(Vec::len).sum(),
        duplicates,
        missed,
    }
}

/// The slots of `schedule` in zone `tz` that lie in `[from, to]`, found by chaining
/// [`Schedule::next_after`] from `anchor` (the CronJob's creation time: it fixes where
/// `@every` slots fall; cron slots do not depend on it as long as `anchor < from`).
pub fn slots_between(
    schedule: &Schedule,
    tz: &TimeZone,
    anchor: Timestamp,
    from: Timestamp,
    to: Timestamp,
) -> Vec<Timestamp> {
    let mut out = Vec::new();
    let mut t = anchor;
    while let Some(next) = schedule.next_after(t, tz) {
        if next > to {
            break;
        }
        if next >= from {
            out.push(next);
        }
        t = next;
    }
    out
}

/// The slot a Job was created for: its `batch.kronjob.dev/scheduled-at` annotation, else the
/// minutes in its name (`<cronjob>-<unix minutes>`).
pub fn scheduled_time(job_name: &str, scheduled_at: Option<&str>) -> Option<Timestamp> {
    if let Some(at) = scheduled_at.and_then(|s| s.parse::<Timestamp>().ok()) {
        return Some(at);
    }
    let (_, minutes) = job_name.rsplit_once('-')?;
    let minutes: i64 = minutes.parse().ok()?;
    Timestamp::from_second(minutes.checked_mul(60)?).ok()
}

impl Report {
    /// The report as a human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; the results are ignored on that ground.
        if let Some(run) = &self.run {
            let _ = writeln!(out, "Namespace        {}", run.namespace);
            let _ = writeln!(out, "CronJobs         {}", run.cronjobs);
            let _ = writeln!(
                out,
                "Schedule         {:?} in {}",
                run.schedule,
                run.time_zone.as_deref().unwrap_or("UTC")
            );
            let _ = writeln!(
                out,
                "Window           {} .. {}{}",
                run.start,
                run.end,
                if run.interrupted {
                    " (interrupted)"
                } else {
                    ""
                }
            );
        }
        let _ = writeln!(out, "Jobs seen        {}", self.jobs_seen);
        match &self.skew {
            Some(s) => {
                let _ = writeln!(out, "Skew p50         {:.3}s", s.p50.as_secs_f64());
                let _ = writeln!(out, "Skew p99         {:.3}s", s.p99.as_secs_f64());
                let _ = writeln!(out, "Skew max         {:.3}s", s.max.as_secs_f64());
            }
            None => {
                let _ = writeln!(out, "Skew             - (no Jobs)");
            }
        }
        let _ = writeln!(out, "Expected slots   {}", self.expected_slots);
        let _ = writeln!(out, "Duplicates       {}", self.duplicates.len());
        let _ = writeln!(out, "Missed slots     {}", self.missed.len());
        let _ = writeln!(out, "Note: {}", self.skew_note);
        if !self.duplicates.is_empty() {
            let _ = writeln!(out, "\nDUPLICATE CRONJOB        SLOT                  JOBS");
            for d in &self.duplicates {
                let _ = writeln!(out, "{:<24} {:<21} {}", d.cronjob, d.scheduled, d.jobs);
            }
        }
        if !self.missed.is_empty() {
            let _ = writeln!(out, "\nMISSED CRONJOB           SLOT");
            for m in &self.missed {
                let _ = writeln!(out, "{:<24} {}", m.cronjob, m.scheduled);
            }
        }
        out
    }

    /// The report as pretty-printed JSON.
    pub fn json(&self) -> Result<String, BenchError> {
        serde_json::to_string_pretty(self).map_err(BenchError::Json)
    }
}

// ---------------------------------------------------------------------------------------------
// I/O part
// ---------------------------------------------------------------------------------------------

/// Why a bench run failed. `Display` is the message for stderr; causes are in `source()`.
#[derive(thiserror::Error, Debug)]
pub enum BenchError {
    /// The schedule does not parse.
    #[error("invalid schedule {schedule:?}")]
    Schedule {
        /// The schedule given.
        schedule: String,
        /// The parser's error.
        #[source]
        source: ParseError,
    },
    /// The time zone is unknown or not allowed.
    #[error("invalid --time-zone")]
    Zone(#[source] ZoneError),
    /// The schedule parses but can never fire.
    #[error("schedule {0:?} never fires")]
    NeverFires(String),
    /// `--duration` does not fit a timestamp.
    #[error("--duration {0:?} is too long")]
    DurationTooLong(Duration),
    /// An API call failed.
    #[error("{action}")]
    Kube {
        /// What was being done, e.g. `creating CronJob ns/bench-skew-0000`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The Job watch did not finish its initial list in time.
    #[error("the Job watch did not start within {timeout:?}; last error: {last_error}")]
    WatchNotReady {
        /// How long we waited.
        timeout: Duration,
        /// The last watch error seen, or `none`.
        last_error: String,
    },
    /// Ctrl-C before the watch window began; what was created has been cleaned up.
    #[error("interrupted before the run started")]
    Interrupted,
    /// Serialising the report failed.
    #[error("serialising the report")]
    Json(#[source] serde_json::Error),
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> BenchError {
    let action = action.into();
    move |source| BenchError::Kube { action, source }
}

/// Message from the Job watch task.
enum WatchMsg {
    /// The initial list is done: Jobs created from now on arrive as live events.
    Ready,
    /// A Job of ours, first seen.
    Seen(Observation),
    /// A watch error (the watcher retries with backoff).
    Error(String),
}

/// What was created and must be removed.
struct Cleanup {
    client: kube::Client,
    namespace: String,
    created_namespace: bool,
    run_id: String,
}

impl Cleanup {
    /// Delete the run's CronJobs (their Jobs go with them by owner reference), then the
    /// namespace if we created it. Failures are reported on stderr, not returned: the
    /// report is worth more than a cleanup error.
    async fn run(&self) {
        let cronjobs: Api<CronJob> = Api::namespaced(self.client.clone(), &self.namespace);
        let selector = format!("{LABEL_BENCH_RUN}={}", self.run_id);
        if let Err(e) = cronjobs
            .delete_collection(
                &DeleteParams::background(),
                &ListParams::default().labels(&selector),
            )
            .await
        {
            eprintln!(
                "warning: deleting CronJobs {selector} in {}: {e}",
                self.namespace
            );
        }
        if self.created_namespace {
            let namespaces: Api<Namespace> = Api::all(self.client.clone());
            match namespaces
                .delete(&self.namespace, &DeleteParams::background())
                .await
            {
                Ok(_) => eprintln!("deleted namespace {}", self.namespace),
                Err(e) => eprintln!("warning: deleting namespace {}: {e}", self.namespace),
            }
        } else {
            eprintln!("deleted CronJobs {selector} in {}", self.namespace);
        }
    }
}

/// Resolves on Ctrl-C; never resolves if the handler cannot be installed.
async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Run the measurement; progress goes to stderr.
pub async fn run_skew(args: SkewArgs, client: kube::Client) -> Result<Report, BenchError> {
    // Everything that can be checked without the cluster, first.
    let tz = time_zone(args.time_zone.as_deref()).map_err(BenchError::Zone)?;
    let probe = Schedule::parse(&args.schedule, "").map_err(|source| BenchError::Schedule {
        schedule: args.schedule.clone(),
        source,
    })?;
    if !probe.ever_fires() {
        return Err(BenchError::NeverFires(args.schedule.clone()));
    }
    let window = SignedDuration::try_from(args.duration)
        .map_err(|_| BenchError::DurationTooLong(args.duration))?;
    let now = Timestamp::now();
    now.checked_add(window)
        .map_err(|_| BenchError::DurationTooLong(args.duration))?;
    let history = history_limit(&probe, &tz, now, window);

    let run_id = now.strftime("%Y%m%d-%H%M%S").to_string();
    let (namespace, create_namespace) = match &args.namespace {
        Some(ns) => (ns.clone(), false),
        None => (format!("kronjob-bench-{run_id}"), true),
    };
    let names: Vec<String> = (0..args.cronjobs)
        .map(|i| format!("bench-skew-{i:04}"))
        .collect();

    let mut cleanup = Cleanup {
        client: client.clone(),
        namespace: namespace.clone(),
        created_namespace: false,
        run_id: run_id.clone(),
    };

    // Setup: namespace, watch, CronJobs. Ctrl-C here aborts the run.
    let setup = async {
        if create_namespace {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(namespace.clone()),
                    labels: Some([(LABEL_BENCH_RUN.to_string(), run_id.clone())].into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            namespaces
                .create(&PostParams::default(), &ns)
                .await
                .map_err(kube_err(format!("creating namespace {namespace}")))?;
            eprintln!("created namespace {namespace}");
        }
        Ok::<_, BenchError>(())
    };
    let setup_result = tokio::select! {
        r = setup => r,
        () = ctrl_c() => Err(BenchError::Interrupted),
    };
    // The namespace is ours to delete once created, or when Ctrl-C may have cut the request
    // after the server acted (its name carries the run's time); not when creation failed.
    cleanup.created_namespace =
        create_namespace && matches!(setup_result, Ok(()) | Err(BenchError::Interrupted));
    if let Err(e) = setup_result {
        if !args.keep {
            cleanup.run().await;
        }
        return Err(e);
    }

    let (tx, mut rx) = mpsc::unbounded_channel();
    let watch = tokio::spawn(watch_jobs(
        Api::namespaced(client.clone(), &namespace),
        names.iter().cloned().collect(),
        tx,
    ));

    let created = async {
        wait_ready(&mut rx).await?;
        eprintln!("watching Jobs in {namespace}");
        let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), &namespace);
        let mut anchors = BTreeMap::new();
        for name in &names {
            let cj = cronjob(name, &args, &run_id, history);
            let made = cronjobs
                .create(&PostParams::default(), &cj)
                .await
                .map_err(kube_err(format!("creating CronJob {namespace}/{name}")))?;
            let anchor = made
                .metadata
                .creation_timestamp
                .map_or_else(Timestamp::now, |t| t.0);
            anchors.insert(name.clone(), anchor);
        }
        eprintln!("created {} CronJobs {:?}", names.len(), args.schedule);
        Ok::<_, BenchError>(anchors)
    };
    let created = tokio::select! {
        r = created => r,
        () = ctrl_c() => Err(BenchError::Interrupted),
    };
    let anchors = match created {
        Ok(anchors) => anchors,
        Err(e) => {
            watch.abort();
            if !args.keep {
                cleanup.run().await;
            }
            return Err(e);
        }
    };

    // The window: from now (every CronJob exists) for --duration, or until Ctrl-C.
    let start = Timestamp::now();
    eprintln!(
        "watching for {}s (until {}); Ctrl-C ends early and reports",
        args.duration.as_secs(),
        start.checked_add(window).unwrap_or(start)
    );
    let mut seen: Vec<Observation> = Vec::new();
    let deadline = tokio::time::sleep(args.duration);
    tokio::pin!(deadline);
    // One listener for the whole window, so a Ctrl-C between two messages is not lost.
    let interrupt = ctrl_c();
    tokio::pin!(interrupt);
    let interrupted = loop {
        tokio::select! {
            () = &mut deadline => break false,
            () = &mut interrupt => break true,
            msg = rx.recv() => match msg {
                Some(WatchMsg::Seen(o)) => seen.push(o),
                Some(WatchMsg::Error(e)) => eprintln!("warning: Job watch: {e}"),
                Some(WatchMsg::Ready) => {}
                // The task ended (it does not, short of a panic): wait out the window.
                None => {
                    eprintln!("warning: the Job watch stopped; no more Jobs will be seen");
                    tokio::select! {
                        () = &mut deadline => break false,
                        () = &mut interrupt => break true,
                    }
                }
            },
        }
    };
    let end = Timestamp::now();
    watch.abort();
    // Jobs that arrived in the same instant as the deadline.
    while let Ok(msg) = rx.try_recv() {
        if let WatchMsg::Seen(o) = msg {
            seen.push(o);
        }
    }

    // Expected slots: [start, end - 60 s] per CronJob, in its zone, with its H key.
    let last = end.checked_sub(END_GRACE).unwrap_or(end);
    let mut expected = BTreeMap::new();
    for (name, anchor) in &anchors {
        let key = format!("{namespace}/{name}");
        let schedule =
            Schedule::parse(&args.schedule, &key).map_err(|source| BenchError::Schedule {
                schedule: args.schedule.clone(),
                source,
            })?;
        expected.insert(
            name.clone(),
            slots_between(&schedule, &tz, *anchor, start, last),
        );
    }

    if args.keep {
        eprintln!("kept CronJobs {LABEL_BENCH_RUN}={run_id} in namespace {namespace}");
    } else {
        cleanup.run().await;
    }

    let mut out = report(&seen, &expected);
    out.run = Some(RunInfo {
        namespace,
        cronjobs: args.cronjobs,
        schedule: args.schedule,
        time_zone: args.time_zone,
        start,
        end,
        interrupted,
    });
    Ok(out)
}

/// Wait for the watch's initial list, relaying its errors to stderr.
async fn wait_ready(rx: &mut mpsc::UnboundedReceiver<WatchMsg>) -> Result<(), BenchError> {
    let mut last_error = String::from("none");
    let ready = async {
        while let Some(msg) = rx.recv().await {
            match msg {
                WatchMsg::Ready => return true,
                WatchMsg::Error(e) => {
                    eprintln!("warning: Job watch: {e}");
                    last_error = e;
                }
                // Jobs left over from before the run: not ours to measure.
                WatchMsg::Seen(_) => {}
            }
        }
        false
    };
    match tokio::time::timeout(WATCH_READY_TIMEOUT, ready).await {
        Ok(true) => Ok(()),
        Ok(false) | Err(_) => Err(BenchError::WatchNotReady {
            timeout: WATCH_READY_TIMEOUT,
            last_error,
        }),
    }
}

/// Watch Jobs labelled `batch.kronjob.dev/cronjob` whose CronJob is one of `names`, and send
/// each Job (by UID, so a re-created Job counts again) once, stamped with the local time of
/// the first event that showed it.
async fn watch_jobs(api: Api<Job>, names: HashSet<String>, tx: mpsc::UnboundedSender<WatchMsg>) {
    let config = watcher::Config::default().labels(LABEL_CRONJOB);
    let mut events = watcher(api, config)
        .backoff(kronjob::backoff::watch_backoff())
        .boxed();
    let mut first_seen: HashSet<String> = HashSet::new();
    let mut ready = false;
    while let Some(event) = events.next().await {
        let arrived = Timestamp::now();
        let job = match event {
            Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)) => job,
            Ok(watcher::Event::InitDone) => {
                if !ready {
                    ready = true;
                    if tx.send(WatchMsg::Ready).is_err() {
                        return;
                    }
                }
                continue;
            }
            Ok(watcher::Event::Init | watcher::Event::Delete(_)) => continue,
            Err(e) => {
                if tx.send(WatchMsg::Error(e.to_string())).is_err() {
                    return;
                }
                continue;
            }
        };
        let Some(cronjob) = job
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_CRONJOB))
        else {
            continue;
        };
        if !names.contains(cronjob) {
            continue;
        }
        let name = job.metadata.name.clone().unwrap_or_default();
        let key = job.metadata.uid.clone().unwrap_or_else(|| name.clone());
        if !first_seen.insert(key) {
            continue;
        }
        let annotation = job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_SCHEDULED_AT))
            .map(String::as_str);
        let Some(scheduled) = scheduled_time(&name, annotation) else {
            let msg = format!("Job {name}: no scheduled time in its annotation or name");
            if tx.send(WatchMsg::Error(msg)).is_err() {
                return;
            }
            continue;
        };
        let seen = Observation {
            cronjob: cronjob.clone(),
            scheduled,
            arrived,
        };
        if tx.send(WatchMsg::Seen(seen)).is_err() {
            return;
        }
    }
}

/// History limit that keeps every Job of the run: the slots in the window plus the setup
/// time (one hour of margin), plus a few. Capped at `i32::MAX`.
fn history_limit(
    schedule: &Schedule,
    tz: &TimeZone,
    now: Timestamp,
    window: SignedDuration,
) -> i32 {
    let horizon = now
        .checked_add(window)
        .and_then(|t| t.checked_add(SignedDuration::from_hours(1)))
        .unwrap_or(now);
    let count = slots_between(schedule, tz, now, now, horizon).len();
    i32::try_from(count.saturating_add(10)).unwrap_or(i32::MAX)
}

/// The CronJob `name` of the run: the schedule, large history limits, and a Job that runs
/// `true` once and never restarts.
fn cronjob(name: &str, args: &SkewArgs, run_id: &str, history: i32) -> CronJob {
    let labels: BTreeMap<String, String> =
        [(LABEL_BENCH_RUN.to_string(), run_id.to_string())].into();
    let container = Container {
        name: "true".to_string(),
        image: Some(args.image.clone()),
        command: Some(vec!["true".to_string()]),
        ..Container::default()
    };
    let job_template = JobTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        }),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_string()),
                    containers: vec![container],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
    };
    let mut cj = CronJob::new(
        name,
        CronJobSpec {
            schedule: Some(args.schedule.clone()),
            schedules: None,
            time_zone: args.time_zone.clone(),
            starting_deadline_seconds: None,
            concurrency_policy: Default::default(),
            queue: None,
            suspend: Some(false),
            job_template: Some(job_template),
            workload_template: None,
            completion: None,
            successful_jobs_history_limit: Some(history),
            failed_jobs_history_limit: Some(history),
            failure_policy: None,
            exclusions: None,
            calendars: None,
            not_before: None,
            not_after: None,
        },
    );
    cj.metadata.labels = Some(labels);
    cj
}

/// Parse the flags, run, print the report (a table, or JSON with `--json`).
#[tokio::main]
async fn main() -> std::process::ExitCode {
    use clap::Parser;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = SkewArgs::parse();
    let json = args.json;
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("error: no usable Kubernetes configuration: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let printed = run_skew(args, client).await.and_then(|report| {
        if json {
            report.json().map(|j| format!("{j}\n"))
        } else {
            Ok(report.table())
        }
    });
    match printed {
        Ok(text) => {
            print!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            let mut message = format!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{message}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
#[path = "../../../../tests/support/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

#[cfg(test)]
mod tests {
    use super::*;

    use super::fixtures::t as ts;

    fn obs(cronjob: &str, scheduled: &str, skew_ms: i64) -> Observation {
        let scheduled = ts(scheduled);
        Observation {
            cronjob: cronjob.to_string(),
            scheduled,
            arrived: scheduled
                .checked_add(SignedDuration::from_millis(skew_ms))
                .expect("in range"),
        }
    }

    #[test]
    fn nearest_rank_on_known_sets() {
        let one_to_ten: Vec<i32> = (1..=10).collect();
        let hundred: Vec<i32> = (1..=100).collect();
        let rows: &[(&[i32], u32, Option<i32>)] = &[
            (&[], 50, None),
            (&[7], 50, Some(7)),
            (&[7], 99, Some(7)),
            (&[7], 0, Some(7)),
            (&[1, 2], 50, Some(1)),
            (&[1, 2], 51, Some(2)),
            (&[1, 2, 3, 4], 50, Some(2)),
            (&[1, 2, 3, 4], 99, Some(4)),
            (&one_to_ten, 50, Some(5)),
            (&one_to_ten, 90, Some(9)),
            (&one_to_ten, 91, Some(10)),
            (&one_to_ten, 99, Some(10)),
            (&one_to_ten, 100, Some(10)),
            (&one_to_ten, 150, Some(10)),
            (&hundred, 50, Some(50)),
            (&hundred, 99, Some(99)),
            (&hundred, 100, Some(100)),
        ];
        for (set, p, want) in rows {
            assert_eq!(nearest_rank(set, *p), *want, "p{p} of {set:?}");
        }
    }

    #[test]
    fn skew_percentiles_of_a_run() {
        // 100 Jobs with skews 1..=100 ms, given out of order.
        let mut observations: Vec<Observation> = (1..=100)
            .rev()
            .map(|i| {
                obs(
                    &format!("cj-{}", i % 3),
                    &format!("2025-01-01T00:{:02}:00Z", i % 60),
                    i,
                )
            })
            .collect();
        observations.push(obs("late", "2025-01-01T01:00:00Z", 5_000));
        let r = report(&observations, &BTreeMap::new());
        assert_eq!(r.jobs_seen, 101);
        let skew = r.skew.expect("jobs were seen");
        assert_eq!(skew.p50, SignedDuration::from_millis(51));
        assert_eq!(skew.p99, SignedDuration::from_millis(100));
        assert_eq!(skew.max, SignedDuration::from_secs(5));
    }

    #[test]
    fn negative_skew_is_kept() {
        let r = report(
            &[
                obs("a", "2025-01-01T00:00:00Z", -200),
                obs("a", "2025-01-01T00:01:00Z", 300),
            ],
            &BTreeMap::new(),
        );
        let skew = r.skew.expect("jobs were seen");
        assert_eq!(skew.p50, SignedDuration::from_millis(-200));
        assert_eq!(skew.max, SignedDuration::from_millis(300));
    }

    #[test]
    fn duplicate_is_reported_once_with_its_count() {
        let observations = [
            obs("a", "2025-01-01T00:00:00Z", 100),
            obs("a", "2025-01-01T00:00:00Z", 900),
            obs("a", "2025-01-01T00:00:00Z", 950),
            obs("a", "2025-01-01T00:01:00Z", 100),
            // Same slot, other CronJob: not a duplicate.
            obs("b", "2025-01-01T00:00:00Z", 100),
        ];
        let r = report(&observations, &BTreeMap::new());
        assert_eq!(
            r.duplicates,
            vec![Duplicate {
                cronjob: "a".to_string(),
                scheduled: ts("2025-01-01T00:00:00Z"),
                jobs: 3,
            }]
        );
        assert!(r.missed.is_empty());
    }

    #[test]
    fn missed_slot_per_cronjob() {
        let expected: BTreeMap<String, Vec<Timestamp>> = [
            (
                "a".to_string(),
                vec![ts("2025-01-01T00:00:00Z"), ts("2025-01-01T00:01:00Z")],
            ),
            (
                "b".to_string(),
                vec![ts("2025-01-01T00:00:00Z"), ts("2025-01-01T00:01:00Z")],
            ),
        ]
        .into();
        let observations = [
            obs("a", "2025-01-01T00:00:00Z", 100),
            obs("a", "2025-01-01T00:01:00Z", 100),
            // b ran at 00:01 only; its 00:00 Job went to a (wrong) slot 00:00:30.
            obs("b", "2025-01-01T00:00:30Z", 100),
            obs("b", "2025-01-01T00:01:00Z", 100),
        ];
        let r = report(&observations, &expected);
        assert_eq!(r.expected_slots, 4);
        assert_eq!(
            r.missed,
            vec![MissedSlot {
                cronjob: "b".to_string(),
                scheduled: ts("2025-01-01T00:00:00Z"),
            }]
        );
        assert!(r.duplicates.is_empty());
        assert_eq!(r.jobs_seen, 4);
    }

    #[test]
    fn empty_run() {
        let r = report(&[], &BTreeMap::new());
        assert_eq!(r.jobs_seen, 0);
        assert_eq!(r.skew, None);
        assert_eq!(r.expected_slots, 0);
        assert!(r.duplicates.is_empty() && r.missed.is_empty());
        assert!(r.table().contains("no Jobs"));
        let json: serde_json::Value =
            serde_json::from_str(&r.json().expect("serialises")).expect("valid JSON");
        assert_eq!(json["skew"], serde_json::Value::Null);
        assert_eq!(json["jobs_seen"], 0);
    }

    #[test]
    fn nothing_seen_misses_every_expected_slot() {
        let expected: BTreeMap<String, Vec<Timestamp>> = [(
            "a".to_string(),
            vec![ts("2025-01-01T00:01:00Z"), ts("2025-01-01T00:00:00Z")],
        )]
        .into();
        let r = report(&[], &expected);
        let missed: Vec<Timestamp> = r.missed.iter().map(|m| m.scheduled).collect();
        assert_eq!(
            missed,
            vec![ts("2025-01-01T00:00:00Z"), ts("2025-01-01T00:01:00Z")]
        );
    }

    #[test]
    fn json_report_has_seconds_and_rfc3339() {
        let r = report(&[obs("a", "2025-01-01T00:00:00Z", 1_500)], &BTreeMap::new());
        let json: serde_json::Value =
            serde_json::from_str(&r.json().expect("serialises")).expect("valid JSON");
        assert_eq!(json["skew"]["p50_seconds"], 1.5);
        assert_eq!(json["skew"]["max_seconds"], 1.5);
        assert!(
            json["skew_note"]
                .as_str()
                .is_some_and(|s| s.contains("kronjob_job_creation_skew_seconds"))
        );
        let table = r.table();
        assert!(table.contains("Skew p99         1.500s"), "{table}");
        assert!(table.contains("watch latency"), "{table}");
    }

    #[test]
    fn slots_between_is_inclusive_and_zoned() {
        let every_minute = Schedule::parse("* * * * *", "").expect("valid");
        let got = slots_between(
            &every_minute,
            &TimeZone::UTC,
            ts("2025-01-01T00:00:30Z"),
            ts("2025-01-01T00:01:00Z"),
            ts("2025-01-01T00:03:00Z"),
        );
        assert_eq!(
            got,
            vec![
                ts("2025-01-01T00:01:00Z"),
                ts("2025-01-01T00:02:00Z"),
                ts("2025-01-01T00:03:00Z"),
            ]
        );
        // 02:30 daily in New York: skipped on the spring-forward day, run at 03:00 instead.
        let daily = Schedule::parse("30 2 * * *", "").expect("valid");
        let ny = time_zone(Some("America/New_York")).expect("zone");
        let got = slots_between(
            &daily,
            &ny,
            ts("2024-03-09T00:00:00Z"),
            ts("2024-03-09T00:00:00Z"),
            ts("2024-03-11T12:00:00Z"),
        );
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], ts("2024-03-09T07:30:00Z"));
        assert_eq!(got[2], ts("2024-03-11T06:30:00Z"));
    }

    #[test]
    fn slots_between_anchors_every() {
        let every = Schedule::parse("@every 90s", "").expect("valid");
        let got = slots_between(
            &every,
            &TimeZone::UTC,
            ts("2025-01-01T00:00:10Z"),
            ts("2025-01-01T00:02:00Z"),
            ts("2025-01-01T00:06:00Z"),
        );
        assert_eq!(
            got,
            vec![ts("2025-01-01T00:03:10Z"), ts("2025-01-01T00:04:40Z"),]
        );
    }

    #[test]
    fn scheduled_time_from_annotation_or_name() {
        let rows: &[(&str, Option<&str>, Option<&str>)] = &[
            (
                "cj-29000000",
                Some("2024-03-10T03:00:00-04:00"),
                Some("2024-03-10T07:00:00Z"),
            ),
            ("cj-29000000", None, Some("2025-02-19T21:20:00Z")),
            ("cj-29000000", Some("garbage"), Some("2025-02-19T21:20:00Z")),
            ("cj", None, None),
            ("cj-abc", None, None),
        ];
        for (name, annotation, want) in rows {
            assert_eq!(
                scheduled_time(name, *annotation),
                want.map(ts),
                "{name} {annotation:?}"
            );
        }
        // The name fallback inverts the operator's naming.
        let slot = ts("2025-06-01T12:34:00Z");
        let name = kronjob::workload::scheduled_name("bench-skew-0007", slot);
        assert_eq!(scheduled_time(&name, None), Some(slot));
    }

    #[test]
    fn durations() {
        let ok: &[(&str, u64)] = &[
            ("90s", 90),
            ("5m", 300),
            ("1h", 3600),
            ("1h30m", 5400),
            ("2m30s", 150),
            ("5", 5),
            ("1.5m", 90),
        ];
        for (text, secs) in ok {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(*secs)),
                "{text}"
            );
        }
        for bad in ["", "m", "5x", "-5m", "0s", "0", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn skew_args_parse() {
        use clap::Parser;
        let args =
            SkewArgs::try_parse_from(["skew", "--cronjobs", "3", "--duration", "90s", "--json"])
                .expect("parses");
        assert_eq!(args.cronjobs, 3);
        assert_eq!(args.schedule, "* * * * *");
        assert_eq!(args.duration, Duration::from_secs(90));
        assert_eq!(args.image, "busybox:1.36");
        assert!(args.json && !args.keep && args.namespace.is_none());
        assert!(SkewArgs::try_parse_from(["skew", "--cronjobs", "0"]).is_err());
        assert!(SkewArgs::try_parse_from(["skew", "--cronjobs", "1", "--duration", "0"]).is_err());
    }

    #[test]
    fn bench_cronjob_keeps_every_job() {
        let args = SkewArgs {
            cronjobs: 1,
            schedule: "* * * * *".to_string(),
            time_zone: None,
            duration: Duration::from_secs(300),
            namespace: None,
            image: "busybox:1.36".to_string(),
            keep: false,
            json: false,
        };
        let schedule = Schedule::parse(&args.schedule, "").expect("valid");
        let history = history_limit(
            &schedule,
            &TimeZone::UTC,
            ts("2025-01-01T00:00:00Z"),
            SignedDuration::from_secs(300),
        );
        // 65 slots in 1h05m, plus margin.
        assert_eq!(history, 75);
        let cj = cronjob("bench-skew-0000", &args, "run", history);
        assert_eq!(cj.spec.successful_jobs_history_limit, Some(75));
        assert_eq!(cj.spec.failed_jobs_history_limit, Some(75));
        let job = cj.spec.job_template.and_then(|t| t.spec).expect("job spec");
        assert_eq!(job.ttl_seconds_after_finished, None);
        let pod = job.template.spec.expect("pod spec");
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.containers[0].command, Some(vec!["true".to_string()]));
        assert_eq!(
            cj.metadata
                .labels
                .and_then(|l| l.get(LABEL_BENCH_RUN).cloned()),
            Some("run".to_string())
        );
    }
}
