//! The owner index: a cache of the Jobs kronjob created, indexed by the UID of the CronJob that
//! controls them, so one reconcile reads only its own Jobs whatever the number of Jobs in the
//! cluster.
//!
//! The index is fed by one watch of Jobs (label selector [`LABEL_CRONJOB`], so unrelated Jobs
//! never reach it), decoded slim ([`SlimJob`]); the same stream also triggers the CronJob
//! controller and, in the manager, hands the TTL controller its finished Jobs. Each Job is kept as a [`CachedJob`] (~0.3 KB: what the plan reads of it). With
//! several namespaces, one watch per namespace is merged by [`merge_watches`], which keeps each
//! watch's re-list from wiping the others.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::{Stream, StreamExt, stream};
use kube::Resource;
use kube::runtime::reflector::Lookup;
use kube::runtime::watcher;
use tokio::sync::watch;

use super::cache::job::{Owner, Run};
use super::cache::seconds::Second;
use super::cache::{CachedJob, SlimJob};
use crate::api::LABEL_CRONJOB;
use crate::workload::{Outcome, Workload};

/// Watch configuration for Jobs: only those carrying [`LABEL_CRONJOB`] (any value).
pub fn job_watch_config() -> watcher::Config {
    watcher::Config::default().labels(LABEL_CRONJOB)
}

/// What a reconcile reacts to in a Job: a change of any of these triggers its owner, a change of
/// anything else (the Job controller's progress counters, pod counts) does not.
#[derive(Debug, Clone, PartialEq)]
struct Meaning {
    owner: Option<Box<str>>,
    ended: Option<(Outcome, Option<Second>)>,
    completed: Option<Second>,
    deleting: bool,
    ours: bool,
}

impl Meaning {
    fn of(job: &CachedJob) -> Self {
        Self {
            owner: job.owner_uid().map(Into::into),
            ended: job.ended,
            completed: job.completed,
            deleting: job.deleting.is_some(),
            ours: job.run != Run::Unknown,
        }
    }
}

/// A Job by namespace and name. In the index the namespace is shared by every Job in it and
/// the name by the two maps.
type Key = (Arc<str>, Arc<str>);

fn key_of(job: &SlimJob) -> Key {
    let meta = &job.0.metadata;
    (
        meta.namespace.as_deref().unwrap_or_default().into(),
        meta.name.as_deref().unwrap_or_default().into(),
    )
}

fn key(namespace: &str, name: &str) -> Key {
    (namespace.into(), name.into())
}

/// The cached Jobs ([`CachedJob`]: what the readers look at, boxed so the map's spare slots
/// stay small) and, per owner UID, the owner (shared by its Jobs) and the keys of its Jobs.
/// `expected`: the Jobs this process is creating right now (a reconcile waiting for the
/// answer): their watch event, should it come first, triggers no reconcile of the owner, whose
/// reconcile is the one creating them.
#[derive(Debug, Default)]
struct Inner {
    objects: HashMap<Key, Box<CachedJob>>,
    by_owner: HashMap<Box<str>, (Arc<Owner>, Vec<Key>)>,
    namespaces: HashSet<Arc<str>>,
    expected: HashSet<Key>,
}

impl Inner {
    /// Store `job`; true when it is new or its meaning changed.
    fn upsert(&mut self, key: Key, mut job: CachedJob) -> bool {
        let key = match self.objects.get_key_value(&key) {
            Some((kept, _)) => kept.clone(),
            None => (self.namespace(key.0), key.1),
        };
        let meaning = Meaning::of(&job);
        let changed = self
            .objects
            .get(&key)
            .is_none_or(|e| Meaning::of(e) != meaning);
        self.unlink(&key);
        if let Some(owner) = job.owner.as_mut() {
            let (shared, keys) = self
                .by_owner
                .entry(owner.uid.clone())
                .or_insert_with(|| (Arc::clone(owner), Vec::new()));
            if **shared == **owner {
                *owner = Arc::clone(shared);
            }
            keys.push(key.clone());
        }
        self.objects.insert(key, Box::new(job));
        changed
    }

