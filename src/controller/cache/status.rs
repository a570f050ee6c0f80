//! A CronJob's status as the caches keep it. `status.active` lists the running Jobs as whole
//! `ObjectReference`s (six strings each, ~0.35 KB); kept as written by the reconciler (a Job in
//! the CronJob's namespace named `<cronjob>-<minutes>` with a canonical UID), a reference is
//! two numbers in one shared allocation; so is a workload of another kind in the CronJob's
//! namespace, after an entry naming its kind (text shared by every status naming it).
//! Anything else (a manual run's name, a reference a user wrote) is kept whole. The conditions'
//! words and messages and `status.schedule` are text many CronJobs share ([`super::shared`]).
//! [`Status::to_status`] gives back exactly the status that was read.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::interned;
use super::uid::Uid;
use crate::api::CronJobStatus;

/// A cached status: every field of [`CronJobStatus`], `active`, `schedule` and `conditions`
/// compacted.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// Every other field; `active`, `schedule` and `conditions` are empty here.
    others: CronJobStatus,
    active: Box<[Active]>,
    schedule: Option<Arc<str>>,
    conditions: Box<[Cond]>,
}

/// A condition, its text shared.
#[derive(Debug, Clone, PartialEq)]
struct Cond {
    type_: Arc<str>,
    status: Arc<str>,
    reason: Arc<str>,
    message: Arc<str>,
    last_transition_time: Time,
    observed_generation: Option<i64>,
}

impl Cond {
    fn new(c: Condition) -> Self {
        Cond {
            type_: interned::text(&c.type_),
            status: interned::text(&c.status),
            reason: interned::text(&c.reason),
            message: interned::text(&c.message),
            last_transition_time: c.last_transition_time,
            observed_generation: c.observed_generation,
        }
    }

    fn to_condition(&self) -> Condition {
        Condition {
            type_: self.type_.to_string(),
            status: self.status.to_string(),
            reason: self.reason.to_string(),
            message: self.message.to_string(),
            last_transition_time: self.last_transition_time.clone(),
            observed_generation: self.observed_generation,
        }
    }
}

/// One entry of `status.active`.
#[derive(Debug, Clone, PartialEq)]
enum Active {
    /// A reference with exactly an `apiVersion`, a `kind` (those of the last [`Active::Kind`]
    /// before it, else `batch/v1` `Job`), the CronJob's namespace, a name and a UID.
    Job { name: Name, uid: Uid },
    /// `<apiVersion> <kind>` of the [`Active::Job`]s after it (no reference of its own).
    Kind(Arc<str>),
    /// Any other reference, whole.
    Other(Box<ObjectReference>),
}

/// A Job's name: `<cronjob>-<n>` (a scheduled run) as `n`, else the text.
#[derive(Debug, Clone, PartialEq)]
enum Name {
    Scheduled(u64),
    Text(Box<str>),
}

impl Name {
    fn new(name: String, cronjob: &str) -> Self {
        let scheduled = name
            .strip_prefix(cronjob)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<u64>().ok().filter(|v| v.to_string() == n));
        match scheduled {
            Some(n) => Name::Scheduled(n),
            None => Name::Text(name.into()),
        }
    }

    fn text(&self, cronjob: &str) -> String {
        match self {
            Name::Scheduled(n) => format!("{cronjob}-{n}"),
            Name::Text(t) => t.to_string(),
        }
    }
}

/// The kind in force before any [`Active::Kind`]: a Job reference the reconciler writes
/// (`job::job_ref`).
const JOB_TYPE: &str = "batch/v1 Job";

/// `<apiVersion> <kind>` of a plain reference (in `namespace`, a name and a UID, nothing
/// else), kept as two numbers after its kind.
fn kind_of_plain(r: &ObjectReference, namespace: Option<&str>) -> Option<String> {
    let (api_version, kind) = (r.api_version.as_deref()?, r.kind.as_deref()?);
    let plain = r.namespace.as_deref() == namespace
        && r.field_path.is_none()
        && r.resource_version.is_none()
        && r.name.is_some()
        && r.uid.is_some();
    let spaced = api_version.contains(' ') || kind.contains(' ');
    (plain && !spaced).then(|| format!("{api_version} {kind}"))
}

