//! Carrying out a plan against the API server, one request per step, in order. The first
//! failure stops the CronJob's plan and says what state it is left in; since every state is
//! recorded in the kronjob CronJob's annotations, running the command again finishes it.
//!
//! Status times are carried as the later of what was read, so no step moves a status
//! backwards, and a write whose times are already there is not sent.

use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::plan::{
    ANNOTATION_MIGRATION, ANNOTATION_ORIGINAL_SUSPEND, Action, Plan, State, Step, Times,
};
use crate::api::CronJob;
use crate::cli::cluster::{api_message, is_not_found};

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}

/// The built-in CronJob, read and written as JSON.
pub fn batch_v1_cronjobs() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::batch::v1::CronJob>(&())
}

/// Carry out `plan`; on failure, the message names the step, the server's reason and what
/// to do next.
pub async fn apply(client: &Client, plan: &Plan) -> Result<(), String> {
    let mut run = Run::new(client, plan);
    for (index, step) in plan.steps.iter().enumerate() {
        if let Err(e) = run.step(*step).await {
            if is_conflict(&e) && matches!(step, Step::SuspendOriginal | Step::DeleteOriginal) {
                return Err(run.changed_meanwhile().await);
            }
            return Err(format!(
                "{} failed: {}; {}",
                describe(plan, *step),
                api_message(&e),
                hint(plan, index)
            ));
        }
    }
    Ok(())
}

/// What a step does, for error messages.
fn describe(plan: &Plan, step: Step) -> String {
    let (original, migrated) = (plan.original_ref(), plan.migrated_ref());
    match step {
        Step::Create => format!("create {migrated}"),
        Step::WriteMigratedStatus => format!("write the status of {migrated}"),
        Step::SuspendOriginal => format!("suspend {original}"),
        Step::Recheck => format!("read {original} again"),
        Step::DeleteOriginal => format!("delete {original}"),
        Step::Complete { .. } => format!("complete the migration of {migrated}"),
        Step::SuspendMigrated { .. } => format!("suspend {migrated}"),
        Step::RecreateOriginal => format!("create {original}"),
        Step::WriteOriginalStatus => format!("write the status of {original}"),
        Step::RestoreOriginal { suspend } => format!("set spec.suspend {suspend} on {original}"),
        Step::DeleteMigrated => format!("delete {migrated}"),
    }
}

/// What a failure at step `index` leaves behind and how to go on.
fn hint(plan: &Plan, index: usize) -> String {
    let again = if plan.action == Action::Revert {
        "run the revert again to finish it"
    } else {
        "run the migration again to finish it"
    };
    let creates_or_suspends = matches!(plan.action, Action::Migrate | Action::Revert);
    let ends_suspended = plan.action == Action::Revert
        || plan
            .steps
            .iter()
            .any(|s| matches!(s, Step::Complete { .. }));
    if index == 0 && creates_or_suspends {
        "nothing was changed".into()
    } else if ends_suspended {
        format!("{} stays suspended; {again}", plan.migrated_ref())
    } else {
        again.into()
    }
}

/// A plan being carried out: the APIs and the status times known so far.
struct Run<'a> {
    plan: &'a Plan,
    originals: Api<DynamicObject>,
    migrated: Api<CronJob>,
    /// The later of every time read so far: what both CronJobs should end up with.
    carried: Times,
    /// What the batch/v1 CronJob's status holds.
    original_has: Times,
    /// What the kronjob CronJob's status holds.
    migrated_has: Times,
    original_uid: Option<String>,
    /// The batch/v1 CronJob's resourceVersion last read or written by this run.
    original_version: Option<String>,
    migrated_uid: Option<String>,
    /// The kronjob CronJob was created by this run.
    created: bool,
}

impl<'a> Run<'a> {
    fn new(client: &Client, plan: &'a Plan) -> Self {
        Run {
            plan,
            originals: Api::namespaced_with(client.clone(), &plan.namespace, &batch_v1_cronjobs()),
            migrated: Api::namespaced(client.clone(), &plan.namespace),
            carried: plan.original_times.max(plan.migrated_times),
            original_has: plan.original_times,
            migrated_has: plan.migrated_times,
            original_uid: plan.original_uid.clone(),
            original_version: plan.original_resource_version.clone(),
            migrated_uid: plan.migrated_uid.clone(),
            created: false,
        }
    }

    /// The batch/v1 CronJob changed after it was read (a precondition failed): nothing of
    /// that change may be lost. A kronjob CronJob this run created from the earlier spec (still
    /// suspended: it never ran) is removed, so that running the command again starts from the
    /// new spec.
    async fn changed_meanwhile(&mut self) -> String {
        let original = self.plan.original_ref();
        if !self.created {
            return format!(
                "{original} was changed after it was read and was left as it is; run the command again to plan with the change"
            );
        }
        let migrated = self.plan.migrated_ref();
        match self.delete_migrated().await {
            Ok(()) => format!(
                "{original} was changed after it was read: it was left as it is and {migrated}, created from the earlier spec, was removed (it never ran); run the migration again to carry the change"
            ),
            Err(e) => format!(
                "{original} was changed after it was read and was left as it is; {migrated} was created from the earlier spec and stays suspended (removing it failed: {}): delete it and run the migration again",
                api_message(&e)
            ),
        }
    }

    async fn step(&mut self, step: Step) -> Result<(), kube::Error> {
        match step {
            Step::Create => self.create().await,
            Step::WriteMigratedStatus => self.write_migrated_status().await,
            Step::SuspendOriginal => self.suspend_original().await,
            Step::Recheck => self.recheck().await,
            Step::DeleteOriginal => self.delete_original().await,
            Step::Complete { suspend } => self.complete(suspend).await,
            Step::SuspendMigrated { record } => self.suspend_migrated(record).await,
            Step::RecreateOriginal => self.recreate().await,
            Step::WriteOriginalStatus => self.write_original_status().await,
            Step::RestoreOriginal { suspend } => self.set_original_suspend(suspend).await,
            Step::DeleteMigrated => self.delete_migrated().await,
        }
    }

