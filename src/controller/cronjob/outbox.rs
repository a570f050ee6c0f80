//! Writes that can wait: Events and history deletes. A reconcile puts them in a bounded queue
//! and never waits for them; background workers send them when the urgent lane is idle
//! ([`Gate`]), so at a slot the Job creates go first. A full queue drops the newest work and
//! counts it (an Event is lost; a history delete is planned again by the next reconcile).
//!
//! An Event the API server refuses because its namespace is being deleted marks that namespace
//! for [`TERMINATING_QUIET`]: Events for it are dropped meanwhile instead of each costing a
//! refused create (a namespace of thousands of CronJobs being deleted would otherwise get one
//! per Job the deletion takes away).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::PropagationPolicy;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc::{self, Receiver, Sender};
use tokio_util::sync::CancellationToken;

use super::plan::events;
use super::writer::Key;
use crate::api::CronJob;
use crate::backoff::retry_delay;
use crate::controller::events::Recorder;
use crate::controller::owner_index::OwnerIndex;
use crate::controller::priority::Gate;
use crate::controller::workloads::{Resolved, WorkloadApi};
use crate::telemetry::Throttle;
use crate::workload::Deletion;

/// Work items held at most (a slot of 10,000 CronJobs queues 10,000 Events, ~0.25 KB each);
/// beyond, new ones are dropped and counted.
pub const CAPACITY: usize = 32_768;

/// How long Events for a namespace being deleted are dropped after the API server said so;
/// then one is tried again.
pub const TERMINATING_QUIET: Duration = Duration::from_secs(60);

/// One piece of deferred work. A slot queues an Event per CronJob, so it is kept small: the
/// CronJob's reference without the apiVersion and kind every one shares, the Event's reason a
/// constant; the `ObjectReference` and the Event are made when it is sent.
enum Work {
    /// Publish an Event on a CronJob.
    Event {
        on: About,
        type_: EventType,
        reason: &'static str,
        note: Box<str>,
    },
    /// Delete a finished workload beyond the history limits (background propagation, UID
    /// precondition), then say so on the CronJob.
    DeleteHistory {
        cronjob: About,
        kind: Arc<Resolved>,
        name: Box<str>,
        uid: Box<str>,
    },
}

/// A CronJob, as an Event refers to it.
struct About {
    namespace: Option<Box<str>>,
    name: Option<Box<str>>,
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
}

impl About {
    fn of(cronjob: &ObjectReference) -> Self {
        let boxed = |s: &Option<String>| s.as_deref().map(Box::from);
        About {
            namespace: boxed(&cronjob.namespace),
            name: boxed(&cronjob.name),
            uid: boxed(&cronjob.uid),
            resource_version: boxed(&cronjob.resource_version),
        }
    }

    fn reference(&self) -> ObjectReference {
        let string = |s: &Option<Box<str>>| s.as_deref().map(String::from);
        ObjectReference {
            api_version: Some(CronJob::api_version(&()).into_owned()),
            kind: Some(CronJob::kind(&()).into_owned()),
            namespace: string(&self.namespace),
            name: string(&self.name),
            uid: string(&self.uid),
            resource_version: string(&self.resource_version),
            field_path: None,
        }
    }
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    tx: Sender<Work>,
    dropped: Counter,
    /// UIDs of history Jobs queued or being deleted, so a second reconcile does not queue the
    /// same delete again.
    deleting: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("dropped", &self.dropped.get())
            .finish_non_exhaustive()
    }
}

/// The workers: the queue and what sending its work needs.
pub struct Workers {
    rx: Receiver<Work>,
    shared: Shared,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers").finish_non_exhaustive()
    }
}

/// An Event of the reconciler (action `Reconcile`).
fn reconcile_event(type_: EventType, reason: &str, note: String) -> Event {
    Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    }
}

/// A new outbox holding at most `capacity` items ([`CAPACITY`] in the controller) and its
/// workers. `dropped` counts work lost to a full queue, `deleted` the history Jobs deleted;
/// failed deletes ask `reconcile` for a new reconcile of their CronJob after a backoff.
#[allow(clippy::too_many_arguments)]
pub fn outbox(
    capacity: usize,
    client: Client,
    recorder: Recorder,
    index: OwnerIndex,
    gate: Gate,
    reconcile: UnboundedSender<Key>,
    dropped: Counter,
    deleted: Counter,
) -> (Outbox, Workers) {
    // tokio's channel: its bound is exact (a futures channel adds a slot per sender clone).
    let (tx, rx) = mpsc::channel(capacity.max(1));
    let deleting = Arc::new(Mutex::new(HashSet::new()));
    (
        Outbox {
            tx,
            dropped,
            deleting: Arc::clone(&deleting),
        },
        Workers {
            rx,
            shared: Shared {
                client,
                recorder,
                index,
                gate,
                reconcile,
                deleting,
                deleted,
                log: Arc::new(Throttle::default()),
                terminating: Mutex::default(),
                quiet_for: TERMINATING_QUIET,
            },
        },
    )
}

