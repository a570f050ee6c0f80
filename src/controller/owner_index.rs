//! The owner index: a cache of the workloads kronjob created (Jobs, and objects of every kind
//! a CronJob names), indexed by the UID of the CronJob that controls them, so one reconcile
//! reads only its own workloads whatever the number of objects in the cluster.
//!
//! The index is fed by one watch of Jobs (label selector [`LABEL_CRONJOB`], so unrelated Jobs
//! never reach it), decoded slim ([`SlimJob`]), and by one watch per other kind a CronJob names
//! ([`crate::controller::workloads`]), each read through its kind's rule; each workload is
//! kept as a [`CachedJob`] (~0.3 KB: what the plan reads of it). The Job watch also triggers
//! the CronJob controller and, in the manager, hands the TTL controller its finished Jobs.
//! With several namespaces, one Job watch per namespace is merged by [`merge_watches`], which
//! keeps each watch's re-list from wiping the others; a watch of another kind has a writer of
//! its own ([`OwnerIndex::writer`]), whose re-list replaces that kind's objects in that
//! namespace only.

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
use crate::workload::{Outcome, Workload, WorkloadType};

/// Watch configuration for workloads: only those carrying [`LABEL_CRONJOB`] (any value).
pub fn job_watch_config() -> watcher::Config {
    watcher::Config::default().labels(LABEL_CRONJOB)
}

/// What a reconcile reacts to in a workload: a change of any of these triggers its owner, a
/// change of anything else (a Job controller's progress counters, pod counts) does not.
#[derive(Debug, Clone, PartialEq)]
struct Meaning {
    owner: Option<Box<str>>,
    ended: Option<(Outcome, Option<Second>)>,
    completed: Option<Second>,
    deleting: bool,
    ours: bool,
    raw: Option<Arc<str>>,
}

impl Meaning {
    fn of(job: &CachedJob, raw: Option<&Arc<str>>) -> Self {
        Self {
            owner: job.owner_uid().map(Into::into),
            ended: job.ended,
            completed: job.completed,
            deleting: job.deleting.is_some(),
            ours: job.run != Run::Unknown,
            raw: raw.cloned(),
        }
    }
}

/// What the index keeps of one workload: the record, and for a kind without a rule what a
/// completion rule reads of it.
type Entry = (CachedJob, Option<Arc<str>>);

fn entry_of(workload: &Workload) -> Entry {
    (CachedJob::of_workload(workload), workload.raw.clone())
}

/// Which kind a cached workload is: its place in the index's list of kinds (batch/v1 Job is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KindId(u16);

impl KindId {
    /// batch/v1 Job.
    pub const JOB: KindId = KindId(0);
}

/// A namespace and a kind: where a workload is. In the index one copy is shared by every
/// workload of that kind in that namespace, so a key costs a pointer for both.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Space {
    namespace: Box<str>,
    kind: KindId,
}

/// A workload by namespace and kind, and name. In the index the space is shared by every
/// workload in it and the name by the two maps.
type Key = (Arc<Space>, Arc<str>);

fn key(namespace: &str, name: &str, kind: KindId) -> Key {
    let space = Space {
        namespace: namespace.into(),
        kind,
    };
    (Arc::new(space), name.into())
}

fn job_key(job: &SlimJob) -> Key {
    let meta = &job.0.metadata;
    key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        KindId::JOB,
    )
}

/// The cached workloads ([`CachedJob`]: what the readers look at, boxed so the map's spare
/// slots stay small), what completion rules read of those of kinds without a rule (`raws`;
/// never a Job's), per owner UID the owner (shared by its workloads) and the keys of its
/// workloads, and the kinds (a [`KindId`] is an index into `kinds`).
/// `expected`: the workloads this process is creating right now (a reconcile waiting for the
/// answer): their watch event, should it come first, triggers no reconcile of the owner, whose
/// reconcile is the one creating them.
#[derive(Debug)]
struct Inner {
    objects: HashMap<Key, Box<CachedJob>>,
    raws: HashMap<Key, Arc<str>>,
    by_owner: HashMap<Box<str>, (Arc<Owner>, Vec<Key>)>,
    spaces: HashSet<Arc<Space>>,
    expected: HashSet<Key>,
    kinds: Vec<Arc<WorkloadType>>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            objects: HashMap::default(),
            raws: HashMap::default(),
            by_owner: HashMap::default(),
            spaces: HashSet::default(),
            expected: HashSet::default(),
            kinds: vec![WorkloadType::job()],
        }
    }
}

