//! kronjob at scale on a real control plane, against the floor the same API server sets and
//! side by side with upstream's CronJob controller.
//!
//! ```sh
//! export KUBEBUILDER_ASSETS=$PWD/.envtest/1.34
//! cargo build --release --bin kronjob
//! cargo run --release -p kronjob-loadtest --bin scale -- --cronjobs 1000 --upstream --json /tmp/scale.json
//! ```
//!
//! On one etcd + kube-apiserver started from `KUBEBUILDER_ASSETS` (etcd's data on /dev/shm),
//! in order:
//!
//! 1. the floor, before any controller runs: N bare Job creates from one client, `--in-flight`
//!    at a time (total time, creates/s, per-create p50/p99/max); then the N Jobs kronjob makes
//!    for a slot (built by its own code) while a metadata watch on them is open, as the tool
//!    watches a controller's Jobs: the p99 of their arrival is what kronjob's p99 skew, also a
//!    watch arrival, compares with most directly;
//! 2. kronjob: N CronJobs on `* * * * *` whose Jobs never finish (there is no kubelet), run by
//!    `--kronjob PATH` (so two builds can be compared with the same tool) at its defaults
//!    (`--manager-arg` adds flags; `--replicas N` runs N processes with `--sharding`). Per
//!    slot: the Jobs, missing and duplicate ones, the skew from each Job's arrival at the watch
//!    (p50/p99/max), RSS and CPU; the start-up (process start to `/readyz`, and to every
//!    CronJob's first status write) and the peak RSS (VmHWM);
//! 3. with `--upstream`, the same for N batch/v1 CronJobs run by kube-controller-manager's
//!    CronJob controller alone, tuned (50 workers, QPS and burst 1000), once kronjob's objects
//!    are deleted.
//!
//! With `--fault`, each kronjob phase's second slot meets a fault of the control plane: etcd
//! killed (SIGKILL) 5 s before it and back `--fault-away` (20 s) later, or the API server
//! restarted gracefully or killed just before it; the report says when the API server wrote
//! again, when the slot's runs arrived after that, and the memory before and after (run with
//! `--slots 3` at least). `--manager-env` sets kronjob's environment, e.g. a clock 90 s ahead:
//! `--manager-env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
//! --manager-env FAKETIME=+90s`.
//!
//! With `--spread`, instead of the above: N CronJobs on `H * * * *` (about N/60 due each
//! minute), history limits 1/1, on `--replicas` sharded replicas, each minute's CronJobs
//! measured against their own slot, `--add-replica-at`/`--remove-replica-at` moving the
//! buckets before a slot, and the API server's and etcd's memory and CPU beside kronjob's (see
//! `spread.rs`).
//!
//! The start-up scenario: `--existing-jobs 3 --start-before 20` gives each CronJob three
//! running Jobs before kronjob starts (as a replaced manager leaves them) and starts it 20 s
//! before a slot, which is the first measured: start-up and that slot's skew in one run.
//!
//! With `--failover kill|term` (and `--replicas 2` or more), the replicas elect a leader
//! (`--leader-elect`; with `--manager-arg --sharding` they shard instead) and the leader (or
//! replica 0) is SIGKILLed or SIGTERMed `--failover-before` (5 s) before the second slot; the
//! report says when another replica took over, each replica's memory before the stop, and
//! the writes the API server served per slot and CronJob.
//!
//! It prints markdown tables, with the load average at the start and the end (on a shared
//! machine, compare runs made under similar load), and writes them as JSON with `--json FILE`.

mod failover;
mod fault;
mod floor;
mod objects;
mod phase;
mod process;
mod report;
mod spread;
mod startup;
mod watch;

use std::path::PathBuf;

use clap::Parser;
use kronjob::workload::kinds::Row;
use kronjob_envtest::{Assets, ControlPlane, Options};

