//! Jobs as the controllers read them. [`SlimJob`] is a Job decoded with only what any
//! controller reads (metadata as [`super::meta`] keeps it, `ttlSecondsAfterFinished`, the start
//! and completion times and the conditions' type, status and time): the pod template,
//! managedFields and the rest are skipped while decoding. [`CachedJob`] is what the owner
//! index keeps of one, made back into a Job for a reconcile ([`CachedJob::to_job`]).

use std::sync::Arc;

use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::seconds::Second;
use super::uid::Uid;
use crate::api::{ANNOTATION_BACKFILLED, ANNOTATION_INSTANTIATE, ANNOTATION_SCHEDULED_AT, CronJob};
use crate::schedule;
use crate::workload::{self, Finish, Outcome, Ran, Workload, WorkloadType};

/// A Job with only the fields the controllers read. It encodes as the Job it holds (so a Job
/// to create can be sent as one, and the answer decoded slim).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SlimJob(pub Job);

#[derive(Deserialize)]
struct Wire {
    #[serde(deserialize_with = "super::meta::deserialize", default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<WireSpec>,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    #[serde(default)]
    ttl_seconds_after_finished: Option<i32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    #[serde(default)]
    start_time: Option<Time>,
    #[serde(default)]
    completion_time: Option<Time>,
    #[serde(default)]
    conditions: Option<Vec<WireCondition>>,
}

/// A missing `type` or `status` reads as empty, as the typed API reads it: a Job the typed
/// API decodes never fails the whole list or watch here.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCondition {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    last_transition_time: Option<Time>,
}

impl<'de> Deserialize<'de> for SlimJob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(d)?;
        let spec = w.spec.map(|s| JobSpec {
            ttl_seconds_after_finished: s.ttl_seconds_after_finished,
            ..JobSpec::default()
        });
        let status = w.status.map(|s| JobStatus {
            start_time: s.start_time,
            completion_time: s.completion_time,
            conditions: s.conditions.map(|c| {
                c.into_iter()
                    .map(|c| JobCondition {
                        type_: c.type_,
                        status: c.status,
                        last_transition_time: c.last_transition_time,
                        ..JobCondition::default()
                    })
                    .collect()
            }),
            ..JobStatus::default()
        });
        Ok(SlimJob(Job {
            metadata: w.metadata,
            spec,
            status,
        }))
    }
}

impl Serialize for SlimJob {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

resource_like!(SlimJob, Job, .0.metadata);

/// Which run a cached Job was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// A slot: the scheduled-time annotation.
    Scheduled(At),
    /// A manual run.
    Manual,
    /// Neither: not created by kronjob.
    Unknown,
}

/// The scheduled-time annotation's value: as kronjob writes it (an instant in the offset of the
/// CronJob's zone, [`schedule::scheduled_at`]) the instant and the offset, else the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The instant and the UTC offset (seconds) it was written in.
    Instant(Timestamp, i32),
    /// Anything else, as read.
    Text(Box<str>),
}

impl At {
    /// `text`, compacted if [`At::text`] gives it back exactly.
    pub fn new(text: &str) -> Self {
        let parsed = || {
            let at = text.parse::<Timestamp>().ok()?;
            let offset = offset_of(text)?;
            let tz = TimeZone::fixed(Offset::from_seconds(offset).ok()?);
            (schedule::scheduled_at(at, &tz) == text).then_some(At::Instant(at, offset))
        };
        parsed().unwrap_or_else(|| At::Text(text.into()))
    }

    /// The annotation's value as read.
    pub fn text(&self) -> String {
        match self {
            At::Instant(at, offset) => {
                let offset = Offset::from_seconds(*offset).unwrap_or(Offset::UTC);
                schedule::scheduled_at(*at, &TimeZone::fixed(offset))
            }
            At::Text(text) => text.to_string(),
        }
    }
}

