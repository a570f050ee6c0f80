//! With `--sharding`, objects that carry no valid shard bucket are labelled with theirs, so
//! that the replica owning the bucket watches them: CronJobs created while the webhook was off,
//! with `generateName` (the webhook sees no name), or before sharding was turned on, and Jobs of
//! kronjob CronJobs created before Jobs carried the label.
//!
//! Every replica watches the strays (metadata only; normally none) and labels those whose
//! bucket it owns, so each is patched once. When the assignment changes, and every few
//! seconds, the strays it still holds are looked at again. A stray CronJob is scheduled once labelled; until then no replica
//! schedules it.

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde_json::json;

use crate::api::shard::{LABEL_SHARD, bucket, label_value, stray_selector};
use crate::api::{CronJob, LABEL_CRONJOB};
use crate::controller::Scope;
use crate::controller::shard::{Assignment, ShardView};

/// The field manager of the label patches.
const FIELD_MANAGER: &str = "kronjob";
/// Label patches in flight at once, per kind and namespace: thousands of strays (an install
/// upgraded to sharding) are labelled in seconds, not one round trip at a time.
const IN_FLIGHT: usize = 16;
/// How often the strays still held are looked at again.
const RESCAN_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Label the stray CronJobs and Jobs in `scope` whose bucket this replica owns, until dropped
/// (without `--sharding`, nothing). Never returns.
pub async fn run(client: Client, scope: Scope, view: ShardView) {
    if !view.is_sharded() {
        return futures::future::pending().await;
    }
    let mut labellers = Vec::new();
    let strays = stray_selector();
    let cronjobs = match &scope.selector {
        Some(own) => format!("{own},{strays}"),
        None => strays.clone(),
    };
    let jobs = format!("{LABEL_CRONJOB},{strays}");
    for (_, metadata) in scope.apis::<PartialObjectMeta<CronJob>>(&client) {
        let labeller = label::<CronJob>(client.clone(), metadata, cronjobs.clone(), view.clone());
        labellers.push(labeller.boxed());
    }
    type Job = k8s_openapi::api::batch::v1::Job;
    for (_, metadata) in scope.apis::<PartialObjectMeta<Job>>(&client) {
        let labeller = label::<Job>(client.clone(), metadata, jobs.clone(), view.clone());
        labellers.push(labeller.boxed());
    }
    futures::future::join_all(labellers).await;
    futures::future::pending().await
}

/// The bucket of a stray: a Job's is its controlling owner's (a CronJob in its namespace), any
/// other object's its own.
pub fn stray_bucket<K: Resource>(object: &PartialObjectMeta<K>) -> u16 {
    let meta = &object.metadata;
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.name.as_str());
    let name = owner.unwrap_or(meta.name.as_deref().unwrap_or_default());
    bucket(namespace, name)
}

/// Watch the strays matching `selector` (their metadata, through `metadata`) and label those
/// this replica owns.
async fn label<K>(
    client: Client,
    metadata: Api<PartialObjectMeta<K>>,
    selector: String,
    mut view: ShardView,
) where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store::<PartialObjectMeta<K>>();
    let strays = watcher(metadata, watcher::Config::default().labels(&selector))
        .backoff(crate::backoff::watch_backoff())
        .reflect(writer)
        .applied_objects()
        .filter_map(|stray| {
            if let Err(e) = &stray {
                tracing::debug!(error = %e, "stray watch failed; retrying");
            }
            futures::future::ready(stray.ok().map(Arc::new))
        });
    // Each stray as it arrives, with the assignment of the moment ...
    let arrivals = {
        let view = view.clone();
        let client = client.clone();
        strays.for_each_concurrent(IN_FLIGHT, move |object| {
            let assignment = view.current();
            let client = client.clone();
            async move {
                if let Some(a) = assignment {
                    patch_if_ours(&client, &a, &object).await;
                }
            }
        })
    };
    // ... and every stray held again when the assignment changes, and every few seconds (a
    // stray that arrived before this replica knew the group, or whose patch failed).
    let rescans = async {
        let mut tick = tokio::time::interval(RESCAN_EVERY);
        loop {
            let next = tokio::select! {
                next = view.changed() => next,
                _ = tick.tick() => match view.current() {
                    Some(current) => current,
                    None => continue,
                },
            };
            futures::stream::iter(reader.state())
                .for_each_concurrent(IN_FLIGHT, |object| {
                    let (client, next) = (&client, &next);
                    async move { patch_if_ours(client, next, &object).await }
                })
                .await;
        }
    };
    futures::future::join(arrivals, rescans).await;
}

/// Label `object` with its bucket if `assignment` gives that bucket to this replica.
async fn patch_if_ours<K>(
    client: &Client,
    assignment: &Assignment,
    object: &Arc<PartialObjectMeta<K>>,
) where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let bucket = stray_bucket(object.as_ref());
    let (Some(name), Some(namespace)) = (
        object.metadata.name.as_deref(),
        object.metadata.namespace.as_deref(),
    ) else {
        return;
    };
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    if !assignment.owns_bucket(bucket) || object.metadata.deletion_timestamp.is_some() {
        return;
    }
    set_bucket(&api, name, bucket).await;
}

/// Label the object `name` of `api` with `bucket` (a merge patch of the label alone); logged,
/// never fails: the strays and the shard tick look again.
pub async fn set_bucket<K>(api: &Api<K>, name: &str, bucket: u16)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let patch = json!({"metadata": {"labels": {LABEL_SHARD: label_value(bucket)}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match api
        .patch_metadata(name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::debug!(name, bucket, kind = %K::kind(&Default::default()), "labelled with its shard")
        }
        // Gone meanwhile: nothing to label.
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => {
            tracing::warn!(name, error = %crate::telemetry::error_chain(&e), "labelling with its shard failed; retried")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    #[test]
    fn a_stray_job_goes_with_its_cronjob_and_anything_else_by_its_own_name() {
        let job: PartialObjectMeta<Job> = PartialObjectMeta {
            metadata: ObjectMeta {
                name: Some("nightly-29000000".into()),
                namespace: Some("ns".into()),
                owner_references: Some(vec![OwnerReference {
                    name: "nightly".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        };
        assert_eq!(stray_bucket(&job), bucket("ns", "nightly"));
        let mut unowned = job.clone();
        unowned.metadata.owner_references = None;
        assert_eq!(stray_bucket(&unowned), bucket("ns", "nightly-29000000"));
    }
}
