//! Which replica schedules which CronJob when several replicas share the work (`--sharding`).
//!
//! Assignment is rendezvous hashing (highest random weight): every member scores every key
//! with a hash of `member` and `key`, and the highest score owns the key. It needs no state beyond
//! the member list, every replica computes the same owner from the same members, and a
//! membership change moves only what must move: the keys of a member that left (spread over
//! the others), or about `1/n` of the keys to a member that joined, each from whoever held it.
//!
//! Keys are `namespace/name` of a CronJob; a Job is assigned with the CronJob that controls it,
//! so one replica handles a CronJob, its Jobs and their TTLs.
//!
//! [`ShardView`] is what the controllers read: the current [`Assignment`] (published by the
//! membership in [`crate::manager::shard`]) and the shard metrics.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// The key a CronJob is assigned by.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The key a Job is assigned by: its controlling owner's (a CronJob, in the Job's namespace),
/// else its own.
pub fn job_key(job: &Job) -> String {
    let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
    let owner = job
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.name.as_str());
    key(
        namespace,
        owner.unwrap_or(job.metadata.name.as_deref().unwrap_or_default()),
    )
}

/// The score of `member` for `key`: [FNV-1a](crate::hash::fnv1a64) of `member` and `key`, then
/// a finalizer (SplitMix64's) so that keys differing in their last characters spread evenly.
pub fn score(member: &str, key: &str) -> u64 {
    let mut z = crate::hash::fnv1a64(&[member.as_bytes(), key.as_bytes()]);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The members of a shard group as one replica sees them, and which of them it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// The live members, sorted, without duplicates.
    members: Vec<String>,
    /// This replica's identity.
    me: String,
}

impl Assignment {
    /// The assignment over `members` seen by replica `me` (who owns nothing unless it is a
    /// member itself).
    pub fn new(me: &str, members: impl IntoIterator<Item = String>) -> Self {
        let mut members: Vec<String> = members.into_iter().collect();
        members.sort();
        members.dedup();
        Self {
            members,
            me: me.to_string(),
        }
    }

    /// The live members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// Whether this replica is a member (its own Lease is live).
    pub fn is_member(&self) -> bool {
        self.members.binary_search(&self.me).is_ok()
    }

    /// The member that owns `key`; `None` without members. Ties (never seen with 64-bit
    /// scores) go to the greater name, so every replica agrees.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.members
            .iter()
            .max_by_key(|m| (score(m, key), m.as_str()))
            .map(String::as_str)
    }

    /// Whether this replica owns `key`.
    pub fn owns(&self, key: &str) -> bool {
        self.is_member() && self.owner(key) == Some(self.me.as_str())
    }
}

/// The shard metrics: how many CronJobs this replica schedules, and how many replicas share
/// them.
#[derive(Clone, Debug, Default)]
pub struct ShardMetrics {
    /// CronJobs this replica schedules.
    pub cronjobs: Gauge,
    /// Live members of the shard group, this replica included.
    pub members: Gauge,
}

impl ShardMetrics {
    /// Create the metrics and register them in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "kronjob_shard_cronjobs",
            "CronJobs this replica schedules (--sharding; all in scope otherwise)",
            m.cronjobs.clone(),
        );
        registry.register(
            "kronjob_shard_members",
            "Replicas sharing the CronJobs (--sharding; 1 otherwise)",
            m.members.clone(),
        );
        m
    }
}

/// What the controllers see of the sharding: the current assignment (or, without
/// `--sharding`, that this replica handles everything), and the metrics.
#[derive(Clone, Debug, Default)]
pub struct ShardView {
    /// `None`: not sharded, every key is ours.
    assignment: Option<watch::Receiver<Arc<Assignment>>>,
    /// The shard metrics.
    pub metrics: ShardMetrics,
}

impl ShardView {
    /// Not sharded: this replica owns every key.
    pub fn solo(metrics: ShardMetrics) -> Self {
        metrics.members.set(1);
        Self {
            assignment: None,
            metrics,
        }
    }