/// The UTC offset an RFC 3339 time ends with (`Z` or `+hh:mm`), in seconds.
fn offset_of(text: &str) -> Option<i32> {
    if text.ends_with('Z') {
        return Some(0);
    }
    let tail = text.get(text.len().checked_sub(6)?..)?;
    let sign = match tail.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let hours: i32 = tail.get(1..3)?.parse().ok()?;
    let minutes: i32 = tail.get(4..6)?.parse().ok()?;
    Some(sign * (hours * 3600 + minutes * 60))
}

/// The kronjob CronJob controlling a Job (see [`workload::controller_uid`]); the Jobs of one
/// CronJob share one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Its UID.
    pub uid: Box<str>,
    /// Its name.
    pub name: Box<str>,
}

/// What the owner index keeps of a Job (its namespace and name are the index's key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedJob {
    /// UID.
    pub uid: Option<Uid>,
    /// The CronJob controlling it.
    pub owner: Option<Arc<Owner>>,
    /// Which run it was for.
    pub run: Run,
    /// `status.startTime`.
    pub started: Option<Second>,
    /// Whether and how it finished, and when: [`Finish`] as [`CachedJob::finish`] gives it back.
    pub ended: Option<(Outcome, Option<Second>)>,
    /// `status.completionTime`: what dates a success in the CronJob's status. The Job
    /// controller takes it from when the success criteria were met, which may be a second or
    /// more before the `Complete` condition's `lastTransitionTime` ([`Finish::at`]).
    pub completed: Option<Second>,
    /// `metadata.deletionTimestamp`.
    pub deleting: Option<Second>,
    /// `spec.ttlSecondsAfterFinished`.
    pub ttl: Option<i32>,
    /// A backfill created it ([`workload::backfilled`]).
    pub backfilled: bool,
}

