//! Publishing Events (`events.k8s.io/v1`) the way client-go's events recorder does: a repeat of
//! an Event within six minutes (same type, reason, action, note, regarding and related object)
//! is counted on the first one's `series` (a PATCH) instead of making a new Event; an Event
//! whose note differs is an Event of its own.
//!
//! Of each published Event the recorder remembers its name, count and last time (~100 bytes),
//! in an LRU of at most [`CACHE_CAPACITY`]: a publish costs O(1) whatever was published before,
//! and the memory stays bounded with tens of thousands of CronJobs. The API server's answers
//! are not decoded.
//!
//! kube-runtime's `Recorder` leaves the note out of what makes two Events the same, so every
//! `SuccessfulCreate` of a CronJob within six minutes of the previous one was counted on the
//! first, and the note a user saw kept naming the first Job created, however many came after.

use std::hash::{BuildHasher, Hash};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use lru::LruCache;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How long a published Event is remembered: a repeat within this (of the last time it was
/// seen) is counted on it.
pub const CACHE_TTL: SignedDuration = SignedDuration::from_mins(6);

/// Most Events remembered; beyond, the least recently seen is forgotten (a repeat of it is
/// then a new Event). About 100 bytes each.
pub const CACHE_CAPACITY: usize = 16_384;

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

/// What is remembered of a published Event: its name, how often it was seen, and when last.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    name: Box<str>,
    count: i32,
    last: Timestamp,
}

/// The Events published within [`CACHE_TTL`], least recently seen first out, by a 128-bit digest
/// of their [`Key`] (two independently keyed hashes: no two Events of a process's life are
/// confused).
struct Published {
    seen: LruCache<u128, Seen>,
    hashers: (std::hash::RandomState, std::hash::RandomState),
}

impl Published {
    fn digest(&self, key: &Key) -> u128 {
        let high = self.hashers.0.hash_one(key);
        let low = self.hashers.1.hash_one(key);
        (u128::from(high) << 64) | u128::from(low)
    }
}

impl Default for Published {
    fn default() -> Self {
        Published {
            seen: LruCache::new(NonZeroUsize::MIN.saturating_add(CACHE_CAPACITY - 1)),
            hashers: Default::default(),
        }
    }
}

/// An Event as sent (whole) and as its answer is read (not at all: skipped unallocated).
#[derive(Debug, Clone, Default)]
struct Sent(K8sEvent);

impl Serialize for Sent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Sent::default())
    }
}

resource_like!(Sent, K8sEvent, .0.metadata);

/// Publishes the Events of one reporter; cheap to clone (clones share what was published).
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    published: Arc<Mutex<Published>>,
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
    /// series of the same Event published within [`CACHE_TTL`] (a patch of its `series`
    /// only, as client-go's recorder does).
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
        let digest = self.lock().digest(&key);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<Sent> = Api::namespaced(self.client.clone(), namespace);
        let seen = match self.remembered(digest, now) {
            Some(mut seen) => {
                seen.count += 1;
                seen.last = now;
                let series = serde_json::json!({"series": {
                    "count": seen.count,
                    "lastObservedTime": MicroTime(now),
                }});
                events
                    .patch(&seen.name, &PatchParams::default(), &Patch::Merge(&series))
                    .await?;
                seen
            }
            None => {
                let new = self.new_event(event, regarding, now);
                let name = new.metadata.name.as_deref().unwrap_or_default().into();
                events.create(&PostParams::default(), &Sent(new)).await?;
                Seen {
                    name,
                    count: 1,
                    last: now,
                }
            }
        };
        self.lock().seen.put(digest, seen);
        Ok(())
    }

    /// The Event published under `digest` and last seen within [`CACHE_TTL`] of `now`; one
    /// seen longer ago is forgotten.
    fn remembered(&self, digest: u128, now: Timestamp) -> Option<Seen> {
        let mut published = self.lock();
        let seen = published.seen.get(&digest)?;
        if seen.last + CACHE_TTL > now {
            return Some(seen.clone());
        }
        published.seen.pop(&digest);
        None
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Published> {
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

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use serde_json::{Value, json};

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
        let series_only = |b: &Value| {
            let fields: Vec<&String> = b.as_object().expect("object").keys().collect();
            assert_eq!(fields, ["series"], "only the series is patched: {b}");
            assert!(b["series"]["lastObservedTime"].is_string(), "{b}");
        };
        let repeat = Expect::patch("/apis/events.k8s.io/v1/namespaces/ns/events/cj.*")
            .body_includes(json!({"series": {"count": 2}}))
            .check(series_only)
            .ok(json!({}));
        let again = Expect::patch("/apis/events.k8s.io/v1/namespaces/ns/events/cj.*")
            .body_includes(json!({"series": {"count": 3}}))
            .check(series_only)
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

    fn key(note: &str) -> Key {
        Key {
            type_: "Normal",
            reason: "R".into(),
            action: "Reconcile".into(),
            note: Some(note.into()),
            regarding: (&cronjob("1")).into(),
            related: None,
        }
    }

    fn seen(at: Timestamp) -> Seen {
        Seen {
            name: "cj.1".into(),
            count: 1,
            last: at,
        }
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
        let digest = recorder.lock().digest(&key("n"));
        assert_ne!(
            digest,
            recorder.lock().digest(&key("m")),
            "the note is in the key"
        );
        recorder.lock().seen.put(digest, seen(t0));
        let within = t0 + CACHE_TTL - SignedDuration::from_secs(1);
        assert_eq!(recorder.remembered(digest, within), Some(seen(t0)));
        assert!(recorder.remembered(digest, t0 + CACHE_TTL).is_none());
        assert!(
            recorder.lock().seen.is_empty(),
            "the expired Event is dropped"
        );
    }

    #[tokio::test]
    async fn at_most_the_capacity_is_remembered_the_least_recently_seen_first_out() {
        let (client, _script) = mock_client();
        let reporter = Reporter {
            controller: "kronjob".into(),
            instance: None,
        };
        let recorder = Recorder::new(client, reporter);
        let t0: Timestamp = "2024-01-01T00:00:00Z".parse().expect("time");
        let first = recorder.lock().digest(&key("0"));
        for i in 0..=CACHE_CAPACITY {
            let mut published = recorder.lock();
            let digest = published.digest(&key(&i.to_string()));
            published.seen.put(digest, seen(t0));
        }
        assert_eq!(recorder.lock().seen.len(), CACHE_CAPACITY);
        assert!(recorder.remembered(first, t0).is_none(), "the oldest went");
        let last = recorder.lock().digest(&key(&CACHE_CAPACITY.to_string()));
        assert!(recorder.remembered(last, t0).is_some());
    }
}
