//! No privilege escalation through a CronJob: its author must be allowed to create its workload's
//! kind in its namespace themselves. The question the webhook asks the API server's authorizer
//! (a `SubjectAccessReview` for the requesting user, as the `AdmissionRequest` names them), the
//! key its answer is remembered by, and the words of a refusal. Pure.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReviewSpec};
use kube::api::ApiResource;

/// The verb a CronJob's author must be allowed on its workload's kind.
pub const VERB: &str = "create";
/// How long an allowed answer is reused for the same user, kind and namespace.
pub const ALLOWED_TTL: Duration = Duration::from_secs(30);
/// How long a refusal is reused: short, so a grant just made takes effect soon.
pub const DENIED_TTL: Duration = Duration::from_secs(5);

/// The review of whether `user` may create `resource` in `namespace`: the whole user (name,
/// uid, groups, extra), as the API server authenticated the request.
pub fn review_spec(
    user: &UserInfo,
    resource: &ApiResource,
    namespace: &str,
) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        user: user.username.clone(),
        uid: user.uid.clone(),
        groups: user.groups.clone(),
        extra: user.extra.clone(),
        resource_attributes: Some(ResourceAttributes {
            group: Some(resource.group.clone()),
            version: Some(resource.version.clone()),
            resource: Some(resource.plural.clone()),
            verb: Some(VERB.to_string()),
            namespace: Some(namespace.to_string()),
            ..ResourceAttributes::default()
        }),
        non_resource_attributes: None,
    }
}

/// Whether the request names anyone to ask about (the API server always does; a review sent
/// straight to the webhook port may not).
pub fn names_someone(user: &UserInfo) -> bool {
    user.username.as_deref().is_some_and(|u| !u.is_empty())
        || user.groups.as_ref().is_some_and(|g| !g.is_empty())
}

/// What an answer to `spec` is remembered by: a SHA-256 digest of the review (user, uid,
/// groups, extra, kind and namespace).
pub fn key(spec: &SubjectAccessReviewSpec) -> [u8; 32] {
    let json = serde_json::to_vec(spec).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &json);
    let mut key = [0; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

/// How long the answer `allowed` is remembered.
pub fn ttl(allowed: bool) -> Duration {
    if allowed { ALLOWED_TTL } else { DENIED_TTL }
}

/// `User "alice"`, as the API server names the subject of a refusal.
pub fn subject(user: &UserInfo) -> String {
    format!("User {:?}", user.username.as_deref().unwrap_or_default())
}

/// `resource.group`, as RBAC and `--workload-kinds` name a kind.
pub fn resource_name(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

/// The refusal of a user the authorizer does not allow: `User "alice" may not create
/// rayjobs.ray.io in namespace "team-a"`.
pub fn forbidden(user: &UserInfo, resource: &ApiResource, namespace: &str) -> String {
    format!(
        "{} may not {VERB} {} in namespace {namespace:?}",
        subject(user),
        resource_name(resource)
    )
}

/// The refusal when the question could not be asked or answered (`why`): never allowed on
/// doubt.
pub fn unchecked(user: &UserInfo, resource: &ApiResource, namespace: &str, why: &str) -> String {
    format!(
        "could not check that {} may {VERB} {} in namespace {namespace:?} ({why}); retry shortly",
        subject(user),
        resource_name(resource)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rayjobs() -> ApiResource {
        ApiResource {
            group: "ray.io".into(),
            version: "v1".into(),
            api_version: "ray.io/v1".into(),
            kind: "RayJob".into(),
            plural: "rayjobs".into(),
        }
    }

    fn alice() -> UserInfo {
        UserInfo {
            username: Some("alice".into()),
            uid: Some("u-1".into()),
            groups: Some(vec!["team-a".into(), "system:authenticated".into()]),
            extra: Some(
                [(
                    "authentication.kubernetes.io/credential-id".to_string(),
                    vec!["X509SHA256=ab".to_string()],
                )]
                .into(),
            ),
        }
    }

    #[test]
    fn the_review_asks_for_the_whole_user_to_create_the_kind_in_the_namespace() {
        let spec = serde_json::to_value(review_spec(&alice(), &rayjobs(), "team-a")).expect("json");
        assert_eq!(
            spec,
            json!({
                "user": "alice",
                "uid": "u-1",
                "groups": ["team-a", "system:authenticated"],
                "extra": {"authentication.kubernetes.io/credential-id": ["X509SHA256=ab"]},
                "resourceAttributes": {
                    "group": "ray.io", "version": "v1", "resource": "rayjobs",
                    "verb": "create", "namespace": "team-a"
                }
            })
        );
    }

    #[test]
    fn answers_are_remembered_per_user_groups_kind_and_namespace() {
        let base = key(&review_spec(&alice(), &rayjobs(), "team-a"));
        assert_eq!(base, key(&review_spec(&alice(), &rayjobs(), "team-a")));
        let mut other_group = alice();
        other_group.groups = Some(vec!["system:authenticated".into()]);
        let mut other_name = alice();
        other_name.username = Some("bob".into());
        let mut other_extra = alice();
        other_extra.extra = None;
        let mut jobsets = rayjobs();
        jobsets.group = "jobset.x-k8s.io".into();
        jobsets.plural = "jobsets".into();
        for (what, spec) in [
            ("groups", review_spec(&other_group, &rayjobs(), "team-a")),
            ("name", review_spec(&other_name, &rayjobs(), "team-a")),
            ("extra", review_spec(&other_extra, &rayjobs(), "team-a")),
            ("kind", review_spec(&alice(), &jobsets, "team-a")),
            ("namespace", review_spec(&alice(), &rayjobs(), "team-b")),
        ] {
            assert_ne!(key(&spec), base, "{what}");
        }
        assert!(ttl(true) > ttl(false), "a refusal is asked again sooner");
    }

    #[test]
    fn refusals_name_the_user_the_verb_the_kind_and_the_namespace() {
        assert_eq!(
            forbidden(&alice(), &rayjobs(), "team-a"),
            "User \"alice\" may not create rayjobs.ray.io in namespace \"team-a\""
        );
        assert_eq!(
            unchecked(&alice(), &rayjobs(), "team-a", "rate limited"),
            "could not check that User \"alice\" may create rayjobs.ray.io in namespace \"team-a\" (rate limited); retry shortly"
        );
        assert!(names_someone(&alice()));
        assert!(!names_someone(&UserInfo::default()));
        let only_groups = UserInfo {
            groups: Some(vec!["system:masters".into()]),
            ..UserInfo::default()
        };
        assert!(names_someone(&only_groups));
        let empty = UserInfo {
            username: Some(String::new()),
            groups: Some(vec![]),
            ..UserInfo::default()
        };
        assert!(!names_someone(&empty));
    }
}
