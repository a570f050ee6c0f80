//! Active-active replicas (`--sharding`) on the simulated API server, under paused time: each
//! replica holds its shard Lease and runs the CronJob controller for its share.
//!
//! - together they schedule every CronJob once per slot, each replica about a third;
//! - a replica that dies loses its share once its Lease expires: the slot that fell due in
//!   between runs late (within the lease duration), once, and no other slot is touched;
//! - a replica that stops releases its Lease and its share runs on time; a replica that joins
//!   takes about a quarter, and every slot still runs once;
//! - a replica that cannot renew its Lease drops itself, and rejoins when it can;
//! - each replica caches only its share (its watches select its shard buckets), and a CronJob
//!   or Job without a bucket label is labelled once, by the replica that owns it.
//!
//! `measure_3000_cronjobs` (ignored; `--ignored --nocapture`) prints the figures at 3,000.

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kronjob::api::shard::{LABEL_SHARD, bucket};
use kronjob::clock::Clock;
use kronjob::controller::cronjob::{self, ReconcilerArgs, ReconcilerMetrics};
use kronjob::controller::shard::{self as assignment, Assignment, ShardMetrics, ShardView};
use kronjob::controller::{Scope, Shared};
use kronjob::manager::shard::{ShardConfig, membership};
use kronjob::task::TaskError;
use kronjob_apisim::{ApiSim, CostModel, Resource};
use kube::Api;
use serde_json::json;
use support::fixtures::t;
use support::sim::{TokioClock, cronjob_json, record_calls, sim_clock};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "kronjob-system";
/// Half a minute before the 10:01 slot; every CronJob last ran at 10:00.
const START: &str = "2024-01-01T10:00:30Z";

/// One replica: its membership and its CronJob controller.
struct Replica {
    name: String,
    stop: CancellationToken,
    released: CancellationToken,
    controller: JoinHandle<Result<(), TaskError>>,
    membership: JoinHandle<()>,
    metrics: ShardMetrics,
    /// The controller's metrics (`managed_cronjobs`: the CronJobs in its cache).
    reconciler: ReconcilerMetrics,
}

fn replica(sim: &ApiSim, clock: Arc<TokioClock>, name: &str) -> Replica {
    let metrics = ShardMetrics::default();
    let (publish, assignment) = watch::channel(Arc::new(Assignment::default()));
    let released = CancellationToken::new();
    let config = ShardConfig {
        group: "kronjob".into(),
        namespace: NAMESPACE.into(),
        identity: name.into(),
        duration: Duration::from_secs(15),
    };
    let membership = tokio::spawn(membership(
        Api::<Lease>::namespaced(sim.client(), NAMESPACE),
        config,
        clock.clone(),
        publish,
        metrics.clone(),
        released.clone(),
    ));
    let shared = Shared {
        client: sim.client(),
        clock,
        scope: Scope::default(),
        instance: Some(name.into()),
        gate: Default::default(),
        shard: ShardView::sharded(assignment, metrics.clone()),
        tasks: Default::default(),
        records: Default::default(),
    };
    let args = ReconcilerArgs {
        concurrency: 16,
        default_job_ttl: None,
        cronjob_metrics_limit: cronjob::series::DEFAULT_LIMIT,
        workload_kinds: Default::default(),
    };
    let stop = CancellationToken::new();
    let reconciler = ReconcilerMetrics::new(&mut Default::default());
    let controller = tokio::spawn(cronjob::run(
        shared,
        args,
        reconciler.clone(),
        (None, None),
        || {},
        stop.clone(),
    ));
    Replica {
        name: name.into(),
        stop,
        released,
        controller,
        membership,
        metrics,
        reconciler,
    }
}

impl Replica {
    /// SIGTERM: the controller drains, then the Lease is released.
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.controller.await;
        self.released.cancel();
        let _ = self.membership.await;
    }

    /// Killed: no word to anyone.
    async fn crash(self) {
        self.controller.abort();
        self.membership.abort();
        let _ = self.controller.await;
        let _ = self.membership.await;
    }
}

