//! The Job template's check, as the reconciler runs it: once per generation that schedules
//! Jobs, a dry-run create of a batch/v1 CronJob carrying it ([`crate::workload::dry_run`]), so
//! what batch/v1 refuses is refused; and a real
//! create refused as invalid (the check found nothing, or the webhook is off) recorded the
//! same way. Either refusal plans `Ready=False` reason `InvalidJobTemplate`, one Warning Event,
//! and no Job until the spec changes ([`plan::template`]).
//!
//! A template found valid is remembered ([`Verdicts`]), as the webhook remembers it: CronJobs
//! of the namespace with the same template are not judged again for [`VERDICT_TTL`]. A
//! manager starting on thousands of CronJobs made from one template (a chart, a generator)
//! sends one dry run for them (a few, while the first is answered), not one each before their
//! first status write. Only valid verdicts are reused: a create refused as invalid is still
//! caught and recorded.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::workload::Workload;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;

use super::context::Context;
use super::plan::{self, Action};
use crate::api::{CronJob, CronJobStatus};
use crate::webhook::dry_run::{Expiring, VERDICT_TTL, VERDICTS, template_key};
use crate::workload::{TemplateDryRun, Verdict, WorkloadType, refusal_message};

/// The Job templates found valid, by namespace and template, for [`VERDICT_TTL`] (at most
/// [`VERDICTS`], the least recently used forgotten first).
#[derive(Debug)]
pub struct Verdicts(Mutex<Expiring<()>>);

impl Default for Verdicts {
    fn default() -> Self {
        Self(Mutex::new(Expiring::with_capacity(VERDICTS)))
    }
}

impl Verdicts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Expiring<()>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key`'s template was found valid within [`VERDICT_TTL`].
    fn valid(&self, key: &[u8; 32]) -> bool {
        self.lock().get(key, Instant::now()).is_some()
    }

    fn remember_valid(&self, key: [u8; 32]) {
        self.lock().put(key, (), Instant::now() + VERDICT_TTL);
    }
}

/// The plan, once the template of the CronJob's generation is checked: the first time a
/// generation that schedules Jobs is seen (its status records no check yet), one dry-run create
/// of a batch/v1 CronJob carrying its template. A refusal (422) plans `Ready=False`
/// `InvalidJobTemplate` and no Job; any other answer plans as usual (a create still refused is
/// caught then). `blocked`: what keeps the CronJob from creating workloads whatever its
/// template (its kind cannot be used): planned as it is, and nothing checked.
pub async fn checked_plan(
    ctx: &Context,
    cj: &CronJob,
    jobs: &[Arc<Workload>],
    records: plan::Records,
    now: Timestamp,
    calendars: &plan::scheduling::Calendars,
    blocked: Option<plan::Readiness>,
) -> plan::Plan {
    let recorded = plan::recorded_template_check(cj);
    let blocked = blocked.or_else(|| recorded.invalid().map(plan::scheduling::invalid_template));
    let planned = plan::plan_calendars(
        cj,
        jobs,
        records,
        now,
        &ctx.config,
        blocked.as_ref(),
        calendars,
    );
    let Some(template) = cj.spec.job_template.as_ref() else {
        return planned;
    };
    if !plan::template::needs_check(cj, &planned) {
        return planned;
    }
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    let key = template_key(namespace, &WorkloadType::job(), template);
    if ctx.verdicts.valid(&key) {
        return planned;
    }
    let verdict = ctx.client.dry_run(namespace, template).await;
    ctx.metrics.template_checked(verdict.label());
    if verdict == Verdict::Valid {
        ctx.verdicts.remember_valid(key);
    }
    match verdict {
        Verdict::Invalid(status) => {
            let message = refusal_message(&status);
            tracing::info!(cronjob = %cj.name_any(), namespace = cj.namespace().unwrap_or_default(), %message, "Job template refused");
            plan::plan_calendars(
                cj,
                jobs,
                records,
                now,
                &ctx.config,
                Some(&plan::scheduling::invalid_template(&message)),
                calendars,
            )
        }
        Verdict::Unknown(why) => {
            if let Some(skipped) = ctx.log.allow("template_check") {
                tracing::warn!(cronjob = %cj.name_any(), namespace = cj.namespace().unwrap_or_default(), reason = ?why, skipped, "could not check the Job template; going on");
            }
            planned
        }
        Verdict::Valid => planned,
    }
}

/// The slot's create was refused as invalid with `message`: record the verdict in `status`
/// (planned from `cj`) and queue the Warning, unless the status already said so.
pub fn refused(
    ctx: &Context,
    cj: &CronJob,
    on: &ObjectReference,
    status: &mut CronJobStatus,
    message: &str,
) {
    let now = ctx.clock.now();
    if let Some(Action::Event {
        type_,
        reason,
        note,
    }) = plan::refuse_template(status, cj, message, now)
    {
        ctx.outbox.event(on, type_, reason, note);
    }
}
