//! The act step. The failure policy's suspension comes first: `spec.suspend: true`, and the
//! rest of the plan only once the API server took it. The slot's run is urgent and done here,
//! in order: delete the Jobs it replaces, then create the new one, recording in the status only
//! what the API server accepted; a run that fails leaves the slot due, to be retried.
//! Everything else (Events, history deletes) goes to the [`Outbox`](super::outbox::Outbox),
//! sent once the creates are out.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams, PropagationPolicy};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource};

use super::context::Context;
use super::error::Error;
use super::plan::backfill::{self, Backfill};
use super::plan::failures::Suspension;
use super::plan::manual::Manual;
use super::plan::{Action, Plan, Run, events};
use super::status::observe_generation;
use crate::api::{ANNOTATION_BACKFILL, ANNOTATION_TRIGGER, CronJob, CronJobStatus};
use crate::controller::cache::CachedCronJob;
use crate::controller::workloads::{Resolved, WorkloadApi};
use crate::workload::{self, Deletion, Workload, WorkloadType, refusal_message};

/// What applying a plan produced.
#[derive(Debug)]
pub struct Applied {
    /// The status to write.
    pub status: CronJobStatus,
    /// What stopped the slot's run, if anything (the status is still written).
    pub error: Option<Error>,
    /// The create was refused as invalid (422): the status says so, and nothing is retried
    /// until the spec changes.
    pub invalid_template: bool,
    /// The CronJob as the failure policy's suspension (or the removal of a finished backfill's
    /// request) left it (decoded as the cache decodes): the status is written on top of this
    /// version.
    pub suspended: Option<Arc<CachedCronJob>>,
    /// Nothing was done and `status` must not be written: the suspension was not accepted
    /// (the spec changed since the plan, or the request failed).
    pub discarded: bool,
}

/// Apply `plan` to `cj`, whose workloads are of `kind`: queue what can wait, then run the slot.
/// Without a kind (it cannot be used now) nothing is created: the slot is not due (the plan
/// says why), and manual runs and a backfill wait for it.
pub async fn apply(ctx: &Context, cj: &CronJob, kind: Option<&Resolved>, plan: Plan) -> Applied {
    let Plan {
        run,
        manual,
        suspend,
        actions,
        status,
        dropped,
        backfill,
        ..
    } = plan;
    for why in dropped {
        ctx.metrics.queue_dropped(why).inc();
    }
    for action in &actions {
        if let Action::Event { reason, .. } = action
            && *reason == super::plan::events::SLOT_SKIPPED
        {
            ctx.metrics
                .slots_skipped
                .get_or_create(&super::metrics::SkipLabels {
                    reason: super::metrics::SKIPPED_CALENDAR,
                })
                .inc();
        }
    }
    let on = cj.object_ref(&());
    let mut applied = Applied {
        status,
        error: None,
        invalid_template: false,
        suspended: None,
        discarded: false,
    };
    if let Some(suspension) = suspend {
        match suspend_spec(ctx, cj, &on, &suspension).await {
            Ok(Some(patched)) => {
                observe_generation(&mut applied.status, patched.metadata.generation);
                applied.suspended = Some(patched);
            }
            Ok(None) => {
                applied.discarded = true;
                return applied;
            }
            Err(e) => {
                applied.discarded = true;
                applied.error = Some(e);
                return applied;
            }
        }
    }
    for action in actions {
        match action {
            Action::Event {
                type_,
                reason,
                note,
            } => ctx.outbox.event(&on, type_, reason, note),
            Action::DeleteJob {
                type_, name, uid, ..
            } => match ctx.workloads.resolved(&type_) {
                Some(kind) => ctx.outbox.delete_history(&on, kind, name, uid),
                // A kind no CronJob names any more: its workloads are left to the garbage
                // collector (they go with the CronJob).
                None => {
                    tracing::debug!(%name, kind = %type_.kind, "history of a kind no longer watched; left")
                }
            },
        }
    }
    let Some(kind) = kind else {
        return applied;
    };
    if let Some(run) = run {
        let result = run_slot(ctx, cj, kind, &on, run, &mut applied.status).await;
        match result.as_ref().err().and_then(Error::refused) {
            Some(message) => {
                super::template::refused(ctx, cj, &on, &mut applied.status, &message);
                applied.invalid_template = true;
            }
            None => applied.error = result.err(),
        }
    }
    if let Some(manual) = manual
        && let Err(e) = run_manual(ctx, cj, kind, &on, manual).await
    {
        applied.error.get_or_insert(e);
    }
    if let Some(backfill) = backfill {
        let base = applied.suspended.clone();
        match run_backfill(ctx, cj, kind, &on, backfill, base, &mut applied.status).await {
            Ok(Some(patched)) => applied.suspended = Some(patched),
            Ok(None) => {}
            Err(e) => {
                applied.error.get_or_insert(e);
            }
        }
    }
    applied
}

