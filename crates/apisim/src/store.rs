//! The object store: objects by resource, namespace and name, one global resourceVersion
//! counter, and a bounded log of change events for watches.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::route::ResKey;

/// The kind of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change: `object` is the new state (for a deletion: the last state with the deletion's
/// resourceVersion), `old` the state before a modification.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// When it happened (tokio's clock): watches deliver it a sampled lag later.
    pub(crate) at: tokio::time::Instant,
    pub(crate) rv: u64,
    pub(crate) ty: EventType,
    pub(crate) res: ResKey,
    pub(crate) old: Option<Arc<Value>>,
    pub(crate) object: Arc<Value>,
}

/// The default number of retained events.
pub(crate) const DEFAULT_EVENT_CAPACITY: usize = 200_000;

#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    objects: HashMap<ResKey, BTreeMap<(String, String), Arc<Value>>>,
    events: VecDeque<Event>,
    /// Every event with a resourceVersion above this is retained.
    compacted: u64,
    capacity: usize,
}

/// A watch asked for a resourceVersion older than the retained events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expired {
    pub(crate) oldest: u64,
}

impl Store {
    pub(crate) fn new(capacity: usize) -> Self {
        Store {
            rv: 0,
            objects: HashMap::new(),
            events: VecDeque::new(),
            compacted: 0,
            capacity: capacity.max(1),
        }
    }

    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        self.trim();
    }

    /// The current (latest) resourceVersion.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn get(&self, res: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(res)?
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of a resource in key order, in one namespace or all.
    pub(crate) fn list(&self, res: &ResKey, ns: Option<&str>) -> Vec<Arc<Value>> {
        let Some(objects) = self.objects.get(res) else {
            return Vec::new();
        };
        match ns {
            None => objects.values().cloned().collect(),
            Some(ns) => objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }

    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn push(&mut self, event: Event) {
        self.events.push_back(event);
        self.trim();
    }

    fn trim(&mut self) {
        while self.events.len() > self.capacity {
            if let Some(e) = self.events.pop_front() {
                self.compacted = e.rv;
            }
        }
    }

    /// Stores an object under a new resourceVersion (written into it) and logs ADDED or MODIFIED.
    pub(crate) fn put(&mut self, res: &ResKey, mut object: Map<String, Value>) -> Arc<Value> {
        let rv = self.bump();
        let meta = meta_mut(&mut object);
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        let key = (
            str_of(meta, "namespace").to_string(),
            str_of(meta, "name").to_string(),
        );
        let object = Arc::new(Value::Object(object));
        let old = self
            .objects
            .entry(res.clone())
            .or_default()
            .insert(key, object.clone());
        let ty = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.push(Event {
            at: tokio::time::Instant::now(),
            rv,
            ty,
            res: res.clone(),
            old,
            object: object.clone(),
        });
        object
    }

    /// Removes an object and logs DELETED; answers its last state with the deletion's version.
    pub(crate) fn remove(&mut self, res: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        let old = self
            .objects
            .get_mut(res)?
            .remove(&(ns.to_string(), name.to_string()))?;
        let rv = self.bump();
        let mut last = match Arc::unwrap_or_clone(old) {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        meta_mut(&mut last).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let object = Arc::new(Value::Object(last));
        self.push(Event {
            at: tokio::time::Instant::now(),
            rv,
            ty: EventType::Deleted,
            res: res.clone(),
            old: None,
            object: object.clone(),
        });
        Some(object)
    }

    /// The events after resourceVersion `rv`, or `Expired` if some were already dropped.
    pub(crate) fn events_after(&self, rv: u64) -> Result<impl Iterator<Item = &Event>, Expired> {
        if rv < self.compacted {
            return Err(Expired {
                oldest: self.compacted + 1,
            });
        }
        let start = self.events.partition_point(|e| e.rv <= rv);
        Ok(self.events.range(start..))
    }
}

/// `metadata`, made an object if it is missing or not one.
pub(crate) fn meta_mut(object: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(map) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// A string field of a map, or "".
pub(crate) fn str_of<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `metadata.{key}` of an object as a string, or "".
pub(crate) fn meta_str<'a>(object: &'a Value, key: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str) -> Map<String, Value> {
        match json!({"metadata": {"name": name, "namespace": "ns"}}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn versions_events_and_compaction() {
        let mut s = Store::new(2);
        let res = ResKey::new("batch", "jobs");
        s.put(&res, obj("a"));
        s.put(&res, obj("b"));
        let a2 = s.put(&res, obj("a"));
        assert_eq!(meta_str(&a2, "resourceVersion"), "3");
        assert_eq!(s.list(&res, Some("ns")).len(), 2);
        assert!(s.list(&res, Some("n")).is_empty());
        assert_eq!(s.events_after(1).map(|e| e.count()), Ok(2));
        assert_eq!(s.events_after(0).err(), Some(Expired { oldest: 2 }));
        let gone = s.remove(&res, "ns", "a").expect("present");
        assert_eq!(meta_str(&gone, "resourceVersion"), "4");
        let last: Vec<_> = s.events_after(3).expect("retained").map(|e| e.ty).collect();
        assert_eq!(last, vec![EventType::Deleted]);
    }
}
