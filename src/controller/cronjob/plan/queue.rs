//! Step 3b: the Enqueue policy's queue (`status.queued`, oldest first). A slot that falls due
//! while a Job of the CronJob runs (or while older slots wait) joins the queue; when no Job
//! runs and the CronJob schedules, the oldest queued slot starts, as its own scheduled time
//! (its Job is named and annotated as that slot's, so it can never run twice). The queue is
//! bounded by `spec.queue`; a full queue drops per `whenFull` with a Warning Event `QueueFull`,
//! a slot past `startingDeadlineSeconds` is dropped as missed (`MissSchedule`), and a policy
//! other than Enqueue clears the queue (`QueueCleared`). Suspension keeps the queue: it resumes
//! with the CronJob.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use kube::runtime::events::EventType;

use super::{Action, event, events};
use crate::api::{ConcurrencyPolicy, CronJob, WhenFull};
use crate::schedule;
use crate::workload;
use crate::workload::Workload;

/// Why a queued slot was dropped (the `reason` label of `kronjob_queue_dropped_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The queue was full when a slot fell due (`whenFull` says which slot went).
    Full(WhenFull),
    /// `startingDeadlineSeconds` passed while the slot waited.
    Missed,
    /// The policy is no longer Enqueue.
    Cleared,
}

impl Dropped {
    /// The metric's `reason` label.
    pub fn reason(self) -> &'static str {
        match self {
            Dropped::Full(_) => "full",
            Dropped::Missed => "missed",
            Dropped::Cleared => "cleared",
        }
    }

    /// The metric's `policy` label: the `whenFull` of a full queue, else empty.
    pub fn policy(self) -> &'static str {
        match self {
            Dropped::Full(w) => w.as_str(),
            Dropped::Missed | Dropped::Cleared => "",
        }
    }
}

/// The queued slots of `cj` still waiting: those of its status, without the ones that have
/// started (a scheduled Job of that slot exists, or this process started it: `dequeued`, the
/// latest queued slot it started, whatever became of the status write that dequeued it).
pub fn waiting(cj: &CronJob, owned: &[&Workload], dequeued: Option<Timestamp>) -> Vec<Timestamp> {
    let Some(status) = cj.status.as_ref() else {
        return Vec::new();
    };
    let mut queued: Vec<Timestamp> = status
        .queued
        .iter()
        .map(|t| t.0)
        .filter(|slot| dequeued.is_none_or(|d| *slot > d))
        .filter(|slot| {
            !owned
                .iter()
                .any(|j| workload::slot_of(&j.metadata) == Some(*slot))
        })
        .collect();
    queued.sort();
    queued.dedup();
    queued
}

/// What the queue step sees.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The CronJob.
    pub cj: &'a CronJob,
    /// The queue as [`waiting`] gives it.
    pub waiting: Vec<Timestamp>,
    /// The slot the scheduling step queued (it fell due while a Job ran or slots waited).
    pub enqueue: Option<Timestamp>,
    /// Whether a Job of the CronJob runs.
    pub active: bool,
    /// Whether the CronJob schedules (valid, not suspended, not being deleted).
    pub schedules: bool,
    /// The CronJob's time zone, for naming slots in Events.
    pub tz: &'a TimeZone,
}

/// What the queue step decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The queue to record, oldest first. A slot that starts stays in it until its Job is
    /// created (a failed create leaves it queued).
    pub queued: Vec<Timestamp>,
    /// The queued slot to start now, the oldest.
    pub start: Option<Timestamp>,
    /// `QueueFull`, `QueueCleared` and `MissSchedule` Events.
    pub events: Vec<Action>,
    /// The slots dropped and why.
    pub dropped: Vec<(Timestamp, Dropped)>,
}

