//! Status writes: at most one per change, after the slot's creates, and never backwards.
//!
//! A reconcile does not write status itself. It [`submit`](StatusWriter::submit)s the status it
//! planned; background workers write it when the urgent lane is idle ([`Gate`]), as a merge
//! patch on `/status` that carries the `resourceVersion` the plan was based on, so the API
//! server refuses it (409) when the object changed meanwhile: a reconcile that ran on a stale
//! cache, or a deposed leader, can never overwrite newer status. On a conflict the writer reads
//! the CronJob fresh and asks for a new reconcile.
//!
//! Reconciles read CronJobs through [`view`](StatusWriter::view): the cached object, unless what
//! this process submitted, is writing or wrote is newer than the cache (its watch lags behind
//! our own writes). So a reconcile right after a write plans from the written status and finds
//! nothing to do, instead of writing the same status again on top of a stale copy.
//! Several submissions for one CronJob before its write coalesce into one write.
//!
//! A spec patch this process makes elsewhere (the failure policy's suspension) is made known
//! with [`superseded`](StatusWriter::superseded): views show the patched CronJob until the
//! watch does, and the status planned on it carries the patched version as precondition.
//!
//! What it keeps of a write is the answer's `resourceVersion` and status, not the answer (a
//! whole CronJob with its managedFields), and only until the watch shows that version
//! ([`observed`](StatusWriter::observed)).
//!
//! It also keeps, per CronJob, the latest slot this process ran ([`ran`](StatusWriter::ran))
//! until the API server stores a `lastScheduleTime` at least as late: whatever happens to the
//! status that records it (a write that waits, one refused with a conflict and dropped for a
//! fresh read, one coalesced with the next), every [`view`](StatusWriter::view) says the slot
//! ran, so the plan never runs it again, even once its Job is deleted.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::plan::Records;
use super::status::StatusPatch;
use crate::api::CronJobStatus;
use crate::backoff::retry_delay;
use crate::controller::cache::CachedCronJob;
use crate::controller::cache::status::Status;
use crate::controller::priority::Gate;
use crate::telemetry::Throttle;

/// Longest wait before a failed write is tried again: an outage never delays a status write
/// much past the API server's return.
pub const MAX_RETRY: Duration = Duration::from_secs(5);
/// Superseded resourceVersions remembered per CronJob (the cache lags by a few at most).
const STALE_KEPT: usize = 8;

/// A CronJob, as the controller's channels and maps name it.
pub type Key = ObjectRef<CachedCronJob>;

/// `key` without the resourceVersion and UID an `ObjectRef` made from an object carries
/// (neither counts in comparisons): the maps keep ~0.1 KB less per CronJob.
fn bare(key: &Key) -> Key {
    let name = ObjectRef::new(&key.name);
    match &key.namespace {
        Some(ns) => name.within(ns),
        None => name,
    }
}

/// A status to write, and the `resourceVersion` it was planned from (the precondition).
#[derive(Debug, Clone)]
struct Pending {
    base: Option<String>,
    status: Status,
    attempts: u32,
    /// The lane it is queued in (a CronJob is queued once per lane, however often it is
    /// submitted).
    queued: Option<Lane>,
}

/// What is newer than the cache: the version and status we wrote, the object read fresh
/// after a conflict, or the answer to our spec patch. The cache showing one of the `stale` versions lags behind it; a watch
/// event showing any other version makes it moot.
#[derive(Debug)]
struct Known {
    newer: Newer,
    stale: Vec<String>,
}

#[derive(Debug)]
enum Newer {
    /// Our write: its answer's version and status (the rest of the object is the cache's;
    /// the status boxed, as it is most of the size).
    Written {
        resource_version: Option<String>,
        status: Option<Box<Status>>,
    },
    /// Read after a conflict (someone else changed it), or the answer to a write of ours
    /// outside the status writer (the failure policy's spec patch): the whole object.
    Read(Arc<CachedCronJob>),
}

