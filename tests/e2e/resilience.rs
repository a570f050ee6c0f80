//! Resilience on a real API server: a graceful handover on SIGTERM, `--sharding` with three
//! replicas (each caching only its share, labelling the CronJobs created without the webhook)
//! and one killed, and an API server that is down for 70 s.

use std::collections::BTreeMap;

use kronjob::api::shard::{LABEL_SHARD, bucket};
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::ListParams;

use crate::harness::{Ctx, Env, Manager, at_second, slot_of, wait_for};

crate::cases!(
    resilience:
    sigterm_hands_over_to_the_standby_before_the_next_slot,
    sharding_survives_a_killed_replica,
    api_server_down_for_70s,
);

/// Every Job of kronjob in the namespace, by CronJob, as (slot, seconds from the slot to the
/// Job's creation).
async fn runs(env: &Env) -> BTreeMap<String, Vec<(i64, i64)>> {
    let jobs = env
        .api::<Job>()
        .list(&ListParams::default().labels("batch.kronjob.dev/cronjob"))
        .await
        .expect("list Jobs")
        .items;
    let mut by_cronjob: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for job in jobs {
        let (Some(slot), Some(created)) = (slot_of(&job), job.creation_timestamp()) else {
            continue;
        };
        let cronjob = job
            .labels()
            .get("batch.kronjob.dev/cronjob")
            .cloned()
            .unwrap_or_default();
        by_cronjob
            .entry(cronjob)
            .or_default()
            .push((slot, created.0.as_second() - slot * 60));
    }
    for slots in by_cronjob.values_mut() {
        slots.sort_unstable();
    }
    by_cronjob
}

/// Wait until each of `cronjobs` has a Job for `slot`; the runs then.
async fn wait_slot(
    env: &Env,
    cronjobs: &[String],
    slot: i64,
    limit: Duration,
) -> BTreeMap<String, Vec<(i64, i64)>> {
    wait_for(
        limit,
        &format!("every CronJob's Job for minute {slot}"),
        || async {
            let runs = runs(env).await;
            cronjobs
                .iter()
                .all(|cj| {
                    runs.get(cj)
                        .is_some_and(|r| r.iter().any(|(s, _)| *s == slot))
                })
                .then_some(runs)
        },
    )
    .await
}

/// Each CronJob ran each of `slots` exactly once, and nothing else.
fn assert_exactly_once(
    runs: &BTreeMap<String, Vec<(i64, i64)>>,
    cronjobs: &[String],
    slots: &[i64],
) {
    for cj in cronjobs {
        let got: Vec<i64> = runs
            .get(cj)
            .map(|r| r.iter().map(|(s, _)| *s).collect())
            .unwrap_or_default();
        assert_eq!(
            got, slots,
            "{cj}: each slot exactly once (all runs: {runs:?})"
        );
    }
}

/// Whether the manager's metrics say it leads.
async fn leads(manager: &Manager) -> bool {
    manager
        .metrics_text()
        .await
        .lines()
        .any(|l| l == "kronjob_leader 1")
}

/// Two managers with `--leader-elect`; the leader gets SIGTERM a few seconds before a slot: it
/// exits 0, the standby leads within seconds, and the slot's Job is created on time, once.
pub async fn sigterm_hands_over_to_the_standby_before_the_next_slot(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let lease = [
        "--leader-election-id",
        "handover",
        "--leader-election-namespace",
        env.namespace.as_str(),
        "--leader-elect",
    ];
    let mut first = env.manager(&lease);
    first.wait_ready(Duration::from_secs(60)).await;
    // A standby is ready too: readiness does not wait for the lease.
    wait_for(
        Duration::from_secs(15),
        "the first replica to lead",
        || async { leads(&first).await.then_some(()) },
    )
    .await;
    let mut second = env.manager(&lease);
    let names = vec!["handover".to_string()];
    crate::cronjob::create(&env, crate::cronjob::quiet_every_minute("handover")).await;
    let minute = at_second(52).await;
    assert_eq!(first.terminate(), Some(0), "a graceful stop exits 0");
    wait_for(Duration::from_secs(5), "the standby to lead", || async {
        leads(&second).await.then_some(())
    })
    .await;
    let slot = minute + 1;
    let runs = wait_slot(&env, &names, slot, Duration::from_secs(30)).await;
    let skew = runs["handover"]
        .iter()
        .find(|(s, _)| *s == slot)
        .map(|(_, k)| *k);
    assert!(
        skew.is_some_and(|k| k <= 3),
        "the slot after the handover on time: {runs:?}"
    );
    let runs = wait_slot(&env, &names, slot + 1, Duration::from_secs(70)).await;
    let first_slot = runs["handover"][0].0;
    let want: Vec<i64> = (first_slot..=slot + 1).collect();
    assert_exactly_once(&runs, &names, &want);
    assert_eq!(second.terminate(), Some(0));
    env.cleanup().await;
}