impl Active {
    /// A plain reference ([`kind_of_plain`]), its kind aside.
    fn plain(r: ObjectReference, cronjob: &str) -> Self {
        Active::Job {
            name: Name::new(r.name.unwrap_or_default(), cronjob),
            uid: Uid::new(r.uid.as_deref().unwrap_or_default()),
        }
    }

    /// The reference, `kind` being the last [`Active::Kind`] before it (else a Job's); none
    /// for a kind.
    fn to_reference(
        &self,
        cronjob: &str,
        namespace: Option<&str>,
        kind: &str,
    ) -> Option<ObjectReference> {
        match self {
            Active::Job { name, uid } => {
                let (api_version, kind) = kind.split_once(' ').unwrap_or_default();
                Some(ObjectReference {
                    api_version: Some(api_version.into()),
                    kind: Some(kind.into()),
                    name: Some(name.text(cronjob)),
                    namespace: namespace.map(Into::into),
                    uid: Some(uid.text()),
                    ..Default::default()
                })
            }
            Active::Kind(_) => None,
            Active::Other(r) => Some(ObjectReference::clone(r)),
        }
    }
}

impl Status {
    /// The status of the CronJob `cronjob` in `namespace`, compacted.
    pub fn new(mut status: CronJobStatus, cronjob: &str, namespace: Option<&str>) -> Self {
        let references = std::mem::take(&mut status.active);
        let mut active = Vec::with_capacity(references.len());
        let mut kind: Option<Arc<str>> = None;
        for r in references {
            match kind_of_plain(&r, namespace) {
                Some(k) => {
                    if kind.as_deref().unwrap_or(JOB_TYPE) != k {
                        let k = interned::text(&k);
                        active.push(Active::Kind(Arc::clone(&k)));
                        kind = Some(k);
                    }
                    active.push(Active::plain(r, cronjob));
                }
                None => active.push(Active::Other(Box::new(r))),
            }
        }
        let schedule = status.schedule.take().map(|s| interned::text(&s));
        let conditions = std::mem::take(&mut status.conditions)
            .into_iter()
            .map(Cond::new)
            .collect();
        Status {
            others: status,
            active: active.into(),
            schedule,
            conditions,
        }
    }

    /// The status as read, for the CronJob `cronjob` in `namespace` (those it was made with).
    pub fn to_status(&self, cronjob: &str, namespace: Option<&str>) -> CronJobStatus {
        let mut status = self.others.clone();
        let mut kind = JOB_TYPE;
        status.active = self
            .active
            .iter()
            .filter_map(|a| {
                if let Active::Kind(k) = a {
                    kind = k;
                }
                a.to_reference(cronjob, namespace, kind)
            })
            .collect();
        status.schedule = self.schedule.as_deref().map(String::from);
        status.conditions = self.conditions.iter().map(Cond::to_condition).collect();
        status
    }

