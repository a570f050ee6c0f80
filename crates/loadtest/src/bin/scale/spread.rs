//! The spread scenario (`--spread`): N CronJobs on `H * * * *` (history limits 1/1), so each
//! runs once an hour at a minute its name hashes to, about N/60 of them due each minute, on
//! `--replicas` sharded replicas; optionally one replica more started before one slot
//! (`--add-replica-at`) and one stopped gracefully before another (`--remove-replica-at`),
//! so the buckets move while slots fall due.
//!
//! Per minute: the CronJobs due (each CronJob's own `H` minute, computed with kronjob's
//! schedule code), their Jobs, the missing and duplicate ones, Jobs of CronJobs not due then,
//! and the skew of each Job's watch arrival after its slot. Per replica: the start-up (process
//! start to every CronJob of its share, by the assignment of the first replicas, having had a
//! status write), the peak RSS and the CPU per hour of slots. Beside them the API server's and
//! etcd's RSS and CPU (from /proc) over the creates, the start-up and the slots, and the tool's
//! own.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use kronjob::api::CronJob;
use kronjob::controller::shard::Assignment;
use kronjob::schedule::Schedule;
use kronjob_envtest::ControlPlane;
use serde::Serialize;

use crate::floor::{self, Floor};
use crate::phase::{self, Controller, next_minute, secs, sleep_until};
use crate::process::{self, Sampler};
use crate::report::{Spread, floor_row};
use crate::watch::{Log, SharedLog, all_written, lock, summarise_slot};
use crate::{Args, BoxError};

/// The schedule of every CronJob of the scenario.
pub const SCHEDULE: &str = "H * * * *";
/// How long before its slot a replica is added or removed.
const MOVE_LEAD: Duration = Duration::from_secs(20);
/// The signal a graceful stop sends.
const SIGTERM: i32 = 15;
/// The namespace of the scenario's CronJobs.
const NS: &str = "scale-spread";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct SpreadArgs {
    /// Spread the CronJobs over the hour: `H * * * *`, history limits 1/1; each minute's
    /// CronJobs are measured against their own slot (`--slots` minutes).
    #[arg(long)]
    pub spread: bool,
    /// With `--spread`: start one replica more 20 s before this measured slot (1: the second).
    #[arg(long, requires = "spread", value_parser = clap::value_parser!(u32).range(1..))]
    pub add_replica_at: Option<u32>,
    /// With `--spread`: stop the first replica (SIGTERM) 20 s before this measured slot (1: the
    /// second).
    #[arg(long, requires = "spread", value_parser = clap::value_parser!(u32).range(1..))]
    pub remove_replica_at: Option<u32>,
}

/// The CronJob as the scenario wants it (unchanged without `--spread`).
pub fn shape(args: &SpreadArgs, mut cj: CronJob) -> CronJob {
    if args.spread {
        cj.spec.schedule = Some(SCHEDULE.into());
        cj.spec.successful_jobs_history_limit = Some(1);
        cj.spec.failed_jobs_history_limit = Some(1);
    }
    cj
}

/// The minute of the hour (0-59) CronJob `namespace/name` runs at with [`SCHEDULE`].
pub fn due_minute(namespace: &str, name: &str) -> Result<i8, BoxError> {
    let schedule = Schedule::parse(SCHEDULE, &format!("{namespace}/{name}"))?;
    let utc = jiff::tz::TimeZone::UTC;
    let next = schedule
        .next_after(Timestamp::UNIX_EPOCH, &utc)
        .ok_or("H * * * * never fires")?;
    Ok(next.to_zoned(utc).minute())
}

/// One measured minute.
#[derive(Debug, Clone, Serialize)]
pub struct Minute {
    pub slot: Timestamp,
    /// CronJobs whose `H` minute this is.
    pub due: usize,
    pub jobs: usize,
    pub missing: usize,
    /// Still missing at the end of the run (missing ones above came late, or never).
    pub missing_at_end: usize,
    pub duplicates: usize,
    /// Jobs for this slot of CronJobs not due at it.
    pub stray: usize,
    pub skew: Option<Spread>,
    /// A replica added or removed before this slot.
    pub change: Option<String>,
    /// Each replica's RSS 55 s after the slot, MiB (by name; gone ones left out).
    pub rss_mib: Vec<(String, f64)>,
    pub apiserver_rss_mib: f64,
    pub etcd_rss_mib: f64,
}