use phase::Which;
use report::Report;
use serde::Serialize;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Parser, Debug, Clone)]
#[command(name = "scale", about = "kronjob at scale on a real API server")]
struct Args {
    /// CronJobs per controller (and Job creates for the floor).
    #[arg(long, default_value_t = 1000)]
    cronjobs: usize,
    /// Slots to measure, one minute apart.
    #[arg(long, default_value_t = 3)]
    slots: u32,
    /// What kronjob's CronJobs run, a phase each in this order (comma-separated or repeated):
    /// `job` (batch/v1), or a kind of kronjob's table by its kind (`jobset`) or its
    /// `RESOURCE.GROUP` (`jobsets.jobset.x-k8s.io`), served by a CRD the tool installs.
    #[arg(
        long = "workload-kind",
        value_name = "KIND",
        value_delimiter = ',',
        default_value = "job",
        value_parser = objects::parse_kind
    )]
    kinds: Vec<&'static Row>,
    /// The `kronjob` binary to measure (build it with `cargo build --release`).
    #[arg(long, default_value = "target/release/kronjob")]
    kronjob: PathBuf,
    /// Extra flags for `kronjob run` (repeatable; none: the defaults).
    #[arg(long = "manager-arg", allow_hyphen_values = true)]
    manager_args: Vec<String>,
    /// kronjob processes to run; above 1, with `--sharding`, each named by `POD_NAME`
    /// (`kronjob-0`, `kronjob-1`, ..).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    replicas: usize,
    /// Requests in flight for the floor and for creating the CronJobs.
    #[arg(long, default_value_t = 32)]
    in_flight: usize,
    /// Also run upstream's CronJob controller (kube-controller-manager, tuned) on N batch/v1
    /// CronJobs, after kronjob.
    #[arg(long)]
    upstream: bool,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Keep the control plane's folder (logs, etcd) after the run.
    #[arg(long)]
    keep: bool,
    /// A fault of the control plane before kronjob's second slot.
    #[arg(long, value_enum)]
    fault: Option<fault::Fault>,
    /// How long etcd stays away with `--fault etcd-kill`, seconds.
    #[arg(long, default_value_t = 20)]
    fault_away: u64,
    /// Stop a replica before kronjob's second slot: the leader (the replicas run with
    /// `--leader-elect`), or with `--manager-arg --sharding` replica 0; SIGKILL or SIGTERM.
    #[arg(long, value_enum)]
    failover: Option<failover::Stop>,
    /// How long before the slot `--failover` stops it, seconds.
    #[arg(long, default_value_t = 5)]
    failover_before: u64,
    /// Environment of every kronjob process, `KEY=VALUE` (repeatable).
    #[arg(long = "manager-env")]
    manager_env: Vec<String>,
    /// Start-up scenario: running Jobs per CronJob made before kronjob starts (as a previous
    /// manager left them), for the slots before the first measured one.
    #[arg(long, default_value_t = 0)]
    existing_jobs: u32,
    /// Start-up scenario: start kronjob this many seconds before a slot (the first measured),
    /// instead of at once after creating the CronJobs.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=55))]
    start_before: Option<u64>,
    #[command(flatten)]
    spread: spread::SpreadArgs,
}

/// The phases of a run, in order: kronjob on each `--workload-kind`, then upstream's controller
/// (on Jobs) with `--upstream`.
fn phases_of(args: &Args) -> Vec<(Which, &'static Row)> {
    let kronjob = args.kinds.iter().map(|kind| (Which::Kronjob, *kind));
    let upstream = args
        .upstream
        .then_some((Which::Upstream, kronjob::workload::kinds::job()));
    kronjob.chain(upstream).collect()
}

/// The kinds whose runs the floor creates and watches: Jobs, then each other kind measured.
fn floor_kinds(args: &Args) -> Vec<&'static Row> {
    let mut kinds = vec![kronjob::workload::kinds::job()];
    for kind in &args.kinds {
        if !kinds
            .iter()
            .any(|k| (k.group, k.kind) == (kind.group, kind.kind))
        {
            kinds.push(kind);
        }
    }
    kinds
}

/// The namespace of a phase: `scale-kronjob` or `scale-upstream` for Jobs, with the kind's
/// plural after for another kind.
fn namespace(which: Which, kind: &Row) -> String {
    let controller = format!("{which:?}").to_lowercase();
    if objects::is_job(kind) {
        format!("scale-{controller}")
    } else {
        format!("scale-{controller}-{}", kind.plural)
    }
}

