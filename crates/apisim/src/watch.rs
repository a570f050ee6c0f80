//! Watch streams: newline-delimited JSON events from a resourceVersion, woken by the store.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::fault::ApiError;
use crate::route::{Query, ResKey};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Event, EventType, meta_str};
use crate::{Inner, lock};

/// Idle time after which a watch that allows bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// What a watch shows.
#[derive(Debug, Clone)]
pub(crate) struct WatchSpec {
    pub(crate) res: ResKey,
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
    pub(crate) bookmarks: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) meta_only: bool,
    /// apiVersion and kind of bookmarks.
    pub(crate) api_version: String,
    pub(crate) kind: String,
}

impl WatchSpec {
    fn matches(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta_str(object, "namespace") == ns)
            && self.labels.matches(object)
            && self.fields.matches(object)
    }

    /// The event type this watch sees for a change, if any: an object that starts matching the
    /// selectors is ADDED, one that stops matching is DELETED.
    fn classify(&self, event: &Event) -> Option<&'static str> {
        if event.res != self.res {
            return None;
        }
        let now = self.matches(&event.object);
        match event.ty {
            EventType::Added => now.then_some("ADDED"),
            EventType::Deleted => now.then_some("DELETED"),
            EventType::Modified => {
                let before = event.old.as_ref().is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }
    }

    fn line(&self, ty: &str, object: &Value) -> Bytes {
        let line = if self.meta_only {
            format!("{{\"type\":\"{ty}\",\"object\":{}}}\n", project(object))
        } else {
            format!("{{\"type\":\"{ty}\",\"object\":{object}}}\n")
        };
        Bytes::from(line)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (api_version, kind) = if self.meta_only {
            ("meta.k8s.io/v1", "PartialObjectMetadata")
        } else {
            (self.api_version.as_str(), self.kind.as_str())
        };
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        self.line(
            "BOOKMARK",
            &json!({"apiVersion": api_version, "kind": kind, "metadata": metadata}),
        )
    }
}

/// The metadata-only form of an object (`Accept: ...;as=PartialObjectMetadata`).
pub(crate) fn project(object: &Value) -> Value {
    if object.get("kind").and_then(Value::as_str) == Some("PartialObjectMetadata") {
        return object.clone();
    }
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": object.get("metadata")})
}

struct WatchState {
    inner: Arc<Inner>,
    spec: WatchSpec,
    /// Every event up to here has been looked at.
    cursor: u64,
    /// Lines to send, each not before its time.
    queue: VecDeque<(Bytes, Option<Instant>)>,
    /// When the last event line may go out: later events never overtake it.
    due: Option<Instant>,
    rx: tokio::sync::watch::Receiver<u64>,
    epoch: u64,
    deadline: Option<Instant>,
    last_sent: Instant,
    done: bool,
}

enum Wake {
    Changed,
    Bookmark,
    Timeout,
}

/// Starts a watch per the query (`resourceVersion`, `sendInitialEvents`): unset or `0` starts
/// with ADDED for every current object; `sendInitialEvents=true` also ends those with a bookmark
/// annotated `k8s.io/initial-events-end`; otherwise it streams the changes after the version.
pub(crate) fn start(
    inner: Arc<Inner>,
    spec: WatchSpec,
    query: &Query,
) -> Result<BoxStream<'static, Result<Bytes, io::Error>>, ApiError> {
    let version = query.get("resourceVersion").unwrap_or("");
    let initial = query.flag("sendInitialEvents") || version.is_empty() || version == "0";
    let from = if initial {
        None
    } else {
        let rv = version
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {version}")))?;
        Some(rv)
    };
    let mut rx = inner.changed.subscribe();
    rx.borrow_and_update();
    let mut queue = VecDeque::new();
    let cursor = match from {
        Some(rv) => rv,
        None => {
            let (rv, objects) = {
                let store = lock(&inner.store);
                (store.rv(), store.list(&spec.res, spec.namespace.as_deref()))
            };
            queue.extend(
                objects
                    .iter()
                    .filter(|o| spec.matches(o))
                    .map(|o| (spec.line("ADDED", o), None)),
            );
            if query.flag("sendInitialEvents") {
                queue.push_back((spec.bookmark(rv, true), None));
            }
            rv
        }
    };
    let now = Instant::now();
    let state = WatchState {
        epoch: inner.down_epoch.load(Ordering::SeqCst),
        inner,
        deadline: spec.timeout.map(|t| now + t),
        spec,
        cursor,
        queue,
        due: None,
        rx,
        last_sent: now,
        done: false,
    };
    Ok(futures::stream::unfold(state, WatchState::next).boxed())
}

impl WatchState {
    async fn next(mut self) -> Option<(Result<Bytes, io::Error>, Self)> {
        loop {
            if let Some((line, at)) = self.queue.pop_front() {
                if let Some(at) = at {
                    tokio::time::sleep_until(at).await;
                }
                self.last_sent = Instant::now();
                return Some((Ok(line), self));
            }
            if self.done || self.deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            if self.inner.down_epoch.load(Ordering::SeqCst) != self.epoch {
                self.done = true;
                let error = io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "apisim: the API server went down",
                );
                return Some((Err(error), self));
            }
            self.rx.borrow_and_update();
            self.collect();
            if !self.queue.is_empty() || self.done {
                continue;
            }
            let bookmark_at = self.last_sent + BOOKMARK_INTERVAL;
            let deadline = self.deadline.unwrap_or(bookmark_at);
            let wake = tokio::select! {
                changed = self.rx.changed() => if changed.is_ok() { Wake::Changed } else { Wake::Timeout },
                () = tokio::time::sleep_until(bookmark_at), if self.spec.bookmarks => Wake::Bookmark,
                () = tokio::time::sleep_until(deadline), if self.deadline.is_some() => Wake::Timeout,
            };
            match wake {
                Wake::Changed => {}
                Wake::Bookmark => {
                    let line = self.spec.bookmark(self.cursor, false);
                    self.queue.push_back((line, None));
                }
                Wake::Timeout => self.done = true,
            }
        }
    }

    /// Queues this watch's share of the events after the cursor, or 410 Expired.
    fn collect(&mut self) {
        let mut picked = Vec::new();
        let expired = {
            let store = lock(&self.inner.store);
            match store.events_after(self.cursor) {
                Ok(events) => {
                    picked
                        .extend(events.filter_map(|e| {
                            Some((self.spec.classify(e)?, e.object.clone(), e.at))
                        }));
                    self.cursor = store.rv();
                    None
                }
                Err(expired) => Some(expired),
            }
        };
        if let Some(expired) = expired {
            let message = format!(
                "too old resource version: {} ({})",
                self.cursor, expired.oldest
            );
            let status = ApiError::new(410, "Expired", message).status();
            self.queue.push_back((
                Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": status}))),
                None,
            ));
            self.done = true;
            return;
        }
        for (ty, object, at) in picked {
            let line = self.spec.line(ty, &object);
            let lag = lock(&self.inner.cost_state).watch_lag(&self.inner.cost);
            let due = self.due.map_or(at + lag, |previous| previous.max(at + lag));
            self.due = Some(due);
            self.queue.push_back((line, Some(due)));
        }
    }
}
