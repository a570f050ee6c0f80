//! Step 1: which Jobs are running. Listed Jobs that finished or vanished leave `status.active`
//! (upstream A3, A5); owned running Jobs that are not listed join it (manual runs and Jobs whose
//! status write was lost), and a Job that kronjob did not create gets an `UnexpectedJob`
//! warning (upstream A2).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;

use super::{Action, event, events};
use crate::workload::Workload;
use crate::workload::{self as jobs};

/// The running Jobs and the Events about the list's changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    /// The new `status.active`.
    pub active: Vec<ObjectReference>,
    /// `MissingJob`, `SawCompletedJob` and `UnexpectedJob` events.
    pub events: Vec<Action>,
}

/// Reconcile `listed` (the current `status.active`) with the `owned` Jobs.
pub fn reconcile(listed: &[ObjectReference], owned: &[&Workload]) -> Running {
    let by_uid = |uid: &Option<String>| {
        owned
            .iter()
            .copied()
            .find(|j| uid.is_some() && j.metadata.uid == *uid)
    };
    let mut active = Vec::new();
    let mut out = Vec::new();
    for r in listed {
        let name = r.name.clone().unwrap_or_default();
        match by_uid(&r.uid) {
            None => out.push(event(
                EventType::Normal,
                events::MISSING_JOB,
                format!("Active job went missing: {name}"),
            )),
            Some(job) => match job.outcome() {
                Some(how) => out.push(event(
                    EventType::Normal,
                    events::SAW_COMPLETED_JOB,
                    format!("Saw completed job: {name}, condition: {how:?}"),
                )),
                None => active.push(job.reference()),
            },
        }
    }
    for job in owned {
        let listed = active
            .iter()
            .any(|r: &ObjectReference| r.uid.is_some() && r.uid == job.metadata.uid);
        if listed || job.outcome().is_some() {
            continue;
        }
        if !jobs::created_by_kronjob(&job.metadata) {
            out.push(event(
                EventType::Warning,
                events::UNEXPECTED_JOB,
                format!(
                    "Saw a job that the controller did not create or forgot: {}",
                    job.metadata.name.as_deref().unwrap_or_default()
                ),
            ));
        }
        active.push(job.reference());
    }
    Running {
        active,
        events: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::{JobFixture, job};
    use crate::workload::Workload;

    fn reasons(r: &Running) -> Vec<&'static str> {
        r.events
            .iter()
            .filter_map(|a| match a {
                Action::Event { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect()
    }

    fn names(r: &Running) -> Vec<String> {
        r.active.iter().filter_map(|a| a.name.clone()).collect()
    }

    /// (name, listed, owned, active afterwards, event reasons).
    type Case<'a> = (
        &'a str,
        Vec<&'a Workload>,
        Vec<&'a Workload>,
        Vec<&'a str>,
        Vec<&'a str>,
    );

    #[test]
    fn active_list_table() {
        let running: Workload = job("run").scheduled().into();
        let done: Workload = job("done")
            .scheduled()
            .complete_at("2024-01-01T00:00:00Z")
            .into();
        let failed: Workload = job("failed")
            .scheduled()
            .failed_at("2024-01-01T00:00:00Z")
            .into();
        let manual: Workload = job("manual").manual().into();
        let stranger: Workload = job("stranger").into();
        let gone: Workload = job("gone").scheduled().into();
        let cases: Vec<Case> = vec![
            // (name, listed, owned, want active, want events)
            ("nothing", vec![], vec![], vec![], vec![]),
            (
                "listed and running stays",
                vec![&running],
                vec![&running],
                vec!["run"],
                vec![],
            ),
            (
                "listed and finished leaves",
                vec![&done, &failed],
                vec![&done, &failed],
                vec![],
                vec![events::SAW_COMPLETED_JOB, events::SAW_COMPLETED_JOB],
            ),
            (
                "listed and gone leaves",
                vec![&gone],
                vec![],
                vec![],
                vec![events::MISSING_JOB],
            ),
            (
                "our unlisted running Job joins silently",
                vec![],
                vec![&running],
                vec!["run"],
                vec![],
            ),
            (
                "a manual run joins silently",
                vec![],
                vec![&manual],
                vec!["manual"],
                vec![],
            ),
            (
                "a stranger joins with a warning",
                vec![],
                vec![&stranger],
                vec!["stranger"],
                vec![events::UNEXPECTED_JOB],
            ),
            (
                "unlisted finished Jobs stay out",
                vec![],
                vec![&done],
                vec![],
                vec![],
            ),
        ];
        for (name, listed, owned, want_active, want_events) in cases {
            let listed: Vec<ObjectReference> =
                listed.into_iter().map(Workload::reference).collect();
            let got = reconcile(&listed, &owned);
            assert_eq!(names(&got), want_active, "{name}: active");
            assert_eq!(reasons(&got), want_events, "{name}: events");
        }
    }
}