impl Newer {
    /// `self`, which superseded `older`: a written status over a whole object is that object
    /// with the written version and status.
    fn onto(self, older: Newer) -> Newer {
        match (self, older) {
            (
                Newer::Written {
                    resource_version,
                    status,
                },
                Newer::Read(base),
            ) => {
                let mut object = CachedCronJob::clone(&base);
                object.metadata.resource_version = resource_version;
                object.status = status.map(|s| *s);
                Newer::Read(Arc::new(object))
            }
            (newer, _) => newer,
        }
    }
}

impl Known {
    fn resource_version(&self) -> Option<&str> {
        match &self.newer {
            Newer::Written {
                resource_version, ..
            } => resource_version.as_deref(),
            Newer::Read(cj) => cj.metadata.resource_version.as_deref(),
        }
    }

    /// `cached` (a version in `stale`) brought up to what is known.
    fn over(&self, cached: &Arc<CachedCronJob>) -> Arc<CachedCronJob> {
        match &self.newer {
            Newer::Written {
                resource_version,
                status,
            } => {
                let mut view = CachedCronJob::clone(cached);
                view.metadata.resource_version.clone_from(resource_version);
                view.status = status.as_deref().cloned();
                Arc::new(view)
            }
            Newer::Read(fresh) => Arc::clone(fresh),
        }
    }
}

/// The latest slot this process ran for a CronJob (of this UID), not yet stored.
#[derive(Debug, Clone)]
struct Ran {
    uid: Option<String>,
    slot: Timestamp,
}

/// The slots a backfill of this process ran for a CronJob (of this UID), not yet stored.
#[derive(Debug, Clone)]
struct Backfilled {
    uid: Option<String>,
    from: Timestamp,
    through: Timestamp,
}

/// A CronJob as a reconcile sees it ([`StatusWriter::view`]).
#[derive(Debug, Clone)]
pub struct View {
    /// The freshest copy this process knows, with its unwritten status over it.
    pub cronjob: Arc<CachedCronJob>,
    /// What this process knows of its slots beyond that copy.
    pub records: Records,
}

/// Which statuses are written first: those that record a slot this process ran (while one is
/// unwritten, its Job is the only record that the slot ran, and a crash then could let it run
/// again; kronjob also keeps that Job from being deleted meanwhile), then the rest (a namespace
/// of thousands of CronJobs whose statuses change at once must not hold those back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Records,
    Others,
}

#[derive(Debug, Default)]
struct State {
    known: HashMap<Key, Known>,
    ran: HashMap<Key, Ran>,
    /// The latest queued slot this process started, per CronJob, until a stored status no
    /// longer queues it.
    dequeued: HashMap<Key, Ran>,
    /// The slots `[from, through]` a backfill of this process ran, per CronJob, until a
    /// stored status no longer lists any of them in `status.missed`.
    backfilled: HashMap<Key, Backfilled>,
    /// Boxed: at a slot every CronJob has one, and the map's spare slots stay small.
    pending: HashMap<Key, Box<Pending>>,
    writing: HashMap<Key, Box<Pending>>,
    /// Statuses that record a slot, then the others (see [`Lane`]).
    records: VecDeque<Key>,
    others: VecDeque<Key>,
}

impl State {
    /// Forget the slot run for `key` once the API server stores `stored` (of a CronJob with
    /// `uid`) at least as late, or the CronJob is another one of the same name.
    fn settle(&mut self, key: &Key, uid: Option<&str>, stored: Option<Timestamp>) {
        if let Some(ran) = self.ran.get(key)
            && (ran.uid.as_deref() != uid || stored.is_some_and(|s| s >= ran.slot))
        {
            self.ran.remove(key);
        }
    }

