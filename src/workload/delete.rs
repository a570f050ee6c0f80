//! The one delete kronjob makes of a Job it decided about (a Replace, a history trim, an expired
//! TTL; the TTL controller's Pods too): by name, with the UID it decided about as precondition,
//! so that a new object that took the name meanwhile is never touched.

use std::fmt::Debug;

use kube::Api;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use serde::de::DeserializeOwned;

/// How a guarded delete ended, when the API server did not fail it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Deleted (or its deletion started).
    Deleted,
    /// Not there any more (404): nothing to delete.
    Gone,
    /// The name belongs to another object now (409: the UID precondition failed); not deleted.
    Replaced,
}

/// Delete `name` in `api` with `propagation`, only while its UID is `uid` (without a UID, as
/// for an entry of `status.active` written by hand, whatever holds the name).
pub async fn delete_guarded<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
    propagation: PropagationPolicy,
) -> Result<Deletion, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        propagation_policy: Some(propagation),
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(Deletion::Deleted),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(Deletion::Gone),
        Err(kube::Error::Api(s)) if s.is_conflict() => Ok(Deletion::Replaced),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::api_script::{Expect, mock_client};
    use http::StatusCode;
    use k8s_openapi::api::batch::v1::Job;
    use serde_json::json;

    const PATH: &str = "/apis/batch/v1/namespaces/ns/jobs/j";

    #[tokio::test]
    async fn deletes_by_uid_and_reads_404_and_409_as_nothing_to_delete() {
        let (client, script) = mock_client();
        let server = script.run(vec![
            Expect::delete(PATH).body_includes(json!({
                "propagationPolicy": "Foreground", "preconditions": {"uid": "u1"}
            })),
            Expect::delete(PATH).fails(StatusCode::NOT_FOUND, "NotFound"),
            Expect::delete(PATH).fails(StatusCode::CONFLICT, "Conflict"),
            Expect::delete(PATH).fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
            Expect::delete(PATH).check(|body| {
                assert_eq!(body["propagationPolicy"], "Background");
                assert!(body.get("preconditions").is_none(), "{body}");
            }),
        ]);
        let api: Api<Job> = Api::namespaced(client, "ns");
        let fg = PropagationPolicy::Foreground;
        let results = [
            delete_guarded(&api, "j", Some("u1"), fg.clone()).await.ok(),
            delete_guarded(&api, "j", Some("u1"), fg.clone()).await.ok(),
            delete_guarded(&api, "j", Some("u1"), fg.clone()).await.ok(),
            delete_guarded(&api, "j", Some("u1"), fg).await.ok(),
        ];
        let want = [
            Some(Deletion::Deleted),
            Some(Deletion::Gone),
            Some(Deletion::Replaced),
            None,
        ];
        assert_eq!(results, want);
        let background = delete_guarded(&api, "j", None, PropagationPolicy::Background).await;
        assert_eq!(background.ok(), Some(Deletion::Deleted));
        drop(api);
        server.await.expect("requests as scripted");
    }
}