/// The load average (1, 5 and 15 minutes).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The spread scenario alone (`--spread`), on its own control plane.
async fn run_spread(args: Args) -> Result<spread::SpreadReport, BoxError> {
    let assets =
        Assets::from_env()?.ok_or("set KUBEBUILDER_ASSETS to the control-plane binaries")?;
    if !args.kronjob.is_file() {
        return Err(format!("{}: no such binary", args.kronjob.display()).into());
    }
    let options = Options {
        controllers: vec!["namespace-controller".into()],
        ..Options::default()
    };
    let mut plane = ControlPlane::start(&assets, options).await?;
    eprintln!("control plane in {}", plane.dir().display());
    objects::install_crd(&plane.client().await?).await?;
    let report = spread::run(&args, &mut plane).await;
    if args.keep {
        eprintln!("keeping {}", plane.dir().display());
        std::mem::forget(plane);
    }
    report
}

/// The report's tables and JSON.
fn output<R: Serialize>(
    report: Result<R, BoxError>,
    tables: fn(&R) -> String,
) -> Result<(String, String), BoxError> {
    let report = report?;
    Ok((tables(&report), serde_json::to_string_pretty(&report)?))
}

async fn run(args: Args) -> Result<Report, BoxError> {
    let assets =
        Assets::from_env()?.ok_or("set KUBEBUILDER_ASSETS to the control-plane binaries")?;
    if !args.kronjob.is_file() {
        return Err(format!(
            "{}: no such binary (cargo build --release)",
            args.kronjob.display()
        )
        .into());
    }
    if args.failover.is_some() && (args.replicas < 2 || args.slots < 2 || args.fault.is_some()) {
        return Err("--failover needs --replicas 2 and --slots 2 at least, and no --fault".into());
    }
    if args.fault.is_some() && args.slots < 3 {
        return Err("--fault needs --slots 3 at least (before, during and after the fault)".into());
    }
    if let Some(bad) = args.manager_env.iter().find(|e| !e.contains('=')) {
        return Err(format!("--manager-env {bad}: not KEY=VALUE").into());
    }
    let load_before = load();
    let options = Options {
        controllers: vec!["namespace-controller".into()],
        apiserver_args: args
            .fault
            .map(fault::Fault::apiserver_args)
            .unwrap_or_default(),
        ..Options::default()
    };
    let mut plane = ControlPlane::start(&assets, options).await?;
    eprintln!("control plane in {}", plane.dir().display());
    let client = plane.client().await?;
    objects::install_crd(&client).await?;
    for kind in args.kinds.iter().filter(|k| !objects::is_job(k)) {
        objects::apply_crd(&client, objects::workload_crd(kind)).await?;
    }
    let bare = floor::measure(&client, &args, None).await?;
    let mut watched = Vec::new();
    for kind in floor_kinds(&args) {
        watched.push(floor::measure(&client, &args, Some(kind)).await?);
    }
    // Their runs carry kronjob's labels: gone before kronjob starts, or its caches would hold
    // them.
    let floors: Vec<String> = std::iter::once(None)
        .chain(floor_kinds(&args).into_iter().map(Some))
        .map(floor::namespace)
        .collect();
    objects::delete_namespaces(&client, &floors).await?;
    let mut phases = Vec::new();
    let mut previous: Option<String> = None;
    for (which, kind) in phases_of(&args) {
        // One phase's objects at a time: the previous phase's are deleted first.
        if let Some(ns) = previous.take() {
            let took = objects::delete_namespaces(&client, std::slice::from_ref(&ns)).await?;
            eprintln!("deleted {ns}'s objects in {took:.0} s");
        }
        let ns = namespace(which, kind);
        phases.push(phase::run(which, kind, &ns, &args, &assets, &mut plane).await?);
        previous = Some(ns);
    }
    if args.keep {
        // Not dropped: its folder stays (its processes end with this one).
        eprintln!("keeping {}", plane.dir().display());
        std::mem::forget(plane);
    }
    Ok(Report {
        cronjobs: args.cronjobs,
        slots: args.slots,
        replicas: args.replicas,
        kronjob: args.kronjob.display().to_string(),
        load_before,
        load_after: load(),
        floor_bare: bare,
        floors_watched: watched,
        phases,
        existing_jobs: args.existing_jobs,
        start_before_s: args.start_before,
    })
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let json = args.json.clone();
    let out = if args.spread.spread {
        output(run_spread(args).await, spread::SpreadReport::tables)
    } else {
        output(run(args).await, Report::tables)
    };
    let (tables, text) = match out {
        Ok(out) => out,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    print!("{tables}");
    if let Some(path) = json
        && let Err(e) = std::fs::write(&path, text)
    {
        eprintln!("writing {}: {e}", path.display());
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_measure_the_release_build_alone() {
        let args = Args::try_parse_from(["scale"]).expect("defaults");
        assert_eq!((args.cronjobs, args.slots, args.replicas), (1000, 3, 1));
        assert_eq!(args.kronjob, PathBuf::from("target/release/kronjob"));
        assert!(!args.upstream);
        let args = Args::try_parse_from([
            "scale",
            "--kronjob",
            "/tmp/other/kronjob",
            "--replicas",
            "3",
            "--manager-arg",
            "--worker-threads=2",
        ])
        .expect("flags");
        assert_eq!(args.kronjob, PathBuf::from("/tmp/other/kronjob"));
        assert_eq!(args.replicas, 3);
        assert_eq!(args.manager_args, ["--worker-threads=2"]);
        assert!(Args::try_parse_from(["scale", "--replicas", "0"]).is_err());
        let args = Args::try_parse_from([
            "scale",
            "--fault",
            "etcd-kill",
            "--fault-away",
            "30",
            "--manager-env",
            "FAKETIME=+90s",
        ])
        .expect("fault flags");
        assert_eq!(args.fault, Some(fault::Fault::EtcdKill));
        assert_eq!(args.fault_away, 30);
        assert_eq!(args.manager_env, ["FAKETIME=+90s"]);
        assert!(Args::try_parse_from(["scale", "--fault", "reboot"]).is_err());
        let args = Args::try_parse_from(["scale", "--replicas", "2", "--failover", "term"])
            .expect("failover flags");
        assert_eq!(args.failover, Some(failover::Stop::Term));
        assert_eq!(args.failover_before, 5);
        assert!(Args::try_parse_from(["scale", "--failover", "crash"]).is_err());
    }

    #[test]
    fn each_workload_kind_is_a_phase_of_its_own_before_upstream() {
        let kinds = |args: &Args| -> Vec<(Which, &str)> {
            phases_of(args)
                .into_iter()
                .map(|(which, kind)| (which, kind.kind))
                .collect()
        };
        let args = Args::try_parse_from(["scale"]).expect("defaults");
        assert_eq!(kinds(&args), [(Which::Kronjob, "Job")]);
        assert_eq!(namespace(Which::Kronjob, args.kinds[0]), "scale-kronjob");
        let args = Args::try_parse_from(["scale", "--workload-kind", "job,jobset", "--upstream"])
            .expect("flags");
        assert_eq!(
            kinds(&args),
            [
                (Which::Kronjob, "Job"),
                (Which::Kronjob, "JobSet"),
                (Which::Upstream, "Job")
            ]
        );
        assert_eq!(
            namespace(Which::Kronjob, args.kinds[1]),
            "scale-kronjob-jobsets"
        );
        let args = Args::try_parse_from([
            "scale",
            "--workload-kind",
            "jobsets.jobset.x-k8s.io",
            "--workload-kind",
            "job",
        ])
        .expect("repeated");
        assert_eq!(
            kinds(&args),
            [(Which::Kronjob, "JobSet"), (Which::Kronjob, "Job")]
        );
        let floors: Vec<String> = std::iter::once(None)
            .chain(floor_kinds(&args).into_iter().map(Some))
            .map(floor::namespace)
            .collect();
        assert_eq!(
            floors,
            [
                "scale-floor-bare",
                "scale-floor-kronjob-jobs",
                "scale-floor-kronjob-jobsets"
            ]
        );
        assert!(Args::try_parse_from(["scale", "--workload-kind", "widget"]).is_err());
    }

    #[test]
    fn the_spread_scenario_has_flags_of_its_own() {
        let args = Args::try_parse_from([
            "scale",
            "--spread",
            "--add-replica-at",
            "4",
            "--remove-replica-at",
            "7",
        ])
        .expect("spread flags");
        assert!(args.spread.spread);
        assert_eq!(args.spread.add_replica_at, Some(4));
        assert_eq!(args.spread.remove_replica_at, Some(7));
        assert!(
            !Args::try_parse_from(["scale"])
                .expect("defaults")
                .spread
                .spread
        );
        // Moving replicas is part of the spread scenario only.
        assert!(Args::try_parse_from(["scale", "--add-replica-at", "4"]).is_err());
        // The first measured slot has no minute before it to move the buckets in.
        assert!(Args::try_parse_from(["scale", "--spread", "--add-replica-at", "0"]).is_err());
    }
}
