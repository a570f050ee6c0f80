//! Step 2b: scheduled Jobs that failed in a row, and the failure policy
//! (`spec.failurePolicy.suspendAfterConsecutiveFailures`).
//!
//! `status.consecutiveFailures` counts the scheduled Jobs that finished `Failed` since the last
//! one that completed, or since the CronJob was resumed. A Job is counted when it leaves
//! `status.active` finished, in the status write that removes it: it leaves once, so a
//! reconcile repeated after a lost write counts it once. Jobs are taken in the order they
//! finished. Only Jobs that really failed count: an API error, a refused create, a Job deleted
//! while it ran, or a slot skipped by `concurrencyPolicy` changes nothing.
//!
//! Manual runs (`kubectl kronjob trigger`) neither count nor reset the count: the policy is
//! about what the schedule runs, and a manual run is typically a test while the schedule is
//! being fixed (or suspended); a failing test should not suspend a working schedule, and one
//! success should not hide scheduled runs that keep failing.
//!
//! When the count reaches the policy's limit on a CronJob that is not suspended, the plan
//! asks for the suspension ([`Suspension`]): the controller sets `spec.suspend: true` itself,
//! and the CronJob reads `Ready=False` reason `SuspendedAfterFailures` with the count and the
//! last failed Job. Resuming it (`spec.suspend` back to false while the condition says it was
//! suspended, by anyone) resets the count.

use jiff::Timestamp;

use super::scheduling::{self, Readiness};
use crate::api::{CronJob, CronJobStatus};
use crate::controller::cronjob::status::{self, CONDITION_READY, reason};
use crate::workload::Workload;
use crate::workload::{self, Outcome, Ran};

/// The count of scheduled Jobs that failed in a row, as of this reconcile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// `status.consecutiveFailures` to write.
    pub count: i32,
    /// The last scheduled Job counted as failed by this reconcile, if any.
    pub last_failed: Option<String>,
}

impl Tally {
    /// Count one finished scheduled Job: a failure adds one, a success resets.
    pub fn record(&mut self, name: &str, outcome: Outcome) {
        match outcome {
            Outcome::Complete => {
                self.count = 0;
                self.last_failed = None;
            }
            Outcome::Failed => {
                self.count = self.count.saturating_add(1);
                self.last_failed = Some(name.to_string());
            }
        }
    }
}

/// The failure policy's suspension, when the plan calls for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspension {
    /// Scheduled Jobs that failed in a row.
    pub count: i32,
    /// `suspendAfterConsecutiveFailures`.
    pub limit: i32,
    /// The last of them, when known.
    pub last_failed: Option<String>,
}

impl Suspension {
    /// The note of the Warning Event, and the message of the `Ready` condition.
    pub fn message(&self) -> String {
        failed_in_a_row(self.count, self.limit, self.last_failed.as_deref())
    }
}

fn failed_in_a_row(count: i32, limit: i32, last: Option<&str>) -> String {
    let jobs = if count == 1 { "Job" } else { "Jobs" };
    let last = last
        .map(|name| format!(", the last {name}"))
        .unwrap_or_default();
    format!(
        "{count} scheduled {jobs} failed in a row{last}: suspended by failurePolicy.suspendAfterConsecutiveFailures ({limit}); resume to schedule again"
    )
}

/// Whether `cj` was resumed since `old` was written: `spec.suspend` is false while the `Ready`
/// condition still says suspended.
pub fn resumed(cj: &CronJob, old: &CronJobStatus) -> bool {
    !cj.spec.is_suspended()
        && status::ready_of(old).is_some_and(|(_, why)| {
            why == reason::SUSPENDED || why == reason::SUSPENDED_AFTER_FAILURES
        })
}

