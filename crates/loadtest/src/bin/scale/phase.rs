//! A controller's phase: N CronJobs running one kind, the controller started, its slots watched
//! and measured, the controller stopped (its objects are kept).

use std::collections::HashSet;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::CronJob as BatchCronJob;
use k8s_openapi::api::events::v1::Event;
use kronjob_envtest::{Assets, ControlPlane, Proc, free_port};
use kube::api::Api;
use serde::Serialize;

use kronjob::api::CronJob;
use kronjob::workload::kinds::Row;

use crate::failover::{self, Failover};
use crate::fault::{self, Fault, Recovery};
use crate::process::{self, ProcSample, Sampler};
use crate::report::Spread;
use crate::watch::{
    Record, SharedLog, all_written, lock, meta_api, meta_api_of, summarise_slot, watch_into,
};
use crate::{Args, BoxError, objects, startup};

/// Which controller a phase runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Kronjob,
    Upstream,
}

/// When after its slot a slot is summarised: its writes are those up to then.
pub const SUMMARISED_AFTER: SignedDuration = SignedDuration::from_secs(55);

/// One measured slot.
#[derive(Debug, Clone, Serialize)]
pub struct Slot {
    pub slot: Timestamp,
    /// The runs (Jobs, or objects of the phase's kind) created for the slot.
    pub runs: usize,
    pub missing: usize,
    pub duplicates: usize,
    /// Arrival of the run's first watch event minus the slot, seconds.
    pub skew: Option<Spread>,
    /// From the run's arrival to its CronJob's next write (the status that records the slot),
    /// seconds: how long the run alone said that its slot ran.
    pub recorded: Option<Spread>,
    /// CronJob writes (status) from the slot to [`SUMMARISED_AFTER`] it.
    pub status_writes: usize,
    /// Event writes (new Events and repeats counted on one) in the same time.
    pub events: usize,
    /// The controller [`SUMMARISED_AFTER`] the slot (with replicas, their sum).
    pub process: ProcSample,
}

#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub controller: String,
    /// The kind the CronJobs run.
    pub kind: String,
    pub cronjobs: usize,
    pub create_cronjobs_s: f64,
    /// Process start to /readyz answering 200, seconds (kronjob; the last replica).
    pub ready_s: Option<f64>,
    /// Process start to every CronJob's first status write, seconds (kronjob).
    pub startup_s: Option<f64>,
    /// When every CronJob had been reconciled (with replicas, their sum).
    pub at_startup: ProcSample,
    pub slots: Vec<Slot>,
    /// The peak RSS (with replicas, the sum of their peaks).
    pub peak_rss_mib: f64,
    /// CPU seconds from process start to the end of the last slot (with replicas, their sum).
    pub cpu_s: f64,
    /// Each process of the phase.
    pub replicas: Vec<Replica>,
    pub runs_at_end: usize,
    /// With `--fault`: how kronjob recovered.
    pub fault: Option<Recovery>,
    /// With `--failover`: the stop and the takeover.
    pub failover: Option<Failover>,
    /// With `--failover`: the writes the API server served per CronJob in each slot's minute.
    pub writes: Vec<failover::Counts>,
}