/// Decide the queue for `input` at `now`.
pub fn step(input: Input<'_>, now: Timestamp) -> Step {
    let Input {
        cj,
        waiting,
        enqueue,
        active,
        schedules,
        tz,
    } = input;
    let at = |slot: Timestamp| schedule::scheduled_at(slot, tz);
    let mut out = Step::default();
    let mut queue = waiting;
    if cj.spec.concurrency_policy != ConcurrencyPolicy::Enqueue {
        if !queue.is_empty() {
            let slots: Vec<String> = queue.iter().map(|s| at(*s).to_string()).collect();
            out.events.push(event(
                EventType::Warning,
                events::QUEUE_CLEARED,
                format!(
                    "Dropped {} queued slot(s), concurrencyPolicy is {}: {}",
                    queue.len(),
                    cj.spec.concurrency_policy.as_str(),
                    slots.join(", ")
                ),
            ));
            out.dropped = queue.iter().map(|s| (*s, Dropped::Cleared)).collect();
        }
        return out;
    }
    let bound = cj.spec.queue.clone().unwrap_or_default();
    if let Some(slot) = enqueue.filter(|s| !queue.contains(s)) {
        if queue.len() >= bound.limit() {
            let when_full = bound.when_full();
            let gone = match when_full {
                WhenFull::DropOldest => {
                    let oldest = queue.remove(0);
                    queue.push(slot);
                    oldest
                }
                WhenFull::DropNewest => slot,
            };
            out.events.push(event(
                EventType::Warning,
                events::QUEUE_FULL,
                format!(
                    "Dropped scheduled time {}: the queue holds {} slot(s) (whenFull: {})",
                    at(gone),
                    bound.limit(),
                    when_full.as_str()
                ),
            ));
            out.dropped.push((gone, Dropped::Full(when_full)));
        } else {
            queue.push(slot);
        }
    }
    if schedules && !active {
        let deadline = cj.spec.starting_deadline_seconds;
        while let Some(&oldest) = queue.first() {
            let late = deadline.is_some_and(|d| {
                oldest
                    .checked_add(jiff::SignedDuration::from_secs(d))
                    .is_ok_and(|by| now > by)
            });
            if !late {
                out.start = Some(oldest);
                break;
            }
            queue.remove(0);
            out.events.push(event(
                EventType::Warning,
                events::MISS_SCHEDULE,
                format!("Missed scheduled time to start a job: {}", at(oldest)),
            ));
            out.dropped.push((oldest, Dropped::Missed));
        }
    }
    out.queued = queue;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::QueueSpec;
    use crate::testing::fixtures::{JobFixture, cronjob, job, t};
    use crate::workload::Workload;

    const T0: &str = "2024-01-01T10:00:00Z";
    const T1: &str = "2024-01-01T10:01:00Z";
    const T2: &str = "2024-01-01T10:02:00Z";
    const T3: &str = "2024-01-01T10:03:00Z";

    struct Case {
        name: &'static str,
        policy: ConcurrencyPolicy,
        bound: Option<QueueSpec>,
        deadline: Option<i64>,
        waiting: Vec<&'static str>,
        enqueue: Option<&'static str>,
        active: bool,
        schedules: bool,
        now: &'static str,
        queued: Vec<&'static str>,
        start: Option<&'static str>,
        events: Vec<&'static str>,
        dropped: Vec<(&'static str, Dropped)>,
    }

    impl Default for Case {
        fn default() -> Self {
            Case {
                name: "",
                policy: ConcurrencyPolicy::Enqueue,
                bound: None,
                deadline: None,
                waiting: vec![],
                enqueue: None,
                active: true,
                schedules: true,
                now: "2024-01-01T10:03:05Z",
                queued: vec![],
                start: None,
                events: vec![],
                dropped: vec![],
            }
        }
    }

    fn bound(max: i32, when_full: WhenFull) -> Option<QueueSpec> {
        Some(QueueSpec {
            max_queued: Some(max),
            when_full: Some(when_full),
        })
    }

    #[test]
    fn queue_table() {
        use Dropped::*;
        use WhenFull::*;
        let cases = vec![
            Case {
                name: "due with a Job active: queued",
                enqueue: Some(T1),
                queued: vec![T1],
                ..Default::default()
            },
            Case {
                name: "queued behind older slots, oldest first",
                waiting: vec![T0, T1],
                enqueue: Some(T2),
                queued: vec![T0, T1, T2],
                ..Default::default()
            },
            Case {
                name: "queued again (a stale read): once",
                waiting: vec![T1],
                enqueue: Some(T1),
                queued: vec![T1],
                ..Default::default()
            },
            Case {
                name: "the Job finished: the oldest starts, and stays queued until created",
                waiting: vec![T0, T1],
                active: false,
                queued: vec![T0, T1],
                start: Some(T0),
                ..Default::default()
            },
            Case {
                name: "a slot due with none active but slots waiting queues behind them",
                waiting: vec![T0],
                enqueue: Some(T1),
                active: false,
                queued: vec![T0, T1],
                start: Some(T0),
                ..Default::default()
            },
            Case {
                name: "full, DropOldest: the oldest goes",
                bound: bound(2, DropOldest),
                waiting: vec![T0, T1],
                enqueue: Some(T2),
                queued: vec![T1, T2],
                events: vec!["QueueFull"],
                dropped: vec![(T0, Full(DropOldest))],
                ..Default::default()
            },
            Case {
                name: "full, DropNewest: the new slot goes",
                bound: bound(2, DropNewest),
                waiting: vec![T0, T1],
                enqueue: Some(T2),
                queued: vec![T0, T1],
                events: vec!["QueueFull"],
                dropped: vec![(T2, Full(DropNewest))],
                ..Default::default()
            },
            Case {
                name: "the default bound is 10",
                waiting: vec![T0; 1],
                enqueue: Some(T1),
                queued: vec![T0, T1],
                ..Default::default()
            },
            Case {
                name: "deadline passed in the queue: dropped as missed, the next starts",
                deadline: Some(150),
                waiting: vec![T0, T1, T2],
                active: false,
                // 10:03:05 is 185 s after T0, 125 s after T1.
                queued: vec![T1, T2],
                start: Some(T1),
                events: vec!["MissSchedule"],
                dropped: vec![(T0, Missed)],
                ..Default::default()
            },
            Case {
                name: "deadline: kept while a Job runs (checked when it would start)",
                deadline: Some(10),
                waiting: vec![T0],
                queued: vec![T0],
                ..Default::default()
            },
            Case {
                name: "every slot too late: the queue empties",
                deadline: Some(1),
                waiting: vec![T0, T1],
                active: false,
                events: vec!["MissSchedule", "MissSchedule"],
                dropped: vec![(T0, Missed), (T1, Missed)],
                ..Default::default()
            },
            Case {
                name: "suspended: the queue stays, nothing starts",
                waiting: vec![T0, T1],
                active: false,
                schedules: false,
                queued: vec![T0, T1],
                ..Default::default()
            },
            Case {
                name: "policy changed away from Enqueue: cleared with an Event",
                policy: ConcurrencyPolicy::Forbid,
                waiting: vec![T0, T1],
                active: false,
                events: vec!["QueueCleared"],
                dropped: vec![(T0, Cleared), (T1, Cleared)],
                ..Default::default()
            },
            Case {
                name: "another policy, nothing queued: nothing",
                policy: ConcurrencyPolicy::Allow,
                active: false,
                ..Default::default()
            },
        ];
        for case in cases {
            let mut cj = cronjob("* * * * *");
            cj.spec.concurrency_policy = case.policy;
            cj.spec.queue = case.bound.clone();
            cj.spec.starting_deadline_seconds = case.deadline;
            let input = Input {
                cj: &cj,
                waiting: case.waiting.iter().map(|s| t(s)).collect(),
                enqueue: case.enqueue.map(t),
                active: case.active,
                schedules: case.schedules,
                tz: &TimeZone::UTC,
            };
            let got = step(input, t(case.now));
            let want: Vec<Timestamp> = case.queued.iter().map(|s| t(s)).collect();
            assert_eq!(got.queued, want, "{}: queued", case.name);
            assert_eq!(got.start, case.start.map(t), "{}: start", case.name);
            let reasons: Vec<&str> = got
                .events
                .iter()
                .filter_map(|a| match a {
                    Action::Event { reason, .. } => Some(*reason),
                    _ => None,
                })
                .collect();
            assert_eq!(reasons, case.events, "{}: events", case.name);
            let dropped: Vec<(Timestamp, Dropped)> =
                case.dropped.iter().map(|(s, d)| (t(s), *d)).collect();
            assert_eq!(got.dropped, dropped, "{}: dropped", case.name);
        }
    }

    #[test]
    fn a_full_queue_names_the_dropped_slot() {
        let mut cj = cronjob("* * * * *");
        cj.spec.concurrency_policy = ConcurrencyPolicy::Enqueue;
        cj.spec.queue = bound(1, WhenFull::DropOldest);
        let got = step(
            Input {
                cj: &cj,
                waiting: vec![t(T0)],
                enqueue: Some(t(T1)),
                active: true,
                schedules: true,
                tz: &TimeZone::UTC,
            },
            t(T3),
        );
        let Some(Action::Event { note, .. }) = got.events.first() else {
            panic!("an Event");
        };
        assert!(note.contains("2024-01-01T10:00:00Z"), "{note}");
    }

    #[test]
    fn waiting_leaves_out_started_slots() {
        let mut cj = cronjob("* * * * *");
        cj.spec.concurrency_policy = ConcurrencyPolicy::Enqueue;
        let mut status = cj.status.clone().unwrap_or_default();
        status.set_queued(
            [T0, T1, T2, T3]
                .iter()
                .map(|s| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(s)))
                .collect(),
        );
        cj.status = Some(status);
        let started: Workload = job("cj-x").scheduled_for(T2).into();
        let owned = vec![&started];
        // T0 started by this process (its status write pending); T2's Job exists.
        assert_eq!(waiting(&cj, &owned, Some(t(T0))), vec![t(T1), t(T3)]);
        assert_eq!(waiting(&cj, &[], None).len(), 4);
    }
}