    /// Forget the queued slot started for `key` once the stored CronJob (`stored`) no longer
    /// queues it (and is of after its queueing: its `lastScheduleTime` is at least the slot),
    /// or is another one of the same name.
    fn settle_dequeued(&mut self, key: &Key, stored: &CachedCronJob) {
        if let Some(d) = self.dequeued.get(key)
            && (d.uid.as_deref() != stored.metadata.uid.as_deref()
                || (!stored.queues_through(d.slot)
                    && stored.last_schedule_time().is_some_and(|l| l >= d.slot)))
        {
            self.dequeued.remove(key);
        }
    }

    /// Forget the backfilled slots of `key` once the stored CronJob (`stored`) lists none of
    /// them as missed, or is another one of the same name.
    fn settle_backfilled(&mut self, key: &Key, stored: &CachedCronJob) {
        if let Some(b) = self.backfilled.get(key) {
            let other = b.uid.as_deref() != stored.metadata.uid.as_deref();
            let gaps =
                crate::workload::backfill::missed_of(&stored.metadata, stored.status_fields());
            let recorded = crate::workload::backfill::subtract(&gaps, b.from, b.through) == gaps;
            if other || recorded {
                self.backfilled.remove(key);
            }
        }
    }

    /// The freshest stored copy of `cached` we know: the cache's, unless what we wrote (or
    /// read after a conflict) is newer.
    fn stored(&mut self, key: &Key, cached: Arc<CachedCronJob>) -> Arc<CachedCronJob> {
        let Some(known) = self.known.get(key) else {
            return cached;
        };
        let rv = cached.resource_version();
        if rv.as_ref().is_some_and(|rv| known.stale.contains(rv)) {
            return known.over(&cached);
        }
        // The cache caught up with what we know, or moved past it.
        self.known.remove(key);
        cached
    }

    /// Queue the pending status of `key`, unless it is queued (in its lane, or in the records'
    /// lane) or being written. A status records a slot while this process ran one for the
    /// CronJob that the API server does not store yet.
    fn enqueue(&mut self, key: Key) {
        if self.writing.contains_key(&key) {
            return;
        }
        let lane = if self.ran.contains_key(&key) || self.backfilled.contains_key(&key) {
            Lane::Records
        } else {
            Lane::Others
        };
        if let Some(p) = self.pending.get_mut(&key)
            && p.queued != Some(lane)
            && p.queued != Some(Lane::Records)
        {
            p.queued = Some(lane);
            match lane {
                Lane::Records => self.records.push_back(key),
                Lane::Others => self.others.push_back(key),
            }
        }
    }

    /// Record that `newer` is the CronJob now, superseding `base_rv` (and whatever `base_rv`
    /// itself superseded). A status written on top of a whole object we know (read after a
    /// conflict, or our spec patch's answer) goes into that object: the cache's older copy
    /// has neither its spec nor its metadata.
    fn learn(&mut self, key: &Key, base_rv: Option<String>, newer: Newer) {
        let (mut stale, newer) = match self.known.remove(key) {
            Some(old) if old.resource_version() == base_rv.as_deref() => {
                (old.stale, newer.onto(old.newer))
            }
            _ => (Vec::new(), newer),
        };
        stale.extend(base_rv);
        if stale.len() > STALE_KEPT {
            stale.drain(..stale.len() - STALE_KEPT);
        }
        self.known.insert(bare(key), Known { newer, stale });
    }
}

/// The status writer; cheap to clone.
#[derive(Clone)]
pub struct StatusWriter {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    gate: Gate,
    state: Mutex<State>,
    work: Notify,
    reconcile: UnboundedSender<Key>,
    log: Throttle,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("StatusWriter")
            .field("pending", &state.pending.len())
            .field("writing", &state.writing.len())
            .field("known", &state.known.len())
            .finish()
    }
}