/// A process's cost over the phases of the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cost {
    pub name: String,
    pub peak_rss_mib: f64,
    pub rss_end_mib: f64,
    /// CPU seconds while the CronJobs were created (control plane only).
    pub cpu_create_s: f64,
    /// CPU seconds from the replicas' start to every CronJob's first status write.
    pub cpu_startup_s: f64,
    /// CPU seconds over the measured slots, and per hour of them.
    pub cpu_slots_s: f64,
    pub cpu_per_hour_s: f64,
}

/// One replica's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaFigures {
    pub cost: Cost,
    /// Process start to /readyz (the first replicas: to all of them ready), seconds.
    pub ready_s: Option<f64>,
    /// Process start to every CronJob of its share having had a status write, seconds.
    pub startup_s: Option<f64>,
    /// CronJobs of its share by the first replicas' assignment.
    pub share: usize,
    /// `kronjob_shard_cronjobs` at the end (or when it stopped).
    pub shard_cronjobs: Option<f64>,
    /// When it was started or stopped, relative to the first measured slot, seconds.
    pub started_s: f64,
    pub stopped_s: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct SpreadReport {
    pub cronjobs: usize,
    pub replicas: usize,
    pub kronjob: String,
    pub load_before: String,
    pub load_after: String,
    /// Bare creates of the largest minute's count.
    pub floor_bare: Floor,
    pub create_cronjobs_s: f64,
    /// Every CronJob's first status write after the replicas started, seconds.
    pub startup_s: Option<f64>,
    /// Jobs of slots before the first measured one (caught up at start-up).
    pub jobs_before: usize,
    /// (CronJob, slot) pairs with more than one Job over the whole run.
    pub duplicates_overall: usize,
    pub minutes: Vec<Minute>,
    pub replicas_figures: Vec<ReplicaFigures>,
    pub apiserver: Cost,
    pub etcd: Cost,
    pub tool: Cost,
    /// etcd's data folder at the end, MiB.
    pub etcd_data_mib: f64,
}

/// The pid of the process whose command line holds `needle`.
fn find_pid(needle: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        String::from_utf8_lossy(&cmdline)
            .contains(needle)
            .then_some(pid)
    })
}

/// The size of a folder's files, MiB.
fn folder_mib(dir: &std::path::Path) -> f64 {
    let mut bytes = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => bytes += m.len(),
                Err(_) => {}
            }
        }
    }
    bytes as f64 / (1024.0 * 1024.0)
}

/// (CronJob, slot) pairs with more than one Job in `log`.
pub fn duplicates_overall(log: &Log) -> usize {
    let mut seen: HashMap<(&str, Timestamp), usize> = HashMap::new();
    for j in &log.runs {
        if let (Some(owner), Some(slot)) = (j.owner.as_deref(), j.scheduled) {
            *seen.entry((owner, slot)).or_default() += 1;
        }
    }
    seen.values().filter(|n| **n > 1).count()
}

/// A process sampled over the run, with its CPU at the marks between phases.
struct Watched {
    name: String,
    sampler: Sampler,
    marks: Vec<(Instant, f64)>,
}

impl Watched {
    fn new(name: &str, pid: u32) -> Watched {
        let sampler = Sampler::start(pid);
        let now = sampler.now().cpu_s;
        Watched {
            name: name.into(),
            sampler,
            marks: vec![(Instant::now(), now)],
        }
    }

    fn mark(&mut self) {
        self.marks.push((Instant::now(), self.sampler.now().cpu_s));
    }

    /// CPU seconds between marks `a` and `b`, and the wall seconds between them.
    fn between(&self, a: usize, b: usize) -> (f64, f64) {
        match (self.marks.get(a), self.marks.get(b)) {
            (Some(x), Some(y)) => (y.1 - x.1, y.0.duration_since(x.0).as_secs_f64()),
            _ => (0.0, 0.0),
        }
    }
}

