//! Which replica schedules which CronJob when several replicas share the work (`--sharding`).
//!
//! Every CronJob and its Jobs carry a shard bucket ([`crate::api::shard`]), a fixed function
//! of the CronJob's namespace and name. The live members divide the buckets by rendezvous
//! hashing with bounded loads: pairs of (bucket, member) are taken in order of a hash of both,
//! highest first, and each bucket goes to the first member of its pairs that holds fewer than
//! its fair share (`buckets / members`, one more for the first few to get there). Every replica
//! computes the same owners from the same members, the members' shares differ by at most one
//! bucket, and a membership change moves the buckets of a member that left, or about `1/n` of
//! them to a member that joined (and, because of the bounds, a few more between the others).
//!
//! Keys are `namespace/name` of a CronJob; a Job is assigned with the CronJob that controls it,
//! so one replica handles a CronJob, its Jobs and their TTLs.
//!
//! [`ShardView`] is what the controllers read: the current [`Assignment`] (published by the
//! membership in [`crate::manager::shard`]), the assignment the replica's caches have listed
//! with (a replica schedules only what both give it), and the shard metrics.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::api::shard::{BUCKETS, bucket};

/// The key a CronJob is assigned by.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The key a Job is assigned by: its controlling owner's (a CronJob, in the Job's namespace),
/// else its own.
pub fn job_key(job: &Job) -> String {
    workload_key(&job.metadata)
}

/// The shard key of a workload of any kind, by its metadata (see [`job_key`]).
pub fn workload_key(meta: &ObjectMeta) -> String {
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.name.as_str());
    key(
        namespace,
        owner.unwrap_or(meta.name.as_deref().unwrap_or_default()),
    )
}

/// The score of `member` for `key`: [FNV-1a](crate::hash::fnv1a64) of `member` and `key`, then
/// a finalizer (SplitMix64's) so that keys differing in their last characters spread evenly.
pub fn score(member: &str, key: &str) -> u64 {
    crate::hash::mix64(crate::hash::fnv1a64(&[member.as_bytes(), key.as_bytes()]))
}

/// The bucket of a key (`namespace/name`).
pub fn key_bucket(key: &str) -> u16 {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    bucket(namespace, name)
}

/// The members of a shard group as one replica sees them, and which of them it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// The live members, sorted, without duplicates.
    members: Vec<String>,
    /// This replica's identity.
    me: String,
    /// The owner of each bucket, an index into `members`; empty without members.
    owners: Vec<usize>,
}

