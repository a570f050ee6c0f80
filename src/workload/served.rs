//! How the API server serves a workload kind, if at all: its resource (plural, group, version)
//! and scope, from discovery (`GET /apis/{group}/{version}`). A kind whose CRD is not installed
//! is served by nothing, which is an answer, not an error.

use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

use super::WorkloadType;

/// A workload kind as the API server serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Its resource (group, version, plural).
    pub resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// How `type_` is served; `None` when the API server serves no such kind.
pub async fn discover(
    client: &kube::Client,
    type_: &WorkloadType,
) -> Result<Option<Served>, kube::Error> {
    let gvk = GroupVersionKind::gvk(type_.group(), type_.version(), &type_.kind);
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((resource, capabilities)) => Ok(Some(Served {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        })),
        Err(e) if not_served(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether a discovery error says the group, version or kind does not exist.
pub fn not_served(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(s) => s.code == 404,
        kube::Error::Discovery(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::api_script::{Expect, mock_client};
    use http::StatusCode;
    use serde_json::json;

    fn type_(api_version: &str, kind: &str) -> WorkloadType {
        WorkloadType {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    #[tokio::test]
    async fn a_kind_is_served_namespaced_or_not_or_not_at_all() {
        let (client, script) = mock_client();
        let list = json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "ray.io/v1",
            "resources": [
                {"name": "rayjobs", "singularName": "rayjob", "namespaced": true, "kind": "RayJob", "verbs": ["create", "get"]},
                {"name": "rayjobs/status", "singularName": "", "namespaced": true, "kind": "RayJob", "verbs": ["get"]},
                {"name": "raynodes", "singularName": "raynode", "namespaced": false, "kind": "RayNode", "verbs": ["get"]}
            ]
        });
        let server = script.run(vec![
            Expect::get("/apis/ray.io/v1").reply(StatusCode::OK, list.clone()),
            Expect::get("/apis/ray.io/v1").reply(StatusCode::OK, list.clone()),
            Expect::get("/apis/ray.io/v1").reply(StatusCode::OK, list),
            Expect::get("/apis/absent.example.com/v1").fails(StatusCode::NOT_FOUND, "NotFound"),
            Expect::get("/apis/ray.io/v1")
                .fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        ]);
        let ray = discover(&client, &type_("ray.io/v1", "RayJob"))
            .await
            .expect("an answer")
            .expect("served");
        assert_eq!(
            (ray.resource.plural.as_str(), ray.namespaced),
            ("rayjobs", true)
        );
        let node = discover(&client, &type_("ray.io/v1", "RayNode")).await;
        assert_eq!(node.expect("an answer").map(|s| s.namespaced), Some(false));
        let missing = discover(&client, &type_("ray.io/v1", "RayThing")).await;
        assert_eq!(
            missing.expect("an answer"),
            None,
            "a group without the kind"
        );
        let absent = discover(&client, &type_("absent.example.com/v1", "Gadget")).await;
        assert_eq!(absent.expect("an answer"), None, "no such group");
        let failed = discover(&client, &type_("ray.io/v1", "RayJob")).await;
        assert!(failed.is_err(), "{failed:?}");
        server.await.expect("requests as scripted");
    }
}
