//! Step 4: manual runs. `kubectl kronjob trigger` asks for one by writing the time it is for
//! into the CronJob's [`ANNOTATION_TRIGGER`] (now, or a later time with `--at` / `--in`; several
//! may wait, see [`crate::api::trigger`]); the controller creates the Job of each time that has
//! come, with the same TTL policy as scheduled runs, then rewrites the annotation without it
//! (only if unchanged). A time still to come is looked at again when it comes. The Job's name
//! derives from the time, so a request is never run twice, however often it is seen.

use jiff::Timestamp;
use kube::runtime::events::EventType;

use super::{Action, PlanConfig, event};
use crate::api::{ANNOTATION_TRIGGER, CronJob, trigger};
use crate::workload;
use crate::workload::{NewWorkload, Workload};

/// Event reason of a trigger annotation entry that is not a time (or too far ahead).
pub const INVALID_TRIGGER: &str = "InvalidTrigger";

/// The manual runs asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Manual {
    /// The annotation's value: rewritten (only if unchanged) once the due runs are created.
    pub request: String,
    /// The Jobs to create now: the due times' whose Job does not exist yet, oldest first.
    pub jobs: Vec<NewWorkload>,
    /// What the annotation becomes once they are: the times still to come (`None`: removed).
    pub remaining: Option<String>,
    /// The first time still to come: look again then.
    pub next: Option<Timestamp>,
}

impl Manual {
    /// Whether the annotation is to be rewritten (or removed).
    pub fn rewrites(&self) -> bool {
        self.remaining.as_deref() != Some(self.request.as_str())
    }
}