impl Outbox {
    fn send(&self, work: Work) -> bool {
        if self.tx.try_send(work).is_err() {
            self.dropped.inc();
            return false;
        }
        true
    }

    /// Publish `reason`/`note` on `cronjob` (a CronJob's reference), later.
    pub fn event(
        &self,
        cronjob: &ObjectReference,
        type_: EventType,
        reason: &'static str,
        note: String,
    ) {
        self.send(Work::Event {
            on: About::of(cronjob),
            type_,
            reason,
            note: note.into(),
        });
    }

    /// Delete the history workload `name` (UID `uid`, of `kind`) of `cronjob`, later; once per
    /// workload.
    pub fn delete_history(
        &self,
        cronjob: &ObjectReference,
        kind: Arc<Resolved>,
        name: String,
        uid: Option<String>,
    ) {
        let Some(uid) = uid else { return };
        if !self
            .deleting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid.clone())
        {
            return;
        }
        let work = Work::DeleteHistory {
            cronjob: About::of(cronjob),
            kind,
            name: name.into(),
            uid: uid.as_str().into(),
        };
        if !self.send(work) {
            self.deleting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&uid);
        }
    }
}

impl Workers {
    /// Drop Events for a namespace being deleted for `quiet` instead of [`TERMINATING_QUIET`].
    #[cfg(test)]
    fn quiet_for(mut self, quiet: Duration) -> Self {
        self.shared.quiet_for = quiet;
        self
    }

    /// Run `concurrency` workers until `stop`; then send what is queued for at most `flush`.
    pub async fn run(self, concurrency: usize, stop: CancellationToken, flush: Duration) {
        let this = Arc::new(self.shared);
        let mut rx = self.rx;
        let work = {
            let this = Arc::clone(&this);
            let stop = stop.clone();
            futures::stream::unfold(
                &mut rx,
                |rx| async move { rx.recv().await.map(|w| (w, rx)) },
            )
            .take_until(stop.cancelled_owned())
            .for_each_concurrent(concurrency.max(1), move |item| {
                let this = Arc::clone(&this);
                async move {
                    this.gate.background().await;
                    this.perform(item).await;
                }
            })
        };
        work.await;
        rx.close();
        let drain = async {
            while let Some(item) = rx.recv().await {
                this.perform(item).await;
            }
        };
        let _ = tokio::time::timeout(flush, drain).await;
    }
}

/// What sending the outbox's work needs, shared by the workers.
struct Shared {
    client: Client,
    recorder: Recorder,
    index: OwnerIndex,
    gate: Gate,
    reconcile: UnboundedSender<Key>,
    deleting: Arc<Mutex<HashSet<String>>>,
    deleted: Counter,
    log: Arc<Throttle>,
    /// Namespaces being deleted, and when the API server said so.
    terminating: Mutex<std::collections::HashMap<String, tokio::time::Instant>>,
    /// [`TERMINATING_QUIET`] (shorter in tests).
    quiet_for: Duration,
}