impl Inner {
    /// Store `job`; true when it is new or its meaning changed.
    fn upsert(&mut self, key: Key, (mut job, raw): Entry) -> bool {
        let key = match self.objects.get_key_value(&key) {
            Some((kept, _)) => kept.clone(),
            None => (self.space(key.0), key.1),
        };
        let meaning = Meaning::of(&job, raw.as_ref());
        let changed = self
            .objects
            .get(&key)
            .is_none_or(|e| Meaning::of(e, self.raws.get(&key)) != meaning);
        match raw {
            Some(raw) => {
                self.raws.insert(key.clone(), raw);
            }
            None => {
                if !self.raws.is_empty() {
                    self.raws.remove(&key);
                }
            }
        }
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

    /// The one copy of `space`.
    fn space(&mut self, space: Arc<Space>) -> Arc<Space> {
        match self.spaces.get(&space) {
            Some(kept) => Arc::clone(kept),
            None => {
                self.spaces.insert(Arc::clone(&space));
                space
            }
        }
    }

    /// The id of `type_`, added to the kinds if new.
    fn kind(&mut self, type_: &WorkloadType) -> KindId {
        let at = match self.kinds.iter().position(|k| **k == *type_) {
            Some(at) => at,
            None => {
                self.kinds.push(Arc::new(type_.clone()));
                self.kinds.len() - 1
            }
        };
        KindId(u16::try_from(at).unwrap_or(u16::MAX))
    }

    /// The id of `type_`, if it has one.
    fn kind_of(&self, type_: &WorkloadType) -> Option<KindId> {
        let at = self.kinds.iter().position(|k| **k == *type_)?;
        u16::try_from(at).ok().map(KindId)
    }

    /// The workload at `key`, as the plan reads it.
    fn workload(&self, key: &Key, job: &CachedJob) -> Workload {
        let type_ = self
            .kinds
            .get(usize::from(key.0.kind.0))
            .cloned()
            .unwrap_or_else(WorkloadType::job);
        job.to_workload(&key.0.namespace, &key.1, type_, self.raws.get(key).cloned())
    }

    /// Drop `key`; the workload, if it was there.
    fn remove(&mut self, key: &Key) -> Option<Box<CachedJob>> {
        self.unlink(key);
        if !self.raws.is_empty() {
            self.raws.remove(key);
        }
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

/// Write side of the owner index for one watch: apply its events, as a reflector does. The
/// Job watch's writer covers every Job; another kind's covers that kind in one namespace (or
/// all), and its re-list replaces only those.
#[derive(Debug)]
pub struct IndexWriter {
    inner: Arc<RwLock<Inner>>,
    ready: Option<watch::Sender<bool>>,
    kind: KindId,
    namespace: Option<Arc<str>>,
    buffer: Option<Vec<(Key, Entry)>>,
    listed: bool,
}

fn read(lock: &RwLock<Inner>) -> RwLockReadGuard<'_, Inner> {
    // A panic while holding the lock cannot leave the maps half-updated in a way that matters
    // more than losing the cache, so keep serving.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write(lock: &RwLock<Inner>) -> RwLockWriteGuard<'_, Inner> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// A new, empty owner index and the writer of its Job watch.
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
            ready: Some(tx),
            kind: KindId::JOB,
            namespace: None,
            buffer: None,
            listed: false,
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
            .filter_map(|k| inner.objects.get(k).map(|j| Arc::new(inner.workload(k, j))))
            .collect()
    }

    /// One cached workload of `type_` by namespace and name.
    pub fn get(&self, type_: &WorkloadType, namespace: &str, name: &str) -> Option<Arc<Workload>> {
        let inner = read(&self.inner);
        let key = key(namespace, name, inner.kind_of(type_)?);
        inner
            .objects
            .get(&key)
            .map(|j| Arc::new(inner.workload(&key, j)))
    }

    /// Every cached Job (used when a namespace watch re-lists).
    pub fn snapshot(&self) -> Vec<Arc<SlimJob>> {
        read(&self.inner)
            .objects
            .iter()
            .filter(|(k, _)| k.0.kind == KindId::JOB)
            .map(|(k, j)| Arc::new(SlimJob(j.to_job(&k.0.namespace, &k.1))))
            .collect()
    }

    /// Number of cached workloads.
    pub fn len(&self) -> usize {
        read(&self.inner).objects.len()
    }

    /// Whether the cache holds no workload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A workload this process just created or read (the API server's answer): known at once,
    /// so the next reconcile sees it even before its watch event, and that event then changes
    /// nothing.
    pub fn remember(&self, workload: &Workload) {
        let mut inner = write(&self.inner);
        let kind = inner.kind(&workload.type_);
        let key = key(
            workload.metadata.namespace.as_deref().unwrap_or_default(),
            workload.name(),
            kind,
        );
        inner.expected.remove(&key);
        inner.upsert(key, entry_of(workload));
    }

    /// The workload `namespace/name` of `type_` is about to be created by the reconcile of its
    /// owner: until [`OwnerIndex::remember`] or the guard's drop, its watch event (which can
    /// come before the create's answer) is stored without triggering that owner again
    /// (upstream's controllers call this an expectation). A create that fails drops the guard,
    /// and later events trigger as usual.
    pub fn expect_create(&self, type_: &WorkloadType, namespace: &str, name: &str) -> Expectation {
        let mut inner = write(&self.inner);
        let key = key(namespace, name, inner.kind(type_));
        inner.expected.insert(key.clone());
        Expectation {
            inner: Arc::clone(&self.inner),
            key,
        }
    }

    /// A workload this process just deleted: forgotten at once, likewise.
    pub fn forget(&self, type_: &WorkloadType, namespace: &str, name: &str) {
        let mut inner = write(&self.inner);
        if let Some(kind) = inner.kind_of(type_) {
            inner.remove(&key(namespace, name, kind));
        }
    }

    /// A writer for a watch of `type_` in `namespace` (`None`: every namespace): its events go
    /// in the index, its re-list replaces that kind's workloads in that namespace only.
    pub fn writer(&self, type_: &WorkloadType, namespace: Option<&str>) -> IndexWriter {
        let kind = write(&self.inner).kind(type_);
        IndexWriter {
            inner: Arc::clone(&self.inner),
            ready: None,
            kind,
            namespace: namespace.map(Into::into),
            buffer: None,
            listed: false,
        }
    }

    /// Drop every cached workload of `type_` (its watch stopped, or its kind is gone); the
    /// owners of those that were there.
    pub fn forget_kind(&self, type_: &WorkloadType) -> Vec<Arc<Owner>> {
        let mut inner = write(&self.inner);
        let Some(kind) = inner.kind_of(type_) else {
            return Vec::new();
        };
        let keys: Vec<Key> = inner
            .objects
            .keys()
            .filter(|k| k.0.kind == kind)
            .cloned()
            .collect();
        keys.iter()
            .filter_map(|k| inner.remove(k).and_then(|j| j.owner))
            .collect()
    }

    /// Whether the Job watch's initial list has completed.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Wait until the Job watch's initial list has completed. Returns at once if it has; never
    /// returns if the writer is dropped before that.
    pub async fn wait_until_ready(&self) {
        let mut rx = self.ready.clone();
        if rx.wait_for(|r| *r).await.is_err() {
            futures::future::pending::<()>().await;
        }
    }
}

/// A workload being created: see [`OwnerIndex::expect_create`].
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
    /// Apply one event of the Job watch, with the reflector's semantics (`Init`..`InitDone`
    /// replaces the whole content atomically at `InitDone`), and return the Jobs whose owners
    /// must look again: those that appeared, vanished or changed their meaning. The first list
    /// triggers nothing: every CronJob is reconciled after its own first list anyway.
    pub fn apply_watcher_event(&mut self, event: &watcher::Event<SlimJob>) -> Vec<SlimJob> {
        let entry = |job: &SlimJob| (job_key(job), (CachedJob::of(&job.0), None));
        let changed = self.apply(map_event(event, entry));
        match event {
            // The Job as the watch sent it.
            watcher::Event::Apply(job) | watcher::Event::Delete(job) => {
                changed.into_iter().map(|_| job.clone()).collect()
            }
            _ => changed
                .into_iter()
                .map(|(key, job)| SlimJob(job.to_job(&key.0.namespace, &key.1)))
                .collect(),
        }
    }

