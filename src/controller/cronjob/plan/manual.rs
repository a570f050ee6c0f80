//! Step 4: manual runs. `kubectl kronjob trigger` asks for one by writing the request time into
//! the CronJob's [`ANNOTATION_TRIGGER`]; the controller creates the Job, with the same TTL
//! policy as scheduled runs, then removes the annotation. The Job's name derives from the request, so
//! a request is never run twice, however often it is seen.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::events::EventType;

use super::{Action, PlanConfig, event};
use crate::api::{ANNOTATION_TRIGGER, CronJob};
use crate::job;

/// Event reason of a trigger annotation that is not a time.
pub const INVALID_TRIGGER: &str = "InvalidTrigger";

/// A pending manual run.
#[derive(Debug, Clone, PartialEq)]
pub struct Manual {
    /// The annotation's value: removed (only if unchanged) once the request is done.
    pub request: String,
    /// The Job to create; `None` when it exists already or the request is invalid.
    pub job: Option<Box<Job>>,
}

/// The pending manual run of `cj`, if its trigger annotation is set, and the Warning for an
/// annotation that is not an RFC 3339 time. `owned` are the Jobs `cj` controls. A CronJob
/// being deleted runs nothing.
pub fn requested(
    cj: &CronJob,
    owned: &[&Job],
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
    let pending = |job| Manual {
        request: request.clone(),
        job,
    };
    let Ok(at) = request.parse::<Timestamp>() else {
        let warning = event(
            EventType::Warning,
            INVALID_TRIGGER,
            format!(
                "Annotation {ANNOTATION_TRIGGER} must be an RFC 3339 time, not {request:?}; removed"
            ),
        );
        return (Some(pending(None)), Some(warning));
    };
    if cj.metadata.deletion_timestamp.is_some() {
        return (None, None);
    }
    let Some(cronjob) = cj.metadata.name.as_deref() else {
        return (None, None);
    };
    let name = job::manual_name(cronjob, at);
    if owned
        .iter()
        .any(|j| j.metadata.name.as_deref() == Some(&name))
    {
        return (Some(pending(None)), None);
    }
    let job = job::manual(cj, at, cfg.default_job_ttl);
    (Some(pending(job.map(Box::new))), None)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::ANNOTATION_INSTANTIATE;
    use crate::job::manual_name;
    use crate::testing::fixtures::{CJ, cronjob, job, t};

    /// One case; what it leaves out is absent or false.
    #[derive(Default)]
    struct Case {
        what: &'static str,
        annotation: Option<&'static str>,
        deleting: bool,
        exists: bool,
        creates: Option<bool>,
        warns: bool,
    }

    #[test]
    fn table() {
        let cfg = PlanConfig {
            default_job_ttl: Some(600),
        };
        let at = "2026-11-25T09:40:12Z";
        let name = manual_name(CJ, t(at));
        let existing = job(&name);
        let cases = [
            Case {
                what: "no annotation",
                ..Case::default()
            },
            Case {
                what: "a request",
                annotation: Some(at),
                creates: Some(true),
                ..Case::default()
            },
            Case {
                what: "already created",
                annotation: Some(at),
                exists: true,
                creates: Some(false),
                ..Case::default()
            },
            Case {
                what: "not a time",
                annotation: Some("now"),
                creates: Some(false),
                warns: true,
                ..Case::default()
            },
            Case {
                what: "being deleted",
                annotation: Some(at),
                deleting: true,
                ..Case::default()
            },
        ];
        for case in cases {
            let mut cj = cronjob("*/5 * * * *");
            if let Some(value) = case.annotation {
                cj.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(ANNOTATION_TRIGGER.to_string(), value.to_string());
            }
            if case.deleting {
                cj.metadata.deletion_timestamp = Some(Time(t(at)));
            }
            let owned: Vec<&Job> = if case.exists { vec![&existing] } else { vec![] };
            let (manual, warning) = requested(&cj, &owned, &cfg);
            let what = case.what;
            assert_eq!(
                manual.as_ref().map(|m| m.job.is_some()),
                case.creates,
                "{what}"
            );
            assert_eq!(warning.is_some(), case.warns, "{what}");
            if let Some(m) = &manual {
                assert_eq!(Some(m.request.as_str()), case.annotation, "{what}");
            }
            if let Some(job) = manual.and_then(|m| m.job) {
                assert_eq!(job.metadata.name.as_deref(), Some(name.as_str()));
                let annotations = job.metadata.annotations.unwrap_or_default();
                let instantiate = annotations.get(ANNOTATION_INSTANTIATE).map(String::as_str);
                assert_eq!(instantiate, Some("manual"));
                let ttl = job.spec.and_then(|s| s.ttl_seconds_after_finished);
                assert_eq!(ttl, Some(600), "the manager's default TTL");
            }
        }
    }
}