/// A backfill's step: create its Jobs oldest first, each recorded in the status (and this
/// process's ledger) as soon as the API server has it, stopping at the first that fails; or
/// remove a request that is done (then say so) or invalid, and give the CronJob as that left
/// it (`base`: the version the plan's status goes on, when not `cj`'s), for the status write
/// to go on top of it.
async fn run_backfill(
    ctx: &Context,
    cj: &CronJob,
    kind: &Resolved,
    on: &ObjectReference,
    backfill: Backfill,
    base: Option<Arc<CachedCronJob>>,
    status: &mut CronJobStatus,
) -> Result<Option<Arc<CachedCronJob>>, Error> {
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    let key = ObjectRef::new(name).within(namespace);
    let uid = cj.metadata.uid.as_deref();
    let (request, done) = 'run: {
        match backfill {
            Backfill::Run {
                request,
                from,
                creates,
            } => {
                let api = WorkloadApi::new(ctx.client.clone(), namespace, kind);
                let noun = kind.type_.noun();
                for (slot, job) in creates {
                    let job_name = job.name().to_string();
                    let _expected = ctx.index.expect_create(&kind.type_, namespace, &job_name);
                    match api.create(*job).await {
                        Ok(created) => {
                            ctx.status.backfilled(&key, uid, from, slot);
                            backfill::record_created(status, from, slot, true);
                            ctx.metrics.jobs_created.inc();
                            ctx.index.remember(&created);
                            let note = format!("Created {noun} {job_name} (backfill)");
                            ctx.outbox.event(
                                on,
                                EventType::Normal,
                                events::SUCCESSFUL_CREATE,
                                note,
                            );
                        }
                        Err(kube::Error::Api(s)) if s.is_already_exists() => {
                            let Some(existing) =
                                api.get_opt(&job_name).await.map_err(Error::Kube)?
                            else {
                                // Deleted since: its slot ran (created before a lost status
                                // write); the next reconcile records it.
                                return Ok(None);
                            };
                            if !workload::controlled_by(&existing.metadata, uid.unwrap_or_default())
                            {
                                let note = format!(
                                    "Error creating {noun}: {noun} {job_name} already exists and is not controlled by this CronJob"
                                );
                                ctx.outbox.event(
                                    on,
                                    EventType::Warning,
                                    events::FAILED_CREATE,
                                    note,
                                );
                                return Ok(None);
                            }
                            // Its slot ran (created before a lost status write, or by the schedule).
                            ctx.status.backfilled(&key, uid, from, slot);
                            backfill::record_created(status, from, slot, false);
                            ctx.index.remember(&existing);
                        }
                        Err(e) => {
                            let refused = workload::invalid(&e).map(refusal_message);
                            let why = refused.clone().unwrap_or_else(|| e.to_string());
                            let note =
                                format!("Error creating {noun} {job_name} (backfill): {why}");
                            ctx.outbox
                                .event(on, EventType::Warning, events::FAILED_CREATE, note);
                            if refused.is_none() {
                                return Err(Error::Kube(e));
                            }
                            // The template makes no valid Job: retrying cannot help; the request
                            // goes (a new one after fixing the spec runs what is left).
                            break 'run (request, None);
                        }
                    }
                }
                return Ok(None);
            }
            Backfill::Done { request, note } => (request, Some(note)),
            Backfill::Invalid { request, warning } => {
                if let Action::Event {
                    type_,
                    reason,
                    note,
                } = warning
                {
                    ctx.outbox.event(on, type_, reason, note);
                }
                (request, None)
            }
        }
    };
    let cronjobs: Api<CachedCronJob> = Api::namespaced(ctx.client.clone(), namespace);
    let patch = rewrite_annotation(ANNOTATION_BACKFILL, &request, None);
    match cronjobs.patch(name, &PatchParams::default(), &patch).await {
        Ok(patched) => {
            status.backfill = None;
            if let Some(note) = done {
                ctx.outbox
                    .event(on, EventType::Normal, backfill::BACKFILL_DONE, note);
            }
            // The status (the slots it ran) goes on this version, not on a stale one.
            let patched = Arc::new(patched);
            let before = match &base {
                Some(base) => base.metadata.resource_version.clone(),
                None => cj.metadata.resource_version.clone(),
            };
            ctx.status.superseded(&key, before, Arc::clone(&patched));
            Ok(Some(patched))
        }
        // The request changed (a new one, handled by the next reconcile) or went away.
        Err(kube::Error::Api(s)) if s.is_invalid() || s.is_not_found() => Ok(None),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// The failure policy's suspension: `spec.suspend: true` as a JSON patch that applies only to
/// the generation planned from (a spec changed since, a resume say, makes the API server refuse
/// it: `None`, and the changed spec is planned again when its change is seen). On success the
/// CronJob as patched, a Warning Event and the counter.
async fn suspend_spec(
    ctx: &Context,
    cj: &CronJob,
    on: &ObjectReference,
    suspension: &Suspension,
) -> Result<Option<Arc<CachedCronJob>>, Error> {
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    // The answer decodes as the cache decodes: it stands in for the cached CronJob until the
    // watch shows the patch.
    let api: Api<CachedCronJob> = Api::namespaced(ctx.client.clone(), namespace);
    match api
        .patch(
            name,
            &PatchParams::default(),
            &suspend_patch(cj.metadata.generation),
        )
        .await
    {
        Ok(patched) => {
            let patched = Arc::new(patched);
            let key = ObjectRef::new(name).within(namespace);
            let before = cj.metadata.resource_version.clone();
            ctx.status.superseded(&key, before, Arc::clone(&patched));
            ctx.metrics.suspended_after_failures.inc();
            let note = suspension.message();
            let reason = events::SUSPENDED_AFTER_FAILURES;
            ctx.outbox.event(on, EventType::Warning, reason, note);
            Ok(Some(patched))
        }
        // The spec changed since the plan (its watch event brings a new reconcile), or the
        // CronJob is gone. No retry of our own: a refusal that lasted would make it a loop.
        Err(kube::Error::Api(s)) if s.is_invalid() || s.is_not_found() => Ok(None),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// A JSON patch setting `spec.suspend: true` only while the spec is at `generation`.
fn suspend_patch(generation: Option<i64>) -> Patch<()> {
    use json_patch::{AddOperation, PatchOperation, TestOperation, jsonptr::PointerBuf};
    let mut ops = Vec::new();
    if let Some(generation) = generation {
        ops.push(PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["metadata", "generation"]),
            value: generation.into(),
        }));
    }
    ops.push(PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(["spec", "suspend"]),
        value: true.into(),
    }));
    Patch::Json(json_patch::Patch(ops))
}

