//! What the tool's watches see of a phase: the runs (Jobs, or objects of another kind) as they
//! arrive, the CronJobs' status writes and the Events, and a slot summarised from them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};

use kronjob::api::ANNOTATION_SCHEDULED_AT;
use kronjob::workload::kinds::Row;

use crate::phase::{SUMMARISED_AFTER, Slot, secs};
use crate::process::ProcSample;
use crate::report::Spread;

/// The annotation upstream's CronJob controller puts on its Jobs.
const UPSTREAM_SCHEDULED_AT: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// One object as a watch showed it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub name: String,
    /// The controlling owner's name (runs).
    pub owner: Option<String>,
    /// The slot a run was created for.
    pub scheduled: Option<Timestamp>,
    pub arrived: Timestamp,
}

/// Everything the watches saw, in arrival order.
#[derive(Debug, Default)]
pub struct Log {
    /// Runs, first sighting each.
    pub runs: Vec<Seen>,
    /// CronJob modifications (a new resourceVersion) after the initial list.
    cronjob_writes: Vec<Seen>,
    /// Event writes after the initial list: a new Event, or a repeat counted on one.
    events: Vec<Timestamp>,
}

/// What a watch records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// Each object's first sighting: the runs a controller creates.
    Runs,
    /// Each change of an object: the CronJobs' status writes.
    Writes,
    /// Each new object and each change: Events.
    Events,
}

impl Record {
    /// Whether an object seen after the initial list at resourceVersion `rv` is recorded, when
    /// the watch last saw it at `previous` (`None`: never).
    fn records(self, previous: Option<&str>, rv: &str) -> bool {
        match self {
            Record::Runs => previous.is_none(),
            Record::Writes => previous.is_some_and(|p| p != rv),
            Record::Events => previous != Some(rv),
        }
    }
}

pub type SharedLog = Arc<Mutex<Log>>;

pub fn lock(log: &SharedLog) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

/// The slot of a run: kronjob's or upstream's scheduled-time annotation, else its name's
/// minutes suffix.
fn scheduled_of(meta: &ObjectMeta) -> Option<Timestamp> {
    let annotations = meta.annotations.as_ref();
    for key in [ANNOTATION_SCHEDULED_AT, UPSTREAM_SCHEDULED_AT] {
        if let Some(t) = annotations
            .and_then(|a| a.get(key))
            .and_then(|s| s.parse().ok())
        {
            return Some(t);
        }
    }
    let (_, minutes) = meta.name.as_deref()?.rsplit_once('-')?;
    Timestamp::from_second(minutes.parse::<i64>().ok()?.checked_mul(60)?).ok()
}

fn seen(meta: &ObjectMeta) -> Seen {
    Seen {
        name: meta.name.clone().unwrap_or_default(),
        owner: meta
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|r| r.controller == Some(true)))
            .map(|r| r.name.clone()),
        scheduled: scheduled_of(meta),
        arrived: Timestamp::now(),
    }
}

/// A metadata-only view of `K` in `ns`.
pub fn meta_api<K>(client: &kube::Client, ns: &str) -> Api<PartialObjectMeta<K>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    Api::namespaced(client.clone(), ns)
}

/// A metadata-only view of `kind`'s objects in `ns`.
pub fn meta_api_of(
    client: &kube::Client,
    ns: &str,
    kind: &Row,
) -> Api<PartialObjectMeta<DynamicObject>> {
    Api::namespaced_with(client.clone(), ns, &crate::objects::resource(kind))
}