    /// A view of the assignments published on `assignment`.
    pub fn sharded(assignment: watch::Receiver<Arc<Assignment>>, metrics: ShardMetrics) -> Self {
        Self {
            assignment: Some(assignment),
            metrics,
        }
    }

    /// Whether the work is shared between replicas.
    pub fn is_sharded(&self) -> bool {
        self.assignment.is_some()
    }

    /// The current assignment; `None` when not sharded.
    pub fn current(&self) -> Option<Arc<Assignment>> {
        self.assignment.as_ref().map(|a| Arc::clone(&a.borrow()))
    }

    /// Whether this replica schedules `cj` now (always without `--sharding`).
    pub fn owns_cronjob(&self, cj: &impl kube::Resource) -> bool {
        !self.is_sharded()
            || self.owns(&key(
                cj.meta().namespace.as_deref().unwrap_or_default(),
                cj.meta().name.as_deref().unwrap_or_default(),
            ))
    }

    /// Whether this replica owns `key` now.
    pub fn owns(&self, key: &str) -> bool {
        self.assignment
            .as_ref()
            .is_none_or(|a| a.borrow().owns(key))
    }

    /// Wait for the next assignment; never returns when not sharded or once the membership
    /// has stopped publishing.
    pub async fn changed(&mut self) -> Arc<Assignment> {
        if let Some(a) = self.assignment.as_mut()
            && a.changed().await.is_ok()
        {
            return Arc::clone(&a.borrow_and_update());
        }
        std::future::pending().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("kronjob-7d9f8c-{i:05x}")).collect()
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| key(&format!("team-{}", i % 17), &format!("cj-{i}")))
            .collect()
    }

    fn owners(a: &Assignment, keys: &[String]) -> Vec<String> {
        keys.iter()
            .map(|k| a.owner(k).expect("an owner").to_string())
            .collect()
    }

    fn counts(owners: &[String]) -> BTreeMap<&str, usize> {
        let mut c = BTreeMap::new();
        for o in owners {
            *c.entry(o.as_str()).or_default() += 1;
        }
        c
    }

    #[test]
    fn every_replica_computes_the_same_owner_whatever_the_order_it_saw_members_in() {
        let m = members(5);
        let mut reversed = m.clone();
        reversed.reverse();
        let a = Assignment::new(&m[0], m.clone());
        let b = Assignment::new(&m[3], reversed.into_iter().chain([m[1].clone()]));
        let keys = keys(2000);
        assert_eq!(owners(&a, &keys), owners(&b, &keys));
        // Each key is owned by exactly one of the replicas.
        let views: Vec<Assignment> = m.iter().map(|me| Assignment::new(me, m.clone())).collect();
        for k in &keys {
            assert_eq!(views.iter().filter(|v| v.owns(k)).count(), 1, "{k}");
        }
        // Fixed values: the hash is part of the protocol between replicas of one version.
        assert_eq!(score("a", "ns/cj"), score("a", "ns/cj"));
        assert_ne!(score("a", "ns/cj"), score("b", "ns/cj"));
        assert_ne!(score("ab", "c"), score("a", "bc"), "the separator counts");
    }

    #[test]
    fn balanced_within_ten_percent_at_3_and_10_replicas() {
        for (n, total) in [(3, 3_000), (3, 10_000), (10, 10_000)] {
            let a = Assignment::new("x", members(n));
            let owners = owners(&a, &keys(total));
            let c = counts(&owners);
            assert_eq!(c.len(), n);
            let fair = total as f64 / n as f64;
            for (member, got) in &c {
                let off = (*got as f64 - fair).abs() / fair;
                assert!(
                    off <= 0.10,
                    "{n} replicas, {total} CronJobs: {member} has {got} (fair {fair}): {c:?}"
                );
            }
        }
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_keys() {
        let keys = keys(10_000);
        let m = members(10);
        let before = owners(&Assignment::new("x", m.clone()), &keys);
        let gone = m[4].clone();
        let after = owners(
            &Assignment::new("x", m.iter().filter(|x| **x != gone).cloned()),
            &keys,
        );
        for (b, a) in before.iter().zip(&after) {
            if *b != gone {
                assert_eq!(a, b, "a key of a surviving member moved");
            } else {
                assert_ne!(*a, gone);
            }
        }
        // The leaver's keys spread over the others, not onto one of them.
        let moved: Vec<String> = before
            .iter()
            .zip(&after)
            .filter(|(b, _)| **b == gone)
            .map(|(_, a)| a.clone())
            .collect();
        assert_eq!(counts(&moved).len(), 9);
    }

    #[test]
    fn a_member_joining_takes_about_one_nth_and_only_from_others() {
        let keys = keys(10_000);
        for n in [3, 10] {
            let m = members(n);
            let before = owners(&Assignment::new("x", m.clone()), &keys);
            let joined = "kronjob-7d9f8c-new".to_string();
            let after = owners(
                &Assignment::new("x", m.iter().cloned().chain([joined.clone()])),
                &keys,
            );
            let mut moved = 0;
            for (b, a) in before.iter().zip(&after) {
                if a != b {
                    assert_eq!(*a, joined, "a key moved between old members");
                    moved += 1;
                }
            }
            let fair = keys.len() as f64 / (n + 1) as f64;
            let off = (moved as f64 - fair).abs() / fair;
            assert!(off <= 0.10, "{n} -> {}: {moved} moved, fair {fair}", n + 1);
        }
    }

    #[test]
    fn a_replica_outside_the_members_owns_nothing_and_no_members_means_no_owner() {
        let m = members(3);
        let outsider = Assignment::new("other", m.clone());
        assert!(!outsider.is_member());
        assert!(keys(100).iter().all(|k| !outsider.owns(k)));
        let empty = Assignment::new("me", Vec::new());
        assert_eq!(empty.owner("ns/cj"), None);
        assert!(!empty.owns("ns/cj"));
        let alone = Assignment::new("me", ["me".to_string()]);
        assert!(keys(100).iter().all(|k| alone.owns(k)));
    }

    #[test]
    fn a_job_goes_with_the_cronjob_that_controls_it() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        let owned = Job {
            metadata: ObjectMeta {
                name: Some("nightly-28000000".into()),
                namespace: Some("ns".into()),
                owner_references: Some(vec![
                    OwnerReference {
                        name: "other".into(),
                        controller: Some(false),
                        ..OwnerReference::default()
                    },
                    OwnerReference {
                        name: "nightly".into(),
                        controller: Some(true),
                        ..OwnerReference::default()
                    },
                ]),
                ..ObjectMeta::default()
            },
            ..Job::default()
        };
        assert_eq!(job_key(&owned), "ns/nightly");
        let alone = Job {
            metadata: ObjectMeta {
                name: Some("adhoc".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..Job::default()
        };
        assert_eq!(job_key(&alone), "ns/adhoc");
    }

    #[tokio::test]
    async fn the_view_follows_published_assignments() {
        let (tx, rx) = watch::channel(Arc::new(Assignment::default()));
        let mut view = ShardView::sharded(rx, ShardMetrics::default());
        assert!(view.is_sharded());
        assert!(!view.owns("ns/cj"));
        tx.send_replace(Arc::new(Assignment::new("me", ["me".to_string()])));
        let next = view.changed().await;
        assert!(next.owns("ns/cj") && view.owns("ns/cj"));
        drop(tx);
        let ended = tokio::time::timeout(std::time::Duration::from_millis(10), view.changed());
        assert!(ended.await.is_err(), "no more assignments once unpublished");
        let solo = ShardView::solo(ShardMetrics::default());
        assert!(solo.owns("ns/anything") && !solo.is_sharded());
        assert_eq!(solo.metrics.members.get(), 1);
    }
}
