//! Leader handover: two managers with `--leader-elect`; the leader is killed, the standby
//! creates the due Jobs, with no duplicate and no missed slot; a graceful stop exits 0.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::harness::{Ctx, Env, slot_of, wait_for};

crate::cases!(
    leader:
    handover_keeps_every_slot_exactly_once,
);

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
