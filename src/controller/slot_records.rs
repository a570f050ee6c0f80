//! What the TTL controller asks the CronJob controller before deleting a scheduled Job: does
//! the API server store a status that records the Job's slot? Until it does, the Job is the
//! only durable record that its slot ran (the status write may lag behind the create, and the
//! process may die before it lands); deleting it then would let a new leader run the slot
//! again. The CronJob controller installs the answer (its CronJob cache and what its status
//! writer knows newer than that cache); the TTL controller asks.

use std::sync::{Arc, RwLock};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::workload;

/// `lastScheduleTime` of the CronJob `namespace/name` of UID `uid`, as the API server stores
/// it: `Err(Unknown)` while the CronJob cache has not listed, `Ok(None)` when no such CronJob
/// is cached (deleted, or recreated under another UID), `Ok(Some(time))` otherwise.
pub type Lookup =
    dyn Fn(&str, &str, &str) -> Result<Option<Option<Timestamp>>, Unknown> + Send + Sync;

/// The CronJob cache has not listed yet: nothing is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unknown;

/// The shared handle: cheap to clone; empty until the CronJob controller installs its lookup
/// (each leadership term installs its own).
#[derive(Clone, Default)]
pub struct SlotRecords {
    lookup: Arc<RwLock<Option<Box<Lookup>>>>,
}

impl std::fmt::Debug for SlotRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotRecords")
            .field("installed", &self.read().is_some())
            .finish()
    }
}

impl SlotRecords {
    /// Answer with `lookup` from now on.
    pub fn install(&self, lookup: Box<Lookup>) {
        *self.lookup.write().unwrap_or_else(|e| e.into_inner()) = Some(lookup);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<Box<Lookup>>> {
        self.lookup.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the workload of `meta` may be deleted without its slot ever running again: one
    /// that ran no slot, or whose CronJob is gone, may; a scheduled one of a cached CronJob may
    /// once the stored status records its slot. `false` while nothing is known.
    pub fn deletable(&self, meta: &ObjectMeta) -> bool {
        if workload::slot_of(meta).is_none() {
            return true;
        }
        let (Some(uid), Some(namespace)) =
            (workload::controller_uid(meta), meta.namespace.as_deref())
        else {
            return true;
        };
        let Some(owner) = meta
            .owner_references
            .as_deref()
            .and_then(|refs| refs.iter().find(|r| r.uid == uid))
        else {
            return true;
        };
        let lookup = self.read();
        let Some(lookup) = lookup.as_ref() else {
            return false;
        };
        match lookup(namespace, &owner.name, uid) {
            Err(Unknown) => false,
            Ok(None) => true,
            Ok(Some(stored)) => workload::slot_recorded(meta, stored),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{CJ, CJ_UID, JobFixture, NS, job, t};

    #[test]
    fn a_scheduled_job_waits_for_the_status_that_records_its_slot() {
        let scheduled = job("cj-1").scheduled_for("2016-05-19T10:00:00Z");
        let manual = job("cj-m1").manual();
        let records = SlotRecords::default();
        assert!(!records.deletable(&scheduled.metadata), "nothing known yet");
        assert!(
            records.deletable(&manual.metadata),
            "no slot hangs on a manual run"
        );
        let stored = Arc::new(std::sync::Mutex::new(Err(Unknown)));
        let answer = Arc::clone(&stored);
        records.install(Box::new(move |ns, name, uid| {
            assert_eq!((ns, name, uid), (NS, CJ, CJ_UID));
            *answer.lock().expect("lock")
        }));
        let cases = [
            ("the cache has not listed", Err(Unknown), false),
            ("the CronJob is gone", Ok(None), true),
            ("nothing stored", Ok(Some(None)), false),
            (
                "an earlier slot stored",
                Ok(Some(Some(t("2016-05-19T09:00:00Z")))),
                false,
            ),
            (
                "its slot stored",
                Ok(Some(Some(t("2016-05-19T10:00:00Z")))),
                true,
            ),
        ];
        for (name, answer, want) in cases {
            *stored.lock().expect("lock") = answer;
            assert_eq!(records.deletable(&scheduled.metadata), want, "{name}");
        }
        assert!(records.deletable(&job("stranger").orphan().scheduled().metadata));
    }
}