impl Assignment {
    /// The assignment over `members` seen by replica `me` (who owns nothing unless it is a
    /// member itself).
    pub fn new(me: &str, members: impl IntoIterator<Item = String>) -> Self {
        let mut members: Vec<String> = members.into_iter().collect();
        members.sort();
        members.dedup();
        let owners = spread(&members);
        Self {
            members,
            me: me.to_string(),
            owners,
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

    /// The member that owns `bucket`; `None` without members.
    pub fn bucket_owner(&self, bucket: u16) -> Option<&str> {
        let i = *self.owners.get(usize::from(bucket))?;
        self.members.get(i).map(String::as_str)
    }

    /// The member that owns `key`; `None` without members.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.bucket_owner(key_bucket(key))
    }

    /// Whether this replica owns `bucket`.
    pub fn owns_bucket(&self, bucket: u16) -> bool {
        self.is_member() && self.bucket_owner(bucket) == Some(self.me.as_str())
    }

    /// Whether this replica owns `key`.
    pub fn owns(&self, key: &str) -> bool {
        self.owns_bucket(key_bucket(key))
    }

    /// The buckets this replica owns, ascending.
    pub fn my_buckets(&self) -> Vec<u16> {
        (0..BUCKETS).filter(|b| self.owns_bucket(*b)).collect()
    }
}

/// Rendezvous hashing with bounded loads: the owner (an index into `members`) of every bucket.
fn spread(members: &[String]) -> Vec<usize> {
    if members.is_empty() {
        return Vec::new();
    }
    // Fair shares: every member `floor` buckets, `extra` of them one more (whoever gets there
    // first), so shares differ by at most one bucket.
    let floor = usize::from(BUCKETS) / members.len();
    let mut extra = usize::from(BUCKETS) % members.len();
    let mut pairs: Vec<(u64, u16, usize)> = (0..BUCKETS)
        .flat_map(|b| {
            let key = b.to_string();
            members
                .iter()
                .enumerate()
                .map(move |(i, m)| (score(m, &key), b, i))
        })
        .collect();
    // Highest score first; ties (never seen with 64-bit scores) by bucket and member, so every
    // replica agrees.
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut owners = vec![usize::MAX; usize::from(BUCKETS)];
    let mut load = vec![0usize; members.len()];
    for (_, b, i) in pairs {
        let slot = &mut owners[usize::from(b)];
        if *slot != usize::MAX {
            continue;
        }
        if load[i] < floor || (load[i] == floor && extra > 0) {
            if load[i] == floor {
                extra -= 1;
            }
            *slot = i;
            load[i] += 1;
        }
    }
    // Every bucket has an owner: the shares add up to BUCKETS, so a bucket left without one
    // would mean every member was full, which it cannot be.
    owners
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
/// `--sharding`, that this replica handles everything), the assignment its caches have listed
/// with, and the metrics.
#[derive(Clone, Debug, Default)]
pub struct ShardView {
    /// `None`: not sharded, every key is ours.
    assignment: Option<watch::Receiver<Arc<Assignment>>>,
    /// The caches that must list with an assignment before it counts, and the last
    /// assignment all of them listed with.
    listed: Option<Arc<Listings>>,
    /// With `--leader-elect`: whether this replica leads. A standby keeps its caches warm and
    /// owns nothing until it leads (`None`: it schedules whenever it runs).
    leading: Option<watch::Receiver<bool>>,
    /// The shard metrics.
    pub metrics: ShardMetrics,
}

/// The caches a replica's scheduling depends on (the CronJob and Job watches, one per
/// namespace), which assignment each last listed with, and the last assignment all listed with.
#[derive(Debug)]
struct Listings {
    caches: std::sync::Mutex<Vec<Option<Arc<Assignment>>>>,
    all: watch::Sender<Arc<Assignment>>,
}

/// One cache's handle for reporting the assignment it has listed with.
#[derive(Debug, Clone)]
pub struct CacheListing {
    listings: Arc<Listings>,
    cache: usize,
}

impl CacheListing {
    /// This cache now holds exactly the objects of `assignment`'s buckets for this replica.
    pub fn listed(&self, assignment: &Arc<Assignment>) {
        let mut caches = self
            .listings
            .caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        caches[self.cache] = Some(Arc::clone(assignment));
        let agreed = caches.iter().all(|c| {
            c.as_deref()
                .is_some_and(|c| c.my_buckets() == assignment.my_buckets())
        });
        if agreed && **self.listings.all.borrow() != **assignment {
            self.listings.all.send_replace(Arc::clone(assignment));
        }
    }
}

impl ShardView {
    /// Not sharded: this replica owns every key.
    pub fn solo(metrics: ShardMetrics) -> Self {
        metrics.members.set(1);
        Self {
            assignment: None,
            listed: None,
            leading: None,
            metrics,
        }
    }

    /// This view, owning nothing while `leading` says `false`: the controllers of a standby
    /// run on warm caches and schedule from the moment it leads.
    #[must_use]
    pub fn led_by(mut self, leading: watch::Receiver<bool>) -> Self {
        self.leading = Some(leading);
        self
    }

    /// Whether this replica may act now: it leads, or runs without leader election.
    pub fn is_leading(&self) -> bool {
        self.leading.as_ref().is_none_or(|l| *l.borrow())
    }

    /// A receiver of the leadership (`None`: no leader election).
    pub fn subscribe_leading(&self) -> Option<watch::Receiver<bool>> {
        self.leading.clone()
    }

    /// A view of the assignments published on `assignment`.
    pub fn sharded(assignment: watch::Receiver<Arc<Assignment>>, metrics: ShardMetrics) -> Self {
        let (all, _) = watch::channel(Arc::new(Assignment::default()));
        Self {
            assignment: Some(assignment),
            listed: Some(Arc::new(Listings {
                caches: std::sync::Mutex::new(Vec::new()),
                all,
            })),
            leading: None,
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

    /// A cache that must have listed with an assignment before this replica schedules by it;
    /// `None` when not sharded. Register every such cache before any of them lists.
    pub fn register_cache(&self) -> Option<CacheListing> {
        let listings = self.listed.as_ref()?;
        let mut caches = listings
            .caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        caches.push(None);
        Some(CacheListing {
            listings: Arc::clone(listings),
            cache: caches.len() - 1,
        })
    }

    /// The last assignment every registered cache has listed with; `None` when not sharded.
    pub fn listed(&self) -> Option<Arc<Assignment>> {
        self.listed.as_ref().map(|l| Arc::clone(&l.all.borrow()))
    }

    /// Whether this replica schedules `cj` now (always without `--sharding`, while it leads).
    pub fn owns_cronjob(&self, cj: &impl kube::Resource) -> bool {
        if !self.is_sharded() {
            return self.is_leading();
        }
        self.owns(&key(
            cj.meta().namespace.as_deref().unwrap_or_default(),
            cj.meta().name.as_deref().unwrap_or_default(),
        ))
    }

    /// Whether this replica owns `key` now: by the current assignment and by the one its
    /// caches have listed with (when no cache is registered, by the current one alone); and
    /// never while it stands by for leadership.
    pub fn owns(&self, key: &str) -> bool {
        if !self.is_leading() {
            return false;
        }
        let Some(current) = self.assignment.as_ref() else {
            return true;
        };
        let bucket = key_bucket(key);
        current.borrow().owns_bucket(bucket)
            && self.listed.as_ref().is_none_or(|l| {
                let registered = !l
                    .caches
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .is_empty();
                !registered || l.all.borrow().owns_bucket(bucket)
            })
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

    /// A receiver of the assignments every registered cache has listed with; `None` when not
    /// sharded.
    pub fn subscribe_listed(&self) -> Option<watch::Receiver<Arc<Assignment>>> {
        self.listed.as_ref().map(|l| l.all.subscribe())
    }
}

/// The stream of one watch's events.
pub type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// A watch of `api` with `config` (and kronjob's backoff). With `--sharding` it selects only
/// the objects labelled with this replica's buckets, and starts again, listing anew, whenever
/// those change (once they have not changed for [`SETTLE`]); each completed list is reported to
/// `listing`. The new list replaces what the cache held (`Init`..`InitDone`), so objects of
/// buckets this replica lost leave its cache.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    view: &ShardView,
    listing: Option<CacheListing>,
) -> Events<K>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let Some(mut assignments) = view.assignment.clone() else {
        return watcher(api, config)
            .backoff(crate::backoff::watch_backoff())
            .boxed();
    };
    let start = move |a: &Assignment| -> Events<K> {
        let buckets = crate::api::shard::selector(&a.my_buckets());
        let labels = match &config.label_selector {
            Some(s) => format!("{s},{buckets}"),
            None => buckets,
        };
        watcher(api.clone(), config.clone().labels(&labels))
            .backoff(crate::backoff::watch_backoff())
            .boxed()
    };
    let current = Arc::clone(&assignments.borrow_and_update());
    let state = Sharded {
        inner: start(&current),
        current,
        assignments,
        publishing: true,
        listed: false,
        listing,
        start: Box::new(start),
        settling: None,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            let settled = st.settling.as_ref().map(|(at, _)| *at);
            tokio::select! {
                event = st.inner.next() => {
                    let event = event?;
                    if let Ok(watcher::Event::InitDone) = &event {
                        st.listed = true;
                        if let Some(l) = &st.listing {
                            l.listed(&st.current);
                        }
                    }
                    return Some((event, st));
                }
                changed = st.assignments.changed(), if st.publishing => {
                    if changed.is_err() {
                        st.publishing = false;
                        continue;
                    }
                    let next = Arc::clone(&st.assignments.borrow_and_update());
                    if next.my_buckets() == st.current.my_buckets() {
                        st.settling = None;
                        st.current = next;
                        if st.listed && let Some(l) = &st.listing {
                            l.listed(&st.current);
                        }
                    } else {
                        // Wait for the group to settle (replicas starting together join one
                        // by one) before listing anew, once.
                        let at = st
                            .settling
                            .as_ref()
                            .map_or_else(|| Instant::now() + SETTLE, |(at, _)| *at);
                        st.settling = Some((at, next));
                    }
                }
                () = sleep_until_some(settled) => {
                    if let Some((_, next)) = st.settling.take() {
                        st.inner = (st.start)(&next);
                        st.current = next;
                        st.listed = false;
                    }
                }
            }
        }
    })
    .boxed()
}

/// How long a sharded watch waits after its buckets change before it lists anew: a group
/// forming (replicas starting together) changes them several times within a second.
pub const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// Sleep until `at`; forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The state of a sharded watch.
struct Sharded<K> {
    inner: Events<K>,
    current: Arc<Assignment>,
    assignments: watch::Receiver<Arc<Assignment>>,
    /// Whether the membership still publishes assignments.
    publishing: bool,
    /// Whether `inner` has listed since it started.
    listed: bool,
    listing: Option<CacheListing>,
    start: Starter<K>,
    /// A change of buckets waiting for the group to settle: when to list anew, and with what.
    settling: Option<(Instant, Arc<Assignment>)>,
}

/// Starts the inner watch of a sharded watch for an assignment.
type Starter<K> = Box<dyn Fn(&Assignment) -> Events<K> + Send>;

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

