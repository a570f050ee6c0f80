//! Controllers: the parts of kronjob that watch the API server and act on it.
//!
//! - [`cache`]: what the controllers cache of CronJobs and Jobs (compact records);
//! - [`cronjob`]: the CronJob reconciler (observe -> pure plan -> apply -> status);
//! - [`owner_index`]: the owner index of Jobs it reads from;
//! - [`calendars`]: the Calendars it reads, and which CronJobs name each;
//! - [`ttl`]: the TTL-after-finished controller for Jobs (and, optionally, Pods);
//! - [`priority`]: creates first, everything that can wait after;
//! - [`events`]: Events published as client-go does (a repeat counted, a new note a new Event);
//! - [`shard`]: which replica handles which CronJob with `--sharding` (rendezvous hashing over
//!   shard buckets), and the watches that select a replica's buckets;
//! - [`shard_labels`]: with `--sharding`, labelling objects that carry no valid shard bucket;
//! - [`slot_records`]: whether a scheduled Job may go, asked by the TTL controller of the
//!   CronJob controller;
//! - [`workloads`]: the workload kinds CronJobs name, and a watch of each in use.

/// `impl kube::Resource` for `$wrapper`, a compact or partial form of the namespaced `$like`:
/// the same kind, group, version and plural, the metadata at `self$field` (e.g. `.metadata`).
macro_rules! resource_like {
    ($wrapper:ty, $like:ty, $($field:tt)+) => {
        impl kube::Resource for $wrapper {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$like as kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$like as kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$like as kube::Resource>::version(dt)
            }
            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$like as kube::Resource>::plural(dt)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self$($field)+
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self$($field)+
            }
        }
    };
}

pub mod cache;
pub mod calendars;
pub mod cronjob;
pub mod events;
pub mod owner_index;
pub mod priority;
pub mod shard;
pub mod shard_labels;
pub mod slot_records;
pub mod ttl;
pub mod workloads;

use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::Reporter;

/// The `reportingController` of every Event kronjob publishes.
pub const REPORTER: &str = "kronjob";

/// Longest single requeue. kube-runtime's delay queue cannot hold much more than two years, and
/// deciding again twice a year costs nothing.
pub const MAX_REQUEUE: Duration = Duration::from_secs(180 * 24 * 3600);

/// Requeue after `delay`, at most [`MAX_REQUEUE`].
pub fn requeue(delay: Duration) -> Action {
    Action::requeue(delay.min(MAX_REQUEUE))
}

/// The Event recorder of a controller; `instance` is this replica's name (the pod name).
pub fn recorder(client: kube::Client, instance: Option<String>) -> events::Recorder {
    events::Recorder::new(
        client,
        Reporter {
            controller: REPORTER.into(),
            instance,
        },
    )
}

/// What every controller of the manager shares: the client, the clock, the objects in scope
/// and this replica's name (on Events).
#[derive(Clone)]
pub struct Shared {
    /// API client.
    pub client: kube::Client,
    /// The one source of "now".
    pub clock: std::sync::Arc<dyn crate::clock::Clock>,
    /// Namespaces and CronJob selector.
    pub scope: Scope,
    /// This replica's name (the pod name), if known.
    pub instance: Option<String>,
    /// Creates first: the priority rule between every controller's requests.
    pub gate: priority::Gate,
    /// Which CronJobs (and their Jobs) this replica handles, with `--sharding`.
    pub shard: shard::ShardView,
    /// Where the controllers' own tasks (a controller's workers) are listed by name.
    pub tasks: crate::task::Tasks,
    /// Whether the status records a scheduled Job's slot: the CronJob controller answers,
    /// the TTL controller asks before deleting.
    pub records: slot_records::SlotRecords,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("clock", &self.clock)
            .field("scope", &self.scope)
            .field("instance", &self.instance)
            .field("shard", &self.shard)
            .finish_non_exhaustive()
    }
}

/// Which CronJobs a controller manages.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Namespaces to watch; empty means all namespaces.
    pub namespaces: Vec<String>,
    /// Label selector on CronJobs (e.g. `team=a`); `None` means every CronJob.
    pub selector: Option<String>,
}

impl Scope {
    /// One API handle per namespace in scope (deduplicated), each with its namespace (empty for
    /// the cluster-wide handle used when no namespace is given).
    pub fn apis<K>(&self, client: &kube::Client) -> Vec<(String, kube::Api<K>)>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        if self.namespaces.is_empty() {
            return vec![(String::new(), kube::Api::all(client.clone()))];
        }
        let mut namespaces = self.namespaces.clone();
        namespaces.sort();
        namespaces.dedup();
        namespaces
            .into_iter()
            .map(|ns| {
                let api = kube::Api::namespaced(client.clone(), &ns);
                (ns, api)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    #[tokio::test]
    async fn scope_apis_are_per_namespace_and_deduplicated() {
        let (svc, _handle) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let client = kube::Client::new(svc, "default");
        let all = Scope::default().apis::<Job>(&client);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0, "");
        assert_eq!(all[0].1.resource_url(), "/apis/batch/v1/jobs");
        let scoped = Scope {
            namespaces: vec!["b".into(), "a".into(), "b".into()],
            selector: None,
        }
        .apis::<Job>(&client);
        let names: Vec<&str> = scoped.iter().map(|(ns, _)| ns.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            scoped[1].1.resource_url(),
            "/apis/batch/v1/namespaces/b/jobs"
        );
    }
}
