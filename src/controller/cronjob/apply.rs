//! The write step: run a [`Plan`]'s actions against the API and fold their outcome into the
//! status to write.

use k8s_openapi::api::batch::v1::Job;
use kube::api::{DeleteParams, PostParams, Preconditions, PropagationPolicy};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};

use super::plan::{Action, DeleteReason, Plan, events};
use super::{Context, Error};
use crate::api::{CronJob, CronJobStatus};
use crate::controller::jobs::{controller_uid, job_ref};

/// What applying a plan produced.
#[derive(Debug)]
pub struct Applied {
    /// The status to write.
    pub status: CronJobStatus,
    /// The first error that stopped the plan, if any (the status is still written).
    pub error: Option<Error>,
}

/// Publish an Event on `cj`; failures are logged, never fatal.
pub async fn publish(ctx: &Context, cj: &CronJob, type_: EventType, reason: &str, note: String) {
    let ev = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &cj.object_ref(&())).await {
        tracing::warn!(error = %e, reason, "failed to publish event");
    }
}

fn is_namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

/// Run `plan` in order. History deletes that fail give `FailedDelete` and do not stop the
/// plan; a failed Replace delete stops before the create; a failed create gives
/// `FailedCreate`.
pub async fn apply(ctx: &Context, cj: &CronJob, plan: Plan) -> Applied {
    let mut status = plan.status;
    let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    let previous_schedule = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.clone());
    for action in plan.actions {
        match action {
            Action::Event {
                type_,
                reason,
                note,
            } => publish(ctx, cj, type_, reason, note).await,
            Action::DeleteJob { name, uid, reason } => {
                let dp = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    preconditions: uid.map(|uid| Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match jobs.delete(&name, &dp).await {
                    Ok(_) => {
                        publish(
                            ctx,
                            cj,
                            EventType::Normal,
                            events::SUCCESSFUL_DELETE,
                            format!("Deleted job {name}"),
                        )
                        .await;
                    }
                    Err(kube::Error::Api(s)) if s.is_not_found() => {}
                    Err(e) => {
                        publish(
                            ctx,
                            cj,
                            EventType::Warning,
                            events::FAILED_DELETE,
                            format!("Deleted job: {e}"),
                        )
                        .await;
                        if reason == DeleteReason::Replace {
                            return Applied {
                                status,
                                error: Some(Error::Kube(e)),
                            };
                        }
                    }
                }
            }
            Action::CreateJob(job) => {
                let name = job.metadata.name.clone().unwrap_or_default();
                match jobs.create(&PostParams::default(), &job).await {
                    Ok(created) => {
                        publish(
                            ctx,
                            cj,
                            EventType::Normal,
                            events::SUCCESSFUL_CREATE,
                            format!("Created job {name}"),
                        )
                        .await;
                        if let Some(scheduled) = plan.scheduled {
                            // Measured here, when the API server has answered: the Job's
                            // creationTimestamp has whole seconds only, too coarse for the
                            // histogram's sub-second buckets.
                            let skew = ctx
                                .clock
                                .now()
                                .duration_since(scheduled)
                                .as_secs_f64()
                                .max(0.0);
                            ctx.metrics.job_creation_skew.observe(skew);
                        }
                        status.push_active(job_ref(&created));
                    }
                    Err(kube::Error::Api(s)) if s.is_already_exists() => {
                        let existing = match jobs.get(&name).await {
                            Ok(j) => j,
                            Err(e) => {
                                return Applied {
                                    status,
                                    error: Some(Error::Kube(e)),
                                };
                            }
                        };
                        let ours = controller_uid(&existing).is_some()
                            && controller_uid(&existing) == cj.metadata.uid.as_deref();
                        if ours {
                            // A restart (or a lagging cache) between create and status write:
                            // adopt, so the slot never runs twice.
                            if !status
                                .active
                                .iter()
                                .any(|r| r.uid.is_some() && r.uid == existing.metadata.uid)
                            {
                                status.push_active(job_ref(&existing));
                            }
                        } else {
                            status.last_schedule_time = previous_schedule.clone();
                            publish(ctx, cj, EventType::Warning, events::FAILED_CREATE, format!("Error creating job: job {name} already exists and is not controlled by this CronJob")).await;
                        }
                    }
                    Err(e) => {
                        status.last_schedule_time = previous_schedule.clone();
                        if !is_namespace_terminating(&e) {
                            publish(
                                ctx,
                                cj,
                                EventType::Warning,
                                events::FAILED_CREATE,
                                format!("Error creating job: {e}"),
                            )
                            .await;
                        }
                        return Applied {
                            status,
                            error: Some(Error::Kube(e)),
                        };
                    }
                }
            }
        }
    }
    Applied {
        status,
        error: None,
    }
}