    /// Buckets each member owns under `a`.
    fn bucket_counts(a: &Assignment) -> BTreeMap<String, usize> {
        let mut c = BTreeMap::new();
        for b in 0..BUCKETS {
            *c.entry(a.bucket_owner(b).expect("an owner").to_string())
                .or_default() += 1;
        }
        c
    }

    #[test]
    fn buckets_split_evenly_and_keys_within_ten_percent_at_3_and_10_replicas() {
        for (n, total) in [(3, 3_000), (3, 10_000), (10, 10_000)] {
            let a = Assignment::new("x", members(n));
            let buckets = bucket_counts(&a);
            assert_eq!(buckets.len(), n);
            let (least, most) = (buckets.values().min(), buckets.values().max());
            assert!(
                most.zip(least).is_some_and(|(m, l)| m - l <= 1),
                "{n} replicas: {buckets:?}"
            );
            let owners = owners(&a, &keys(total));
            let c = counts(&owners);
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

    /// Buckets whose owner differs between `a` and `b`, as (from, to).
    fn moves(a: &Assignment, b: &Assignment) -> Vec<(String, String)> {
        (0..BUCKETS)
            .filter_map(|k| {
                let (x, y) = (a.bucket_owner(k)?, b.bucket_owner(k)?);
                (x != y).then(|| (x.to_string(), y.to_string()))
            })
            .collect()
    }

    #[test]
    fn a_member_leaving_moves_its_buckets_and_few_others() {
        for n in [3, 10] {
            let m = members(n);
            let before = Assignment::new("x", m.clone());
            let gone = m[n / 2].clone();
            let after = Assignment::new("x", m.iter().filter(|x| **x != gone).cloned());
            let moved = moves(&before, &after);
            let own = moved.iter().filter(|(from, _)| *from == gone).count();
            assert_eq!(
                own,
                bucket_counts(&before)[&gone],
                "every bucket of the leaver moved"
            );
            // The bounded loads move a few more between the others: at most 8% of all.
            let others = moved.len() - own;
            assert!(
                others * 100 <= usize::from(BUCKETS) * 8,
                "{n} -> {}: {others} moved between survivors",
                n - 1
            );
            // The leaver's buckets spread over the others, not onto one of them.
            let to: std::collections::BTreeSet<&String> = moved
                .iter()
                .filter(|(from, _)| *from == gone)
                .map(|(_, to)| to)
                .collect();
            assert_eq!(to.len(), n - 1);
        }
    }

    #[test]
    fn a_member_joining_takes_its_share_and_few_others_move() {
        for n in [3, 10] {
            let m = members(n);
            let before = Assignment::new("x", m.clone());
            let joined = "kronjob-7d9f8c-new".to_string();
            let after = Assignment::new("x", m.iter().cloned().chain([joined.clone()]));
            let moved = moves(&before, &after);
            let taken = moved.iter().filter(|(_, to)| *to == joined).count();
            assert_eq!(taken, bucket_counts(&after)[&joined]);
            let fair = usize::from(BUCKETS) / (n + 1);
            assert!(taken.abs_diff(fair) <= 1, "{n} -> {}: took {taken}", n + 1);
            let others = moved.len() - taken;
            assert!(
                others * 100 <= usize::from(BUCKETS) * 8,
                "{n} -> {}: {others} moved between old members",
                n + 1
            );
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