/// Three `--sharding` replicas share 24 CronJobs; one is killed just before a slot: its
/// CronJobs' Jobs for that slot come late (after its Lease expires) but exactly once, and the
/// next slot is on time for all.
pub async fn sharding_survives_a_killed_replica(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let group = format!("g-{}", env.namespace);
    let flags = [
        "--sharding",
        "--shard-group",
        group.as_str(),
        "--shard-lease-duration",
        "6s",
        "--leader-election-namespace",
        env.namespace.as_str(),
    ];
    let mut replicas: Vec<Manager> = (0..3).map(|_| env.manager(&flags)).collect();
    for replica in &mut replicas {
        replica.wait_ready(Duration::from_secs(60)).await;
    }
    let names: Vec<String> = (0..24).map(|i| format!("shard-{i:02}")).collect();
    for name in &names {
        crate::cronjob::create(&env, crate::cronjob::quiet_every_minute(name)).await;
    }
    // Every replica schedules a share.
    wait_for(
        Duration::from_secs(30),
        "three replicas with a share each",
        || async {
            let mut owned = Vec::new();
            for replica in &replicas {
                owned.push(gauge(
                    &replica.metrics_text().await,
                    "kronjob_shard_cronjobs",
                )?);
            }
            (owned.iter().all(|n| *n > 0.0) && owned.iter().sum::<f64>() == 24.0).then_some(())
        },
    )
    .await;
    // Created without the webhook, every CronJob was labelled with its shard bucket by the
    // replica that owns it, and each replica's cache holds its share and nothing more.
    wait_for(
        Duration::from_secs(30),
        "each replica caching only its share",
        || async {
            for replica in &replicas {
                let text = replica.metrics_text().await;
                let cached = gauge(&text, "kronjob_managed_cronjobs")?;
                (cached == gauge(&text, "kronjob_shard_cronjobs")? && cached < 24.0)
                    .then_some(())?;
            }
            Some(())
        },
    )
    .await;
    let api: kube::Api<kronjob::api::CronJob> = env.api();
    for cj in api.list(&Default::default()).await.expect("the CronJobs") {
        let name = cj.metadata.name.clone().unwrap_or_default();
        assert_eq!(
            cj.metadata.labels.as_ref().and_then(|l| l.get(LABEL_SHARD)),
            Some(&bucket(&env.namespace, &name).to_string()),
            "{name} labelled with its bucket"
        );
    }
    let first = at_second(1).await;
    wait_slot(&env, &names, first, Duration::from_secs(30)).await;
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    for job in jobs.list(&Default::default()).await.expect("the Jobs") {
        let labels = job.metadata.labels.unwrap_or_default();
        let cj = labels
            .get(kronjob::api::LABEL_CRONJOB)
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            labels.get(LABEL_SHARD),
            Some(&bucket(&env.namespace, &cj).to_string()),
            "a Job goes with its CronJob's bucket"
        );
    }
    let killed = at_second(57).await;
    replicas[0].kill();
    let late = killed + 1;
    let runs = wait_slot(&env, &names, late, Duration::from_secs(40)).await;
    let worst = runs
        .values()
        .filter_map(|r| r.iter().find(|(s, _)| *s == late).map(|(_, k)| *k))
        .max()
        .unwrap_or_default();
    assert!(
        worst <= 25,
        "the dead replica's slot runs within its Lease and a reconcile: {worst} s"
    );
    let next = late + 1;
    let runs = wait_slot(&env, &names, next, Duration::from_secs(70)).await;
    for (cj, r) in &runs {
        let skew = r.iter().find(|(s, _)| *s == next).map(|(_, k)| *k);
        assert!(
            skew.is_some_and(|k| k <= 3),
            "{cj}: the next slot on time: {r:?}"
        );
    }
    let want: Vec<i64> = (first..=next).collect();
    let runs = runs
        .into_iter()
        .map(|(cj, r)| (cj, r.into_iter().filter(|(s, _)| *s >= first).collect()))
        .collect();
    assert_exactly_once(&runs, &names, &want);
    env.cleanup().await;
}

/// One sample of a gauge without labels.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The API server is killed 20 s before a slot and comes back 70 s later: the slot it missed
/// runs once, soon after its return, and the next slots are on time.
pub async fn api_server_down_for_70s(ctx: Ctx) {
    let mut plane = ctx.own_control_plane(Default::default()).await;
    let env = Env::on(&ctx, plane.kubeconfig()).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let names: Vec<String> = (0..5).map(|i| format!("outage-{i}")).collect();
    for name in &names {
        crate::cronjob::create(&env, crate::cronjob::quiet_every_minute(name)).await;
    }
    let before = at_second(1).await;
    wait_slot(&env, &names, before, Duration::from_secs(30)).await;
    at_second(40).await;
    plane.kill_apiserver();
    tokio::time::sleep(Duration::from_secs(70)).await;
    plane
        .start_apiserver()
        .await
        .expect("the API server starts again");
    let back = jiff::Timestamp::now().as_second();
    let missed = before + 1;
    let runs = wait_slot(&env, &names, missed, Duration::from_secs(30)).await;
    let latest = runs
        .values()
        .filter_map(|r| {
            r.iter()
                .find(|(s, _)| *s == missed)
                .map(|(_, k)| missed * 60 + *k)
        })
        .max()
        .unwrap_or_default();
    assert!(
        latest - back <= 10,
        "the missed slot runs soon after the API server is back: {} s",
        latest - back
    );
    let after = missed + 2;
    let runs = wait_slot(&env, &names, after, Duration::from_secs(140)).await;
    for (cj, r) in &runs {
        for slot in [missed + 1, after] {
            let skew = r.iter().find(|(s, _)| *s == slot).map(|(_, k)| *k);
            assert!(
                skew.is_some_and(|k| k <= 3),
                "{cj}: minute {slot} on time: {r:?}"
            );
        }
    }
    let want: Vec<i64> = (before..=after).collect();
    assert_exactly_once(&runs, &names, &want);
    drop(manager);
}