    fn name(&self) -> &str {
        &self.plan.name
    }

    async fn create(&mut self) -> Result<(), kube::Error> {
        let Some(target) = &self.plan.target else {
            return Ok(());
        };
        let created = self.migrated.create(&PostParams::default(), target).await?;
        self.created = true;
        self.migrated_uid = created.metadata.uid.clone();
        self.migrated_has = Times::of_cronjob(&created);
        Ok(())
    }

    async fn write_migrated_status(&mut self) -> Result<(), kube::Error> {
        let (carried, has) = (self.carried, self.migrated_has);
        if let Some((written, newer)) =
            write_newer(&self.migrated, self.name(), carried, has).await?
        {
            self.migrated_has = Times::of_cronjob(&written).max(newer);
        }
        Ok(())
    }

    /// Suspend the batch/v1 CronJob, only if it is still the version the plan was made from
    /// (a merge patch carrying `metadata.resourceVersion` fails with 409 otherwise): an edit
    /// made meanwhile would be missing from the kronjob CronJob.
    async fn suspend_original(&mut self) -> Result<(), kube::Error> {
        let mut patch = json!({"spec": {"suspend": true}});
        if let Some(version) = &self.original_version {
            patch["metadata"] = json!({"resourceVersion": version});
        }
        let patched = self
            .originals
            .patch(self.name(), &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        self.saw_original(&patched);
        Ok(())
    }

    async fn set_original_suspend(&mut self, suspend: bool) -> Result<(), kube::Error> {
        let patch = Patch::Merge(json!({"spec": {"suspend": suspend}}));
        let patched = self
            .originals
            .patch(self.name(), &PatchParams::default(), &patch)
            .await?;
        self.saw_original(&patched);
        Ok(())
    }

    fn saw_original(&mut self, original: &DynamicObject) {
        self.original_version = original.metadata.resource_version.clone();
        let json = serde_json::to_value(original).unwrap_or(Value::Null);
        self.original_has = Times::of_json(&json);
        self.carried = self.carried.max(self.original_has);
    }

    /// Read the original again now that it is suspended: a run it started just before is in
    /// its status now, and goes to the kronjob CronJob.
    async fn recheck(&mut self) -> Result<(), kube::Error> {
        let original = self.originals.get(self.name()).await?;
        self.saw_original(&original);
        self.write_migrated_status().await
    }

    async fn delete_original(&mut self) -> Result<(), kube::Error> {
        let mut params = orphaning(self.original_uid.clone());
        if let Some(preconditions) = params.preconditions.as_mut() {
            preconditions.resource_version = self.original_version.clone();
        }
        match self.originals.delete(self.name(), &params).await {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other.map(drop),
        }
    }

    async fn complete(&mut self, suspend: bool) -> Result<(), kube::Error> {
        let patch = json!({
            "metadata": {"annotations": {ANNOTATION_MIGRATION: State::Complete.as_str()}},
            "spec": {"suspend": suspend},
        });
        let name = self.plan.name.as_str();
        self.migrated
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    async fn suspend_migrated(&mut self, record: Option<bool>) -> Result<(), kube::Error> {
        let mut annotations = json!({ANNOTATION_MIGRATION: State::Reverting.as_str()});
        if let Some(suspend) = record {
            annotations[ANNOTATION_ORIGINAL_SUSPEND] = json!(suspend.to_string());
        }
        let patch = json!({"metadata": {"annotations": annotations}, "spec": {"suspend": true}});
        let name = self.plan.name.as_str();
        let patched = self
            .migrated
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        self.migrated_has = Times::of_cronjob(&patched);
        self.carried = self.carried.max(self.migrated_has);
        Ok(())
    }

    async fn recreate(&mut self) -> Result<(), kube::Error> {
        let Some(object) = &self.plan.recreate else {
            return Ok(());
        };
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
        let created = self
            .originals
            .create(&PostParams::default(), &object)
            .await?;
        self.original_uid = created.metadata.uid.clone();
        self.saw_original(&created);
        Ok(())
    }

    async fn write_original_status(&mut self) -> Result<(), kube::Error> {
        let (carried, has) = (self.carried, self.original_has);
        if let Some((written, newer)) =
            write_newer(&self.originals, self.name(), carried, has).await?
        {
            self.original_version = written.metadata.resource_version.clone();
            self.original_has = has.max(newer);
        }
        Ok(())
    }

    async fn delete_migrated(&mut self) -> Result<(), kube::Error> {
        let params = orphaning(self.migrated_uid.clone());
        match self.migrated.delete(self.name(), &params).await {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other.map(drop),
        }
    }
}

/// Write into the status of `name` the times of `carried` that `has` lacks (a merge patch of
/// the status subresource): the object written and those times; `None`, and nothing sent,
/// when it has them all. Both CronJobs' statuses are written so.
async fn write_newer<K>(
    api: &Api<K>,
    name: &str,
    carried: Times,
    has: Times,
) -> Result<Option<(K, Times)>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let newer = carried.newer_than(has);
    if newer.is_empty() {
        return Ok(None);
    }
    let patch = Patch::Merge(newer.status_patch());
    let written = api
        .patch_status(name, &PatchParams::default(), &patch)
        .await?;
    Ok(Some((written, newer)))
}

/// Delete leaving the Jobs running (owned by nothing), and only the object that was read.
fn orphaning(uid: Option<String>) -> DeleteParams {
    DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::orphan()
    }
}