/// `n` CronJobs due every minute, labelled with their shard bucket as the webhook labels them.
fn seed(sim: &ApiSim, n: usize) -> Vec<String> {
    seed_from(sim, 0, n, true)
}

/// CronJobs `cj-<first>`.. (`n` of them), labelled with their bucket or not.
fn seed_from(sim: &ApiSim, first: usize, n: usize, labelled: bool) -> Vec<String> {
    (first..first + n)
        .map(|i| {
            let name = format!("cj-{i:04}");
            let mut cj = cronjob_json(
                "load",
                &name,
                "* * * * *",
                "2024-01-01T09:00:00Z",
                Some("2024-01-01T10:00:00Z"),
            );
            if labelled {
                cj["metadata"]["labels"] = json!({LABEL_SHARD: bucket("load", &name).to_string()});
            }
            sim.insert(cj);
            name
        })
        .collect()
}

fn owners(members: &[&str], cronjobs: &[String]) -> Vec<String> {
    let a = Assignment::new("", members.iter().map(|m| m.to_string()));
    cronjobs
        .iter()
        .map(|cj| {
            a.owner(&assignment::key("load", cj))
                .expect("owner")
                .to_string()
        })
        .collect()
}

fn minute(at: &str) -> i64 {
    t(at).as_second() / 60
}

/// When the Job of `cj` for `slot` was created (successful creates, not dry runs), by CronJob.
fn created(sim: &ApiSim, slot: &str) -> BTreeMap<String, Vec<Timestamp>> {
    let suffix = format!("-{}", minute(slot));
    let mut by_cj: BTreeMap<String, Vec<Timestamp>> = BTreeMap::new();
    for r in sim.requests() {
        if r.verb == "create"
            && r.resource == "jobs"
            && r.status == 201
            && !r.dry_run
            && let Some(cj) = r.name.as_deref().and_then(|n| n.strip_suffix(&suffix))
        {
            by_cj.entry(cj.to_string()).or_default().push(r.at);
        }
    }
    by_cj
}

/// Every CronJob ran `slot` exactly once; the latest creation, seconds after the slot, of
/// `late` CronJobs and of the others.
fn once_each(sim: &ApiSim, cronjobs: &[String], slot: &str, late: &[bool]) -> (f64, f64) {
    let runs = created(sim, slot);
    let (mut worst_late, mut worst_other) = (0.0f64, 0.0f64);
    for (cj, late) in cronjobs.iter().zip(late) {
        let at = runs.get(cj).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(at.len(), 1, "{cj}: slot {slot} ran {} times", at.len());
        let after = at[0].duration_since(t(slot)).as_secs_f64();
        if *late {
            worst_late = worst_late.max(after);
        } else {
            worst_other = worst_other.max(after);
        }
    }
    (worst_late, worst_other)
}

fn shard_gauges(replicas: &[&Replica]) -> Vec<(String, i64, i64)> {
    replicas
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                r.metrics.cronjobs.get(),
                r.metrics.members.get(),
            )
        })
        .collect()
}

fn now(clock: &TokioClock) -> Timestamp {
    clock.now()
}

/// Three replicas, settled; returns the simulator, the clock, the CronJobs and the replicas.
async fn three(n: usize) -> (ApiSim, Arc<TokioClock>, Vec<String>, [Replica; 3]) {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    let cronjobs = seed(&sim, n);
    let replicas = ["kronjob-a", "kronjob-b", "kronjob-c"].map(|r| replica(&sim, clock.clone(), r));
    // 10:00:40: the group formed, the caches synced and the gauges counted.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let gauges = shard_gauges(&replicas.iter().collect::<Vec<_>>());
    let total: i64 = gauges.iter().map(|g| g.1).sum();
    assert_eq!(total, n as i64, "every CronJob has one replica: {gauges:?}");
    // Each caches only what it schedules.
    for r in &replicas {
        assert_eq!(
            r.reconciler.managed_cronjobs.get(),
            r.metrics.cronjobs.get(),
            "{}: cached CronJobs are its share",
            r.name
        );
    }
    for (name, owned, members) in &gauges {
        assert_eq!(*members, 3, "{name}");
        let fair = n as f64 / 3.0;
        assert!(
            (*owned as f64 - fair).abs() <= 0.15 * fair,
            "{name} schedules {owned} of {n}"
        );
    }
    (sim, clock, cronjobs, replicas)
}

