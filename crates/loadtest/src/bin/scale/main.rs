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
//! With `--fault`, the kronjob phase's second slot meets a fault of the control plane: etcd
//! killed (SIGKILL) 5 s before it and back `--fault-away` (20 s) later, or the API server
//! restarted gracefully or killed just before it; the report says when the API server wrote
//! again, when the slot's Jobs arrived after that, and the memory before and after (run with
//! `--slots 3` at least). `--manager-env` sets kronjob's environment, e.g. a clock 90 s ahead:
//! `--manager-env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
//! --manager-env FAKETIME=+90s`.
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
mod watch;

use std::path::PathBuf;

use clap::Parser;
use kronjob_envtest::{Assets, ControlPlane, Options};

use phase::Which;
use report::Report;

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
}

/// The load average (1, 5 and 15 minutes).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
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
    let bare = floor::measure(&client, "scale-floor-bare", &args, false).await?;
    let watched = floor::measure(&client, "scale-floor-kronjob-jobs", &args, true).await?;
    // Their Jobs carry kronjob's labels: gone before kronjob starts, or its caches would hold
    // them.
    let floors = [
        "scale-floor-bare".to_string(),
        "scale-floor-kronjob-jobs".into(),
    ];
    objects::delete_namespaces(&client, &floors).await?;
    let mut phases =
        vec![phase::run(Which::Kronjob, "scale-kronjob", &args, &assets, &mut plane).await?];
    if args.upstream {
        let took = objects::delete_namespaces(&client, &["scale-kronjob".into()]).await?;
        eprintln!("deleted kronjob's objects in {took:.0} s");
        phases.push(
            phase::run(
                Which::Upstream,
                "scale-upstream",
                &args,
                &assets,
                &mut plane,
            )
            .await?,
        );
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
        floor_watched: watched,
        phases,
    })
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let json = args.json.clone();
    let report = match run(args).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    print!("{}", report.tables());
    if let Some(path) = json {
        let written = serde_json::to_string_pretty(&report)
            .map_err(BoxError::from)
            .and_then(|text| std::fs::write(&path, text).map_err(Into::into));
        if let Err(e) = written {
            eprintln!("writing {}: {e}", path.display());
            return std::process::ExitCode::FAILURE;
        }
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
}
