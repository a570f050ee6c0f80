//! Controllers: the parts of kronjob that watch the API server and act on it.
//!
//! - [`cronjob`]: the CronJob reconciler (observe -> pure plan -> apply -> status);
//! - [`index`]: the owner index of Jobs it reads from;
//! - [`ttl`]: the TTL-after-finished controller for Jobs (and, optionally, Pods);
//! - [`backoff`]: how fast their watches reconnect after an API server outage.

pub mod backoff;
pub mod cronjob;
pub mod index;
pub mod ttl;

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
