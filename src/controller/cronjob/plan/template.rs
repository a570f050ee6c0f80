//! The Job template's check, as the plan sees it. The API server judges the template (a dry
//! run of a batch/v1 CronJob carrying it, [`crate::workload::dry_run`]); its verdict lives in the `Ready`
//! condition: written for a generation, `InvalidJobTemplate` stops scheduling until the spec
//! changes, and `True` means checked, so a restart checks nothing again.

use jiff::Timestamp;

use super::scheduling;
use super::{Action, Plan, schedules, set_ready};
use crate::api::{CronJob, CronJobStatus};
use crate::controller::cronjob::status::{CONDITION_READY, reason};

/// What the status says of the template of the CronJob's current generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateCheck {
    /// Not checked for this generation.
    Unchecked,
    /// Checked: Jobs are created (a check without verdict counts as passed).
    Passed,
    /// The API server refuses the Job the template makes, with this message.
    Invalid(String),
}

impl TemplateCheck {
    /// The refusal's message, if the template is invalid.
    pub fn invalid(&self) -> Option<&str> {
        match self {
            TemplateCheck::Invalid(message) => Some(message),
            _ => None,
        }
    }
}

/// The template check of `cj`'s generation, from its `Ready` condition: written for this
/// generation, `InvalidJobTemplate` means refused and `True` means checked; anything else (an
/// older generation, suspended, invalid schedule) means unchecked.
pub fn recorded_template_check(cj: &CronJob) -> TemplateCheck {
    let ready = cj.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == CONDITION_READY && c.observed_generation == cj.metadata.generation)
    });
    match ready {
        Some(c) if c.reason == reason::INVALID_JOB_TEMPLATE => {
            TemplateCheck::Invalid(c.message.clone())
        }
        Some(c) if c.status == "True" => TemplateCheck::Passed,
        _ => TemplateCheck::Unchecked,
    }
}

/// Whether the template of `cj`'s generation is to be judged before `planned` is applied: no
/// check is recorded for the generation and the plan schedules Jobs.
pub fn needs_check(cj: &CronJob, planned: &Plan) -> bool {
    recorded_template_check(cj) == TemplateCheck::Unchecked && schedules(planned)
}

/// A create of the slot's Job was refused as invalid (422) with `message`: record it as the
/// template check's verdict in `status` (planned from `cj`) and stop scheduling; the Warning
/// Event to publish, unless the status already said so.
pub fn refuse_template(
    status: &mut CronJobStatus,
    cj: &CronJob,
    message: &str,
    now: Timestamp,
) -> Option<Action> {
    let old = cj.status.clone().unwrap_or_default();
    status.next_schedule_time = None;
    set_ready(status, &old, scheduling::invalid_template(message), cj, now)
}