/// The cost of a control-plane process (or the tool) with marks: start, CronJobs created,
/// start-up done, first slot, end.
fn plane_cost(w: &Watched) -> Cost {
    let end = w.sampler.now();
    let (slots, wall) = w.between(3, 4);
    Cost {
        name: w.name.clone(),
        peak_rss_mib: w.sampler.peak_mib(&end),
        rss_end_mib: end.rss_mib,
        cpu_create_s: w.between(0, 1).0,
        cpu_startup_s: w.between(1, 2).0,
        cpu_slots_s: slots,
        cpu_per_hour_s: per_hour(slots, wall),
    }
}

fn per_hour(cpu: f64, wall: f64) -> f64 {
    if wall > 0.0 { cpu / wall * 3600.0 } else { 0.0 }
}

/// A replica of the run: its process, sampler and timings.
struct Member {
    controller: Controller,
    watched: Watched,
    started: Timestamp,
    ready_s: Option<f64>,
    startup_s: Option<f64>,
    share: usize,
    shard_cronjobs: Option<f64>,
    stopped: Option<Timestamp>,
}

async fn shard_cronjobs(c: &Controller) -> Option<f64> {
    let (code, text) = process::http_get(c.metrics?, "/metrics").await?;
    (code == 200)
        .then(|| process::metric_value(&text, "kronjob_shard_cronjobs"))
        .flatten()
}

