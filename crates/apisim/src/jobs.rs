//! A crude Job controller. Like kube-controller-manager's, it syncs new Jobs with a few workers
//! ([`crate::JOB_WORKERS`]): each sync writes the Job's status (`startTime`, `active: 1`), so a
//! Job is MODIFIED shortly after it is created. With
//! [`CostModel::job_controller_writes`](crate::CostModel::job_controller_writes) its writes (a
//! Pod create, an Event on the side, the status) take their share of the API server's capacity.
//! It completes Jobs after a set duration, or when told.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::route::{ResKey, Route};
use crate::store::meta_str;
use crate::{ApiSim, Inner, lock};

fn jobs() -> ResKey {
    ResKey::new("batch", "jobs")
}

/// Whether a Job status has a true Complete or Failed condition.
fn finished(status: &Map<String, Value>) -> bool {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                matches!(c["type"].as_str(), Some("Complete" | "Failed")) && c["status"] == "True"
            })
        })
}

/// Starts a just-created Job and completes it after the configured duration, if any.
pub(crate) fn on_create(inner: &Arc<Inner>, route: &Route, job: &Value) {
    if route.res != jobs()
        || !inner
            .job_controller
            .load(std::sync::atomic::Ordering::SeqCst)
    {
        return;
    }
    let duration = *lock(&inner.job_duration);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (ns, name, uid) = (
        meta_str(job, "namespace").to_string(),
        meta_str(job, "name").to_string(),
        meta_str(job, "uid").to_string(),
    );
    let inner = inner.clone();
    runtime.spawn(async move {
        let worker = Arc::clone(&inner.job_workers).acquire_owned().await;
        if inner.cost.job_controller_writes {
            // The Pod create; its Event goes out on the side; then the status write.
            inner.pay(true).await;
            let events = inner.clone();
            tokio::spawn(async move { events.pay(true).await });
            inner.pay(true).await;
        }
        inner.write_job_status(&ns, &name, Some(&uid), |status, now| {
            if status.contains_key("startTime") {
                return false;
            }
            status.insert("startTime".into(), json!(now));
            status.insert("active".into(), json!(1));
            status.insert("ready".into(), json!(0));
            status.insert("terminating".into(), json!(0));
            true
        });
        drop(worker);
        if let Some(duration) = duration {
            tokio::time::sleep(duration).await;
            inner.finish_job(&ns, &name, Some(&uid), true);
        }
    });
}

impl Inner {
    /// Rewrites a Job's status (if `f` says so), retrying when raced; false when not written.
    fn write_job_status(
        &self,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        f: impl Fn(&mut Map<String, Value>, &str) -> bool,
    ) -> bool {
        let res = jobs();
        let now = self.now_seconds();
        loop {
            let Some(stored) = lock(&self.store).get(&res, ns, name) else {
                return false;
            };
            if uid.is_some_and(|u| u != meta_str(&stored, "uid")) {
                return false;
            }
            let mut job = stored.as_object().cloned().unwrap_or_default();
            let mut status = job
                .get("status")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if !f(&mut status, &now) {
                return false;
            }
            job.insert("status".into(), Value::Object(status));
            let written = self.with_store(|s| match s.get(&res, ns, name) {
                Some(current) if Arc::ptr_eq(&current, &stored) => {
                    s.put(&res, job);
                    true
                }
                _ => false,
            });
            if written {
                return true;
            }
        }
    }

    fn finish_job(&self, ns: &str, name: &str, uid: Option<&str>, succeeded: bool) -> bool {
        self.write_job_status(ns, name, uid, |status, now| {
            if finished(status) {
                return false;
            }
            let condition = |ty: &str, reason: &str, message: &str| {
                json!({"type": ty, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
                    "reason": reason, "message": message})
            };
            status.entry("startTime").or_insert_with(|| json!(now));
            status.remove("active");
            status.insert("ready".into(), json!(0));
            status.insert("terminating".into(), json!(0));
            let conditions = if succeeded {
                status.insert("succeeded".into(), json!(1));
                status.insert("completionTime".into(), json!(now));
                let message = "Reached expected number of succeeded pods";
                [condition("SuccessCriteriaMet", "CompletionsReached", message), condition("Complete", "CompletionsReached", message)]
            } else {
                status.insert("failed".into(), json!(1));
                let message = "Job has reached the specified backoff limit";
                [condition("FailureTarget", "BackoffLimitExceeded", message), condition("Failed", "BackoffLimitExceeded", message)]
            };
            status.insert("conditions".into(), json!(conditions));
            true
        })
    }
}

impl ApiSim {
    /// Switch the Job controller off (for tests that count resourceVersions) or on (default).
    pub fn with_job_controller(self, on: bool) -> Self {
        self.inner
            .job_controller
            .store(on, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// Jobs created while this is set complete after `duration`: succeeded 1, completionTime,
    /// conditions SuccessCriteriaMet and Complete (every Job starts, status startTime and
    /// active 1, after the Job controller's three writes). Times come from the clock.
    pub fn set_job_duration(&self, duration: Option<Duration>) {
        *lock(&self.inner.job_duration) = duration;
    }

    /// Finishes a Job now: Complete (as above) or Failed (failed 1, conditions FailureTarget and
    /// Failed). False if there is no such Job or it already finished.
    pub fn finish_job(&self, namespace: &str, name: &str, succeeded: bool) -> bool {
        self.inner.finish_job(namespace, name, None, succeeded)
    }
}