    /// Apply one event of a workload watch, each object read as `read` says, and return the
    /// owners that must look again (as [`IndexWriter::apply_watcher_event`] does for Jobs).
    pub fn apply_workload_event<K>(
        &mut self,
        event: &watcher::Event<K>,
        read: impl Fn(&K) -> Workload,
    ) -> Vec<(Arc<str>, Arc<Owner>)> {
        let kind = self.kind;
        let entry = |object: &K| {
            let workload = read(object);
            let key = key(
                workload.metadata.namespace.as_deref().unwrap_or_default(),
                workload.name(),
                kind,
            );
            (key, entry_of(&workload))
        };
        let changed = self.apply(map_event(event, entry));
        changed
            .into_iter()
            .filter_map(|(key, job)| Some((Arc::from(&*key.0.namespace), job.owner?)))
            .collect()
    }

    /// Apply `event` (its objects already keyed and read), returning what changed meaning.
    fn apply(&mut self, event: watcher::Event<(Key, Entry)>) -> Vec<(Key, CachedJob)> {
        match event {
            watcher::Event::Apply((key, entry)) => {
                let job = entry.0.clone();
                let mut inner = write(&self.inner);
                let expected = inner.expected.contains(&key);
                let changed = inner.upsert(key.clone(), entry);
                drop(inner);
                if changed && !expected {
                    vec![(key, job)]
                } else {
                    Vec::new()
                }
            }
            watcher::Event::Delete((key, (job, _))) => match write(&self.inner).remove(&key) {
                Some(_) => vec![(key, job)],
                None => Vec::new(),
            },
            watcher::Event::Init => {
                self.buffer = Some(Vec::new());
                Vec::new()
            }
            watcher::Event::InitApply(entry) => {
                self.buffer.get_or_insert_with(Vec::new).push(entry);
                Vec::new()
            }
            watcher::Event::InitDone => self.swap_in_buffer(),
        }
    }