/// A replica dies at 10:00:52 and one joins at 10:01:30: report and check. `skew` bounds how
/// late (seconds) the slots of CronJobs that did not move run: at 3,000 the simulated API's
/// write throughput, shared by the replicas, spreads a slot's creates over about a second.
async fn die_and_join(n: usize, skew: f64) {
    let (sim, clock, cronjobs, [a, b, c]) = three(n).await;
    let before = owners(&["kronjob-a", "kronjob-b", "kronjob-c"], &cronjobs);
    // 10:00:52, two seconds after its last renewal: its Lease expires at 10:01:05.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let died = now(&clock);
    b.crash().await;
    // Through the 10:01 slot, past the dead replica's lease.
    tokio::time::sleep(Duration::from_secs(40)).await;
    let orphaned: Vec<bool> = before.iter().map(|o| o == "kronjob-b").collect();
    let moved_on_death = orphaned.iter().filter(|o| **o).count();
    let (late, on_time) = once_each(&sim, &cronjobs, "2024-01-01T10:01:00Z", &orphaned);
    let gauges = shard_gauges(&[&a, &c]);
    assert_eq!(
        gauges.iter().map(|g| g.1).sum::<i64>(),
        n as i64,
        "{gauges:?}"
    );
    let counts_death = sim.counts();
    record_calls(&sim);
    sim.clear_requests();

    // 10:01:30: a new replica joins.
    let d = replica(&sim, clock.clone(), "kronjob-d");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let after = owners(&["kronjob-a", "kronjob-c", "kronjob-d"], &cronjobs);
    let survivors = owners(&["kronjob-a", "kronjob-c"], &cronjobs);
    let moved: Vec<bool> = survivors.iter().zip(&after).map(|(s, a)| s != a).collect();
    let moved_on_join = moved.iter().filter(|m| **m).count();
    // Bounded loads move a few between the others too: at most 8% of all.
    let between = after
        .iter()
        .zip(&survivors)
        .filter(|(a, s)| a != s && *a != "kronjob-d")
        .count();
    assert!(between * 100 <= n * 8, "{between} moved between survivors");
    let (joined_skew, others_skew) = once_each(&sim, &cronjobs, "2024-01-01T10:02:00Z", &moved);
    let gauges_join = shard_gauges(&[&a, &c, &d]);
    assert_eq!(
        gauges_join.iter().map(|g| g.1).sum::<i64>(),
        n as i64,
        "{gauges_join:?}"
    );
    let counts_join = sim.counts();
    record_calls(&sim);

    println!(
        "{n} CronJobs, 3 replicas; kronjob-b killed at {died}:\n  \
         moved: {moved_on_death} (only kronjob-b's); its 10:01 slot ran at most {late:.1} s late, \
         the others' at most {on_time:.2} s\n  gauges after: {gauges:?}\n  requests by verb \
         (10:00:30-10:01:30, incl. start): {counts_death:?}"
    );
    println!(
        "  kronjob-d joined at 10:01:30: moved {moved_on_join} (all to kronjob-d, fair {}); \
         10:02 slot: moved ones at most {joined_skew:.2} s late, others {others_skew:.2} s\n  \
         gauges after: {gauges_join:?}\n  requests by verb (10:01:30-10:02:30): {counts_join:?}",
        n / 3
    );
    // The dead replica's lease: 15 s from its last renewal (at most 5 s before the crash).
    assert!(late <= 16.0, "orphaned slot ran {late} s late");
    assert!(
        late >= 1.0,
        "orphaned CronJobs ran before the lease expired"
    );
    assert!(on_time <= skew, "other CronJobs {on_time} s late");
    let fair = n as f64 / 3.0;
    assert!(
        (moved_on_join as f64 - fair).abs() <= 0.2 * fair,
        "{moved_on_join}"
    );
    assert!(
        joined_skew <= skew && others_skew <= skew,
        "{joined_skew} {others_skew}"
    );
    for r in [a, c, d] {
        r.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_dead_replica_s_share_runs_late_once_and_a_new_one_takes_a_quarter() {
    die_and_join(300, 1.0).await;
}

#[tokio::test(start_paused = true)]
async fn a_stopping_replica_releases_its_share_and_its_slots_run_on_time() {
    let (sim, _clock, cronjobs, [a, b, c]) = three(150).await;
    let before = owners(&["kronjob-a", "kronjob-b", "kronjob-c"], &cronjobs);
    tokio::time::sleep(Duration::from_secs(15)).await;
    // 10:00:55: SIGTERM.
    b.stop().await;
    let leases = sim.list(&Resource::leases(), Some(NAMESPACE));
    let names: Vec<&str> = leases
        .iter()
        .filter_map(|l| l["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["kronjob-shard-kronjob-a", "kronjob-shard-kronjob-c"]
    );
    assert!(
        leases
            .iter()
            .all(|l| l["metadata"]["labels"]["batch.kronjob.dev/shard-group"] == "kronjob")
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    let handed: Vec<bool> = before.iter().map(|o| o == "kronjob-b").collect();
    let (handed_over, others) = once_each(&sim, &cronjobs, "2024-01-01T10:01:00Z", &handed);
    println!("graceful stop: its share ran {handed_over:.2} s late, the others {others:.2} s");
    assert!(
        handed_over <= 1.0 && others <= 1.0,
        "{handed_over} {others}"
    );
    let gauges = shard_gauges(&[&a, &c]);
    assert_eq!(gauges.iter().map(|g| g.1).sum::<i64>(), 150, "{gauges:?}");
    assert!(gauges.iter().all(|g| g.2 == 2), "{gauges:?}");
    record_calls(&sim);
    a.stop().await;
    c.stop().await;
}

#[tokio::test(start_paused = true)]
#[ignore = "a measurement: cargo test --test sharding -- --ignored --nocapture"]
async fn measure_3000_cronjobs() {
    die_and_join(3000, 3.0).await;
}

/// A replica that cannot renew its Lease for a whole duration (the API server is unreachable)
/// drops itself, so it schedules nothing while the others would take its share; it rejoins
/// once the API server answers again.
#[tokio::test(start_paused = true)]
async fn a_replica_that_cannot_renew_drops_itself_and_rejoins() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    seed(&sim, 20);
    let a = replica(&sim, clock, "kronjob-a");
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(shard_gauges(&[&a]), [("kronjob-a".to_string(), 20, 1)]);
    sim.set_down(true);
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(
        a.metrics.members.get(),
        1,
        "still a member within the lease duration"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(shard_gauges(&[&a]), [("kronjob-a".to_string(), 0, 0)]);
    sim.set_down(false);
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(shard_gauges(&[&a]), [("kronjob-a".to_string(), 20, 1)]);
    record_calls(&sim);
    a.stop().await;
}

/// Three replicas, each watching only its buckets; CronJobs created without the label (the
/// webhook off) and a Job without it are labelled once each, by their owner, a CronJob with
/// another bucket's label is corrected by the replica that sees it, and all then run.
#[tokio::test(start_paused = true)]
async fn each_replica_caches_its_share_and_strays_are_labelled_once_by_their_owner() {
    let clock = TokioClock::new(t(START));
    let sim = ApiSim::new(CostModel::measured()).with_clock(sim_clock(clock.clone()));
    let mut cronjobs = seed(&sim, 120);
    let mut strays = seed_from(&sim, 120, 30, false);
    cronjobs.extend(strays.iter().cloned());
    // One labelled with another bucket (edited with the webhook off): the replica that sees it
    // corrects it.
    let misfiled = "cj-0150".to_string();
    let mut cj = cronjob_json(
        "load",
        &misfiled,
        "* * * * *",
        "2024-01-01T09:00:00Z",
        Some("2024-01-01T10:00:00Z"),
    );
    // Another replica's bucket: the one that sees it does not schedule it.
    let group = Assignment::new(
        "",
        ["kronjob-a", "kronjob-b", "kronjob-c"].map(String::from),
    );
    let right = bucket("load", &misfiled);
    let wrong = (0..kronjob::api::shard::BUCKETS)
        .find(|b| group.bucket_owner(*b) != group.bucket_owner(right))
        .expect("another replica's bucket");
    cj["metadata"]["labels"] = json!({LABEL_SHARD: wrong.to_string()});
    sim.insert(cj);
    cronjobs.push(misfiled.clone());
    strays.push(misfiled);
    // A Job of a labelled CronJob, made before Jobs carried the bucket.
    let parent = &cronjobs[0];
    let uid = sim
        .list(
            &Resource::for_kind("batch.kronjob.dev/v1", "CronJob"),
            Some("load"),
        )
        .iter()
        .find(|cj| cj["metadata"]["name"] == parent.as_str())
        .and_then(|cj| cj["metadata"]["uid"].as_str().map(String::from))
        .expect("the parent's uid");
    sim.insert(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("{parent}-28401240"), "namespace": "load",
            "labels": {"batch.kronjob.dev/cronjob": parent},
            "ownerReferences": [{"apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
                "name": parent, "uid": uid, "controller": true}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}
    }));
    let replicas = ["kronjob-a", "kronjob-b", "kronjob-c"].map(|r| replica(&sim, clock.clone(), r));
    // 10:00:40: formed, strays labelled, caches listed again with them.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let patches: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.status == 200)
        .filter(|r| r.resource == "cronjobs" || r.resource == "jobs")
        .collect();
    let mut patched: Vec<String> = patches
        .iter()
        .filter(|r| r.resource == "cronjobs")
        .filter_map(|r| r.name.clone())
        .collect();
    patched.sort();
    assert_eq!(
        patched, strays,
        "each stray CronJob labelled once, the misfiled one corrected once"
    );
    assert_eq!(
        patches.iter().filter(|r| r.resource == "jobs").count(),
        1,
        "the stray Job labelled once"
    );
    for cj in sim.list(
        &Resource::for_kind("batch.kronjob.dev/v1", "CronJob"),
        Some("load"),
    ) {
        let name = cj["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(
            cj["metadata"]["labels"][LABEL_SHARD],
            bucket("load", name).to_string(),
            "{name}"
        );
    }
    // The watches select the buckets: each cache holds its share and no more.
    let owners = owners(&["kronjob-a", "kronjob-b", "kronjob-c"], &cronjobs);
    for r in &replicas {
        let share = owners.iter().filter(|o| **o == r.name).count() as i64;
        assert_eq!(r.reconciler.managed_cronjobs.get(), share, "{}", r.name);
        assert_eq!(r.metrics.cronjobs.get(), share, "{}", r.name);
    }
    // Started together, the replicas saw the group form member by member, and listed their
    // buckets once it had settled: one list each with buckets (and one, before, with none).
    let selected = sim
        .requests()
        .into_iter()
        .filter(|r| r.resource == "cronjobs" && r.verb == "list")
        .filter(|r| r.query.contains("shard+in+") && !r.query.contains("none"))
        .count();
    assert_eq!(selected, 3, "every replica lists its buckets once");
    // 10:01 runs once for every CronJob, the strays included.
    tokio::time::sleep(Duration::from_secs(30)).await;
    once_each(
        &sim,
        &cronjobs,
        "2024-01-01T10:01:00Z",
        &vec![false; cronjobs.len()],
    );
    record_calls(&sim);
    for r in replicas {
        r.stop().await;
    }
}