impl Shared {
    async fn perform(&self, work: Work) {
        match work {
            Work::Event {
                on,
                type_,
                reason,
                note,
            } => {
                let event = reconcile_event(type_, reason, note.into());
                self.publish(&on.reference(), &event).await;
            }
            Work::DeleteHistory {
                cronjob,
                kind,
                name,
                uid,
            } => {
                let cronjob = cronjob.reference();
                let namespace = cronjob.namespace.clone().unwrap_or_default();
                self.delete(&cronjob, &kind, &namespace, &name, &uid).await;
                self.deleting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&*uid);
            }
        }
    }

    async fn publish(&self, on: &ObjectReference, event: &Event) {
        let namespace = on.namespace.as_deref().unwrap_or_default();
        if self.quiet(namespace) {
            return;
        }
        match self.recorder.publish(event, on).await {
            Ok(()) => {}
            Err(e) if crate::client::namespace_terminating(&e) => {
                tracing::debug!(
                    namespace,
                    "namespace being deleted: its Events are dropped for a while"
                );
                self.lock_terminating()
                    .insert(namespace.to_string(), tokio::time::Instant::now());
            }
            Err(e) => {
                if let Some(skipped) = self.log.allow("event") {
                    tracing::warn!(error = %e, reason = %event.reason, skipped, "failed to publish an Event");
                }
            }
        }
    }

    /// Whether `namespace` was found being deleted less than [`TERMINATING_QUIET`] ago.
    fn quiet(&self, namespace: &str) -> bool {
        let mut terminating = self.lock_terminating();
        if terminating.is_empty() {
            return false;
        }
        terminating.retain(|_, since| since.elapsed() < self.quiet_for);
        terminating.contains_key(namespace)
    }

    fn lock_terminating(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, tokio::time::Instant>> {
        self.terminating.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn delete(
        &self,
        cronjob: &ObjectReference,
        kind: &Resolved,
        namespace: &str,
        name: &str,
        uid: &str,
    ) {
        let api = WorkloadApi::new(self.client.clone(), namespace, kind);
        let noun = kind.type_.noun();
        let deleted = api
            .delete(name, Some(uid), PropagationPolicy::Background)
            .await;
        let (type_, reason, note) = match deleted {
            // Gone already, or the name now belongs to another Job: nothing to delete.
            Ok(Deletion::Gone | Deletion::Replaced) => return,
            Ok(Deletion::Deleted) => {
                self.deleted.inc();
                self.index.forget(&kind.type_, namespace, name);
                (
                    EventType::Normal,
                    events::SUCCESSFUL_DELETE,
                    format!("Deleted {noun} {name}"),
                )
            }
            Err(e) => {
                // Plan again later: the Job is still there, so the next reconcile deletes it.
                if let (Some(name), Some(ns)) = (cronjob.name.clone(), cronjob.namespace.clone()) {
                    let retry = self.reconcile.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(retry_delay(1)).await;
                        let _ = retry.unbounded_send(ObjectRef::new(&name).within(&ns));
                    });
                }
                (
                    EventType::Warning,
                    events::FAILED_DELETE,
                    format!("Deleted {noun}: {e}"),
                )
            }
        };
        self.publish(cronjob, &reconcile_event(type_, reason, note))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::owner_index::owner_index;
    use crate::testing::api_script::{Expect, mock_client};
    use http::StatusCode;

    #[tokio::test]
    async fn events_for_a_namespace_being_deleted_cost_one_refusal_per_quiet_period() {
        let (client, script) = mock_client();
        let events = "/apis/events.k8s.io/v1/namespaces/gone/events";
        let refused = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "code": 403, "reason": "Forbidden",
            "message": "unable to create new content in namespace gone because it is being terminated",
            "details": {"causes": [{"reason": "NamespaceTerminating",
                                    "message": "namespace gone is being terminated",
                                    "field": "metadata.namespace"}]}
        });
        // The first Event is refused; the next two are dropped; a minute later one is tried.
        let server = script.run(vec![
            Expect::post(events).reply(StatusCode::FORBIDDEN, refused.clone()),
            Expect::post(events).reply(StatusCode::FORBIDDEN, refused),
        ]);
        let recorder = crate::controller::recorder(client.clone(), None);
        let (reconcile, _requests) = futures::channel::mpsc::unbounded();
        let (outbox, workers) = outbox(
            16,
            client,
            recorder,
            owner_index().0,
            Gate::new(),
            reconcile,
            Counter::default(),
            Counter::default(),
        );
        let quiet = Duration::from_millis(300);
        let stop = CancellationToken::new();
        let workers = workers.quiet_for(quiet);
        let run = tokio::spawn(workers.run(1, stop.clone(), Duration::from_secs(1)));
        let on = ObjectReference {
            name: Some("cj".into()),
            namespace: Some("gone".into()),
            ..Default::default()
        };
        for i in 0..3 {
            outbox.event(&on, EventType::Normal, "R", format!("note {i}"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(quiet).await;
        outbox.event(&on, EventType::Normal, "R", "once quiet".into());
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.cancel();
        run.await.expect("workers");
        drop(outbox);
        server.await.expect("requests as scripted");
    }

    #[tokio::test]
    async fn the_queue_holds_exactly_its_capacity_and_counts_what_it_drops() {
        let (service, _api) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let client = Client::new(service, "default");
        let recorder = crate::controller::recorder(client.clone(), None);
        let (reconcile, _requests) = futures::channel::mpsc::unbounded();
        let dropped = Counter::default();
        let (outbox, _workers) = outbox(
            3,
            client,
            recorder,
            owner_index().0,
            Gate::new(),
            reconcile,
            dropped.clone(),
            Counter::default(),
        );
        let on = ObjectReference {
            name: Some("cj".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        };
        for i in 0..5 {
            outbox
                .clone()
                .event(&on, EventType::Normal, "R", format!("note {i}"));
        }
        assert_eq!(dropped.get(), 2, "five Events, room for three");
        outbox.delete_history(
            &on,
            Arc::new(crate::controller::workloads::Resolved::job()),
            "job".into(),
            Some("uid".into()),
        );
        assert_eq!(dropped.get(), 3);
        assert!(
            outbox.deleting.lock().expect("lock").is_empty(),
            "a dropped delete is not remembered as queued"
        );
    }
}