/// The slot's run, as urgent requests.
async fn run_slot(
    ctx: &Context,
    cj: &CronJob,
    kind: &Resolved,
    on: &ObjectReference,
    run: Run,
    status: &mut CronJobStatus,
) -> Result<(), Error> {
    let _urgent = ctx.gate.urgent();
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    for running in &run.replace {
        replace(ctx, namespace, on, running).await?;
        let active = status
            .active
            .iter()
            .filter(|a| a.uid != running.uid)
            .cloned()
            .collect();
        status.set_active(active);
    }
    let api = WorkloadApi::new(ctx.client.clone(), namespace, kind);
    create(ctx, &api, cj, &kind.type_, on, run, status).await
}

/// Delete a running workload for Replace (background propagation, its UID as precondition).
async fn replace(
    ctx: &Context,
    namespace: &str,
    on: &ObjectReference,
    running: &ObjectReference,
) -> Result<(), Error> {
    let name = running.name.clone().unwrap_or_default();
    let uid = running.uid.as_deref();
    let type_ = WorkloadType {
        api_version: running.api_version.clone().unwrap_or_default(),
        kind: running.kind.clone().unwrap_or_default(),
    };
    let Some(kind) = ctx.workloads.resolved(&type_) else {
        // A kind no CronJob names any more, or one that is gone: nothing the manager can
        // delete; the run goes on beside it.
        tracing::info!(%name, kind = %type_.kind, "Replace: a running workload of a kind not watched; left");
        return Ok(());
    };
    let noun = type_.noun();
    let api = WorkloadApi::new(ctx.client.clone(), namespace, &kind);
    match api.delete(&name, uid, PropagationPolicy::Background).await {
        // Gone, or the name now belongs to another Job: the listed one no longer runs.
        Ok(Deletion::Gone | Deletion::Replaced) => Ok(()),
        Ok(Deletion::Deleted) => {
            ctx.metrics.deleted(super::metrics::DELETED_REPLACE).inc();
            ctx.index.forget(&type_, namespace, &name);
            ctx.outbox.event(
                on,
                EventType::Normal,
                events::SUCCESSFUL_DELETE,
                format!("Deleted {noun} {name}"),
            );
            Ok(())
        }
        Err(e) => {
            ctx.outbox.event(
                on,
                EventType::Warning,
                events::FAILED_DELETE,
                format!("Deleted {noun}: {e}"),
            );
            Err(Error::Kube(e))
        }
    }
}