    /// The reason of the condition `type_`, if the status has it.
    pub fn condition_reason(&self, type_: &str) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| &*c.type_ == type_)
            .map(|c| &*c.reason)
    }

    /// Every field but `active`, `schedule` and `conditions` (empty here; `active_count`
    /// counts `active`).
    pub fn others(&self) -> &CronJobStatus {
        &self.others
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CronJobStatus;
    use crate::testing::fixtures::t;

    fn job(name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("batch/v1".into()),
            kind: Some("Job".into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    const UUID: &str = "0f8e2a3c-1b4d-4e5f-a6b7-c8d9e0f1a2b3";

    #[test]
    fn every_reference_comes_back_as_it_was() {
        let mut odd_namespace = job("cj-29000000", UUID);
        odd_namespace.namespace = Some("other".into());
        let mut with_version = job("cj-29000000", UUID);
        with_version.resource_version = Some("7".into());
        let mut pod = job("cj-29000000", UUID);
        pod.kind = Some("Pod".into());
        let mut no_uid = job("cj-29000000", UUID);
        no_uid.uid = None;
        let mut jobset = job("cj-29000000", UUID);
        jobset.api_version = Some("jobset.x-k8s.io/v1alpha2".into());
        jobset.kind = Some("JobSet".into());
        let mut jobset_elsewhere = jobset.clone();
        jobset_elsewhere.namespace = Some("other".into());
        let mut no_kind = jobset.clone();
        no_kind.kind = None;
        let references = vec![
            job("cj-29000000", UUID),
            job("cj-0", UUID),
            job("cj-m1a2b3", UUID),
            job("cj-029000000", UUID),
            job("cj-18446744073709551616", UUID),
            job("cj-", UUID),
            job("other-29000000", UUID),
            job("cj-29000000", &UUID.to_uppercase()),
            job("cj-29000000", "not-a-uuid"),
            job("cj-29000000", "0f8e2a3c-1b4d-4e5f-a6b7-c8d9e0f1a2bg"),
            job("cj-29000000", "0f8e2a3c1b4d-4e5f-a6b7-c8d9e0f1a2b3-"),
            job("cj-29000000", ""),
            odd_namespace,
            with_version,
            pod,
            no_uid,
            jobset,
            jobset_elsewhere,
            no_kind,
            ObjectReference::default(),
        ];
        let status = CronJobStatus {
            active: references.clone(),
            active_count: 17,
            last_schedule_time: Some(Time(t("2026-01-01T00:00:00Z"))),
            observed_generation: Some(3),
            schedule: Some("* * * * *".into()),
            conditions: vec![Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Scheduled".into(),
                message: "m".into(),
                last_transition_time: Time(t("2026-01-01T00:00:00Z")),
                observed_generation: Some(3),
            }],
            ..Default::default()
        };
        let cached = Status::new(status.clone(), "cj", Some("ns"));
        assert_eq!(cached.to_status("cj", Some("ns")), status);
        let other = Status::new(status.clone(), "cj", Some("ns"));
        assert!(Arc::ptr_eq(
            &cached.conditions[0].message,
            &other.conditions[0].message
        ));
        assert!(cached.others().active.is_empty());
        assert!(cached.others().conditions.is_empty());
        assert_eq!(cached.others().active_count, 17);
        let compact = cached
            .active
            .iter()
            .filter(|a| {
                matches!(
                    a,
                    Active::Job {
                        name: Name::Scheduled(_),
                        uid: Uid::Uuid(_),
                    }
                )
            })
            .count();
        assert_eq!(
            compact, 4,
            "cj-29000000 and cj-0 with the canonical UID, and the Pod's and JobSet's"
        );
        // The Pod and the JobSet, each after its kind.
        let kinds: Vec<&str> = cached
            .active
            .iter()
            .filter_map(|a| match a {
                Active::Kind(k) => Some(&**k),
                _ => None,
            })
            .collect();
        assert_eq!(kinds, ["batch/v1 Pod", "jobset.x-k8s.io/v1alpha2 JobSet"]);
        let jobsets = [job("cj-29000000", UUID), job("cj-29000001", "x")].map(|mut r| {
            r.api_version = Some("jobset.x-k8s.io/v1alpha2".into());
            r.kind = Some("JobSet".into());
            r
        });
        let status = CronJobStatus {
            active: jobsets.to_vec(),
            ..Default::default()
        };
        let cached = Status::new(status.clone(), "cj", Some("ns"));
        assert_eq!(cached.to_status("cj", Some("ns")), status);
        let other = Status::new(status, "cj", Some("ns"));
        match (&*cached.active, &*other.active) {
            (
                [
                    Active::Kind(kind),
                    Active::Job {
                        name: Name::Scheduled(29_000_000),
                        uid: Uid::Uuid(_),
                    },
                    Active::Job { .. },
                ],
                [Active::Kind(same), ..],
            ) => assert!(Arc::ptr_eq(kind, same)),
            other => panic!("not compact: {other:?}"),
        }
    }
}