impl CachedJob {
    /// What the index keeps of `job`.
    pub fn of(job: &Job) -> Self {
        let status = job.status.as_ref();
        CachedJob {
            started: status.and_then(|s| s.start_time.as_ref()).map(second),
            ended: workload::job_finish(job).map(|f| (f.outcome, f.at.map(Second::new))),
            completed: status.and_then(|s| s.completion_time.as_ref()).map(second),
            ttl: job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished),
            ..Self::of_meta(&job.metadata)
        }
    }

    /// What the index keeps of a workload of any kind.
    pub fn of_workload(workload: &Workload) -> Self {
        CachedJob {
            started: workload.started.map(Second::new),
            ended: workload.finish.map(|f| (f.outcome, f.at.map(Second::new))),
            completed: workload.completed.map(Second::new),
            ttl: workload.ttl,
            ..Self::of_meta(&workload.metadata)
        }
    }

    /// What the index keeps of a workload's metadata; nothing of its status.
    fn of_meta(meta: &ObjectMeta) -> Self {
        let owner = workload::controller_uid(meta).and_then(|uid| {
            let name = meta
                .owner_references
                .as_deref()?
                .iter()
                .find(|r| r.uid == uid)?;
            Some(Arc::new(Owner {
                uid: uid.into(),
                name: name.name.as_str().into(),
            }))
        });
        let run = match workload::ran_for(meta) {
            Ran::Scheduled(at) => Run::Scheduled(At::new(at)),
            Ran::Manual => Run::Manual,
            Ran::Unknown => Run::Unknown,
        };
        CachedJob {
            uid: meta.uid.as_deref().map(Uid::new),
            owner,
            run,
            started: None,
            ended: None,
            completed: None,
            deleting: meta.deletion_timestamp.as_ref().map(second),
            ttl: None,
            backfilled: workload::backfilled(meta),
        }
    }

    /// The Job `namespace/name` as the controllers read it: every field
    /// [`workload::read`](crate::workload::read) and the plan look at, nothing else.
    pub fn to_job(&self, namespace: &str, name: &str) -> Job {
        let owner_references = self.owner.as_ref().map(|owner| {
            vec![OwnerReference {
                api_version: <CronJob as kube::Resource>::api_version(&()).into_owned(),
                kind: <CronJob as kube::Resource>::kind(&()).into_owned(),
                name: owner.name.to_string(),
                uid: owner.uid.to_string(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
        let mut annotations: Option<std::collections::BTreeMap<String, String>> = match &self.run {
            Run::Scheduled(at) => Some([(ANNOTATION_SCHEDULED_AT.to_string(), at.text())].into()),
            Run::Manual => {
                Some([(ANNOTATION_INSTANTIATE.to_string(), "manual".to_string())].into())
            }
            Run::Unknown => None,
        };
        if self.backfilled {
            annotations
                .get_or_insert_with(Default::default)
                .insert(ANNOTATION_BACKFILLED.to_string(), "true".to_string());
        }
        let conditions = self.finish().map(|f| {
            vec![JobCondition {
                type_: match f.outcome {
                    Outcome::Complete => "Complete",
                    Outcome::Failed => "Failed",
                }
                .to_string(),
                status: "True".to_string(),
                last_transition_time: f.at.map(Time),
                ..JobCondition::default()
            }]
        });
        Job {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                uid: self.uid.as_ref().map(Uid::text),
                owner_references,
                annotations,
                deletion_timestamp: self.deleting.map(time),
                ..ObjectMeta::default()
            },
            spec: self.ttl.map(|ttl| JobSpec {
                ttl_seconds_after_finished: Some(ttl),
                ..JobSpec::default()
            }),
            status: Some(JobStatus {
                start_time: self.started.map(time),
                completion_time: self.completed.map(time),
                conditions,
                ..JobStatus::default()
            }),
        }
    }

    /// The workload `namespace/name` of `type_` as the plan reads it ([`Workload`]), with
    /// `raw`, what a completion rule reads of it (kept apart: Jobs never have it).
    pub fn to_workload(
        &self,
        namespace: &str,
        name: &str,
        type_: Arc<WorkloadType>,
        raw: Option<Arc<str>>,
    ) -> Workload {
        let job = self.to_job(namespace, name);
        Workload {
            type_,
            metadata: job.metadata,
            started: self.started.map(Second::at),
            finish: self.finish(),
            completed: self.completed.map(Second::at),
            ttl: self.ttl,
            raw,
        }
    }

    /// The UID of the CronJob controlling it.
    pub fn owner_uid(&self) -> Option<&str> {
        self.owner.as_ref().map(|owner| &*owner.uid)
    }

    /// Whether, how and when it finished ([`workload::finish`] of the Job it was made from).
    pub fn finish(&self) -> Option<Finish> {
        self.ended.map(|(outcome, at)| Finish {
            outcome,
            at: at.map(Second::at),
        })
    }
}

fn second(t: &Time) -> Second {
    Second::new(t.0)
}

fn time(s: Second) -> Time {
    Time(s.at())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{CJ_UID, JobFixture, job};
    use serde_json::json;

    #[test]
    fn a_job_decodes_slim_and_reads_the_same_through_the_cache() {
        let cases = [
            job("run").scheduled(),
            job("done")
                .scheduled()
                .started_at("2024-01-01T00:00:00Z")
                .complete_at("2024-01-01T00:01:00Z"),
            job("criteria-met-earlier")
                .scheduled()
                .started_at("2024-01-01T00:00:00Z")
                .complete_at("2024-01-01T00:01:02Z")
                .completion_time("2024-01-01T00:01:01Z"),
            job("failed").manual().failed_at("2024-01-01T00:01:00Z"),
            job("going").scheduled().deleting(),
            job("stranger"),
            backfilled(job("backfilled").scheduled_for("2024-01-01T00:00:00Z")),
        ];
        for full in cases {
            let text = serde_json::to_string(&full).expect("json");
            let slim: SlimJob = serde_json::from_str(&text).expect("decodes");
            let cached = CachedJob::of(&slim.0);
            assert_eq!(cached, CachedJob::of(&full), "{:?}", full.metadata.name);
            let name = full.metadata.name.as_deref().unwrap_or_default();
            let back = cached.to_job("ns", name);
            assert_eq!(
                workload::controller_uid(&back.metadata),
                workload::controller_uid(&full.metadata)
            );
            assert_eq!(
                workload::ran_for(&back.metadata),
                workload::ran_for(&full.metadata)
            );
            assert_eq!(
                workload::backfilled(&back.metadata),
                workload::backfilled(&full.metadata),
                "{name}"
            );
            assert_eq!(workload::job_finish(&back), workload::job_finish(&full));
            assert_eq!(back.metadata.name, full.metadata.name);
            assert_eq!(back.metadata.uid, full.metadata.uid);
            assert_eq!(
                back.metadata.deletion_timestamp,
                full.metadata.deletion_timestamp
            );
            let start = |j: &Job| j.status.as_ref().and_then(|s| s.start_time.clone());
            assert_eq!(start(&back), start(&full));
            let completed = |j: &Job| j.status.as_ref().and_then(|s| s.completion_time.clone());
            assert_eq!(completed(&back), completed(&full), "{name}");
        }
        assert_eq!(
            CachedJob::of(&job("run").scheduled()).owner_uid(),
            Some(CJ_UID)
        );
    }

    fn backfilled(mut job: Job) -> Job {
        job.metadata
            .annotations
            .get_or_insert_default()
            .insert(ANNOTATION_BACKFILLED.into(), "true".into());
        job
    }

    #[test]
    fn scheduled_times_come_back_as_written() {
        for text in [
            "2026-11-27T01:20:00Z",
            "2026-11-27T02:20:00+01:00",
            "2026-11-26T20:50:00-04:30",
            "2026-11-27T01:20:00+00:00",
            "2026-11-27T01:20:00.5Z",
            "2026-11-27 01:20:00Z",
            "yesterday",
            "",
        ] {
            let at = At::new(text);
            assert_eq!(at.text(), text, "{text:?}");
        }
        assert_eq!(
            At::new("2026-11-27T02:20:00+01:00"),
            At::Instant("2026-11-27T01:20:00Z".parse().expect("instant"), 3600)
        );
        assert!(matches!(At::new("2026-11-27T01:20:00+00:00"), At::Text(_)));
    }

    /// A real kube-apiserver 1.34's answers (`testdata/`): a Job as created, finished and
    /// being deleted, a list with its continue token, and a watch stream.
    const CREATE: &str = include_str!("testdata/create.json");
    const FINISHED: &str = include_str!("testdata/finished.json");
    const DELETING: &str = include_str!("testdata/deleting.json");
    const LIST: &str = include_str!("testdata/list.json");
    const WATCH: &str = include_str!("testdata/watch.json");

    #[test]
    fn a_real_servers_job_keeps_only_what_the_controllers_read() {
        for (name, text) in [
            ("create", CREATE),
            ("finished", FINISHED),
            ("deleting", DELETING),
        ] {
            let SlimJob(job) = serde_json::from_str(text).expect("a Job");
            let meta = &job.metadata;
            assert_eq!(meta.managed_fields, None, "{name}");
            assert_eq!((&meta.labels, &meta.finalizers), (&None, &None), "{name}");
            let annotations: Vec<_> = meta.annotations.iter().flatten().collect();
            assert_eq!(annotations.len(), 1, "{name}: {annotations:?}");
            assert_eq!(annotations[0].0, ANNOTATION_SCHEDULED_AT, "{name}");
            let spec = job.spec.clone().expect("spec");
            assert_eq!(spec.template, Default::default(), "{name}");
            assert_eq!((spec.parallelism, spec.selector), (None, None), "{name}");
            let kept = serde_json::to_string(&job).expect("encodes");
            assert!(kept.len() * 5 < text.len(), "{name}: {kept}");
        }
    }

    #[test]
    fn a_real_servers_finished_job_has_the_fields_that_matter() {
        let SlimJob(job) = serde_json::from_str(FINISHED).expect("a Job");
        let meta = &job.metadata;
        assert_eq!(meta.name.as_deref(), Some("hello-29000000"));
        assert_eq!(meta.namespace.as_deref(), Some("fixtures"));
        assert!(meta.uid.is_some() && meta.resource_version.is_some());
        assert_eq!(meta.generation, Some(1));
        assert!(meta.creation_timestamp.is_some());
        let owner = &meta.owner_references.as_ref().expect("owners")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("CronJob", "hello", Some(true))
        );
        assert_eq!(
            job.spec.as_ref().expect("spec").ttl_seconds_after_finished,
            Some(300)
        );
        let status = job.status.clone().expect("status");
        assert_eq!(
            status.completion_time.map(|t| t.0.to_string()).as_deref(),
            Some("2026-11-27T12:00:06Z")
        );
        let types: Vec<_> = status
            .conditions
            .expect("conditions")
            .into_iter()
            .map(|c| (c.type_, c.status, c.last_transition_time.is_some()))
            .collect();
        assert_eq!(
            types,
            [
                ("SuccessCriteriaMet".into(), "True".into(), true),
                ("Complete".into(), "True".into(), true)
            ]
        );
        let cached = CachedJob::of(&job);
        assert_eq!(cached.finish().map(|f| f.outcome), Some(Outcome::Complete));
        let SlimJob(deleting) = serde_json::from_str(DELETING).expect("a Job");
        assert!(deleting.metadata.deletion_timestamp.is_some());
    }

    #[test]
    fn a_real_servers_list_and_watch_decode_slim() {
        let list: kube::core::ObjectList<SlimJob> = serde_json::from_str(LIST).expect("a list");
        assert_eq!(list.items.len(), 1);
        assert!(list.metadata.continue_.is_some());
        assert!(list.items[0].0.metadata.managed_fields.is_none());
        let events: Vec<kube::core::WatchEvent<SlimJob>> = WATCH
            .lines()
            .map(|l| serde_json::from_str(l).expect("a watch event"))
            .collect();
        let kinds: Vec<_> = events
            .iter()
            .map(|e| match e {
                kube::core::WatchEvent::Modified(job) => ("MODIFIED", job.0.metadata.clone()),
                kube::core::WatchEvent::Deleted(job) => ("DELETED", job.0.metadata.clone()),
                kube::core::WatchEvent::Bookmark(_) => ("BOOKMARK", ObjectMeta::default()),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            kinds.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            ["MODIFIED", "DELETED", "BOOKMARK"]
        );
        assert!(kinds[1].1.deletion_timestamp.is_some());
    }

    #[test]
    fn a_condition_without_type_or_status_decodes_as_the_typed_api_decodes_it() {
        let text = json!({
            "metadata": {"name": "j", "namespace": "ns"},
            "status": {"conditions": [
                {"type": "Failed", "lastTransitionTime": "2016-05-19T10:30:00Z"},
                {"status": "True"}
            ]}
        })
        .to_string();
        let typed: Job = serde_json::from_str(&text).expect("the typed API decodes it");
        let SlimJob(slim) = serde_json::from_str(&text).expect("the cache decodes it too");
        assert_eq!(slim.status, typed.status);
    }

    #[test]
    fn the_pod_template_and_managed_fields_are_not_decoded() {
        let text = json!({
            "metadata": {"name": "j", "namespace": "ns", "managedFields": [{"manager": "m"}]},
            "spec": {"ttlSecondsAfterFinished": 60, "parallelism": 3,
                     "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"conditions": [{"type": "Complete", "status": "True",
                                       "reason": "Done", "message": "long text",
                                       "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
        })
        .to_string();
        let SlimJob(slim) = serde_json::from_str(&text).expect("decodes");
        let spec = slim.spec.expect("spec");
        assert_eq!(spec.ttl_seconds_after_finished, Some(60));
        assert_eq!(spec.parallelism, None);
        assert_eq!(spec.template, Default::default());
        assert_eq!(slim.metadata.managed_fields, None);
        let conditions = slim.status.and_then(|s| s.conditions).expect("conditions");
        assert_eq!(conditions[0].message, None);
        assert_eq!(conditions[0].type_, "Complete");
    }
}