    /// The one copy of `namespace`.
    fn namespace(&mut self, namespace: Arc<str>) -> Arc<str> {
        match self.namespaces.get(&namespace) {
            Some(kept) => Arc::clone(kept),
            None => {
                self.namespaces.insert(Arc::clone(&namespace));
                namespace
            }
        }
    }

    /// Drop `key`; the Job, if it was there.
    fn remove(&mut self, key: &Key) -> Option<Box<CachedJob>> {
        self.unlink(key);
        self.objects.remove(key)
    }

    /// Remove `key` from the owner list it is currently filed under.
    fn unlink(&mut self, key: &Key) {
        let Some(old_owner) = self.objects.get(key).and_then(|j| j.owner_uid()) else {
            return;
        };
        if let Some((_, keys)) = self.by_owner.get_mut(old_owner) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.by_owner.remove(old_owner);
            }
        }
    }
}

/// Read side of the owner index. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OwnerIndex {
    inner: Arc<RwLock<Inner>>,
    ready: watch::Receiver<bool>,
}

/// Write side of the owner index: apply watcher events to it, as a reflector does.
#[derive(Debug)]
pub struct IndexWriter {
    inner: Arc<RwLock<Inner>>,
    ready: watch::Sender<bool>,
    buffer: Option<Vec<(Key, CachedJob)>>,
}

fn read(lock: &RwLock<Inner>) -> RwLockReadGuard<'_, Inner> {
    // A panic while holding the lock cannot leave the maps half-updated in a way that matters
    // more than losing the cache, so keep serving.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write(lock: &RwLock<Inner>) -> RwLockWriteGuard<'_, Inner> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// A new, empty owner index and its writer.
pub fn owner_index() -> (OwnerIndex, IndexWriter) {
    let inner = Arc::new(RwLock::new(Inner::default()));
    let (tx, rx) = watch::channel(false);
    (
        OwnerIndex {
            inner: inner.clone(),
            ready: rx,
        },
        IndexWriter {
            inner,
            ready: tx,
            buffer: None,
        },
    )
}

impl OwnerIndex {
    /// The workloads controlled by the CronJob with UID `owner_uid`, as the plan reads them
    /// ([`CachedJob::to_workload`]). Cost: proportional to that CronJob's workloads, not to the
    /// size of the cache.
    pub fn workloads_of(&self, owner_uid: &str) -> Vec<Arc<Workload>> {
        let inner = read(&self.inner);
        let Some((_, keys)) = inner.by_owner.get(owner_uid) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| {
                inner
                    .objects
                    .get(k)
                    .map(|j| Arc::new(j.to_workload(&k.0, &k.1)))
            })
            .collect()
    }

    /// One cached workload by namespace and name.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Workload>> {
        read(&self.inner)
            .objects
            .get(&key(namespace, name))
            .map(|j| Arc::new(j.to_workload(namespace, name)))
    }

    /// Every cached Job (used when a namespace watch re-lists).
    pub fn snapshot(&self) -> Vec<Arc<SlimJob>> {
        read(&self.inner)
            .objects
            .iter()
            .map(|(k, j)| Arc::new(SlimJob(j.to_job(&k.0, &k.1))))
            .collect()
    }

    /// Number of cached Jobs.
    pub fn len(&self) -> usize {
        read(&self.inner).objects.len()
    }

    /// Whether the cache holds no Job.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A Job this process just created (the API server's answer): known at once, so the next
    /// reconcile sees it even before its watch event, and that event then changes nothing.
    pub fn remember(&self, job: &SlimJob) {
        let key = key_of(job);
        let mut inner = write(&self.inner);
        inner.expected.remove(&key);
        inner.upsert(key, CachedJob::of(&job.0));
    }

    /// The Job `namespace/name` is about to be created by the reconcile of its owner: until
    /// [`OwnerIndex::remember`] or the guard's drop, its watch event (which can come before the
    /// create's answer) is stored without triggering that owner again (upstream's controllers
    /// call this an expectation). A create that fails drops the guard, and later events
    /// trigger as usual.
    pub fn expect_create(&self, namespace: &str, name: &str) -> Expectation {
        let key = key(namespace, name);
        write(&self.inner).expected.insert(key.clone());
        Expectation {
            inner: Arc::clone(&self.inner),
            key,
        }
    }

    /// A Job this process just deleted: forgotten at once, likewise.
    pub fn forget(&self, namespace: &str, name: &str) {
        write(&self.inner).remove(&key(namespace, name));
    }

    /// Whether the initial list has completed.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Wait until the initial list has completed. Returns at once if it has; never returns if
    /// the writer is dropped before that.
    pub async fn wait_until_ready(&self) {
        let mut rx = self.ready.clone();
        if rx.wait_for(|r| *r).await.is_err() {
            futures::future::pending::<()>().await;
        }
    }
}

