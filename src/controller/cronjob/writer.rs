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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::status::status_patch;
use crate::api::{CronJob, CronJobStatus};
use crate::backoff::retry_delay;
use crate::controller::gate::Gate;
use crate::telemetry::Throttle;

/// Longest wait before a failed write is tried again: an outage never delays a status write
/// much past the API server's return.
pub const MAX_RETRY: Duration = Duration::from_secs(5);
/// Superseded resourceVersions remembered per CronJob (the cache lags by a few at most).
const STALE_KEPT: usize = 8;

type Key = ObjectRef<CronJob>;

/// A status to write, and the object it was planned from (its `resourceVersion` is the
/// precondition).
#[derive(Debug, Clone)]
struct Pending {
    base: Arc<CronJob>,
    status: CronJobStatus,
    attempts: u32,
}

/// An object newer than the cache: written by us or read fresh after a conflict. The cache
/// showing one of the `stale` versions lags behind it.
#[derive(Debug)]
struct Known {
    object: Arc<CronJob>,
    stale: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    known: HashMap<Key, Known>,
    pending: HashMap<Key, Pending>,
    writing: HashMap<Key, Pending>,
    queue: VecDeque<Key>,
    queued: HashSet<Key>,
}

impl State {
    fn enqueue(&mut self, key: Key) {
        if !self.writing.contains_key(&key) && self.queued.insert(key.clone()) {
            self.queue.push_back(key);
        }
    }

    /// Record that `object` is the CronJob now, superseding `base_rv` (and whatever `base_rv`
    /// itself superseded).
    fn learn(&mut self, key: &Key, base_rv: Option<String>, object: Arc<CronJob>) {
        let mut stale = match self.known.remove(key) {
            Some(old) if old.object.resource_version() == base_rv => old.stale,
            _ => Vec::new(),
        };
        stale.extend(base_rv);
        if stale.len() > STALE_KEPT {
            stale.drain(..stale.len() - STALE_KEPT);
        }
        self.known.insert(key.clone(), Known { object, stale });
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

fn with_status(object: &CronJob, status: &CronJobStatus) -> CronJob {
    let mut out = object.clone();
    out.status = Some(status.clone());
    out
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

    /// The freshest copy of `cached` this process knows: the cache's, unless our own submitted,
    /// in-flight or written status is newer.
    pub fn view(&self, cached: Arc<CronJob>) -> Arc<CronJob> {
        let key = ObjectRef::from_obj(cached.as_ref());
        let mut state = self.state();
        let rv = cached.resource_version();
        let mut view = cached;
        if let Some(known) = state.known.get(&key) {
            if rv.as_ref().is_some_and(|rv| known.stale.contains(rv)) {
                view = Arc::clone(&known.object);
            } else {
                // The cache caught up with what we know, or moved past it.
                state.known.remove(&key);
            }
        }
        let unwritten = state.pending.get(&key).or_else(|| state.writing.get(&key));
        if let Some(p) = unwritten
            && p.base.resource_version() == view.resource_version()
        {
            view = Arc::new(with_status(&view, &p.status));
        }
        view
    }

    /// `object`, which this process wrote outside the status writer (a spec patch), supersedes
    /// `before` (a view): a cache still showing `before` lags behind it.
    pub fn superseded(&self, before: &CronJob, object: Arc<CronJob>) {
        let key = ObjectRef::from_obj(before);
        self.state().learn(&key, before.resource_version(), object);
    }

    /// Write `status` for the CronJob `view` (as returned by [`Self::view`]); replaces any
    /// status submitted for it and not yet written.
    pub fn submit(&self, view: &CronJob, status: CronJobStatus) {
        let key = ObjectRef::from_obj(view);
        let mut state = self.state();
        // The precondition is the object's version without our unwritten overlay: a view built
        // from an unwritten status keeps that status's base version.
        let base = match state.pending.get(&key).or_else(|| state.writing.get(&key)) {
            Some(p) if p.base.resource_version() == view.resource_version() => Arc::clone(&p.base),
            _ => Arc::new(view.clone()),
        };
        let attempts = state.pending.get(&key).map_or(0, |p| p.attempts);
        state.pending.insert(
            key.clone(),
            Pending {
                base,
                status,
                attempts,
            },
        );
        state.enqueue(key);
        drop(state);
        self.inner.work.notify_one();
    }

    /// Statuses submitted or being written, not yet done.
    pub fn unwritten(&self) -> usize {
        let state = self.state();
        state.pending.len() + state.writing.len()
    }

    /// Forget everything about CronJobs for which `exists` is false (deleted ones).
    pub fn retain(&self, exists: impl Fn(&Key) -> bool) {
        let mut state = self.state();
        state.known.retain(|k, _| exists(k));
        state.pending.retain(|k, _| exists(k));
    }

    fn next(&self) -> Option<(Key, Pending)> {
        let mut state = self.state();
        while let Some(key) = state.queue.pop_front() {
            state.queued.remove(&key);
            if let Some(p) = state.pending.remove(&key) {
                state.writing.insert(key.clone(), p.clone());
                return Some((key, p));
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
                    state.pending.entry(key.clone()).or_insert(pending);
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
        let base = &pending.base;
        let name = base.name_any();
        let namespace = base.namespace().unwrap_or_default();
        let api: Api<CronJob> = Api::namespaced(self.inner.client.clone(), &namespace);
        let mut body = status_patch(&pending.status);
        body["metadata"] = serde_json::json!({ "resourceVersion": base.resource_version() });
        let result = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await;
        let retry = match result {
            Ok(written) => {
                let mut state = self.state();
                state.writing.remove(&key);
                let new_rv = written.resource_version();
                state.learn(&key, base.resource_version(), Arc::new(written));
                // A status planned on top of the one just written was based on its version.
                if let Some(next) = state.pending.get_mut(&key)
                    && next.base.resource_version() == base.resource_version()
                {
                    let mut rebased = (*next.base).clone();
                    rebased.metadata.resource_version = new_rv;
                    next.base = Arc::new(rebased);
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
                        state.learn(&key, base.resource_version(), Arc::new(fresh));
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
                state.pending.entry(key.clone()).or_insert(failed);
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
    }
}