/// The manual runs of `cj` at `now`, if its trigger annotation is set, and the Warning for
/// entries that are not RFC 3339 times (or are more than a year ahead, or too many): those are
/// removed. `owned` are the Jobs `cj` controls. A CronJob being deleted runs nothing.
pub fn requested(
    cj: &CronJob,
    owned: &[&Workload],
    now: Timestamp,
    cfg: &PlanConfig,
) -> (Option<Manual>, Option<Action>) {
    let Some(request) = cj
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_TRIGGER))
    else {
        return (None, None);
    };
    let requests = trigger::parse(request, now);
    let warning = (!requests.refused.is_empty()).then(|| {
        let why = requests.refused.join("; ");
        event(
            EventType::Warning,
            INVALID_TRIGGER,
            format!("Annotation {ANNOTATION_TRIGGER} must hold RFC 3339 times at most a year ahead: {why}; removed"),
        )
    });
    if cj.metadata.deletion_timestamp.is_some() {
        return (None, None);
    }
    let Some(cronjob) = cj.metadata.name.as_deref() else {
        return (None, None);
    };
    let exists = |at: Timestamp| {
        let name = workload::manual_name(cronjob, at);
        owned
            .iter()
            .any(|j| j.metadata.name.as_deref() == Some(&name))
    };
    let jobs = requests
        .due(now)
        .filter(|at| !exists(*at))
        .filter_map(|at| workload::manual(cj, at, cfg.default_job_ttl))
        .collect();
    let later: Vec<Timestamp> = requests
        .times
        .iter()
        .copied()
        .filter(|t| *t > now)
        .collect();
    // Nothing due and nothing refused: the request stays as written (no write).
    let unchanged = requests.refused.is_empty() && later.len() == requests.times.len();
    let remaining = if unchanged {
        Some(request.clone())
    } else {
        trigger::format(&later)
    };
    let manual = Manual {
        request: request.clone(),
        jobs,
        remaining,
        next: requests.next(now),
    };
    (Some(manual), warning)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::{ANNOTATION_INSTANTIATE, ANNOTATION_SCHEDULED_AT};
    use crate::testing::fixtures::{CJ, cronjob, job, t};
    use crate::workload::Workload;
    use crate::workload::manual_name;

    const AT: &str = "2026-11-25T09:40:12Z";
    const LATER: &str = "2026-11-25T11:00:00Z";

    /// One case; what it leaves out is absent, false or empty.
    #[derive(Default)]
    struct Case {
        what: &'static str,
        annotation: Option<&'static str>,
        now: &'static str,
        deleting: bool,
        /// Jobs that exist, by their time.
        exist: &'static [&'static str],
        /// The times whose Jobs are created; `None`: no manual runs at all.
        creates: Option<&'static [&'static str]>,
        remaining: Option<&'static str>,
        next: Option<&'static str>,
        warns: bool,
    }

    fn case(what: &'static str) -> Case {
        Case {
            what,
            now: AT,
            ..Case::default()
        }
    }

    #[test]
    fn table() {
        let cfg = PlanConfig {
            default_job_ttl: Some(600),
        };
        let both = "2026-11-25T09:40:12Z,2026-11-25T11:00:00Z";
        let cases = [
            case("no annotation"),
            Case {
                annotation: Some(AT),
                creates: Some(&[AT]),
                ..case("a request now")
            },
            Case {
                annotation: Some(AT),
                exist: &[AT],
                creates: Some(&[]),
                ..case("already created: only removed")
            },
            Case {
                annotation: Some("now"),
                creates: Some(&[]),
                warns: true,
                ..case("not a time: removed with a Warning")
            },
            Case {
                annotation: Some(AT),
                deleting: true,
                ..case("being deleted")
            },
            Case {
                annotation: Some(LATER),
                now: "2026-11-25T10:59:59Z",
                creates: Some(&[]),
                remaining: Some(LATER),
                next: Some(LATER),
                ..case("a second before its time: nothing, look again then")
            },
            Case {
                annotation: Some("2026-11-25T12:00:00Z, 2026-11-25T11:00:00Z"),
                creates: Some(&[]),
                remaining: Some("2026-11-25T12:00:00Z, 2026-11-25T11:00:00Z"),
                next: Some(LATER),
                ..case("two to come, as written by hand: left as written")
            },
            Case {
                annotation: Some(LATER),
                now: LATER,
                creates: Some(&[LATER]),
                ..case("at its time")
            },
            Case {
                annotation: Some(LATER),
                now: "2026-11-25T11:00:00.5Z",
                creates: Some(&[LATER]),
                ..case("just after its time")
            },
            Case {
                annotation: Some(LATER),
                now: "2026-11-25T15:00:00Z",
                creates: Some(&[LATER]),
                ..case("long after (the manager was away): runs late, once")
            },
            Case {
                annotation: Some(both),
                creates: Some(&[AT]),
                remaining: Some(LATER),
                next: Some(LATER),
                ..case("two: the due one runs, the other waits")
            },
            Case {
                annotation: Some(both),
                now: LATER,
                exist: &[AT],
                creates: Some(&[LATER]),
                ..case("two: the first ran before a restart, the second now")
            },
            Case {
                annotation: Some("2026-11-25T09:00:00Z,2026-11-25T09:30:00Z"),
                creates: Some(&["2026-11-25T09:00:00Z", "2026-11-25T09:30:00Z"]),
                ..case("two due at once (the manager was away): both, oldest first")
            },
            Case {
                annotation: Some("2027-12-01T00:00:00Z,2026-11-25T11:00:00Z"),
                creates: Some(&[]),
                remaining: Some(LATER),
                next: Some(LATER),
                warns: true,
                ..case("more than a year ahead: removed with a Warning, the other kept")
            },
        ];
        for case in cases {
            let what = case.what;
            let mut cj = cronjob("*/5 * * * *");
            if let Some(value) = case.annotation {
                cj.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(ANNOTATION_TRIGGER.to_string(), value.to_string());
            }
            if case.deleting {
                cj.metadata.deletion_timestamp = Some(Time(t(AT)));
            }
            let existing: Vec<Workload> = case
                .exist
                .iter()
                .map(|at| job(&manual_name(CJ, t(at))).into())
                .collect();
            let owned: Vec<&Workload> = existing.iter().collect();
            let now = t(case.now);
            let (manual, warning) = requested(&cj, &owned, now, &cfg);
            // A restart plans from the same objects: the same plan.
            assert_eq!(
                requested(&cj, &owned, now, &cfg),
                (manual.clone(), warning.clone()),
                "{what}"
            );
            assert_eq!(warning.is_some(), case.warns, "{what}");
            let Some(manual) = manual else {
                assert_eq!(case.creates, None, "{what}");
                continue;
            };
            assert_eq!(Some(manual.request.as_str()), case.annotation, "{what}");
            let names: Vec<_> = manual
                .jobs
                .iter()
                .map(|j| j.metadata().name.clone().unwrap_or_default())
                .collect();
            let want: Vec<_> = case
                .creates
                .unwrap_or_default()
                .iter()
                .map(|at| manual_name(CJ, t(at)))
                .collect();
            assert_eq!(names, want, "{what}");
            assert_eq!(manual.remaining.as_deref(), case.remaining, "{what}");
            assert_eq!(manual.next, case.next.map(t), "{what}");
            for (job, at) in manual.jobs.iter().zip(case.creates.unwrap_or_default()) {
                let annotations = job.metadata().annotations.clone().unwrap_or_default();
                let instantiate = annotations.get(ANNOTATION_INSTANTIATE).map(String::as_str);
                assert_eq!(instantiate, Some("manual"), "{what}");
                let spec = job.as_job().and_then(|j| j.spec.as_ref()).expect("spec");
                assert_eq!(spec.ttl_seconds_after_finished, Some(600), "{what}");
                let pod = spec
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.as_ref());
                let stamped = pod.and_then(|a| a.get(ANNOTATION_SCHEDULED_AT));
                assert_eq!(
                    stamped.map(String::as_str),
                    Some(*at),
                    "{what}: the asked time"
                );
            }
        }
    }

    #[test]
    fn only_a_change_rewrites_the_annotation() {
        let waiting = Manual {
            request: LATER.into(),
            jobs: Vec::new(),
            remaining: Some(LATER.into()),
            next: Some(t(LATER)),
        };
        assert!(!waiting.rewrites());
        let ran = Manual {
            remaining: None,
            ..waiting.clone()
        };
        assert!(ran.rewrites());
    }
}
