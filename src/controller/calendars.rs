//! Calendars as the CronJob controller sees them: a cache of every Calendar (cluster-scoped,
//! one watch whatever the namespaces or shard of the replica), and the reference index from a
//! Calendar's name to the CronJobs that name it in `spec.calendars`, kept from the CronJob
//! watch. A Calendar created, edited or deleted reconciles exactly the CronJobs that name it,
//! found through the index (never by listing every CronJob).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};

use crate::api::Calendar;
use crate::controller::cache::CachedCronJob;
use crate::controller::cronjob::plan::scheduling::Calendars;

/// A CronJob's key, as the controller's reconcile requests name it.
pub type Key = ObjectRef<CachedCronJob>;

/// The Calendar cache and the reference index. Cheap to clone (shared state).
#[derive(Clone)]
pub struct CalendarIndex {
    store: reflector::Store<Calendar>,
    refs: Arc<Mutex<Refs>>,
}

/// Which CronJobs name which Calendars, both ways.
#[derive(Debug, Default)]
struct Refs {
    by_calendar: HashMap<String, BTreeSet<(String, String)>>,
    by_cronjob: HashMap<(String, String), Vec<String>>,
}

impl std::fmt::Debug for CalendarIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CalendarIndex")
            .field("calendars", &self.store.len())
            .finish_non_exhaustive()
    }
}

impl Default for CalendarIndex {
    /// An index whose cache is fed by nothing (every named Calendar is missing once it is
    /// marked listed; see [`CalendarIndex::new`] for one fed by a watch).
    fn default() -> Self {
        Self::new().0
    }
}

impl CalendarIndex {
    /// An empty index, and the writer its Calendar cache is fed through.
    pub fn new() -> (Self, reflector::store::Writer<Calendar>) {
        let (store, writer) = reflector::store::<Calendar>();
        let index = CalendarIndex {
            store,
            refs: Arc::default(),
        };
        (index, writer)
    }

    /// Whether the Calendar cache has listed.
    pub fn is_ready(&self) -> bool {
        use futures::FutureExt;
        matches!(self.store.wait_until_ready().now_or_never(), Some(Ok(())))
    }

    /// The calendars of `cj` as the cache holds them.
    pub fn resolve(&self, cj: &crate::api::CronJob) -> Calendars {
        Calendars::resolve(cj, |name| self.store.get(&ObjectRef::new(name)))
    }

    /// Record the Calendars the CronJob `namespace/name` names (none: forget it).
    pub fn set_refs(&self, namespace: &str, name: &str, calendars: &[String]) {
        let mut refs = self.refs.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (namespace.to_string(), name.to_string());
        let mut names: Vec<String> = calendars.to_vec();
        names.sort();
        names.dedup();
        if refs.by_cronjob.get(&key) == Some(&names) {
            return;
        }
        if let Some(old) = refs.by_cronjob.remove(&key) {
            for calendar in old {
                if let Some(set) = refs.by_calendar.get_mut(&calendar) {
                    set.remove(&key);
                    if set.is_empty() {
                        refs.by_calendar.remove(&calendar);
                    }
                }
            }
        }
        if names.is_empty() {
            return;
        }
        for calendar in &names {
            refs.by_calendar
                .entry(calendar.clone())
                .or_default()
                .insert(key.clone());
        }
        refs.by_cronjob.insert(key, names);
    }

    /// The CronJobs that name the Calendar `calendar`.
    pub fn referencing(&self, calendar: &str) -> Vec<Key> {
        let refs = self.refs.lock().unwrap_or_else(PoisonError::into_inner);
        refs.by_calendar
            .get(calendar)
            .into_iter()
            .flatten()
            .map(|(namespace, name)| ObjectRef::new(name).within(namespace))
            .collect()
    }

    /// How many CronJobs name at least one Calendar.
    pub fn referencing_cronjobs(&self) -> usize {
        let refs = self.refs.lock().unwrap_or_else(PoisonError::into_inner);
        refs.by_cronjob.len()
    }

    /// Keep the index from a CronJob watch event.
    pub fn observe(&self, event: &watcher::Event<CachedCronJob>) {
        match event {
            watcher::Event::Apply(cj) | watcher::Event::InitApply(cj) => {
                let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
                let name = cj.metadata.name.as_deref().unwrap_or_default();
                let names = cj.spec.calendars.as_deref().unwrap_or_default();
                self.set_refs(namespace, name, names);
            }
            watcher::Event::Delete(cj) => {
                let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
                let name = cj.metadata.name.as_deref().unwrap_or_default();
                self.set_refs(namespace, name, &[]);
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

/// Watch every Calendar into `writer` and send the key of each CronJob naming a Calendar that
/// changed (created, edited, deleted) to `reconcile`. Never returns; watch errors are retried
/// with backoff and reported through `on_error`.
pub async fn watch(
    client: kube::Client,
    index: CalendarIndex,
    writer: reflector::store::Writer<Calendar>,
    reconcile: futures::channel::mpsc::UnboundedSender<Key>,
    mut on_error: impl FnMut(&watcher::Error),
) {
    let api: kube::Api<Calendar> = kube::Api::all(client);
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    stream
        .for_each(|event| {
            match event {
                Ok(
                    watcher::Event::Apply(cal)
                    | watcher::Event::Delete(cal)
                    | watcher::Event::InitApply(cal),
                ) => {
                    let name = cal.metadata.name.as_deref().unwrap_or_default();
                    for key in index.referencing(name) {
                        let _ = reconcile.unbounded_send(key);
                    }
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                Err(e) => on_error(&e),
            }
            futures::future::ready(())
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_follows_each_cronjobs_references() {
        let index = CalendarIndex::default();
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        index.set_refs("a", "x", &names(&["holidays", "freeze"]));
        index.set_refs("b", "y", &names(&["holidays"]));
        index.set_refs("b", "z", &[]);
        let keys = |cal: &str| {
            let mut v: Vec<String> = index
                .referencing(cal)
                .iter()
                .map(|k| format!("{}/{}", k.namespace.as_deref().unwrap_or_default(), k.name))
                .collect();
            v.sort();
            v
        };
        assert_eq!(keys("holidays"), ["a/x", "b/y"]);
        assert_eq!(keys("freeze"), ["a/x"]);
        assert!(keys("other").is_empty());
        index.set_refs("a", "x", &names(&["freeze"]));
        assert_eq!(keys("holidays"), ["b/y"]);
        index.set_refs("b", "y", &[]);
        assert!(keys("holidays").is_empty());
        assert_eq!(index.referencing_cronjobs(), 1);
    }
}