/// Create the slot's Job; on success (or finding our own Job of that name, created before a
/// lost status write) record the slot and the Job.
async fn create(
    ctx: &Context,
    api: &WorkloadApi,
    cj: &CronJob,
    type_: &WorkloadType,
    on: &ObjectReference,
    run: Run,
    status: &mut CronJobStatus,
) -> Result<(), Error> {
    let name = run.job.name().to_string();
    let noun = type_.noun();
    let slot = run.slot;
    let queued = run.queued;
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    let key = ObjectRef::new(cj.metadata.name.as_deref().unwrap_or_default()).within(namespace);
    let record = |status: &mut CronJobStatus, job: &Workload| {
        // Before anything can go wrong with the status write: the slot ran.
        ctx.status.ran(&key, cj.metadata.uid.as_deref(), slot);
        if queued {
            ctx.status.dequeued(&key, cj.metadata.uid.as_deref(), slot);
            let rest = status.queued.iter().filter(|q| q.0 != slot).cloned();
            status.set_queued(rest.collect());
        }
        if !status
            .active
            .iter()
            .any(|r| r.uid.is_some() && r.uid == job.metadata.uid)
        {
            status.push_active(job.reference());
        }
        // A queued slot is older than the slot that queued it: never backwards.
        if status
            .last_schedule_time
            .as_ref()
            .is_none_or(|t| t.0 < slot)
        {
            status.last_schedule_time = Some(Time(slot));
        }
    };
    // Its watch event may come before the answer: it must not reconcile this CronJob again.
    let _expected = ctx.index.expect_create(type_, namespace, &name);
    match api.create(*run.job).await {
        Ok(created) => {
            // Measured here, when the API server has answered: the Job's creationTimestamp has
            // whole seconds only, too coarse for the histogram's sub-second buckets. A queued
            // slot waited on purpose: its wait is no skew.
            if !queued {
                observe_skew(ctx, slot);
            }
            ctx.metrics.jobs_created.inc();
            record(status, &created);
            ctx.index.remember(&created);
            ctx.outbox.event(
                on,
                EventType::Normal,
                events::SUCCESSFUL_CREATE,
                format!("Created {noun} {name}"),
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            let Some(existing) = api.get_opt(&name).await.map_err(Error::Kube)? else {
                // Created before a lost status write and deleted since: its slot ran.
                return Ok(());
            };
            let uid = cj.metadata.uid.as_deref().unwrap_or_default();
            if workload::controlled_by(&existing.metadata, uid) {
                // A restart (or a lagging cache) between create and status write: adopt, so
                // the slot never runs twice.
                record(status, &existing);
                ctx.index.remember(&existing);
            } else {
                ctx.outbox.event(
                    on,
                    EventType::Warning,
                    events::FAILED_CREATE,
                    format!("Error creating {noun}: {noun} {name} already exists and is not controlled by this CronJob"),
                );
            }
            Ok(())
        }
        Err(e) => {
            // A refusal as invalid is reported once, as InvalidJobTemplate, by the caller.
            if !crate::client::namespace_terminating(&e) && workload::invalid(&e).is_none() {
                ctx.outbox.event(
                    on,
                    EventType::Warning,
                    events::FAILED_CREATE,
                    format!("Error creating {noun}: {e}"),
                );
            }
            Err(Error::Kube(e))
        }
    }
}

/// The manual runs whose time has come: create their Jobs (each then joins `status.active` as
/// any running Job the CronJob controls), then rewrite the request without them, unless it
/// changed meanwhile (a newer request, handled by the next reconcile).
async fn run_manual(
    ctx: &Context,
    cj: &CronJob,
    kind: &Resolved,
    on: &ObjectReference,
    manual: Manual,
) -> Result<(), Error> {
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    let api = WorkloadApi::new(ctx.client.clone(), namespace, kind);
    let noun = kind.type_.noun();
    let rewrites = manual.rewrites();
    for job in manual.jobs {
        let name = job.name().to_string();
        // As for a slot's workload: its watch event must not reconcile this CronJob again.
        let _expected = ctx.index.expect_create(&kind.type_, namespace, &name);
        match api.create(job).await {
            Ok(created) => {
                ctx.index.remember(&created);
                let note = format!("Created {noun} {name} (manual run)");
                ctx.outbox
                    .event(on, EventType::Normal, events::SUCCESSFUL_CREATE, note);
            }
            // Created by an earlier reconcile whose removal of the request failed.
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => {
                // The template makes no valid Job: say so and drop the request (retrying
                // cannot help; a new trigger after fixing the spec can).
                let refused = workload::invalid(&e).map(refusal_message);
                let why = refused.clone().unwrap_or_else(|| e.to_string());
                let note = format!("Error creating {noun} {name} (manual run): {why}");
                ctx.outbox
                    .event(on, EventType::Warning, events::FAILED_CREATE, note);
                if refused.is_none() {
                    return Err(Error::Kube(e));
                }
            }
        }
    }
    if !rewrites {
        return Ok(());
    }
    // The answer decodes slim: only whether the request was rewritten matters.
    let cronjobs: Api<CachedCronJob> = Api::namespaced(ctx.client.clone(), namespace);
    let name = cj.metadata.name.as_deref().unwrap_or_default();
    let patch = rewrite_annotation(
        ANNOTATION_TRIGGER,
        &manual.request,
        manual.remaining.as_deref(),
    );
    match cronjobs.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => Ok(()),
        // The request changed (a newer one, handled by the next reconcile) or went away.
        Err(kube::Error::Api(s)) if s.is_invalid() || s.is_not_found() => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// A JSON patch that, only while the annotation `key` still holds `request`, sets it to
/// `remaining` (a trigger's times still to come) or removes it.
fn rewrite_annotation(key: &str, request: &str, remaining: Option<&str>) -> Patch<()> {
    use json_patch::{
        PatchOperation, RemoveOperation, ReplaceOperation, TestOperation, jsonptr::PointerBuf,
    };
    let path = PointerBuf::from_tokens(["metadata", "annotations", key]);
    let then = match remaining {
        Some(value) => PatchOperation::Replace(ReplaceOperation {
            path: path.clone(),
            value: value.into(),
        }),
        None => PatchOperation::Remove(RemoveOperation { path: path.clone() }),
    };
    Patch::Json(json_patch::Patch(vec![
        PatchOperation::Test(TestOperation {
            path,
            value: request.into(),
        }),
        then,
    ]))
}

fn observe_skew(ctx: &Context, slot: Timestamp) {
    let skew = ctx.clock.now().duration_since(slot).as_secs_f64().max(0.0);
    ctx.metrics.job_creation_skew.observe(skew);
}
