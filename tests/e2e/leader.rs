//! Leader handover: two managers with `--leader-elect`; the leader is killed, the standby
//! creates the due Jobs, with no duplicate and no missed slot; a graceful stop exits 0. A
//! rollout (the leader stopped by SIGTERM just before a slot) at 1,000 CronJobs hands over to
//! a standby whose caches are warm, and the slot runs on time.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::faults::{Jobs, create_cronjobs, leads, rss_mib, sample_leaders, spread};
use crate::harness::{Ctx, Env, at_second, slot_of, wait_for};

crate::cases!(
    leader:
    handover_keeps_every_slot_exactly_once,
    a_rollout_hands_over_to_a_warm_standby_before_the_slot,
);

/// CronJobs of the rollout case (`KRONJOB_E2E_FAILOVER_CRONJOBS` sets another number).
fn failover_cronjobs() -> usize {
    std::env::var("KRONJOB_E2E_FAILOVER_CRONJOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// Two managers elect a leader over 1,000 same-minute CronJobs; a slot runs (the steady
/// one), then the leader gets SIGTERM 5 s before the next slot, as a rolling update stops a
/// pod. The leader stops acting and releases the Lease at once (not after draining its
/// controllers), and the standby, whose caches were filled while it stood by, leads within
/// 3 s of the signal, before the slot, and runs the slot for every CronJob once; the slot's
/// Jobs come no later than 5 s after the steady slot's last one did (printed: both slots'
/// creation p50/p99/max after the slot, the handover, and each replica's memory). Guards the
/// warm standby (before the SIGTERM the standby's cache holds every CronJob; without it, none)
/// and the handover on SIGTERM (without the release the standby leads only when the Lease
/// expires, after the slot).
pub async fn a_rollout_hands_over_to_a_warm_standby_before_the_slot(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let lease = [
        "--leader-elect",
        "--leader-election-namespace",
        env.namespace.as_str(),
        "--leader-election-id",
        "kronjob-e2e-rollout",
    ];
    let (jobs, watch) = Jobs::watch(env.api());
    let names = create_cronjobs(&env, failover_cronjobs()).await;
    let mut leader = env.manager(&lease);
    leader.wait_ready(Duration::from_secs(120)).await;
    wait_for(
        Duration::from_secs(30),
        "the first manager to lead",
        || async { leads(&leader).await.then_some(()) },
    )
    .await;
    let mut standby = env.manager(&lease);
    standby.wait_ready(Duration::from_secs(120)).await;
    // A slot with both running: the steady one (the standby's caches fill meanwhile).
    let steady = at_second(0).await;
    let created = jobs
        .wait_slot(&names, steady, Duration::from_secs(55))
        .await;
    let after = |created: &[i64], slot: i64| -> Vec<i64> {
        created.iter().map(|c| c - slot * 60).collect()
    };
    let (s50, s99, smax) = spread(&after(&created, steady));
    // The standby's caches are warm: it holds every CronJob before it leads.
    let cached = crate::harness::metric_sum(
        &standby.metrics_text().await,
        "kronjob_managed_cronjobs",
        &[],
    );
    assert!(!leads(&standby).await, "the second manager stands by");
    assert_eq!(
        cached as usize,
        names.len(),
        "the standby's CronJob cache before it leads"
    );
    let rss = (rss_mib(leader.pid()), rss_mib(standby.pid()));
    let (samples, sampler) = sample_leaders(
        vec![leader.metrics, standby.metrics],
        Duration::from_millis(100),
    );
    let slot = at_second(55).await + 1;
    let signalled = jiff::Timestamp::now().as_millisecond();
    kronjob_envtest::process::signal(leader.pid(), 15);
    let created = jobs.wait_slot(&names, slot, Duration::from_secs(60)).await;
    let (h50, h99, hmax) = spread(&after(&created, slot));
    sampler.abort();
    let took_over = samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(at, leading)| *at >= signalled && leading[1])
        .map(|(at, _)| at - signalled);
    let exit_limit = tokio::time::Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = leader.exited() {
            break status;
        }
        assert!(
            tokio::time::Instant::now() < exit_limit,
            "the old leader still runs 30 s after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(exited.code(), Some(0), "the old leader exits 0");
    watch.abort();
    jobs.add_listed(&env.api()).await;
    let tally = jobs.tally(&names, steady, slot);
    println!(
        "rollout at {} CronJobs: steady slot Jobs {s50}/{s99}/{smax} s, handover slot {h50}/{h99}/{hmax} s (p50/p99/max after the slot); the standby led {took_over:?} ms after SIGTERM; RSS leader {:.0} MiB, standby {:.0} MiB",
        names.len(),
        rss.0,
        rss.1
    );
    assert!(tally.missed.is_empty(), "missed: {:?}", tally.missed);
    assert!(
        tally.duplicates.is_empty(),
        "duplicates: {:?}",
        tally.duplicates
    );
    let took_over = took_over.expect("the standby led after the SIGTERM");
    assert!(
        took_over <= 3_000,
        "the standby led {took_over} ms after the leader's SIGTERM: the Lease was not released at once"
    );
    assert!(
        hmax <= smax + 5,
        "the handover slot's last Job {hmax} s after it, the steady one's {smax} s: the standby's caches were not warm"
    );
    assert_eq!(standby.terminate(), Some(0), "graceful stop exits 0");
    env.cleanup().await;
}

pub async fn handover_keeps_every_slot_exactly_once(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let lease = [
        "--leader-elect",
        "--leader-election-namespace",
        env.namespace.as_str(),
        "--leader-election-id",
        "kronjob-e2e-leader",
    ];
    let mut first = env.manager(&lease);
    crate::cronjob::create(&env, crate::cronjob::every_minute("every-minute", 100)).await;
    let slots = || async {
        let mut s: Vec<i64> = env
            .jobs_of("every-minute")
            .await
            .iter()
            .filter_map(slot_of)
            .collect();
        s.sort_unstable();
        s
    };
    wait_for(
        Duration::from_secs(75),
        "the first leader's Job",
        || async { (!slots().await.is_empty()).then_some(()) },
    )
    .await;
    let mut second = env.manager(&lease);
    tokio::time::sleep(Duration::from_secs(3)).await;
    first.kill();
    let killed_at = jiff::Timestamp::now();
    let last = *slots().await.last().expect("a slot");
    // The next slot after the kill appears within 20 s of being due.
    let due_in = ((last + 1) * 60 - killed_at.as_second()).max(0) as u64;
    wait_for(
        Duration::from_secs(due_in + 20),
        "the next slot's Job",
        || async { slots().await.contains(&(last + 1)).then_some(()) },
    )
    .await;
    let after = slots().await;
    let unique: BTreeSet<i64> = after.iter().copied().collect();
    assert_eq!(unique.len(), after.len(), "no duplicate slot: {after:?}");
    let (lo, hi) = (after[0], after[after.len() - 1]);
    assert_eq!(
        (hi - lo + 1) as usize,
        after.len(),
        "no missed slot: {after:?}"
    );
    assert_eq!(second.terminate(), Some(0), "graceful stop exits 0");
    env.cleanup().await;
}