/// A Job being created: see [`OwnerIndex::expect_create`].
#[derive(Debug)]
#[must_use = "the expectation ends when the guard is dropped"]
pub struct Expectation {
    inner: Arc<RwLock<Inner>>,
    key: Key,
}

impl Drop for Expectation {
    fn drop(&mut self) {
        write(&self.inner).expected.remove(&self.key);
    }
}

impl IndexWriter {
    /// Apply one watcher event, with the reflector's semantics (`Init`..`InitDone` replaces
    /// the whole content atomically at `InitDone`), and return the Jobs whose owners must look
    /// again: those that appeared, vanished or changed their meaning. The first list triggers
    /// nothing: every CronJob is reconciled after its own first list anyway.
    pub fn apply_watcher_event(&mut self, event: &watcher::Event<SlimJob>) -> Vec<SlimJob> {
        match event {
            watcher::Event::Apply(job) => {
                let key = key_of(job);
                let mut inner = write(&self.inner);
                let expected = inner.expected.contains(&key);
                let changed = inner.upsert(key, CachedJob::of(&job.0));
                drop(inner);
                if changed && !expected {
                    vec![job.clone()]
                } else {
                    Vec::new()
                }
            }
            watcher::Event::Delete(job) => match write(&self.inner).remove(&key_of(job)) {
                Some(_) => vec![job.clone()],
                None => Vec::new(),
            },
            watcher::Event::Init => {
                self.buffer = Some(Vec::new());
                Vec::new()
            }
            watcher::Event::InitApply(job) => {
                let entry = (key_of(job), CachedJob::of(&job.0));
                self.buffer.get_or_insert_with(Vec::new).push(entry);
                Vec::new()
            }
            watcher::Event::InitDone => self.swap_in_buffer(),
        }
    }

    /// The end of a (re-)list: the buffered Jobs replace the content at once; the Jobs that
    /// appeared, vanished or changed meaning since, unless this was the first list.
    fn swap_in_buffer(&mut self) -> Vec<SlimJob> {
        let mut fresh = Inner::default();
        let mut changed = Vec::new();
        {
            let current = read(&self.inner);
            for (key, job) in self.buffer.take().unwrap_or_default() {
                let was = current.objects.get(&key).map(|j| Meaning::of(j));
                if was.as_ref() != Some(&Meaning::of(&job)) {
                    changed.push(SlimJob(job.to_job(&key.0, &key.1)));
                }
                fresh.upsert(key, job);
            }
        }
        let mut current = write(&self.inner);
        fresh.expected = std::mem::take(&mut current.expected);
        changed.extend(
            current
                .objects
                .iter()
                .filter(|(key, _)| !fresh.objects.contains_key(*key))
                .map(|(key, job)| SlimJob(job.to_job(&key.0, &key.1))),
        );
        *current = fresh;
        drop(current);
        let first = !*self.ready.borrow();
        self.ready.send_replace(true);
        if first { Vec::new() } else { changed }
    }
}