/// Watch the metadata of `api`'s objects into `log`, as `record` says. Returns once the
/// initial list is done; the watch goes on until the task is aborted.
pub async fn watch_into<K>(
    api: Api<PartialObjectMeta<K>>,
    log: SharedLog,
    record: Record,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    PartialObjectMeta<K>: serde::de::DeserializeOwned,
{
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        // After the first list, a relist (the watch expired while the API server was away)
        // brings what was created meanwhile: new names count as they arrive then.
        let mut listed = false;
        let mut versions: HashMap<String, String> = HashMap::new();
        // Reconnected as kronjob's watches are (within seconds of an outage's end).
        let mut stream = watcher(api, watcher::Config::default().page_size(5000))
            .backoff(kronjob::backoff::watch_backoff())
            .boxed();
        while let Some(event) = stream.next().await {
            let (object, listing) = match event {
                Ok(watcher::Event::Apply(o)) => (o, false),
                Ok(watcher::Event::InitApply(o)) => (o, !listed),
                Ok(watcher::Event::InitDone) => {
                    listed = true;
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("watch: {e}");
                    continue;
                }
            };
            let meta = &object.metadata;
            let name = meta.name.clone().unwrap_or_default();
            let rv = meta.resource_version.clone().unwrap_or_default();
            let previous = versions.insert(name, rv.clone());
            if listing || !record.records(previous.as_deref(), &rv) {
                continue;
            }
            let mut log = lock(&log);
            match record {
                Record::Runs => log.runs.push(seen(meta)),
                Record::Writes => log.cronjob_writes.push(seen(meta)),
                Record::Events => log.events.push(Timestamp::now()),
            }
        }
    });
    let _ = ready_rx.await;
    task
}

/// When each run of `slot` arrived at the watch.
pub fn arrivals(log: &Log, slot: Timestamp) -> impl Iterator<Item = Timestamp> + '_ {
    log.runs
        .iter()
        .filter(move |j| j.scheduled == Some(slot))
        .map(|j| j.arrived)
}

/// Summarise one slot from what the watches saw: `names` are the CronJobs. Writes are the
/// slot's from the slot to [`SUMMARISED_AFTER`] it.
pub fn summarise_slot(log: &Log, slot: Timestamp, names: &HashSet<String>) -> Slot {
    let jobs: Vec<&Seen> = log
        .runs
        .iter()
        .filter(|j| j.scheduled == Some(slot))
        .collect();
    let in_slot =
        |t: &Timestamp| *t >= slot && slot.checked_add(SUMMARISED_AFTER).is_ok_and(|end| *t < end);
    let mut per_owner: HashMap<&str, usize> = HashMap::new();
    for j in &jobs {
        *per_owner
            .entry(j.owner.as_deref().unwrap_or_default())
            .or_default() += 1;
    }
    Slot {
        slot,
        runs: jobs.len(),
        missing: names
            .iter()
            .filter(|n| !per_owner.contains_key(n.as_str()))
            .count(),
        duplicates: per_owner.values().filter(|c| **c > 1).map(|c| c - 1).sum(),
        skew: Spread::of(
            jobs.iter()
                .map(|j| secs(j.arrived.duration_since(slot)))
                .collect(),
        ),
        recorded: Spread::of(recorded_after(log, &jobs)),
        status_writes: log
            .cronjob_writes
            .iter()
            .filter(|w| in_slot(&w.arrived))
            .count(),
        events: log.events.iter().filter(|t| in_slot(t)).count(),
        process: ProcSample::default(),
    }
}

/// For each run of `jobs`, seconds from its arrival to the next write of its CronJob that the
/// watch saw: the status write that records the slot (one run, one status write per slot), so
/// how long the run alone said that its slot ran.
fn recorded_after(log: &Log, jobs: &[&Seen]) -> Vec<f64> {
    let mut writes: HashMap<&str, Vec<Timestamp>> = HashMap::new();
    for w in &log.cronjob_writes {
        writes.entry(w.name.as_str()).or_default().push(w.arrived);
    }
    jobs.iter()
        .filter_map(|j| {
            let owner = j.owner.as_deref()?;
            let next = writes.get(owner)?.iter().find(|t| **t >= j.arrived)?;
            Some(secs(next.duration_since(j.arrived)))
        })
        .collect()
}