/// One controller process of a phase (a kronjob replica).
#[derive(Debug, Clone, Serialize)]
pub struct Replica {
    pub name: String,
    /// 55 s after each slot.
    pub slots: Vec<ProcSample>,
    /// The largest RSS: VmHWM (or a larger sample).
    pub peak_rss_mib: f64,
    /// CPU seconds from process start to the end of the last slot.
    pub cpu_s: f64,
    /// `kronjob_shard_cronjobs` at the end: the CronJobs it schedules.
    pub shard_cronjobs: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// The controllers
// ---------------------------------------------------------------------------------------------

/// A started controller process and what it answers on.
#[derive(Debug)]
pub(crate) struct Controller {
    /// Its name in messages and reports (and, for a kronjob replica, its identity).
    pub(crate) name: String,
    pub(crate) proc: Proc,
    health: Option<u16>,
    pub(crate) metrics: Option<u16>,
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
/// name as `POD_NAME`; each on its own ports and log. Its metrics are served over plain HTTP
/// (unless a `--manager-arg` says otherwise) so that the tool can read them. When the run
/// measures a kind other than Job, every phase's kronjob may create each kind of the run
/// (`--workload-kinds`, unless a `--manager-arg` sets it): the phases differ in their CronJobs
/// alone.
pub(crate) fn start_kronjob(
    args: &Args,
    plane: &ControlPlane,
    replica: usize,
) -> Result<Controller, BoxError> {
    let name = replica_name(replica, args.replicas);
    let (health, metrics) = (free_port()?, free_port()?);
    let mut argv: Vec<String> = [
        "run",
        "--metrics-addr",
        &format!("127.0.0.1:{metrics}"),
        "--health-addr",
        &format!("127.0.0.1:{health}"),
        "--log-format",
        "json",
    ]
    .map(String::from)
    .into();
    if !has_flag(&args.manager_args, "--metrics-secure") {
        argv.push("--metrics-secure=false".into());
    }
    let sharded = has_flag(&args.manager_args, "--sharding");
    if args.failover.is_some() && !sharded {
        argv.extend(failover::leader_election_flags());
    } else if args.replicas > 1 && !sharded {
        argv.push("--sharding".into());
    }
    if !has_flag(&args.manager_args, "--workload-kinds") {
        argv.extend(objects::workload_kinds_flag(&args.kinds));
    }
    argv.extend(args.manager_args.iter().cloned());
    let mut command = Command::new(&args.kronjob);
    command
        .args(&argv)
        .env("KUBECONFIG", plane.kubeconfig())
        .env("NO_COLOR", "1");
    if args.replicas > 1 {
        command.env("POD_NAME", &name);
    }
    for pair in &args.manager_env {
        if let Some((key, value)) = pair.split_once('=') {
            command.env(key, value);
        }
    }
    let log = plane.dir().join(format!("{name}.log"));
    let proc = Proc::spawn(&name, command, &log)?;
    Ok(Controller {
        name,
        proc,
        health: Some(health),
        metrics: Some(metrics),
    })
}

/// Start kube-controller-manager with its CronJob controller alone, tuned.
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
    Ok(Controller {
        name: "kube-controller-manager".into(),
        proc,
        health: None,
        metrics: None,
    })
}

/// Wait for /readyz (every kronjob replica: the last of them is the phase's) and for every
/// CronJob's first status write after `start`: seconds after `start` for each.
pub(crate) async fn startup(
    log: &SharedLog,
    names: &HashSet<String>,
    controllers: &mut [Controller],
    start: Timestamp,
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
                && process::http_get(port, "/readyz")
                    .await
                    .is_some_and(|(code, _)| code == 200)
            {
                *at = Some(secs(Timestamp::now().duration_since(start)));
            }
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

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

/// Unless within 2 s after a minute boundary, wait for 1 s after the next one.
pub(crate) async fn after_minute_boundary() -> Result<(), BoxError> {
    let now = Timestamp::now();
    if now.as_second().rem_euclid(60) > 2 {
        sleep_until(next_minute(now).checked_add(SignedDuration::from_secs(1))?).await;
    }
    Ok(())
}

/// Sleep until `at` (wall clock).
pub(crate) async fn sleep_until(at: Timestamp) {
    let wait = at.duration_since(Timestamp::now());
    if let Ok(d) = Duration::try_from(wait) {
        tokio::time::sleep(d).await;
    }
}

/// The first minute boundary after `after`.
pub fn next_minute(after: Timestamp) -> Timestamp {
    let s = after.as_second();
    Timestamp::from_second((s / 60 + 1) * 60).unwrap_or(after)
}

pub fn secs(d: SignedDuration) -> f64 {
    d.as_secs_f64()
}

// ---------------------------------------------------------------------------------------------
// The phase
// ---------------------------------------------------------------------------------------------

/// Create the CronJobs of `which` running `kind` in `ns`; their names and how long creating
/// them took.
pub(crate) async fn create_cronjobs(
    client: &kube::Client,
    ns: &str,
    (which, kind): (Which, &Row),
    args: &Args,
) -> Result<(HashSet<String>, f64), BoxError> {
    let names: Vec<String> = (0..args.cronjobs).map(objects::cronjob_name).collect();
    let started = Instant::now();
    eprintln!(
        "{which:?}: creating {} CronJobs of {} in {ns}",
        args.cronjobs, kind.kind
    );
    let name = |i: usize| names[i].clone();
    match which {
        Which::Kronjob => {
            let api: Api<CronJob> = Api::namespaced(client.clone(), ns);
            objects::create_all(&api, names.len(), args.in_flight, |i| {
                crate::spread::shape(&args.spread, objects::kronjob_cronjob(ns, name(i), kind))
            })
            .await?;
        }
        Which::Upstream => {
            let api: Api<BatchCronJob> = Api::namespaced(client.clone(), ns);
            objects::create_all(&api, names.len(), args.in_flight, |i| {
                objects::upstream_cronjob(name(i))
            })
            .await?;
        }
    }
    Ok((names.into_iter().collect(), started.elapsed().as_secs_f64()))
}

/// The watches of a phase: its runs (of `kind`), its CronJobs' writes, and the Events.
pub(crate) async fn watch(
    client: &kube::Client,
    ns: &str,
    (which, kind): (Which, &Row),
    log: &SharedLog,
) -> Vec<tokio::task::JoinHandle<()>> {
    let runs = watch_into(meta_api_of(client, ns, kind), log.clone(), Record::Runs).await;
    let cronjobs = match which {
        Which::Kronjob => {
            watch_into(meta_api::<CronJob>(client, ns), log.clone(), Record::Writes).await
        }
        Which::Upstream => {
            watch_into(
                meta_api::<BatchCronJob>(client, ns),
                log.clone(),
                Record::Writes,
            )
            .await
        }
    };
    let events = watch_into(meta_api::<Event>(client, ns), log.clone(), Record::Events).await;
    vec![runs, cronjobs, events]
}

/// What a phase's slots need: the control plane (to strike a fault at), the phase's
/// namespace (for the fault's write probe), its watches' log and its CronJobs.
struct Slots<'a> {
    plane: &'a mut ControlPlane,
    ns: &'a str,
    log: &'a SharedLog,
    names: &'a HashSet<String>,
    controllers: &'a mut [Controller],
}

/// What the slots measured beyond each slot's Jobs.
struct Measured {
    slots: Vec<Slot>,
    per_replica: Vec<Vec<ProcSample>>,
    recovery: Option<Recovery>,
    failover: Option<Failover>,
    writes: Vec<failover::Counts>,
}

/// Stop a replica before `slot` (`--failover`).
async fn fail_over(
    args: &Args,
    slot: Timestamp,
    at: &mut Slots<'_>,
    samplers: &[Sampler],
) -> Result<Option<Failover>, BoxError> {
    let Some(stop) = args.failover else {
        return Ok(None);
    };
    let before = Duration::from_secs(args.failover_before);
    let sharded = has_flag(&args.manager_args, "--sharding");
    let targets: Vec<failover::Target<'_>> = at
        .controllers
        .iter()
        .zip(samplers)
        .map(|(c, s)| failover::Target {
            name: &c.name,
            pid: c.proc.pid(),
            metrics: c.metrics,
            rss_mib: s.now().rss_mib,
        })
        .collect();
    let pids: Vec<u32> = targets.iter().map(|t| t.pid).collect();
    // Gone, or a zombie (this tool reaps it only when the phase ends).
    let exited = |i: usize| {
        std::fs::read_to_string(format!("/proc/{}/stat", pids[i]))
            .ok()
            .and_then(|stat| Some(stat[stat.rfind(')')? + 2..].starts_with('Z')))
            .unwrap_or(true)
    };
    let done = failover::strike(stop, before, slot, sharded, &targets, exited).await?;
    eprintln!("{}", done.show());
    Ok(Some(done))
}

/// Strike `fault` before `slot`: the recovery, but for the slot's runs and the memory after.
async fn strike(
    fault: Fault,
    away: Duration,
    slot: Timestamp,
    at: &mut Slots<'_>,
    samplers: &[Sampler],
) -> Result<Recovery, BoxError> {
    let lead = SignedDuration::try_from(fault.lead())?;
    sleep_until(slot.checked_sub(lead)?).await;
    let rss_before_mib =
        process::total(&samplers.iter().map(Sampler::now).collect::<Vec<_>>()).rss_mib;
    eprintln!("{fault:?} before {slot}");
    fault.strike(at.plane, away).await?;
    let back = Timestamp::now();
    let client = at.plane.client().await?;
    let writes = fault::writable(&client, at.ns).await;
    eprintln!(
        "{fault:?}: back {:.1} s after the slot, writing {:.1} s after it",
        fault::after(slot, back),
        fault::after(slot, writes)
    );
    Ok(Recovery {
        fault,
        slot,
        back_s: fault::after(slot, back),
        writes_s: fault::after(slot, writes),
        jobs: None,
        rss_before_mib,
        rss_after_mib: 0.0,
    })
}

/// Each slot from `first` (else the next one at least 5 s away), summarised 55 s after it,
/// with each controller's sample then; with `--fault`,
/// struck before the second slot (kronjob only), and how it recovered.
async fn measure_slots(
    args: &Args,
    which: Which,
    mut at: Slots<'_>,
    samplers: &[Sampler],
    first: Option<Timestamp>,
) -> Result<Measured, BoxError> {
    let first = match first {
        Some(slot) => slot,
        None => next_minute(Timestamp::now().checked_add(SignedDuration::from_secs(5))?),
    };
    let mut slots = Vec::new();
    let mut per_replica: Vec<Vec<ProcSample>> = vec![Vec::new(); samplers.len()];
    let fault = args.fault.filter(|_| which == Which::Kronjob);
    let mut recovery = None;
    let mut failed_over = None;
    let counting = args.failover.is_some() && which == Which::Kronjob;
    let api = at.plane.client().await?;
    let mut counted = if counting {
        Some(failover::writes(&api).await?)
    } else {
        None
    };
    let mut writes = Vec::new();
    for i in 0..args.slots {
        let slot = first.checked_add(SignedDuration::from_mins(i64::from(i)))?;
        if let Some(fault) = fault.filter(|_| i == 1) {
            let away = Duration::from_secs(args.fault_away);
            recovery = Some(strike(fault, away, slot, &mut at, samplers).await?);
        }
        if i == 1 && which == Which::Kronjob {
            failed_over = fail_over(args, slot, &mut at, samplers).await?;
        }
        sleep_until(slot.checked_add(SUMMARISED_AFTER)?).await;
        if let Some(before) = counted.as_mut() {
            let now = failover::writes(&api).await?;
            let per = failover::per_cronjob(before, &now, at.names.len());
            eprintln!(
                "slot {slot}: writes per CronJob {}",
                failover::show_writes(&per)
            );
            writes.push(per);
            *before = now;
        }
        let mut s = summarise_slot(&lock(at.log), slot, at.names);
        let now: Vec<ProcSample> = samplers.iter().map(Sampler::now).collect();
        s.process = process::total(&now);
        if let Some(r) = recovery.as_mut() {
            if r.slot == slot {
                let writes = slot.checked_add(SignedDuration::try_from_secs_f64(r.writes_s)?)?;
                r.jobs = jobs_after(&lock(at.log), slot, writes);
            } else if r.rss_after_mib == 0.0 {
                r.rss_after_mib = s.process.rss_mib;
            }
        }
        for (replica, sample) in per_replica.iter_mut().zip(now) {
            replica.push(sample);
        }
        eprintln!(
            "slot {slot}: {} runs, {} missing, {} duplicate, skew p50/p99/max {} s, {} status writes, {} Events, RSS {:.1} MiB",
            s.runs,
            s.missing,
            s.duplicates,
            Spread::show(s.skew),
            s.status_writes,
            s.events,
            s.process.rss_mib
        );
        slots.push(s);
    }
    Ok(Measured {
        slots,
        per_replica,
        recovery,
        failover: failed_over,
        writes,
    })
}

/// The arrival of `slot`'s Jobs at the watch, seconds after `after`.
fn jobs_after(log: &crate::watch::Log, slot: Timestamp, after: Timestamp) -> Option<Spread> {
    Spread::of(
        crate::watch::arrivals(log, slot)
            .map(|arrived| secs(arrived.duration_since(after)))
            .collect(),
    )
}

/// Each controller's figures at the end of a phase (before it is stopped): its samples after
/// each slot (`per_slot`), peak RSS, CPU time and the CronJobs it schedules.
async fn replicas_at_end(
    controllers: &[Controller],
    samplers: &[Sampler],
    per_slot: Vec<Vec<ProcSample>>,
) -> Vec<Replica> {
    let mut out = Vec::with_capacity(controllers.len());
    for ((c, sampler), slots) in controllers.iter().zip(samplers).zip(per_slot) {
        let end = sampler.now();
        let text = match c.metrics {
            Some(port) => process::http_get(port, "/metrics").await,
            None => None,
        };
        out.push(Replica {
            name: c.name.clone(),
            slots,
            peak_rss_mib: sampler.peak_mib(&end),
            cpu_s: end.cpu_s,
            shard_cronjobs: text
                .filter(|(code, _)| *code == 200)
                .and_then(|(_, text)| process::metric_value(&text, "kronjob_shard_cronjobs")),
        });
    }
    out
}

/// Run one controller on N CronJobs of `kind` for the slots; the controller is stopped at the
/// end, the objects are kept.
pub async fn run(
    which: Which,
    kind: &Row,
    ns: &str,
    args: &Args,
    assets: &Assets,
    plane: &mut ControlPlane,
) -> Result<Phase, BoxError> {
    let client = plane.client().await?;
    objects::create_namespace(&client, ns).await?;
    // Create right after a minute boundary and start the controller at once: no slot falls
    // due before it starts, and its start-up has the rest of the minute.
    after_minute_boundary().await?;
    let created = Timestamp::now();
    let (names, create_cronjobs_s) = create_cronjobs(&client, ns, (which, kind), args).await?;
    let first_slot = match which {
        Which::Kronjob => startup::first_slot(args)?,
        Which::Upstream => None,
    };
    if which == Which::Kronjob && objects::is_job(kind) && args.existing_jobs > 0 {
        let took = startup::existing_jobs(&client, ns, args, (first_slot, created)).await?;
        eprintln!("existing Jobs created in {took:.1} s");
    }
    let log: SharedLog = Arc::default();
    let watches = watch(&client, ns, (which, kind), &log).await;
    startup::wait_to_start(args, first_slot).await?;
    let start = Timestamp::now();
    let mut controllers = match which {
        Which::Kronjob => (0..args.replicas)
            .map(|i| start_kronjob(args, plane, i))
            .collect::<Result<Vec<_>, _>>()?,
        Which::Upstream => vec![start_upstream(assets, plane)?],
    };
    let samplers: Vec<Sampler> = controllers
        .iter()
        .map(|c| Sampler::start(c.proc.pid()))
        .collect();
    for c in &controllers {
        eprintln!(
            "{which:?}: {} started (pid {}) at {start}",
            c.name,
            c.proc.pid()
        );
    }
    let (ready_s, startup_s) = match which {
        Which::Kronjob => startup(&log, &names, &mut controllers, start).await,
        Which::Upstream => (None, None),
    };
    let at_startup = process::total(&samplers.iter().map(Sampler::now).collect::<Vec<_>>());
    eprintln!("{which:?}: ready {ready_s:?} s, every CronJob reconciled {startup_s:?} s");
    let at = Slots {
        plane,
        ns,
        log: &log,
        names: &names,
        controllers: &mut controllers,
    };
    let measured = measure_slots(args, which, at, &samplers, first_slot).await?;
    let replicas = replicas_at_end(&controllers, &samplers, measured.per_replica).await;
    for c in &mut controllers {
        c.proc.stop(Duration::from_secs(30));
    }
    for w in watches {
        w.abort();
    }
    let runs_at_end = lock(&log).runs.len();
    Ok(Phase {
        controller: format!("{which:?}").to_lowercase(),
        kind: kind.kind.into(),
        cronjobs: args.cronjobs,
        create_cronjobs_s,
        ready_s,
        startup_s,
        at_startup,
        slots: measured.slots,
        peak_rss_mib: replicas.iter().map(|r| r.peak_rss_mib).sum(),
        cpu_s: replicas.iter().map(|r| r.cpu_s).sum(),
        replicas,
        runs_at_end,
        fault: measured.recovery,
        failover: measured.failover,
        writes: measured.writes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_named_and_flags_found() {
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
        assert_eq!(all_ready(&[Some(1.5), Some(2.5)]), Some(2.5));
        assert_eq!(all_ready(&[Some(1.5), None]), None);
    }
}