/// Watch events of one watch, or of several merged ones.
pub type EventResult<K> = Result<watcher::Event<K>, watcher::Error>;

/// Merge one watch per namespace into one event stream that a single store can apply.
///
/// A single watch is passed through untouched. With several, each watch's `Init`..`InitDone`
/// re-list is translated so that it only replaces that namespace's objects: the final
/// `InitDone` of the first full sync becomes one store-wide re-init holding every namespace,
/// and later re-lists of one namespace become a store-wide re-init built from `snapshot()`
/// (the store's current objects) with that namespace's objects replaced.
pub fn merge_watches<K, S>(
    watches: Vec<(String, S)>,
    snapshot: impl Fn() -> Vec<Arc<K>> + Send + 'static,
) -> impl Stream<Item = EventResult<K>> + Send
where
    K: Resource + Lookup + Clone + Send + 'static,
    S: Stream<Item = EventResult<K>> + Send + 'static,
{
    if watches.len() == 1 {
        return stream::select_all(watches.into_iter().map(|(_, s)| s.boxed())).left_stream();
    }
    let namespaces: Vec<String> = watches.iter().map(|(ns, _)| ns.clone()).collect();
    let tagged = stream::select_all(
        watches
            .into_iter()
            .enumerate()
            .map(|(i, (_, s))| s.map(move |ev| (i, ev)).boxed()),
    );
    let mut merger = Merger {
        namespaces,
        buffers: Vec::new(),
        synced: Vec::new(),
        snapshot,
    };
    merger.buffers.resize_with(merger.namespaces.len(), || None);
    merger.synced.resize(merger.namespaces.len(), false);
    tagged
        .map(move |(i, ev)| stream::iter(merger.translate(i, ev)))
        .flatten()
        .right_stream()
}

struct Merger<K, F> {
    namespaces: Vec<String>,
    buffers: Vec<Option<Vec<K>>>,
    synced: Vec<bool>,
    snapshot: F,
}