/// When every CronJob in `names` has had a status write after `start`: the last of those
/// first writes; `None` while some have not.
pub fn all_written(log: &Log, names: &HashSet<String>, start: Timestamp) -> Option<Timestamp> {
    let mut first: HashMap<&str, Timestamp> = HashMap::new();
    for w in log.cronjob_writes.iter().filter(|w| w.arrived >= start) {
        first.entry(w.name.as_str()).or_insert(w.arrived);
    }
    if !names.iter().all(|n| first.contains_key(n.as_str())) {
        return None;
    }
    Some(first.into_values().max().unwrap_or(start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::SignedDuration;

    #[test]
    fn slot_of_a_job_from_annotations_or_name() {
        let mut m = ObjectMeta {
            name: Some("cj-00001-29000000".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            scheduled_of(&m),
            Timestamp::from_second(29_000_000 * 60).ok()
        );
        m.annotations = Some(
            [(
                UPSTREAM_SCHEDULED_AT.to_string(),
                "2025-01-01T00:01:00Z".to_string(),
            )]
            .into(),
        );
        assert_eq!(scheduled_of(&m), "2025-01-01T00:01:00Z".parse().ok());
        m.name = Some("x".into());
        m.annotations = None;
        assert_eq!(scheduled_of(&m), None);
    }

    #[test]
    fn a_slot_counts_missing_and_duplicate_jobs_and_their_skew() {
        let slot: Timestamp = "2025-01-01T00:01:00Z".parse().expect("ts");
        let at = |ms: i64| {
            slot.checked_add(SignedDuration::from_millis(ms))
                .expect("ts")
        };
        let job = |owner: &str, ms: i64| Seen {
            name: format!("{owner}-x"),
            owner: Some(owner.into()),
            scheduled: Some(slot),
            arrived: at(ms),
        };
        let earlier = Seen {
            scheduled: slot.checked_sub(SignedDuration::from_mins(1)).ok(),
            ..job("c", -59_000)
        };
        let write = |name: &str, ms: i64| Seen {
            name: name.into(),
            owner: None,
            scheduled: None,
            arrived: at(ms),
        };
        let log = Log {
            runs: vec![job("a", 300), job("a", 1200), job("b", 2500), earlier],
            cronjob_writes: vec![
                write("a", -500),
                write("a", 1300),
                write("b", 4500),
                write("b", 55_000),
            ],
            // One before the slot, two in it, one after the slot was summarised.
            events: vec![at(-1), at(0), at(54_999), at(55_000)],
        };
        let names: HashSet<String> = ["a", "b", "c"].map(String::from).into();
        let s = summarise_slot(&log, slot, &names);
        assert_eq!((s.runs, s.missing, s.duplicates), (3, 1, 1));
        assert_eq!((s.status_writes, s.events), (2, 2));
        let skew = s.skew.expect("jobs");
        assert_eq!((skew.p50, skew.max), (1.2, 2.5));
        // a's Jobs: 1.0 s and 0.1 s to a's next write; b's: 2.0 s.
        let recorded = s.recorded.expect("writes");
        assert_eq!((recorded.p50, recorded.max), (1.0, 2.0));
    }

    #[test]
    fn runs_are_first_sightings_writes_are_changes_and_events_both() {
        let cases = [
            (Record::Runs, None, true),
            (Record::Runs, Some("1"), false),
            (Record::Runs, Some("2"), false),
            (Record::Writes, None, false),
            (Record::Writes, Some("1"), true),
            (Record::Writes, Some("2"), false),
            (Record::Events, None, true),
            (Record::Events, Some("1"), true),
            (Record::Events, Some("2"), false),
        ];
        for (record, previous, recorded) in cases {
            assert_eq!(
                record.records(previous, "2"),
                recorded,
                "{record:?} after {previous:?}"
            );
        }
    }

    #[test]
    fn every_cronjob_is_reconciled_at_its_last_first_write() {
        let start = Timestamp::from_second(1_800_000_000).expect("time");
        let at = |s: i64| start.checked_add(SignedDuration::from_secs(s)).expect("ts");
        let write = |name: &str, s: i64| Seen {
            name: name.into(),
            owner: None,
            scheduled: None,
            arrived: at(s),
        };
        let names: HashSet<String> = ["a", "b"].map(String::from).into();
        let mut log = Log::default();
        assert_eq!(all_written(&log, &HashSet::new(), start), Some(start));
        assert_eq!(all_written(&log, &names, start), None);
        log.cronjob_writes = vec![write("a", -1), write("a", 2), write("a", 9)];
        assert_eq!(all_written(&log, &names, start), None);
        log.cronjob_writes.push(write("b", 5));
        assert_eq!(all_written(&log, &names, start), Some(at(5)));
    }
}