/// The count after this reconcile: `old`'s (0 once resumed), then each scheduled Job of `owned`
/// that leaves `old.active` finished, in the order they finished (by name on a tie).
pub fn tally(cj: &CronJob, old: &CronJobStatus, owned: &[&Workload]) -> Tally {
    let start = if resumed(cj, old) {
        0
    } else {
        old.consecutive_failures.max(0)
    };
    let mut tally = Tally {
        count: start,
        last_failed: None,
    };
    let mut finished: Vec<(Option<Timestamp>, &str, Outcome)> = old
        .active
        .iter()
        .filter_map(|listed| {
            let job = owned
                .iter()
                .find(|j| listed.uid.is_some() && j.metadata.uid == listed.uid)?;
            let done = scheduled_finish(job)?;
            Some((done.at, job.metadata.name.as_deref()?, done.outcome))
        })
        .collect();
    finished.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (_, name, outcome) in finished {
        tally.record(name, outcome);
    }
    tally
}

/// How a scheduled run ended; `None` for a running Job, a manual run or a stranger.
fn scheduled_finish(job: &Workload) -> Option<workload::Finish> {
    matches!(workload::ran_for(&job.metadata), Ran::Scheduled(_))
        .then(|| job.finish)
        .flatten()
}

/// Count the Job of a slot this status records for the first time (created before a status
/// write that was lost, or by a process that died before writing it): if it already finished,
/// it never joins `status.active`, so it is counted here, once (the same write records the
/// slot).
pub fn record_unlisted(tally: &mut Tally, old: &CronJobStatus, job: &Workload) {
    let listed = old
        .active
        .iter()
        .any(|r| r.uid.is_some() && r.uid == job.metadata.uid);
    if let (false, Some(done)) = (listed, scheduled_finish(job)) {
        tally.record(
            job.metadata.name.as_deref().unwrap_or_default(),
            done.outcome,
        );
    }
}

/// The suspension the failure policy calls for: its limit is reached and the CronJob is
/// neither suspended nor being deleted.
pub fn suspension(cj: &CronJob, tally: &Tally) -> Option<Suspension> {
    let limit = cj.spec.suspend_after_failures()?;
    let due = limit >= 1
        && tally.count >= limit
        && !cj.spec.is_suspended()
        && cj.metadata.deletion_timestamp.is_none();
    due.then(|| Suspension {
        count: tally.count,
        limit,
        last_failed: tally.last_failed.clone(),
    })
}

/// The `Ready` condition of a CronJob that is suspended (or is being suspended by the policy):
/// `SuspendedAfterFailures` while the count is at the policy's limit, else `Suspended`. The
/// message names the last failed Job: the one counted now, else the one the condition named
/// when nothing changed since, else the newest failed scheduled Job still there.
pub fn suspended(cj: &CronJob, tally: &Tally, owned: &[&Workload]) -> Readiness {
    let Some(limit) = cj.spec.suspend_after_failures() else {
        return scheduling::suspended();
    };
    if limit < 1 || tally.count < limit {
        return scheduling::suspended();
    }
    let kept = cj.status.as_ref().and_then(|old| {
        old.conditions.iter().find(|c| {
            c.type_ == CONDITION_READY
                && c.reason == reason::SUSPENDED_AFTER_FAILURES
                && old.consecutive_failures == tally.count
        })
    });
    let message = match (&tally.last_failed, kept) {
        (Some(last), _) => failed_in_a_row(tally.count, limit, Some(last)),
        (None, Some(condition)) => condition.message.clone(),
        (None, None) => failed_in_a_row(tally.count, limit, newest_failure(owned)),
    };
    Readiness::not_ready(reason::SUSPENDED_AFTER_FAILURES, message, None)
}

/// The newest scheduled Job among `owned` that failed.
fn newest_failure<'a>(owned: &[&'a Workload]) -> Option<&'a str> {
    owned
        .iter()
        .filter_map(|j| {
            let done = scheduled_finish(j)?;
            (done.outcome == Outcome::Failed).then_some((done.at, j.metadata.name.as_deref()?))
        })
        .max()
        .map(|(_, name)| name)
}