    /// Whether `key` is one this writer's watch covers.
    fn covers(&self, key: &Key) -> bool {
        key.0.kind == self.kind
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| **ns == *key.0.namespace)
    }

    /// The end of a (re-)list: the buffered workloads replace those this writer covers at once;
    /// the workloads that appeared, vanished or changed meaning since, unless this was the
    /// first list.
    fn swap_in_buffer(&mut self) -> Vec<(Key, CachedJob)> {
        let mut changed = Vec::new();
        let fresh = self.buffer.take().unwrap_or_default();
        let mut inner = write(&self.inner);
        let fresh_keys: HashSet<&Key> = fresh.iter().map(|(k, _)| k).collect();
        let gone: Vec<Key> = inner
            .objects
            .keys()
            .filter(|k| self.covers(k) && !fresh_keys.contains(k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(job) = inner.remove(&key) {
                changed.push((key, *job));
            }
        }
        for (key, entry) in fresh {
            let was = inner
                .objects
                .get(&key)
                .map(|j| Meaning::of(j, inner.raws.get(&key)));
            if was.as_ref() != Some(&Meaning::of(&entry.0, entry.1.as_ref())) {
                changed.push((key.clone(), entry.0.clone()));
            }
            inner.upsert(key, entry);
        }
        drop(inner);
        let first = !self.listed;
        self.listed = true;
        if let Some(ready) = &self.ready {
            ready.send_replace(true);
        }
        if first { Vec::new() } else { changed }
    }

    /// Whether this writer's watch has listed.
    pub fn is_listed(&self) -> bool {
        self.listed
    }
}

/// `event` with each object made into what `f` makes of it.
fn map_event<K, T>(event: &watcher::Event<K>, f: impl Fn(&K) -> T) -> watcher::Event<T> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
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
        let cached = index.get(&WorkloadType::job(), "ns", "a").expect("cached");
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
            let _creating = index.expect_create(&WorkloadType::job(), "ns", "cj-1");
            // The watch event before the create's answer: stored, no trigger.
            assert!(w.apply_watcher_event(&apply(&created)).is_empty());
            assert_eq!(names(index.workloads_of("u1")), ["cj-1"]);
            // Another Job of the same owner still triggers.
            let other = job("ns", "cj-2", Some("u1"));
            assert_eq!(w.apply_watcher_event(&apply(&other)), [other]);
            index.remember(&Workload::of_job(&created.0));
        }
        // The expectation is over: a change of meaning triggers as usual.
        let mut finished = created.clone();
        finished.0.metadata.owner_references = None;
        assert_eq!(w.apply_watcher_event(&apply(&finished)), [finished]);
        // A create that failed (guard dropped, nothing remembered): its event triggers.
        drop(index.expect_create(&WorkloadType::job(), "ns", "cj-3"));
        let late = job("ns", "cj-3", Some("u1"));
        assert_eq!(w.apply_watcher_event(&apply(&late)), [late]);
    }

    #[test]
    fn an_expectation_outlives_a_relist() {
        let (index, mut w) = owner_index();
        let _creating = index.expect_create(&WorkloadType::job(), "ns", "cj-1");
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