impl StatusWriter {
    /// A writer whose conflicts ask `reconcile` for a new reconcile of the CronJob.
    pub fn new(client: Client, gate: Gate, reconcile: UnboundedSender<Key>) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                gate,
                state: Mutex::default(),
                work: Notify::new(),
                reconcile,
                log: Throttle::default(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The freshest copy of `cached` this process knows: the cache's, unless what we wrote
    /// (or read after a conflict) is newer; with our submitted or in-flight status over it;
    /// and what we know of its slots beyond it.
    pub fn view(&self, cached: Arc<CachedCronJob>) -> View {
        let key = ObjectRef::from_obj(cached.as_ref());
        let mut state = self.state();
        let stored = state.stored(&key, cached);
        let stored_last = stored.last_schedule_time();
        state.settle(&key, stored.metadata.uid.as_deref(), stored_last);
        state.settle_dequeued(&key, &stored);
        state.settle_backfilled(&key, &stored);
        let records = Records {
            ran: state.ran.get(&key).map(|r| r.slot),
            stored: stored.recorded_through(),
            dequeued: state.dequeued.get(&key).map(|r| r.slot),
            backfilled: state.backfilled.get(&key).map(|b| (b.from, b.through)),
        };
        let mut view = stored;
        let unwritten = state.pending.get(&key).or_else(|| state.writing.get(&key));
        if let Some(p) = unwritten
            && p.base.as_deref() == view.metadata.resource_version.as_deref()
        {
            let mut overlaid = CachedCronJob::clone(&view);
            overlaid.status = Some(p.status.clone());
            view = Arc::new(overlaid);
        }
        View {
            cronjob: view,
            records,
        }
    }

    /// The latest slot the status of `cached` records as run, as the API server stores it
    /// (`status.lastScheduleTime`, queued slots left out: [`CachedCronJob::recorded_through`]):
    /// the cache's, unless what we wrote (or read after a conflict) is newer.
    pub fn stored_last_schedule(&self, cached: Arc<CachedCronJob>) -> Option<Timestamp> {
        let key = ObjectRef::from_obj(cached.as_ref());
        self.state().stored(&key, cached).recorded_through()
    }

    /// This process started the queued `slot` of the CronJob `key` (UID `uid`): its Job was
    /// created, or found. Remembered until a stored status no longer queues it.
    pub fn dequeued(&self, key: &Key, uid: Option<&str>, slot: Timestamp) {
        let mut state = self.state();
        let later = state
            .dequeued
            .get(key)
            .is_none_or(|r| r.uid.as_deref() != uid || r.slot < slot);
        if later {
            let uid = uid.map(String::from);
            state.dequeued.insert(bare(key), Ran { uid, slot });
        }
    }

    /// A backfill of this process ran the slots `[from, slot]` of the CronJob `key` (UID
    /// `uid`): the Job of `slot` was created, or found. Remembered until a stored status lists
    /// none of them as missed.
    pub fn backfilled(&self, key: &Key, uid: Option<&str>, from: Timestamp, slot: Timestamp) {
        let mut state = self.state();
        let through = match state.backfilled.get(key) {
            Some(b) if b.uid.as_deref() == uid && b.from == from => b.through.max(slot),
            _ => slot,
        };
        let uid = uid.map(String::from);
        state
            .backfilled
            .insert(bare(key), Backfilled { uid, from, through });
    }

    /// This process ran `slot` of the CronJob `key` (UID `uid`): its Job was created, or
    /// found. Remembered until the API server stores a status that records it.
    pub fn ran(&self, key: &Key, uid: Option<&str>, slot: Timestamp) {
        let mut state = self.state();
        let later = state
            .ran
            .get(key)
            .is_none_or(|r| r.uid.as_deref() != uid || r.slot < slot);
        if later {
            let uid = uid.map(String::from);
            state.ran.insert(bare(key), Ran { uid, slot });
        }
    }

    /// `object`, which this process wrote outside the status writer (a spec patch, its answer
    /// decoded as the cache decodes), supersedes the version `before` (that of a view): a
    /// cache still showing `before`, or a version `before` superseded, lags behind it.
    pub fn superseded(&self, key: &Key, before: Option<String>, object: Arc<CachedCronJob>) {
        self.state().learn(key, before, Newer::Read(object));
    }

    /// The watch shows `cj`: what we knew newer than an older version of it is moot once the
    /// cache holds any version that is not one of those it superseded.
    pub fn observed(&self, cj: &CachedCronJob) {
        let key = ObjectRef::from_obj(cj);
        let mut state = self.state();
        if !state.ran.is_empty() {
            state.settle(&key, cj.metadata.uid.as_deref(), cj.last_schedule_time());
        }
        if !state.dequeued.is_empty() {
            state.settle_dequeued(&key, cj);
        }
        if !state.backfilled.is_empty() {
            state.settle_backfilled(&key, cj);
        }
        let Some(known) = state.known.get(&key) else {
            return;
        };
        let stale = cj
            .metadata
            .resource_version
            .as_ref()
            .is_some_and(|rv| known.stale.contains(rv));
        if !stale {
            state.known.remove(&key);
        }
    }

    /// Write `status` for the CronJob whose [`view`](Self::view) had `resource_version`;
    /// replaces any status submitted for it and not yet written.
    pub fn submit(&self, key: Key, resource_version: Option<String>, status: CronJobStatus) {
        let key = bare(&key);
        let status = Status::new(status, &key.name, key.namespace.as_deref());
        let mut state = self.state();
        let (attempts, queued) = state
            .pending
            .get(&key)
            .map_or((0, None), |p| (p.attempts, p.queued));
        state.pending.insert(
            key.clone(),
            Box::new(Pending {
                base: resource_version,
                status,
                attempts,
                queued,
            }),
        );
        state.enqueue(key);
        drop(state);
        self.inner.work.notify_one();
    }

    /// What is remembered, by kind: (statuses not yet written, versions newer than the
    /// cache).
    pub fn remembered(&self) -> (usize, usize) {
        let state = self.state();
        (state.pending.len() + state.writing.len(), state.known.len())
    }

    /// Statuses submitted or being written, not yet done.
    pub fn unwritten(&self) -> usize {
        let state = self.state();
        state.pending.len() + state.writing.len()
    }

    /// Forget everything about CronJobs the cache no longer holds (`cached` gives the cached
    /// copy), and what we knew newer than a cache that has caught up since.
    pub fn prune(&self, cached: impl Fn(&Key) -> Option<Arc<CachedCronJob>>) {
        let mut state = self.state();
        state.known.retain(|k, known| {
            cached(k).is_some_and(|cj| {
                cj.metadata
                    .resource_version
                    .as_ref()
                    .is_some_and(|rv| known.stale.contains(rv))
            })
        });
        state.pending.retain(|k, _| cached(k).is_some());
        state.ran.retain(|k, _| cached(k).is_some());
        state.dequeued.retain(|k, _| cached(k).is_some());
        state.backfilled.retain(|k, _| cached(k).is_some());
    }

    fn next(&self) -> Option<(Key, Pending)> {
        let mut state = self.state();
        // A key queued in both lanes is written at its first turn; its second finds nothing.
        while let Some(key) = state
            .records
            .pop_front()
            .or_else(|| state.others.pop_front())
        {
            if let Some(mut p) = state.pending.remove(&key) {
                p.queued = None;
                state.writing.insert(key.clone(), p.clone());
                return Some((key, *p));
            }
        }
        None
    }

    /// Run `workers` writers until `stop`; then write what is still pending for at most
    /// `flush` and return.
    pub async fn run(self, workers: usize, stop: CancellationToken, flush: Duration) {
        let all = (0..workers.max(1)).map(|_| self.clone().work(stop.clone()));
        futures::future::join_all(all).await;
        let drain = async {
            while let Some((key, p)) = self.next() {
                self.write(key, p).await;
            }
        };
        let _ = tokio::time::timeout(flush, drain).await;
    }

    async fn work(self, stop: CancellationToken) {
        loop {
            let notified = self.inner.work.notified();
            let Some((key, pending)) = self.next() else {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = notified => continue,
                }
            };
            tokio::select! {
                () = stop.cancelled() => {
                    // Put it back for the flush.
                    let mut state = self.state();
                    state.writing.remove(&key);
                    state.pending.entry(key.clone()).or_insert(Box::new(pending));
                    state.enqueue(key);
                    return;
                }
                () = self.inner.gate.background() => {}
            }
            self.write(key, pending).await;
        }
    }

