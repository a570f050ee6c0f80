//! One reconcile: view (the freshest copy we know) -> observe (owner index) -> plan (pure) ->
//! apply (the slot's run now, the rest queued) -> submit the status if it changed; and what
//! happens after a failed one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::context::Context;
use super::error::Error;
use super::{apply, kind, metrics, observe, plan, template};
use crate::backoff::retry_delay;
use crate::controller::cache::CachedCronJob;

/// Reconcile one CronJob: observe, plan, apply, and write status once if it changed. A
/// CronJob another replica schedules (`--sharding`) is left alone: it is reconciled again
/// when it becomes ours.
pub async fn reconcile(cj: Arc<CachedCronJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.owns(cj.as_ref()) {
        return Ok(Action::await_change());
    }
    let started = Instant::now();
    ctx.metrics.reconciles.inc();
    let result = reconcile_inner(Arc::clone(&cj), &ctx).await;
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    if result.is_ok() {
        ctx.failures.clear(&ObjectRef::from_obj(cj.as_ref()));
    }
    result
}

async fn reconcile_inner(cached: Arc<CachedCronJob>, ctx: &Context) -> Result<Action, Error> {
    if !ctx.index.is_ready() {
        // The Job cache has not listed yet: planning now could miss running Jobs.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    for (field, value) in [
        ("metadata.name", &cached.metadata.name),
        ("metadata.namespace", &cached.metadata.namespace),
    ] {
        value.as_ref().ok_or(Error::MissingField(field))?;
    }
    let key = ObjectRef::from_obj(cached.as_ref());
    let view = ctx.status.view(cached);
    let cj = view.cronjob.to_cronjob().map_err(Error::Decode)?;
    let now = ctx.clock.now();
    // The requeue counts from this reading of the clock (in whole seconds: a quick reconcile
    // requeues as planned): a reconcile held up (a create the API server kept while etcd was
    // away) must not push the next slot back by as long.
    let read = tokio::time::Instant::now();
    if cj.spec.calendars.as_ref().is_some_and(|c| !c.is_empty()) && !ctx.calendars.is_ready() {
        // The Calendar cache has not listed yet: a Calendar it does not hold yet is not missing.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let calendars = ctx.calendars.resolve(&cj);
    let (kind, completion, blocked) = match kind::find(ctx, &cj) {
        kind::Found::Ready { kind, completion } => (Some(kind), completion, None),
        // Its kind's watch has not listed yet: planning now could miss running workloads.
        kind::Found::Pending => return Ok(Action::requeue(Duration::from_secs(1))),
        kind::Found::Blocked(readiness) => (None, None, Some(readiness)),
    };
    let jobs = observe::observe(ctx, &cj, completion.as_ref()).await?;
    let plan =
        template::checked_plan(ctx, &cj, &jobs, view.records, now, &calendars, blocked).await;
    let requeue = plan.requeue_after;
    let timed = plan.manual.as_ref().and_then(|m| m.next);
    let applied = apply::apply(ctx, &cj, kind.as_deref(), plan).await;
    let requeue = if applied.invalid_template {
        // Refused as invalid: nothing to do until the spec changes, but a run asked for at a
        // later time (its own Warning says if its Job is refused too).
        timed.map(|at| plan::requeue_for(at, now))
    } else {
        requeue
    };
    // After the failure policy's suspension the status goes on top of the suspended CronJob:
    // its version is the precondition.
    let patched_status;
    let (base_status, base_version) = match &applied.suspended {
        Some(patched) => {
            patched_status = patched.status();
            (patched_status.as_ref(), &patched.metadata.resource_version)
        }
        None => (cj.status.as_ref(), &cj.metadata.resource_version),
    };
    let unchanged = match base_status {
        Some(status) => status == &applied.status,
        None => applied.status == crate::api::CronJobStatus::default(),
    };
    if !applied.discarded && !unchanged {
        ctx.status.submit(key, base_version.clone(), applied.status);
    }
    if let Some(e) = applied.error {
        return Err(e);
    }
    Ok(match requeue {
        Some(d) => {
            let held = Duration::from_secs(read.elapsed().as_secs());
            crate::controller::requeue(d.saturating_sub(held))
        }
        None => Action::await_change(),
    })
}

/// What to do after a failed reconcile: permanent errors wait for an edit; transient ones
/// back off per object with jitter, but never past the CronJob's next slot (an outage must not
/// cost the slots after it).
pub fn error_policy(cj: Arc<CachedCronJob>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics
        .reconcile_errors
        .get_or_create(&metrics::ErrorLabels {
            category: error.category(),
        })
        .inc();
    if let Some(skipped) = ctx.log.allow(error.category()) {
        tracing::warn!(cronjob = %cj.name_any(), namespace = cj.namespace().unwrap_or_default(), category = error.category(), error = %crate::telemetry::error_chain(error), skipped, "reconcile failed");
    }
    if error.is_permanent() {
        return Action::await_change();
    }
    let attempt = ctx.failures.record(&ObjectRef::from_obj(cj.as_ref()));
    let now = ctx.clock.now();
    let cj = cj.to_cronjob().ok();
    let slot = cj
        .as_ref()
        .and_then(|cj| plan::scheduling::next_run(cj, now));
    // A run asked for at a later time is as urgent as a slot.
    let timed = cj
        .as_ref()
        .and_then(|cj| {
            cj.metadata
                .annotations
                .as_ref()?
                .get(crate::api::ANNOTATION_TRIGGER)
        })
        .and_then(|value| crate::api::trigger::parse(value, now).next(now));
    let next = match (slot, timed) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let delay = match next {
        Some(next) => retry_delay(attempt).min(plan::requeue_for(next, now)),
        None => retry_delay(attempt),
    };
    Action::requeue(delay)
}