impl<K, F> Merger<K, F>
where
    K: Resource + Clone,
    F: Fn() -> Vec<Arc<K>>,
{
    fn translate(&mut self, i: usize, ev: EventResult<K>) -> Vec<EventResult<K>> {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => return vec![Err(e)],
        };
        match ev {
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => vec![Ok(ev)],
            watcher::Event::Init => {
                self.buffers[i] = Some(Vec::new());
                Vec::new()
            }
            watcher::Event::InitApply(obj) => {
                self.buffers[i].get_or_insert_with(Vec::new).push(obj);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let fresh = self.buffers[i].take().unwrap_or_default();
                self.synced[i] = true;
                let ns = self.namespaces[i].as_str();
                let current = (self.snapshot)();
                if self.synced.iter().all(|s| *s) {
                    let mut out = Vec::with_capacity(current.len() + fresh.len() + 2);
                    out.push(Ok(watcher::Event::Init));
                    out.extend(
                        current
                            .iter()
                            .filter(|o| o.meta().namespace.as_deref() != Some(ns))
                            .map(|o| Ok(watcher::Event::InitApply(K::clone(o)))),
                    );
                    out.extend(fresh.into_iter().map(|o| Ok(watcher::Event::InitApply(o))));
                    out.push(Ok(watcher::Event::InitDone));
                    out
                } else {
                    // Not every namespace has synced yet: the store is not ready, so update it
                    // object by object.
                    let keep: HashSet<String> =
                        fresh.iter().filter_map(|o| o.meta().name.clone()).collect();
                    let stale = current.iter().filter(|o| {
                        o.meta().namespace.as_deref() == Some(ns)
                            && !o.meta().name.as_ref().is_some_and(|n| keep.contains(n))
                    });
                    stale
                        .map(|o| Ok(watcher::Event::Delete(K::clone(o))))
                        .chain(fresh.into_iter().map(|o| Ok(watcher::Event::Apply(o))))
                        .collect()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{Job, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn job(ns: &str, name: &str, owner: Option<&str>) -> SlimJob {
        SlimJob(Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        api_version: "batch.kronjob.dev/v1".into(),
                        kind: "CronJob".into(),
                        name: "cj".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn a_cached_job_keeps_what_its_readers_read() {
        let (index, mut writer) = owner_index();
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let mut created = job("ns", "a", Some("u1"));
        created.0.spec = Some(Default::default());
        created.0.status = Some(JobStatus {
            active: Some(1),
            ..Default::default()
        });
        writer.apply_watcher_event(&watcher::Event::Apply(created.clone()));
        let cached = index.get("ns", "a").expect("cached");
        assert_eq!(cached.metadata.name, created.0.metadata.name);
        assert_eq!(
            crate::workload::controller_uid(&cached.metadata),
            crate::workload::controller_uid(&created.0.metadata)
        );
        assert_eq!(cached.ttl, None);
        assert_eq!(cached.finish, None);
        assert_eq!(index.workloads_of("u1").len(), 1);
    }

    fn names(mut jobs: Vec<Arc<Workload>>) -> Vec<String> {
        let mut v: Vec<String> = jobs
            .drain(..)
            .filter_map(|j| j.metadata.name.clone())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn index_follows_apply_delete_and_owner_changes() {
        let (index, mut w) = owner_index();
        w.apply_watcher_event(&watcher::Event::Apply(job("ns", "a", Some("u1"))));
        w.apply_watcher_event(&watcher::Event::Apply(job("ns", "b", Some("u1"))));
        w.apply_watcher_event(&watcher::Event::Apply(job("ns", "c", None)));
        assert_eq!(names(index.workloads_of("u1")), ["a", "b"]);
        // Owner changes: re-filed.
        w.apply_watcher_event(&watcher::Event::Apply(job("ns", "b", Some("u2"))));
        assert_eq!(names(index.workloads_of("u1")), ["a"]);
        assert_eq!(names(index.workloads_of("u2")), ["b"]);
        w.apply_watcher_event(&watcher::Event::Delete(job("ns", "a", Some("u1"))));
        assert!(index.workloads_of("u1").is_empty());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn the_finish_and_the_completion_time_trigger_the_owner_and_pod_counts_do_not() {
        use k8s_openapi::api::batch::v1::JobCondition;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let at = |s: &str| Some(Time(s.parse().expect("a time")));
        let (_, mut w) = owner_index();
        let apply = |j: &SlimJob| watcher::Event::Apply(j.clone());
        let mut j = job("ns", "cj-1", Some("u1"));
        assert_eq!(w.apply_watcher_event(&apply(&j)).len(), 1, "new");
        let status = j.0.status.get_or_insert_with(Default::default);
        status.active = Some(1);
        assert!(w.apply_watcher_event(&apply(&j)).is_empty(), "pod counts");
        let status = j.0.status.get_or_insert_with(Default::default);
        status.conditions = Some(vec![JobCondition {
            type_: "Complete".into(),
            status: "True".into(),
            last_transition_time: at("2026-11-27T20:08:02Z"),
            ..Default::default()
        }]);
        assert_eq!(w.apply_watcher_event(&apply(&j)).len(), 1, "finished");
        let status = j.0.status.get_or_insert_with(Default::default);
        status.completion_time = at("2026-11-27T20:08:01Z");
        assert_eq!(w.apply_watcher_event(&apply(&j)).len(), 1, "completionTime");
        assert!(
            w.apply_watcher_event(&apply(&j)).is_empty(),
            "the same again"
        );
    }

    #[test]
    fn a_job_being_created_does_not_trigger_its_owner_again() {
        let (index, mut w) = owner_index();
        let created = job("ns", "cj-1", Some("u1"));
        let apply = |j: &SlimJob| watcher::Event::Apply(j.clone());
        {
            let _creating = index.expect_create("ns", "cj-1");
            // The watch event before the create's answer: stored, no trigger.
            assert!(w.apply_watcher_event(&apply(&created)).is_empty());
            assert_eq!(names(index.workloads_of("u1")), ["cj-1"]);
            // Another Job of the same owner still triggers.
            let other = job("ns", "cj-2", Some("u1"));
            assert_eq!(w.apply_watcher_event(&apply(&other)), [other]);
            index.remember(&created);
        }
        // The expectation is over: a change of meaning triggers as usual.
        let mut finished = created.clone();
        finished.0.metadata.owner_references = None;
        assert_eq!(w.apply_watcher_event(&apply(&finished)), [finished]);
        // A create that failed (guard dropped, nothing remembered): its event triggers.
        drop(index.expect_create("ns", "cj-3"));
        let late = job("ns", "cj-3", Some("u1"));
        assert_eq!(w.apply_watcher_event(&apply(&late)), [late]);
    }

    #[test]
    fn an_expectation_outlives_a_relist() {
        let (index, mut w) = owner_index();
        let _creating = index.expect_create("ns", "cj-1");
        w.apply_watcher_event(&watcher::Event::Init);
        w.apply_watcher_event(&watcher::Event::InitDone);
        let created = job("ns", "cj-1", Some("u1"));
        assert!(
            w.apply_watcher_event(&watcher::Event::Apply(created))
                .is_empty()
        );
    }

    #[test]
    fn relist_replaces_content_and_marks_ready() {
        let (index, mut w) = owner_index();
        w.apply_watcher_event(&watcher::Event::Apply(job("ns", "old", Some("u1"))));
        assert!(!index.is_ready());
        w.apply_watcher_event(&watcher::Event::Init);
        w.apply_watcher_event(&watcher::Event::InitApply(job("ns", "new", Some("u1"))));
        // Not swapped before InitDone.
        assert_eq!(names(index.workloads_of("u1")), ["old"]);
        w.apply_watcher_event(&watcher::Event::InitDone);
        assert_eq!(names(index.workloads_of("u1")), ["new"]);
        assert!(index.is_ready());
    }

    #[tokio::test]
    async fn merged_namespace_relist_keeps_other_namespaces() {
        let (index, writer) = owner_index();
        let writer = Arc::new(std::sync::Mutex::new(writer));
        let ev = |e: watcher::Event<SlimJob>| -> EventResult<SlimJob> { Ok(e) };
        let a = stream::iter(vec![
            ev(watcher::Event::Init),
            ev(watcher::Event::InitApply(job("a", "a1", Some("u")))),
            ev(watcher::Event::InitDone),
        ]);
        let b = stream::iter(vec![
            ev(watcher::Event::Init),
            ev(watcher::Event::InitApply(job("b", "b1", Some("u")))),
            ev(watcher::Event::InitDone),
            // A later re-list of b drops b1 and adds b2; a1 must survive.
            ev(watcher::Event::Init),
            ev(watcher::Event::InitApply(job("b", "b2", Some("u")))),
            ev(watcher::Event::InitDone),
        ]);
        let snap = index.clone();
        let merged = merge_watches(
            vec![("a".to_string(), a.boxed()), ("b".to_string(), b.boxed())],
            move || snap.snapshot(),
        );
        let w = writer.clone();
        merged
            .for_each(|e| {
                if let Ok(e) = &e {
                    w.lock().expect("lock").apply_watcher_event(e);
                }
                futures::future::ready(())
            })
            .await;
        assert!(index.is_ready());
        assert_eq!(names(index.workloads_of("u")), ["a1", "b2"]);
    }
}