    /// Write one status and learn the outcome.
    async fn write(&self, key: Key, pending: Pending) {
        let name = key.name.clone();
        let namespace = key.namespace.clone().unwrap_or_default();
        let api: Api<CachedCronJob> = Api::namespaced(self.inner.client.clone(), &namespace);
        let status = pending.status.to_status(&name, key.namespace.as_deref());
        let body = StatusPatch::new(&status, pending.base.as_deref());
        let result = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await;
        let retry = match result {
            Ok(written) => {
                let mut state = self.state();
                state.writing.remove(&key);
                let uid = written.metadata.uid.as_deref();
                state.settle(&key, uid, written.last_schedule_time());
                let new_rv = written.metadata.resource_version;
                let newer = Newer::Written {
                    resource_version: new_rv.clone(),
                    status: written.status.map(Box::new),
                };
                state.learn(&key, pending.base.clone(), newer);
                // A status planned on top of the one just written was based on its version.
                if let Some(next) = state.pending.get_mut(&key)
                    && next.base == pending.base
                {
                    next.base = new_rv;
                }
                None
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                // Someone else wrote (a spec edit, another replica): plan again on a fresh copy.
                match api.get_opt(&name).await {
                    Ok(Some(fresh)) => {
                        let mut state = self.state();
                        state.writing.remove(&key);
                        state.pending.remove(&key);
                        state.learn(&key, pending.base.clone(), Newer::Read(Arc::new(fresh)));
                    }
                    Ok(None) => self.forget(&key),
                    Err(_) => {
                        let mut state = self.state();
                        state.writing.remove(&key);
                    }
                }
                let _ = self.inner.reconcile.unbounded_send(key.clone());
                None
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                self.forget(&key);
                None
            }
            Err(kube::Error::Api(s)) if s.code < 500 && s.code != 429 => {
                if self.inner.log.allow("rejected").is_some() {
                    tracing::warn!(cronjob = %key, error = %s, "the API server refused the status; not retried until the next change");
                }
                self.state().writing.remove(&key);
                None
            }
            Err(e) => {
                if let Some(skipped) = self.inner.log.allow("write") {
                    tracing::warn!(cronjob = %key, error = %crate::telemetry::error_chain(&e), skipped, "status write failed; retrying");
                }
                Some(pending)
            }
        };
        if let Some(mut failed) = retry {
            failed.attempts += 1;
            let delay = retry_delay(failed.attempts).min(MAX_RETRY);
            {
                let mut state = self.state();
                state.writing.remove(&key);
                // A newer submission wins over the failed one.
                state.pending.entry(key.clone()).or_insert(Box::new(failed));
            }
            let writer = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                writer.state().enqueue(key);
                writer.inner.work.notify_one();
            });
            return;
        }
        let mut state = self.state();
        if state.pending.contains_key(&key) {
            state.enqueue(key);
            drop(state);
            self.inner.work.notify_one();
        }
    }

    fn forget(&self, key: &Key) {
        let mut state = self.state();
        state.writing.remove(key);
        state.pending.remove(key);
        state.known.remove(key);
        state.ran.remove(key);
        state.dequeued.remove(key);
        state.backfilled.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;

    fn answer(rv: &str, active_count: i32) -> Response<Body> {
        let cronjob = serde_json::json!({
            "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
            "metadata": {"name": "cj", "namespace": "ns", "resourceVersion": rv},
            "spec": {"schedule": "* * * * *", "jobTemplate": {}},
            "status": {"activeCount": active_count},
        });
        Response::new(Body::from(serde_json::to_vec(&cronjob).expect("JSON")))
    }

    type Api = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    async fn next(
        api: &mut Api,
    ) -> (
        Request<Body>,
        tower_test::mock::SendResponse<Response<Body>>,
    ) {
        tokio::time::timeout(Duration::from_secs(2), api.next_request())
            .await
            .expect("a request")
            .expect("client alive")
    }

    #[tokio::test]
    async fn a_status_that_records_a_slot_is_written_before_those_queued_ahead_of_it() {
        let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let (reconcile, _requests) = futures::channel::mpsc::unbounded();
        let writer = StatusWriter::new(Client::new(service, "default"), Gate::new(), reconcile);
        for name in ["a", "b"] {
            writer.submit(
                ObjectRef::new(name).within("ns"),
                Some("5".into()),
                Default::default(),
            );
        }
        let slot: Timestamp = "2024-01-01T10:00:00Z".parse().expect("time");
        let key = ObjectRef::new("cj").within("ns");
        writer.ran(&key, Some("uid"), slot);
        writer.submit(key, Some("5".into()), Default::default());
        let stop = CancellationToken::new();
        let run = tokio::spawn(writer.clone().run(1, stop.clone(), Duration::from_secs(1)));
        let mut order = Vec::new();
        for _ in 0..3 {
            let (request, send) = next(&mut api).await;
            let path = request.uri().path().to_string();
            order.push(path.rsplit('/').nth(1).unwrap_or_default().to_string());
            send.send_response(answer("6", 0));
        }
        assert_eq!(order, ["cj", "a", "b"]);
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("the writers stop")
            .expect("no panic");
    }

    /// A cached CronJob at `rv` whose status records `last` and queues `queued`.
    fn cached(rv: &str, last: &str, queued: &[&str]) -> Arc<CachedCronJob> {
        let cronjob = serde_json::json!({
            "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
            "metadata": {"name": "cj", "namespace": "ns", "uid": "uid", "resourceVersion": rv},
            "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Enqueue", "jobTemplate": {}},
            "status": {"lastScheduleTime": last, "queued": queued},
        });
        Arc::new(serde_json::from_str(&cronjob.to_string()).expect("a CronJob"))
    }

    #[tokio::test]
    async fn a_dequeued_slot_is_remembered_until_a_stored_status_no_longer_queues_it() {
        let (service, _api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let (reconcile, _requests) = futures::channel::mpsc::unbounded();
        let writer = StatusWriter::new(Client::new(service, "default"), Gate::new(), reconcile);
        let key = ObjectRef::new("cj").within("ns");
        let t = |s: &str| s.parse::<Timestamp>().expect("time");
        const S1: &str = "2024-01-01T10:01:00Z";
        const S2: &str = "2024-01-01T10:02:00Z";
        let queued = cached("5", S2, &[S1, S2]);
        // Nothing dequeued: the queue's oldest slot bounds what the status records.
        let view = writer.view(queued.clone());
        assert_eq!(view.records.dequeued, None);
        assert!(view.records.stored < Some(t(S1)));
        writer.dequeued(&key, Some("uid"), t(S1));
        assert_eq!(writer.view(queued.clone()).records.dequeued, Some(t(S1)));
        // A version from before the slot was queued does not settle it.
        writer.observed(&cached("4", "2024-01-01T10:00:00Z", &[]));
        assert_eq!(writer.view(queued.clone()).records.dequeued, Some(t(S1)));
        // A stored status without it does.
        let stored = cached("6", S2, &[S2]);
        writer.observed(&stored);
        let view = writer.view(stored);
        assert_eq!(view.records.dequeued, None);
        assert!(view.records.stored >= Some(t(S1)) && view.records.stored < Some(t(S2)));
    }

    /// A cached CronJob at `rv` whose status records `missed` as `status.missed`.
    fn missing(rv: &str, missed: serde_json::Value) -> Arc<CachedCronJob> {
        let cronjob = serde_json::json!({
            "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
            "metadata": {"name": "cj", "namespace": "ns", "uid": "uid", "resourceVersion": rv,
                "creationTimestamp": "2024-01-01T09:00:00Z"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {}},
            "status": {"lastScheduleTime": "2024-01-01T10:00:00Z", "missed": missed},
        });
        Arc::new(serde_json::from_str(&cronjob.to_string()).expect("a CronJob"))
    }

    #[tokio::test]
    async fn backfilled_slots_are_remembered_until_a_stored_status_no_longer_lists_them() {
        let (service, _api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let (reconcile, _requests) = futures::channel::mpsc::unbounded();
        let writer = StatusWriter::new(Client::new(service, "default"), Gate::new(), reconcile);
        let key = ObjectRef::new("cj").within("ns");
        let t = |s: &str| s.parse::<Timestamp>().expect("time");
        let gap = serde_json::json!([{"after": "2024-01-01T09:30:00Z", "before": "2024-01-01T09:40:00Z"}]);
        let before = missing("5", gap.clone());
        assert_eq!(writer.view(before.clone()).records.backfilled, None);
        let (from, s1, s2) = (
            t("2024-01-01T09:31:00Z"),
            t("2024-01-01T09:31:00Z"),
            t("2024-01-01T09:32:00Z"),
        );
        writer.backfilled(&key, Some("uid"), from, s1);
        writer.backfilled(&key, Some("uid"), from, s2);
        assert_eq!(
            writer.view(before.clone()).records.backfilled,
            Some((from, s2)),
            "the range grows"
        );
        // A version that still lists them does not settle it.
        writer.observed(&missing("6", gap));
        assert_eq!(
            writer.view(before.clone()).records.backfilled,
            Some((from, s2))
        );
        // A stored status without them does.
        let stored = missing(
            "7",
            serde_json::json!([{"after": "2024-01-01T09:32:00Z", "before": "2024-01-01T09:40:00Z"}]),
        );
        writer.observed(&stored);
        assert_eq!(writer.view(stored).records.backfilled, None);
    }

    #[tokio::test]
    async fn submissions_before_the_write_coalesce_into_one_patch_of_the_last_status() {
        let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let (reconcile, _requests) = futures::channel::mpsc::unbounded();
        let writer = StatusWriter::new(Client::new(service, "default"), Gate::new(), reconcile);
        let key = ObjectRef::new("cj").within("ns");
        let status = |n| CronJobStatus {
            active_count: n,
            ..Default::default()
        };
        for n in 1..=3 {
            writer.submit(key.clone(), Some("5".into()), status(n));
        }
        assert_eq!(writer.unwritten(), 1);
        let stop = CancellationToken::new();
        let run = tokio::spawn(writer.clone().run(4, stop.clone(), Duration::from_secs(1)));
        let (request, send) = next(&mut api).await;
        assert_eq!(request.method(), http::Method::PATCH);
        assert_eq!(
            request.uri().path(),
            "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/cj/status"
        );
        let body = request.into_body().collect_bytes().await.expect("body");
        let patch: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(
            patch["status"]["activeCount"], 3,
            "the last status submitted"
        );
        assert_eq!(patch["metadata"]["resourceVersion"], "5");
        send.send_response(answer("6", 3));
        assert!(
            tokio::time::timeout(Duration::from_millis(300), api.next_request())
                .await
                .is_err(),
            "one write for three submissions"
        );
        // A submission after the write is written on top of it.
        writer.submit(key.clone(), Some("6".into()), status(4));
        let (request, send) = next(&mut api).await;
        let body = request.into_body().collect_bytes().await.expect("body");
        let patch: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(patch["status"]["activeCount"], 4);
        assert_eq!(patch["metadata"]["resourceVersion"], "6");
        send.send_response(answer("7", 4));
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("the writers stop")
            .expect("no panic");
        assert_eq!(writer.unwritten(), 0);
    }
}
