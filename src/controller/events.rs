//! Publishing Events (`events.k8s.io/v1`) the way client-go's events recorder does: a repeat of
//! an Event within six minutes (same type, reason, action, note, regarding and related object)
//! is counted on the first one's `series` (a PATCH) instead of making a new Event; an Event
//! whose note differs is an Event of its own.
//!
//! kube-runtime's `Recorder` leaves the note out of what makes two Events the same, so every
//! `SuccessfulCreate` of a CronJob within six minutes of the previous one was counted on the
//! first, and the note a user saw kept naming the first Job created, however many came after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Client, ResourceExt};

/// How long a published Event is remembered: a repeat within this (of the last time it was
/// seen) is counted on it.
pub const CACHE_TTL: SignedDuration = SignedDuration::from_mins(6);

/// What makes two Events the same: everything but the time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    type_: &'static str,
    reason: String,
    action: String,
    note: Option<String>,
    regarding: Identity,
    related: Option<Identity>,
}

/// An object reference by what names the object (not its resourceVersion or field path).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Identity {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl From<&ObjectReference> for Identity {
    fn from(r: &ObjectReference) -> Self {
        Identity {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// Publishes the Events of one reporter; cheap to clone (clones share what was published).
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    published: Arc<Mutex<HashMap<Key, K8sEvent>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder publishing as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Recorder {
            client,
            reporter,
            published: Arc::default(),
        }
    }

    /// Publish `event` about `regarding`, in its namespace: a new Event, or a count on the
    /// series of the same Event published within [`CACHE_TTL`].
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = Key {
            type_: type_name(event.type_),
            reason: event.reason.clone(),
            action: event.action.clone(),
            note: event.note.clone(),
            regarding: regarding.into(),
            related: event.secondary.as_ref().map(Identity::from),
        };
        let repeat = self.remembered(&key, now).map(|mut seen| {
            let count = seen.series.as_ref().map_or(2, |s| s.count + 1);
            seen.series = Some(EventSeries {
                count,
                last_observed_time: MicroTime(now),
            });
            seen
        });
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let published = match repeat {
            Some(seen) => {
                let name = seen.name_any();
                events
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&seen))
                    .await?;
                seen
            }
            None => {
                let new = self.new_event(event, regarding, now);
                events.create(&PostParams::default(), &new).await?;
                new
            }
        };
        self.lock().insert(key, published);
        Ok(())
    }

    /// The Event published under `key` within [`CACHE_TTL`] of `now`; forgets older ones.
    fn remembered(&self, key: &Key, now: Timestamp) -> Option<K8sEvent> {
        let mut published = self.lock();
        published.retain(|_, e| last_seen(e).is_some_and(|at| at + CACHE_TTL > now));
        published.get(key).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, K8sEvent>> {
        self.published.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn new_event(&self, event: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let name = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            note: event.note.clone(),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(type_name(event.type_).into()),
            ..K8sEvent::default()
        }
    }
}

/// When an Event was last seen: its series' last observation, else its time.
fn last_seen(event: &K8sEvent) -> Option<Timestamp> {
    match &event.series {
        Some(series) => Some(series.last_observed_time.0),
        None => event.event_time.as_ref().map(|t| t.0),
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use serde_json::json;

    use super::*;
    use crate::testing::api_script::{Expect, mock_client};

    fn note(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    fn cronjob(resource_version: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("batch.kronjob.dev/v1".into()),
            kind: Some("CronJob".into()),
            namespace: Some("ns".into()),
            name: Some("cj".into()),
            uid: Some("u".into()),
            resource_version: Some(resource_version.into()),
            ..ObjectReference::default()
        }
    }

    fn created(note: &str) -> Expect {
        let reply = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                           "metadata": {"name": "cj.1", "namespace": "ns"}, "eventTime": null});
        Expect::post("/apis/events.k8s.io/v1/namespaces/ns/events")
            .body_includes(json!({
                "type": "Normal",
                "reason": "SuccessfulCreate",
                "note": note,
                "action": "Reconcile",
                "reportingController": "kronjob",
                "reportingInstance": "pod-0",
                "regarding": {"kind": "CronJob", "namespace": "ns", "name": "cj", "uid": "u"},
            }))
            .reply(StatusCode::CREATED, reply)
    }

    /// Each Job created gets an Event naming it; the same note again (whatever the CronJob's
    /// resourceVersion) counts on the first one's series; another reason is another Event.
    #[tokio::test]
    async fn a_different_note_is_a_new_event_and_a_repeat_a_count() {
        let (client, script) = mock_client();
        let repeat = Expect::patch("/apis/events.k8s.io/v1/namespaces/ns/events/cj.*")
            .body_includes(json!({"note": "Created job cj-1", "series": {"count": 2}}))
            .ok(json!({}));
        let again = Expect::patch("/apis/events.k8s.io/v1/namespaces/ns/events/cj.*")
            .body_includes(json!({"note": "Created job cj-1", "series": {"count": 3}}))
            .ok(json!({}));
        let other = Expect::post("/apis/events.k8s.io/v1/namespaces/ns/events")
            .body_includes(json!({"reason": "SawCompletedJob", "note": "Created job cj-1"}))
            .reply(StatusCode::CREATED, json!({}));
        let verdict = script.run(vec![
            created("Created job cj-1"),
            created("Created job cj-2"),
            repeat,
            again,
            other,
        ]);
        let reporter = Reporter {
            controller: "kronjob".into(),
            instance: Some("pod-0".into()),
        };
        let recorder = Recorder::new(client, reporter);
        for (reason, text, rv) in [
            ("SuccessfulCreate", "Created job cj-1", "1"),
            ("SuccessfulCreate", "Created job cj-2", "2"),
            ("SuccessfulCreate", "Created job cj-1", "3"),
            ("SuccessfulCreate", "Created job cj-1", "4"),
            ("SawCompletedJob", "Created job cj-1", "5"),
        ] {
            recorder
                .publish(&note(reason, text), &cronjob(rv))
                .await
                .expect("published");
        }
        verdict.await.expect("the script");
    }

    #[tokio::test]
    async fn forgotten_after_the_cache_ttl() {
        let (client, _script) = mock_client();
        let reporter = Reporter {
            controller: "kronjob".into(),
            instance: None,
        };
        let recorder = Recorder::new(client, reporter);
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().expect("time");
        let event = recorder.new_event(&note("R", "n"), &cronjob("1"), t0);
        assert_eq!(event.reporting_instance.as_deref(), Some("kronjob"));
        let key = Key {
            type_: "Normal",
            reason: "R".into(),
            action: "Reconcile".into(),
            note: Some("n".into()),
            regarding: (&cronjob("1")).into(),
            related: None,
        };
        recorder.lock().insert(key.clone(), event);
        let within = t0 + CACHE_TTL - SignedDuration::from_secs(1);
        assert!(recorder.remembered(&key, within).is_some());
        assert!(recorder.remembered(&key, t0 + CACHE_TTL).is_none());
        assert!(recorder.lock().is_empty(), "the expired Event is dropped");
    }
}
