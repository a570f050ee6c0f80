//! The reviews on the API server: `TokenReview` (who is this token?) and `SubjectAccessReview`
//! (may this user `get` this non-resource URL?). The manager's ServiceAccount needs `create` on
//! both (the chart and `config/rbac` grant it).

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

/// Asks the API server about tokens and users; the API client in production, a fake in tests.
pub trait Reviewer: Send + Sync {
    /// The user `token` authenticates as; `None` when it does not authenticate.
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, kube::Error>>;
    /// Whether `user` may `get` the non-resource URL `path`.
    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        path: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>>;
}

impl Reviewer for Client {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, kube::Error>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_string()),
                    audiences: None,
                },
                ..TokenReview::default()
            };
            let api: Api<TokenReview> = Api::all(self.clone());
            let answer = api.create(&PostParams::default(), &review).await?;
            Ok(answer
                .status
                .filter(|s| s.authenticated == Some(true))
                .and_then(|s| s.user))
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        path: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: access_spec(user, path),
                ..SubjectAccessReview::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(self.clone());
            let answer = api.create(&PostParams::default(), &review).await?;
            Ok(answer.status.is_some_and(|s| s.allowed))
        })
    }
}

/// The SubjectAccessReview of `get` on `path` by `user` (with its groups, uid and extra).
pub fn access_spec(user: &UserInfo, path: &str) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        user: user.username.clone(),
        uid: user.uid.clone(),
        groups: user.groups.clone(),
        extra: user.extra.clone(),
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some(path.to_string()),
            verb: Some("get".to_string()),
        }),
        resource_attributes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_access_review_carries_the_whole_user() {
        let user = UserInfo {
            username: Some("system:serviceaccount:monitoring:prometheus".into()),
            uid: Some("u-1".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            extra: Some(
                [(
                    "authentication.kubernetes.io/pod-name".to_string(),
                    vec!["p".to_string()],
                )]
                .into(),
            ),
        };
        let spec = serde_json::to_value(access_spec(&user, "/metrics")).expect("json");
        assert_eq!(
            spec,
            serde_json::json!({
                "user": "system:serviceaccount:monitoring:prometheus",
                "uid": "u-1",
                "groups": ["system:serviceaccounts"],
                "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"}
            })
        );
    }
}