/// Run the scenario on `plane` (with the CRD installed).
pub async fn run(args: &Args, plane: &mut ControlPlane) -> Result<SpreadReport, BoxError> {
    let s = &args.spread;
    let load_before = crate::load();
    if (s.add_replica_at.is_some() || s.remove_replica_at.is_some()) && args.replicas < 2 {
        return Err("--add-replica-at and --remove-replica-at need --replicas 2 at least".into());
    }
    let client = plane.client().await?;
    let dir = plane.dir().to_path_buf();
    let apiserver_pid = plane.apiserver().map(|p| p.pid()).ok_or("no API server")?;
    let etcd_pid = find_pid(&format!("--data-dir={}", dir.join("etcd").display()))
        .ok_or("etcd's process not found")?;
    // Each CronJob's minute, and who is due each minute.
    let names: Vec<String> = (0..args.cronjobs)
        .map(crate::objects::cronjob_name)
        .collect();
    let mut due: Vec<HashSet<String>> = vec![HashSet::new(); 60];
    for n in &names {
        let minute = usize::try_from(due_minute(NS, n)?)?;
        due[minute].insert(n.clone());
    }
    let busiest = due.iter().map(HashSet::len).max().unwrap_or(0);
    eprintln!(
        "spread: {} CronJobs, {busiest} due in the busiest minute",
        names.len()
    );
    // The floor: the busiest minute's creates, bare.
    let floor_args = Args {
        cronjobs: busiest.max(1),
        ..args.clone()
    };
    let floor_bare = floor::measure(&client, &floor_args, None).await?;
    crate::objects::delete_namespaces(&client, &["scale-floor-bare".into()]).await?;

    let mut plane_procs = [
        Watched::new("kube-apiserver", apiserver_pid),
        Watched::new("etcd", etcd_pid),
        Watched::new("the scale tool", std::process::id()),
    ];
    crate::objects::create_namespace(&client, NS).await?;
    phase::after_minute_boundary().await?;
    let (name_set, create_cronjobs_s) = phase::create_cronjobs(
        &client,
        NS,
        (phase::Which::Kronjob, kronjob::workload::kinds::job()),
        args,
    )
    .await?;
    eprintln!("spread: created in {create_cronjobs_s:.1} s");
    let log: SharedLog = Arc::default();
    let watches = phase::watch(
        &client,
        NS,
        (phase::Which::Kronjob, kronjob::workload::kinds::job()),
        &log,
    )
    .await;
    plane_procs.iter_mut().for_each(Watched::mark);

    // The first replicas, and the share of each by their assignment.
    let start = Timestamp::now();
    let mut controllers = (0..args.replicas)
        .map(|i| phase::start_kronjob(args, plane, i))
        .collect::<Result<Vec<_>, _>>()?;
    let pids: Vec<(String, u32)> = controllers
        .iter()
        .map(|c| (c.name.clone(), c.proc.pid()))
        .collect();
    let mut members: Vec<Member> = Vec::new();
    let watched: Vec<Watched> = pids.iter().map(|(n, p)| Watched::new(n, *p)).collect();
    let (ready_s, startup_s) = phase::startup(&log, &name_set, &mut controllers, start).await;
    eprintln!("spread: ready {ready_s:?} s, every CronJob written {startup_s:?} s");
    let first_names: Vec<String> = pids.iter().map(|(n, _)| n.clone()).collect();
    let assignment = Assignment::new("", first_names.iter().cloned());
    let mut shares: HashMap<&str, HashSet<String>> = HashMap::new();
    for n in &names {
        let owner = assignment
            .owner(&kronjob::controller::shard::key(NS, n))
            .unwrap_or_default();
        shares.entry(owner).or_default().insert(n.clone());
    }
    for (controller, mut w) in controllers.into_iter().zip(watched) {
        let share = shares
            .get(controller.name.as_str())
            .cloned()
            .unwrap_or_default();
        let written = all_written(&lock(&log), &share, start);
        w.mark();
        members.push(Member {
            watched: w,
            started: start,
            ready_s,
            startup_s: written.map(|t| secs(t.duration_since(start))),
            share: share.len(),
            shard_cronjobs: None,
            stopped: None,
            controller,
        });
    }
    plane_procs.iter_mut().for_each(Watched::mark);

    // The slots.
    let first = next_minute(Timestamp::now().checked_add(SignedDuration::from_secs(5))?);
    sleep_until(first).await;
    plane_procs.iter_mut().for_each(Watched::mark);
    members.iter_mut().for_each(|m| m.watched.mark());
    let jobs_before = lock(&log)
        .runs
        .iter()
        .filter(|j| j.scheduled.is_some_and(|t| t < first))
        .count();
    let lead = SignedDuration::try_from(MOVE_LEAD)?;
    let mut minutes = Vec::new();
    let mut pending = None;
    for i in 0..args.slots {
        let slot = first.checked_add(SignedDuration::from_mins(i64::from(i)))?;
        let change = pending.take();
        // A change before the next slot, made before this one is summarised.
        let next = slot.checked_add(SignedDuration::from_mins(1))?;
        if s.add_replica_at == Some(i + 1) {
            sleep_until(next.checked_sub(lead)?).await;
            let c = phase::start_kronjob(args, plane, args.replicas)?;
            eprintln!("spread: {} started before {next}", c.name);
            pending = Some(format!("{} added {} s before", c.name, MOVE_LEAD.as_secs()));
            let w = Watched::new(&c.name, c.proc.pid());
            members.push(Member {
                watched: w,
                started: Timestamp::now(),
                ready_s: None,
                startup_s: None,
                share: 0,
                shard_cronjobs: None,
                stopped: None,
                controller: c,
            });
        }
        if s.remove_replica_at == Some(i + 1)
            && let Some(m) = members.iter_mut().find(|m| m.stopped.is_none())
        {
            sleep_until(next.checked_sub(lead)?).await;
            m.shard_cronjobs = shard_cronjobs(&m.controller).await;
            m.watched.mark();
            m.stopped = Some(Timestamp::now());
            eprintln!(
                "spread: {} stopped (SIGTERM) before {next}",
                m.controller.name
            );
            pending = Some(format!(
                "{} stopped {} s before",
                m.controller.name,
                MOVE_LEAD.as_secs()
            ));
            kronjob_envtest::process::signal(m.controller.proc.pid(), SIGTERM);
        }
        sleep_until(slot.checked_add(SignedDuration::from_secs(55))?).await;
        let minute = usize::try_from(slot.to_zoned(jiff::tz::TimeZone::UTC).minute())?;
        let due_now = &due[minute];
        let summary = summarise_slot(&lock(&log), slot, due_now);
        let matched = due_now.len() - summary.missing;
        let m = Minute {
            slot,
            due: due_now.len(),
            jobs: summary.runs,
            missing: summary.missing,
            missing_at_end: summary.missing,
            duplicates: summary.duplicates,
            stray: summary.runs.saturating_sub(matched + summary.duplicates),
            skew: summary.skew,
            change,
            rss_mib: members
                .iter()
                .filter(|m| m.stopped.is_none())
                .map(|m| (m.controller.name.clone(), m.watched.sampler.now().rss_mib))
                .collect(),
            apiserver_rss_mib: plane_procs[0].sampler.now().rss_mib,
            etcd_rss_mib: plane_procs[1].sampler.now().rss_mib,
        };
        eprintln!(
            "slot {slot}: {} due, {} Jobs, {} missing, {} duplicate, {} stray, skew p50/p99/max {} s",
            m.due,
            m.jobs,
            m.missing,
            m.duplicates,
            m.stray,
            Spread::show(m.skew)
        );
        minutes.push(m);
    }
    plane_procs.iter_mut().for_each(Watched::mark);
    for m in members.iter_mut().filter(|m| m.stopped.is_none()) {
        m.shard_cronjobs = shard_cronjobs(&m.controller).await;
        m.watched.mark();
    }
    let duplicates = duplicates_overall(&lock(&log));
    for m in &mut minutes {
        let minute = usize::try_from(m.slot.to_zoned(jiff::tz::TimeZone::UTC).minute())?;
        m.missing_at_end = summarise_slot(&lock(&log), m.slot, &due[minute]).missing;
    }
    let rel = |t: Timestamp| secs(t.duration_since(first));
    let replicas_figures = members
        .iter()
        .map(|m| {
            let w = &m.watched;
            let last = w.marks.len() - 1;
            let end_sample = w.sampler.now();
            // The first replicas' marks: start, start-up done, first slot, end; an added one's:
            // start, end.
            let from = if m.started == start { 2 } else { 0 };
            let (slots, wall) = w.between(from, last);
            ReplicaFigures {
                cost: Cost {
                    name: w.name.clone(),
                    peak_rss_mib: w.sampler.peak_mib(&end_sample),
                    rss_end_mib: end_sample.rss_mib,
                    cpu_create_s: 0.0,
                    cpu_startup_s: if m.started == start {
                        w.between(0, 1).0
                    } else {
                        0.0
                    },
                    cpu_slots_s: slots,
                    cpu_per_hour_s: per_hour(slots, wall),
                },
                ready_s: m.ready_s,
                startup_s: m.startup_s,
                share: m.share,
                shard_cronjobs: m.shard_cronjobs,
                started_s: rel(m.started),
                stopped_s: m.stopped.map(rel),
            }
        })
        .collect();
    for m in &mut members {
        m.controller.proc.stop(Duration::from_secs(30));
    }
    for w in watches {
        w.abort();
    }
    Ok(SpreadReport {
        cronjobs: args.cronjobs,
        replicas: args.replicas,
        kronjob: args.kronjob.display().to_string(),
        load_before,
        load_after: crate::load(),
        floor_bare,
        create_cronjobs_s,
        startup_s,
        jobs_before,
        duplicates_overall: duplicates,
        minutes,
        replicas_figures,
        apiserver: plane_cost(&plane_procs[0]),
        etcd: plane_cost(&plane_procs[1]),
        tool: plane_cost(&plane_procs[2]),
        etcd_data_mib: folder_mib(&dir.join("etcd")),
    })
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

impl SpreadReport {
    /// The report as markdown tables.
    pub fn tables(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## {} CronJobs on `{SCHEDULE}`, {} sharded replicas ({})\n\nload average {} at the start, {} at the end\n",
            self.cronjobs, self.replicas, self.kronjob, self.load_before, self.load_after
        );
        let _ = writeln!(out, "| | |\n|---|---|");
        floor_row(&mut out, "floor (the busiest minute)", &self.floor_bare);
        let _ = writeln!(
            out,
            "| CronJobs created | {:.1} s |\n| start-up: every CronJob's first status write | {} s |\n| Jobs of slots before the first measured (caught up) | {} |\n| (CronJob, slot) pairs with more than one Job, whole run | {} |\n| etcd's data at the end | {:.0} MiB |\n",
            self.create_cronjobs_s,
            opt(self.startup_s),
            self.jobs_before,
            self.duplicates_overall,
            self.etcd_data_mib
        );
        let _ = writeln!(
            out,
            "| slot | due | Jobs | missing (at the end) | duplicate | stray | skew p50 / p99 / max (s) | change | replicas' RSS (MiB) | API server / etcd RSS (MiB) |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for m in &self.minutes {
            let rss: Vec<String> = m
                .rss_mib
                .iter()
                .map(|(n, r)| format!("{n} {r:.0}"))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {:.0} / {:.0} |",
                m.slot,
                m.due,
                m.jobs,
                m.missing,
                m.missing_at_end,
                m.duplicates,
                m.stray,
                Spread::show(m.skew),
                m.change.as_deref().unwrap_or(""),
                rss.join(", "),
                m.apiserver_rss_mib,
                m.etcd_rss_mib
            );
        }
        let _ = writeln!(
            out,
            "\n| replica | share | /readyz (s) | start-up: its share written (s) | peak RSS (MiB) | CPU at start-up (s) | CPU over the slots (s) | CPU per hour of slots (s) | scheduled at the end | started / stopped (s from the first slot) |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for r in &self.replicas_figures {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {:.0} / {} |",
                r.cost.name,
                r.share,
                opt(r.ready_s),
                opt(r.startup_s),
                r.cost.peak_rss_mib,
                r.cost.cpu_startup_s,
                r.cost.cpu_slots_s,
                r.cost.cpu_per_hour_s,
                r.shard_cronjobs.map_or("-".into(), |v| format!("{v:.0}")),
                r.started_s,
                opt(r.stopped_s)
            );
        }
        let _ = writeln!(
            out,
            "\n| process | peak RSS (MiB) | RSS at the end (MiB) | CPU creating the CronJobs (s) | CPU over the start-up (s) | CPU over the slots (s) | per hour of slots (s) |\n|---|---|---|---|---|---|---|"
        );
        for c in [&self.apiserver, &self.etcd, &self.tool] {
            let _ = writeln!(
                out,
                "| {} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} |",
                c.name,
                c.peak_rss_mib,
                c.rss_end_mib,
                c.cpu_create_s,
                c.cpu_startup_s,
                c.cpu_slots_s,
                c.cpu_per_hour_s
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_cronjobs_hash_to_minutes_over_the_hour() {
        let mut per_minute = [0usize; 60];
        for i in 0..6000 {
            let name = crate::objects::cronjob_name(i);
            let m = due_minute(NS, &name).expect("minute");
            per_minute[usize::try_from(m).expect("0-59")] += 1;
            // The same minute kronjob computes for the CronJob's next run.
            let schedule = Schedule::parse(SCHEDULE, &format!("{NS}/{name}")).expect("parse");
            let t: Timestamp = "2026-03-01T10:00:30Z".parse().expect("time");
            let next = schedule
                .next_after(t, &jiff::tz::TimeZone::UTC)
                .expect("next");
            assert_eq!(next.to_zoned(jiff::tz::TimeZone::UTC).minute(), m);
        }
        // About 100 a minute; none empty, none crowded.
        assert!(
            per_minute.iter().all(|n| (50..200).contains(n)),
            "{per_minute:?}"
        );
        let args = SpreadArgs {
            spread: true,
            ..SpreadArgs::default()
        };
        let cj = shape(
            &args,
            crate::objects::kronjob_cronjob(NS, "a".into(), kronjob::workload::kinds::job()),
        );
        assert_eq!(cj.spec.schedule.as_deref(), Some(SCHEDULE));
        assert_eq!(cj.spec.successful_jobs_history_limit, Some(1));
        let plain = shape(
            &SpreadArgs::default(),
            crate::objects::kronjob_cronjob(NS, "a".into(), kronjob::workload::kinds::job()),
        );
        assert_eq!(plain.spec.schedule.as_deref(), Some("* * * * *"));
    }

    #[test]
    fn duplicates_are_counted_per_cronjob_and_slot() {
        let slot: Timestamp = "2026-01-01T00:01:00Z".parse().expect("ts");
        let job = |owner: &str, slot: Timestamp| crate::watch::Seen {
            name: String::new(),
            owner: Some(owner.into()),
            scheduled: Some(slot),
            arrived: slot,
        };
        let later = slot.checked_add(SignedDuration::from_hours(1)).expect("ts");
        let mut log = Log::default();
        log.runs = vec![
            job("a", slot),
            job("a", later),
            job("b", slot),
            job("b", slot),
            job("b", slot),
        ];
        assert_eq!(duplicates_overall(&log), 1);
        assert_eq!(per_hour(10.0, 600.0), 60.0);
    }
}
